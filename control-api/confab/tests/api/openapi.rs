use axum::body::Body;
use axum::http::Request;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(openapi_document_lists_every_route);

async fn openapi_document_lists_every_route(app: TestApp) {
    let doc = app.send(Request::get("/openapi.json").body(Body::empty()).unwrap()).await.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let expected = [
        ("/v1/ext/agent", vec!["get", "post"]),
        ("/v1/ext/agent/{id}", vec!["get", "delete"]),
        ("/v1/agent/api", vec!["post"]),
        ("/v1/ext/agentbytemplate", vec!["post"]),
        ("/v1/ext/template", vec!["get", "post"]),
        ("/v1/ext/template/{id}", vec!["get", "delete"]),
        ("/v1/ext/avatars", vec!["get"]),
        ("/v2/custom-avatar", vec!["post"]),
        ("/v2/custom-avatar/{id}", vec!["get", "delete"]),
        ("/v1/ext/guardrail", vec!["get", "post"]),
        ("/v1/ext/guardrail/{id}", vec!["get", "put", "delete"]),
        ("/v1/ext/tool", vec!["get", "post"]),
        ("/v1/ext/tool/{id}", vec!["get", "delete"]),
        ("/v1/ext/mcp", vec!["get", "post"]),
        ("/v1/ext/mcp/{id}", vec!["get", "delete"]),
        ("/v1/ext/kb", vec!["get", "post"]),
        ("/v1/ext/kb/{id}", vec!["get", "delete"]),
        ("/v1/ext/kb/{id}/documents", vec!["post"]),
        ("/v1/ext/conversation", vec!["get", "post"]),
        ("/v1/ext/conversation/{id}", vec!["get"]),
        ("/v1/ext/conversation/{id}/recording", vec!["get"]),
        ("/v1/ext/conversation/{id}/turn-metrics", vec!["get"]),
        ("/v1/ext/session-token", vec!["post"]),
        ("/v1/auth/conversation", vec!["post"]),
        ("/v1/session/conversation/{id}", vec!["get"]),
        ("/v1/session/conversation/{id}/webrtc", vec!["post", "delete"]),
        ("/v1/ext/externalmeeting", vec!["post"]),
    ];
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(paths.len(), expected.len(), "{:?}", paths.keys().collect::<Vec<_>>());
    for (path, methods) in expected {
        for method in methods {
            assert!(doc["paths"][path][method].is_object(), "{method} {path} missing from the document");
        }
    }
    assert_eq!(doc["components"]["securitySchemes"]["api_key"]["name"], "x-api-key");
}
