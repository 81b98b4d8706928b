//! The records an agent attaches, as the engine reads them from the Agent resource (SPEC.md's `tool`,
//! `guardrail` and `mcp` arrays, whole records as the API returns them): typed once at the edge
//! (`AgentSpec`), leniently — a field left out or `null` is empty — so that a record the engine cannot use
//! is refused by name (`MalformedAction`) rather than by a parse error deep in a conversation.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::pipeline_config::nullable;

/// A Tool record: an HTTP API described by a function schema.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolRecord {
    /// `tool.api` (the only type this server runs) when left out.
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub tool_type: String,
    #[serde(default, deserialize_with = "nullable")]
    pub schema: FunctionRecord,
    #[serde(default, deserialize_with = "nullable")]
    pub request_config: RequestRecord,
    #[serde(default, deserialize_with = "nullable")]
    pub event_messages: EventMessagesRecord,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionRecord {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub description: String,
    /// A JSON Schema object, offered to the model as it is (anything else: no parameters).
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// Where a tool or an MCP server is reached.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RequestRecord {
    #[serde(default, deserialize_with = "nullable")]
    pub method: String,
    #[serde(default, deserialize_with = "nullable")]
    pub url: String,
    #[serde(default, deserialize_with = "nullable")]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventMessagesRecord {
    #[serde(default, deserialize_with = "nullable")]
    pub on_start: MessageRecord,
    #[serde(default, deserialize_with = "nullable")]
    pub on_success: MessageRecord,
    #[serde(default, deserialize_with = "nullable")]
    pub on_error: MessageRecord,
    #[serde(default, deserialize_with = "nullable")]
    pub on_delay: MessageRecord,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageRecord {
    #[serde(default, deserialize_with = "nullable")]
    pub message: String,
    /// Seconds, for `on_delay`.
    #[serde(default)]
    pub delay: Option<f64>,
}

/// A Guardrail record.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GuardrailRecord {
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub key: String,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub category: String,
    #[serde(default, deserialize_with = "nullable")]
    pub prompt: String,
    #[serde(default, deserialize_with = "nullable")]
    pub response_message: String,
    #[serde(default, deserialize_with = "nullable")]
    pub callback_url: String,
}

/// An MCP configuration record.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct McpRecord {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// `shttp/sse` (the default), `shttp` or `sse`.
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub mcp_type: String,
    #[serde(default, deserialize_with = "nullable")]
    pub request_config: RequestRecord,
}

/// What an agent can do besides talk, and the secret its guardrail callbacks are signed with.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ActionsSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub tool: Vec<ToolRecord>,
    #[serde(default, deserialize_with = "nullable")]
    pub guardrail: Vec<GuardrailRecord>,
    #[serde(default, deserialize_with = "nullable")]
    pub mcp: Vec<McpRecord>,
    #[serde(default, deserialize_with = "nullable")]
    pub webhook_secret: String,
}
