//! Request extractors that turn every malformed input into SPEC.md's error shape:
//! bad JSON, wrong types and missing fields become 400 `{error}`, an oversized body becomes 413. Text
//! holding a NUL character (`\u0000`) in any field the server reads is refused with 400 naming the field, on
//! every database alike (PostgreSQL cannot store it in text; SQLite could); unknown keys are ignored,
//! whatever they hold.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::Serialize;
use serde::de::DeserializeOwned;

use confab_store::error::ApiError;

/// `Json<T>` whose rejections are `ApiError`s. The message names what was wrong.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let bytes = axum::body::Bytes::from_request(Request::from_parts(parts.clone(), body), state).await.map_err(
            |rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge
                } else {
                    ApiError::bad_request(format!("Invalid request body: {}", rejection.body_text()))
                }
            },
        )?;
        let has_nul = has_escaped_nul(&bytes);
        let bytes_have_array = bytes.contains(&b'[');
        let raw = bytes.clone();
        let value =
            match axum::Json::<T>::from_request(Request::from_parts(parts, axum::body::Body::from(bytes)), state).await
            {
                Ok(axum::Json(value)) => value,
                Err(rejection) => return Err(json_rejection(rejection)),
            };
        // A struct given as an array is read by serde but is not what the document allows.
        if bytes_have_array
            && let Ok(parsed) = serde_json::from_slice::<serde_json::Value>(&raw)
            && let Err(detail) = crate::strict_json::check::<T>(parsed)
        {
            return Err(ApiError::bad_request(format!("Invalid request body: {detail}")));
        }
        // Only what was read counts: a NUL in a key the server does not know is ignored with the key.
        if has_nul
            && let Ok(read) = serde_json::to_value(&value)
            && let Some(field) = nul_field(&read, "")
        {
            return Err(ApiError::bad_request(format!(
                "Invalid request body: {field} must not contain a NUL character"
            )));
        }
        Ok(ApiJson(value))
    }
}

/// Whether the JSON text holds a `\u0000` escape (one not itself escaped: an odd run of backslashes).
fn has_escaped_nul(bytes: &[u8]) -> bool {
    bytes.windows(6).enumerate().any(|(at, window)| {
        window == b"\\u0000" && bytes[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0
    })
}

/// The path (`name`, `avatars[0].config.tts.voice`, a key itself) of the first string holding a NUL.
fn nul_field(value: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(text) if text.contains('\0') => {
            Some(if path.is_empty() { "the body".into() } else { path.into() })
        }
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| nul_field(item, &format!("{path}[{i}]"))),
        Value::Object(fields) => fields.iter().find_map(|(key, item)| {
            let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            if key.contains('\0') {
                Some(format!("a key of {}", if path.is_empty() { "the body" } else { path }))
            } else {
                nul_field(item, &here)
            }
        }),
        _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_escaped_nul_characters_and_names_their_field() {
        assert!(has_escaped_nul(br#"{"name":"a\u0000b"}"#));
        assert!(!has_escaped_nul(br#"{"name":"a\\u0000b"}"#), "an escaped backslash, then text");
        assert!(has_escaped_nul(br#"{"name":"a\\\u0000b"}"#));
        let value: serde_json::Value =
            serde_json::from_str(r#"{"avatars":[{"config":{"tts":{"voice":"x\u0000"}}}]}"#).unwrap();
        assert_eq!(nul_field(&value, "").as_deref(), Some("avatars[0].config.tts.voice"));
        let key: serde_json::Value = serde_json::from_str(r#"{"meta_data":{"k\u0000":1}}"#).unwrap();
        assert_eq!(nul_field(&key, "").as_deref(), Some("a key of meta_data"));
    }
}
