//! confab-http: the HTTP control plane — the REST interface of SPEC.md (`routes`), API keys and session
//! tokens (`auth`, `session_token`), the OpenAPI document (`openapi_responses`, `openapi_rules`), webhook
//! delivery (`webhooks`), `/metrics` (`metrics_http`) and the accept loop (`server`). It places calls through
//! one seam (`confab_store::confab_calls::CallPlacer`): the embedded media worker or, in a fleet replica, the
//! fleet's workers (`replica`). It links no WebRTC: media is the worker crate's (`confab-worker`).

pub mod app;
pub mod auth;
pub mod avatars;
pub mod console;
pub mod db_outage;
pub mod extract;
pub mod livekit_token;
pub mod metrics_http;
pub mod openapi_responses;
pub mod openapi_rules;
pub mod page_cache;
pub mod pagination;
pub mod replica;
pub mod request_id;
pub mod routes;
pub mod server;
pub mod session_token;
pub mod state;
pub mod strict_json;
pub mod webhooks;

pub use app::{MAX_BODY_BYTES, app, metrics_app, openapi};
pub use state::{AppConfig, AppState, MintedSession};
