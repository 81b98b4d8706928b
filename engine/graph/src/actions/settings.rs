//! What a conversation's actions may do (`ActionSettings`: where outbound requests may go, how callbacks are
//! signed), and the refusal of a record that cannot be used (`MalformedAction`).

use super::records::ActionsSpec;

/// Where the conversation's outbound requests may go and how callbacks are signed.
#[derive(Debug, Clone, Default)]
pub struct ActionSettings {
    /// Lifts the address guard (`--allow-private-urls`): tools and callbacks may reach loopback and
    /// private addresses.
    pub allow_private_urls: bool,
    /// Named in guardrail callbacks.
    pub conversation_id: String,
    /// The agent's webhook secret: guardrail callbacks are signed with it.
    pub webhook_secret: String,
}

impl ActionSettings {
    /// The settings of conversation `conversation_id` of an agent with these actions (its `webhook_secret`).
    pub fn for_conversation(agent: &ActionsSpec, conversation_id: &str, allow_private_urls: bool) -> ActionSettings {
        ActionSettings {
            allow_private_urls,
            conversation_id: conversation_id.to_string(),
            webhook_secret: agent.webhook_secret.clone(),
        }
    }
}

/// What an API tool record needs to be called.
pub(super) const TOOL_NEEDS: &str = "type \"tool.api\", schema.name, request_config.url and request_config.method";

/// An attached record that cannot be used (its array and place in it, and what it lacks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the agent's {field}[{index}] cannot be used: it needs {needs}")]
pub struct MalformedAction {
    pub field: &'static str,
    pub index: usize,
    pub needs: &'static str,
}
