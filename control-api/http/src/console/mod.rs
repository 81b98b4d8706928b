//! The console: a browser UI at `/` served from the binary (no network at run time), and the few routes
//! only it uses. A browser asking `/` for HTML gets the console; any other client gets the JSON it always
//! got. Signing in never shows the page an API key: a one-time link printed at start (`login`) or a key
//! pasted once starts a cookie session (`session`), on which the console calls the same `/v1` API as any
//! client (`crate::auth` admits the cookie for the console's own requests), plus its own `/console/api`
//! routes for what the public API does not offer (API keys, webhook deliveries: `api`).

mod api;
mod assets;
mod login;
pub mod session;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::AppState;
use confab_store::error::ApiError;
use session::ConsoleClaims;

pub use login::print_sign_in_link;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(landing))
        .route("/console/assets/{name}", get(assets::serve))
        .route("/console/login", get(login::with_link).post(login::with_key))
        .route("/console/logout", post(login::sign_out))
        .merge(api::router())
}

/// `/`: the console for a browser (`Accept: text/html`), the service's JSON for anything else.
async fn landing(headers: HeaderMap) -> Response {
    let wants_html = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if wants_html {
        return assets::page();
    }
    axum::Json(
        serde_json::json!({ "service": "confab", "version": env!("CARGO_PKG_VERSION"), "openapi": "/openapi.json" }),
    )
    .into_response()
}

/// A request made on a console session (cookie + the console's own request; a session begun with an API
/// key ends when that key is revoked).
pub struct ConsoleSession(pub ConsoleClaims);

impl FromRequestParts<AppState> for ConsoleSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        admit(state, &parts.headers).await.map(ConsoleSession)
    }
}

/// The console session of `headers`, checked (see `session::session_of`) and, when begun with a key,
/// that the key is still live.
pub async fn admit(state: &AppState, headers: &HeaderMap) -> Result<ConsoleClaims, ApiError> {
    let claims = session::session_of(&state.console_keys, headers)?;
    if let Some(key_id) = claims.sub.strip_prefix("key:")
        && !confab_store::api_keys::id_is_live(&state.db, key_id)
            .await
            .map_err(ApiError::internal("Internal server error"))?
    {
        return Err(ApiError::Unauthorized);
    }
    Ok(claims)
}
