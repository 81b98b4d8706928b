use axum::http::StatusCode;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(tool_lifecycle_and_validation, mcp_lifecycle_and_exact_errors);

async fn tool_lifecycle_and_validation(app: TestApp) {
    let tool = json!({
        "type": "tool.api",
        "schema": {
            "type": "function", "name": "get_weather", "description": "Weather for a city",
            "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] }
        },
        "request_config": { "method": "POST", "url": "https://api.example.com/weather", "headers": { "Authorization": "Bearer t" } },
        "event_messages": { "on_start": { "message": "Checking." }, "on_delay": { "delay": 3, "message": "Still checking." } }
    });
    let created = app.post("/v1/ext/tool", tool.clone()).await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    assert_eq!(created.json()["message"], "Tool created successfully");
    let id = created.json()["id"].as_str().unwrap().to_string();
    let list = app.get("/v1/ext/tool").await.json();
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["schema"], tool["schema"]);
    assert_eq!(list[0]["request_config"], tool["request_config"]);
    assert_eq!(list[0]["event_messages"]["on_start"]["message"], "Checking.");
    assert_eq!(list[0]["event_messages"]["on_delay"], json!({ "delay": 3.0, "message": "Still checking." }));
    assert_eq!(list[0]["event_messages"]["on_error"], json!({ "message": "" }));

    for (change, field) in [
        (json!({ "type": "tool.magic" }), "type"),
        (json!({ "schema": { "name": "bad name!" } }), "schema.name"),
        (
            json!({ "schema": { "name": "x", "parameters": { "type": "object", "properties": {}, "required": ["city"] } } }),
            "required",
        ),
        (json!({ "request_config": { "method": "FETCH", "url": "https://a.example" } }), "request_config.method"),
        (json!({ "request_config": { "method": "GET", "url": "file:///etc/passwd" } }), "request_config.url"),
    ] {
        let mut body = tool.clone();
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let response = app.post("/v1/ext/tool", body).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{change}");
        assert!(response.json()["error"].as_str().unwrap().contains(field), "{}", response.text());
    }
    assert_eq!(
        app.delete(&format!("/v1/ext/tool/{id}")).await.json(),
        json!({ "id": id, "message": "Tool deleted successfully" })
    );
    let missing = app.get(&format!("/v1/ext/tool/{id}")).await;
    assert_eq!((missing.status, missing.json()), (StatusCode::NOT_FOUND, json!({ "error": "Tool not found" })));
    assert_eq!(app.get("/v1/ext/tool").await.json(), json!([]));
}

async fn mcp_lifecycle_and_exact_errors(app: TestApp) {
    let body = json!({ "name": "Calendar", "description": "Bookings", "type": "shttp/sse", "request_config": { "url": "https://mcp.example.com/mcp", "headers": { "X-Key": "k" } } });
    let id = app.create("/v1/ext/mcp", body.clone()).await;
    let mcp = app.get(&format!("/v1/ext/mcp/{id}")).await.json();
    for field in ["name", "description", "type", "request_config"] {
        assert_eq!(mcp[field], body[field], "{field}");
    }
    assert_eq!(app.get("/v1/ext/mcp").await.json()[0]["id"], id);
    let not_found = json!({ "error": "MCP not found" });
    for path in ["/v1/ext/mcp/5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11", "/v1/ext/mcp/oops"] {
        let response = app.get(path).await;
        assert_eq!((response.status, response.json()), (StatusCode::NOT_FOUND, not_found.clone()));
    }
    let bad = app
        .post("/v1/ext/mcp", json!({ "name": "X", "type": "grpc", "request_config": { "url": "https://a.example" } }))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.delete(&format!("/v1/ext/mcp/{id}")).await.json(),
        json!({ "id": id, "message": "MCP deleted successfully" })
    );
    assert_eq!(app.delete(&format!("/v1/ext/mcp/{id}")).await.json(), not_found);
}
