//! The console's own routes, on its session only (never on an API key): who is signed in, API keys
//! (create — the secret shown once —, list, revoke) and a conversation's webhook deliveries. Everything
//! else the console does goes through the public `/v1` API.

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{delete, get};
use axum::{Router, http::StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ConsoleSession;
use crate::AppState;
use confab_store::error::{ApiError, ApiResult};
use confab_store::{api_keys, conversations, webhook_deliveries};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console/api/session", get(who))
        .route("/console/api/keys", get(list_keys).post(create_key))
        .route("/console/api/keys/{id}", delete(revoke_key))
        .route("/console/api/conversations/{id}/webhooks", get(deliveries))
}

fn internal(err: sqlx::Error) -> ApiError {
    ApiError::internal("Internal server error")(err)
}

async fn who(ConsoleSession(claims): ConsoleSession) -> Json<Value> {
    let via = if claims.sub.starts_with("key:") { "key" } else { "link" };
    Json(json!({ "signed_in_with": via, "expires_at": claims.exp }))
}

async fn list_keys(_: ConsoleSession, State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let keys = api_keys::list_keys(&state.db).await.map_err(internal)?;
    let data: Vec<Value> = keys
        .into_iter()
        .map(
            |key| json!({ "id": key.id, "name": key.name, "created_at": key.created_at, "revoked_at": key.revoked_at }),
        )
        .collect();
    Ok(Json(json!({ "data": data })))
}

#[derive(Deserialize)]
struct NewKey {
    name: String,
}

async fn create_key(
    _: ConsoleSession,
    State(state): State<AppState>,
    Json(body): Json<NewKey>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::bad_request("name must be 1-100 characters"));
    }
    let (id, key) = api_keys::create_key(&state.db, name).await.map_err(internal)?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id, "name": name, "key": key }))))
}

async fn revoke_key(
    _: ConsoleSession,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if !api_keys::revoke_key(&state.db, &id).await.map_err(internal)? {
        return Err(ApiError::NotFound("Key not found"));
    }
    Ok(Json(json!({ "id": id, "message": "Key revoked" })))
}

async fn deliveries(
    _: ConsoleSession,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if conversations::get(&state.db, &id).await.map_err(internal)?.is_none() {
        return Err(ApiError::NotFound(crate::routes::conversations::NOT_FOUND));
    }
    let data = webhook_deliveries::of_conversation(&state.db, &id).await.map_err(internal)?;
    Ok(Json(json!({ "data": data })))
}
