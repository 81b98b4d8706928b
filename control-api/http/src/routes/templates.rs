//! Templates: saved shared configuration (prompt, pipeline, attachments) that agents are created from.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::ApiQuery;
use crate::extract::{ApiJson, parse_id};
use crate::pagination::{ListQuery, with_total};
use confab_store::StoredRecord;
use confab_store::agent_config::{Attachments, PipelineConfig, PipelineRules, nullable};
use confab_store::collection::TEMPLATES;
use confab_store::error::{ApiError, ApiResult};
use confab_store::validate;

const NOT_FOUND: &str = "Template not found";
const READ_FAILED: &str = "Failed to retrieve template details";

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TemplateFields {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub system_prompt: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub config: PipelineConfig,
    #[serde(flatten)]
    pub attachments: Attachments,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Template {
    pub id: String,
    #[serde(flatten)]
    pub fields: TemplateFields,
    pub created_at: String,
    pub updated_at: String,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_template, list_templates)).routes(routes!(get_template, delete_template))
}

pub fn to_template(record: &StoredRecord) -> Result<Template, sqlx::Error> {
    Ok(Template {
        id: record.id.clone(),
        fields: record.fields()?,
        created_at: record.created_at.clone(),
        updated_at: record.updated_at.clone(),
    })
}

#[utoipa::path(post, path = "/v1/ext/template", tag = "templates", request_body = TemplateFields,
    responses((status = 200, description = "`{id, message: \"Template created successfully\"}`"), (status = 400), (status = 401)))]
async fn create_template(
    State(state): State<AppState>,
    ApiJson(mut fields): ApiJson<TemplateFields>,
) -> ApiResult<Json<Value>> {
    validate::required_name("name", &fields.name)?;
    validate::max_chars("system_prompt", &fields.system_prompt, validate::MAX_TEXT_CHARS)?;
    fields.config.normalize("config.")?;
    fields.config.check_local_model("config.", &state.config.models_dir)?;
    fields.attachments.validate(&state.db).await?;
    let record = StoredRecord::new(uuid::Uuid::new_v4().to_string(), &fields.name, &fields);
    TEMPLATES.insert(&state.db.pool, &record).await.map_err(ApiError::internal("Failed to create template"))?;
    Ok(Json(json!({ "id": record.id, "message": "Template created successfully" })))
}

#[utoipa::path(get, path = "/v1/ext/template", tag = "templates", params(ListQuery),
    responses((status = 200, body = [Template], headers(("X-Total-Count" = i64))), (status = 400), (status = 401)))]
async fn list_templates(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<axum::response::Response> {
    let (page, search) = (query.page()?, query.search()?);
    let (records, total) = TEMPLATES.list(&state.db, search, page).await.map_err(ApiError::internal(READ_FAILED))?;
    let templates =
        records.iter().map(to_template).collect::<Result<Vec<_>, _>>().map_err(ApiError::internal(READ_FAILED))?;
    Ok(with_total(templates, total))
}

#[utoipa::path(get, path = "/v1/ext/template/{id}", tag = "templates",
    responses((status = 200, body = Template), (status = 404, description = "`{error: \"Template not found\"}`")))]
async fn get_template(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Template>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    let record = TEMPLATES
        .get(&state.db, &id)
        .await
        .map_err(ApiError::internal(READ_FAILED))?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    Ok(Json(to_template(&record).map_err(ApiError::internal(READ_FAILED))?))
}

#[utoipa::path(delete, path = "/v1/ext/template/{id}", tag = "templates",
    responses((status = 200, description = "`{id, message: \"Template deleted successfully\"}`"), (status = 404, description = "`{error: \"Template not found\"}`")))]
async fn delete_template(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    if !TEMPLATES.delete(&state.db.pool, &id).await.map_err(ApiError::internal("Failed to delete template"))? {
        return Err(ApiError::NotFound(NOT_FOUND));
    }
    Ok(Json(json!({ "id": id, "message": "Template deleted successfully" })))
}
