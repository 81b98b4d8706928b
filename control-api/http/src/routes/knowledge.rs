//! Knowledge bases and their text documents. Documents are chunked and embedded as they are added
//! (`store::knowledge`); retrieval during conversations belongs to the engine (`confab_engine::knowledge`).

use axum::Json;
use axum::extract::{Path, State};

use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::ApiQuery;
use crate::extract::{ApiJson, parse_id};
use crate::pagination::{PageQuery, with_total};
use confab_store::collection::KNOWLEDGE_BASES;
use confab_store::error::{ApiError, ApiResult};
use confab_store::records::knowledge_bases::{
    AddDocuments, KnowledgeBase, KnowledgeBaseFields, KnowledgeBaseWithDocuments, MAX_DOCUMENT_CHARS,
    MAX_DOCUMENTS_PER_REQUEST, to_knowledge_base,
};
use confab_store::validate;
use confab_store::{StoredRecord, knowledge, knowledge_documents};

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
    let documents = knowledge_documents::summaries(&state.db, &id).await.map_err(ApiError::internal(READ_FAILED))?;
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
    let added = knowledge_documents::add(&state.db, &id, &input.documents).await;
    let document_ids =
        added.map_err(ApiError::internal("Failed to add documents"))?.ok_or(ApiError::NotFoundMessage(NOT_FOUND))?;
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
    knowledge_documents::delete_all(&mut *tx, &id).await.map_err(ApiError::internal(READ_FAILED))?;
    knowledge::delete_chunks(&mut tx, &id).await.map_err(ApiError::internal(READ_FAILED))?;
    tx.commit().await.map_err(ApiError::internal(READ_FAILED))?;
    Ok(Json(json!({ "id": id, "message": "Knowledge base deleted successfully" })))
}
