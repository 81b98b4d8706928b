//! `POST /v1/auth/conversation` exactly as `trugen-sdk` 1.1.0 calls it (`TruGenClient.create_session`): its
//! headers and body, the `{token}` it decodes, the LiveKit access token inside, and the record it starts.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine;
use serde_json::{Value, json};

use crate::on_both_databases;
use crate::support::{TestApp, TestResponse, UNAUTHORIZED};

on_both_databases!(
    the_sdk_starts_a_conversation_and_gets_a_livekit_token,
    the_agent_may_be_named_by_header_and_errors_read_as_elsewhere,
    the_signalling_endpoints_check_the_access_token,
);

/// The request `create_session` makes: `X-Agent-Id`, `X-API-Key` (when the client has a key), JSON body.
async fn create_session(app: &TestApp, key: Option<&str>, agent_header: &str, body: Value) -> TestResponse {
    let mut request = Request::post("/v1/auth/conversation")
        .header("Content-Type", "application/json")
        .header("X-Agent-Id", agent_header);
    if let Some(key) = key {
        request = request.header("X-API-Key", key);
    }
    app.send(request.body(Body::from(body.to_string())).unwrap()).await
}

/// The SDK's body, its defaults for what the caller left out.
fn sdk_body(agent_id: &str, avatar_id: &str) -> Value {
    json!({ "agentId": agent_id, "userName": "Ada", "userId": "usr_2026_11_26", "context": {}, "metaData": {},
        "roomId": "", "meetingURL": "", "avatarId": avatar_id, "mode": "" })
}

/// A JWT's payload, decoded as the SDK does (no signature check).
fn payload(token: &str) -> Value {
    let part = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

/// The conversation record as stored.
async fn stored(app: &TestApp, id: &str) -> confab_store::conversations::ConversationSummary {
    confab_store::conversations::get(&app.db, id).await.unwrap().expect("the conversation is stored")
}

async fn agent_with_two_faces(app: &TestApp) -> String {
    app.create(
        "/v1/ext/agent",
        json!({ "agent_name": "Concierge", "avatars": [{ "avatar_key_id": "stock-malik" }, { "avatar_key_id": "stock-amara" }] }),
    )
    .await
}

async fn the_sdk_starts_a_conversation_and_gets_a_livekit_token(app: TestApp) {
    let agent_id = agent_with_two_faces(&app).await;
    let response = create_session(&app, Some(&app.key), &agent_id, sdk_body(&agent_id, "stock-amara")).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let token = response.json()["token"].as_str().expect("{token}").to_string();
    let grant = payload(&token);
    assert_eq!(grant["rtcServerUrl"], "ws://confab.test");
    let conversation_id = grant["conversationId"].as_str().unwrap().to_string();
    let access = payload(grant["accessToken"].as_str().expect("accessToken"));
    assert_eq!(access["iss"], "confab");
    assert_eq!(access["sub"], "usr_2026_11_26");
    assert_eq!(access["name"], "Ada");
    assert_eq!(access["video"]["roomJoin"], true);
    assert_eq!(access["video"]["room"], conversation_id.as_str());
    assert_eq!(access["exp"].as_i64().unwrap() - access["nbf"].as_i64().unwrap(), 600);

    let detail = app.get(&format!("/v1/ext/conversation/{conversation_id}")).await.json();
    assert_eq!(detail["status"], "STARTED");
    let record = stored(&app, &conversation_id).await;
    assert_eq!(record.agent_id, agent_id);
    assert_eq!(record.avatar_id, "stock-amara", "avatarId chose the agent's second avatar");
    assert_eq!(record.user_name, "Ada");
    assert_eq!(record.context, "");
    assert_eq!(record.meta_data, json!({}));

    // Left empty, the agent's first avatar speaks; the SDK's other fields are kept in meta_data.
    let mut body = sdk_body(&agent_id, "");
    body["context"] = json!({ "plan": "pro" });
    body["metaData"] = json!({ "source": "kiosk" });
    body["mode"] = json!("voice");
    let response = create_session(&app, Some(&app.key), &agent_id, body).await;
    let conversation_id = payload(response.json()["token"].as_str().unwrap())["conversationId"].clone();
    let record = stored(&app, conversation_id.as_str().unwrap()).await;
    assert_eq!(record.avatar_id, "stock-malik");
    assert_eq!(record.context, r#"{"plan":"pro"}"#);
    assert_eq!(record.meta_data, json!({ "source": "kiosk", "mode": "voice" }));
}

async fn the_agent_may_be_named_by_header_and_errors_read_as_elsewhere(app: TestApp) {
    let agent_id = agent_with_two_faces(&app).await;
    let by_header = create_session(&app, Some(&app.key), &agent_id, sdk_body("", "")).await;
    assert_eq!(by_header.status, StatusCode::OK, "{}", by_header.text());

    let no_key = create_session(&app, None, &agent_id, sdk_body(&agent_id, "")).await;
    assert_eq!(no_key.status, StatusCode::UNAUTHORIZED);
    assert_eq!(no_key.json(), json!({ "error": UNAUTHORIZED }));
    let bad_key = create_session(&app, Some("cfb_not-a-key"), &agent_id, sdk_body(&agent_id, "")).await;
    assert_eq!(bad_key.status, StatusCode::UNAUTHORIZED);

    let unknown = "00000000-0000-4000-8000-000000000000";
    let missing = create_session(&app, Some(&app.key), unknown, sdk_body(unknown, "")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json(), json!({ "message": "Agent details not found" }));

    let stranger = create_session(&app, Some(&app.key), &agent_id, sdk_body(&agent_id, "stock-zara")).await;
    assert_eq!(stranger.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        stranger.json(),
        json!({ "error": "Invalid request body: avatarId \"stock-zara\" is not one of the agent's avatars" })
    );
    let mut odd = sdk_body(&agent_id, "");
    odd["metaData"] = json!([1]);
    let refused = create_session(&app, Some(&app.key), &agent_id, odd).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
}

/// `GET {path}` with `token` as the `access_token` query parameter or as `Authorization: Bearer`.
async fn get_with_token(app: &TestApp, path: &str, token: &str, as_bearer: bool) -> TestResponse {
    let request = if as_bearer {
        Request::get(path).header("Authorization", format!("Bearer {token}"))
    } else {
        Request::get(format!("{path}?access_token={token}"))
    };
    app.send(request.body(Body::empty()).unwrap()).await
}

/// `/rtc` and `/rtc/validate` admit only this deployment's access tokens, for a conversation that can still
/// be joined, and say why as plain text (LiveKit's clients show it); `/rtc/v1` is a true 404, so clients
/// fall back to `/rtc`. This router has no media worker: an admitted token is told so.
async fn the_signalling_endpoints_check_the_access_token(app: TestApp) {
    let agent_id = agent_with_two_faces(&app).await;
    let response = create_session(&app, Some(&app.key), &agent_id, sdk_body(&agent_id, "")).await;
    let grant = payload(response.json()["token"].as_str().unwrap());
    let access = grant["accessToken"].as_str().unwrap();

    for as_bearer in [false, true] {
        let validated = get_with_token(&app, "/rtc/validate", access, as_bearer).await;
        assert_eq!(validated.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(validated.text(), confab_http::routes::webrtc::NO_MEDIA_WORKER);
        let signal = get_with_token(&app, "/rtc", access, as_bearer).await;
        assert_eq!(signal.status, StatusCode::SERVICE_UNAVAILABLE, "checked before any upgrade");
    }
    let none = app.send(Request::get("/rtc/validate").body(Body::empty()).unwrap()).await;
    assert_eq!((none.status, none.text().as_str()), (StatusCode::UNAUTHORIZED, "no access token"));
    let forged = confab_http::livekit_token::LiveKitKeys::new("another deployment").access_token(
        grant["conversationId"].as_str().unwrap(),
        "usr_2026_11_26",
        "Ada",
        chrono::Utc::now().timestamp(),
    );
    let refused = get_with_token(&app, "/rtc", &forged, false).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.text().starts_with("invalid access token"), "{}", refused.text());
    let v1 = get_with_token(&app, "/rtc/v1", access, false).await;
    assert_eq!(v1.status, StatusCode::NOT_FOUND, "single-PeerConnection clients fall back to /rtc on a 404");
    // LiveKit's JS SDK asks `/rtc/v1/validate` from the app's page (another origin) before it falls back.
    let v1_validate = get_with_token(&app, "/rtc/v1/validate", access, false).await;
    assert_eq!(v1_validate.status, StatusCode::NOT_FOUND);
    assert_eq!(v1_validate.headers["access-control-allow-origin"], "*");
    assert!(!v1_validate.text().contains("requested room does not exist"), "that text would stop the fallback");
    let validated = get_with_token(&app, "/rtc/validate", access, false).await;
    assert_eq!(validated.headers["access-control-allow-origin"], "*");

    let conversation_id = grant["conversationId"].as_str().unwrap();
    confab_store::conversations::advance_status(&app.db, conversation_id, confab_store::conversations::STATUS_ENDED)
        .await
        .unwrap();
    let ended = get_with_token(&app, "/rtc/validate", access, false).await;
    assert_eq!((ended.status, ended.text().as_str()), (StatusCode::CONFLICT, "Conversation has ended"));
    let secret = confab_store::settings::secret(&app.db, confab_http::state::LIVEKIT_SECRET_NAME).await.unwrap();
    let now = chrono::Utc::now().timestamp();
    let gone = confab_http::livekit_token::LiveKitKeys::new(&secret).access_token("no-such-room", "u", "U", now);
    let missing = get_with_token(&app, "/rtc/validate", &gone, false).await;
    assert_eq!((missing.status, missing.text().as_str()), (StatusCode::NOT_FOUND, "room not found"));
}
