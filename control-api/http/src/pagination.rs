//! `offset`/`perpage` paging for list endpoints and the `X-Total-Count` header.

use axum::Json;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use confab_store::Page;
use confab_store::error::ApiError;

/// Page size when `perpage` is absent.
pub const DEFAULT_PER_PAGE: i64 = 20;
/// Largest `perpage` accepted; larger values are refused with 400.
pub const MAX_PER_PAGE: i64 = 100;
/// Longest `search` value accepted.
pub const MAX_SEARCH_CHARS: usize = 200;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Number of records to skip (default 0).
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Records per page, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub perpage: Option<i64>,
    /// Case-insensitive text matched against the name or the id; no NUL character.
    #[param(max_length = 200, pattern = r"^[^\x00]*$")]
    pub search: Option<String>,
}

/// Paging of the lists SPEC.md shows unpaged (guardrails, tools, MCP configurations, knowledge bases):
/// the same `offset`/`perpage`, but a first page of `MAX_PER_PAGE` by default, so a client that never
/// pages still sees everything up to 100 records; `X-Total-Count` tells it when there are more.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Number of records to skip (default 0).
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Records per page, 1 to 100 (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub perpage: Option<i64>,
}

impl PageQuery {
    pub fn page(&self) -> Result<Page, ApiError> {
        page(self.offset, Some(self.perpage.unwrap_or(MAX_PER_PAGE)))
    }
}

pub fn page(offset: Option<i64>, perpage: Option<i64>) -> Result<Page, ApiError> {
    let offset = offset.unwrap_or(0);
    let limit = perpage.unwrap_or(DEFAULT_PER_PAGE);
    if offset < 0 {
        return Err(ApiError::bad_request("Invalid query: offset must not be negative"));
    }
    if !(1..=MAX_PER_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!("Invalid query: perpage must be between 1 and {MAX_PER_PAGE}")));
    }
    Ok(Page { offset, limit })
}

pub fn search(value: &Option<String>) -> Result<Option<&str>, ApiError> {
    match value.as_deref() {
        Some(text) if text.chars().count() > MAX_SEARCH_CHARS => {
            Err(ApiError::bad_request(format!("Invalid query: search is longer than {MAX_SEARCH_CHARS} characters")))
        }
        Some(text) if text.contains('\0') => {
            Err(ApiError::bad_request("Invalid query: search must not contain a NUL character"))
        }
        other => Ok(other),
    }
}

impl ListQuery {
    pub fn page(&self) -> Result<Page, ApiError> {
        page(self.offset, self.perpage)
    }

    pub fn search(&self) -> Result<Option<&str>, ApiError> {
        search(&self.search)
    }
}

/// A JSON array with the total number of matches in `X-Total-Count`.
pub fn with_total<T: Serialize>(items: Vec<T>, total: i64) -> Response {
    let mut response = Json(items).into_response();
    response.headers_mut().insert("x-total-count", HeaderValue::from(total));
    response
}
