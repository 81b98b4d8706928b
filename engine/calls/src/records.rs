//! `CallRecords`: what a call reads and writes of the records, wherever they are kept. The media worker
//! sees only this port; the store implements it on the database (`confab_store::call_records`), and the
//! binary hands that implementation to the worker. A call opens its conversation as a typed
//! `SessionSpec`, marks its media started, hands its event stream over to be recorded, reports each
//! turn's metrics, and a worker claims conversations and heartbeats through it.

use std::path::Path;

use confab_engine::agent_spec::{AgentSpec, AgentSpecError};
use confab_engine::avatar::{FaceRig, RgbImage};
use confab_engine::conversation::ConversationConfig;
use confab_engine::core::other_voices::OtherVoices;
use confab_engine::events::ConversationEvent;
use confab_engine::knowledge::Retrieval;
use confab_engine::responder::ReplyRule;
use confab_engine::turn_metrics::TurnMetrics;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

/// The worker id `confab serve` alone claims its calls with.
pub const LOCAL_WORKER: &str = "local";

/// The records could not be read or written (the database's own error, boxed: the worker does not know
/// which database it is).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RecordsError(Box<dyn std::error::Error + Send + Sync>);

impl RecordsError {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> RecordsError {
        RecordsError(Box::new(error))
    }
}

/// A conversation as a join first sees it, before anything is negotiated.
#[derive(Debug, Clone)]
pub struct CallSummary {
    pub agent_id: String,
    /// The agent's name (a LiveKit room shows it as the agent participant's); None when the agent is gone.
    pub agent_name: Option<String>,
    /// The conversation has ended: it cannot be joined.
    pub ended: bool,
}

/// Everything a call needs to run its conversation, typed: the agent (the conversation's avatar first),
/// and what the conversation itself decides.
pub struct SessionSpec {
    pub agent: AgentSpec,
    /// The agent's `record` flag: the transport records the call.
    pub record: bool,
    /// The conversation's `user_id` (the participant named by `participant_left`).
    pub user_id: String,
    /// The conversation's own `context`, appended to the agent's system prompt.
    pub context: String,
    /// Which turns the agent answers (every one, but in a meeting as its mode says).
    pub reply_rule: ReplyRule,
    /// The conversation is an external meeting: every participant's voice is a user's
    /// (`OtherVoices::Hear`, whatever the agent's `stt.other_voices`).
    pub meeting: bool,
    /// The rigged portrait when the face is a completed custom avatar.
    pub custom_face: Option<(RgbImage, FaceRig)>,
    /// The agent's knowledge bases (`CallRecords::retrieval` loads them).
    pub knowledge_base_ids: Vec<String>,
}

impl SessionSpec {
    /// The call's turn-taking: the agent's, except that an external meeting hears every participant's
    /// voice (`OtherVoices::Hear`).
    pub fn conversation_config(&self) -> Result<ConversationConfig, AgentSpecError> {
        let mut config = self.agent.conversation_config()?;
        if self.meeting {
            config.other_voices = OtherVoices::Hear;
        }
        Ok(config)
    }
}

/// The outcome of a worker's claim on a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This worker now holds the conversation.
    Claimed,
    /// Another worker holds it (or this one already did: a redelivered job).
    Held(String),
    Ended,
    Missing,
}

/// What a worker reports of itself on each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerBeat {
    pub id: String,
    pub max_calls: i64,
    pub active_calls: i64,
    pub draining: bool,
}

/// Runs once when the call ends, before `call_ended` is recorded and queued: the transport finishes
/// the recording and returns the URL it is served at (None when the call was not recorded). So a client
/// that reads the conversation on `call_ended` finds `is_recorded` and `recording_url` already set.
pub type CallEndHook = Box<dyn FnOnce() -> BoxFuture<'static, Option<String>> + Send>;

/// The records of calls, as a worker reads and writes them.
#[async_trait::async_trait]
pub trait CallRecords: Send + Sync + 'static {
    /// The conversation `conversation_id` and its agent; None when the conversation does not exist.
    async fn summary(&self, conversation_id: &str) -> Result<Option<CallSummary>, RecordsError>;

    /// Opens the conversation for a call: None when it or its agent does not exist.
    async fn open(&self, conversation_id: &str) -> Result<Option<SessionSpec>, RecordsError>;

    /// The retrieval over knowledge bases `ids` for `conversation_id` (its snippets are recorded on the
    /// conversation as turns use them); None when they hold no documents or the embedding model in
    /// `models_dir` is missing (logged).
    async fn retrieval(&self, models_dir: &Path, ids: &[String], conversation_id: &str) -> Option<Retrieval>;

    /// The participant's media flows: the conversation is IN_PROGRESS.
    async fn media_started(&self, conversation_id: &str) -> Result<(), RecordsError>;

    /// Records the call's events as they come (status, transcript, webhooks queued) until the engine
    /// closes the stream; `on_call_end` runs before `call_ended` is recorded. The record then reads ENDED.
    async fn record_events(
        &self,
        conversation_id: &str,
        events: mpsc::Receiver<ConversationEvent>,
        on_call_end: Option<CallEndHook>,
    );

    /// Stores one turn's metrics (a turn reported twice keeps the first).
    async fn turn_metrics(&self, conversation_id: &str, metrics: &TurnMetrics) -> Result<(), RecordsError>;

    /// Claims `conversation_id` for `worker_id`, so that one conversation is admitted by one worker once.
    async fn claim(&self, conversation_id: &str, worker_id: &str) -> Result<Claim, RecordsError>;

    /// Gives up a claim whose call was not admitted.
    async fn release(&self, conversation_id: &str, worker_id: &str) -> Result<(), RecordsError>;

    /// Records a fleet worker's heartbeat at `now_ms` (the first one registers it).
    async fn heartbeat(&self, beat: &WorkerBeat, now_ms: i64) -> Result<(), RecordsError>;

    /// A fleet worker leaves cleanly (after its calls ended).
    async fn leave_fleet(&self, worker_id: &str) -> Result<(), RecordsError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(agent: &str, meeting: bool) -> SessionSpec {
        SessionSpec {
            agent: AgentSpec::from_json(agent).unwrap(),
            record: false,
            user_id: String::new(),
            context: String::new(),
            reply_rule: ReplyRule::default(),
            meeting,
            custom_face: None,
            knowledge_base_ids: Vec::new(),
        }
    }

    #[test]
    fn a_meeting_hears_every_voice_whatever_the_agent_says() {
        let ignoring =
            r#"{ "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "other_voices": "ignore" } } }] }"#;
        assert_eq!(call(ignoring, false).conversation_config().unwrap().other_voices, OtherVoices::Ignore);
        assert_eq!(call(ignoring, true).conversation_config().unwrap().other_voices, OtherVoices::Hear);
        assert_eq!(call("{}", false).conversation_config().unwrap().other_voices, OtherVoices::Ignore);
        assert_eq!(call("{}", true).conversation_config().unwrap().other_voices, OtherVoices::Hear);
    }
}
