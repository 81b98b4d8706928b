//! Knowledge bases and their text documents. Documents are chunked and embedded as they are added
//! (`store::knowledge`); retrieval during conversations belongs to the engine (`confab_engine::knowledge`).

use axum::Json;
use axum::extract::{Path, State};

use serde_json::{Value, json};
use sqlx::Row;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::ApiQuery;
use crate::extract::{ApiJson, parse_id};
use crate::pagination::{PageQuery, with_total};
use confab_store::collection::KNOWLEDGE_BASES;
use confab_store::error::{ApiError, ApiResult};
use confab_store::records::knowledge_bases::{
    AddDocuments, DocumentSummary, KnowledgeBase, KnowledgeBaseFields, KnowledgeBaseWithDocuments, MAX_DOCUMENT_CHARS,
    MAX_DOCUMENTS_PER_REQUEST, to_knowledge_base,
};
use confab_store::validate;
use confab_store::{StoredRecord, knowledge};

const NOT_FOUND: &str = "Knowledge Base not found";
const READ_FAILED: &str = "Failed to retrieve knowledge base";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_knowledge_base, list_knowledge_bases))
        .routes(routes!(get_knowledge_base, delete_knowledge_base))
        .routes(routes!(add_documents))
}

#[utoipa::path(post, path = "/v1/ext/kb", tag = "knowledge", request_body = KnowledgeBaseFields,
    responses((status = 200, description = "`{id, message: \"Knowledge base created successfully\"}`"), (status = 400), (status = 401)))]
async fn create_knowledge_base(
    State(state): State<AppState>,
    ApiJson(fields): ApiJson<KnowledgeBaseFields>,
) -> ApiResult<Json<Value>> {
    validate::required_name("name", &fields.name)?;
    validate::max_chars("description", &fields.description, validate::MAX_TEXT_CHARS)?;
    let record = StoredRecord::new(uuid::Uuid::new_v4().to_string(), &fields.name, &fields);
    KNOWLEDGE_BASES
        .insert(&state.db.pool, &record)
        .await
        .map_err(ApiError::internal("Failed to create knowledge base"))?;
    Ok(Json(json!({ "id": record.id, "message": "Knowledge base created successfully" })))
}

#[utoipa::path(get, path = "/v1/ext/kb", tag = "knowledge", params(PageQuery), responses((status = 200, body = [KnowledgeBase]), (status = 401)))]
async fn list_knowledge_bases(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<axum::response::Response> {
    let (records, total) =
        KNOWLEDGE_BASES.list(&state.db, None, query.page()?).await.map_err(ApiError::internal(READ_FAILED))?;
    let mut bases = Vec::with_capacity(records.len());
    for record in &records {
        bases.push(to_knowledge_base(&state.db, record).await.map_err(ApiError::internal(READ_FAILED))?);
    }
    Ok(with_total(bases, total))
}

#[utoipa::path(get, path = "/v1/ext/kb/{id}", tag = "knowledge",
    responses((status = 200, body = KnowledgeBaseWithDocuments), (status = 404, description = "`{message: \"Knowledge Base not found\"}`")))]
async fn get_knowledge_base(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<KnowledgeBaseWithDocuments>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    let record = KNOWLEDGE_BASES
        .get(&state.db, &id)
        .await
        .map_err(ApiError::internal(READ_FAILED))?
        .ok_or(ApiError::NotFoundMessage(NOT_FOUND))?;
    let knowledge_base = to_knowledge_base(&state.db, &record).await.map_err(ApiError::internal(READ_FAILED))?;
    let rows = sqlx::query(
        "SELECT id, title, content, created_at FROM knowledge_documents WHERE knowledge_base_id = $1 ORDER BY position",
    )
    .bind(&id)
    .fetch_all(&state.db.pool)
    .await
    .map_err(ApiError::internal(READ_FAILED))?;
    let documents = rows
        .iter()
        .map(|row| {
            let content: String = row.try_get("content")?;
            Ok(DocumentSummary {
                id: row.try_get("id")?,
                title: row.try_get("title")?,
                characters: content.chars().count() as i64,
                created_at: row.try_get("created_at")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()
        .map_err(ApiError::internal(READ_FAILED))?;
    Ok(Json(KnowledgeBaseWithDocuments { knowledge_base, documents }))
}

/// Add text documents to a knowledge base.
#[utoipa::path(post, path = "/v1/ext/kb/{id}/documents", tag = "knowledge", request_body = AddDocuments,
    responses((status = 200, description = "`{id, document_ids, message: \"Documents added successfully\"}`"), (status = 400), (status = 404)))]
async fn add_documents(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<AddDocuments>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    if input.documents.is_empty() || input.documents.len() > MAX_DOCUMENTS_PER_REQUEST {
        return Err(ApiError::bad_request(format!(
            "Invalid request body: documents must hold 1 to {MAX_DOCUMENTS_PER_REQUEST} documents"
        )));
    }
    for document in &input.documents {
        validate::max_chars("documents[].title", &document.title, validate::MAX_NAME_CHARS)?;
        validate::non_blank("documents[].content", &document.content)?;
        validate::max_chars("documents[].content", &document.content, MAX_DOCUMENT_CHARS)?;
    }
    let failed = ApiError::internal("Failed to add documents");
    let mut tx = state.db.begin_write().await.map_err(failed)?;
    let exists = sqlx::query("SELECT COUNT(*) AS n FROM knowledge_bases WHERE id = $1")
        .bind(&id)
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get::<i64, _>("n"))
        .map_err(ApiError::internal("Failed to add documents"))?;
    if exists == 0 {
        return Err(ApiError::NotFoundMessage(NOT_FOUND));
    }
    let now = confab_store::wall_clock::now_iso();
    let first_position = sqlx::query(
        "SELECT COALESCE(MAX(position), 0) + 1 AS next FROM knowledge_documents WHERE knowledge_base_id = $1",
    )
    .bind(&id)
    .fetch_one(&mut *tx)
    .await
    .and_then(|row| row.try_get::<i64, _>("next"))
    .map_err(ApiError::internal("Failed to add documents"))?;
    let mut document_ids = Vec::with_capacity(input.documents.len());
    for (position, document) in (first_position..).zip(&input.documents) {
        let document_id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO knowledge_documents (id, knowledge_base_id, title, content, position, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&document_id)
        .bind(&id)
        .bind(&document.title)
        .bind(&document.content)
        .bind(position)
        .bind(&now)
        .execute(&mut *tx)
        .await
        .map_err(ApiError::internal("Failed to add documents"))?;
        document_ids.push(document_id);
    }
    tx.commit().await.map_err(ApiError::internal("Failed to add documents"))?;
    // Chunked and embedded now; if that fails (the model is missing), the first conversation that needs
    // the documents indexes them.
    for (document_id, document) in document_ids.iter().zip(&input.documents) {
        let indexed =
            knowledge::index_document(&state.db, &state.config.models_dir, &id, document_id, &document.content).await;
        if let Err(err) = indexed {
            tracing::warn!(knowledge_base = %id, document = %document_id, error = %err, "document not indexed yet");
        }
    }
    Ok(Json(json!({ "id": id, "document_ids": document_ids, "message": "Documents added successfully" })))
}

#[utoipa::path(delete, path = "/v1/ext/kb/{id}", tag = "knowledge",
    responses((status = 200, description = "`{id, message: \"Knowledge base deleted successfully\"}`"), (status = 404, description = "`{message: \"Knowledge Base not found\"}`"), (status = 500, description = "`{error: \"Failed to retrieve knowledge base\"}`")))]
async fn delete_knowledge_base(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    let mut tx = state.db.begin_write().await.map_err(ApiError::internal(READ_FAILED))?;
    if !KNOWLEDGE_BASES.delete(&mut *tx, &id).await.map_err(ApiError::internal(READ_FAILED))? {
        return Err(ApiError::NotFoundMessage(NOT_FOUND));
    }
    sqlx::query("DELETE FROM knowledge_documents WHERE knowledge_base_id = $1")
        .bind(&id)
        .execute(&mut *tx)
        .await
        .map_err(ApiError::internal(READ_FAILED))?;
    knowledge::delete_chunks(&mut tx, &id).await.map_err(ApiError::internal(READ_FAILED))?;
    tx.commit().await.map_err(ApiError::internal(READ_FAILED))?;
    Ok(Json(json!({ "id": id, "message": "Knowledge base deleted successfully" })))
}
