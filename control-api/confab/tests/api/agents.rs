use axum::http::StatusCode;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(
    create_read_list_delete,
    list_paginates_and_searches_with_total,
    search_follows_creates_and_deletes,
    delete_answers_exact_not_found,
    short_form_creates_an_agent,
    a_gguf_of_ones_own_is_checked_when_it_is_named,
    attachments_are_returned_whole_and_deleted_ones_skipped,
);

fn full_agent(name: &str) -> serde_json::Value {
    json!({
        "agent_name": name,
        "agent_system_prompt": "You are a helpful concierge.",
        "avatars": [{
            "avatar_key_id": "stock-amara",
            "persona_name": "Amara",
            "config": {
                "llm": { "provider": "openai", "model": "gpt-4o-mini", "preemptive_generation": false, "first_response_timeout": 1.5, "hedge_after": 0.8,
                         "fallbacks": [{ "provider": "custom", "model": "qwen2.5-7b", "endpoint": "backup" }, { "provider": "local" }] },
                "stt": { "provider": "deepgram", "model": "nova-3", "min_endpointing_delay": 0.4, "max_endpointing_delay": 2.5, "backchannels": "interrupt", "noise_suppression": "on", "other_voices": "hear" },
                "tts": { "provider": "elevenlabs", "model_id": "eleven_flash_v2_5", "voice_id": "v1" }
            }
        }],
        "config": { "maxCallDuration": 300, "conversationalContext": "VIP guest" },
        "callback_url": "https://hooks.example.com/confab",
        "callback_events": ["utterance_committed", "call_ended"],
        "record": true
    })
}

async fn create_read_list_delete(app: TestApp) {
    let created = app.post("/v1/ext/agent", full_agent("Concierge")).await;
    assert_eq!(created.status, StatusCode::OK);
    let body = created.json();
    assert_eq!(body["message"], "Agent created successfully");
    assert!(body["webhook_secret"].as_str().unwrap().starts_with("whsec_"));
    let id = body["id"].as_str().unwrap().to_string();

    let agent = app.get(&format!("/v1/ext/agent/{id}")).await.json();
    assert_eq!(agent["id"], id);
    assert_eq!(agent["agent_name"], "Concierge");
    assert_eq!(agent["agent_system_prompt"], "You are a helpful concierge.");
    assert_eq!(agent["avatars"][0]["config"]["stt"]["min_endpointing_delay"], 0.4);
    assert_eq!(agent["avatars"][0]["config"]["stt"]["backchannels"], "interrupt");
    assert_eq!(agent["avatars"][0]["config"]["stt"]["noise_suppression"], "on");
    assert_eq!(agent["avatars"][0]["config"]["stt"]["other_voices"], "hear");
    // The language model's chain, normalized like the primary (a local fallback gets its default model).
    let llm = &agent["avatars"][0]["config"]["llm"];
    assert_eq!((llm["first_response_timeout"].clone(), llm["hedge_after"].clone()), (json!(1.5), json!(0.8)));
    assert_eq!(llm["fallbacks"][0], json!({ "provider": "custom", "model": "qwen2.5-7b", "endpoint": "backup" }));
    assert_eq!(llm["fallbacks"][1]["provider"], "local");
    assert!(!llm["fallbacks"][1]["model"].as_str().unwrap().is_empty());
    assert!(agent["avatars"][0]["config"]["tts"].get("fallbacks").is_none(), "an empty chain is not shown");
    assert_eq!(agent["avatars"][0]["config"]["llm"]["preemptive_generation"], false);
    assert_eq!(agent["avatars"][0]["config"]["tts"]["voice_id"], "v1");
    assert_eq!(agent["config"], json!({ "maxCallDuration": 300.0, "conversationalContext": "VIP guest" }));
    assert_eq!(agent["callback_events"], json!(["utterance_committed", "call_ended"]));
    assert_eq!(agent["record"], true);
    assert_eq!(agent["guardrail"], json!([]));
    assert_eq!(agent["webhook_secret"], body["webhook_secret"]);
    assert!(agent["created_at"].as_str().unwrap().ends_with('Z'));

    let list = app.get("/v1/ext/agent").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.total_count(), 1);
    assert_eq!(list.json()[0]["id"], id);

    let deleted = app.delete(&format!("/v1/ext/agent/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.json(), json!({ "id": id, "message": "Agent deleted successfully" }));
    let gone = app.get(&format!("/v1/ext/agent/{id}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.json(), json!({ "message": "Agent details not found" }));
    assert_eq!(app.get("/v1/ext/agent").await.total_count(), 0);
}

async fn list_paginates_and_searches_with_total(app: TestApp) {
    let mut ids = Vec::new();
    for name in ["Alpha Support", "Beta Sales", "Gamma Support", "Delta_Ops", "Epsilon%"] {
        ids.push(app.create("/v1/ext/agent", json!({ "agent_name": name })).await);
    }
    let page = app.get("/v1/ext/agent?offset=1&perpage=2").await;
    assert_eq!(page.total_count(), 5);
    let names: Vec<String> =
        page.json().as_array().unwrap().iter().map(|a| a["agent_name"].as_str().unwrap().into()).collect();
    assert_eq!(names, ["Delta_Ops", "Gamma Support"], "newest first");

    let support = app.get("/v1/ext/agent?search=support").await;
    assert_eq!(support.total_count(), 2);
    let by_id = app.get(&format!("/v1/ext/agent?search={}", &ids[1][..8])).await;
    assert_eq!(by_id.total_count(), 1);
    assert_eq!(by_id.json()[0]["agent_name"], "Beta Sales");
    // LIKE wildcards match literally.
    assert_eq!(app.get("/v1/ext/agent?search=a_o").await.total_count(), 1);
    assert_eq!(app.get("/v1/ext/agent?search=%25").await.total_count(), 1);
    let injection = app.get("/v1/ext/agent?search=%27%3B%20DROP%20TABLE%20agents%3B--").await;
    assert_eq!(injection.status, StatusCode::OK);
    assert_eq!(injection.total_count(), 0);
    assert_eq!(app.get("/v1/ext/agent").await.total_count(), 5);
    let beyond = app.get("/v1/ext/agent?offset=10").await;
    assert_eq!(beyond.json(), json!([]));
    assert_eq!(beyond.total_count(), 5);
}

/// Issue 10: a search of three characters or more is answered from an index on SQLite (migration 10);
/// it must follow every write, as the scan does on PostgreSQL.
async fn search_follows_creates_and_deletes(app: TestApp) {
    let kept = app.create("/v1/ext/agent", json!({ "agent_name": "Zebra Helpdesk" })).await;
    let gone = app.create("/v1/ext/agent", json!({ "agent_name": "zebra \"quoted\" desk" })).await;
    assert_eq!(app.get("/v1/ext/agent?search=ZEBRA").await.total_count(), 2);
    assert_eq!(app.get("/v1/ext/agent?search=%22quoted%22").await.total_count(), 1);
    assert_eq!(app.get(&format!("/v1/ext/agent?search={}", &gone[9..23])).await.total_count(), 1, "by id");
    assert_eq!(app.delete(&format!("/v1/ext/agent/{gone}")).await.status, StatusCode::OK);
    let after = app.get("/v1/ext/agent?search=zebra").await;
    assert_eq!(after.total_count(), 1);
    assert_eq!(after.json()[0]["id"], kept);
    assert_eq!(app.get("/v1/ext/agent?search=ze").await.total_count(), 1, "two characters: the scan");
}

async fn delete_answers_exact_not_found(app: TestApp) {
    for id in ["5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11", "not-a-uuid"] {
        let response = app.delete(&format!("/v1/ext/agent/{id}")).await;
        assert_eq!(response.status, StatusCode::NOT_FOUND);
        assert_eq!(response.json(), json!({ "message": "Agent details not found" }));
    }
}

async fn short_form_creates_an_agent(app: TestApp) {
    let response = app
        .post(
            "/v1/agent/api",
            json!({
                "name": "Short", "system_prompt": "Be brief.", "avatar_ids": ["stock-kenji"],
                "callback_url": "http://127.0.0.1:9/hook", "callback_events": ["call_ended"]
            }),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text());
    let id = response.json()["id"].as_str().unwrap().to_string();
    let agent = app.get(&format!("/v1/ext/agent/{id}")).await.json();
    assert_eq!(agent["agent_name"], "Short");
    assert_eq!(agent["agent_system_prompt"], "Be brief.");
    assert_eq!(agent["avatars"][0]["avatar_key_id"], "stock-kenji");
    assert_eq!(agent["avatars"][0]["persona_name"], "Kenji");
    assert_eq!(
        agent["avatars"][0]["config"]["llm"],
        json!({ "provider": "local", "model": "qwen2.5-coder-0.5b-instruct" })
    );
    assert_eq!(agent["callback_url"], "http://127.0.0.1:9/hook");
}

async fn attachments_are_returned_whole_and_deleted_ones_skipped(app: TestApp) {
    let guardrail = app
        .create("/v1/ext/guardrail", json!({ "name": "No Medical Advice", "prompt": "Refuse medical advice." }))
        .await;
    let second = app.create("/v1/ext/guardrail", json!({ "name": "Be Polite", "prompt": "Stay polite." })).await;
    let kb = app.create("/v1/ext/kb", json!({ "name": "FAQ", "description": "Frequently asked" })).await;
    let mcp = app
        .create(
            "/v1/ext/mcp",
            json!({ "name": "CRM", "type": "shttp/sse", "request_config": { "url": "https://mcp.example.com/mcp" } }),
        )
        .await;
    let tool = app
        .create(
            "/v1/ext/tool",
            json!({ "type": "tool.api", "schema": { "name": "lookup_order" }, "request_config": { "method": "get", "url": "https://api.example.com/orders" } }),
        )
        .await;
    let mut body = full_agent("Attached");
    body["guardrail_ids"] = json!([guardrail, second]);
    body["knowledge_base_ids"] = json!([kb]);
    body["mcp_ids"] = json!([mcp]);
    body["tool_ids"] = json!([tool]);
    let id = app.create("/v1/ext/agent", body).await;
    let agent = app.get(&format!("/v1/ext/agent/{id}")).await.json();
    assert_eq!(agent["guardrail"].as_array().unwrap().len(), 2);
    assert_eq!(agent["guardrail"][0]["key"], "no_medical_advice");
    assert_eq!(agent["guardrail"][0]["prompt"], "Refuse medical advice.");
    assert_eq!(agent["knowledge_base"][0]["name"], "FAQ");
    assert_eq!(agent["mcp"][0]["request_config"]["url"], "https://mcp.example.com/mcp");
    assert_eq!(agent["tool"][0]["request_config"]["method"], "GET");

    assert_eq!(app.delete(&format!("/v1/ext/guardrail/{guardrail}")).await.status, StatusCode::OK);
    let agent = app.get(&format!("/v1/ext/agent/{id}")).await.json();
    assert_eq!(agent["guardrail"].as_array().unwrap().len(), 1);
    assert_eq!(agent["guardrail"][0]["id"], second);
    assert_eq!(agent["guardrail_ids"], json!([guardrail, second]), "the reference stays in place");

    let unknown = app.post("/v1/ext/agent", json!({ "agent_name": "X", "guardrail_ids": [guardrail] })).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert!(unknown.json()["error"].as_str().unwrap().contains("guardrail_ids"));
}

/// `llm.model` may name a GGUF file in the models directory: a runnable one (the fetched SmolLM2, by its path)
/// is stored as named; a file elsewhere is refused at creation, for agents and templates (a file there that
/// is no runnable model: `tests/tests/error_bodies.rs`, with an allowed directory).
async fn a_gguf_of_ones_own_is_checked_when_it_is_named(app: TestApp) {
    let smollm2 = confab_models::default_models_dir().join(confab_models::paths::SMOLLM2_Q8).display().to_string();
    let agent = |model: &str| {
        json!({ "agent_name": "Own", "agent_system_prompt": "Be brief.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "local", "model": model } } }] })
    };
    let id = app.create("/v1/ext/agent", agent(&smollm2)).await;
    let stored = app.get(&format!("/v1/ext/agent/{id}")).await.json();
    assert_eq!(stored["avatars"][0]["config"]["llm"], json!({ "provider": "local", "model": smollm2 }));

    // A file outside the models directory (and no directory is allowed here) is refused as a name that
    // names nothing, whether it exists or not, and the models directory is not named.
    let dir = tempfile::tempdir().unwrap();
    let not_gguf = dir.path().join("weights.gguf");
    std::fs::write(&not_gguf, b"these are not weights").unwrap();
    let not_gguf = not_gguf.display().to_string();
    let refused = |name: &str| {
        format!(
            "Invalid request body: avatars[0].config.llm.model: {name} cannot be used: no such model: name one of qwen2.5-coder-0.5b-instruct, smollm2-135m-instruct or a GGUF file in the models directory (by its name, or a path inside it) or in a directory the server allows"
        )
    };
    for name in [not_gguf.as_str(), "no-such-model", "/etc/passwd", "../../etc/passwd"] {
        let response = app.post("/v1/ext/agent", agent(name)).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{}", response.text());
        assert_eq!(response.json(), json!({ "error": refused(name) }));
    }

    let template = json!({ "name": "Own", "system_prompt": "Be brief.", "config": { "llm": { "provider": "local", "model": not_gguf } } });
    let response = app.post("/v1/ext/template", template).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST, "{}", response.text());
    assert!(response.json()["error"].as_str().unwrap().starts_with("Invalid request body: config.llm.model: "));
}
