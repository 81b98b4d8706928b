//! The language-model interface: a chat request in, a stream of text and tool-call pieces out.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{CallMetrics, ProviderError};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.to_string(), content: content.into() }
    }
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
}
