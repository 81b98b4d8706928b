//! Tools: HTTP APIs the agent's language model may call, described by a function schema.

use axum::Json;
use axum::extract::{Path, State};

use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::ApiQuery;
use crate::extract::{ApiJson, parse_id};
use crate::pagination::{PageQuery, with_total};
use confab_store::StoredRecord;
use confab_store::collection::TOOLS;
use confab_store::error::{ApiError, ApiResult};
use confab_store::records::tools::{METHODS, TOOL_TYPES, Tool, ToolFields, to_tool};
use confab_store::validate;

const NOT_FOUND: &str = "Tool not found";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_tool, list_tools)).routes(routes!(get_tool, delete_tool))
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
