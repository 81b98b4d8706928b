//! An agent's stored fields (`AgentFields`), its settings and avatars, and the Agent resource (`Agent`)
//! with its attachments resolved (`super::resolve`); the limits that apply to them.

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::agent_config::{Attachments, PipelineConfig, nullable};
use crate::records::guardrails::Guardrail;
use crate::records::knowledge_bases::KnowledgeBase;
use crate::records::mcp::Mcp;
use crate::records::tools::Tool;

/// `config.maxCallDuration` when the agent leaves it out, in seconds.
pub const DEFAULT_MAX_CALL_DURATION_SECONDS: f64 = 3600.0;
/// Largest `config.maxCallDuration` accepted, in seconds (24 hours).
pub const MAX_CALL_DURATION_LIMIT_SECONDS: f64 = 86_400.0;
/// Most avatars on one agent.
pub const MAX_AVATARS: usize = 16;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AgentAvatar {
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub avatar_key_id: String,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub persona_name: String,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub config: PipelineConfig,
}

/// Agent-level properties. `maxCallDuration` is in seconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentSettings {
    #[serde(default = "default_max_call_duration", deserialize_with = "max_call_duration_or_default")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub max_call_duration: f64,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(nullable))]
    pub conversational_context: String,
}

fn default_max_call_duration() -> f64 {
    DEFAULT_MAX_CALL_DURATION_SECONDS
}

fn max_call_duration_or_default<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(DEFAULT_MAX_CALL_DURATION_SECONDS))
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings { max_call_duration: DEFAULT_MAX_CALL_DURATION_SECONDS, conversational_context: String::new() }
    }
}

/// What is stored for an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AgentFields {
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub agent_name: String,
    pub agent_system_prompt: String,
    pub avatars: Vec<AgentAvatar>,
    pub callback_url: String,
    pub callback_events: Vec<String>,
    pub config: AgentSettings,
    pub record: bool,
    #[serde(flatten)]
    pub attachments: Attachments,
    /// Standard Webhooks signing secret (`whsec_…`) for this agent's events.
    pub webhook_secret: String,
    /// Meeting invite identity, when created from a template with one.
    pub email: String,
    /// The template this agent was created from; empty otherwise.
    pub template_id: String,
}

/// The Agent resource as the API returns it.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Agent {
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub agent_name: String,
    pub agent_system_prompt: String,
    pub avatars: Vec<AgentAvatar>,
    pub callback_events: Vec<String>,
    pub callback_url: String,
    pub config: AgentSettings,
    pub knowledge_base: Vec<KnowledgeBase>,
    pub tool: Vec<Tool>,
    pub guardrail: Vec<Guardrail>,
    pub mcp: Vec<Mcp>,
    pub record: bool,
    #[serde(flatten)]
    pub attachments: Attachments,
    pub webhook_secret: String,
    pub email: String,
    pub template_id: String,
    pub created_at: String,
    pub updated_at: String,
}
