//! The schema, as numbered migrations applied in order at start. Every statement is valid on both
//! SQLite and PostgreSQL: TEXT, BIGINT and DOUBLE PRECISION columns only; JSON lives in TEXT. Triggers
//! (migration 9) and SQLite's trigram search index (migration 10) are the things written per database.

use sqlx::Row;

use super::{Backend, Db};

/// Tables that hold one resource each as a JSON document, with the columns lists and searches need.
const DOCUMENT_TABLES: &[&str] =
    &["agents", "templates", "guardrails", "tools", "mcp_servers", "knowledge_bases", "custom_avatars"];

fn document_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )"
    )
}

fn migration_1() -> Vec<String> {
    let mut statements: Vec<String> = DOCUMENT_TABLES.iter().map(|table| document_table(table)).collect();
    statements.extend(
        [
            "CREATE INDEX IF NOT EXISTS agents_created ON agents (created_at)",
            "CREATE TABLE IF NOT EXISTS guardrail_keys (
                key TEXT PRIMARY KEY,
                guardrail_id TEXT NOT NULL
            )",
            "CREATE TABLE IF NOT EXISTS knowledge_documents (
                id TEXT PRIMARY KEY,
                knowledge_base_id TEXT NOT NULL,
                title TEXT NOT NULL,
                content TEXT NOT NULL,
                position BIGINT NOT NULL,
                created_at TEXT NOT NULL
            )",
            "CREATE INDEX IF NOT EXISTS knowledge_documents_kb ON knowledge_documents (knowledge_base_id)",
            "CREATE TABLE IF NOT EXISTS custom_avatar_sources (
                avatar_id TEXT PRIMARY KEY,
                image_base64 TEXT NOT NULL
            )",
            "CREATE TABLE IF NOT EXISTS api_keys (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                key_hash TEXT NOT NULL UNIQUE,
                created_at TEXT NOT NULL,
                revoked_at TEXT
            )",
            "CREATE TABLE IF NOT EXISTS settings (
                name TEXT PRIMARY KEY,
                value TEXT NOT NULL
            )",
            "CREATE TABLE IF NOT EXISTS conversations (
                id TEXT PRIMARY KEY,
                agent_id TEXT NOT NULL,
                agent_name TEXT NOT NULL,
                avatar_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                user_name TEXT NOT NULL,
                context TEXT NOT NULL,
                meta_data TEXT NOT NULL,
                join_link TEXT NOT NULL,
                status TEXT NOT NULL,
                is_active BIGINT NOT NULL,
                conversation_type TEXT NOT NULL,
                job_id TEXT,
                feedback TEXT NOT NULL,
                rating BIGINT,
                usage_status TEXT NOT NULL,
                usage_json TEXT NOT NULL,
                snippets TEXT NOT NULL,
                chat_history TEXT NOT NULL,
                is_recorded BIGINT NOT NULL,
                recording_url TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )",
            "CREATE INDEX IF NOT EXISTS conversations_created ON conversations (created_at)",
            "CREATE TABLE IF NOT EXISTS transcript_entries (
                conversation_id TEXT NOT NULL,
                seq BIGINT NOT NULL,
                role TEXT NOT NULL,
                content TEXT NOT NULL,
                message_timestamp DOUBLE PRECISION NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (conversation_id, seq)
            )",
        ]
        .map(str::to_string),
    );
    statements
}

/// The webhook outbox: every event is stored here before it is sent.
/// Custom avatars' rigged portraits (PNG, base64) and rigs (JSON), written when a job completes.
fn migration_3() -> Vec<String> {
    vec![
        "CREATE TABLE IF NOT EXISTS custom_avatar_assets (
            avatar_id TEXT PRIMARY KEY,
            portrait_png_base64 TEXT NOT NULL,
            rig_json TEXT NOT NULL
        )"
        .to_string(),
    ]
}

fn migration_2() -> Vec<String> {
    [
        "CREATE TABLE IF NOT EXISTS webhook_outbox (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            agent_id TEXT NOT NULL,
            url TEXT NOT NULL,
            event_name TEXT NOT NULL,
            body TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts BIGINT NOT NULL,
            next_attempt_at BIGINT NOT NULL,
            last_error TEXT NOT NULL,
            created_at TEXT NOT NULL
        )",
        "CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox (status, next_attempt_at)",
        "CREATE INDEX IF NOT EXISTS webhook_outbox_head ON webhook_outbox (status, conversation_id, seq)",
    ]
    .map(str::to_string)
    .to_vec()
}

/// Each turn's stages (`turn_metrics`, `docs/engine.md`) as the live call recorded them, one JSON document per
/// turn.
fn migration_4() -> Vec<String> {
    vec![
        "CREATE TABLE IF NOT EXISTS turn_metrics (
            conversation_id TEXT NOT NULL,
            turn BIGINT NOT NULL,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (conversation_id, turn)
        )"
        .to_string(),
    ]
}

/// Knowledge-base chunks and their embeddings (`store::knowledge`): 384 little-endian f32, base64.
fn migration_5() -> Vec<String> {
    [
        "CREATE TABLE IF NOT EXISTS knowledge_chunks (
            document_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            knowledge_base_id TEXT NOT NULL,
            content TEXT NOT NULL,
            embedding TEXT NOT NULL,
            PRIMARY KEY (document_id, seq)
        )",
        "CREATE INDEX IF NOT EXISTS knowledge_chunks_kb ON knowledge_chunks (knowledge_base_id)",
    ]
    .map(str::to_string)
    .to_vec()
}

/// Webhook delivery leases (several deliverers share the outbox) and each event's creation time in
/// milliseconds (retries are bounded by time since then).
fn migration_6() -> Vec<String> {
    [
        "ALTER TABLE webhook_outbox ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE webhook_outbox ADD COLUMN created_ms BIGINT NOT NULL DEFAULT 0",
        "UPDATE webhook_outbox SET created_ms = next_attempt_at WHERE created_ms = 0",
    ]
    .map(str::to_string)
    .to_vec()
}

/// The fleet: which media worker holds each conversation (claimed by compare-and-set), why a conversation
/// ended when the platform ended it, and the workers' heartbeats (`store::workers`).
fn migration_7() -> Vec<String> {
    [
        "ALTER TABLE conversations ADD COLUMN worker_id TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE conversations ADD COLUMN end_reason TEXT NOT NULL DEFAULT ''",
        "CREATE INDEX IF NOT EXISTS conversations_worker ON conversations (worker_id)",
        "CREATE TABLE IF NOT EXISTS workers (
            id TEXT PRIMARY KEY,
            max_calls BIGINT NOT NULL,
            active_calls BIGINT NOT NULL,
            draining BIGINT NOT NULL,
            heartbeat_ms BIGINT NOT NULL,
            started_at TEXT NOT NULL
        )",
    ]
    .map(str::to_string)
    .to_vec()
}

/// External meetings: who said each user turn, as the meeting's page showed it ('' when unknown).
fn migration_8() -> Vec<String> {
    vec!["ALTER TABLE transcript_entries ADD COLUMN speaker TEXT NOT NULL DEFAULT ''".to_string()]
}

/// The number of rows of each document table, kept by triggers in the same transaction as the write, so a
/// list's `X-Total-Count` is one row read instead of a count over the table (SQLite counts by walking a
/// whole index).
fn migration_9(backend: Backend) -> Vec<String> {
    let mut statements = vec!["CREATE TABLE row_counts (table_name TEXT PRIMARY KEY, n BIGINT NOT NULL)".to_string()];
    if backend == Backend::Postgres {
        statements.push(
            "CREATE OR REPLACE FUNCTION confab_count_rows() RETURNS trigger LANGUAGE plpgsql AS $body$ \
             BEGIN \
               IF TG_OP = 'INSERT' THEN UPDATE row_counts SET n = n + 1 WHERE table_name = TG_TABLE_NAME; \
               ELSE UPDATE row_counts SET n = n - 1 WHERE table_name = TG_TABLE_NAME; END IF; \
               RETURN NULL; \
             END $body$"
                .to_string(),
        );
    }
    for table in DOCUMENT_TABLES {
        statements.push(format!("INSERT INTO row_counts (table_name, n) SELECT '{table}', COUNT(*) FROM {table}"));
        match backend {
            Backend::Sqlite => {
                statements.push(format!(
                    "CREATE TRIGGER {table}_count_insert AFTER INSERT ON {table} \
                     BEGIN UPDATE row_counts SET n = n + 1 WHERE table_name = '{table}'; END"
                ));
                statements.push(format!(
                    "CREATE TRIGGER {table}_count_delete AFTER DELETE ON {table} \
                     BEGIN UPDATE row_counts SET n = n - 1 WHERE table_name = '{table}'; END"
                ));
            }
            Backend::Postgres => statements.push(format!(
                "CREATE TRIGGER {table}_count AFTER INSERT OR DELETE ON {table} \
                 FOR EACH ROW EXECUTE FUNCTION confab_count_rows()"
            )),
        }
    }
    statements
}

/// On SQLite, a trigram index (FTS5) over each document table's name and id, kept by triggers, so a
/// `search` of three characters or more is answered from the index instead of reading every row
/// (`Collection::list`). PostgreSQL keeps scanning (`pg_trgm` is an extension a server may not have).
fn migration_10(backend: Backend) -> Vec<String> {
    if backend != Backend::Sqlite {
        return Vec::new();
    }
    let mut statements = Vec::new();
    for table in DOCUMENT_TABLES {
        let index = format!("{table}_search");
        statements.push(format!("CREATE VIRTUAL TABLE {index} USING fts5(name, id, tokenize = 'trigram')"));
        statements.push(format!("INSERT INTO {index} (name, id) SELECT name, id FROM {table}"));
        statements.push(format!(
            "CREATE TRIGGER {index}_insert AFTER INSERT ON {table} \
             BEGIN INSERT INTO {index} (name, id) VALUES (new.name, new.id); END"
        ));
        statements.push(format!(
            "CREATE TRIGGER {index}_update AFTER UPDATE OF name, id ON {table} \
             BEGIN DELETE FROM {index} WHERE id = old.id; INSERT INTO {index} (name, id) VALUES (new.name, new.id); END"
        ));
        statements.push(format!(
            "CREATE TRIGGER {index}_delete AFTER DELETE ON {table} BEGIN DELETE FROM {index} WHERE id = old.id; END"
        ));
    }
    statements
}

/// One-time console sign-in links (`console_links`).
fn migration_11() -> Vec<String> {
    vec![
        "CREATE TABLE IF NOT EXISTS console_links (
        code_hash TEXT PRIMARY KEY,
        expires_ms BIGINT NOT NULL,
        used_ms BIGINT
    )"
        .to_string(),
    ]
}

/// The calls the fleet's workers hold (`workers::fleet_load`, asked before every fleet join): only the
/// conversations not ENDED, so the count stays as small as the calls in progress however many ended.
fn migration_12() -> Vec<String> {
    vec![
        "CREATE INDEX IF NOT EXISTS conversations_held ON conversations (worker_id) WHERE status <> 'ENDED'"
            .to_string(),
    ]
}

/// Applies every migration newer than the recorded version, each in its own transaction.
pub async fn run(db: &Db) -> Result<(), sqlx::Error> {
    sqlx::query("CREATE TABLE IF NOT EXISTS confab_migrations (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)")
        .execute(&db.pool)
        .await?;
    let migrations: Vec<(i64, Vec<String>)> = vec![
        (1, migration_1()),
        (2, migration_2()),
        (3, migration_3()),
        (4, migration_4()),
        (5, migration_5()),
        (6, migration_6()),
        (7, migration_7()),
        (8, migration_8()),
        (9, migration_9(db.backend)),
        (10, migration_10(db.backend)),
        (11, migration_11()),
        (12, migration_12()),
    ];
    for (version, statements) in migrations {
        let mut tx = db.begin_write().await?;
        if db.backend == Backend::Postgres {
            // Replicas starting together apply each migration once.
            sqlx::query("SELECT pg_advisory_xact_lock(7305817)").execute(&mut *tx).await?;
        }
        let applied = sqlx::query("SELECT COUNT(*) AS n FROM confab_migrations WHERE version = $1")
            .bind(version)
            .fetch_one(&mut *tx)
            .await?
            .try_get::<i64, _>("n")?;
        if applied > 0 {
            continue;
        }
        for statement in &statements {
            sqlx::query(statement).execute(&mut *tx).await?;
        }
        sqlx::query("INSERT INTO confab_migrations (version, applied_at) VALUES ($1, $2)")
            .bind(version)
            .bind(crate::wall_clock::now_iso())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
}
