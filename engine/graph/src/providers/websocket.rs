//! WebSocket plumbing shared by the streaming adapters: connecting with headers, a timeout and Nagle's
//! algorithm off, and turning handshake failures into provider errors with the HTTP status (401 is not
//! retryable).

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
    // Without TCP_NODELAY a message written right after another (ElevenLabs' opening " ", the sentence, the
    // closing "") waits for the server's delayed acknowledgement: ~40 ms before each sentence is even sent.
    let connecting = tokio_tungstenite::connect_async_with_config(request, None, true);
    match tokio::time::timeout(timeout, connecting).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The adapters' sockets send each message at once (Nagle's algorithm off): ElevenLabs' three opening
    /// messages otherwise waited ~40 ms for the server's acknowledgement (`voice_to_voice --remote-tts=elevenlabs`:
    /// first clause → first audio 44 ms over the server's delay, 3 ms with it off).
    #[tokio::test]
    async fn connections_send_small_messages_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            tokio_tungstenite::accept_async(stream).await.unwrap()
        });
        let socket = connect("test", &url, &[], Duration::from_secs(5)).await.unwrap();
        let MaybeTlsStream::Plain(stream) = socket.get_ref() else { panic!("a plain TCP connection") };
        assert!(stream.nodelay().unwrap(), "TCP_NODELAY is set on the adapter's connection");
        drop(server.await.unwrap());
    }
}
