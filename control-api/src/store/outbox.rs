//! The webhook outbox's rows: an event its agent subscribes to is stored before anything is sent
//! (`enqueue`, or `Subscribed::insert` inside a caller's transaction), so a crash loses none. The
//! deliverer (`crate::webhooks`) sends them.

use confab_engine::ConversationEvent;
use sqlx::Row;

use crate::agents::AgentFields;
use crate::store::Db;
use crate::store::collection::AGENTS;

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
