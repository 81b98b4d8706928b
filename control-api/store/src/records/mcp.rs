//! An MCP configuration record (`McpFields`: a tool server over streamable HTTP or SSE) and its API
//! resource (`Mcp`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::StoredRecord;

/// Transports: `shttp/sse` lets the client pick streamable HTTP and fall back to SSE.
pub const MCP_TYPES: &[&str] = &["shttp/sse", "shttp", "sse"];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct McpFields {
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(rename = "type", default = "default_mcp_type")]
    pub mcp_type: String,
    pub request_config: McpRequestConfig,
}

fn default_mcp_type() -> String {
    "shttp/sse".to_string()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct McpRequestConfig {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Mcp {
    pub id: String,
    #[serde(flatten)]
    pub fields: McpFields,
    pub created_at: String,
    pub updated_at: String,
}

pub fn to_mcp(record: &StoredRecord) -> Result<Mcp, sqlx::Error> {
    Ok(Mcp {
        id: record.id.clone(),
        fields: record.fields()?,
        created_at: record.created_at.clone(),
        updated_at: record.updated_at.clone(),
    })
}
