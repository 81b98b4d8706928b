//! The language-model interface: a chat request in, a stream of text and tool-call pieces out.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{CallMetrics, ProviderError};

/// One message of the conversation, in OpenAI's chat shape: an assistant message may carry the tool
/// calls it made, and each `tool` message answers one of them by `tool_call_id`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "wire_tool_calls")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.to_string(), content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }

    /// The assistant's message that made `calls`.
    pub fn tool_calls(calls: Vec<ToolCall>) -> ChatMessage {
        ChatMessage { tool_calls: calls, ..ChatMessage::new("assistant", "") }
    }

    /// The result of the call `call_id`, as JSON text.
    pub fn tool_result(call_id: &str, result: &Value) -> ChatMessage {
        ChatMessage { tool_call_id: Some(call_id.to_string()), ..ChatMessage::new("tool", result.to_string()) }
    }
}

/// `tool_calls` as OpenAI's wire format: `{id, type: "function", function: {name, arguments}}`.
fn wire_tool_calls<S: serde::Serializer>(calls: &[ToolCall], serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = serializer.serialize_seq(Some(calls.len()))?;
    for call in calls {
        seq.serialize_element(&serde_json::json!({
            "id": call.id,
            "type": "function",
            "function": { "name": call.name, "arguments": call.arguments },
        }))?;
    }
    seq.end()
}

/// A tool the model may call, as OpenAI's `tools[].function`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// Bound on the reply's length, in tokens.
    pub max_tokens: u32,
    pub temperature: f32,
    pub stop: Vec<String>,
}

/// A complete tool call, assembled from the stream's deltas.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LlmEvent {
    /// More of the reply's text.
    Text(String),
    /// The model finished a tool call.
    ToolCall(ToolCall),
    /// The stream ended normally.
    Done { finish_reason: String, metrics: CallMetrics },
}

/// Dropping the receiver cancels the call.
pub type LlmStream = mpsc::Receiver<Result<LlmEvent, ProviderError>>;

pub trait LanguageModel: Send + Sync {
    fn stream(&self, request: ChatRequest) -> LlmStream;

    /// Prepares for a request that continues `messages` (a call's system message, at its start) with a
    /// user message and offers `tools`, in the background (an
    /// embedded model evaluates them now and keeps its state); remote models do nothing.
    fn warm(&self, _messages: &[ChatMessage], _tools: &[ToolSpec]) {}

    /// Whether a request made now, ahead of need (the reply asked before the user's turn is committed),
    /// would find the model free. An embedded model that every call of the process shares says no while
    /// requests wait for it, and counts it: under load its time goes to committed replies first. A hosted
    /// model always says yes.
    fn free_for_early_request(&self) -> bool {
        true
    }

    /// Which provider served the last finished request, and the ones that failed it before
    /// (`llm_chain::LlmChain`); None for a single model.
    fn served(&self) -> Option<super::chain::ServedBy> {
        None
    }
}
