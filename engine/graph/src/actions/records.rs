//! The records an agent attaches, as the engine reads them from the Agent resource (SPEC.md's `tool`,
//! `guardrail` and `mcp` arrays, whole records as the API returns them): typed once at the edge
//! (`AgentSpec`), leniently — a field left out or `null` is empty — so that a record the engine cannot use
//! is refused by name (`MalformedAction`) rather than by a parse error deep in a conversation.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

fn or_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A Tool record: an HTTP API described by a function schema.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolRecord {
    /// `tool.api` (the only type this server runs) when left out.
    #[serde(rename = "type", default, deserialize_with = "or_default")]
    pub tool_type: String,
    #[serde(default, deserialize_with = "or_default")]
    pub schema: FunctionRecord,
    #[serde(default, deserialize_with = "or_default")]
    pub request_config: RequestRecord,
    #[serde(default, deserialize_with = "or_default")]
    pub event_messages: EventMessagesRecord,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionRecord {
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
    #[serde(default, deserialize_with = "or_default")]
    pub description: String,
    /// A JSON Schema object, offered to the model as it is (anything else: no parameters).
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// Where a tool or an MCP server is reached.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RequestRecord {
    #[serde(default, deserialize_with = "or_default")]
    pub method: String,
    #[serde(default, deserialize_with = "or_default")]
    pub url: String,
    #[serde(default, deserialize_with = "or_default")]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventMessagesRecord {
    #[serde(default, deserialize_with = "or_default")]
    pub on_start: MessageRecord,
    #[serde(default, deserialize_with = "or_default")]
    pub on_success: MessageRecord,
    #[serde(default, deserialize_with = "or_default")]
    pub on_error: MessageRecord,
    #[serde(default, deserialize_with = "or_default")]
    pub on_delay: MessageRecord,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageRecord {
    #[serde(default, deserialize_with = "or_default")]
    pub message: String,
    /// Seconds, for `on_delay`.
    #[serde(default)]
    pub delay: Option<f64>,
}

/// A Guardrail record.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GuardrailRecord {
    #[serde(default, deserialize_with = "or_default")]
    pub id: String,
    #[serde(default, deserialize_with = "or_default")]
    pub key: String,
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
    #[serde(default, deserialize_with = "or_default")]
    pub category: String,
    #[serde(default, deserialize_with = "or_default")]
    pub prompt: String,
    #[serde(default, deserialize_with = "or_default")]
    pub response_message: String,
    #[serde(default, deserialize_with = "or_default")]
    pub callback_url: String,
}

/// An MCP configuration record.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct McpRecord {
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
    /// `shttp/sse` (the default), `shttp` or `sse`.
    #[serde(rename = "type", default, deserialize_with = "or_default")]
    pub mcp_type: String,
    #[serde(default, deserialize_with = "or_default")]
    pub request_config: RequestRecord,
}

/// What an agent can do besides talk, and the secret its guardrail callbacks are signed with.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ActionsSpec {
    #[serde(default, deserialize_with = "or_default")]
    pub tool: Vec<ToolRecord>,
    #[serde(default, deserialize_with = "or_default")]
    pub guardrail: Vec<GuardrailRecord>,
    #[serde(default, deserialize_with = "or_default")]
    pub mcp: Vec<McpRecord>,
    #[serde(default, deserialize_with = "or_default")]
    pub webhook_secret: String,
}
