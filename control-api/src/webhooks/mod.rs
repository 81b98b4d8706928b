//! Webhooks: the 11 conversation events to the agent's `callback_url`, only those in `callback_events`,
//! in SPEC.md's envelope, from a durable outbox.
//!
//! Every event is stored before it is sent, so a crash or restart loses none. The deliverer sends, per
//! conversation, the oldest pending event first (order is kept); different conversations go in
//! parallel. Network errors, timeouts, 5xx and 429 are retried on `RETRY_SCHEDULE` (× `retry_unit`,
//! with ±20% jitter, `Retry-After` honoured up to an hour); any other 4xx, an address the SSRF guard
//! refuses, or an exhausted schedule marks the event failed, and the next one goes. Each delivery is
//! signed (Standard Webhooks); a redelivery keeps its `webhook-id`.

pub use confab_engine::outbound::guard as ssrf;
pub use confab_engine::outbound::signing;

use std::sync::Arc;
use std::time::Duration;

use confab_engine::ConversationEvent;
use sqlx::Row;
use tokio::sync::Notify;

use crate::routes::agents::AgentFields;
use crate::store::Db;
use crate::store::collection::AGENTS;

/// Delays before each retry, in units of `retry_unit` (seconds in production): about 1 h 45 min in all,
/// 8 attempts.
pub const RETRY_SCHEDULE: [u32; 7] = [1, 5, 30, 120, 600, 1800, 3600];
/// Events claimed per pass of the deliverer.
pub const BATCH: i64 = 64;

pub const PENDING: &str = "pending";
pub const DELIVERED: &str = "delivered";
pub const FAILED: &str = "failed";

#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Deliver to loopback and private addresses (tests, local development).
    pub allow_private: bool,
    /// Time for one delivery attempt, connection to answer.
    pub request_timeout: Duration,
    /// The unit of `RETRY_SCHEDULE`.
    pub retry_unit: Duration,
    /// How often the deliverer looks for due events when not woken.
    pub poll_interval: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            allow_private: false,
            request_timeout: Duration::from_secs(10),
            retry_unit: Duration::from_secs(1),
            poll_interval: Duration::from_millis(500),
        }
    }
}

fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Stores `event` for delivery when the conversation's agent subscribes to it; returns whether it did.
pub async fn enqueue(db: &Db, conversation_id: &str, event: &ConversationEvent) -> Result<bool, sqlx::Error> {
    let Some(row) = sqlx::query("SELECT agent_id FROM conversations WHERE id = $1")
        .bind(conversation_id)
        .fetch_optional(&db.pool)
        .await?
    else {
        return Ok(false);
    };
    let agent_id: String = row.try_get("agent_id")?;
    let Some(agent) = AGENTS.get(db, &agent_id).await? else { return Ok(false) };
    let fields: AgentFields = agent.fields()?;
    let name = event.kind.name();
    if fields.callback_url.is_empty() || !fields.callback_events.iter().any(|e| e == name) {
        return Ok(false);
    }
    let body = event.envelope(conversation_id, crate::time::unix_seconds_now()).to_string();
    let mut tx = db.begin_write().await?;
    let seq: i64 =
        sqlx::query("SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM webhook_outbox WHERE conversation_id = $1")
            .bind(conversation_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("next")?;
    sqlx::query(
        "INSERT INTO webhook_outbox (id, conversation_id, seq, agent_id, url, event_name, body, status, attempts, \
         next_attempt_at, last_error, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, '', $10)",
    )
    .bind(format!("msg_{}", uuid::Uuid::new_v4().simple()))
    .bind(conversation_id)
    .bind(seq)
    .bind(&agent_id)
    .bind(&fields.callback_url)
    .bind(name)
    .bind(body)
    .bind(PENDING)
    .bind(now_millis())
    .bind(crate::time::now_iso())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

struct Due {
    id: String,
    agent_id: String,
    url: String,
    body: String,
    attempts: i64,
}

/// The oldest pending event of each conversation, when due.
async fn due(db: &Db) -> Result<Vec<Due>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT o.id, o.agent_id, o.url, o.body, o.attempts FROM webhook_outbox o \
         JOIN (SELECT conversation_id, MIN(seq) AS head FROM webhook_outbox WHERE status = $1 GROUP BY conversation_id) h \
         ON o.conversation_id = h.conversation_id AND o.seq = h.head \
         WHERE o.next_attempt_at <= $2 ORDER BY o.next_attempt_at LIMIT $3",
    )
    .bind(PENDING)
    .bind(now_millis())
    .bind(BATCH)
    .fetch_all(&db.pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Due {
                id: r.try_get("id")?,
                agent_id: r.try_get("agent_id")?,
                url: r.try_get("url")?,
                body: r.try_get("body")?,
                attempts: r.try_get("attempts")?,
            })
        })
        .collect()
}

enum Outcome {
    Delivered,
    Retry { error: String, retry_after: Option<Duration> },
    Fail(String),
}

pub struct Deliverer {
    db: Db,
    client: reqwest::Client,
    config: WebhookConfig,
    wake: Arc<Notify>,
}

impl Deliverer {
    pub fn new(db: Db, config: WebhookConfig) -> Deliverer {
        let client = ssrf::client(config.allow_private, config.request_timeout);
        Deliverer { db, client, config, wake: Arc::new(Notify::new()) }
    }

    /// Wakes the deliverer (new events were stored).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Delivers until the task is dropped.
    pub async fn run(self) {
        loop {
            match due(&self.db).await {
                Ok(batch) if !batch.is_empty() => {
                    futures_util::future::join_all(batch.into_iter().map(|event| self.attempt(event))).await;
                    continue;
                }
                Ok(_) => {}
                Err(err) => tracing::error!(error = %err, "cannot read the webhook outbox"),
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
    }

    async fn attempt(&self, event: Due) {
        let outcome = self.send(&event).await;
        let attempts = event.attempts + 1;
        let label = match &outcome {
            Outcome::Delivered => "delivered",
            Outcome::Fail(_) => "failed",
            Outcome::Retry { .. } if attempts as usize > RETRY_SCHEDULE.len() => "failed",
            Outcome::Retry { .. } => "retried",
        };
        crate::metrics::metrics().webhook_attempt(label);
        let result = match outcome {
            Outcome::Delivered => self.finish(&event.id, DELIVERED, attempts, "").await,
            Outcome::Fail(error) => self.finish(&event.id, FAILED, attempts, &error).await,
            Outcome::Retry { error, .. } if attempts as usize > RETRY_SCHEDULE.len() => {
                self.finish(&event.id, FAILED, attempts, &format!("gave up after {attempts} attempts: {error}")).await
            }
            Outcome::Retry { error, retry_after } => {
                let planned = self.config.retry_unit * RETRY_SCHEDULE[attempts as usize - 1];
                let jitter = 0.8 + rand::random::<f64>() * 0.4;
                let delay = retry_after.map(|r| r.min(Duration::from_secs(3600))).unwrap_or(planned.mul_f64(jitter));
                sqlx::query(
                    "UPDATE webhook_outbox SET attempts = $1, next_attempt_at = $2, last_error = $3 WHERE id = $4",
                )
                .bind(attempts)
                .bind(now_millis() + delay.as_millis() as i64)
                .bind(error)
                .bind(&event.id)
                .execute(&self.db.pool)
                .await
                .map(|_| ())
            }
        };
        if let Err(err) = result {
            tracing::error!(error = %err, webhook_id = %event.id, "cannot record a webhook attempt");
        }
    }

    async fn finish(&self, id: &str, status: &str, attempts: i64, error: &str) -> Result<(), sqlx::Error> {
        if status == FAILED {
            tracing::warn!(webhook_id = %id, %error, "webhook failed");
        }
        sqlx::query("UPDATE webhook_outbox SET status = $1, attempts = $2, last_error = $3 WHERE id = $4")
            .bind(status)
            .bind(attempts)
            .bind(error)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map(|_| ())
    }

    async fn send(&self, event: &Due) -> Outcome {
        let url = match url::Url::parse(&event.url) {
            Ok(url) => url,
            Err(err) => return Outcome::Fail(format!("bad URL: {err}")),
        };
        if let Err(error) = ssrf::check_literal_host(&url, self.config.allow_private) {
            return Outcome::Fail(error);
        }
        let secret = match AGENTS.get(&self.db, &event.agent_id).await {
            Ok(Some(agent)) => match agent.fields::<AgentFields>() {
                Ok(fields) => fields.webhook_secret,
                Err(err) => return Outcome::Retry { error: err.to_string(), retry_after: None },
            },
            Ok(None) => return Outcome::Fail("the agent was deleted".into()),
            Err(err) => return Outcome::Retry { error: err.to_string(), retry_after: None },
        };
        let timestamp = chrono::Utc::now().timestamp();
        let signature = match signing::sign(&secret, &event.id, timestamp, event.body.as_bytes()) {
            Ok(signature) => signature,
            Err(err) => return Outcome::Fail(err.to_string()),
        };
        let request = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &event.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(event.body.clone());
        match request.send().await {
            Ok(response) if response.status().is_success() => Outcome::Delivered,
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let error = format!("HTTP {status}");
                if status == 429 || status >= 500 {
                    Outcome::Retry { error, retry_after }
                } else {
                    Outcome::Fail(error)
                }
            }
            Err(err) if format!("{err:?}").contains("may not reach") => Outcome::Fail(format!("{err:?}")),
            Err(err) => Outcome::Retry { error: err.to_string(), retry_after: None },
        }
    }
}

/// Counts of outbox rows by status, for tests and health.
pub async fn status_counts(db: &Db) -> Result<std::collections::BTreeMap<String, i64>, sqlx::Error> {
    let rows =
        sqlx::query("SELECT status, COUNT(*) AS n FROM webhook_outbox GROUP BY status").fetch_all(&db.pool).await?;
    rows.iter().map(|r| Ok((r.try_get("status")?, r.try_get("n")?))).collect()
}
