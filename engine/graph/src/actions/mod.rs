//! What an agent can do besides talk: call its tools (`tool.api` HTTP APIs), the tools of its MCP
//! servers, and check its guardrails. Built once per conversation from the agent's description (SPEC.md's
//! Agent: the resolved `tool`, `guardrail` and `mcp` arrays; missing or deleted records are simply
//! absent), MCP servers connected at its start (`connect_mcp`), and offered to the language model as
//! functions. The responder runs the calls the model makes (`responder::tool_round`).

pub mod api_tool;
pub mod guardrail;
pub mod mcp;
pub mod moderation;
pub mod records;
mod settings;

use crate::outbound::guard;
use crate::providers::llm::ToolSpec;
use api_tool::{ApiTool, TOOL_TIMEOUT};
use guardrail::Guardrail;
use mcp::{McpServer, McpTool};
use records::ActionsSpec;
use settings::TOOL_NEEDS;
pub use settings::{ActionSettings, MalformedAction};

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
    pub fn from_agent(agent: &ActionsSpec, settings: ActionSettings) -> Result<Actions, MalformedAction> {
        let mut names = std::collections::HashSet::new();
        let mut keep = |name: &str| {
            let new = names.insert(name.to_string());
            if !new {
                tracing::warn!(name, "an action's name is already taken; the later one is left out");
            }
            new
        };
        let mut tools = Vec::new();
        for (index, record) in agent.tool.iter().enumerate() {
            let tool =
                ApiTool::from_record(record).ok_or(MalformedAction { field: "tool", index, needs: TOOL_NEEDS })?;
            if keep(&tool.spec.name) {
                tools.push(tool);
            }
        }
        let mut guardrails = Vec::new();
        for (index, record) in agent.guardrail.iter().enumerate() {
            let guardrail =
                Guardrail::from_record(record).ok_or(MalformedAction { field: "guardrail", index, needs: "a key" })?;
            if keep(&guardrail.key) {
                guardrails.push(guardrail);
            }
        }
        let mut actions = Actions::new(tools, guardrails, settings);
        for (index, record) in agent.mcp.iter().enumerate() {
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
    pub async fn connected(agent: &ActionsSpec, settings: ActionSettings) -> Result<Actions, MalformedAction> {
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
mod tests;
