use axum::http::StatusCode;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(
    keys_are_derived_and_suffixed_on_collision,
    put_is_a_full_replace_that_keeps_the_key,
    missing_guardrails_answer_exact_message,
    callback_url_is_validated,
    the_unpaged_lists_are_paged_with_a_first_page_of_100
);

/// Issue 10, defect 11: guardrails, tools, MCP configurations and knowledge bases take `offset`/`perpage`
/// like the agent list, with a first page of 100 by default, and say how many there are.
async fn the_unpaged_lists_are_paged_with_a_first_page_of_100(app: TestApp) {
    for name in ["One", "Two", "Three"] {
        app.create("/v1/ext/guardrail", json!({ "name": name })).await;
        app.create("/v1/ext/kb", json!({ "name": name })).await;
    }
    for path in ["/v1/ext/guardrail", "/v1/ext/kb"] {
        let all = app.get(path).await;
        assert_eq!((all.json().as_array().unwrap().len(), all.total_count()), (3, 3), "{path}");
        let page = app.get(&format!("{path}?perpage=2&offset=2")).await;
        assert_eq!((page.json().as_array().unwrap().len(), page.total_count()), (1, 3), "{path}");
        let refused = app.get(&format!("{path}?perpage=101")).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(refused.json(), json!({ "error": "Invalid query: perpage must be between 1 and 100" }));
    }
    for path in ["/v1/ext/tool", "/v1/ext/mcp"] {
        let empty = app.get(path).await;
        assert_eq!((empty.json(), empty.total_count()), (json!([]), 0), "{path}");
    }
}

async fn keys_are_derived_and_suffixed_on_collision(app: TestApp) {
    let mut keys = Vec::new();
    for _ in 0..3 {
        let response = app.post("/v1/ext/guardrail", json!({ "name": "No Medical-Advice! x", "prompt": "p" })).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text());
        assert_eq!(response.json()["message"], "Guardrail created");
        keys.push(response.json()["key"].as_str().unwrap().to_string());
    }
    assert_eq!(keys, ["no_medical_advice__x", "no_medical_advice__x_2", "no_medical_advice__x_3"]);
    let list = app.get("/v1/ext/guardrail").await.json();
    assert_eq!(list.as_array().unwrap().len(), 3);
    let ids: Vec<&str> = list.as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect();
    // The key of a deleted guardrail is free again.
    let first = list.as_array().unwrap().iter().find(|g| g["key"] == "no_medical_advice__x").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ids.contains(&first.as_str()));
    app.delete(&format!("/v1/ext/guardrail/{first}")).await;
    let again = app.post("/v1/ext/guardrail", json!({ "name": "NO MEDICAL ADVICE! X", "prompt": "p" })).await;
    assert_eq!(again.json()["key"], "no_medical_advice__x");
}

async fn put_is_a_full_replace_that_keeps_the_key(app: TestApp) {
    let id = app
        .create(
            "/v1/ext/guardrail",
            json!({ "name": "Finance", "category": "compliance", "prompt": "No stock tips.", "response_message": "I can't help with that.", "callback_url": "https://hooks.example.com/g" }),
        )
        .await;
    let before = app.get(&format!("/v1/ext/guardrail/{id}")).await.json();
    assert_eq!(before["key"], "finance");
    assert_eq!(before["category"], "compliance");
    let updated = app
        .put(&format!("/v1/ext/guardrail/{id}"), json!({ "name": "Money Talk", "prompt": "No investment advice." }))
        .await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(updated.json(), json!({ "id": id, "message": "Guardrail updated" }));
    let after = app.get(&format!("/v1/ext/guardrail/{id}")).await.json();
    assert_eq!(after["key"], "finance", "key never changes");
    assert_eq!(after["name"], "Money Talk");
    assert_eq!(after["prompt"], "No investment advice.");
    assert_eq!(after["category"], "", "left out means cleared");
    assert_eq!(after["response_message"], "");
    assert_eq!(after["callback_url"], "");
    assert_eq!(after["created_at"], before["created_at"]);
    // Even the rule may be left out: it is cleared; the label may not.
    let cleared = app.put(&format!("/v1/ext/guardrail/{id}"), json!({ "name": "Money Talk" })).await;
    assert_eq!(cleared.status, StatusCode::OK);
    assert_eq!(app.get(&format!("/v1/ext/guardrail/{id}")).await.json()["prompt"], "");
    let nameless = app.put(&format!("/v1/ext/guardrail/{id}"), json!({ "prompt": "x" })).await;
    assert_eq!(nameless.status, StatusCode::BAD_REQUEST);
    assert_ne!(after["updated_at"], before["updated_at"]);
}

async fn missing_guardrails_answer_exact_message(app: TestApp) {
    let not_found = json!({ "message": "Guardrail not found" });
    for id in ["5b0c1f8e-9a53-4a8e-8f3e-1c1a0c6f0b11", "abc"] {
        let put = app.put(&format!("/v1/ext/guardrail/{id}"), json!({ "name": "n", "prompt": "p" })).await;
        assert_eq!((put.status, put.json()), (StatusCode::NOT_FOUND, not_found.clone()));
        let delete = app.delete(&format!("/v1/ext/guardrail/{id}")).await;
        assert_eq!((delete.status, delete.json()), (StatusCode::NOT_FOUND, not_found.clone()));
    }
    let id = app.create("/v1/ext/guardrail", json!({ "name": "Tmp", "prompt": "p" })).await;
    let deleted = app.delete(&format!("/v1/ext/guardrail/{id}")).await;
    assert_eq!(deleted.json(), json!({ "id": id, "message": "Guardrail deleted" }));
    assert_eq!(app.delete(&format!("/v1/ext/guardrail/{id}")).await.json(), not_found);
}

async fn callback_url_is_validated(app: TestApp) {
    for url in ["javascript:alert(1)", "example.com/hook", "http://"] {
        let response = app.post("/v1/ext/guardrail", json!({ "name": "G", "prompt": "p", "callback_url": url })).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{url}");
    }
    let ok =
        app.post("/v1/ext/guardrail", json!({ "name": "G", "prompt": "p", "callback_url": "", "category": "" })).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(app.get("/v1/ext/guardrail").await.json().as_array().unwrap().len(), 1);
}
