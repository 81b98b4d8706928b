//! The HTTP application: every route (`app`), `/metrics` alone (`metrics_app`), and the OpenAPI document
//! generated from the handlers' annotations (`openapi`); paths no route knows answer 404, or 401 first
//! under `/v1` and `/v2` without a valid key.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;
use crate::{auth, avatars, console, db_outage, metrics_http, openapi_responses, openapi_rules, page_cache, routes};
use confab_store::error::ApiError;

/// Request body limit of every JSON route except custom-avatar creation.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(OpenApi)]
#[openapi(
    info(title = "Confab", description = "Self-hostable conversational video agents. Errors are `{error}` or, for \
        missing agents, guardrails and knowledge bases, `{message}`; see docs/api.md."),
    components(schemas(confab_store::conversations::TranscriptEntry)),
    modifiers(&ApiKeyScheme)
)]
struct ApiDoc;

struct ApiKeyScheme;

impl utoipa::Modify for ApiKeyScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components
            .add_security_scheme("api_key", SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))));
        components.add_security_scheme(
            "session_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        openapi.security = Some(vec![SecurityRequirement::new("api_key", Vec::<String>::new())]);
    }
}

fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(routes::agents::router())
        .merge(routes::templates::router())
        .merge(routes::guardrails::router())
        .merge(routes::tools::router())
        .merge(routes::mcp::router())
        .merge(routes::knowledge::router())
        .merge(routes::conversations::router())
        .merge(routes::auth_conversation::router())
        .merge(routes::sessions::router())
        .merge(routes::meetings::router())
        .merge(avatars::stock_catalog::router())
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .merge(avatars::custom::router().layer(DefaultBodyLimit::max(avatars::custom::MAX_CREATE_BODY_BYTES)))
}

/// The OpenAPI document of every route, generated from the handlers' annotations, with what every
/// operation answers (`openapi_responses`) and the field rules (`openapi_rules`) filled in.
pub fn openapi() -> serde_json::Value {
    let (_, api) = OpenApiRouter::<AppState>::with_openapi(ApiDoc::openapi())
        .merge(api_routes())
        .merge(routes::sessions::session_router())
        .merge(routes::webrtc::router())
        .split_for_parts();
    let mut api = api;
    openapi_responses::complete(&mut api);
    // As JSON from here: utoipa's schema types cannot hold every keyword the rules use (`anyOf` beside `type`).
    let mut document = serde_json::to_value(&api).expect("the OpenAPI document serializes");
    openapi_rules::declare(&mut document);
    document
}

/// `GET /metrics` alone, without the API key: for `confab serve --metrics-addr`, a listener of its own.
pub fn metrics_app(state: AppState) -> Router {
    Router::new().route("/metrics", get(metrics_http::serve_metrics)).with_state(state)
}

/// The whole HTTP application.
pub fn app(state: AppState) -> Router {
    let (api, _) = api_routes().split_for_parts();
    let api = api
        .layer(axum::middleware::from_fn_with_state(state.clone(), page_cache::forget_pages_after_writes))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_api_key));
    let (session, _) = routes::sessions::session_router().merge(routes::webrtc::router()).split_for_parts();
    let document = openapi();
    // Prometheus metrics need the API key here; `confab serve --metrics-addr` serves them without one on a
    // separate listener.
    let metrics = Router::new()
        .route("/metrics", get(metrics_http::serve_metrics))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_api_key));
    let app = Router::new()
        .merge(console::router())
        .route("/join/{id}", get(routes::join::join_page))
        .route("/openapi.json", get(move || std::future::ready(axum::Json(document.clone()))))
        .merge(session)
        .merge(routes::livekit::router())
        .merge(api)
        .merge(metrics)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), db_outage::guard))
        .layer(axum::middleware::from_fn(metrics_http::track_http));
    crate::request_id::with_request_ids(app).with_state(state)
}

/// Requests no route handles still answer 401 first, like every route, to a caller under `/v1` or `/v2`
/// without a valid key.
async fn require_key_for_api_paths(
    state: &AppState,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
) -> Result<(), ApiError> {
    let path = uri.path();
    if path.starts_with("/v1/") || path.starts_with("/v2/") {
        let key = headers.get("x-api-key").and_then(|value| value.to_str().ok()).unwrap_or("").trim();
        match confab_store::api_keys::key_is_valid(&state.db, key).await {
            Ok(true) => {}
            Ok(false) => return Err(ApiError::Unauthorized),
            Err(err) => return Err(ApiError::internal("Internal server error")(err)),
        }
    }
    Ok(())
}

/// Unknown paths: 404 `{error: "Not found"}`.
async fn not_found(
    axum::extract::State(state): axum::extract::State<AppState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> ApiError {
    require_key_for_api_paths(&state, &uri, &headers).await.err().unwrap_or(ApiError::NotFound("Not found"))
}

/// A known path with another method: 405 `{error: "Method not allowed"}`.
async fn method_not_allowed(
    axum::extract::State(state): axum::extract::State<AppState>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    match require_key_for_api_paths(&state, &uri, &headers).await {
        Err(err) => err.into_response(),
        Ok(()) => (axum::http::StatusCode::METHOD_NOT_ALLOWED, axum::Json(json!({ "error": "Method not allowed" })))
            .into_response(),
    }
}
