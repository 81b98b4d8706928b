//! MCP's two HTTP transports as `rmcp` transports over the guarded HTTP client (`outbound::guard`):
//!
//! - **Streamable HTTP** (protocol 2025-03-26 and later): each client message is POSTed to the server's
//!   URL (`Accept: application/json, text/event-stream`); the answer is one JSON message, a batch, an SSE
//!   stream of messages, or 202 for notifications. The `Mcp-Session-Id` the server gives at
//!   initialization is sent back on every later request, and a DELETE ends the session on close.
//! - **HTTP+SSE** (protocol 2024-11-05, `rmcp` no longer ships a client for it): a GET opens an SSE
//!   stream whose first `endpoint` event names the URL to POST messages to (same origin as the server's
//!   URL); the server's messages arrive as `message` events on that stream.
//!
//! The server's messages are queued for `rmcp`'s service loop (`receive`); the configured headers go on
//! every request.

use crate::lock::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};

use crate::outbound::guard;
use crate::providers::sse::SseParser;

/// Messages from the server waiting for the service loop.
const INBOX: usize = 64;
/// Longest wait for the SSE stream's `endpoint` event.
pub const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);
const SESSION_HEADER: &str = "mcp-session-id";

#[derive(Debug, Clone, thiserror::Error)]
#[error("MCP transport: {0}")]
pub struct TransportError(pub String);

fn error(message: impl Into<String>) -> TransportError {
    TransportError(message.into())
}

/// Which transport a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    StreamableHttp,
    Sse,
}

pub struct HttpTransport {
    kind: Kind,
    client: reqwest::Client,
    headers: HeaderMap,
    /// Where messages are POSTed: the server's URL, or the SSE stream's endpoint.
    post_url: String,
    session: Arc<Mutex<Option<String>>>,
    inbox_tx: mpsc::Sender<ServerJsonRpcMessage>,
    inbox: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Reads the SSE stream (HTTP+SSE) for as long as the transport lives.
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

/// The configured headers; a header that is not valid HTTP is an error.
pub fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, TransportError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| error(format!("bad header name {name:?}")))?;
        let value = HeaderValue::from_str(value).map_err(|_| error(format!("bad value for header {name}")))?;
        map.insert(name, value);
    }
    Ok(map)
}

impl HttpTransport {
    /// A Streamable HTTP transport to `url` (nothing is sent before the first message).
    pub fn streamable(client: reqwest::Client, url: &str, headers: HeaderMap) -> HttpTransport {
        let (inbox_tx, inbox) = mpsc::channel(INBOX);
        HttpTransport {
            kind: Kind::StreamableHttp,
            client,
            headers,
            post_url: url.to_string(),
            session: Arc::new(Mutex::new(None)),
            inbox_tx,
            inbox,
            reader: None,
        }
    }

    /// Opens the SSE stream at `url` and waits for its endpoint (checked like any outbound address, and
    /// required to be on the same origin).
    pub async fn sse(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
        allow_private: bool,
    ) -> Result<HttpTransport, TransportError> {
        let base = url::Url::parse(url).map_err(|err| error(format!("bad URL: {err}")))?;
        let response = client
            .get(base.clone())
            .headers(headers.clone())
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|err| error(err.to_string()))?;
        if !response.status().is_success() {
            return Err(error(format!("GET {url}: HTTP {}", response.status().as_u16())));
        }
        let (inbox_tx, inbox) = mpsc::channel(INBOX);
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let reader = tokio::spawn(forward_sse_messages(response, Some(endpoint_tx), inbox_tx.clone()));
        let endpoint = match tokio::time::timeout(ENDPOINT_TIMEOUT, endpoint_rx).await {
            Ok(Ok(endpoint)) => endpoint,
            _ => {
                reader.abort();
                return Err(error("the SSE stream sent no endpoint event"));
            }
        };
        let post_url = base.join(&endpoint).map_err(|err| error(format!("bad endpoint {endpoint:?}: {err}")))?;
        if post_url.origin() != base.origin() {
            reader.abort();
            return Err(error(format!("the endpoint {post_url} is not on the server's origin")));
        }
        guard::check_url(&post_url, allow_private).map_err(error)?;
        Ok(HttpTransport {
            kind: Kind::Sse,
            client,
            headers,
            post_url: post_url.to_string(),
            session: Arc::new(Mutex::new(None)),
            inbox_tx,
            inbox,
            reader: Some(reader),
        })
    }
}

/// Reads an SSE stream to its end: the first `endpoint` event goes to `endpoint` (HTTP+SSE), every other
/// event's JSON-RPC messages to the inbox.
async fn forward_sse_messages(
    response: reqwest::Response,
    mut endpoint: Option<oneshot::Sender<String>>,
    inbox: mpsc::Sender<ServerJsonRpcMessage>,
) {
    let mut parser = SseParser::default();
    let mut bytes = response.bytes_stream();
    while let Some(Ok(chunk)) = bytes.next().await {
        let mut messages = Vec::new();
        parser.push_events(&chunk, &mut |event, data| match event {
            "endpoint" if endpoint.is_some() => {
                let _ = endpoint.take().expect("checked").send(data.trim().to_string());
            }
            _ => messages.extend(parse_messages(data)),
        });
        for message in messages {
            if inbox.send(message).await.is_err() {
                return;
            }
        }
    }
}

/// One JSON-RPC message or a batch of them; what does not parse is logged and dropped.
fn parse_messages(text: &str) -> Vec<ServerJsonRpcMessage> {
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    let parsed = if text.starts_with('[') {
        serde_json::from_str::<Vec<ServerJsonRpcMessage>>(text)
    } else {
        serde_json::from_str::<ServerJsonRpcMessage>(text).map(|message| vec![message])
    };
    parsed.unwrap_or_else(|err| {
        tracing::warn!(error = %err, "an MCP server sent a message that is not JSON-RPC; dropped");
        Vec::new()
    })
}

impl Transport<RoleClient> for HttpTransport {
    type Error = TransportError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), TransportError>> + Send + 'static {
        let (kind, client, headers) = (self.kind, self.client.clone(), self.headers.clone());
        let (url, session, inbox) = (self.post_url.clone(), self.session.clone(), self.inbox_tx.clone());
        async move {
            let body = serde_json::to_string(&item).map_err(|err| error(err.to_string()))?;
            let mut request = client
                .post(&url)
                .headers(headers)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body);
            let known_session = lock(&session).clone();
            if let Some(id) = known_session {
                request = request.header(SESSION_HEADER, id);
            }
            let response = request.send().await.map_err(|err| error(err.to_string()))?;
            let status = response.status();
            if !status.is_success() {
                let detail: String = response.text().await.unwrap_or_default().chars().take(200).collect();
                return Err(error(format!("POST {url}: HTTP {}: {detail}", status.as_u16())));
            }
            if kind == Kind::Sse {
                return Ok(()); // answers come on the SSE stream
            }
            if let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
                *lock(&session) = Some(id.to_string());
            }
            let is_stream = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            if is_stream {
                // The answer streams; read it beside the service loop so the next send is not held up.
                tokio::spawn(forward_sse_messages(response, None, inbox));
                return Ok(());
            }
            let text = response.text().await.map_err(|err| error(err.to_string()))?;
            for message in parse_messages(&text) {
                inbox.send(message).await.map_err(|_| error("the MCP session is closed"))?;
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.inbox.recv()
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
        let known_session = lock(&self.session).take();
        if let Some(id) = known_session {
            let request = self.client.delete(&self.post_url).headers(self.headers.clone()).header(SESSION_HEADER, id);
            let _ = tokio::time::timeout(Duration::from_secs(2), request.send()).await;
        }
        Ok(())
    }
}
