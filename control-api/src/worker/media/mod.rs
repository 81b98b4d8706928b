//! The embedded media worker: live conversations for browsers that join over WebRTC. It owns the engine
//! runtime, the WebRTC settings and the table of calls in progress (one participant per conversation).
//! `peer` negotiates a call's peer connection, `call` runs it, `presence` decides when its participant has
//! left, `recorder` writes its recording.

pub mod call;
pub mod face;
pub mod keyframe_requests;
pub mod peer;
pub mod presence;
pub mod recorder;
pub mod recording_slot;

use confab_engine::lock::lock;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use confab_engine::providers::env::ProviderEnv;
use confab_engine::runtime::Runtime;
use tokio::sync::Notify;

use crate::calls::{IceServers, JoinError};
use crate::store::Db;
use crate::store::conversations::{self, STATUS_ENDED};
use crate::worker::session_binding::{self, LiveError};

/// Default for `--max-calls`.
pub const DEFAULT_MAX_CALLS: usize = 8;
/// Default for `--no-media-timeout`: a participant whose audio stops this long has left.
pub const DEFAULT_NO_MEDIA_TIMEOUT: Duration = Duration::from_secs(10);
/// On shutdown, how long calls get to end cleanly (`call_ended` recorded) before the process exits.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct MediaConfig {
    pub models_dir: PathBuf,
    /// Calls held at once.
    pub max_calls: usize,
    /// The address WebRTC binds and advertises (host candidates); a wildcard means every interface.
    pub rtc_ip: IpAddr,
    /// Public addresses advertised instead of the bound one (a host behind 1:1 NAT).
    pub public_ips: Vec<IpAddr>,
    /// UDP ports calls may bind (inclusive); any free port when None.
    pub udp_ports: Option<(u16, u16)>,
    /// STUN/TURN server URLs (`stun:host:port`, `turn:host:port?transport=udp`).
    pub ice_servers: Vec<String>,
    pub ice_username: Option<String>,
    pub ice_credential: Option<String>,
    /// A participant whose audio stops this long (or never starts) has left.
    pub no_media_timeout: Duration,
    /// Where recordings are written (`<conversation id>.webm`).
    pub recordings_dir: PathBuf,
    /// Tools and guardrail callbacks may reach loopback and private addresses (`--allow-private-urls`).
    pub allow_private_urls: bool,
    /// The providers' endpoints and keys (`confab` reads them from its environment at start).
    pub providers: ProviderEnv,
}

impl MediaConfig {
    /// The STUN/TURN servers browsers are given.
    pub fn ice_servers(&self) -> IceServers {
        IceServers {
            urls: self.ice_servers.clone(),
            username: self.ice_username.clone(),
            credential: self.ice_credential.clone(),
        }
    }

    /// Settings on `rtc_ip` with `confab serve`'s defaults: 8 calls, any UDP port, no ICE servers, no
    /// public address, the default no-media timeout.
    pub fn new(rtc_ip: IpAddr, models_dir: PathBuf, recordings_dir: PathBuf) -> MediaConfig {
        MediaConfig {
            models_dir,
            max_calls: DEFAULT_MAX_CALLS,
            rtc_ip,
            public_ips: vec![],
            udp_ports: None,
            ice_servers: vec![],
            ice_username: None,
            ice_credential: None,
            no_media_timeout: DEFAULT_NO_MEDIA_TIMEOUT,
            recordings_dir,
            allow_private_urls: false,
            providers: ProviderEnv::default(),
        }
    }
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
    db: Db,
    runtime: Arc<Mutex<Runtime>>,
    config: MediaConfig,
    public_url: String,
    webhooks: Option<Arc<Notify>>,
    calls: Mutex<HashMap<String, CallEntry>>,
}

impl MediaWorker {
    pub fn new(
        db: Db,
        runtime: Arc<Mutex<Runtime>>,
        config: MediaConfig,
        public_url: String,
        webhooks: Option<Arc<Notify>>,
    ) -> Arc<MediaWorker> {
        Arc::new(MediaWorker { db, runtime, config, public_url, webhooks, calls: Mutex::new(HashMap::new()) })
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
        crate::recordings::recording_path(&self.config.recordings_dir, conversation_id)
    }

    /// Admits the participant of `conversation_id` with their SDP offer; returns the SDP answer. The call
    /// then runs until hang-up, the participant leaving, the maximum duration or shutdown.
    pub async fn join(self: &Arc<Self>, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        let conversation = conversations::get(&self.db, conversation_id)
            .await?
            .ok_or_else(|| JoinError::Live(format!("conversation {conversation_id} not found")))?;
        if conversation.status == STATUS_ENDED {
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
        let admitted = self.admit(conversation_id, offer_sdp).await;
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
        use crate::store::workers::{self, Claim, LOCAL_WORKER};
        match workers::claim(&self.db, conversation_id, LOCAL_WORKER).await? {
            Claim::Claimed => {}
            Claim::Held(_) => return Err(JoinError::Busy),
            Claim::Ended => return Err(JoinError::Ended),
            Claim::Missing => return Err(JoinError::Live(format!("conversation {conversation_id} not found"))),
        }
        let joined = self.join(conversation_id, offer_sdp).await;
        if joined.is_err() {
            workers::release(&self.db, conversation_id, LOCAL_WORKER).await?;
        }
        joined
    }

    async fn admit(
        self: &Arc<Self>,
        conversation_id: &str,
        offer_sdp: String,
    ) -> Result<(String, Arc<Notify>, tokio::task::JoinHandle<()>), JoinError> {
        let asked = std::time::Instant::now();
        let negotiated = peer::negotiate(&self.config, offer_sdp).await?;
        let negotiated_after = asked.elapsed();
        let recording = recording_slot::RecordingSlot::default();
        let hook = recording.call_end_hook(self.recording_url(conversation_id));
        let started = session_binding::start(
            &self.db,
            &self.runtime,
            conversation_id,
            &self.config.models_dir,
            &self.config.providers,
            self.config.allow_private_urls,
            self.webhooks.clone(),
            Some(hook),
        )
        .await;
        let live = match started {
            Ok(live) => live,
            Err(err) => {
                let _ = negotiated.connection.close().await;
                return Err(match err {
                    LiveError::Full => JoinError::Full,
                    LiveError::Store(err) => JoinError::Store(err),
                    other => JoinError::Live(other.to_string()),
                });
            }
        };
        if live.record {
            let face = negotiated.video_payload_type.map(|_| {
                let size = confab_engine::video::vp8::Vp8Config::default();
                (size.width, size.height)
            });
            recording.start(&self.recording_path(conversation_id), face);
        }
        let answer = negotiated.answer_sdp.clone();
        tracing::info!(%conversation_id, negotiate_ms = negotiated_after.as_millis() as u64,
            admit_ms = asked.elapsed().as_millis() as u64, "call admitted");
        let hang_up = Arc::new(Notify::new());
        let done = tokio::spawn(call::run(self.clone(), live, negotiated, recording, hang_up.clone()));
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

    fn runtime(&self) -> std::sync::MutexGuard<'_, Runtime> {
        lock(&self.runtime)
    }

    fn forget(&self, conversation_id: &str) {
        lock(&self.calls).remove(conversation_id);
    }
}
