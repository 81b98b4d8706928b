//! Field rules shared by every resource: lengths, URLs, enumerations. Each returns a 400 whose message
//! names the field.

use crate::error::ApiError;

/// Longest name-like field (names, keys, titles), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest prompt-like or free-text field, in characters.
pub const MAX_TEXT_CHARS: usize = 100_000;
/// Longest URL, in characters.
pub const MAX_URL_CHARS: usize = 2048;

pub fn required_name(field: &str, value: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::bad_request(format!("Invalid request body: {field} must not be empty")));
    }
    max_chars(field, value, MAX_NAME_CHARS)
}

pub fn max_chars(field: &str, value: &str, limit: usize) -> Result<(), ApiError> {
    if value.chars().count() > limit {
        return Err(ApiError::bad_request(format!("Invalid request body: {field} is longer than {limit} characters")));
    }
    Ok(())
}

/// Empty, or a well-formed absolute http(s) URL with a host.
pub fn optional_http_url(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() { Ok(()) } else { http_url(field, value) }
}

pub fn http_url(field: &str, value: &str) -> Result<(), ApiError> {
    max_chars(field, value, MAX_URL_CHARS)?;
    let well_formed = url::Url::parse(value)
        .map(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|host| !host.is_empty()))
        .unwrap_or(false);
    if !well_formed {
        return Err(ApiError::bad_request(format!("Invalid request body: {field} must be an http(s) URL")));
    }
    Ok(())
}

/// `value` must be one of `allowed`.
pub fn one_of(field: &str, value: &str, allowed: &[&str]) -> Result<(), ApiError> {
    if allowed.contains(&value) {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "Invalid request body: {field} must be one of {}; got \"{value}\"",
        allowed.join(", ")
    )))
}

/// Every id must be a UUID; returns them normalised (lowercase, hyphenated), without duplicates.
pub fn uuid_list(field: &str, ids: &[String]) -> Result<Vec<String>, ApiError> {
    let mut normalised: Vec<String> = Vec::with_capacity(ids.len());
    for id in ids {
        let parsed = uuid::Uuid::parse_str(id).map_err(|_| {
            ApiError::bad_request(format!("Invalid request body: {field} contains \"{id}\", not a UUID"))
        })?;
        let id = parsed.hyphenated().to_string();
        if !normalised.contains(&id) {
            normalised.push(id);
        }
    }
    Ok(normalised)
}
