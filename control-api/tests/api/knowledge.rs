use axum::http::StatusCode;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(knowledge_base_lifecycle);

async fn knowledge_base_lifecycle(app: TestApp) {
    let created = app.post("/v1/ext/kb", json!({ "name": "Handbook", "description": "Staff rules" })).await;
    assert_eq!(created.json()["message"], "Knowledge base created successfully");
    let id = created.json()["id"].as_str().unwrap().to_string();
    let added = app
        .post(&format!("/v1/ext/kb/{id}/documents"), json!({ "documents": [{ "title": "Hours", "content": "Open 9 to 5." }, { "content": "Parking is free." }] }))
        .await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.text());
    assert_eq!(added.json()["document_ids"].as_array().unwrap().len(), 2);
    let kb = app.get(&format!("/v1/ext/kb/{id}")).await.json();
    assert_eq!(kb["name"], "Handbook");
    assert_eq!(kb["document_count"], 2);
    assert_eq!(kb["documents"][0]["title"], "Hours");
    assert_eq!(kb["documents"][0]["characters"], 12);
    assert_eq!(app.get("/v1/ext/kb").await.json()[0]["document_count"], 2);

    let empty = app.post(&format!("/v1/ext/kb/{id}/documents"), json!({ "documents": [] })).await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    let blank = app.post(&format!("/v1/ext/kb/{id}/documents"), json!({ "documents": [{ "content": "  " }] })).await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST);

    let deleted = app.delete(&format!("/v1/ext/kb/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.json(), json!({ "id": id, "message": "Knowledge base deleted successfully" }));
    let not_found = json!({ "message": "Knowledge Base not found" });
    for path in [format!("/v1/ext/kb/{id}"), "/v1/ext/kb/zzz".to_string()] {
        let response = app.delete(&path).await;
        assert_eq!((response.status, response.json()), (StatusCode::NOT_FOUND, not_found.clone()));
        assert_eq!(app.get(&path).await.json(), not_found);
    }
    let orphan = app.post(&format!("/v1/ext/kb/{id}/documents"), json!({ "documents": [{ "content": "x" }] })).await;
    assert_eq!((orphan.status, orphan.json()), (StatusCode::NOT_FOUND, not_found));
}
