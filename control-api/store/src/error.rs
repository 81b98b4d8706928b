//! The one error type every handler returns, and its exact JSON bodies (as an HTTP response with the
//! `http` feature, which the HTTP crate turns on; the store itself speaks no HTTP).
//!
//! SPEC.md fixes two shapes: `{"error": "..."}` for most failures and `{"message": "..."}` for the
//! not-found cases of agents, guardrails and knowledge bases. Internal causes are logged here and never
//! shown to the client.

#[cfg(feature = "http")]
use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
#[cfg(feature = "http")]
use serde_json::json;

/// The body SPEC.md gives for a missing or invalid API key.
pub const UNAUTHORIZED_MESSAGE: &str = "Unauthorized: not a valid authorization api key";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401 with SPEC.md's unauthorized body.
    #[error("unauthorized")]
    Unauthorized,
    /// 400 `{error}`: the request is malformed or fails validation.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 404 `{message}`: agents, guardrails and knowledge bases.
    #[error("not found: {0}")]
    NotFoundMessage(&'static str),
    /// 404 `{error}`: every other resource.
    #[error("not found: {0}")]
    NotFound(&'static str),
    /// 403 `{error}`: the caller is known but may not make this request (a cross-site console request).
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// 409 `{error}`: the resource's state forbids the request.
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// 415 `{error}`.
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(&'static str),
    /// 413 `{error}`.
    #[error("payload too large")]
    PayloadTooLarge,
    /// 503 `{error}`: a dependency is not configured or unavailable.
    #[error("unavailable: {0}")]
    Unavailable(&'static str),
    /// 503 `{error}` with `Retry-After`: the database does not answer (`db_health`).
    #[error("the database is unavailable")]
    DatabaseUnavailable,
    /// 500 `{error: public}`; `cause` is logged, never returned.
    #[error("{public}: {cause}")]
    Internal { public: &'static str, cause: String },
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }

    /// Returns a closure that turns any error into a 500 with `public` as its body.
    pub fn internal<E: std::fmt::Display>(public: &'static str) -> impl FnOnce(E) -> ApiError {
        move |cause| ApiError::Internal { public, cause: cause.to_string() }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(cause: sqlx::Error) -> Self {
        ApiError::Internal { public: "Internal server error", cause: cause.to_string() }
    }
}

/// The HTTP side's answer (the `http` feature).
#[cfg(feature = "http")]
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match &self {
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, json!({ "error": UNAUTHORIZED_MESSAGE })),
            ApiError::BadRequest(message) => (StatusCode::BAD_REQUEST, json!({ "error": message })),
            ApiError::NotFoundMessage(message) => (StatusCode::NOT_FOUND, json!({ "message": message })),
            ApiError::NotFound(message) => (StatusCode::NOT_FOUND, json!({ "error": message })),
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, json!({ "error": message })),
            ApiError::Conflict(message) => (StatusCode::CONFLICT, json!({ "error": message })),
            ApiError::UnsupportedMediaType(message) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, json!({ "error": message }))
            }
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, json!({ "error": "Request body too large" })),
            ApiError::Unavailable(message) => (StatusCode::SERVICE_UNAVAILABLE, json!({ "error": message })),
            ApiError::DatabaseUnavailable => {
                let retry = [(axum::http::header::RETRY_AFTER, crate::db_health::RETRY_AFTER_SECONDS.to_string())];
                let body = json!({ "error": DATABASE_UNAVAILABLE });
                return (StatusCode::SERVICE_UNAVAILABLE, retry, Json(body)).into_response();
            }
            ApiError::Internal { public, cause } => {
                tracing::error!(cause = %one_line(cause), "{public}");
                (StatusCode::INTERNAL_SERVER_ERROR, json!({ "error": public }))
            }
        };
        (status, Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// `text` on one log line: a cause that spans lines (a library error with its backtrace, under
/// `RUST_BACKTRACE`) keeps every line, joined with ` | `.
pub fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    lines.join(" | ")
}

/// What a request that needs the database is told while it does not answer.
pub const DATABASE_UNAVAILABLE: &str =
    "Service unavailable: the database is not answering; retry after the Retry-After seconds";
