//! Malformed, mistyped, missing, oversized and out-of-range input: a clear 4xx in SPEC.md's shape,
//! never a 500, and nothing written.

use axum::http::StatusCode;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(
    agent_bodies_are_validated_and_nothing_is_written,
    list_queries_are_validated,
    oversized_bodies_get_413,
    nul_characters_are_refused_alike_on_both_databases
);

/// Issue 10, defect 5: PostgreSQL cannot store a NUL in text, SQLite can; both answer 400 naming the field.
async fn nul_characters_are_refused_alike_on_both_databases(app: TestApp) {
    let kb = app.create("/v1/ext/kb", json!({ "name": "Docs" })).await;
    let agent = app.create("/v1/ext/agent", json!({ "agent_name": "A" })).await;
    let documents = format!("/v1/ext/kb/{kb}/documents");
    let cases = [
        ("/v1/ext/agent", json!({ "agent_name": "A\u{0}B" }), "agent_name"),
        ("/v1/ext/guardrail", json!({ "name": "No\u{0}pe" }), "name"),
        ("/v1/ext/conversation", json!({ "agent_id": agent, "user_name": "\u{0}" }), "user_name"),
        (documents.as_str(), json!({ "documents": [{ "title": "T\u{0}", "content": "x" }] }), "documents[0].title"),
    ];
    for (path, body, field) in cases {
        let response = app.post(path, body).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{path}: {}", response.text());
        assert_eq!(error_of(&response), format!("Invalid request body: {field} must not contain a NUL character"));
    }
    let search = app.get("/v1/ext/conversation?search=a%00b").await;
    assert_eq!(search.status, StatusCode::BAD_REQUEST, "{}", search.text());
    assert_eq!(error_of(&search), "Invalid query: search must not contain a NUL character");
    let agents = app.get("/v1/ext/agent?search=%00").await;
    assert_eq!(agents.status, StatusCode::BAD_REQUEST, "{}", agents.text());
    // Nothing was written.
    assert_eq!(app.get("/v1/ext/guardrail").await.json(), json!([]));
}

fn error_of(response: &crate::support::TestResponse) -> String {
    response.json()["error"].as_str().unwrap_or_else(|| panic!("no error field: {}", response.text())).to_string()
}

async fn agent_bodies_are_validated_and_nothing_is_written(app: TestApp) {
    let cases = [
        (json!({}), "agent_name"),
        (json!({ "agent_name": 42 }), "invalid type"),
        (json!({ "agent_name": "   " }), "agent_name must not be empty"),
        (json!({ "agent_name": "x".repeat(201) }), "agent_name is longer than 200"),
        (json!({ "agent_name": "A", "callback_events": ["call_ended", "lunch"] }), "callback_events must be one of"),
        (json!({ "agent_name": "A", "callback_url": "ftp://example.com" }), "callback_url must be an http(s) URL"),
        (json!({ "agent_name": "A", "callback_url": "not a url" }), "callback_url must be an http(s) URL"),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "skynet" } } }] }),
            "avatars[0].config.llm.provider must be one of",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "min_endpointing_delay": -1 } } }] }),
            "min_endpointing_delay must be between",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "min_endpointing_delay": 2, "max_endpointing_delay": 1 } } }] }),
            "must not be less than",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "turn_handling": "eager" } } }] }),
            "turn_handling must be one of",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "backchannels": "Ignore" } } }] }),
            "avatars[0].config.stt.backchannels must be one of ignore, interrupt",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "noise_suppression": "yes" } } }] }),
            "avatars[0].config.stt.noise_suppression must be one of auto, on, off",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "other_voices": "mute" } } }] }),
            "avatars[0].config.stt.other_voices must be one of ignore, hear",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "openai", "model": "gpt-4o-mini", "fallbacks": [{ "provider": "openai", "model": "gpt-4o-mini" }] } } }] }),
            "avatars[0].config.llm.fallbacks[0] is the same as the primary",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "openai", "fallbacks": [{ "provider": "groq" }, { "provider": "groq" }] } } }] }),
            "avatars[0].config.llm.fallbacks[1] is the same as fallbacks[0]",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "openai", "fallbacks": [{ "provider": "groq", "fallbacks": [{ "provider": "local" }] }] } } }] }),
            "avatars[0].config.llm.fallbacks[0].fallbacks belongs to the primary configuration only",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "provider": "deepgram", "fallbacks": [{ "provider": "local", "min_endpointing_delay": 0.3 }] } } }] }),
            "avatars[0].config.stt.fallbacks[0].min_endpointing_delay belongs to the primary configuration only",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "tts": { "provider": "elevenlabs", "first_response_timeout": 0 } } }] }),
            "avatars[0].config.tts.first_response_timeout must be more than 0 and at most 60 seconds",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "openai", "hedge_after": 0.5 } } }] }),
            "avatars[0].config.llm.hedge_after needs a fallback to ask",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "custom", "endpoint": "a b" } } }] }),
            "avatars[0].config.llm.endpoint must be 1 to 64 letters",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "llm": { "provider": "openai", "fallbacks": [{ "provider": "nope" }] } } }] }),
            "avatars[0].config.llm.fallbacks[0].provider must be one of",
        ),
        (
            json!({ "agent_name": "A", "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "model": "whisper-large" } } }] }),
            "avatars[0].config.stt.model must be one of moonshine-base, whisper-tiny.en; got \"whisper-large\"",
        ),
        (json!({ "agent_name": "A", "config": { "maxCallDuration": -5 } }), "maxCallDuration"),
        (json!({ "agent_name": "A", "tool_ids": ["not-a-uuid"] }), "tool_ids contains"),
        (json!({ "agent_name": "A", "record": "yes" }), "invalid type"),
    ];
    for (body, expected) in cases {
        let response = app.post("/v1/ext/agent", body.clone()).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{body}");
        let error = error_of(&response);
        assert!(error.starts_with("Invalid request body"), "{error}");
        assert!(error.contains(expected), "{body}: {error}");
    }
    let malformed = app.post_raw("/v1/ext/agent", "application/json", "{\"agent_name\": ").await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&malformed), "Invalid request body: malformed JSON");
    let not_json = app.post_raw("/v1/ext/agent", "text/plain", "agent_name=A").await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);
    assert!(error_of(&not_json).contains("Content-Type"));
    assert_eq!(app.get("/v1/ext/agent").await.total_count(), 0, "nothing was written");
    // null stands for "left out" on optional fields.
    let nulls = app
        .post("/v1/ext/agent", json!({ "agent_name": "N", "callback_url": null, "avatars": null, "config": null }))
        .await;
    assert_eq!(nulls.status, StatusCode::OK, "{}", nulls.text());
}

async fn list_queries_are_validated(app: TestApp) {
    for query in ["perpage=0", "perpage=101", "perpage=1000000", "offset=-1", "perpage=abc", "offset=1.5"] {
        for path in ["/v1/ext/agent", "/v1/ext/conversation", "/v1/ext/template"] {
            let response = app.get(&format!("{path}?{query}")).await;
            assert_eq!(response.status, StatusCode::BAD_REQUEST, "{path}?{query}");
            assert!(error_of(&response).starts_with("Invalid query"), "{}", response.text());
        }
    }
    for query in ["from=2024-13-01", "to=yesterday", "type=webinar"] {
        let response = app.get(&format!("/v1/ext/conversation?{query}")).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
    }
    let long_search = format!("/v1/ext/agent?search={}", "a".repeat(201));
    assert_eq!(app.get(&long_search).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.get("/v1/ext/agent?perpage=100&offset=0").await.status, StatusCode::OK);
}

async fn oversized_bodies_get_413(app: TestApp) {
    let prompt = "x".repeat(confab_http::MAX_BODY_BYTES + 10);
    let response = app.post("/v1/ext/agent", json!({ "agent_name": "Big", "agent_system_prompt": prompt })).await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(response.json(), json!({ "error": "Request body too large" }));
    let template = app.post("/v1/ext/agentbytemplate", json!({ "template_id": prompt })).await;
    assert_eq!(template.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(app.get("/v1/ext/agent").await.total_count(), 0);
}
