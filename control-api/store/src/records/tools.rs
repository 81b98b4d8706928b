//! A tool record (`ToolFields`: an HTTP API described by a function schema) and its API resource (`Tool`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::StoredRecord;

/// The tool types this server runs.
pub const TOOL_TYPES: &[&str] = &["tool.api"];
pub const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ToolFields {
    #[serde(rename = "type", default = "default_tool_type")]
    pub tool_type: String,
    pub schema: FunctionSchema,
    pub request_config: ToolRequestConfig,
    #[serde(default)]
    pub event_messages: EventMessages,
}

fn default_tool_type() -> String {
    "tool.api".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FunctionSchema {
    /// Always `function`.
    #[serde(rename = "type", default = "default_function")]
    pub schema_type: String,
    /// 1–64 characters of `a-z A-Z 0-9 _ -`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: FunctionParameters,
}

fn default_function() -> String {
    "function".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FunctionParameters {
    /// Always `object`.
    #[serde(rename = "type", default = "default_object")]
    pub parameters_type: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub properties: serde_json::Map<String, Value>,
    #[serde(default)]
    pub required: Vec<String>,
}

impl Default for FunctionParameters {
    fn default() -> Self {
        FunctionParameters { parameters_type: default_object(), properties: Default::default(), required: vec![] }
    }
}

fn default_object() -> String {
    "object".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ToolRequestConfig {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EventMessages {
    #[serde(default)]
    pub on_start: SpokenMessage,
    #[serde(default)]
    pub on_success: SpokenMessage,
    #[serde(default)]
    pub on_error: SpokenMessage,
    #[serde(default)]
    pub on_delay: DelayMessage,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SpokenMessage {
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct DelayMessage {
    /// Seconds without a response before `message` is spoken.
    #[serde(default)]
    pub delay: f64,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Tool {
    pub id: String,
    #[serde(flatten)]
    pub fields: ToolFields,
    pub created_at: String,
    pub updated_at: String,
}

pub fn to_tool(record: &StoredRecord) -> Result<Tool, sqlx::Error> {
    Ok(Tool {
        id: record.id.clone(),
        fields: record.fields()?,
        created_at: record.created_at.clone(),
        updated_at: record.updated_at.clone(),
    })
}
