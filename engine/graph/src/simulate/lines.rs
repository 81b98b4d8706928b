//! The run's output as JSON: each event as a line (SPEC.md's webhook envelope plus `media_time`), each turn's
//! `turn_metrics` line, and the transcript file's entries.

use serde_json::{Value, json};

use crate::events::ConversationEvent;
use crate::turn_metrics::TurnMetrics;

/// One event as a JSON line: the webhook envelope plus `media_time` in seconds.
pub fn event_line(event: &ConversationEvent, conversation_id: &str) -> Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let mut line = event.envelope(conversation_id, now);
    line["media_time"] = json!(event.media_time.as_secs_f64());
    line
}

/// One turn's `turn_metrics` line: `TurnMetrics::to_json` plus `conversation_id`.
pub fn metrics_line(metrics: &TurnMetrics, conversation_id: &str) -> Value {
    let mut line = metrics.to_json();
    line["conversation_id"] = json!(conversation_id);
    line
}

/// Transcript entries (SPEC.md's shape) from the events: committed user text and what the user heard.
pub fn transcript(
    events: &[ConversationEvent],
    conversation_id: &str,
    started: chrono::DateTime<chrono::Utc>,
) -> Vec<Value> {
    events
        .iter()
        .filter_map(|event| {
            let (role, content) = event.kind.transcript_entry()?;
            let at = started + chrono::Duration::from_std(event.media_time).unwrap_or_default();
            Some(json!({
                "timestamp": at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
                "role": role,
                "content": content,
                "conversation_id": conversation_id,
                "message_timestamp": event.media_time.as_secs_f64(),
            }))
        })
        .collect()
}
