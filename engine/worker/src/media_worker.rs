//! The media worker: the engine's runtime and the table of calls in progress (one participant per
//! conversation), above both transports. A join negotiates the participant's WebRTC peer connection
//! (`media::peer`) or admits a LiveKit client (`livekit`), binds the conversation to an engine session
//! (`session_binding`), starts the recording and runs the call (`media::call` or `livekit::call`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use confab_engine::lock::lock;
use confab_engine::runtime::Runtime;
use tokio::sync::Notify;

use crate::call_session::CallSession;
use crate::livekit::{self, LiveKitCall};
use crate::media::config::MediaConfig;
use crate::media::{call, peer, recording_slot};
use crate::session_binding::{self, LiveError};
use confab_calls::records::{CallRecords, Claim, LOCAL_WORKER};
use confab_calls::{JoinError, LiveKitJoin, SignalSocket};

/// On shutdown, how long calls get to end cleanly (`call_ended` recorded) before the process exits.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How a participant's media reaches the call.
enum Transport {
    /// WHIP-style: their SDP offer; the call's answer is returned.
    Whip(String),
    /// LiveKit's signalling on a WebSocket the HTTP side relays; the client has its JoinResponse.
    LiveKit(livekit::Room, SignalSocket),
}

/// A participant whose transport is ready for the engine: a negotiated peer connection, or a LiveKit
/// client waiting for its JoinResponse.
enum Ready {
    Whip(peer::Negotiated),
    LiveKit(livekit::Room, SignalSocket),
}

/// What the worker keeps of a call in progress.
struct CallEntry {
    /// Asks the call to hang up (set once the call runs).
    hang_up: Option<Arc<Notify>>,
    done: Option<tokio::task::JoinHandle<()>>,
    /// Dropped when the call is forgotten: `finished` waiters then return.
    over: tokio::sync::watch::Sender<()>,
}

pub struct MediaWorker {
    records: Arc<dyn CallRecords>,
    runtime: Arc<Mutex<Runtime>>,
    config: MediaConfig,
    public_url: String,
    calls: Mutex<HashMap<String, CallEntry>>,
}

impl MediaWorker {
    /// A worker whose calls read and write their records through `records`.
    pub fn new(
        records: Arc<dyn CallRecords>,
        runtime: Arc<Mutex<Runtime>>,
        config: MediaConfig,
        public_url: String,
    ) -> Arc<MediaWorker> {
        Arc::new(MediaWorker { records, runtime, config, public_url, calls: Mutex::new(HashMap::new()) })
    }

    pub fn config(&self) -> &MediaConfig {
        &self.config
    }

    /// The engine's counters (media ticks, overruns, queues refused), for `/metrics`.
    pub fn engine_counters(&self) -> Arc<confab_engine::runtime::RuntimeCounters> {
        lock(&self.runtime).counters.clone()
    }

    /// Calls in progress.
    pub fn active_calls(&self) -> usize {
        lock(&self.calls).len()
    }

    /// The URL a conversation's recording is served at.
    pub fn recording_url(&self, conversation_id: &str) -> String {
        format!("{}/v1/ext/conversation/{conversation_id}/recording", self.public_url.trim_end_matches('/'))
    }

    pub fn recording_path(&self, conversation_id: &str) -> PathBuf {
        confab_calls::recordings::recording_path(&self.config.recordings_dir, conversation_id)
    }

    /// Admits the participant of `conversation_id` with their SDP offer; returns the SDP answer. The call
    /// then runs until hang-up, the participant leaving, the maximum duration or shutdown.
    pub async fn join(self: &Arc<Self>, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        Ok(self.join_with(conversation_id, Transport::Whip(offer_sdp)).await?.unwrap_or_default())
    }

    /// Admits a LiveKit client to the room of `join.conversation_id`; the call then speaks LiveKit's
    /// signalling on `socket` (`crate::livekit`) until it ends. The client gets its JoinResponse at once,
    /// before the engine session starts (which may wait for the models): LiveKit's clients give up on a
    /// JoinResponse after 5 s, on the connection after 15 more.
    pub async fn join_livekit(self: &Arc<Self>, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        let conversation_id = join.conversation_id.clone();
        let conversation = self
            .records
            .summary(&conversation_id)
            .await?
            .ok_or_else(|| JoinError::Live(format!("conversation {conversation_id} not found")))?;
        let agent_name = conversation
            .agent_name
            .ok_or_else(|| JoinError::Live(format!("agent {} not found", conversation.agent_id)))?;
        let room =
            livekit::Room::new(&conversation_id, &join.identity, &join.name, &conversation.agent_id, &agent_name);
        let joined = livekit_protocol::signal_response::Message::Join(
            room.join_response(livekit::call::ice_servers(&self.config)),
        );
        if !livekit::signal::Signal::new(socket.to_client.clone()).send(joined).await {
            return Err(JoinError::Transport("the client's socket closed".into()));
        }
        self.join_with(&conversation_id, Transport::LiveKit(room, socket)).await.map(|_| ())
    }

    /// Admits the participant of `conversation_id`; the SDP answer for a WHIP-style join.
    async fn join_with(
        self: &Arc<Self>,
        conversation_id: &str,
        transport: Transport,
    ) -> Result<Option<String>, JoinError> {
        let conversation = self
            .records
            .summary(conversation_id)
            .await?
            .ok_or_else(|| JoinError::Live(format!("conversation {conversation_id} not found")))?;
        if conversation.ended {
            return Err(JoinError::Ended);
        }
        {
            let mut calls = lock(&self.calls);
            if calls.contains_key(conversation_id) {
                return Err(JoinError::Busy);
            }
            let over = tokio::sync::watch::Sender::new(());
            calls.insert(conversation_id.to_string(), CallEntry { hang_up: None, done: None, over });
        }
        let admitted = self.admit(conversation_id, transport).await;
        match admitted {
            Ok((answer, hang_up, done)) => {
                if let Some(entry) = lock(&self.calls).get_mut(conversation_id) {
                    entry.hang_up = Some(hang_up);
                    entry.done = Some(done);
                }
                Ok(answer)
            }
            Err(err) => {
                lock(&self.calls).remove(conversation_id);
                Err(err)
            }
        }
    }

    /// `join` for `confab serve` alone: the conversation is first claimed as `LOCAL_WORKER` (so a restart
    /// after a crash knows which calls it held), and released when the call cannot be admitted.
    pub async fn join_alone(self: &Arc<Self>, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        self.claimed(conversation_id, self.join(conversation_id, offer_sdp)).await
    }

    /// `join_livekit` for `confab serve` alone, claimed as `join_alone` claims.
    pub async fn join_livekit_alone(
        self: &Arc<Self>,
        join: LiveKitJoin,
        socket: SignalSocket,
    ) -> Result<(), JoinError> {
        let conversation_id = join.conversation_id.clone();
        self.claimed(&conversation_id, self.join_livekit(join, socket)).await
    }

    /// Claims `conversation_id` as `LOCAL_WORKER`, runs `join`, and releases the claim when it fails.
    async fn claimed<T>(
        &self,
        conversation_id: &str,
        join: impl std::future::Future<Output = Result<T, JoinError>>,
    ) -> Result<T, JoinError> {
        match self.records.claim(conversation_id, LOCAL_WORKER).await? {
            Claim::Claimed => {}
            Claim::Held(_) => return Err(JoinError::Busy),
            Claim::Ended => return Err(JoinError::Ended),
            Claim::Missing => return Err(JoinError::Live(format!("conversation {conversation_id} not found"))),
        }
        let joined = join.await;
        if joined.is_err() {
            self.records.release(conversation_id, LOCAL_WORKER).await?;
        }
        joined
    }

    async fn admit(
        self: &Arc<Self>,
        conversation_id: &str,
        transport: Transport,
    ) -> Result<(Option<String>, Arc<Notify>, tokio::task::JoinHandle<()>), JoinError> {
        let asked = std::time::Instant::now();
        let mut offered = Vec::new();
        let ready = match transport {
            Transport::Whip(offer_sdp) => {
                offered = crate::media::connection_watch::offered_candidates(&offer_sdp);
                Ready::Whip(peer::negotiate(&self.config, offer_sdp).await?)
            }
            Transport::LiveKit(room, socket) => Ready::LiveKit(room, socket),
        };
        let negotiated_after = asked.elapsed();
        let recording = recording_slot::RecordingSlot::default();
        let hook = recording.call_end_hook(self.recording_url(conversation_id));
        let started = session_binding::start(
            &self.records,
            &self.runtime,
            conversation_id,
            &self.config.models_dir,
            &self.config.providers,
            self.config.allow_private_urls,
            Some(hook),
        )
        .await;
        let live = match started {
            Ok(live) => live,
            Err(err) => {
                if let Ready::Whip(negotiated) = &ready {
                    let _ = negotiated.connection.close().await;
                }
                return Err(match err {
                    LiveError::Full => JoinError::Full,
                    LiveError::Records(err) => JoinError::Records(err),
                    other => JoinError::Live(other.to_string()),
                });
            }
        };
        if let Ready::Whip(negotiated) = &ready {
            let watched =
                crate::media::connection_watch::watch(conversation_id.into(), negotiated.state.clone(), offered);
            tokio::spawn(watched);
        }
        if live.record {
            // A LiveKit client always receives the face; a WHIP offer may take no video.
            let has_face = match &ready {
                Ready::Whip(negotiated) => negotiated.video_payload_type.is_some(),
                Ready::LiveKit(..) => true,
            };
            let face = has_face.then(|| {
                let size = confab_engine::video::vp8::Vp8Config::default();
                (size.width, size.height)
            });
            recording.start(&self.recording_path(conversation_id), face);
        }
        let answer = match &ready {
            Ready::Whip(negotiated) => Some(negotiated.answer_sdp.clone()),
            Ready::LiveKit(..) => None,
        };
        tracing::info!(%conversation_id, negotiate_ms = negotiated_after.as_millis() as u64,
            admit_ms = asked.elapsed().as_millis() as u64, "call admitted");
        let hang_up = Arc::new(Notify::new());
        let worker = self.clone();
        let id = conversation_id.to_string();
        let session = CallSession {
            records: self.records.clone(),
            runtime: self.runtime.clone(),
            no_media_timeout: self.config.no_media_timeout,
            over: Box::new(move || worker.forget(&id)),
        };
        let done = match ready {
            Ready::Whip(negotiated) => tokio::spawn(call::run(session, live, negotiated, recording, hang_up.clone())),
            Ready::LiveKit(room, socket) => {
                let call = LiveKitCall {
                    room,
                    signal: livekit::signal::Signal::new(socket.to_client),
                    from_client: socket.from_client,
                };
                let config = self.config.clone();
                tokio::spawn(livekit::call::run(session, live, call, config, recording, hang_up.clone()))
            }
        };
        Ok((answer, hang_up, done))
    }

    /// Resolves when the call of `conversation_id` is over and forgotten (at once when there is none).
    pub fn finished(&self, conversation_id: &str) -> impl std::future::Future<Output = ()> + Send + 'static {
        let over = lock(&self.calls).get(conversation_id).map(|entry| entry.over.subscribe());
        async move {
            if let Some(mut over) = over {
                while over.changed().await.is_ok() {}
            }
        }
    }

    /// Hangs up the call of `conversation_id`; false when it has none.
    pub fn hang_up(&self, conversation_id: &str) -> bool {
        let calls = lock(&self.calls);
        match calls.get(conversation_id).and_then(|entry| entry.hang_up.clone()) {
            Some(hang_up) => {
                hang_up.notify_one();
                true
            }
            None => false,
        }
    }

    /// Ends every call (`call_ended`, records ENDED) and waits for them, at most `SHUTDOWN_GRACE`.
    pub async fn shutdown(&self) {
        let done: Vec<_> = {
            let mut calls = lock(&self.calls);
            calls
                .values_mut()
                .filter_map(|entry| {
                    if let Some(hang_up) = &entry.hang_up {
                        hang_up.notify_one();
                    }
                    entry.done.take()
                })
                .collect()
        };
        if done.is_empty() {
            return;
        }
        tracing::info!(calls = done.len(), "ending calls in progress");
        let all = futures_util::future::join_all(done);
        if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
            tracing::warn!("calls did not end within the shutdown grace period");
        }
    }

    fn forget(&self, conversation_id: &str) {
        lock(&self.calls).remove(conversation_id);
    }
}
