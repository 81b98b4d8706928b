//! Runs in a replica beside the API: ends the calls of lost workers (no heartbeat for `WORKER_LOST_AFTER`:
//! records ENDED with `end_reason = worker_lost`, `participant_left` and `call_ended` queued, exactly once
//! across replicas), and wakes the webhook deliverer when a worker says it stored events.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;

use confab_calls::fleet_protocol as protocol;
use confab_store::Db;
use confab_store::workers;

/// How often replicas look for lost workers.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

/// Ends lost workers' calls every `SWEEP_INTERVAL`, waking the deliverer when it queued webhooks.
pub async fn sweep_lost_workers(db: Db, deliverer: Arc<Notify>) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    loop {
        tick.tick().await;
        let cutoff = protocol::now_ms() - protocol::WORKER_LOST_AFTER.as_millis() as i64;
        match workers::end_calls_of_lost_workers(&db, cutoff).await {
            Ok(ended) if ended.is_empty() => {}
            Ok(ended) => {
                for call in &ended {
                    tracing::warn!(worker = %call.worker_id, conversation_id = %call.conversation_id,
                        "media worker lost; its call is ended");
                }
                deliverer.notify_one();
            }
            Err(err) => tracing::warn!(error = %err, "cannot look for lost media workers"),
        }
    }
}

/// Wakes `deliverer` whenever a worker announces stored webhook events.
pub async fn relay_outbox_wakeups(client: async_nats::Client, deliverer: Arc<Notify>) {
    let mut wakeups = match client.subscribe(protocol::OUTBOX_SUBJECT).await {
        Ok(subscriber) => subscriber,
        Err(err) => {
            tracing::warn!(error = %err, "cannot subscribe to outbox wake-ups; the deliverer polls");
            return;
        }
    };
    while wakeups.next().await.is_some() {
        deliverer.notify_one();
    }
}
