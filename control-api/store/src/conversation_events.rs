//! Applies the engine's conversation events to the records: status transitions, transcript entries, and
//! the webhook outbox. Each transcript entry is written as its turn is committed, so a crash loses at most
//! the turn in flight; each subscribed event is stored in the outbox before anything is sent.

use confab_engine::{ConversationEvent, EventKind};
use tokio::sync::mpsc;

use crate::Db;
use crate::conversations::{self, STATUS_ENDED, STATUS_IN_PROGRESS};

pub use confab_engine::events::{ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER};

/// Records what one event means for the conversation, and queues its webhook, in one transaction: a
/// receiver that reads the conversation when the webhook arrives finds what the event did (`call_ended`
/// → ENDED, `utterance_committed` → the transcript entry), and a crash loses neither half.
pub async fn apply(db: &Db, conversation_id: &str, event: &ConversationEvent) -> Result<(), sqlx::Error> {
    let queued = crate::outbox::subscribed(db, conversation_id, event).await?;
    let speaker = match event.kind.transcript_entry() {
        Some((role, _)) if role == ROLE_USER => crate::meeting_speakers::current(conversation_id),
        _ => None,
    };
    let mut tx = db.begin_write().await?;
    let status = match &event.kind {
        EventKind::UserStartedSpeaking
        | EventKind::AgentStartedSpeaking { .. }
        | EventKind::UtteranceCommitted { .. } => Some(STATUS_IN_PROGRESS),
        EventKind::CallEnded | EventKind::MaxCallDurationTimeout { .. } => Some(STATUS_ENDED),
        _ => None,
    };
    if let Some(status) = status {
        conversations::advance_status_in(&mut tx, conversation_id, status).await?;
    }
    if let Some((role, content)) = event.kind.transcript_entry() {
        let media_seconds = event.media_time.as_secs_f64();
        conversations::append_transcript_in(
            &mut tx,
            conversation_id,
            role,
            &content,
            media_seconds,
            speaker.as_deref(),
        )
        .await?;
    }
    if let Some(queued) = queued {
        queued.insert(&mut tx).await?;
    }
    tx.commit().await
}

/// `apply`, tried again after 50 ms, 250 ms and 1 s when the database fails (a restart, a lock).
async fn apply_with_retries(db: &Db, conversation_id: &str, event: &ConversationEvent) -> Result<(), sqlx::Error> {
    let mut result = apply(db, conversation_id, event).await;
    for delay_ms in [50, 250, 1000] {
        if result.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
        result = apply(db, conversation_id, event).await;
    }
    result
}

/// Marks the conversation IN_PROGRESS once the participant's media flows.
pub async fn media_started(db: &Db, conversation_id: &str) -> Result<(), sqlx::Error> {
    conversations::advance_status(db, conversation_id, STATUS_IN_PROGRESS).await.map(|_| ())
}

pub use confab_calls::CallEndHook;

async fn run_call_end_hook(db: &Db, conversation_id: &str, hook: &mut Option<CallEndHook>) {
    let Some(hook) = hook.take() else { return };
    if let Some(url) = hook().await
        && let Err(err) = conversations::set_recording(db, conversation_id, &url).await
    {
        tracing::error!(%conversation_id, error = %err, "could not record the recording's URL");
    }
}

/// Consumes a conversation's event stream until the engine closes it, then makes sure the record reads
/// ENDED (a stream that closes without `call_ended` means the session stopped).
pub async fn consume(
    db: Db,
    conversation_id: String,
    mut events: mpsc::Receiver<ConversationEvent>,
    webhooks: Option<std::sync::Arc<tokio::sync::Notify>>,
    mut on_call_end: Option<CallEndHook>,
) {
    while let Some(event) = events.recv().await {
        if matches!(event.kind, EventKind::CallEnded) {
            run_call_end_hook(&db, &conversation_id, &mut on_call_end).await;
        }
        let applied = apply_with_retries(&db, &conversation_id, &event).await;
        if let Some(wake) = &webhooks {
            wake.notify_one();
        }
        if let Err(err) = applied {
            tracing::error!(%conversation_id, event = event.kind.name(), error = %err, "could not record a conversation event");
        }
    }
    run_call_end_hook(&db, &conversation_id, &mut on_call_end).await;
    if let Err(err) = conversations::advance_status(&db, &conversation_id, STATUS_ENDED).await {
        tracing::error!(%conversation_id, error = %err, "could not end the conversation");
    }
}
