//! confab-http: the HTTP control plane — the REST interface of SPEC.md (`routes`), API keys and session
//! tokens (`auth`, `session_token`), the OpenAPI document (`openapi_responses`, `openapi_rules`), webhook
//! delivery (`webhooks`), `/metrics` (`metrics_http`) and the accept loop (`server`). It places calls through
//! one seam (`confab_store::confab_store::calls::CallPlacer`): the embedded media worker or, in a fleet replica, the
//! fleet's workers (`replica`). It links no WebRTC: media is the worker crate's (`confab-worker`).

pub mod auth;
pub mod avatars;
pub mod extract;
pub mod metrics_http;
pub mod openapi_responses;
pub mod openapi_rules;
pub mod page_cache;
pub mod pagination;
pub mod replica;
pub mod routes;
pub mod server;
pub mod session_token;
pub mod strict_json;
pub mod webhooks;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::session_token::SessionKeys;
use confab_store::Db;
use confab_store::error::ApiError;

/// Request body limit of every JSON route except custom-avatar creation.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Name under which the session-token signing key is stored.
const SESSION_SECRET_NAME: &str = "session_token_secret";

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub session_keys: SessionKeys,
    pub config: Arc<AppConfig>,
    /// Where calls go: the embedded media worker, or the fleet's workers (a replica); None when this
    /// process has no media path (no models, or `--no-media` alone).
    pub calls: Option<Arc<dyn confab_store::calls::CallPlacer>>,
    /// Meeting bots (external meetings); None when no browser is configured or there is no media path.
    pub meetings: Option<Arc<confab_meetings::MeetingBots>>,
    /// Rendered list pages (`page_cache`); on for SQLite only.
    pub pages: Arc<page_cache::PageCache>,
}

#[derive(Debug, Clone)]
pub struct AppConfig {
    /// Base URL that browsers reach this server at, without a trailing slash (join links start with it).
    pub public_url: String,
    /// Where call recordings are kept.
    pub recordings_dir: std::path::PathBuf,
    /// The local models (the face models rig custom avatars).
    pub models_dir: std::path::PathBuf,
}

/// A minted session token and the join link that carries it.
pub struct MintedSession {
    pub token: String,
    pub expires_at: String,
    pub join_link: String,
}

impl AppState {
    pub async fn new(db: Db, config: AppConfig) -> Result<AppState, sqlx::Error> {
        let secret = confab_store::settings::secret(&db, SESSION_SECRET_NAME).await?;
        let pages = Arc::new(page_cache::PageCache::new(db.backend == confab_store::Backend::Sqlite));
        Ok(AppState {
            db,
            pages,
            session_keys: SessionKeys::new(&secret),
            config: Arc::new(config),
            calls: None,
            meetings: None,
        })
    }

    /// Live calls (join page, WebRTC signalling) placed through `calls`.
    pub fn with_calls(mut self, calls: Arc<dyn confab_store::calls::CallPlacer>) -> AppState {
        self.calls = Some(calls);
        self
    }

    /// Sends agents into external meetings with `bots`.
    pub fn with_meetings(mut self, bots: Arc<confab_meetings::MeetingBots>) -> AppState {
        self.meetings = Some(bots);
        self
    }

    /// Places the call of `conversation_id` with a participant's SDP offer where calls run here: the
    /// fleet's workers (a replica) or the embedded media worker; returns the SDP answer.
    pub async fn join_call(
        &self,
        conversation_id: &str,
        offer_sdp: String,
    ) -> Result<String, confab_store::calls::JoinError> {
        match &self.calls {
            Some(calls) => calls.join(conversation_id, offer_sdp).await,
            None => Err(confab_store::calls::JoinError::Unavailable("no media worker".into())),
        }
    }

    /// Hangs up the call of `conversation_id`; false when it has none here.
    pub async fn hang_up_call(&self, conversation_id: &str) -> Result<bool, confab_store::calls::JoinError> {
        match &self.calls {
            Some(calls) => calls.hang_up(conversation_id).await,
            None => Ok(false),
        }
    }

    /// The browser page of a conversation; the token rides in the fragment, which never reaches a server log.
    pub fn join_link(&self, conversation_id: &str, token: Option<&str>) -> String {
        let base = format!("{}/join/{conversation_id}", self.config.public_url.trim_end_matches('/'));
        match token {
            Some(token) => format!("{base}#token={token}"),
            None => base,
        }
    }

    pub fn mint_session(&self, conversation_id: &str, user_id: &str, user_name: &str, context: &str) -> MintedSession {
        let now = chrono::Utc::now();
        let (token, claims) = self.session_keys.mint(conversation_id, user_id, user_name, context, now.timestamp());
        let expires_at = chrono::DateTime::from_timestamp(claims.exp, 0).unwrap_or(now);
        MintedSession {
            join_link: self.join_link(conversation_id, Some(&token)),
            token,
            expires_at: confab_store::wall_clock::format_iso(expires_at),
        }
    }
}

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
    Router::new()
        .route("/", get(landing))
        .route("/join/{id}", get(routes::join::join_page))
        .route("/openapi.json", get(move || std::future::ready(axum::Json(document.clone()))))
        .merge(session)
        .merge(api)
        .merge(metrics)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(metrics_http::track_http))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

async fn landing() -> impl IntoResponse {
    axum::Json(json!({ "service": "confab", "version": env!("CARGO_PKG_VERSION"), "openapi": "/openapi.json" }))
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
        match auth::key_is_valid(&state.db, key).await {
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
