use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use confab_engine::{ConversationEvent, EventKind};
use confab_store::conversation_events;
use serde_json::json;

use crate::on_both_databases;
use crate::support::{PUBLIC_URL, TestApp, UNAUTHORIZED};

on_both_databases!(
    create_and_read_a_conversation,
    list_filters_and_totals,
    engine_events_drive_status_and_transcript,
    session_tokens_admit_one_conversation_only,
    external_meeting_answers_plain_text,
);

async fn agent(app: &TestApp, name: &str) -> String {
    app.create("/v1/ext/agent", json!({ "agent_name": name, "avatars": [{ "avatar_key_id": "stock-malik" }] })).await
}

async fn create_and_read_a_conversation(app: TestApp) {
    let agent_id = agent(&app, "Greeter").await;
    let response = app
        .post("/v1/ext/conversation", json!({ "agent_id": agent_id, "user_name": "Ada", "user_id": "u-1", "context": "returning customer", "meta_data": { "plan": "pro" } }))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let c = response.json();
    let id = c["id"].as_str().unwrap().to_string();
    assert_eq!(c["status"], "STARTED");
    assert_eq!(c["is_active"], true);
    assert_eq!(c["agent_name"], "Greeter");
    assert_eq!(c["avatar_id"], "stock-malik");
    assert_eq!(c["meta_data"], json!({ "plan": "pro" }));
    assert_eq!(c["type"], "conversation");
    assert_eq!(c["job_id"], json!(null));
    let token = c["session_token"].as_str().unwrap();
    assert_eq!(c["join_link"], format!("{PUBLIC_URL}/join/{id}#token={token}"));
    for field in
        ["feedback", "usage_status", "usage_json", "user_name", "user_id", "context", "created_at", "updated_at"]
    {
        assert!(c[field].is_string(), "{field}");
    }
    for field in ["snippets", "chat_history"] {
        assert!(c[field].is_object(), "{field}");
    }

    let detail = app.get(&format!("/v1/ext/conversation/{id}")).await.json();
    let mut keys: Vec<&str> = detail.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "agent_id",
            "agent_name",
            "avatar_id",
            "context",
            "created_at",
            "id",
            "is_recorded",
            "recording_url",
            "status",
            "transcript",
            "updated_at",
            "user_id",
            "user_name"
        ]
    );
    assert_eq!(detail["transcript"], json!([]));
    assert_eq!(detail["recording_url"], "");
    assert_eq!(detail["context"], "returning customer");

    let not_found = json!({ "error": "Conversation not found" });
    for path in ["/v1/ext/conversation/5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11", "/v1/ext/conversation/whatever"] {
        let response = app.get(path).await;
        assert_eq!((response.status, response.json()), (StatusCode::NOT_FOUND, not_found.clone()));
    }
    let missing_agent =
        app.post("/v1/ext/conversation", json!({ "agent_id": "5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11" })).await;
    assert_eq!(
        (missing_agent.status, missing_agent.json()),
        (StatusCode::NOT_FOUND, json!({ "message": "Agent details not found" }))
    );
    let bad_meta = app.post("/v1/ext/conversation", json!({ "agent_id": agent_id, "meta_data": [1] })).await;
    assert_eq!(bad_meta.status, StatusCode::BAD_REQUEST);
}

async fn list_filters_and_totals(app: TestApp) {
    let sales = agent(&app, "Sales Bot").await;
    let support = agent(&app, "Support Bot").await;
    for (agent_id, user) in [(&sales, "Grace"), (&sales, "Linus"), (&support, "Grace Hopper")] {
        app.create("/v1/ext/conversation", json!({ "agent_id": agent_id, "user_name": user, "user_id": user })).await;
    }
    let all = app.get("/v1/ext/conversation").await;
    assert_eq!(all.total_count(), 3);
    assert_eq!(all.json()[0]["user_name"], "Grace Hopper", "newest first");
    assert_eq!(app.get("/v1/ext/conversation?search=grace").await.total_count(), 2);
    assert_eq!(app.get("/v1/ext/conversation?search=sales%20bot").await.total_count(), 2);
    assert_eq!(app.get("/v1/ext/conversation?search=started").await.total_count(), 3);
    let page = app.get("/v1/ext/conversation?perpage=1&offset=2").await;
    assert_eq!((page.total_count(), page.json().as_array().unwrap().len()), (3, 1));
    let today = chrono::Utc::now().date_naive();
    let tomorrow = today.succ_opt().unwrap();
    let yesterday = today.pred_opt().unwrap();
    assert_eq!(app.get(&format!("/v1/ext/conversation?from={today}&to={today}")).await.total_count(), 3);
    assert_eq!(app.get(&format!("/v1/ext/conversation?from={tomorrow}")).await.total_count(), 0);
    assert_eq!(app.get(&format!("/v1/ext/conversation?to={yesterday}")).await.total_count(), 0);
    assert_eq!(app.get("/v1/ext/conversation?type=conversation").await.total_count(), 3);
    assert_eq!(app.get("/v1/ext/conversation?type=external_meeting").await.total_count(), 0);
}

async fn engine_events_drive_status_and_transcript(app: TestApp) {
    let agent_id = agent(&app, "Talker").await;
    let id = app.create("/v1/ext/conversation", json!({ "agent_id": agent_id, "user_name": "Ada" })).await;
    // Room for one event: once the third is queued, the consumer has taken the second, which it does only
    // after recording the first.
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    let consumer = tokio::spawn(conversation_events::consume(app.db.clone(), id.clone(), receiver, None, None));
    let at = |ms: u64, kind: EventKind| ConversationEvent { media_time: Duration::from_millis(ms), kind };
    sender.send(at(400, EventKind::UserStartedSpeaking)).await.unwrap();
    sender.send(at(1900, EventKind::UtteranceCommitted { text: "What time is it?".into() })).await.unwrap();
    sender.send(at(2500, EventKind::AgentStartedSpeaking { text: "It is noon. Anything else?".into() })).await.unwrap();
    // The record mid-call.
    let mid = app.get(&format!("/v1/ext/conversation/{id}")).await.json();
    assert_eq!(mid["status"], "IN_PROGRESS");
    sender.send(at(3100, EventKind::AgentInterrupted)).await.unwrap();
    sender.send(at(3100, EventKind::AgentStoppedSpeaking { text: "It is noon.".into() })).await.unwrap();
    sender.send(at(5000, EventKind::CallEnded)).await.unwrap();
    drop(sender);
    consumer.await.unwrap();

    let detail = app.get(&format!("/v1/ext/conversation/{id}")).await.json();
    assert_eq!(detail["status"], "ENDED");
    let transcript = detail["transcript"].as_array().unwrap();
    assert_eq!(transcript.len(), 2);
    assert_eq!(transcript[0]["role"], "user");
    assert_eq!(transcript[0]["content"], "What time is it?");
    assert_eq!(transcript[0]["message_timestamp"], 1.9);
    assert_eq!(transcript[0]["conversation_id"], id);
    assert_eq!(transcript[1]["role"], "assistant");
    assert_eq!(transcript[1]["content"], "It is noon.", "what the user heard");
    assert_eq!(transcript[1]["message_timestamp"], 3.1);
    let listed = app.get("/v1/ext/conversation").await.json();
    assert_eq!(listed[0]["is_active"], false);
}

async fn session_tokens_admit_one_conversation_only(app: TestApp) {
    let agent_id = agent(&app, "Kiosk").await;
    let minted = app
        .post(
            "/v1/ext/session-token",
            json!({ "agent_id": agent_id, "userId": "u9", "userName": "Bea", "context": "lobby" }),
        )
        .await;
    assert_eq!(minted.status, StatusCode::OK, "{}", minted.text());
    let body = minted.json();
    let (token, id) =
        (body["token"].as_str().unwrap().to_string(), body["conversation_id"].as_str().unwrap().to_string());
    assert_eq!(body["expires_in"], 600);
    assert!(body["join_link"].as_str().unwrap().ends_with(&format!("/join/{id}#token={token}")));
    let conversation = app.get(&format!("/v1/ext/conversation/{id}")).await.json();
    assert_eq!((conversation["user_name"].as_str(), conversation["user_id"].as_str()), (Some("Bea"), Some("u9")));

    let with_token = |path: String, token: String| {
        Request::get(path).header("authorization", format!("Bearer {token}")).body(Body::empty()).unwrap()
    };
    let admitted = app.send(with_token(format!("/v1/session/conversation/{id}"), token.clone())).await;
    assert_eq!(admitted.status, StatusCode::OK);
    assert_eq!(admitted.json()["id"], id);

    let other = app.create("/v1/ext/conversation", json!({ "agent_id": agent_id })).await;
    let wrong = app.send(with_token(format!("/v1/session/conversation/{other}"), token.clone())).await;
    assert_eq!((wrong.status, wrong.json()), (StatusCode::UNAUTHORIZED, json!({ "error": UNAUTHORIZED })));
    let tampered = format!("{}x", &token[..token.len() - 1]);
    assert_eq!(
        app.send(with_token(format!("/v1/session/conversation/{id}"), tampered)).await.status,
        StatusCode::UNAUTHORIZED
    );
    let keyed = Request::get(format!("/v1/session/conversation/{id}"))
        .header("x-api-key", &app.key)
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(keyed).await.status, StatusCode::UNAUTHORIZED, "the API key is not a session token");

    let again = app.post("/v1/ext/session-token", json!({ "conversation_id": other })).await.json();
    assert_eq!(again["conversation_id"], other);
    for bad in [json!({}), json!({ "agent_id": agent_id, "conversation_id": other })] {
        assert_eq!(app.post("/v1/ext/session-token", bad).await.status, StatusCode::BAD_REQUEST);
    }
}

async fn external_meeting_answers_plain_text(app: TestApp) {
    let agent_id = agent(&app, "Note taker").await;
    let request =
        |url: &str| json!({ "agent_id": agent_id, "meeting_url": url, "user_name": "Confab Notes", "user_id": "s-1" });
    // Another site: refused in plain text, nothing created.
    let response = app.post("/v1/ext/externalmeeting", request("https://meet.example.com/abc")).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert!(response.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert_eq!(response.text(), "Unable to create agent request.");
    // A supported platform, but this app has no meeting bots (no media path): 503, plain text.
    let response = app.post("/v1/ext/externalmeeting", request("https://meet.google.com/abc-defg-hij")).await;
    assert_eq!(response.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert_eq!(response.text(), "Unable to create agent request.");
    assert!(response.headers.get("x-conversation-id").is_none());
    let listed = app.get("/v1/ext/conversation").await.json();
    assert_eq!(listed.as_array().unwrap().len(), 0, "{listed}");
    let missing = app
        .post("/v1/ext/externalmeeting", json!({ "agent_id": agent_id, "meeting_url": "https://meet.example.com/abc" }))
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    let mut bad_mode = request("https://meet.google.com/abc-defg-hij");
    bad_mode["mode"] = json!("loud");
    let response = app.post("/v1/ext/externalmeeting", bad_mode).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        response.json()["error"],
        "Invalid request body: mode must be one of addressed, always, observer; got \"loud\""
    );
}
