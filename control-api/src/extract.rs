//! Request extractors that turn every malformed input into SPEC.md's error shape:
//! bad JSON, wrong types and missing fields become 400 `{error}`, an oversized body becomes 413.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `Json<T>` whose rejections are `ApiError`s. The message names what was wrong.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

pub fn json_rejection(rejection: JsonRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge;
    }
    let detail = match &rejection {
        JsonRejection::MissingJsonContentType(_) => "expected Content-Type: application/json".to_string(),
        JsonRejection::JsonSyntaxError(_) => "malformed JSON".to_string(),
        JsonRejection::JsonDataError(err) => data_error_detail(&err.body_text()),
        other => other.body_text(),
    };
    ApiError::bad_request(format!("Invalid request body: {detail}"))
}

/// serde's message without axum's "Failed to deserialize the JSON body into the target type: " prefix.
fn data_error_detail(text: &str) -> String {
    text.split_once(": ").map(|(_, rest)| rest).unwrap_or(text).to_string()
}

/// `Query<T>` whose rejections are 400 `{error: "Invalid query: ..."}`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    let text = rejection.body_text();
    let detail = text.split_once(": ").map(|(_, rest)| rest).unwrap_or(&text);
    ApiError::bad_request(format!("Invalid query: {detail}"))
}

/// Parses a path id. Ids are UUIDs; anything else cannot name a record, so it is reported as the
/// resource's own not-found error (a clear 404 in SPEC.md's shape) without touching the database.
pub fn parse_id(raw: &str, not_found: ApiError) -> Result<String, ApiError> {
    match uuid::Uuid::parse_str(raw) {
        Ok(id) => Ok(id.hyphenated().to_string()),
        Err(_) => Err(not_found),
    }
}
