//! The conversation events: one variant for each of the 11 webhook event names of SPEC.md, emitted by
//! the node that observes the fact, stamped with media time. The control plane turns them into records,
//! transcript entries and webhook deliveries.

use std::time::Duration;

use serde_json::{Value, json};

/// Every event name a conversation can emit, as they appear in `callback_events` and `event.name`.
pub const EVENT_NAMES: [&str; 11] = [
    "agent.interrupted",
    "agent.started_speaking",
    "agent.stopped_speaking",
    "call_ended",
    "max_call_duration_timeout",
    "max_call_duration_warning",
    "participant_left",
    "tool_call",
    "utterance_committed",
    "user.started_speaking",
    "user.stopped_speaking",
];

#[derive(Clone, PartialEq)]
pub enum EventKind {
    UserStartedSpeaking,
    UserStoppedSpeaking,
    /// The user's final text for the turn.
    UtteranceCommitted {
        text: String,
    },
    /// Text about to be spoken.
    AgentStartedSpeaking {
        text: String,
    },
    /// Text the user actually heard (truncated on interruption).
    AgentStoppedSpeaking {
        text: String,
    },
    AgentInterrupted,
    MaxCallDurationWarning {
        call_duration: Duration,
        max_call_duration: Duration,
    },
    MaxCallDurationTimeout {
        call_duration: Duration,
        max_call_duration: Duration,
    },
    ParticipantLeft {
        id: String,
    },
    ToolCall {
        tool_name: String,
        parameters: Value,
        result: Value,
    },
    CallEnded,
}

/// Transcripts and tool arguments are personal data: `Debug` shows only the event name.
impl std::fmt::Debug for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::AgentInterrupted => "agent.interrupted",
            EventKind::AgentStartedSpeaking { .. } => "agent.started_speaking",
            EventKind::AgentStoppedSpeaking { .. } => "agent.stopped_speaking",
            EventKind::CallEnded => "call_ended",
            EventKind::MaxCallDurationTimeout { .. } => "max_call_duration_timeout",
            EventKind::MaxCallDurationWarning { .. } => "max_call_duration_warning",
            EventKind::ParticipantLeft { .. } => "participant_left",
            EventKind::ToolCall { .. } => "tool_call",
            EventKind::UtteranceCommitted { .. } => "utterance_committed",
            EventKind::UserStartedSpeaking => "user.started_speaking",
            EventKind::UserStoppedSpeaking => "user.stopped_speaking",
        }
    }

    /// `event.payload` exactly as SPEC.md lists its fields; `{}` when the event has none.
    pub fn payload(&self) -> Value {
        match self {
            EventKind::UtteranceCommitted { text }
            | EventKind::AgentStartedSpeaking { text }
            | EventKind::AgentStoppedSpeaking { text } => json!({ "text": text }),
            EventKind::MaxCallDurationWarning { call_duration, max_call_duration }
            | EventKind::MaxCallDurationTimeout { call_duration, max_call_duration } => json!({
                "call_duration": call_duration.as_secs_f64(),
                "max_call_duration": max_call_duration.as_secs_f64(),
            }),
            EventKind::ParticipantLeft { id } => json!({ "id": id }),
            EventKind::ToolCall { tool_name, parameters, result } => {
                json!({ "tool_name": tool_name, "parameters": parameters, "result": result })
            }
            EventKind::UserStartedSpeaking
            | EventKind::UserStoppedSpeaking
            | EventKind::AgentInterrupted
            | EventKind::CallEnded => json!({}),
        }
    }
}

/// Transcript roles: the user's committed words, what the user heard the agent say, and the agent's tool
/// calls.
pub const ROLE_USER: &str = "user";
pub const ROLE_ASSISTANT: &str = "assistant";
pub const ROLE_TOOL: &str = "tool";

impl EventKind {
    /// The transcript entry this event makes (role, content), if any: `utterance_committed` (user),
    /// `agent.stopped_speaking` with heard text (assistant), and `tool_call` (tool; the content is the
    /// event's payload as JSON text: `{"tool_name", "parameters", "result"}`).
    pub fn transcript_entry(&self) -> Option<(&'static str, String)> {
        match self {
            EventKind::UtteranceCommitted { text } => Some((ROLE_USER, text.clone())),
            EventKind::AgentStoppedSpeaking { text } if !text.is_empty() => Some((ROLE_ASSISTANT, text.clone())),
            EventKind::ToolCall { .. } => Some((ROLE_TOOL, self.payload().to_string())),
            _ => None,
        }
    }
}

/// An event with the media time at which its node observed it (time since the conversation began).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationEvent {
    pub media_time: Duration,
    pub kind: EventKind,
}

impl ConversationEvent {
    /// SPEC.md's webhook envelope: `timestamp` (fractional Unix seconds), `conversation_id`,
    /// `type: "pipeline"`, `event: {name, payload}`.
    pub fn envelope(&self, conversation_id: &str, unix_timestamp: f64) -> Value {
        json!({
            "timestamp": unix_timestamp,
            "conversation_id": conversation_id,
            "type": "pipeline",
            "event": { "name": self.kind.name(), "payload": self.kind.payload() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_listed_name_and_the_names_are_distinct() {
        let kinds = [
            EventKind::UserStartedSpeaking,
            EventKind::UserStoppedSpeaking,
            EventKind::UtteranceCommitted { text: "hi".into() },
            EventKind::AgentStartedSpeaking { text: "a".into() },
            EventKind::AgentStoppedSpeaking { text: "a".into() },
            EventKind::AgentInterrupted,
            EventKind::MaxCallDurationWarning { call_duration: Duration::ZERO, max_call_duration: Duration::ZERO },
            EventKind::MaxCallDurationTimeout { call_duration: Duration::ZERO, max_call_duration: Duration::ZERO },
            EventKind::ParticipantLeft { id: "u".into() },
            EventKind::ToolCall { tool_name: "t".into(), parameters: json!({}), result: json!({}) },
            EventKind::CallEnded,
        ];
        let mut names: Vec<&str> = kinds.iter().map(EventKind::name).collect();
        names.sort_unstable();
        let mut listed = EVENT_NAMES.to_vec();
        listed.sort_unstable();
        assert_eq!(names, listed);
    }

    #[test]
    fn envelope_has_the_exact_shape() {
        let event = ConversationEvent {
            media_time: Duration::from_millis(1500),
            kind: EventKind::MaxCallDurationWarning {
                call_duration: Duration::from_secs(50),
                max_call_duration: Duration::from_secs(60),
            },
        };
        assert_eq!(
            event.envelope("c1", 1700000000.25),
            json!({
                "timestamp": 1700000000.25,
                "conversation_id": "c1",
                "type": "pipeline",
                "event": {
                    "name": "max_call_duration_warning",
                    "payload": { "call_duration": 50.0, "max_call_duration": 60.0 }
                }
            })
        );
        assert_eq!(format!("{:?}", EventKind::UtteranceCommitted { text: "secret".into() }), "utterance_committed");
    }
}
