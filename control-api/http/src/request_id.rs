//! Every request's id: the caller's `x-request-id` when it sends one, else a new UUID; returned in the
//! response's `x-request-id` and carried by the request's log span (`request{id=… method=… path=…}`), so
//! that the one log line an error leaves (its cause, never shown to the client) is found from the
//! response the client holds.

use axum::Router;
use axum::http::Request;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

/// The response and log header.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// `router` with request ids: set first (outermost), traced, and copied to the response.
pub fn with_request_ids<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    let header = axum::http::HeaderName::from_static(REQUEST_ID_HEADER);
    router
        .layer(TraceLayer::new_for_http().make_span_with(request_span::<axum::body::Body>))
        .layer(PropagateRequestIdLayer::new(header.clone()))
        .layer(SetRequestIdLayer::new(header, MakeRequestUuid))
}

fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let id = request.extensions().get::<RequestId>().and_then(|id| id.header_value().to_str().ok()).unwrap_or("-");
    tracing::info_span!("request", id, method = %request.method(), path = %request.uri().path())
}
