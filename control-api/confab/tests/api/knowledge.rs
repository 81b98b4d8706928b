use axum::http::StatusCode;
use confab_engine::knowledge::Embedder;
use confab_store::knowledge;
use serde_json::json;

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(knowledge_base_lifecycle, documents_are_chunked_embedded_and_retrieved);

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

/// Documents added through the API are chunked and embedded (the real all-MiniLM-L6-v2), stored in the
/// database, and loaded back as an index that finds the chunk answering a question; deleting the
/// knowledge base removes its chunks.
async fn documents_are_chunked_embedded_and_retrieved(app: TestApp) {
    let id = app.create("/v1/ext/kb", json!({ "name": "Front desk" })).await;
    let documents = json!({ "documents": [
        { "title": "Hours", "content": "# Opening hours\n\nThe library opens at nine in the morning and closes at six in the evening. On Sundays it is closed." },
        { "title": "Parking", "content": "Visitors can park their cars in the underground garage on Elm Street. The first two hours are free." },
        { "title": "Cards", "content": "A library card is free for residents. Bring a photo ID and proof of address to the front desk." },
    ] });
    let added = app.post(&format!("/v1/ext/kb/{id}/documents"), documents).await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.text());
    let models = confab_models::default_models_dir();
    let knowledge = knowledge::load(&app.db, &models, std::slice::from_ref(&id)).await.unwrap().unwrap();
    assert_eq!(knowledge.len(), 3, "one chunk per short document");
    let embedder = Embedder::load(&models).unwrap();
    for (question, title) in [
        ("Where can I leave my car?", "Parking"),
        ("When do you open tomorrow?", "Hours"),
        ("What do I need to get a library card?", "Cards"),
    ] {
        let query = embedder.embed(&[question]).unwrap()[0];
        let hits = knowledge.search(&query, 3, 0.0);
        assert_eq!(hits[0].chunk.title, title, "{question}: {hits:?}");
        assert_eq!(hits[0].chunk.knowledge_base_id, id);
    }
    let hours = knowledge.search(&embedder.embed(&["opening hours"]).unwrap()[0], 1, 0.0);
    assert!(hours[0].chunk.text.starts_with("Opening hours\n\n"), "the heading leads its chunk");

    app.delete(&format!("/v1/ext/kb/{id}")).await;
    let left = sqlx::query("SELECT COUNT(*) AS n FROM knowledge_chunks").fetch_one(&app.db.pool).await.unwrap();
    assert_eq!(sqlx::Row::try_get::<i64, _>(&left, "n").unwrap(), 0);
}
