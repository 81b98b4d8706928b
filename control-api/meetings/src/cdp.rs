//! The few Chrome DevTools Protocol commands the meeting bot needs, over the page target's WebSocket:
//! install scripts before a page's own, navigate, evaluate (awaiting promises, values returned as JSON).
//! Strictly one command at a time; events the browser sends meanwhile are skipped. (A full CDP crate
//! generates the whole protocol — minutes of build on two cores — for these four methods.)

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    #[error("the browser connection failed: {0}")]
    Connection(String),
    #[error("{0} got no answer within {1:?}")]
    Timeout(&'static str, Duration),
    #[error("{0} failed: {1}")]
    Command(&'static str, String),
    #[error("the page threw: {0}")]
    Thrown(String),
}

pub struct Page {
    socket: Socket,
    next_id: u64,
}

impl Page {
    /// Connects to a page target's `webSocketDebuggerUrl`.
    pub async fn connect(ws_url: &str) -> Result<Page, CdpError> {
        let (socket, _) =
            tokio_tungstenite::connect_async(ws_url).await.map_err(|e| CdpError::Connection(e.to_string()))?;
        Ok(Page { socket, next_id: 1 })
    }

    /// Sends `method` and returns its result.
    pub async fn command(&mut self, method: &'static str, params: Value, within: Duration) -> Result<Value, CdpError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "id": id, "method": method, "params": params }).to_string();
        self.socket.send(Message::Text(request.into())).await.map_err(|e| CdpError::Connection(e.to_string()))?;
        let reply = async {
            while let Some(message) = self.socket.next().await {
                let text = match message {
                    Ok(Message::Text(text)) => text,
                    Ok(_) => continue,
                    Err(err) => return Err(CdpError::Connection(err.to_string())),
                };
                let reply: Value = serde_json::from_str(&text).map_err(|e| CdpError::Connection(e.to_string()))?;
                if reply["id"] == id {
                    return Ok(reply);
                }
            }
            Err(CdpError::Connection("closed".into()))
        };
        let reply = tokio::time::timeout(within, reply).await.map_err(|_| CdpError::Timeout(method, within))??;
        match reply.get("error") {
            Some(error) => Err(CdpError::Command(method, error.to_string())),
            None => Ok(reply["result"].clone()),
        }
    }

    /// Runs `source` in every document this page loads from now on, before the document's own scripts.
    pub async fn add_script_on_new_document(&mut self, source: &str) -> Result<(), CdpError> {
        self.command("Page.addScriptToEvaluateOnNewDocument", json!({ "source": source }), Duration::from_secs(10))
            .await
            .map(|_| ())
    }

    /// Navigates to `url`; an error when the page cannot be loaded (DNS, refused connection, TLS). A
    /// network change while loading (`net::ERR_NETWORK_CHANGED`: an interface or address coming up as the
    /// browser starts) is tried again, up to three times.
    pub async fn navigate(&mut self, url: &str, within: Duration) -> Result<(), CdpError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let result = self.command("Page.navigate", json!({ "url": url }), within).await?;
            match result.get("errorText").and_then(Value::as_str) {
                Some(error) if error.contains("ERR_NETWORK_CHANGED") && attempts < 4 => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Some(error) if !error.is_empty() => return Err(CdpError::Command("Page.navigate", error.to_string())),
                _ => return Ok(()),
            }
        }
    }

    /// Evaluates `expression` (awaiting a promise) and returns its value.
    pub async fn eval(&mut self, expression: &str, within: Duration) -> Result<Value, CdpError> {
        let params = json!({ "expression": expression, "returnByValue": true, "awaitPromise": true,
            "userGesture": true });
        let result = self.command("Runtime.evaluate", params, within).await?;
        if let Some(details) = result.get("exceptionDetails") {
            let text = details["exception"]["description"].as_str().or(details["text"].as_str()).unwrap_or("?");
            return Err(CdpError::Thrown(text.to_string()));
        }
        Ok(result["result"]["value"].clone())
    }
}
