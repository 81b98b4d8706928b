//! The fleet's records on both databases: a conversation is claimed by one worker (compare-and-set),
//! released when its call was never admitted, and a lost worker's calls are ended exactly once however many
//! replicas sweep at the same time — ENDED, `end_reason: "worker_lost"`, `participant_left` (when the
//! participant had joined) and `call_ended` in the outbox.

use confab_store::conversations::{self, STATUS_ENDED, STATUS_IN_PROGRESS};
use confab_store::workers::{self, Claim, WorkerBeat};
use serde_json::json;
use sqlx::Row;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(one_worker_claims_a_conversation, a_lost_workers_calls_end_once, a_restart_ends_the_calls_it_held);

fn beat(id: &str) -> WorkerBeat {
    WorkerBeat { id: id.into(), max_calls: 2, active_calls: 1, draining: false }
}

pub(crate) async fn conversation(app: &TestApp, events: &[&str]) -> String {
    let agent = app
        .create(
            "/v1/ext/agent",
            json!({ "agent_name": "A", "callback_url": "https://hooks.example.com/x", "callback_events": events }),
        )
        .await;
    app.create("/v1/ext/conversation", json!({ "agent_id": agent, "user_id": "ada" })).await
}

pub(crate) async fn outbox_bodies(app: &TestApp, id: &str) -> Vec<serde_json::Value> {
    sqlx::query("SELECT body FROM webhook_outbox WHERE conversation_id = $1 ORDER BY seq")
        .bind(id)
        .fetch_all(&app.db.pool)
        .await
        .unwrap()
        .iter()
        .map(|row| serde_json::from_str(&row.get::<String, _>("body")).unwrap())
        .collect()
}

pub(crate) async fn outbox(app: &TestApp, id: &str) -> Vec<String> {
    sqlx::query("SELECT event_name FROM webhook_outbox WHERE conversation_id = $1 ORDER BY seq")
        .bind(id)
        .fetch_all(&app.db.pool)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get("event_name"))
        .collect()
}

async fn one_worker_claims_a_conversation(app: TestApp) {
    let id = conversation(&app, &[]).await;
    let (a, b) = tokio::join!(workers::claim(&app.db, &id, "w1"), workers::claim(&app.db, &id, "w2"));
    let mut outcomes = [a.unwrap(), b.unwrap()];
    outcomes.sort_by_key(|claim| claim != &Claim::Claimed);
    let winner = if outcomes[1] == Claim::Held("w1".into()) { "w1" } else { "w2" };
    assert_eq!(outcomes[0], Claim::Claimed);
    assert!(matches!(&outcomes[1], Claim::Held(w) if !w.is_empty()), "{outcomes:?}");
    // A redelivered job on the winner itself is refused too.
    assert_eq!(workers::claim(&app.db, &id, winner).await.unwrap(), Claim::Held(winner.into()));
    // Released (never admitted): claimable again; another worker's release changes nothing.
    workers::release(&app.db, &id, "nobody").await.unwrap();
    assert_eq!(workers::holder(&app.db, &id).await.unwrap().unwrap().0, winner);
    workers::release(&app.db, &id, winner).await.unwrap();
    assert_eq!(workers::claim(&app.db, &id, "w3").await.unwrap(), Claim::Claimed);
    conversations::advance_status(&app.db, &id, STATUS_ENDED).await.unwrap();
    let ended = conversation(&app, &[]).await;
    conversations::advance_status(&app.db, &ended, STATUS_ENDED).await.unwrap();
    assert_eq!(workers::claim(&app.db, &ended, "w1").await.unwrap(), Claim::Ended);
    assert_eq!(workers::claim(&app.db, "nope", "w1").await.unwrap(), Claim::Missing);
}

async fn a_lost_workers_calls_end_once(app: TestApp) {
    let events = ["participant_left", "call_ended"];
    let (joined, waiting, elsewhere) =
        (conversation(&app, &events).await, conversation(&app, &events).await, conversation(&app, &events).await);
    workers::heartbeat(&app.db, &beat("lost"), 1_000).await.unwrap();
    workers::heartbeat(&app.db, &beat("alive"), 9_000).await.unwrap();
    for (id, worker) in [(&joined, "lost"), (&waiting, "lost"), (&elsewhere, "alive")] {
        assert_eq!(workers::claim(&app.db, id, worker).await.unwrap(), Claim::Claimed);
    }
    conversations::advance_status(&app.db, &joined, STATUS_IN_PROGRESS).await.unwrap();

    // Three replicas sweep at once with the same cutoff: each call is ended by exactly one of them.
    let (a, b, c) = tokio::join!(
        workers::end_calls_of_lost_workers(&app.db, 5_000),
        workers::end_calls_of_lost_workers(&app.db, 5_000),
        workers::end_calls_of_lost_workers(&app.db, 5_000),
    );
    let mut ended: Vec<String> =
        [a, b, c].into_iter().flat_map(Result::unwrap).map(|call| call.conversation_id).collect();
    ended.sort();
    let mut expected = vec![joined.clone(), waiting.clone()];
    expected.sort();
    assert_eq!(ended, expected);

    let record = app.get(&format!("/v1/ext/conversation/{joined}")).await.json();
    assert_eq!((record["status"].as_str(), record["end_reason"].as_str()), (Some("ENDED"), Some("worker_lost")));
    assert_eq!(outbox(&app, &joined).await, ["participant_left", "call_ended"]);
    assert_eq!(outbox(&app, &waiting).await, ["call_ended"], "no participant had joined");
    let last = outbox_bodies(&app, &joined).await.pop().unwrap();
    assert_eq!(last["event"], json!({ "name": "call_ended", "payload": { "reason": "worker_lost" } }));
    let untouched = app.get(&format!("/v1/ext/conversation/{elsewhere}")).await.json();
    assert_eq!(untouched["status"], "STARTED");
    assert!(untouched.get("end_reason").is_none(), "{untouched}");
    assert!(outbox(&app, &elsewhere).await.is_empty());
    let left: Vec<String> = workers::list(&app.db).await.unwrap().into_iter().map(|(beat, _)| beat.id).collect();
    assert_eq!(left, ["alive"]);
    // A later sweep finds nothing more to do.
    assert!(workers::end_calls_of_lost_workers(&app.db, 5_000).await.unwrap().is_empty());
}

async fn a_restart_ends_the_calls_it_held(app: TestApp) {
    let events = ["participant_left", "call_ended"];
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(conversation(&app, &events).await);
    }
    let [talking, joining, legacy, not_joined] = [&ids[0], &ids[1], &ids[2], &ids[3]];
    for id in [talking, joining] {
        assert_eq!(workers::claim(&app.db, id, workers::LOCAL_WORKER).await.unwrap(), Claim::Claimed);
    }
    // `talking` had audio; `legacy` is IN_PROGRESS from before calls were claimed.
    for id in [talking, legacy] {
        conversations::advance_status(&app.db, id, STATUS_IN_PROGRESS).await.unwrap();
    }
    let mut ended: Vec<String> =
        workers::end_calls_after_restart(&app.db).await.unwrap().into_iter().map(|c| c.conversation_id).collect();
    ended.sort();
    let mut expected = vec![talking.clone(), joining.clone(), legacy.clone()];
    expected.sort();
    assert_eq!(ended, expected);
    for id in &expected {
        let record = app.get(&format!("/v1/ext/conversation/{id}")).await.json();
        assert_eq!((record["status"].as_str(), record["end_reason"].as_str()), (Some("ENDED"), Some("server_restart")));
        let last = outbox_bodies(&app, id).await.pop().unwrap();
        assert_eq!(last["event"], json!({ "name": "call_ended", "payload": { "reason": "server_restart" } }));
    }
    assert_eq!(outbox(&app, talking).await, ["participant_left", "call_ended"]);
    assert_eq!(outbox(&app, joining).await, ["call_ended"]);
    // Nobody had joined this one: its join link still works.
    let open = app.get(&format!("/v1/ext/conversation/{not_joined}")).await.json();
    assert_eq!(open["status"], "STARTED");
    assert!(outbox(&app, not_joined).await.is_empty());
    assert!(workers::end_calls_after_restart(&app.db).await.unwrap().is_empty());
}
