//! The deliverer: claims due outbox rows (`store::outbox::claim`), sends each signed, and records the
//! outcome: delivered, retried on the schedule, or failed (see the module `webhooks`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::config::WebhookConfig;
use super::{schedule, signing, ssrf};
use confab_store::Db;
use confab_store::agents::AgentFields;
use confab_store::collection::AGENTS;
use confab_store::outbox::{self, DELIVERED, Due, FAILED, claim, now_millis};

/// Deliveries under way at once, per deliverer (each a different conversation).
pub const MAX_IN_FLIGHT: usize = 64;

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
            // While the database is known not to answer there is nothing to claim (the outage is logged
            // once, by `db_health`); the next poll after it answers again picks up where this left off.
            if room > 0 && !this.db.health.is_down() {
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
        confab_calls::metrics::metrics().webhook_attempt(label);
        let result = match (outcome, next) {
            (Outcome::Delivered, _) => self.finish(&event.id, DELIVERED, attempts, "").await,
            (Outcome::Fail(error), _) => self.finish(&event.id, FAILED, attempts, &error).await,
            (Outcome::Retry { error, .. }, None) => {
                let error = format!("gave up after {attempts} attempts, the retry window closed: {error}");
                self.finish(&event.id, FAILED, attempts, &error).await
            }
            (Outcome::Retry { error, .. }, Some(at)) => {
                outbox::retry_later(&self.db, &event.id, attempts, at, &error).await
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
        outbox::finish(&self.db, id, status, attempts, error).await
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
