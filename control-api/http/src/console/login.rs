//! Signing in to the console: with the one-time link `confab serve` prints as it starts
//! (`GET /console/login?code=…`, 15 minutes, one use, then 401), or with an API key pasted into the
//! sign-in form (`POST /console/login`, form field `key`; the key itself is never stored in the browser).
//! Either answers 303 to `/` with the session cookie. `POST /console/logout` ends the session.

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::session;
use crate::AppState;
use confab_store::{api_keys, console_links};

/// What a spent or expired link is told.
pub const LINK_REFUSED: &str = "This sign-in link has been used or has expired. Each link works once, for 15 \
     minutes: restart confab serve for a new one, or sign in with an API key (confab keys create).";
/// What a wrong key is told.
pub const KEY_REFUSED: &str = "That is not a valid API key. Create one with: confab keys create --name console";

/// Mints a sign-in link and logs it (one of the server's first lines).
pub async fn print_sign_in_link(state: &AppState) {
    match console_links::mint(&state.db).await {
        Ok(code) => tracing::info!(
            "console: {}/ — sign in with {}/console/login?code={code} (works once, for 15 minutes)",
            state.config.public_url,
            state.config.public_url
        ),
        Err(err) => tracing::warn!(error = %err, "no console sign-in link: the database refused it"),
    }
}

#[derive(Deserialize)]
pub struct LinkQuery {
    #[serde(default)]
    code: String,
}

pub async fn with_link(State(state): State<AppState>, Query(query): Query<LinkQuery>) -> Response {
    match console_links::redeem(&state.db, &query.code).await {
        Ok(true) => signed_in(&state, "link"),
        Ok(false) => refusal(StatusCode::UNAUTHORIZED, LINK_REFUSED),
        Err(err) => unavailable(err),
    }
}

#[derive(Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    key: String,
}

pub async fn with_key(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<KeyForm>) -> Response {
    if !same_origin_form(&headers) {
        return refusal(StatusCode::FORBIDDEN, session::CROSS_SITE);
    }
    match api_keys::live_key_id(&state.db, form.key.trim()).await {
        Ok(Some(id)) => signed_in(&state, &format!("key:{id}")),
        Ok(None) => refusal(StatusCode::UNAUTHORIZED, KEY_REFUSED),
        Err(err) => unavailable(err),
    }
}

pub async fn sign_out() -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, "/".to_string()), (header::SET_COOKIE, session::clear_cookie())])
        .into_response()
}

/// A form posted from this very site (browsers send `Origin` with every POST).
fn same_origin_form(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    match text("origin") {
        Some(origin) => session::origin_is_host(origin, text("host")),
        None => text("sec-fetch-site").is_none_or(|site| site == "same-origin"),
    }
}

fn signed_in(state: &AppState, sub: &str) -> Response {
    let token = state.console_keys.mint(sub, chrono::Utc::now().timestamp());
    let secure = state.config.public_url.starts_with("https://");
    let headers = [(header::LOCATION, "/".to_string()), (header::SET_COOKIE, session::set_cookie(&token, secure))];
    (StatusCode::SEE_OTHER, headers).into_response()
}

fn unavailable(err: sqlx::Error) -> Response {
    tracing::error!(error = %err, "console sign-in: the database failed");
    refusal(StatusCode::SERVICE_UNAVAILABLE, "The database is not answering; try again in a moment.")
}

/// A small page saying why signing in failed, with the way back.
fn refusal(status: StatusCode, message: &str) -> Response {
    let message = message.replace('&', "&amp;").replace('<', "&lt;");
    let page = format!(
        "<!doctype html><meta charset=utf-8><title>Confab console</title>\
         <link rel=stylesheet href=/console/assets/console.css>\
         <main class=signin><h1>Confab</h1><p class=error id=refusal>{message}</p><p><a href=/>Sign in</a></p></main>"
    );
    (status, Html(page)).into_response()
}
