//! Field rules shared by every resource: lengths, URLs, enumerations. Each returns a 400 whose message
//! names the field.
//!
//! Where a rule is a regular expression, the server checks the very pattern the OpenAPI document declares
//! (`openapi_rules`), so a client generated from the document and the server agree on every value. The
//! patterns use only what Rust's `regex`, Python's `re` and ECMAScript read alike: ASCII ranges and `\uXXXX`
//! escapes, no `\s`, `\d` or `\w` (whose meaning differs between them).

use std::sync::LazyLock;

use regex::Regex;

use crate::error::ApiError;

/// Characters that count as blank: white space in Rust's, Python's and ECMAScript's sense together
/// (Python also counts U+001C–U+001F, ECMAScript U+FEFF).
const BLANK: &str = r"\t\n\x0b\x0c\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff";

/// A required name: at least one character that is not blank, and no NUL anywhere.
pub static NAME_PATTERN: LazyLock<String> = LazyLock::new(|| format!(r"^[^\x00]*[^\x00{BLANK}][^\x00]*$"));

/// Text without a NUL character (any free text that is stored).
pub const TEXT_PATTERN: &str = r"^[^\x00]*$";

/// An http(s) URL with a host name or an IPv4 address, an optional port and anything printable after it.
/// Every value it matches is one `url::Url` parses: the last host label starts with a letter (so it is
/// never read as a malformed number), IPv4 octets are at most 255 and ports at most 65535.
pub const HTTP_URL_PATTERN: &str = concat!(
    r"^[Hh][Tt][Tt][Pp][Ss]?://",
    r"(([A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*|((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))",
    r"(:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?",
    r"([/?#][!-~]*)?$"
);

/// A UUID in its hyphenated form, either case.
pub const UUID_PATTERN: &str = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$";

fn compiled(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the field patterns are valid regular expressions")
}

static NAME: LazyLock<Regex> = LazyLock::new(|| compiled(&NAME_PATTERN));
static HTTP_URL: LazyLock<Regex> = LazyLock::new(|| compiled(HTTP_URL_PATTERN));
static UUID: LazyLock<Regex> = LazyLock::new(|| compiled(UUID_PATTERN));

/// `value` as `pattern` reads it in the OpenAPI document: JSON Schema tools written in Python (schemathesis,
/// `jsonschema`) let `$` match before one final newline, so `value` also matches when it does without that
/// newline. Returns the value without it.
fn matching<'a>(pattern: &Regex, value: &'a str) -> Option<&'a str> {
    if pattern.is_match(value) {
        return Some(value);
    }
    value.strip_suffix('\n').filter(|shorter| pattern.is_match(shorter))
}

/// A tool's function name, as language models' APIs take it.
pub const FUNCTION_NAME_PATTERN: &str = r"^[A-Za-z0-9_-]{1,64}$";

static FUNCTION_NAME: LazyLock<Regex> = LazyLock::new(|| compiled(FUNCTION_NAME_PATTERN));

/// `value` without the final newline `$` allows, when it is a function name as `FUNCTION_NAME_PATTERN`
/// states it.
pub fn function_name_text(value: &str) -> Option<&str> {
    matching(&FUNCTION_NAME, value)
}

/// Text that is more than blanks (as `NAME_PATTERN` reads blanks), without a length limit.
pub fn non_blank(field: &str, value: &str) -> Result<(), ApiError> {
    if matching(&NAME, value).is_none() {
        return Err(ApiError::bad_request(format!("Invalid request body: {field} must not be empty")));
    }
    Ok(())
}

/// `value` without the final newline `$` allows, when it is a UUID as `UUID_PATTERN` states it.
pub fn uuid_text(value: &str) -> Option<&str> {
    matching(&UUID, value)
}

/// Longest name-like field (names, keys, titles), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest prompt-like or free-text field, in characters.
pub const MAX_TEXT_CHARS: usize = 100_000;
/// Longest URL, in characters.
pub const MAX_URL_CHARS: usize = 2048;

pub fn required_name(field: &str, value: &str) -> Result<(), ApiError> {
    non_blank(field, value)?;
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
    if matching(&HTTP_URL, value).is_none_or(|url| url::Url::parse(url).is_err()) {
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
        let not_a_uuid =
            || ApiError::bad_request(format!("Invalid request body: {field} contains \"{id}\", not a UUID"));
        let text = uuid_text(id).ok_or_else(not_a_uuid)?;
        let parsed = uuid::Uuid::parse_str(text).map_err(|_| not_a_uuid())?;
        let id = parsed.hyphenated().to_string();
        if !normalised.contains(&id) {
            normalised.push(id);
        }
    }
    Ok(normalised)
}
