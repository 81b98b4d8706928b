//! The HTTP side: `GET /metrics`, and the middleware that counts and times every request.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use confab_calls::metrics::metrics;

/// `GET /metrics`.
pub async fn serve_metrics(State(state): State<AppState>) -> Response {
    if state.calls.as_ref().is_some_and(|calls| calls.is_fleet()) {
        match confab_store::workers::list(&state.db).await {
            Ok(workers) => metrics().fleet(&workers.into_iter().map(|(beat, _)| beat).collect::<Vec<_>>()),
            Err(err) => tracing::warn!(error = %err, "cannot read the fleet's workers for /metrics"),
        }
    }
    let text = metrics().render(state.calls.as_ref().and_then(|calls| calls.local_calls()));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

/// Counts and times every request by its route template (`unmatched` for paths no route knows, so
/// arbitrary paths do not become series).
pub async fn track_http(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |path| path.as_str()).to_string();
    let method = request.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    metrics().http_request(&route, &method, status.as_str(), started.elapsed().as_secs_f64());
    response
}
