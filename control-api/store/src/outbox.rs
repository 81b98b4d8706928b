//! The webhook outbox's rows: an event its agent subscribes to is stored before anything is sent
//! (`enqueue`, or `Subscribed::insert` inside a caller's transaction), so a crash loses none. The
//! deliverer (`crate::webhooks`) sends them.

use std::collections::HashSet;

use confab_engine::ConversationEvent;
use sqlx::Row;

use crate::Db;
use crate::agents::AgentFields;
use crate::collection::AGENTS;

/// A row waiting to be delivered (or retried).
pub const PENDING: &str = "pending";
/// Delivered: the receiver answered 2xx.
pub const DELIVERED: &str = "delivered";
/// Given up: refused by the receiver or the SSRF guard, or retried for the whole retry window.
pub const FAILED: &str = "failed";

/// Milliseconds since the Unix epoch: the outbox's clock (`next_attempt_at`, `lease_until`).
pub fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Stores `event` for delivery when the conversation's agent subscribes to it; returns whether it did.
pub async fn enqueue(db: &Db, conversation_id: &str, event: &ConversationEvent) -> Result<bool, sqlx::Error> {
    let Some(queued) = subscribed(db, conversation_id, event).await? else { return Ok(false) };
    let mut tx = db.begin_write().await?;
    queued.insert(&mut tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// An event its agent subscribes to, ready to be stored in the outbox.
pub struct Subscribed {
    conversation_id: String,
    agent_id: String,
    url: String,
    name: &'static str,
    body: String,
}

/// The outbox row `event` becomes, when the conversation's agent subscribes to it.
pub async fn subscribed(
    db: &Db,
    conversation_id: &str,
    event: &ConversationEvent,
) -> Result<Option<Subscribed>, sqlx::Error> {
    let Some(row) = sqlx::query("SELECT agent_id FROM conversations WHERE id = $1")
        .bind(conversation_id)
        .fetch_optional(&db.pool)
        .await?
    else {
        return Ok(None);
    };
    let agent_id: String = row.try_get("agent_id")?;
    let Some(agent) = AGENTS.get(db, &agent_id).await? else { return Ok(None) };
    let fields: AgentFields = agent.fields()?;
    let name = event.kind.name();
    if fields.callback_url.is_empty() || !fields.callback_events.iter().any(|e| e == name) {
        return Ok(None);
    }
    let body = event.envelope(conversation_id, crate::wall_clock::unix_seconds_now()).to_string();
    Ok(Some(Subscribed {
        conversation_id: conversation_id.to_string(),
        agent_id,
        url: fields.callback_url,
        name,
        body,
    }))
}

impl Subscribed {
    /// The same event with `payload[key] = value` (e.g. why the platform ended a call).
    pub fn with_payload_field(mut self, key: &str, value: &str) -> Subscribed {
        let mut envelope: serde_json::Value = serde_json::from_str(&self.body).expect("envelopes are JSON");
        envelope["event"]["payload"][key] = serde_json::json!(value);
        self.body = envelope.to_string();
        self
    }

    /// Stores the event in the outbox inside the caller's transaction (it exists if and only if that commits).
    pub async fn insert(self, tx: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
        let seq: i64 =
            sqlx::query("SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM webhook_outbox WHERE conversation_id = $1")
                .bind(&self.conversation_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("next")?;
        sqlx::query(
            "INSERT INTO webhook_outbox (id, conversation_id, seq, agent_id, url, event_name, body, status, \
             attempts, next_attempt_at, last_error, created_at, created_ms, lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, '', $10, $9, 0)",
        )
        .bind(format!("msg_{}", uuid::Uuid::new_v4().simple()))
        .bind(&self.conversation_id)
        .bind(seq)
        .bind(&self.agent_id)
        .bind(&self.url)
        .bind(self.name)
        .bind(self.body)
        .bind(PENDING)
        .bind(now_millis())
        .bind(crate::wall_clock::now_iso())
        .execute(&mut *tx)
        .await?;
        Ok(())
    }
}

/// A delivery claimed by this deliverer (leased until the time it gave).
pub struct Due {
    pub id: String,
    pub conversation_id: String,
    pub agent_id: String,
    pub url: String,
    pub body: String,
    pub attempts: i64,
    pub created_ms: i64,
}

/// Claims up to `limit` due deliveries: the oldest pending event of conversations not in `busy`, when due
/// and not leased by another deliverer. Each is leased until `lease_until` by a compare-and-set, so two
/// deliverers never send the same row at once.
pub async fn claim(db: &Db, limit: usize, busy: &HashSet<String>, lease_until: i64) -> Result<Vec<Due>, sqlx::Error> {
    let now = now_millis();
    let rows = sqlx::query(
        "SELECT o.id, o.conversation_id, o.agent_id, o.url, o.body, o.attempts, o.created_ms FROM webhook_outbox o \
         JOIN (SELECT conversation_id, MIN(seq) AS head FROM webhook_outbox WHERE status = $1 GROUP BY conversation_id) h \
         ON o.conversation_id = h.conversation_id AND o.seq = h.head \
         WHERE o.next_attempt_at <= $2 AND o.lease_until <= $2 ORDER BY o.next_attempt_at LIMIT $3",
    )
    .bind(PENDING)
    .bind(now)
    .bind((limit + busy.len()) as i64)
    .fetch_all(&db.pool)
    .await?;
    let mut claimed = Vec::new();
    for row in rows {
        let due = Due {
            id: row.try_get("id")?,
            conversation_id: row.try_get("conversation_id")?,
            agent_id: row.try_get("agent_id")?,
            url: row.try_get("url")?,
            body: row.try_get("body")?,
            attempts: row.try_get("attempts")?,
            created_ms: row.try_get("created_ms")?,
        };
        if claimed.len() == limit || busy.contains(&due.conversation_id) {
            continue;
        }
        let taken = sqlx::query("UPDATE webhook_outbox SET lease_until = $1 WHERE id = $2 AND lease_until <= $3")
            .bind(lease_until)
            .bind(&due.id)
            .bind(now)
            .execute(&db.pool)
            .await?
            .rows_affected();
        if taken == 1 {
            claimed.push(due);
        }
    }
    Ok(claimed)
}

/// Counts of outbox rows by status, for tests and health.
pub async fn status_counts(db: &Db) -> Result<std::collections::BTreeMap<String, i64>, sqlx::Error> {
    let rows =
        sqlx::query("SELECT status, COUNT(*) AS n FROM webhook_outbox GROUP BY status").fetch_all(&db.pool).await?;
    rows.iter().map(|r| Ok((r.try_get("status")?, r.try_get("n")?))).collect()
}

/// Records an attempt that will be retried: attempts so far, when the next is due, and why this one failed.
pub async fn retry_later(
    db: &Db,
    id: &str,
    attempts: i64,
    next_attempt_at: i64,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE webhook_outbox SET attempts = $1, next_attempt_at = $2, last_error = $3, lease_until = 0 WHERE id = $4",
    )
    .bind(attempts)
    .bind(next_attempt_at)
    .bind(error)
    .bind(id)
    .execute(&db.pool)
    .await
    .map(|_| ())
}

/// Records the last attempt: `status` `DELIVERED` or `FAILED` (with why).
pub async fn finish(db: &Db, id: &str, status: &str, attempts: i64, error: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE webhook_outbox SET status = $1, attempts = $2, last_error = $3, lease_until = 0 WHERE id = $4")
        .bind(status)
        .bind(attempts)
        .bind(error)
        .bind(id)
        .execute(&db.pool)
        .await
        .map(|_| ())
}

/// Events of a conversation still waiting to be delivered.
pub async fn pending_count(db: &Db, conversation_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query("SELECT COUNT(*) AS n FROM webhook_outbox WHERE conversation_id = $1 AND status = $2")
        .bind(conversation_id)
        .bind(PENDING)
        .fetch_one(&db.pool)
        .await?
        .try_get("n")
}
