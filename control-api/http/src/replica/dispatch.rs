//! Runs in a replica: turns a participant's SDP offer into a call on some media worker. The offer becomes
//! a job on the JetStream work queue (`Nats-Msg-Id` = job id); a worker with a free slot takes it, claims
//! the conversation in the database and says so on the job's reply inbox; the offer then goes to that
//! worker by request-reply on `confab.worker.<id>.rpc` and its answer comes back. No worker within
//! `take_timeout`: 503, as `confab serve` alone answers when its slots are full; and when the database
//! already shows every live worker's slots taken, that 503 comes at once, without queueing the job.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use futures_util::StreamExt;

use confab_calls::fleet_protocol::{self as protocol, CallJob, Refusal, Rpc, RpcReply, Taken};
use confab_calls::fleet_relay;
use confab_calls::{IceServers, JoinError, LiveKitJoin, RecordsError, SignalSocket};
use confab_store::Db;
use confab_store::conversations::STATUS_ENDED;
use confab_store::workers;

/// Default for `--dispatch-timeout`: how long a call waits for a worker with a free slot.
pub const DEFAULT_TAKE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a worker may take to admit a call once it has the offer (agent, MCP servers, peer).
pub const ADMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Why a join is refused while this replica has no NATS connection.
pub const NATS_DOWN: &str = "the fleet's message bus (NATS) is not connected; retry shortly";
/// How long a hang-up waits for the worker.
pub const HANG_UP_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Dispatcher {
    client: async_nats::Client,
    js: jetstream::Context,
    db: Db,
    take_timeout: Duration,
    ice: IceServers,
    /// The subject of the queue this replica's calls go to.
    job_subject: String,
}

impl Dispatcher {
    /// Connected to NATS with the job stream in place; calls go to `queue`'s workers.
    pub async fn connect(
        url: &str,
        db: Db,
        take_timeout: Duration,
        ice: IceServers,
        queue: &str,
    ) -> Result<Arc<Dispatcher>, async_nats::Error> {
        let client = protocol::connect(url, "confab-replica").await?;
        let js = jetstream::new(client.clone());
        protocol::job_stream(&js).await?;
        let job_subject = protocol::job_subject(queue);
        Ok(Arc::new(Dispatcher { client, js, db, take_timeout, ice, job_subject }))
    }

    pub fn ice_servers(&self) -> &IceServers {
        &self.ice
    }

    /// The NATS connection (the outbox wake-up subscribes on it).
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Admits the participant of `conversation_id` on some worker; returns the SDP answer.
    pub async fn join(&self, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        self.joinable(conversation_id).await?;
        let taken = self.queue_job(conversation_id).await?;
        let request = Rpc::Offer { job_id: taken.job_id, conversation_id: conversation_id.to_string(), sdp: offer_sdp };
        match self.rpc(&taken.worker_id, &request, ADMIT_TIMEOUT).await? {
            RpcReply::Answer { sdp } => Ok(sdp),
            other => Err(refused(other)),
        }
    }

    /// Admits a LiveKit client on some worker; its frames travel between `socket` and the worker on a relay
    /// of the job's own (`fleet_relay`), from the worker's taking the job until either side closes.
    pub async fn join_livekit(&self, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        let conversation_id = join.conversation_id.clone();
        self.joinable(&conversation_id).await?;
        let taken = self.queue_job(&conversation_id).await?;
        let relay = taken.job_id.clone();
        let (up, down) = fleet_relay::subjects(&relay);
        let from_worker = self.client.subscribe(down).await.map_err(|e| JoinError::Unavailable(e.to_string()))?;
        // Frames flow from now on: the worker sends the JoinResponse before the engine session starts.
        tokio::spawn(fleet_relay::deliver_frames(from_worker, socket.to_client));
        tokio::spawn(fleet_relay::publish_frames(self.client.clone(), up, socket.from_client));
        let request =
            Rpc::LiveKit { job_id: taken.job_id, conversation_id, identity: join.identity, name: join.name, relay };
        match self.rpc(&taken.worker_id, &request, ADMIT_TIMEOUT).await? {
            RpcReply::Joined => Ok(()),
            other => Err(refused(other)),
        }
    }

    /// Whether `conversation_id` can be joined: it exists, has not ended and no worker holds it.
    async fn joinable(&self, conversation_id: &str) -> Result<(), JoinError> {
        match workers::holder(&self.db, conversation_id).await.map_err(RecordsError::new)? {
            None => Err(JoinError::Live(format!("conversation {conversation_id} not found"))),
            Some((_, status)) if status == STATUS_ENDED => Err(JoinError::Ended),
            Some((worker, _)) if !worker.is_empty() => Err(JoinError::Busy),
            Some(_) => Ok(()),
        }
    }

    /// Publishes the call's job and waits for a worker to take it.
    async fn queue_job(&self, conversation_id: &str) -> Result<Taken, JoinError> {
        let unavailable = |err: &dyn std::fmt::Display| JoinError::Unavailable(err.to_string());
        if !protocol::is_connected(&self.client) {
            // Known to be down: say so now rather than after the publish times out.
            return Err(JoinError::Unavailable(NATS_DOWN.into()));
        }
        let alive_since = protocol::now_ms() - protocol::WORKER_LOST_AFTER.as_millis() as i64;
        let (held, capacity) = workers::fleet_load(&self.db, alive_since).await.map_err(RecordsError::new)?;
        if capacity > 0 && held >= capacity {
            tracing::info!(%conversation_id, held, capacity, "every worker of the fleet is full: the call is refused at once");
            return Err(JoinError::Full);
        }
        let job = CallJob {
            job_id: uuid::Uuid::new_v4().to_string(),
            conversation_id: conversation_id.to_string(),
            reply_to: self.client.new_inbox(),
            expires_at_ms: protocol::now_ms() + self.take_timeout.as_millis() as i64,
        };
        let mut replies = self.client.subscribe(job.reply_to.clone()).await.map_err(|e| unavailable(&e))?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", job.job_id.as_str());
        let payload = serde_json::to_vec(&job).expect("jobs serialize");
        let ack = self
            .js
            .publish_with_headers(self.job_subject.clone(), headers, payload.into())
            .await
            .map_err(|e| unavailable(&e))?;
        ack.await.map_err(|e| unavailable(&e))?;
        let deadline = tokio::time::Instant::now() + self.take_timeout;
        loop {
            let message = match tokio::time::timeout_at(deadline, replies.next()).await {
                Ok(Some(message)) => message,
                Ok(None) => return Err(JoinError::Unavailable("the NATS connection closed".into())),
                Err(_) => {
                    tracing::warn!(%conversation_id, job = %job.job_id, "no media worker took the call in time");
                    return Err(JoinError::Full);
                }
            };
            match serde_json::from_slice::<Taken>(&message.payload) {
                Ok(taken) if taken.job_id == job.job_id => return Ok(taken),
                _ => tracing::warn!(%conversation_id, "ignoring a malformed reply to a call job"),
            }
        }
    }

    async fn rpc(&self, worker_id: &str, request: &Rpc, timeout: Duration) -> Result<RpcReply, JoinError> {
        let payload = serde_json::to_vec(request).expect("requests serialize");
        let request = async_nats::Request::new().payload(payload.into()).timeout(Some(timeout));
        let reply = self
            .client
            .send_request(protocol::rpc_subject(worker_id), request)
            .await
            .map_err(|err| JoinError::Unavailable(format!("worker {worker_id}: {err}")))?;
        serde_json::from_slice(&reply.payload)
            .map_err(|err| JoinError::Unavailable(format!("worker {worker_id} answered garbage: {err}")))
    }

    /// Hangs up the call of `conversation_id` on the worker holding it; false when none does.
    pub async fn hang_up(&self, conversation_id: &str) -> Result<bool, JoinError> {
        let worker = match workers::holder(&self.db, conversation_id).await.map_err(RecordsError::new)? {
            Some((worker, status)) if !worker.is_empty() && status != STATUS_ENDED => worker,
            _ => return Ok(false),
        };
        let request = Rpc::HangUp { conversation_id: conversation_id.to_string() };
        match self.rpc(&worker, &request, HANG_UP_TIMEOUT).await? {
            RpcReply::HungUp { found } => Ok(found),
            _ => Ok(false),
        }
    }
}

/// The `JoinError` of a worker's reply that admitted nothing.
fn refused(reply: RpcReply) -> JoinError {
    match reply {
        RpcReply::Refused { reason, message } => match reason {
            Refusal::Ended => JoinError::Ended,
            Refusal::Busy => JoinError::Busy,
            Refusal::Full | Refusal::NoJob => JoinError::Full,
            Refusal::InvalidOffer => JoinError::InvalidOffer(message),
            Refusal::Internal => JoinError::Live(message),
        },
        other => JoinError::Unavailable(format!("unexpected reply {other:?}")),
    }
}
