//! The console's files, compiled into the binary: its one page, its script and style, and the UI library
//! it is written with (htm + Preact, `vendor/htm-preact-3.1.1.mjs`, Apache-2.0: 13 KB, no build step, so
//! the shipped file is the file in the repository).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("../../assets/console/index.html");

const FILES: &[(&str, &str, &str)] = &[
    ("console.js", "text/javascript; charset=utf-8", include_str!("../../assets/console/console.js")),
    ("console.css", "text/css; charset=utf-8", include_str!("../../assets/console/console.css")),
    (
        "htm-preact-3.1.1.mjs",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/console/vendor/htm-preact-3.1.1.mjs"),
    ),
];

/// The console's page (no secrets in it: it asks `/console/api/session` whether it is signed in).
pub fn page() -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        // The console loads nothing from elsewhere; its media come from this server.
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; frame-ancestors 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
    ];
    (headers, PAGE).into_response()
}

pub async fn serve(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(file, _, _)| *file == name) {
        Some((_, content_type, body)) => {
            ([(header::CONTENT_TYPE, *content_type), (header::CACHE_CONTROL, "no-cache")], *body).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
    }
}
