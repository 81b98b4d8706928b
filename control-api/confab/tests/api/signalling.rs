//! WebRTC signalling and the join page, without a media worker: the session token guards the offer, the
//! content type is checked, a server without models answers 503, recordings are for API-key holders.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(signalling_needs_the_session_token_and_a_media_worker, the_join_page_is_served_by_the_binary);

fn offer(path: &str, token: Option<&str>, content_type: &str) -> Request<Body> {
    let mut request = Request::builder().method(Method::POST).uri(path).header("content-type", content_type);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    request.body(Body::from("v=0\r\n")).unwrap()
}

async fn signalling_needs_the_session_token_and_a_media_worker(app: TestApp) {
    let agent = app.create("/v1/ext/agent", json!({ "agent_name": "Caller" })).await;
    let conversation = app.post("/v1/ext/conversation", json!({ "agent_id": agent })).await.json();
    let other = app.post("/v1/ext/conversation", json!({ "agent_id": agent })).await.json();
    let id = conversation["id"].as_str().unwrap();
    let token = conversation["session_token"].as_str().unwrap();
    let path = format!("/v1/session/conversation/{id}/webrtc");

    let unauthorized = json!({ "error": "Unauthorized: not a valid authorization api key" });
    for (name, request) in [
        ("no token", offer(&path, None, "application/sdp")),
        ("another conversation's token", offer(&path, other["session_token"].as_str(), "application/sdp")),
        ("a tampered token", offer(&path, Some(&format!("{token}x")), "application/sdp")),
        ("the API key", offer(&path, Some(&app.key), "application/sdp")),
    ] {
        let response = app.send(request).await;
        assert_eq!(response.status, StatusCode::UNAUTHORIZED, "{name}");
        assert_eq!(response.json(), unauthorized, "{name}");
    }
    // Issue 10, defect 9: the token is checked before the body is read; the answers are JSON.
    let big = || Body::from(vec![b'v'; 3 << 20]);
    let anonymous = Request::post(&path).header("content-type", "application/sdp").body(big()).unwrap();
    let response = app.send(anonymous).await;
    assert_eq!((response.status, response.json()), (StatusCode::UNAUTHORIZED, unauthorized.clone()));
    let bearer = format!("Bearer {token}");
    let oversized = Request::post(&path)
        .header("content-type", "application/sdp")
        .header("authorization", &bearer)
        .body(big())
        .unwrap();
    let response = app.send(oversized).await;
    assert_eq!(
        (response.status, response.json()),
        (StatusCode::PAYLOAD_TOO_LARGE, json!({ "error": "Request body too large" }))
    );
    let binary = Request::post(&path)
        .header("content-type", "application/sdp")
        .header("authorization", &bearer)
        .body(Body::from(vec![0xff, 0xfe, 0x00]))
        .unwrap();
    let response = app.send(binary).await;
    assert_eq!(
        (response.status, response.json()),
        (StatusCode::BAD_REQUEST, json!({ "error": "Invalid SDP offer: not UTF-8" }))
    );
    let response = app.send(offer(&path, Some(token), "application/json")).await;
    assert_eq!(response.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(response.json(), json!({ "error": "The offer must be application/sdp" }));
    let response = app.send(offer(&path, Some(token), "application/sdp")).await;
    assert_eq!(response.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.json()["error"].as_str().unwrap().starts_with("Media worker unavailable"));

    let hang_up =
        Request::delete(&path).header("authorization", format!("Bearer {token}")).body(Body::empty()).unwrap();
    let response = app.send(hang_up).await;
    assert_eq!(response.status, StatusCode::NOT_FOUND);
    assert_eq!(response.json(), json!({ "error": "No call in progress" }));

    let recording = app.get(&format!("/v1/ext/conversation/{id}/recording")).await;
    assert_eq!(recording.status, StatusCode::NOT_FOUND);
    assert_eq!(recording.json(), json!({ "error": "Recording not found" }));
    let anonymous = Request::get(format!("/v1/ext/conversation/{id}/recording")).body(Body::empty()).unwrap();
    assert_eq!(app.send(anonymous).await.status, StatusCode::UNAUTHORIZED);
}

async fn the_join_page_is_served_by_the_binary(app: TestApp) {
    let page = app.send(Request::get("/join/anything").body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    let html = page.text();
    assert!(html.contains(r#"id="hangup""#) && html.contains("RTCPeerConnection"));
    assert!(!html.contains("/*CONFAB_CONFIG*/"), "the configuration is written into the page");
    assert!(!html.contains("http://") && !html.contains("https://"), "no external assets");
}
