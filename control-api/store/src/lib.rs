//! confab-store: what every role of Confab shares below the HTTP server and the media worker — the records
//! and the agent domain, with the SQL that keeps them.
//!
//! Storage is one schema on SQLite (the embedded default, WAL) and PostgreSQL (the fleet), reached through
//! sqlx's `Any` driver so every query is written once. Queries use `$1, $2, …` placeholders in order of
//! first appearance, which both backends accept. Beside the tables (`collection`, `conversations`,
//! `knowledge`, `knowledge_documents`, `outbox`, `settings`, `turn_metrics`, `workers`, `migrations`):
//! - the agent domain: `agents` (the Agent model and its resolution), `agent_config` (its typed pipeline),
//!   `records` (the guardrails, tools, MCP servers and knowledge bases an agent attaches), `validate` and
//!   `error` (the field rules and the one error type with its exact bodies);
//! - what a conversation does to its records: `conversation_events` (events into the webhook outbox, the
//!   transcript, the status), `conversation_knowledge` (retrieval), `avatars` (the pictures and
//!   rigs an agent's face is drawn from), `meeting_mode` and `meeting_speakers`;
//! - `call_records`: the store's side of the call seam (`confab_calls::CallRecords`): what a media worker
//!   reads and writes of its calls, typed, through the port rather than through these modules;
//! - `api_keys` (hashed, with `key_cache` remembering the keys seen recently) and `wall_clock` (timestamps as
//!   stored).

pub mod agent_config;
pub mod agents;
pub mod api_keys;
pub mod avatars;
pub mod call_records;
pub mod collection;
pub mod console_links;
pub mod conversation_events;
pub mod conversation_knowledge;
pub mod conversations;
pub mod db_health;
pub mod error;
pub mod key_cache;
pub mod knowledge;
pub mod knowledge_documents;
pub mod meeting_mode;
pub mod meeting_speakers;
mod migrations;
pub mod outbox;
pub mod records;
pub mod settings;
pub mod turn_metrics;
pub mod validate;
pub mod wall_clock;
pub mod webhook_deliveries;
pub mod workers;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions};

pub use collection::{Collection, Page, StoredRecord};

/// Which database a URL selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone)]
pub struct Db {
    pub pool: AnyPool,
    pub backend: Backend,
    /// API keys recently found valid (`auth`), shared by every clone of this handle.
    pub keys: std::sync::Arc<crate::key_cache::KeyCache>,
    /// Whether the database answers (`db_health`), shared by every clone of this handle.
    pub health: std::sync::Arc<crate::db_health::DbHealth>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL (expected postgres://… or sqlite://…): {0}")]
    UnsupportedUrl(String),
    #[error("cannot create the data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
}

/// The database URL for `--database-url`/`DATABASE_URL` when given, else SQLite in the data directory.
pub fn resolve_url(database_url: Option<&str>, data_dir: &Path) -> Result<String, StoreError> {
    if let Some(url) = database_url.filter(|url| !url.is_empty()) {
        return Ok(url.to_string());
    }
    std::fs::create_dir_all(data_dir)
        .map_err(|source| StoreError::DataDir { path: data_dir.display().to_string(), source })?;
    Ok(format!("sqlite://{}?mode=rwc", data_dir.join("confab.db").display()))
}

impl Db {
    /// Connects and runs every pending migration.
    pub async fn connect(url: &str) -> Result<Db, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        let options = AnyConnectOptions::from_str(url)?.disable_statement_logging();
        let max_connections = match backend {
            Backend::Sqlite => 4,
            Backend::Postgres => 16,
        };
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections)
            // Bounds a request caught by an outage before the watcher (`db_health`) knows of it.
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlx::query("PRAGMA busy_timeout = 5000").execute(&mut *conn).await?;
                        sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        if backend == Backend::Sqlite {
            sqlx::query("PRAGMA journal_mode = WAL").execute(&pool).await?;
        }
        let db = Db { pool, backend, keys: Default::default(), health: Default::default() };
        migrations::run(&db).await?;
        Ok(db)
    }
}

impl Db {
    /// A transaction that will write. On SQLite it takes the write lock at once (`BEGIN IMMEDIATE`,
    /// waiting up to the busy timeout): a deferred transaction that reads first can otherwise fail to
    /// upgrade with "database is locked" when another connection wrote in between.
    pub async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
    }
}

/// Escapes `%`, `_` and `\` so user text matches literally inside `LIKE … ESCAPE '\'`.
/// Ids bound in one `IN (…)` list (well under SQLite's and PostgreSQL's limits on parameters).
pub const IDS_PER_QUERY: usize = 500;

/// `$1, $2, …, $n`: the placeholders of an `IN (…)` list of `n` values.
pub fn placeholders(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

pub fn like_pattern(search: &str) -> String {
    let mut pattern = String::with_capacity(search.len() + 2);
    pattern.push('%');
    for ch in search.to_lowercase().chars() {
        if matches!(ch, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern.push('%');
    pattern
}
