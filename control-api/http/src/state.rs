//! The state every handler shares (`AppState`: the database, the session-token keys, where calls and
//! meeting bots go, the list-page cache) and the server's configuration (`AppConfig`).

use std::sync::Arc;

use crate::console::session::ConsoleKeys;
use crate::livekit_token::LiveKitKeys;
use crate::page_cache;
use crate::session_token::SessionKeys;
use confab_store::Db;

/// Name under which the session-token signing key is stored.
const SESSION_SECRET_NAME: &str = "session_token_secret";
/// Name under which the LiveKit access tokens' signing secret is stored (`livekit_token`).
pub const LIVEKIT_SECRET_NAME: &str = "livekit_api_secret";
/// Name under which the console sessions' signing secret is stored (`console::session`).
const CONSOLE_SECRET_NAME: &str = "console_session_secret";

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub session_keys: SessionKeys,
    /// Signs and checks LiveKit access tokens.
    pub livekit_keys: LiveKitKeys,
    /// Signs and checks console session cookies.
    pub console_keys: ConsoleKeys,
    pub config: Arc<AppConfig>,
    /// Where calls go: the embedded media worker, or the fleet's workers (a replica); None when this
    /// process has no media path (no models, or `--no-media` alone).
    pub calls: Option<Arc<dyn confab_calls::CallPlacer>>,
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
        let livekit_secret = confab_store::settings::secret(&db, LIVEKIT_SECRET_NAME).await?;
        let console_secret = confab_store::settings::secret(&db, CONSOLE_SECRET_NAME).await?;
        let pages = Arc::new(page_cache::PageCache::new(db.backend == confab_store::Backend::Sqlite));
        Ok(AppState {
            db,
            pages,
            session_keys: SessionKeys::new(&secret),
            livekit_keys: LiveKitKeys::new(&livekit_secret),
            console_keys: ConsoleKeys::new(&console_secret),
            config: Arc::new(config),
            calls: None,
            meetings: None,
        })
    }

    /// Live calls (join page, WebRTC signalling) placed through `calls`.
    pub fn with_calls(mut self, calls: Arc<dyn confab_calls::CallPlacer>) -> AppState {
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
    pub async fn join_call(&self, conversation_id: &str, offer_sdp: String) -> Result<String, confab_calls::JoinError> {
        match &self.calls {
            Some(calls) => calls.join(conversation_id, offer_sdp).await,
            None => Err(confab_calls::JoinError::Unavailable("no media worker".into())),
        }
    }

    /// Hangs up the call of `conversation_id`; false when it has none here.
    pub async fn hang_up_call(&self, conversation_id: &str) -> Result<bool, confab_calls::JoinError> {
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
