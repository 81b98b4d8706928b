//! External meetings' records on both databases: a bot that cannot join ends its conversation with a
//! reason (ENDED, `end_reason`, `call_ended` with `{"reason": …}`) exactly once; a restart ends the
//! meetings its bots were in or on their way to (`server_restart`), joined or not.

use confab_store::conversations::{self, STATUS_IN_PROGRESS, TYPE_EXTERNAL_MEETING};
use confab_store::workers;
use serde_json::json;

use crate::fleet_records::{conversation, outbox, outbox_bodies};
use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(a_bot_that_cannot_join_ends_its_conversation_once, a_restart_ends_every_unfinished_meeting);

async fn meeting(app: &TestApp) -> String {
    let id = conversation(app, &["participant_left", "call_ended"]).await;
    sqlx::query("UPDATE conversations SET conversation_type = $1 WHERE id = $2")
        .bind(TYPE_EXTERNAL_MEETING)
        .bind(&id)
        .execute(&app.db.pool)
        .await
        .unwrap();
    id
}

async fn a_bot_that_cannot_join_ends_its_conversation_once(app: TestApp) {
    let id = meeting(&app).await;
    assert!(workers::end_with_reason(&app.db, &id, "admission_timeout").await.unwrap());
    assert!(!workers::end_with_reason(&app.db, &id, "join_failed").await.unwrap(), "already ended");
    let record = app.get(&format!("/v1/ext/conversation/{id}")).await.json();
    assert_eq!((record["status"].as_str(), record["end_reason"].as_str()), (Some("ENDED"), Some("admission_timeout")));
    assert_eq!(outbox(&app, &id).await, ["call_ended"], "nobody had joined");
    let last = outbox_bodies(&app, &id).await.pop().unwrap();
    assert_eq!(last["event"], json!({ "name": "call_ended", "payload": { "reason": "admission_timeout" } }));

    // A bot that took part records why it left before its call is hung up.
    let left = meeting(&app).await;
    conversations::advance_status(&app.db, &left, STATUS_IN_PROGRESS).await.unwrap();
    workers::set_end_reason(&app.db, &left, "meeting_ended").await.unwrap();
    let record = app.get(&format!("/v1/ext/conversation/{left}")).await.json();
    assert_eq!(
        (record["status"].as_str(), record["end_reason"].as_str()),
        (Some("IN_PROGRESS"), Some("meeting_ended"))
    );
}

async fn a_restart_ends_every_unfinished_meeting(app: TestApp) {
    let (on_its_way, in_call, plain) = (meeting(&app).await, meeting(&app).await, conversation(&app, &[]).await);
    conversations::advance_status(&app.db, &in_call, STATUS_IN_PROGRESS).await.unwrap();
    assert_eq!(workers::claim(&app.db, &in_call, workers::LOCAL_WORKER).await.unwrap(), workers::Claim::Claimed);
    let mut ended: Vec<String> =
        workers::end_calls_after_restart(&app.db).await.unwrap().into_iter().map(|c| c.conversation_id).collect();
    ended.sort();
    let mut expected = vec![on_its_way.clone(), in_call.clone()];
    expected.sort();
    assert_eq!(ended, expected);
    assert_eq!(outbox(&app, &in_call).await, ["participant_left", "call_ended"]);
    assert_eq!(outbox(&app, &on_its_way).await, ["call_ended"]);
    let open = app.get(&format!("/v1/ext/conversation/{plain}")).await.json();
    assert_eq!(open["status"], "STARTED", "a 1:1 conversation nobody joined stays open");
}
