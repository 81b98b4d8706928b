use axum::http::StatusCode;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(template_crud, agent_inherits_everything_from_its_template, agent_by_template_errors_are_exact);

async fn template_crud(app: TestApp) {
    let response = app.post("/v1/ext/template", json!({ "name": "Support", "system_prompt": "Help." })).await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.json()["message"], "Template created successfully");
    let id = response.json()["id"].as_str().unwrap().to_string();
    let template = app.get(&format!("/v1/ext/template/{id}")).await.json();
    assert_eq!(template["name"], "Support");
    assert_eq!(template["config"]["tts"]["provider"], "local");
    let list = app.get("/v1/ext/template").await;
    assert_eq!(list.total_count(), 1);
    assert_eq!(
        app.delete(&format!("/v1/ext/template/{id}")).await.json(),
        json!({ "id": id, "message": "Template deleted successfully" })
    );
    let missing = app.get(&format!("/v1/ext/template/{id}")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json(), json!({ "error": "Template not found" }));
}

async fn agent_inherits_everything_from_its_template(app: TestApp) {
    let guardrail = app.create("/v1/ext/guardrail", json!({ "name": "Safe", "prompt": "Be safe." })).await;
    let kb = app.create("/v1/ext/kb", json!({ "name": "Docs" })).await;
    let template = app
        .create(
            "/v1/ext/template",
            json!({
                "name": "Receptionist",
                "system_prompt": "You greet visitors.",
                "config": { "llm": { "provider": "groq", "model": "llama-3.3-70b-versatile" }, "tts": { "provider": "cartesia", "model_id": "sonic-2", "voice_id": "abc" } },
                "guardrail_ids": [guardrail],
                "knowledge_base_ids": [kb]
            }),
        )
        .await;
    for body in [
        json!({ "template_id": template, "avatar_key_id": "stock-sofia", "email": "bot@example.com", "context_override": "The office closes at 6." }),
        json!({ "template_id": template, "avatar_ids": ["stock-sofia"], "email": "bot@example.com", "context_override": "The office closes at 6." }),
    ] {
        let response = app.post("/v1/ext/agentbytemplate", body).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text());
        assert_eq!(response.json()["message"], "Agent created successfully");
        let id = response.json()["id"].as_str().unwrap().to_string();
        let agent = app.get(&format!("/v1/ext/agent/{id}")).await.json();
        assert_eq!(agent["agent_system_prompt"], "You greet visitors.\n\nThe office closes at 6.");
        assert_eq!(agent["avatars"][0]["avatar_key_id"], "stock-sofia");
        assert_eq!(agent["avatars"][0]["persona_name"], "Sofia");
        assert_eq!(agent["avatars"][0]["config"]["llm"]["provider"], "groq");
        assert_eq!(agent["avatars"][0]["config"]["tts"]["voice_id"], "abc");
        assert_eq!(agent["guardrail"][0]["id"], guardrail);
        assert_eq!(agent["knowledge_base"][0]["id"], kb);
        assert_eq!(agent["email"], "bot@example.com");
        assert_eq!(agent["template_id"], template);
    }
}

async fn agent_by_template_errors_are_exact(app: TestApp) {
    let template = app.create("/v1/ext/template", json!({ "name": "T" })).await;
    let invalid = json!({ "error": "Invalid request body" });
    for body in [
        json!({ "avatar_key_id": "stock-sofia" }),
        json!({ "template_id": template }),
        json!({ "template_id": 5, "avatar_key_id": "stock-sofia" }),
        json!([]),
    ] {
        let response = app.post("/v1/ext/agentbytemplate", body).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST);
        assert_eq!(response.json(), invalid);
    }
    let malformed = app.post_raw("/v1/ext/agentbytemplate", "application/json", "{\"template_id\":").await;
    assert_eq!(malformed.json(), invalid);
    let failed = json!({ "error": "Failed to fetch template/avatar" });
    for body in [
        json!({ "template_id": "5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11", "avatar_key_id": "stock-sofia" }),
        json!({ "template_id": "nope", "avatar_key_id": "stock-sofia" }),
        json!({ "template_id": template, "avatar_key_id": "no-such-avatar" }),
    ] {
        let response = app.post("/v1/ext/agentbytemplate", body).await;
        assert_eq!(response.status, StatusCode::NOT_FOUND);
        assert_eq!(response.json(), failed);
    }
    assert_eq!(app.get("/v1/ext/agent").await.total_count(), 0, "nothing was written");
}
