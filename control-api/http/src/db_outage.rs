//! Requests while the database does not answer (`confab_store::db_health`): once the outage is known,
//! a request that needs the database is refused at once — 503 `{"error": …}` with `Retry-After` — instead
//! of waiting out the pool; a request that failed with a 500 is checked against the database and, when
//! it is down, answered the same way. What needs no database keeps working, for a key seen in the last
//! ten minutes where a key is needed: `GET /`, `/openapi.json`, `/metrics`, the stock avatar catalog
//! (`GET /v1/ext/avatars`), the join page's HTML and the console's files.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use confab_store::error::ApiError;

pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.db.health.is_down() && !works_without_database(request.method(), request.uri().path()) {
        return ApiError::DatabaseUnavailable.into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::INTERNAL_SERVER_ERROR && state.db.confirm_outage().await {
        return ApiError::DatabaseUnavailable.into_response();
    }
    response
}

/// The routes that answer without the database.
pub fn works_without_database(method: &Method, path: &str) -> bool {
    method == Method::GET
        && (matches!(path, "/" | "/openapi.json" | "/metrics" | "/v1/ext/avatars")
            || path.starts_with("/console/assets/")
            || path.starts_with("/join/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_that_need_no_database_are_listed() {
        assert!(works_without_database(&Method::GET, "/v1/ext/avatars"));
        assert!(works_without_database(&Method::GET, "/join/abc"));
        assert!(!works_without_database(&Method::POST, "/v1/ext/avatars"));
        assert!(!works_without_database(&Method::GET, "/v1/ext/agent"));
    }
}
