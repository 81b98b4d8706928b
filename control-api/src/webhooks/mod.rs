//! Webhooks: the 11 conversation events to the agent's `callback_url`, only those in `callback_events`,
//! in SPEC.md's envelope, from a durable outbox.
//!
//! Every event is stored before it is sent, so a crash or restart loses none. The deliverer sends, per
//! conversation, the oldest pending event first (order is kept); each conversation goes on its own, so a
//! slow receiver delays only its own conversation's events. A delivery is claimed with a lease
//! (`lease_until`, compare-and-set), so several deliverers (control-plane replicas) can share one
//! outbox and each row is sent by one of them at a time; a crashed deliverer's lease runs out and another
//! takes the row. Network errors, timeouts, 5xx and 429 are retried for a day (`schedule`); any other 4xx
//! or an address the SSRF guard refuses marks the event failed, and the next one goes. Each delivery is
//! signed (Standard Webhooks); a redelivery keeps its `webhook-id`.

pub mod schedule;

pub use confab_engine::outbound::guard as ssrf;
pub use confab_engine::outbound::signing;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::agents::AgentFields;
use crate::store::Db;
use crate::store::collection::AGENTS;
use crate::store::outbox::{DELIVERED, FAILED, PENDING, now_millis};

/// Deliveries under way at once, per deliverer (each a different conversation).
pub const MAX_IN_FLIGHT: usize = 64;

#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Deliver to loopback and private addresses (tests, local development).
    pub allow_private: bool,
    /// Time for one delivery attempt, connection to answer.
    pub request_timeout: Duration,
    /// The unit of `schedule::RETRY_SCHEDULE` (a second in production).
    pub retry_unit: Duration,
    /// How long after it was stored an event is still retried.
    pub retry_window: Duration,
    /// A claimed delivery is leased for `request_timeout` plus this; a deliverer that dies mid-delivery
    /// holds its rows that long, then another deliverer sends them again (same `webhook-id`).
    pub lease_margin: Duration,
    /// How often the deliverer looks for due events when not woken.
    pub poll_interval: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            allow_private: false,
            request_timeout: Duration::from_secs(10),
            retry_unit: Duration::from_secs(1),
            retry_window: Duration::from_secs(24 * 3600),
            lease_margin: Duration::from_secs(5),
            poll_interval: Duration::from_millis(500),
        }
    }
}

struct Due {
    id: String,
    conversation_id: String,
    agent_id: String,
    url: String,
    body: String,
    attempts: i64,
    created_ms: i64,
}

/// Claims up to `limit` due deliveries: the oldest pending event of conversations not in `busy`, when due
/// and not leased by another deliverer. Each is leased until `lease_until` by a compare-and-set, so two
/// deliverers never send the same row at once.
async fn claim(db: &Db, limit: usize, busy: &HashSet<String>, lease_until: i64) -> Result<Vec<Due>, sqlx::Error> {
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

    /// Delivers until the task is dropped: each claimed delivery runs on its own, so one slow receiver
    /// holds up only its own conversation.
    pub async fn run(self) {
        let this = Arc::new(self);
        let mut deliveries: JoinSet<String> = JoinSet::new();
        let mut busy: HashSet<String> = HashSet::new();
        loop {
            let room = MAX_IN_FLIGHT.saturating_sub(busy.len());
            let lease_until =
                now_millis() + (this.config.request_timeout + this.config.lease_margin).as_millis() as i64;
            if room > 0 {
                match claim(&this.db, room, &busy, lease_until).await {
                    Ok(claimed) => {
                        for event in claimed {
                            busy.insert(event.conversation_id.clone());
                            let deliverer = this.clone();
                            deliveries.spawn(async move {
                                let conversation = event.conversation_id.clone();
                                deliverer.attempt(event).await;
                                conversation
                            });
                        }
                    }
                    Err(err) => tracing::error!(error = %err, "cannot read the webhook outbox"),
                }
            }
            tokio::select! {
                Some(done) = deliveries.join_next() => {
                    if let Ok(conversation) = done {
                        busy.remove(&conversation);
                    }
                    // A panicked delivery keeps its conversation busy until its lease runs out and the
                    // process restarts; it is logged by the runtime.
                }
                _ = this.wake.notified() => {}
                _ = tokio::time::sleep(this.config.poll_interval) => {}
            }
        }
    }

    async fn attempt(&self, event: Due) {
        let outcome = self.send(&event).await;
        let attempts = event.attempts + 1;
        let now = now_millis();
        let next = match &outcome {
            Outcome::Retry { retry_after, .. } => {
                let jitter = 0.8 + rand::random::<f64>() * 0.4;
                let config = &self.config;
                schedule::next_attempt(
                    event.created_ms,
                    now,
                    attempts,
                    *retry_after,
                    config.retry_unit,
                    config.retry_window,
                    jitter,
                )
            }
            _ => None,
        };
        let label = match (&outcome, next) {
            (Outcome::Delivered, _) => "delivered",
            (Outcome::Retry { .. }, Some(_)) => "retried",
            _ => "failed",
        };
        crate::metrics::metrics().webhook_attempt(label);
        let result = match (outcome, next) {
            (Outcome::Delivered, _) => self.finish(&event.id, DELIVERED, attempts, "").await,
            (Outcome::Fail(error), _) => self.finish(&event.id, FAILED, attempts, &error).await,
            (Outcome::Retry { error, .. }, None) => {
                let error = format!("gave up after {attempts} attempts, the retry window closed: {error}");
                self.finish(&event.id, FAILED, attempts, &error).await
            }
            (Outcome::Retry { error, .. }, Some(at)) => sqlx::query(
                "UPDATE webhook_outbox SET attempts = $1, next_attempt_at = $2, last_error = $3, lease_until = 0 \
                 WHERE id = $4",
            )
            .bind(attempts)
            .bind(at)
            .bind(error)
            .bind(&event.id)
            .execute(&self.db.pool)
            .await
            .map(|_| ()),
        };
        if let Err(err) = result {
            tracing::error!(error = %err, webhook_id = %event.id, "cannot record a webhook attempt");
        }
    }

    async fn finish(&self, id: &str, status: &str, attempts: i64, error: &str) -> Result<(), sqlx::Error> {
        if status == FAILED {
            tracing::warn!(webhook_id = %id, %error, "webhook failed");
        }
        sqlx::query(
            "UPDATE webhook_outbox SET status = $1, attempts = $2, last_error = $3, lease_until = 0 WHERE id = $4",
        )
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
        if let Err(error) = ssrf::check_url(&url, self.config.allow_private) {
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
                    .and_then(|v| schedule::parse_retry_after(v, std::time::SystemTime::now()));
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
