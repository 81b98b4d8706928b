//! The join page: `join_link` opens it. One HTML document with its script and styles inline, served by
//! the binary itself (no CDN). The session token rides in the URL fragment and never reaches the server's
//! logs; the page's ICE servers (STUN/TURN for the browser) are written into it.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;

const PAGE: &str = include_str!("../../assets/join.html");
/// Where the page's configuration goes.
const CONFIG_MARKER: &str = "/*CONFAB_CONFIG*/null";

/// `GET /join/{id}`.
pub async fn join_page(State(state): State<AppState>) -> Response {
    let ice = state.calls.as_ref().map(|calls| calls.ice_servers());
    let ice_servers: Vec<_> = ice
        .map(|ice| {
            ice.urls
                .iter()
                .map(|url| {
                    let mut server = json!({ "urls": url });
                    if let (Some(username), Some(credential)) = (&ice.username, &ice.credential) {
                        server["username"] = json!(username);
                        server["credential"] = json!(credential);
                    }
                    server
                })
                .collect()
        })
        .unwrap_or_default();
    // `<` escaped so nothing in the configuration can close the script element.
    let config = json!({ "iceServers": ice_servers }).to_string().replace('<', "\\u003c");
    let page = PAGE.replace(CONFIG_MARKER, &config);
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        page,
    )
        .into_response()
}
