//! Runs in a media worker (`confab worker`): takes call jobs from the JetStream work queue only while it
//! holds a free slot (a slot is reserved before the next job is fetched, so capacity is never
//! oversubscribed), claims each job's conversation by compare-and-set in the database, answers the
//! participant's offer that the replica relays on `confab.worker.<id>.rpc`, and acknowledges the job once
//! the call is admitted. It heartbeats its capacity and load, and on SIGTERM drains: no new jobs, calls
//! finish (up to the drain timeout) or are ended cleanly.

use confab_engine::lock::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};

use crate::media_worker::MediaWorker;
use confab_calls::fleet_protocol::{self as protocol, CallJob, Heartbeat, Refusal, Rpc, RpcReply, Taken};
use confab_calls::records::{CallRecords, Claim, RecordsError, WorkerBeat};
use confab_calls::{JoinError, LiveKitJoin, SignalSocket};

/// What holds a worker's calls: the media worker (WebRTC and the engine), or a simulated one in the
/// dispatch benchmark.
#[async_trait::async_trait]
pub trait CallHost: Send + Sync + 'static {
    /// Admits the participant with their SDP offer; the SDP answer.
    async fn join(&self, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError>;
    /// Admits a LiveKit client whose signalling travels on `socket` (a host may take none).
    async fn join_livekit(&self, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        let _ = (join, socket);
        Err(JoinError::Unavailable("this host takes no LiveKit calls".into()))
    }
    /// Resolves when the call is over.
    fn finished(&self, conversation_id: &str) -> futures_util::future::BoxFuture<'static, ()>;
    /// Hangs up the call; false when there is none.
    fn hang_up(&self, conversation_id: &str) -> bool;
    fn active_calls(&self) -> usize;
    fn max_calls(&self) -> usize;
    /// Ends every call cleanly and waits for them (bounded).
    async fn shutdown(&self);
}

#[async_trait::async_trait]
impl CallHost for Arc<MediaWorker> {
    async fn join(&self, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        MediaWorker::join(self, conversation_id, offer_sdp).await
    }
    async fn join_livekit(&self, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        MediaWorker::join_livekit(self, join, socket).await
    }
    fn finished(&self, conversation_id: &str) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(MediaWorker::finished(self, conversation_id))
    }
    fn hang_up(&self, conversation_id: &str) -> bool {
        MediaWorker::hang_up(self, conversation_id)
    }
    fn active_calls(&self) -> usize {
        MediaWorker::active_calls(self)
    }
    fn max_calls(&self) -> usize {
        self.config().max_calls
    }
    async fn shutdown(&self) {
        MediaWorker::shutdown(self).await
    }
}

/// How often a worker heartbeats.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// How long a worker that claimed a job waits for the replica to send the participant's offer.
pub const OFFER_WAIT: Duration = Duration::from_secs(10);
/// How long one fetch of the job queue waits for a job (the loop then fetches again).
/// Longer means fewer pull requests for the server to track and expire (an idle worker sends one per wait).
const FETCH_WAIT: Duration = Duration::from_secs(10);

/// An offer the rpc handler hands to the job that waits for it, with the subject to answer on.
struct Offer {
    participant: Participant,
    reply_to: async_nats::Subject,
}

/// Who the replica relays for a job.
enum Participant {
    /// A WHIP-style participant's SDP offer.
    Sdp(String),
    /// A LiveKit client, and the relay its frames travel on.
    LiveKit { identity: String, name: String, relay: String },
}

pub struct FleetWorker {
    id: String,
    client: async_nats::Client,
    consumer: jetstream::consumer::PullConsumer,
    records: Arc<dyn CallRecords>,
    media: Arc<dyn CallHost>,
    max_calls: usize,
    slots: Arc<Semaphore>,
    /// Jobs claimed and waiting for their offer, by job id.
    awaiting_offer: Mutex<HashMap<String, oneshot::Sender<Offer>>>,
    /// True once the worker drains (SIGTERM).
    draining: tokio::sync::watch::Sender<bool>,
    /// Fault injection for the fleet's tests (`crash_before_job_ack`).
    crash_before_ack: std::sync::atomic::AtomicBool,
}

impl FleetWorker {
    /// Joins the fleet over `client`: finds `queue`'s jobs, registers with a first heartbeat (in `records`,
    /// where it claims its calls too).
    pub async fn join_fleet(
        client: async_nats::Client,
        records: Arc<dyn CallRecords>,
        media: Arc<dyn CallHost>,
        id: String,
        queue: &str,
    ) -> Result<Arc<FleetWorker>, async_nats::Error> {
        let consumer = protocol::job_consumer(&jetstream::new(client.clone()), queue).await?;
        let max_calls = media.max_calls();
        let worker = Arc::new(FleetWorker {
            id,
            client,
            consumer,
            records,
            media,
            max_calls,
            slots: Arc::new(Semaphore::new(max_calls)),
            awaiting_offer: Mutex::new(HashMap::new()),
            draining: tokio::sync::watch::Sender::new(false),
            crash_before_ack: std::sync::atomic::AtomicBool::new(false),
        });
        worker.heartbeat().await?;
        Ok(worker)
    }

    /// Fault injection for the fleet's tests: the worker aborts right after admitting a call, before
    /// acknowledging its job (as a kill -9 at that instant would). `confab worker`'s hidden
    /// `--fault crash-before-job-ack` sets it; nothing else does.
    pub fn crash_before_job_ack(&self) {
        self.crash_before_ack.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Publishes on NATS when webhook events were stored, so replicas deliver them at once.
    pub fn outbox_waker(client: async_nats::Client) -> Arc<Notify> {
        let wake = Arc::new(Notify::new());
        let waiting = wake.clone();
        tokio::spawn(async move {
            loop {
                waiting.notified().await;
                let _ = client.publish(protocol::OUTBOX_SUBJECT, bytes::Bytes::new()).await;
            }
        });
        wake
    }

    /// Serves until `shutdown` resolves, then drains: no new jobs; calls in progress get `drain_timeout`
    /// to finish, then are ended cleanly; the worker then leaves the fleet.
    pub async fn run(
        self: Arc<Self>,
        shutdown: impl std::future::Future<Output = ()>,
        drain_timeout: Duration,
    ) -> anyhow::Result<()> {
        let rpc = self.client.subscribe(protocol::rpc_subject(&self.id)).await?;
        let rpc_task = tokio::spawn(self.clone().serve_rpc(rpc));
        let heartbeat_task = tokio::spawn(self.clone().heartbeats());
        let take_task = tokio::spawn(self.clone().take_jobs());
        tracing::info!(worker = %self.id, max_calls = self.max_calls, "media worker taking calls");
        shutdown.await;
        self.draining.send_replace(true);
        let _ = take_task.await;
        let active = self.media.active_calls();
        tracing::info!(worker = %self.id, active, drain_timeout_s = drain_timeout.as_secs_f64(), "draining");
        let _ = self.heartbeat().await;
        let all_over = async {
            while self.media.active_calls() > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        if tokio::time::timeout(drain_timeout, all_over).await.is_err() {
            tracing::info!(worker = %self.id, calls = self.media.active_calls(), "drain timeout: ending calls");
        }
        self.media.shutdown().await;
        heartbeat_task.abort();
        rpc_task.abort();
        self.records.leave_fleet(&self.id).await?;
        let _ = self.client.flush().await;
        tracing::info!(worker = %self.id, "left the fleet");
        Ok(())
    }

    fn beat(&self) -> WorkerBeat {
        WorkerBeat {
            id: self.id.clone(),
            max_calls: self.max_calls as i64,
            active_calls: self.media.active_calls() as i64,
            draining: self.is_draining(),
        }
    }

    /// Records a heartbeat in the database (what replicas judge liveness by) and publishes it on NATS (for
    /// operators; a failure there is only logged).
    async fn heartbeat(&self) -> Result<(), RecordsError> {
        let beat = self.beat();
        self.records.heartbeat(&beat, protocol::now_ms()).await?;
        let message = Heartbeat {
            worker_id: beat.id,
            max_calls: beat.max_calls,
            active_calls: beat.active_calls,
            draining: beat.draining,
        };
        let payload = serde_json::to_vec(&message).expect("heartbeats serialize");
        if let Err(err) = self.client.publish(protocol::HEARTBEAT_SUBJECT, payload.into()).await {
            tracing::debug!(worker = %self.id, error = %err, "cannot publish a heartbeat on NATS");
        }
        Ok(())
    }

    /// Heartbeats every `HEARTBEAT_INTERVAL`. A worker that cannot record one for `WORKER_LOST_AFTER` is
    /// lost to the fleet (replicas have ended its calls in the records): it fences itself off by hanging up
    /// its calls, so no participant talks to an agent whose events go nowhere.
    async fn heartbeats(self: Arc<Self>) {
        let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
        let mut recorded = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            match tokio::time::timeout(HEARTBEAT_INTERVAL * 2, self.heartbeat()).await {
                Ok(Ok(())) => recorded = tokio::time::Instant::now(),
                Ok(Err(err)) => tracing::warn!(worker = %self.id, error = %err, "heartbeat failed"),
                Err(_) => tracing::warn!(worker = %self.id, "heartbeat timed out"),
            }
            if recorded.elapsed() >= protocol::WORKER_LOST_AFTER && self.media.active_calls() > 0 {
                tracing::error!(worker = %self.id, calls = self.media.active_calls(),
                    "no heartbeat recorded for the fleet's timeout: the fleet counts this worker lost; hanging up its calls");
                self.media.shutdown().await;
            }
        }
    }

    fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    /// Reserve a slot, then take one job; repeat until draining.
    async fn take_jobs(self: Arc<Self>) {
        let mut drain = self.draining.subscribe();
        while !self.is_draining() {
            let permit = tokio::select! {
                permit = self.slots.clone().acquire_owned() => permit.expect("the slots are never closed"),
                _ = drain.wait_for(|draining| *draining) => break,
            };
            // A pull request cut short (or of a worker that died) stays open at the server, which skips it
            // once nobody listens on its inbox (seen with NATS 2.9.10): no job goes to a worker that left.
            let fetched = tokio::select! {
                fetched = self.fetch_one() => fetched,
                _ = drain.wait_for(|draining| *draining) => break,
            };
            let job = match fetched {
                Ok(Some(job)) => job,
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(worker = %self.id, error = %err, "cannot fetch call jobs");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if self.is_draining() {
                // Another worker takes it at once.
                let _ = job.ack_with(AckKind::Nak(None)).await;
                break;
            }
            tokio::spawn(self.clone().run_job(job, permit));
        }
    }

    async fn fetch_one(&self) -> Result<Option<jetstream::Message>, async_nats::Error> {
        let mut batch = self.consumer.fetch().max_messages(1).expires(FETCH_WAIT).messages().await?;
        batch.next().await.transpose()
    }

    async fn run_job(self: Arc<Self>, message: jetstream::Message, permit: OwnedSemaphorePermit) {
        let job: CallJob = match serde_json::from_slice(&message.payload) {
            Ok(job) => job,
            Err(err) => {
                tracing::warn!(worker = %self.id, error = %err, "dropping a malformed call job");
                let _ = message.ack_with(AckKind::Term).await;
                return;
            }
        };
        let conversation_id = job.conversation_id.clone();
        if job.expires_at_ms < protocol::now_ms() {
            tracing::info!(worker = %self.id, %conversation_id, job = %job.job_id, "call job dropped: expired");
            let _ = message.ack().await;
            return;
        }
        match self.records.claim(&conversation_id, &self.id).await {
            Ok(Claim::Claimed) => {}
            Ok(other) => {
                // A job published twice or redelivered: the conversation was admitted (or ended) already.
                tracing::info!(worker = %self.id, %conversation_id, job = %job.job_id, claim = ?other,
                    "call job dropped: already admitted elsewhere (or ended)");
                let _ = message.ack().await;
                return;
            }
            Err(err) => {
                tracing::warn!(worker = %self.id, %conversation_id, error = %err, "cannot claim; job returned");
                let _ = message.ack_with(AckKind::Nak(Some(Duration::from_secs(1)))).await;
                return;
            }
        }
        let admitted = self.admit(&job).await;
        if admitted && self.crash_before_ack.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::error!(worker = %self.id, %conversation_id, "fault injection: aborting before the job's ack");
            let _ = self.client.flush().await;
            std::process::abort();
        }
        let _ = message.ack().await;
        if admitted {
            self.media.finished(&conversation_id).await;
        } else if let Err(err) = self.records.release(&conversation_id, &self.id).await {
            tracing::warn!(worker = %self.id, %conversation_id, error = %err, "cannot release an unused claim");
        }
        drop(permit);
    }

    /// Tells the job's replica this worker holds it, waits for the offer, admits the call and answers.
    async fn admit(&self, job: &CallJob) -> bool {
        let (sender, offer) = oneshot::channel();
        lock(&self.awaiting_offer).insert(job.job_id.clone(), sender);
        let taken = Taken { job_id: job.job_id.clone(), worker_id: self.id.clone() };
        let payload = serde_json::to_vec(&taken).expect("replies serialize");
        let offer = match self.client.publish(job.reply_to.clone(), payload.into()).await {
            Ok(()) => tokio::time::timeout(OFFER_WAIT, offer).await.ok().and_then(Result::ok),
            Err(_) => None,
        };
        lock(&self.awaiting_offer).remove(&job.job_id);
        let Some(offer) = offer else {
            tracing::info!(worker = %self.id, conversation_id = %job.conversation_id, "the offer never came");
            return false;
        };
        let joined = match offer.participant {
            Participant::Sdp(sdp) => {
                self.media.join(&job.conversation_id, sdp).await.map(|sdp| RpcReply::Answer { sdp })
            }
            Participant::LiveKit { identity, name, relay } => {
                let join = LiveKitJoin { conversation_id: job.conversation_id.clone(), identity, name };
                match confab_calls::fleet_relay::worker_socket(&self.client, &relay).await {
                    Ok(socket) => self.media.join_livekit(join, socket).await.map(|()| RpcReply::Joined),
                    Err(err) => Err(JoinError::Unavailable(format!("the relay: {err}"))),
                }
            }
        };
        let admitted = joined.is_ok();
        let reply = joined.unwrap_or_else(refusal);
        self.reply(offer.reply_to, &reply).await;
        admitted
    }

    async fn reply(&self, to: async_nats::Subject, reply: &RpcReply) {
        let payload = serde_json::to_vec(reply).expect("replies serialize");
        if let Err(err) = self.client.publish(to, payload.into()).await {
            tracing::warn!(worker = %self.id, error = %err, "cannot answer a replica");
        }
    }

    async fn serve_rpc(self: Arc<Self>, mut requests: async_nats::Subscriber) {
        while let Some(message) = requests.next().await {
            let Some(reply_to) = message.reply.clone() else { continue };
            let reply = match serde_json::from_slice::<Rpc>(&message.payload) {
                Ok(Rpc::Offer { job_id, sdp, .. }) => self.hand_over(job_id, Participant::Sdp(sdp), reply_to),
                Ok(Rpc::LiveKit { job_id, identity, name, relay, .. }) => {
                    self.hand_over(job_id, Participant::LiveKit { identity, name, relay }, reply_to)
                }
                Ok(Rpc::HangUp { conversation_id }) => {
                    Some((reply_to, RpcReply::HungUp { found: self.media.hang_up(&conversation_id) }))
                }
                Err(err) => Some(refused(Refusal::Internal, &format!("malformed request: {err}"), reply_to)),
            };
            if let Some((to, reply)) = reply {
                self.reply(to, &reply).await;
            }
        }
    }

    /// Gives the participant to the task of job `job_id`, which answers once the call is admitted; the
    /// refusal to send when there is no such job.
    fn hand_over(
        &self,
        job_id: String,
        participant: Participant,
        reply_to: async_nats::Subject,
    ) -> Option<(async_nats::Subject, RpcReply)> {
        let waiting = lock(&self.awaiting_offer).remove(&job_id);
        match waiting {
            Some(job) => match job.send(Offer { participant, reply_to }) {
                Ok(()) => None,
                Err(offer) => Some(refused(Refusal::NoJob, "the job expired", offer.reply_to)),
            },
            None => Some(refused(Refusal::NoJob, "no such job on this worker", reply_to)),
        }
    }
}

fn refused(reason: Refusal, message: &str, to: async_nats::Subject) -> (async_nats::Subject, RpcReply) {
    (to, RpcReply::Refused { reason, message: message.to_string() })
}

/// The refusal a replica turns back into the HTTP answer of `confab serve` alone.
fn refusal(err: JoinError) -> RpcReply {
    let reason = match &err {
        JoinError::Ended => Refusal::Ended,
        JoinError::Busy => Refusal::Busy,
        JoinError::Full => Refusal::Full,
        JoinError::InvalidOffer(message) => {
            return RpcReply::Refused { reason: Refusal::InvalidOffer, message: message.clone() };
        }
        _ => Refusal::Internal,
    };
    RpcReply::Refused { reason, message: err.to_string() }
}
