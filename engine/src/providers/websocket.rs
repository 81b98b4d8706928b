//! WebSocket plumbing shared by the streaming adapters: connecting with headers and a timeout, and
//! turning handshake failures into provider errors with the HTTP status (401 is not retryable).

use std::time::Duration;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::ProviderError;

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens `url` with the given headers.
pub async fn connect(
    provider: &'static str,
    url: &str,
    headers: &[(&'static str, String)],
    timeout: Duration,
) -> Result<Socket, ProviderError> {
    let mut request =
        url.into_client_request().map_err(|e| ProviderError::protocol(provider, format!("bad URL {url}: {e}")))?;
    for (name, value) in headers {
        let value = HeaderValue::from_str(value).map_err(|e| ProviderError::protocol(provider, e.to_string()))?;
        request.headers_mut().insert(*name, value);
    }
    match tokio::time::timeout(timeout, tokio_tungstenite::connect_async(request)).await {
        Err(_) => Err(ProviderError::network(provider, "timed out connecting")),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            let body = response.body().as_ref().map(|b| String::from_utf8_lossy(b).to_string()).unwrap_or_default();
            Err(ProviderError::from_status(provider, status, &body))
        }
        Ok(Err(err)) => Err(ProviderError::network(provider, err.to_string())),
    }
}
