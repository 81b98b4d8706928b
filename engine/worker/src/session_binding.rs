//! Live conversations: binds a conversation record to a session of the engine's runtime. The session's
//! events (a crossbeam channel on the media side) are bridged to `conversation_events::consume`, which
//! records status and transcript and queues the webhooks; when the engine ends the session (hang-up, max
//! duration) the record reads ENDED. A transport (`super::media`) feeds `input`, plays `output`, and
//! marks the record IN_PROGRESS when the participant's media flows.

use std::path::Path;
use std::sync::{Arc, Mutex};

use confab_engine::actions::{ActionSettings, Actions};
use confab_engine::agent_spec::{AgentSpec, PipelineSpec};
use confab_engine::events::ConversationEvent;
use confab_engine::providers::env::ProviderEnv;
use confab_engine::responder::{ReplyRule, Responder};
use confab_engine::runtime::Runtime;
use confab_engine::turn_metrics::TurnMetrics;
use tokio::sync::{Notify, broadcast, mpsc};

use confab_store::Db;
use confab_store::agents::to_agent;
use confab_store::collection::AGENTS;
use confab_store::conversation_events::{self, CallEndHook};
use confab_store::conversations;
use confab_store::metrics::Providers;

/// Events waiting between the bridge thread and the recorder. Full: the bridge thread waits.
pub const BRIDGE_QUEUE: usize = 256;
/// Events kept for a transport that shows them (LiveKit's room); one that falls further behind skips them.
pub const SHOWN_EVENTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("conversation {0} not found")]
    NoConversation(String),
    #[error("agent {0} not found")]
    NoAgent(String),
    #[error("the agent cannot be run: {0}")]
    Agent(String),
    #[error("no free session slot")]
    Full,
    #[error(transparent)]
    Store(#[from] sqlx::Error),
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

/// Starts the engine for `conversation_id` with its agent's configuration and providers.
pub async fn start(
    db: &Db,
    runtime: &Arc<Mutex<Runtime>>,
    conversation_id: &str,
    models_dir: &Path,
    providers: &ProviderEnv,
    allow_private_urls: bool,
    webhooks: Option<Arc<Notify>>,
    on_call_end: Option<CallEndHook>,
) -> Result<LiveConversation, LiveError> {
    let conversation = conversations::get(db, conversation_id)
        .await?
        .ok_or_else(|| LiveError::NoConversation(conversation_id.to_string()))?;
    let record = AGENTS
        .get(db, &conversation.agent_id)
        .await?
        .ok_or_else(|| LiveError::NoAgent(conversation.agent_id.clone()))?;
    let agent = serde_json::to_value(to_agent(db, &record).await?).expect("agents serialize");
    let record = agent["record"].as_bool().unwrap_or(false);
    let mut spec = AgentSpec::from_json(&agent.to_string()).map_err(|e| LiveError::Agent(e.to_string()))?;
    // The conversation's avatar (chosen at its creation; the agent's first by default) speaks.
    spec.speak_with(&conversation.avatar_id);
    let face = spec.avatars.first().map(|avatar| avatar.avatar_key_id.clone()).unwrap_or_default();
    let custom_face = confab_store::avatars::assets::load(db, &face).await?;
    let config = spec.conversation_config().map_err(|e| LiveError::Agent(e.to_string()))?;
    let prompt = spec.system_prompt(&conversation.context);
    let settings = ActionSettings::for_conversation(&spec.actions, conversation_id, allow_private_urls);
    let actions = Actions::connected(&spec.actions, settings).await.map_err(|e| LiveError::Agent(e.to_string()))?;
    // Loading the models takes seconds (longer while the startup preload holds them): not on an I/O thread.
    let pipeline = PipelineSpec::of_agent(&spec);
    let (dir, env) = (models_dir.to_path_buf(), providers.clone());
    let stage_providers = Providers::of_pipeline(&pipeline);
    let mut responder = tokio::task::spawn_blocking(move || Responder::from_config(&pipeline, prompt, &dir, &env))
        .await
        .map_err(|e| LiveError::Agent(format!("loading the agent's models failed: {e}")))?
        .map_err(|e| LiveError::Agent(e.to_string()))?
        .with_actions(actions)
        .with_reply_rule(reply_rule(&conversation, &agent));
    if let Some((retrieval, _writer)) =
        confab_store::conversation_knowledge::retrieval(db, models_dir, &agent, conversation_id).await
    {
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
    tokio::spawn(store_turn_metrics(db.clone(), conversation_id.to_string(), stage_providers, metrics_rx));
    let finished =
        tokio::spawn(conversation_events::consume(db.clone(), conversation_id.to_string(), rx, webhooks, on_call_end));
    Ok(LiveConversation {
        conversation_id: conversation_id.to_string(),
        session_id: session.id,
        user_id: conversation.user_id.clone(),
        events: shown_events,
        record,
        face,
        custom_face,
        input: session.input,
        output: session.output,
        load: LoadCounters(counters),
        finished,
    })
}

/// Which turns the agent answers: every one in a 1:1 call; in an external meeting, as its `mode` and
/// `wake_phrase` say (docs/meetings.md). Addressed by name means the display name it joined with, that
/// name's first word, or the agent's name.
fn reply_rule(conversation: &conversations::ConversationSummary, agent: &serde_json::Value) -> ReplyRule {
    use confab_store::meeting_mode::{MODE_ALWAYS, MODE_OBSERVER};
    let meeting = &conversation.meta_data["meeting"];
    if conversation.conversation_type != conversations::TYPE_EXTERNAL_MEETING || !meeting.is_object() {
        return ReplyRule::Always;
    }
    let wake_phrase = meeting["wake_phrase"].as_str().unwrap_or_default().trim();
    match meeting["mode"].as_str().unwrap_or_default() {
        MODE_OBSERVER => ReplyRule::Never,
        _ if !wake_phrase.is_empty() => ReplyRule::WakePhrase(wake_phrase.to_string()),
        MODE_ALWAYS => ReplyRule::Always,
        _ => {
            let display = conversation.user_name.trim();
            let first_word = display.split_whitespace().next().unwrap_or_default();
            let agent_name = agent["agent_name"].as_str().unwrap_or_default().trim();
            let mut names: Vec<String> = Vec::new();
            for name in [display, first_word, agent_name] {
                if name.chars().count() >= 2 && !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                    names.push(name.to_string());
                }
            }
            ReplyRule::Addressed { names }
        }
    }
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
    db: Db,
    conversation_id: String,
    providers: Providers,
    mut turns: mpsc::Receiver<TurnMetrics>,
) {
    while let Some(metrics) = turns.recv().await {
        confab_store::metrics::metrics().turn(&metrics, &providers);
        let mut body = metrics.to_json();
        body["conversation_id"] = serde_json::json!(conversation_id);
        let turn = metrics.turn.0 as i64;
        if let Err(err) = confab_store::turn_metrics::insert(&db, &conversation_id, turn, &body).await {
            tracing::warn!(%conversation_id, error = %err, "could not store a turn's metrics");
        }
    }
}
