//! A short-lived memory of rendered list pages (today the agent list, the control plane's busiest read),
//! so a client polling the same page is answered without the database and without encoding a page of
//! agents and their attached records again.
//!
//! Correctness rests on three rules:
//! - Every request that may write (any method but GET, HEAD and OPTIONS) forgets every page when it ends,
//!   whether it answered, failed or was dropped by its client (`forget_pages_after_writes`). The pages
//!   held here are made only of records that requests write (agents, and the knowledge bases, documents,
//!   tools, guardrails and MCP configurations they attach), never of what background jobs write.
//! - A page is kept only if no write ended between the moment its reader started and the moment it was
//!   rendered (`generation`): a reader that raced a write never stores what it read.
//! - Each page is believed for `PAGE_CACHE_TTL` at most, which bounds what a writer this process does not
//!   see (another process on the same SQLite file) to that delay. A fleet's replicas share PostgreSQL and
//!   each would see the others' writes only that late, so the cache is on for SQLite only.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::AppState;
use confab_store::Page;

/// How long a rendered page is served without asking the database again.
pub const PAGE_CACHE_TTL: Duration = Duration::from_secs(1);
/// Pages larger than this are not kept (a page of agents with long prompts can be megabytes).
const MAX_PAGE_BYTES: usize = 1 << 20;
/// Bytes kept at most; when a new page would pass it, everything is forgotten first.
const MAX_TOTAL_BYTES: usize = 16 << 20;

/// One rendered page: its JSON body and the `X-Total-Count` that goes with it.
#[derive(Debug, Clone)]
pub struct CachedPage {
    pub body: Bytes,
    pub total: i64,
}

impl IntoResponse for CachedPage {
    fn into_response(self) -> Response {
        let mut response = self.body.into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert("x-total-count", HeaderValue::from(self.total));
        response
    }
}

/// Which page of which list: the resource and the parsed query (not its spelling in the URL).
pub fn page_key(resource: &str, page: Page, search: Option<&str>) -> String {
    format!("{resource}\u{0}{}\u{0}{}\u{0}{}", page.offset, page.limit, search.unwrap_or("").trim())
}

#[derive(Debug)]
struct Entry {
    page: CachedPage,
    stored_at: Instant,
    size: usize,
}

#[derive(Debug, Default)]
struct Pages {
    generation: u64,
    entries: HashMap<String, Entry>,
    bytes: usize,
}

#[derive(Debug)]
pub struct PageCache {
    enabled: bool,
    pages: Mutex<Pages>,
}

impl PageCache {
    /// A cache that keeps pages when `enabled`, and otherwise never answers.
    pub fn new(enabled: bool) -> PageCache {
        PageCache { enabled, pages: Mutex::default() }
    }

    fn pages(&self) -> std::sync::MutexGuard<'_, Pages> {
        self.pages.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The count of writes ended so far; read it before reading the database for a page.
    pub fn generation(&self) -> u64 {
        self.pages().generation
    }

    /// The page stored under `key` less than the TTL before `now`.
    pub fn get(&self, key: &str, now: Instant) -> Option<CachedPage> {
        if !self.enabled {
            return None;
        }
        let pages = self.pages();
        let entry = pages.entries.get(key)?;
        (now.saturating_duration_since(entry.stored_at) < PAGE_CACHE_TTL).then(|| entry.page.clone())
    }

    /// Keeps `page` under `key`, unless a write ended since `generation` was read.
    pub fn put(&self, key: String, generation: u64, page: CachedPage, now: Instant) {
        let size = page.body.len() + key.len();
        if !self.enabled || size > MAX_PAGE_BYTES {
            return;
        }
        let mut pages = self.pages();
        if pages.generation != generation {
            return;
        }
        if pages.bytes + size > MAX_TOTAL_BYTES {
            pages.entries.clear();
            pages.bytes = 0;
        }
        if let Some(old) = pages.entries.insert(key, Entry { page, stored_at: now, size }) {
            pages.bytes -= old.size;
        }
        pages.bytes += size;
    }

    /// Forgets every page (a write ended).
    pub fn forget_all(&self) {
        let mut pages = self.pages();
        pages.generation += 1;
        pages.entries.clear();
        pages.bytes = 0;
    }
}

/// Forgets every page when the request ends or is dropped.
struct ForgetOnDrop<'a>(&'a PageCache);

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.forget_all();
    }
}

/// Middleware: a request that may write forgets every cached page once it is over (after its write
/// committed, before its client can read again), even when its client goes away half-way.
pub async fn forget_pages_after_writes(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    let _forget = ForgetOnDrop(&state.pages);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str, total: i64) -> CachedPage {
        CachedPage { body: Bytes::from(text.to_string()), total }
    }

    const FIRST: Page = Page { offset: 0, limit: 20 };

    #[test]
    fn a_page_is_served_for_the_ttl_only() {
        let cache = PageCache::new(true);
        let start = Instant::now();
        let key = page_key("agents", FIRST, None);
        cache.put(key.clone(), cache.generation(), page("[]", 0), start);
        assert_eq!(cache.get(&key, start + PAGE_CACHE_TTL - Duration::from_millis(1)).unwrap().body, "[]");
        assert!(cache.get(&key, start + PAGE_CACHE_TTL).is_none());
        assert!(cache.get(&page_key("agents", Page { offset: 20, limit: 20 }, None), start).is_none());
    }

    #[test]
    fn a_write_forgets_every_page() {
        let cache = PageCache::new(true);
        let now = Instant::now();
        let key = page_key("agents", FIRST, Some("x"));
        cache.put(key.clone(), cache.generation(), page("[1]", 1), now);
        cache.forget_all();
        assert!(cache.get(&key, now).is_none());
    }

    #[test]
    fn a_page_read_before_a_write_ended_is_not_kept() {
        let cache = PageCache::new(true);
        let now = Instant::now();
        let key = page_key("agents", FIRST, None);
        let read_at = cache.generation();
        cache.forget_all();
        cache.put(key.clone(), read_at, page("[old]", 1), now);
        assert!(cache.get(&key, now).is_none());
        cache.put(key.clone(), cache.generation(), page("[new]", 1), now);
        assert_eq!(cache.get(&key, now).unwrap().body, "[new]");
    }

    #[test]
    fn a_disabled_cache_never_answers_and_large_pages_are_not_kept() {
        let off = PageCache::new(false);
        let now = Instant::now();
        off.put("k".into(), off.generation(), page("[]", 0), now);
        assert!(off.get("k", now).is_none());
        let on = PageCache::new(true);
        let huge = CachedPage { body: Bytes::from(vec![b' '; MAX_PAGE_BYTES + 1]), total: 1 };
        on.put("k".into(), on.generation(), huge, now);
        assert!(on.get("k", now).is_none());
    }

    #[test]
    fn search_text_is_part_of_the_key_but_its_surrounding_spaces_are_not() {
        assert_eq!(page_key("agents", FIRST, Some(" a ")), page_key("agents", FIRST, Some("a")));
        assert_ne!(page_key("agents", FIRST, Some("a")), page_key("agents", FIRST, Some("b")));
        assert_ne!(page_key("agents", FIRST, None), page_key("templates", FIRST, None));
    }
}
