//! The API key check: a request is admitted only when its `x-api-key` header (any case) names a live key
//! (`confab_store::api_keys`), or, without one, when it is the console's own request on its session
//! (`crate::console`).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::AppState;
use confab_store::api_keys::key_is_valid;
use confab_store::error::ApiError;

/// Middleware for every `/v1` and `/v2` route: 401 with SPEC.md's body unless the key is valid.
pub async fn require_api_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let key = request.headers().get("x-api-key").and_then(|value| value.to_str().ok()).map(str::trim);
    let Some(key) = key.filter(|key| !key.is_empty()) else {
        // No key: the console's own request on its session cookie, or nothing.
        crate::console::admit(&state, request.headers()).await?;
        return Ok(next.run(request).await);
    };
    if !key_is_valid(&state.db, key).await.map_err(ApiError::internal("Internal server error"))? {
        return Err(ApiError::Unauthorized);
    }
    Ok(next.run(request).await)
}
