//! Tools: HTTP APIs the agent's language model may call, described by a function schema.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::extract::{ApiJson, parse_id};
use crate::pagination::{PageQuery, with_total};
use crate::store::StoredRecord;
use crate::store::collection::TOOLS;
use crate::validate;

const NOT_FOUND: &str = "Tool not found";
/// The tool types this server runs.
pub const TOOL_TYPES: &[&str] = &["tool.api"];
pub const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ToolFields {
    #[serde(rename = "type", default = "default_tool_type")]
    pub tool_type: String,
    pub schema: FunctionSchema,
    pub request_config: ToolRequestConfig,
    #[serde(default)]
    pub event_messages: EventMessages,
}

fn default_tool_type() -> String {
    "tool.api".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FunctionSchema {
    /// Always `function`.
    #[serde(rename = "type", default = "default_function")]
    pub schema_type: String,
    /// 1–64 characters of `a-z A-Z 0-9 _ -`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: FunctionParameters,
}

fn default_function() -> String {
    "function".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FunctionParameters {
    /// Always `object`.
    #[serde(rename = "type", default = "default_object")]
    pub parameters_type: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub properties: serde_json::Map<String, Value>,
    #[serde(default)]
    pub required: Vec<String>,
}

impl Default for FunctionParameters {
    fn default() -> Self {
        FunctionParameters { parameters_type: default_object(), properties: Default::default(), required: vec![] }
    }
}

fn default_object() -> String {
    "object".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ToolRequestConfig {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct EventMessages {
    #[serde(default)]
    pub on_start: SpokenMessage,
    #[serde(default)]
    pub on_success: SpokenMessage,
    #[serde(default)]
    pub on_error: SpokenMessage,
    #[serde(default)]
    pub on_delay: DelayMessage,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct SpokenMessage {
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct DelayMessage {
    /// Seconds without a response before `message` is spoken.
    #[serde(default)]
    pub delay: f64,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Tool {
    pub id: String,
    #[serde(flatten)]
    pub fields: ToolFields,
    pub created_at: String,
    pub updated_at: String,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_tool, list_tools)).routes(routes!(get_tool, delete_tool))
}

pub fn to_tool(record: &StoredRecord) -> Result<Tool, sqlx::Error> {
    Ok(Tool {
        id: record.id.clone(),
        fields: record.fields()?,
        created_at: record.created_at.clone(),
        updated_at: record.updated_at.clone(),
    })
}

fn validate_tool(mut fields: ToolFields) -> ApiResult<ToolFields> {
    validate::one_of("type", &fields.tool_type, TOOL_TYPES)?;
    validate::one_of("schema.type", &fields.schema.schema_type, &["function"])?;
    let Some(name) = validate::function_name_text(&fields.schema.name).map(str::to_string) else {
        return Err(ApiError::bad_request(
            "Invalid request body: schema.name must be 1-64 characters of letters, digits, _ or -",
        ));
    };
    fields.schema.name = name;
    validate::max_chars("schema.description", &fields.schema.description, validate::MAX_TEXT_CHARS)?;
    validate::one_of("schema.parameters.type", &fields.schema.parameters.parameters_type, &["object"])?;
    for required in &fields.schema.parameters.required {
        if !fields.schema.parameters.properties.contains_key(required) {
            return Err(ApiError::bad_request(format!(
                "Invalid request body: schema.parameters.required names \"{required}\", which is not in properties"
            )));
        }
    }
    fields.request_config.method = fields.request_config.method.to_ascii_uppercase();
    validate::one_of("request_config.method", &fields.request_config.method, METHODS)?;
    validate::http_url("request_config.url", &fields.request_config.url)?;
    if !(fields.event_messages.on_delay.delay.is_finite() && fields.event_messages.on_delay.delay >= 0.0) {
        return Err(ApiError::bad_request(
            "Invalid request body: event_messages.on_delay.delay must be a non-negative number",
        ));
    }
    Ok(fields)
}

#[utoipa::path(post, path = "/v1/ext/tool", tag = "tools", request_body = ToolFields,
    responses((status = 200, description = "`{id, message: \"Tool created successfully\"}`"), (status = 400), (status = 401)))]
async fn create_tool(State(state): State<AppState>, ApiJson(input): ApiJson<ToolFields>) -> ApiResult<Json<Value>> {
    let fields = validate_tool(input)?;
    let record = StoredRecord::new(uuid::Uuid::new_v4().to_string(), &fields.schema.name, &fields);
    TOOLS.insert(&state.db.pool, &record).await.map_err(ApiError::internal("Failed to create tool"))?;
    Ok(Json(json!({ "id": record.id, "message": "Tool created successfully" })))
}

#[utoipa::path(get, path = "/v1/ext/tool", tag = "tools", params(PageQuery), responses((status = 200, body = [Tool]), (status = 401)))]
async fn list_tools(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<axum::response::Response> {
    let failed = ApiError::internal("Failed to retrieve tool details");
    let (records, total) = TOOLS.list(&state.db, None, query.page()?).await.map_err(failed)?;
    let tools = records.iter().map(to_tool).collect::<Result<Vec<_>, _>>();
    Ok(with_total(tools.map_err(ApiError::internal("Failed to retrieve tool details"))?, total))
}

#[utoipa::path(get, path = "/v1/ext/tool/{id}", tag = "tools",
    responses((status = 200, body = Tool), (status = 404, description = "`{error: \"Tool not found\"}`")))]
async fn get_tool(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Tool>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    let failed = ApiError::internal("Failed to retrieve tool details");
    let record = TOOLS.get(&state.db, &id).await.map_err(failed)?.ok_or(ApiError::NotFound(NOT_FOUND))?;
    Ok(Json(to_tool(&record).map_err(ApiError::internal("Failed to retrieve tool details"))?))
}

#[utoipa::path(delete, path = "/v1/ext/tool/{id}", tag = "tools",
    responses((status = 200, description = "`{id, message: \"Tool deleted successfully\"}`"), (status = 404, description = "`{error: \"Tool not found\"}`")))]
async fn delete_tool(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    if !TOOLS.delete(&state.db.pool, &id).await.map_err(ApiError::internal("Failed to delete tool"))? {
        return Err(ApiError::NotFound(NOT_FOUND));
    }
    Ok(Json(json!({ "id": id, "message": "Tool deleted successfully" })))
}
