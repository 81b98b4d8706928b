use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use crate::on_both_databases;
use crate::support::{TestApp, UNAUTHORIZED};

on_both_databases!(
    every_route_refuses_missing_wrong_and_revoked_keys,
    header_name_is_case_insensitive,
    open_routes_need_no_key,
    wrong_methods_get_405_in_the_error_shape,
);

const ID: &str = "5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11";

fn routes() -> Vec<(Method, String)> {
    let mut routes = vec![
        (Method::POST, "/v1/ext/agent".to_string()),
        (Method::GET, "/v1/ext/agent".to_string()),
        (Method::POST, "/v1/agent/api".to_string()),
        (Method::POST, "/v1/ext/agentbytemplate".to_string()),
        (Method::POST, "/v1/ext/template".to_string()),
        (Method::GET, "/v1/ext/template".to_string()),
        (Method::GET, "/v1/ext/avatars".to_string()),
        (Method::POST, "/v2/custom-avatar".to_string()),
        (Method::POST, "/v1/ext/guardrail".to_string()),
        (Method::GET, "/v1/ext/guardrail".to_string()),
        (Method::POST, "/v1/ext/tool".to_string()),
        (Method::GET, "/v1/ext/tool".to_string()),
        (Method::POST, "/v1/ext/mcp".to_string()),
        (Method::GET, "/v1/ext/mcp".to_string()),
        (Method::POST, "/v1/ext/kb".to_string()),
        (Method::GET, "/v1/ext/kb".to_string()),
        (Method::POST, format!("/v1/ext/kb/{ID}/documents")),
        (Method::POST, "/v1/ext/conversation".to_string()),
        (Method::GET, "/v1/ext/conversation".to_string()),
        (Method::GET, format!("/v1/ext/conversation/{ID}")),
        (Method::POST, "/v1/ext/session-token".to_string()),
        (Method::POST, "/v1/ext/externalmeeting".to_string()),
        (Method::GET, "/v1/ext/no-such-route".to_string()),
        (Method::GET, format!("/v1/session/conversation/{ID}")),
    ];
    for path in ["agent", "template", "guardrail", "tool", "mcp", "kb"] {
        routes.push((Method::GET, format!("/v1/ext/{path}/{ID}")));
        routes.push((Method::DELETE, format!("/v1/ext/{path}/{ID}")));
    }
    routes.push((Method::PUT, format!("/v1/ext/guardrail/{ID}")));
    routes.push((Method::GET, format!("/v2/custom-avatar/{ID}")));
    routes.push((Method::DELETE, format!("/v2/custom-avatar/{ID}")));
    routes
}

async fn assert_unauthorized(app: &TestApp, key: Option<&str>) {
    for (method, path) in routes() {
        let mut request =
            Request::builder().method(method.clone()).uri(&path).header("content-type", "application/json");
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let response = app.send(request.body(Body::from("{}")).unwrap()).await;
        assert_eq!(response.status, StatusCode::UNAUTHORIZED, "{method} {path} with {key:?}");
        assert_eq!(response.json(), json!({ "error": UNAUTHORIZED }), "{method} {path}");
    }
}

async fn every_route_refuses_missing_wrong_and_revoked_keys(app: TestApp) {
    assert_unauthorized(&app, None).await;
    assert_unauthorized(&app, Some("")).await;
    assert_unauthorized(&app, Some("cfb_wrong")).await;
    let (id, revoked) = confab_store::api_keys::create_key(&app.db, "to revoke").await.unwrap();
    assert_eq!(
        app.send(Request::get("/v1/ext/agent").header("x-api-key", &revoked).body(Body::empty()).unwrap()).await.status,
        StatusCode::OK
    );
    assert!(confab_store::api_keys::revoke_key(&app.db, &id).await.unwrap());
    assert_unauthorized(&app, Some(&revoked)).await;
    // A session token is not an API key.
    let agent = app.create("/v1/ext/agent", json!({ "agent_name": "A" })).await;
    let token = app.post("/v1/ext/session-token", json!({ "agent_id": agent })).await.json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_unauthorized(&app, Some(&token)).await;
    let keys = confab_store::api_keys::list_keys(&app.db).await.unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys.iter().any(|key| key.id == id && key.revoked_at.is_some()));
}

async fn wrong_methods_get_405_in_the_error_shape(app: TestApp) {
    let response = app.call(Method::PATCH, "/v1/ext/agent", Some(json!({}))).await;
    assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(response.json(), json!({ "error": "Method not allowed" }));
    let anonymous = app.send(Request::patch("/v1/ext/agent").body(Body::empty()).unwrap()).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "the key is checked first");
}

async fn header_name_is_case_insensitive(app: TestApp) {
    for header in ["x-api-key", "X-API-Key", "X-Api-Key"] {
        let request = Request::get("/v1/ext/agent").header(header, &app.key).body(Body::empty()).unwrap();
        assert_eq!(app.send(request).await.status, StatusCode::OK, "{header}");
    }
}

async fn open_routes_need_no_key(app: TestApp) {
    let landing = app.send(Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(landing.status, StatusCode::OK);
    assert_eq!(landing.json()["service"], "confab");
    let openapi = app.send(Request::get("/openapi.json").body(Body::empty()).unwrap()).await;
    assert_eq!(openapi.status, StatusCode::OK);
}
