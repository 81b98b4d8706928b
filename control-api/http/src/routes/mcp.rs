//! MCP configurations: tool servers the agent connects to (streamable HTTP or SSE).

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
use confab_store::collection::MCP_SERVERS;
use confab_store::error::{ApiError, ApiResult};
use confab_store::records::mcp::{MCP_TYPES, Mcp, McpFields, to_mcp};
use confab_store::validate;

const NOT_FOUND: &str = "MCP not found";
const READ_FAILED: &str = "Failed to retrieve MCP details";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_mcp, list_mcp)).routes(routes!(get_mcp, delete_mcp))
}

#[utoipa::path(post, path = "/v1/ext/mcp", tag = "mcp", request_body = McpFields,
    responses((status = 200, description = "`{id, message: \"MCP created successfully\"}`"), (status = 400), (status = 401)))]
async fn create_mcp(State(state): State<AppState>, ApiJson(fields): ApiJson<McpFields>) -> ApiResult<Json<Value>> {
    validate::required_name("name", &fields.name)?;
    validate::max_chars("description", &fields.description, validate::MAX_TEXT_CHARS)?;
    validate::one_of("type", &fields.mcp_type, MCP_TYPES)?;
    validate::http_url("request_config.url", &fields.request_config.url)?;
    let record = StoredRecord::new(uuid::Uuid::new_v4().to_string(), &fields.name, &fields);
    MCP_SERVERS.insert(&state.db.pool, &record).await.map_err(ApiError::internal("Failed to create MCP"))?;
    Ok(Json(json!({ "id": record.id, "message": "MCP created successfully" })))
}

#[utoipa::path(get, path = "/v1/ext/mcp", tag = "mcp",
    params(PageQuery), responses((status = 200, body = [Mcp]), (status = 401), (status = 500, description = "`{error: \"Failed to retrieve MCP details\"}`")))]
async fn list_mcp(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<axum::response::Response> {
    let (records, total) =
        MCP_SERVERS.list(&state.db, None, query.page()?).await.map_err(ApiError::internal(READ_FAILED))?;
    let configs = records.iter().map(to_mcp).collect::<Result<Vec<_>, _>>();
    Ok(with_total(configs.map_err(ApiError::internal(READ_FAILED))?, total))
}

#[utoipa::path(get, path = "/v1/ext/mcp/{id}", tag = "mcp",
    responses((status = 200, body = Mcp), (status = 404, description = "`{error: \"MCP not found\"}`")))]
async fn get_mcp(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Mcp>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    let record = MCP_SERVERS
        .get(&state.db, &id)
        .await
        .map_err(ApiError::internal(READ_FAILED))?
        .ok_or(ApiError::NotFound(NOT_FOUND))?;
    Ok(Json(to_mcp(&record).map_err(ApiError::internal(READ_FAILED))?))
}

#[utoipa::path(delete, path = "/v1/ext/mcp/{id}", tag = "mcp",
    responses((status = 200, description = "`{id, message: \"MCP deleted successfully\"}`"), (status = 404, description = "`{error: \"MCP not found\"}`")))]
async fn delete_mcp(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    if !MCP_SERVERS.delete(&state.db.pool, &id).await.map_err(ApiError::internal("Failed to delete MCP"))? {
        return Err(ApiError::NotFound(NOT_FOUND));
    }
    Ok(Json(json!({ "id": id, "message": "MCP deleted successfully" })))
}
