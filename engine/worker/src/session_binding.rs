//! Live conversations: binds a conversation, opened through the `CallRecords` port as a typed
//! `SessionSpec`, to a session of the engine's runtime. The session's events (a crossbeam channel on the
//! media side) are bridged to `CallRecords::record_events`, which records status and transcript and queues
//! the webhooks; when the engine ends the session (hang-up, max
//! duration) the record reads ENDED. A transport (`super::media`) feeds `input`, plays `output`, and
//! marks the record IN_PROGRESS when the participant's media flows.

use std::path::Path;
use std::sync::{Arc, Mutex};

use confab_calls::metrics::Providers;
use confab_calls::records::{CallEndHook, CallRecords, RecordsError};
use confab_engine::actions::{ActionSettings, Actions};
use confab_engine::agent_spec::PipelineConfig;
use confab_engine::events::ConversationEvent;
use confab_engine::providers::env::ProviderEnv;
use confab_engine::responder::Responder;
use confab_engine::runtime::{CallRuntime, Runtime};
use confab_engine::turn_metrics::TurnMetrics;
use tokio::sync::{broadcast, mpsc};

/// Events waiting between the bridge thread and the recorder. Full: the bridge thread waits.
pub const BRIDGE_QUEUE: usize = 256;
/// Events kept for a transport that shows them (LiveKit's room); one that falls further behind skips them.
pub const SHOWN_EVENTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("conversation {0} (or its agent) not found")]
    NoConversation(String),
    #[error("the agent cannot be run: {0}")]
    Agent(String),
    #[error("no free session slot")]
    Full,
    #[error(transparent)]
    Records(#[from] RecordsError),
}

/// The transport's side of a live conversation.
pub struct LiveConversation {
    pub conversation_id: String,
    pub session_id: confab_engine::runtime::SessionId,
    /// The conversation's `user_id` (the participant named by `participant_left`).
    pub user_id: String,
    /// The session's events as the engine emits them, from the first, for a transport that shows them to
    /// the participant (one that does not drops this).
    pub events: broadcast::Receiver<ConversationEvent>,
    /// The agent's `record` flag: the transport records the call.
    pub record: bool,
    /// The face the agent speaks with (the conversation's avatar: `avatar_id`, the agent's first by default).
    pub face: String,
    /// Its rigged portrait when `face` is a completed custom avatar.
    pub custom_face: Option<(confab_engine::avatar::RgbImage, confab_engine::avatar::FaceRig)>,
    /// The user's audio, 16 kHz mono.
    pub input: rtrb::Producer<f32>,
    /// The agent's audio, 16 kHz mono.
    pub output: rtrb::Consumer<f32>,
    /// What the transport counts of the call's load: the user's audio `input` had no room for, the
    /// face's frames held still.
    pub load: LoadCounters,
    /// Resolves when the engine has ended the session and everything is recorded.
    pub finished: tokio::task::JoinHandle<()>,
}

/// Counts, in the engine's `/metrics` counters, what a call's transport does when the host runs short: the
/// user's audio dropped because the engine's input ring was full (its media thread fell a second behind),
/// and the face's frames held still because its thread was behind.
/// `LoadCounters::default()` counts into counters of its own (a transport run without a runtime).
#[derive(Clone, Default)]
pub struct LoadCounters(Arc<confab_engine::runtime::RuntimeCounters>);

impl LoadCounters {
    /// A packet of the user's audio, in whole or part, had no room in the input ring.
    pub fn input_overflow(&self) {
        self.0.input_overflows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A frame of the face was held still instead of drawn.
    pub fn face_frame_held(&self) {
        self.0.face_frames_held.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Starts the engine for `conversation_id` with its agent's configuration and providers, read through
/// `records`, which also records what the session does.
pub async fn start(
    records: &Arc<dyn CallRecords>,
    runtime: &Arc<Mutex<Runtime>>,
    conversation_id: &str,
    models_dir: &Path,
    providers: &ProviderEnv,
    allow_private_urls: bool,
    on_call_end: Option<CallEndHook>,
) -> Result<LiveConversation, LiveError> {
    let call = records.open(conversation_id).await?.ok_or_else(|| LiveError::NoConversation(conversation_id.into()))?;
    let config = call.conversation_config().map_err(|e| LiveError::Agent(e.to_string()))?;
    let spec = call.agent;
    let face = spec.avatars.first().map(|avatar| avatar.avatar_key_id.clone()).unwrap_or_default();
    let prompt = spec.system_prompt(&call.context);
    let settings = ActionSettings::for_conversation(&spec.actions, conversation_id, allow_private_urls);
    let actions = Actions::connected(&spec.actions, settings).await.map_err(|e| LiveError::Agent(e.to_string()))?;
    // Loading the models takes seconds (longer while the startup preload holds them): not on an I/O thread.
    let pipeline = PipelineConfig::of_agent(&spec);
    let (dir, env) = (models_dir.to_path_buf(), providers.clone());
    let stage_providers = Providers::of_pipeline(&pipeline);
    let mut responder = tokio::task::spawn_blocking(move || Responder::from_config(&pipeline, prompt, &dir, &env))
        .await
        .map_err(|e| LiveError::Agent(format!("loading the agent's models failed: {e}")))?
        .map_err(|e| LiveError::Agent(e.to_string()))?
        .with_actions(actions)
        .with_reply_rule(call.reply_rule);
    if let Some(retrieval) = records.retrieval(models_dir, &call.knowledge_base_ids, conversation_id).await {
        responder = responder.with_retrieval(retrieval);
    }
    let (session, counters) = {
        let mut runtime = confab_engine::lock::lock(runtime);
        (runtime.open_session(config, Some(responder)).ok_or(LiveError::Full)?, runtime.counters.clone())
    };

    let (tx, rx) = mpsc::channel(BRIDGE_QUEUE);
    let (metrics_tx, metrics_rx) = mpsc::channel(BRIDGE_QUEUE);
    let (shown, shown_events) = broadcast::channel(SHOWN_EVENTS);
    let (events, turn_metrics) = (session.events, session.turn_metrics);
    let outputs = BridgeOutputs { events: tx, shown, metrics: metrics_tx };
    std::thread::Builder::new()
        .name(format!("confab-bridge-{}", session.id))
        .spawn(move || bridge(events, turn_metrics, outputs))
        .expect("spawning a bridge thread");
    let storing_metrics =
        tokio::spawn(store_turn_metrics(records.clone(), conversation_id.to_string(), stage_providers, metrics_rx));
    let (recorder, id) = (records.clone(), conversation_id.to_string());
    let finished = tokio::spawn(async move {
        recorder.record_events(&id, rx, on_call_end).await;
        // Finished means everything is recorded: the events, then every turn's metrics.
        let _ = storing_metrics.await;
    });
    Ok(LiveConversation {
        conversation_id: conversation_id.to_string(),
        session_id: session.id,
        user_id: call.user_id,
        events: shown_events,
        record: call.record,
        face,
        custom_face: call.custom_face,
        input: session.input,
        output: session.output,
        load: LoadCounters(counters),
        finished,
    })
}

/// Where the bridge puts what it moves: events to the recorder (waits when full) and to whoever shows
/// them (never waits), turn metrics to their store.
struct BridgeOutputs {
    events: mpsc::Sender<ConversationEvent>,
    shown: broadcast::Sender<ConversationEvent>,
    metrics: mpsc::Sender<TurnMetrics>,
}

/// Moves a session's events and turn metrics from the engine's channels to the async side, until the
/// engine closes both.
fn bridge(
    events: crossbeam_channel::Receiver<ConversationEvent>,
    turn_metrics: crossbeam_channel::Receiver<TurnMetrics>,
    outputs: BridgeOutputs,
) {
    let (mut events, mut turn_metrics) = (Some(events), Some(turn_metrics));
    let (no_events, no_metrics) = (crossbeam_channel::never(), crossbeam_channel::never());
    while events.is_some() || turn_metrics.is_some() {
        crossbeam_channel::select! {
            recv(events.as_ref().unwrap_or(&no_events)) -> event => match event {
                Ok(event) => {
                    let _ = outputs.shown.send(event.clone());
                    if outputs.events.blocking_send(event).is_err() {
                        return;
                    }
                }
                Err(_) => events = None,
            },
            recv(turn_metrics.as_ref().unwrap_or(&no_metrics)) -> metrics => match metrics {
                Ok(metrics) => {
                    let _ = outputs.metrics.blocking_send(metrics);
                }
                Err(_) => turn_metrics = None,
            },
        }
    }
}

/// Stores each turn's metrics as the engine reports the turn over (diagnostics: a failed write is logged)
/// and counts its stages in `/metrics`.
pub async fn store_turn_metrics(
    records: Arc<dyn CallRecords>,
    conversation_id: String,
    providers: Providers,
    mut turns: mpsc::Receiver<TurnMetrics>,
) {
    while let Some(metrics) = turns.recv().await {
        confab_calls::metrics::metrics().turn(&metrics, &providers);
        if let Err(err) = records.turn_metrics(&conversation_id, &metrics).await {
            tracing::warn!(%conversation_id, error = %err, "could not store a turn's metrics");
        }
    }
}
