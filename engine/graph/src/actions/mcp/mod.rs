//! MCP servers attached to an agent: at conversation start each is connected (`rmcp` client over our
//! HTTP transports, `transport`), its tools are listed and offered to the model; a call the model makes
//! becomes `tools/call` on that server. `type` chooses the transport: `shttp` (Streamable HTTP), `sse`
//! (the older HTTP+SSE), or `shttp/sse` (the default: Streamable HTTP, and HTTP+SSE when the server
//! refuses it, as the MCP specification's backwards-compatibility section describes). A server that
//! cannot be reached within `CONNECT_TIMEOUT` is logged and skipped; the conversation goes on.

pub mod transport;

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

use super::records::McpRecord;
use crate::outbound::guard;
use crate::providers::llm::ToolSpec;
use transport::{HttpTransport, header_map};

/// Connection, initialization and the tool list, per server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One `tools/call`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// An MCP configuration record: where the server is and how to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    pub name: String,
    /// `shttp/sse`, `shttp` or `sse`.
    pub kind: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
}

impl McpServer {
    /// From an MCP configuration record; None without a URL.
    pub fn from_record(record: &McpRecord) -> Option<McpServer> {
        let config = &record.request_config;
        let url = Some(config.url.clone()).filter(|u| !u.is_empty())?;
        Some(McpServer {
            name: record.name.clone(),
            kind: if record.mcp_type.is_empty() { "shttp/sse".to_string() } else { record.mcp_type.clone() },
            url,
            headers: config.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
    }

    /// Connects, initializes and lists the server's tools.
    pub async fn connect(&self, allow_private: bool) -> Result<McpSession, String> {
        tokio::time::timeout(CONNECT_TIMEOUT, self.connect_now(allow_private))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))
    }

    async fn connect_now(&self, allow_private: bool) -> Result<McpSession, String> {
        let url = url::Url::parse(&self.url).map_err(|err| format!("bad URL: {err}"))?;
        guard::check_url(&url, allow_private)?;
        let client = guard::streaming_client(allow_private);
        let headers = header_map(&self.headers).map_err(|err| err.to_string())?;
        let service = match self.kind.as_str() {
            "sse" => serve(HttpTransport::sse(client, &self.url, headers, allow_private).await)?.await,
            "shttp" => serve(Ok(HttpTransport::streamable(client, &self.url, headers)))?.await,
            _ => match serve(Ok(HttpTransport::streamable(client.clone(), &self.url, headers.clone())))?.await {
                Ok(service) => Ok(service),
                Err(streamable) => {
                    tracing::debug!(server = %self.name, error = %streamable, "Streamable HTTP refused; trying HTTP+SSE");
                    serve(HttpTransport::sse(client, &self.url, headers, allow_private).await)?.await
                }
            },
        }?;
        let tools = service.peer().list_all_tools().await.map_err(|err| format!("tools/list failed: {err}"))?;
        let tools = tools
            .into_iter()
            .map(|tool| McpTool {
                spec: ToolSpec {
                    name: tool.name.to_string(),
                    description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                    parameters: Value::Object((*tool.input_schema).clone()),
                },
                server: self.name.clone(),
                peer: service.peer().clone(),
            })
            .collect();
        Ok(McpSession { service, tools })
    }
}

type Session = RunningService<RoleClient, ()>;

/// Starts the client on a transport (initialize handshake included).
fn serve(
    transport: Result<HttpTransport, transport::TransportError>,
) -> Result<impl Future<Output = Result<Session, String>>, String> {
    let transport = transport.map_err(|err| err.to_string())?;
    Ok(async move { ().serve(transport).await.map_err(|err| format!("initialize failed: {err}")) })
}

/// A connected server: its session (closed when dropped) and its tools.
pub struct McpSession {
    pub service: Session,
    pub tools: Vec<McpTool>,
}

/// One tool of a connected server.
#[derive(Clone)]
pub struct McpTool {
    pub spec: ToolSpec,
    /// The server's `name` (logs).
    pub server: String,
    peer: Peer<RoleClient>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "McpTool({} on {})", self.spec.name, self.server)
    }
}

impl McpTool {
    /// `tools/call` with the model's arguments: the result's structured content, or its text as
    /// `{"text": …}`; a result flagged `isError` is an error.
    pub async fn call(&self, arguments: Map<String, Value>) -> Result<Value, String> {
        let params = CallToolRequestParams::new(self.spec.name.clone()).with_arguments(arguments);
        let result = tokio::time::timeout(CALL_TIMEOUT, self.peer.call_tool(params))
            .await
            .map_err(|_| format!("the MCP tool timed out after {} s", CALL_TIMEOUT.as_secs()))?
            .map_err(|err| format!("the MCP call failed: {err}"))?;
        let result = serde_json::to_value(&result).map_err(|err| err.to_string())?;
        let text: Vec<&str> = result["content"]
            .as_array()
            .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect())
            .unwrap_or_default();
        let text = text.join("\n");
        if result["isError"].as_bool() == Some(true) {
            return Err(text);
        }
        Ok(match result.get("structuredContent") {
            Some(structured) if !structured.is_null() => structured.clone(),
            _ => json!({ "text": text }),
        })
    }
}
