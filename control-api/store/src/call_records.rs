//! The store's side of the call seam: `StoreRecords` implements `confab_calls::CallRecords` on the
//! database, so a media worker reads its conversations as typed `SessionSpec`s and writes events, turn
//! metrics, claims and heartbeats without knowing the store. The binary builds one and hands it to the
//! worker.

use std::path::Path;
use std::sync::Arc;

use confab_calls::records::{CallEndHook, CallRecords, CallSummary, Claim, RecordsError, SessionSpec, WorkerBeat};
use confab_engine::events::ConversationEvent;
use confab_engine::knowledge::Retrieval;
use confab_engine::responder::ReplyRule;
use confab_engine::turn_metrics::TurnMetrics;
use tokio::sync::{Notify, mpsc};

use crate::Db;
use crate::agents::{AgentFields, agent_spec, to_agent};
use crate::collection::AGENTS;
use crate::conversations::{self, ConversationSummary, STATUS_ENDED};
use crate::meeting_mode::{MODE_ALWAYS, MODE_OBSERVER};

/// The records of calls in the database. `webhooks` is woken whenever events were queued for delivery
/// (the embedded deliverer, or a NATS publish in a fleet).
#[derive(Clone)]
pub struct StoreRecords {
    pub db: Db,
    pub webhooks: Option<Arc<Notify>>,
}

impl StoreRecords {
    pub fn new(db: Db, webhooks: Option<Arc<Notify>>) -> Arc<StoreRecords> {
        Arc::new(StoreRecords { db, webhooks })
    }
}

#[async_trait::async_trait]
impl CallRecords for StoreRecords {
    async fn summary(&self, conversation_id: &str) -> Result<Option<CallSummary>, RecordsError> {
        let Some(conversation) = conversations::get(&self.db, conversation_id).await.map_err(RecordsError::new)? else {
            return Ok(None);
        };
        let agent = AGENTS.get(&self.db, &conversation.agent_id).await.map_err(RecordsError::new)?;
        let agent_name = match agent {
            Some(agent) => Some(agent.fields::<AgentFields>().map_err(RecordsError::new)?.agent_name),
            None => None,
        };
        Ok(Some(CallSummary {
            agent_id: conversation.agent_id,
            agent_name,
            ended: conversation.status == STATUS_ENDED,
        }))
    }

    async fn open(&self, conversation_id: &str) -> Result<Option<SessionSpec>, RecordsError> {
        let db = &self.db;
        let Some(conversation) = conversations::get(db, conversation_id).await.map_err(RecordsError::new)? else {
            return Ok(None);
        };
        let Some(record) = AGENTS.get(db, &conversation.agent_id).await.map_err(RecordsError::new)? else {
            return Ok(None);
        };
        let agent = to_agent(db, &record).await.map_err(RecordsError::new)?;
        let mut spec = agent_spec(&agent);
        // The conversation's avatar (chosen at its creation; the agent's first by default) speaks.
        spec.speak_with(&conversation.avatar_id);
        let face = spec.avatars.first().map(|avatar| avatar.avatar_key_id.as_str()).unwrap_or_default();
        let custom_face = crate::avatars::assets::load(db, face).await.map_err(RecordsError::new)?;
        let reply_rule = reply_rule(&conversation, &agent.agent_name);
        Ok(Some(SessionSpec {
            agent: spec,
            record: agent.record,
            user_id: conversation.user_id,
            context: conversation.context,
            reply_rule,
            meeting: conversation.conversation_type == conversations::TYPE_EXTERNAL_MEETING,
            custom_face,
            knowledge_base_ids: agent.knowledge_base.iter().map(|kb| kb.id.clone()).collect(),
        }))
    }

    async fn retrieval(&self, models_dir: &Path, ids: &[String], conversation_id: &str) -> Option<Retrieval> {
        let (retrieval, _writer) =
            crate::conversation_knowledge::retrieval(&self.db, models_dir, ids, conversation_id).await?;
        Some(retrieval)
    }

    async fn media_started(&self, conversation_id: &str) -> Result<(), RecordsError> {
        crate::conversation_events::media_started(&self.db, conversation_id).await.map_err(RecordsError::new)
    }

    async fn record_events(
        &self,
        conversation_id: &str,
        events: mpsc::Receiver<ConversationEvent>,
        on_call_end: Option<CallEndHook>,
    ) {
        let (db, id, webhooks) = (self.db.clone(), conversation_id.to_string(), self.webhooks.clone());
        crate::conversation_events::consume(db, id, events, webhooks, on_call_end).await
    }

    async fn turn_metrics(&self, conversation_id: &str, metrics: &TurnMetrics) -> Result<(), RecordsError> {
        let mut body = metrics.to_json();
        body["conversation_id"] = serde_json::json!(conversation_id);
        let turn = metrics.turn.0 as i64;
        crate::turn_metrics::insert(&self.db, conversation_id, turn, &body).await.map_err(RecordsError::new)
    }

    async fn claim(&self, conversation_id: &str, worker_id: &str) -> Result<Claim, RecordsError> {
        crate::workers::claim(&self.db, conversation_id, worker_id).await.map_err(RecordsError::new)
    }

    async fn release(&self, conversation_id: &str, worker_id: &str) -> Result<(), RecordsError> {
        crate::workers::release(&self.db, conversation_id, worker_id).await.map_err(RecordsError::new)
    }

    async fn heartbeat(&self, beat: &WorkerBeat, now_ms: i64) -> Result<(), RecordsError> {
        crate::workers::heartbeat(&self.db, beat, now_ms).await.map_err(RecordsError::new)
    }

    async fn leave_fleet(&self, worker_id: &str) -> Result<(), RecordsError> {
        crate::workers::remove(&self.db, worker_id).await.map_err(RecordsError::new)
    }
}

/// Which turns the agent answers: every one in a 1:1 call; in an external meeting, as its `mode` and
/// `wake_phrase` say (docs/meetings.md). Addressed by name means the display name it joined with, that
/// name's first word, or the agent's name.
fn reply_rule(conversation: &ConversationSummary, agent_name: &str) -> ReplyRule {
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
            let mut names: Vec<String> = Vec::new();
            for name in [display, first_word, agent_name.trim()] {
                if name.chars().count() >= 2 && !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                    names.push(name.to_string());
                }
            }
            ReplyRule::Addressed { names }
        }
    }
}
