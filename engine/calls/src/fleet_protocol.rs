//! What fleet replicas and media workers say to each other over NATS: the JetStream work queue of call jobs, the
//! per-worker request-reply subject for signalling, and the outbox wake-up. Only plain JetStream streams
//! and pull consumers are used (no key-value buckets), so NATS Server 2.9 and later work.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use serde::{Deserialize, Serialize};

/// The JetStream stream of call jobs (work-queue retention: a job is removed once a worker acknowledges it).
pub const JOB_STREAM: &str = "CONFAB_CALLS";
/// The subjects of the job stream: one per queue, `confab.calls.jobs.<queue>`.
pub const JOB_SUBJECTS: &str = "confab.calls.jobs.>";
/// The queue replicas and workers use unless told otherwise (`--queue`).
pub const DEFAULT_QUEUE: &str = "default";
/// A job's redelivery delay when a worker took it and died before acknowledging it.
/// (A worker that takes longer to admit is safe: the claim in the database admits a conversation once.)
pub const JOB_ACK_WAIT: Duration = Duration::from_secs(10);
/// Jobs publishing the same `Nats-Msg-Id` within this window are stored once.
pub const JOB_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
/// Jobs are dropped by the server after this long (their callers gave up long before).
pub const JOB_MAX_AGE: Duration = Duration::from_secs(600);
/// Pull requests the job consumer holds at once: one per idle worker (the server's default, 512, would
/// refuse the 513th idle worker's fetch). Past this many workers per queue, shard the queue (docs/scaling.md).
pub const JOB_MAX_WAITING: i64 = 16_384;
/// Workers publish their heartbeats here too (for operators watching the fleet; liveness is read from
/// PostgreSQL).
pub const HEARTBEAT_SUBJECT: &str = "confab.workers.heartbeat";
/// Workers publish here when they stored webhook events; replicas then look at the outbox at once.
pub const OUTBOX_SUBJECT: &str = "confab.outbox.wake";

/// A worker whose last heartbeat is older than this is lost: replicas end its calls, and a worker that
/// could not heartbeat for this long ends them itself (it is fenced off).
pub const WORKER_LOST_AFTER: Duration = Duration::from_secs(10);

/// The subject a queue's jobs are published on.
pub fn job_subject(queue: &str) -> String {
    format!("confab.calls.jobs.{queue}")
}

/// The durable pull consumer a queue's workers share.
pub fn job_consumer_name(queue: &str) -> String {
    format!("confab-workers-{queue}")
}

/// Whether `name` can name a queue or a worker (one NATS subject token): 1–64 letters, digits, `-`, `_`.
pub fn is_token(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The request-reply subject of worker `id`.
pub fn rpc_subject(worker_id: &str) -> String {
    format!("confab.worker.{worker_id}.rpc")
}

/// A request for a call, queued until a worker with a free slot takes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CallJob {
    /// Also the message's `Nats-Msg-Id`: a job published twice is stored once.
    pub job_id: String,
    pub conversation_id: String,
    /// Where the worker that takes the job says so (`Taken`).
    pub reply_to: String,
    /// Unix milliseconds after which nobody waits for the job any more: a worker drops it.
    pub expires_at_ms: i64,
}

/// A worker has claimed the job's conversation and holds a slot for it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Taken {
    pub job_id: String,
    pub worker_id: String,
}

/// A request to a worker on its `rpc_subject`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Rpc {
    /// The participant's SDP offer for the job the worker took.
    Offer { job_id: String, conversation_id: String, sdp: String },
    /// A LiveKit client for the job the worker took: its identity and name (from its access token), and the
    /// relay subjects its signalling frames travel on (`fleet_relay`).
    #[serde(rename = "livekit")]
    LiveKit { job_id: String, conversation_id: String, identity: String, name: String, relay: String },
    /// Hang up the conversation's call.
    HangUp { conversation_id: String },
}

/// A worker's answer to an `Rpc`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum RpcReply {
    Answer {
        sdp: String,
    },
    /// The LiveKit client is admitted: its frames flow on the relay.
    Joined,
    HungUp {
        found: bool,
    },
    Refused {
        reason: Refusal,
        message: String,
    },
}

/// Why a worker did not admit a call; the replica turns each into the HTTP answer `confab serve` alone gives.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    Ended,
    Busy,
    Full,
    InvalidOffer,
    /// The job is unknown or expired (the offer came too late).
    NoJob,
    Internal,
}

/// A worker's heartbeat as published on `HEARTBEAT_SUBJECT`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Heartbeat {
    pub worker_id: String,
    pub max_calls: i64,
    pub active_calls: i64,
    pub draining: bool,
}

/// The job stream, created if missing (replicas and workers both call this; the settings are the same).
pub async fn job_stream(js: &jetstream::Context) -> Result<stream::Stream, async_nats::Error> {
    let config = stream::Config {
        name: JOB_STREAM.into(),
        subjects: vec![JOB_SUBJECTS.into()],
        retention: stream::RetentionPolicy::WorkQueue,
        max_age: JOB_MAX_AGE,
        duplicate_window: JOB_DUPLICATE_WINDOW,
        ..Default::default()
    };
    Ok(js.get_or_create_stream(config).await?)
}

/// The pull consumer `queue`'s workers share (work-queue streams allow one per queue: their filters do
/// not overlap).
pub async fn job_consumer(js: &jetstream::Context, queue: &str) -> Result<consumer::PullConsumer, async_nats::Error> {
    let stream = job_stream(js).await?;
    let name = job_consumer_name(queue);
    let config = consumer::pull::Config {
        durable_name: Some(name.clone()),
        filter_subject: job_subject(queue),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: JOB_ACK_WAIT,
        max_deliver: 5,
        max_waiting: JOB_MAX_WAITING,
        ..Default::default()
    };
    Ok(stream.get_or_create_consumer(&name, config).await?)
}

/// Connects to NATS, naming the connection after its role (seen in the server's monitoring). Losing the
/// connection is told once at WARN, getting it back once at INFO (the client reconnects by itself);
/// `confab_nats_connected` follows.
pub async fn connect(url: &str, name: &str) -> Result<async_nats::Client, async_nats::ConnectError> {
    let client = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .event_callback(|event| async move {
            match event {
                async_nats::Event::Disconnected => {
                    crate::metrics::metrics().nats_connected(false);
                    tracing::warn!("lost the connection to NATS: fleet calls cannot be placed until it is back");
                }
                async_nats::Event::Connected => {
                    crate::metrics::metrics().nats_connected(true);
                    tracing::info!("connected to NATS again");
                }
                other => tracing::debug!(event = %other, "NATS"),
            }
        })
        .connect(url)
        .await?;
    crate::metrics::metrics().nats_connected(true);
    Ok(client)
}

/// Whether `client` is connected now (a join while it is not is refused at once).
pub fn is_connected(client: &async_nats::Client) -> bool {
    client.connection_state() == async_nats::connection::State::Connected
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_a_stable_wire_shape() {
        let offer = Rpc::Offer { job_id: "j".into(), conversation_id: "c".into(), sdp: "v=0".into() };
        assert_eq!(
            serde_json::to_value(&offer).unwrap(),
            serde_json::json!({"op": "offer", "job_id": "j", "conversation_id": "c", "sdp": "v=0"})
        );
        let refused = RpcReply::Refused { reason: Refusal::InvalidOffer, message: "bad".into() };
        assert_eq!(
            serde_json::to_value(&refused).unwrap(),
            serde_json::json!({"result": "refused", "reason": "invalid_offer", "message": "bad"})
        );
        let livekit = Rpc::LiveKit {
            job_id: "j".into(),
            conversation_id: "c".into(),
            identity: "u".into(),
            name: "U".into(),
            relay: "j".into(),
        };
        assert_eq!(
            serde_json::to_value(&livekit).unwrap(),
            serde_json::json!({"op": "livekit", "job_id": "j", "conversation_id": "c", "identity": "u", "name": "U", "relay": "j"})
        );
        assert_eq!(serde_json::to_value(RpcReply::Joined).unwrap(), serde_json::json!({"result": "joined"}));
        assert_eq!(rpc_subject("w1"), "confab.worker.w1.rpc");
        assert_eq!(job_subject(DEFAULT_QUEUE), "confab.calls.jobs.default");
        assert!(is_token("eu-west_1") && !is_token("a.b") && !is_token("") && !is_token("a b"));
    }
}
