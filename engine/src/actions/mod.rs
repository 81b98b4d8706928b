//! What an agent can do besides talk: call its tools (`tool.api` HTTP APIs), the tools of its MCP
//! servers, and check its guardrails. Built once per conversation from the agent's description (SPEC.md's
//! Agent: the resolved `tool`, `guardrail` and `mcp` arrays; missing or deleted records are simply
//! absent), MCP servers connected at its start (`connect_mcp`), and offered to the language model as
//! functions. The responder runs the calls the model makes (`responder::tool_round`).

pub mod api_tool;
pub mod guardrail;
pub mod mcp;
pub mod moderation;

use serde_json::Value;

use crate::outbound::guard;
use crate::providers::llm::ToolSpec;
use api_tool::{ApiTool, TOOL_TIMEOUT};
use guardrail::Guardrail;
use mcp::{McpServer, McpTool};

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
    /// The settings of conversation `conversation_id` of `agent` (the Agent resource: its `webhook_secret`).
    pub fn for_conversation(agent: &Value, conversation_id: &str, allow_private_urls: bool) -> ActionSettings {
        ActionSettings {
            allow_private_urls,
            conversation_id: conversation_id.to_string(),
            webhook_secret: agent["webhook_secret"].as_str().unwrap_or_default().to_string(),
        }
    }
}

/// What an API tool record needs to be called.
const TOOL_NEEDS: &str = "type \"tool.api\", schema.name, request_config.url and request_config.method";

/// An attached record that cannot be used (its array and place in it, and what it lacks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the agent's {field}[{index}] cannot be used: it needs {needs}")]
pub struct MalformedAction {
    pub field: &'static str,
    pub index: usize,
    pub needs: &'static str,
}

/// One function the model may call.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    Tool(&'a ApiTool),
    Guardrail(&'a Guardrail),
    Mcp(&'a McpTool),
}

pub struct Actions {
    pub tools: Vec<ApiTool>,
    pub guardrails: Vec<Guardrail>,
    /// The agent's MCP servers, and the tools of those connected.
    pub mcp_servers: Vec<McpServer>,
    pub mcp_tools: Vec<McpTool>,
    /// Open MCP sessions (closed when the conversation's actions are dropped).
    mcp_sessions: Vec<rmcp::service::RunningService<rmcp::RoleClient, ()>>,
    pub settings: ActionSettings,
    /// Guarded client for tools (redirects followed, each hop checked).
    pub client: reqwest::Client,
    /// Guarded client for callbacks (no redirects).
    pub callback_client: reqwest::Client,
}

impl Default for Actions {
    fn default() -> Self {
        Actions::new(Vec::new(), Vec::new(), ActionSettings::default())
    }
}

impl Actions {
    pub fn new(tools: Vec<ApiTool>, guardrails: Vec<Guardrail>, settings: ActionSettings) -> Actions {
        let allow = settings.allow_private_urls;
        Actions {
            tools,
            guardrails,
            mcp_servers: Vec::new(),
            mcp_tools: Vec::new(),
            mcp_sessions: Vec::new(),
            client: guard::client_following_redirects(allow, TOOL_TIMEOUT),
            callback_client: guard::client(allow, guardrail::CALLBACK_TIMEOUT),
            settings,
        }
    }

    /// The agent's tools, guardrails and MCP servers (`tool`, `guardrail`, `mcp` arrays of the Agent
    /// resource). A record that cannot be used is refused, never skipped (the API refuses such records
    /// when they are stored; an agent file of `confab simulate` may hold one). A guardrail whose key is
    /// also a tool's name is left out (the tool keeps the name), as are repeated names, each logged.
    pub fn from_agent(agent: &Value, settings: ActionSettings) -> Result<Actions, MalformedAction> {
        let records = |field: &str| agent[field].as_array().cloned().unwrap_or_default();
        let mut names = std::collections::HashSet::new();
        let mut keep = |name: &str| {
            let new = names.insert(name.to_string());
            if !new {
                tracing::warn!(name, "an action's name is already taken; the later one is left out");
            }
            new
        };
        let mut tools = Vec::new();
        for (index, record) in records("tool").iter().enumerate() {
            let tool =
                ApiTool::from_record(record).ok_or(MalformedAction { field: "tool", index, needs: TOOL_NEEDS })?;
            if keep(&tool.spec.name) {
                tools.push(tool);
            }
        }
        let mut guardrails = Vec::new();
        for (index, record) in records("guardrail").iter().enumerate() {
            let guardrail =
                Guardrail::from_record(record).ok_or(MalformedAction { field: "guardrail", index, needs: "a key" })?;
            if keep(&guardrail.key) {
                guardrails.push(guardrail);
            }
        }
        let mut actions = Actions::new(tools, guardrails, settings);
        for (index, record) in records("mcp").iter().enumerate() {
            let server = McpServer::from_record(record).ok_or(MalformedAction {
                field: "mcp",
                index,
                needs: "request_config.url",
            })?;
            actions.mcp_servers.push(server);
        }
        Ok(actions)
    }

    /// `from_agent`, with the MCP servers connected: what a conversation starts with.
    pub async fn connected(agent: &Value, settings: ActionSettings) -> Result<Actions, MalformedAction> {
        let mut actions = Actions::from_agent(agent, settings)?;
        actions.connect_mcp().await;
        Ok(actions)
    }

    /// Connects the MCP servers (all at once) and adds their tools; a server that cannot be reached, and
    /// a tool whose name is already taken, are logged and skipped.
    pub async fn connect_mcp(&mut self) {
        let allow = self.settings.allow_private_urls;
        let connecting = self.mcp_servers.iter().map(|server| server.connect(allow));
        let sessions = futures_util::future::join_all(connecting).await;
        let mut names: std::collections::HashSet<String> = self.specs().into_iter().map(|spec| spec.name).collect();
        for (server, session) in self.mcp_servers.iter().zip(sessions) {
            match session {
                Ok(session) => {
                    for tool in session.tools {
                        if names.insert(tool.spec.name.clone()) {
                            self.mcp_tools.push(tool);
                        } else {
                            tracing::warn!(server = %server.name, tool = %tool.spec.name, "MCP tool name already taken; skipped");
                        }
                    }
                    self.mcp_sessions.push(session.service);
                }
                Err(err) => {
                    tracing::warn!(server = %server.name, url = %server.url, error = %err, "MCP server skipped")
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.guardrails.is_empty() && self.mcp_tools.is_empty()
    }

    /// Everything offered to the model: guardrails first (checked before answering), then tools, then
    /// the MCP servers' tools.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let guardrails = self.guardrails.iter().map(Guardrail::spec);
        let tools = self.tools.iter().map(|tool| tool.spec.clone());
        guardrails.chain(tools).chain(self.mcp_tools.iter().map(|tool| tool.spec.clone())).collect()
    }

    pub fn find(&self, name: &str) -> Option<Action<'_>> {
        self.guardrails
            .iter()
            .find(|g| g.key == name)
            .map(Action::Guardrail)
            .or_else(|| self.tools.iter().find(|t| t.spec.name == name).map(Action::Tool))
            .or_else(|| self.mcp_tools.iter().find(|t| t.spec.name == name).map(Action::Mcp))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_tools_and_guardrails_from_the_agent() {
        let agent = json!({
            "tool": [
                { "type": "tool.api", "schema": { "name": "lookup" }, "request_config": { "method": "GET", "url": "https://x.example/l" } },
                { "type": "tool.api", "schema": { "name": "lookup" }, "request_config": { "method": "GET", "url": "https://y.example/l" } }
            ],
            "guardrail": [ { "id": "g", "key": "no_politics", "name": "No politics", "prompt": "Politics." }, { "key": "lookup" } ],
        });
        let actions = Actions::from_agent(&agent, ActionSettings::default()).unwrap();
        let names: Vec<String> = actions.specs().into_iter().map(|spec| spec.name).collect();
        assert_eq!(names, ["no_politics", "lookup"]);
        assert!(matches!(actions.find("lookup"), Some(Action::Tool(tool)) if tool.url == "https://x.example/l"));
        assert!(matches!(actions.find("no_politics"), Some(Action::Guardrail(_))));
        assert!(Actions::from_agent(&json!({}), ActionSettings::default()).unwrap().is_empty());
    }

    #[test]
    fn a_record_that_cannot_be_used_is_refused_not_skipped() {
        let agent = json!({ "tool": [
            { "type": "tool.api", "schema": { "name": "lookup" }, "request_config": { "method": "GET", "url": "https://x.example/l" } },
            { "type": "tool.api", "schema": { "name": "broken" } }
        ] });
        let refused = Actions::from_agent(&agent, ActionSettings::default()).err().unwrap();
        assert_eq!(refused, MalformedAction { field: "tool", index: 1, needs: TOOL_NEEDS });
        assert_eq!(
            refused.to_string(),
            "the agent's tool[1] cannot be used: it needs type \"tool.api\", schema.name, request_config.url and request_config.method"
        );
        let no_url = json!({ "mcp": [{ "name": "docs", "request_config": {} }] });
        assert_eq!(Actions::from_agent(&no_url, ActionSettings::default()).err().unwrap().field, "mcp");
    }
}
