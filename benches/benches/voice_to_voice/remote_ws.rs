//! The WebSocket providers' wire protocols, for `--remote-stt=deepgram` and `--remote-tts=elevenlabs|cartesia`,
//! with the same delays as the HTTP servers (`remote.rs`): Deepgram live transcription (binary PCM in; at
//! `CloseStream`, one final `Results` after [`STT_DELAY`]), ElevenLabs `stream-input` (text messages up to the
//! empty one; base64 PCM `audio` messages, then `isFinal`) and Cartesia (one request; `chunk` messages, then
//! `done`). One listener serves the three, told apart by the request's path.

use std::sync::{Arc, Mutex};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

use crate::remote::{STT_DELAY, Shared, piece_delay, tone_pieces};

/// The voices' PCM rate (`output_format` pcm_16000 / `sample_rate` 16000).
const RATE: usize = 16_000;

type Socket = WebSocketStream<TcpStream>;

/// Serves every connection `listener` accepts.
#[allow(clippy::result_large_err)] // the handshake callback's error type is tungstenite's HTTP response
pub async fn serve(listener: TcpListener, script: Shared) {
    while let Ok((stream, _)) = listener.accept().await {
        let script = script.clone();
        tokio::spawn(async move {
            let path = Arc::new(Mutex::new(String::new()));
            let seen = path.clone();
            let callback = move |request: &Request, response: Response| {
                *seen.lock().unwrap() = request.uri().path().to_string();
                Ok(response)
            };
            let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else { return };
            let path = path.lock().unwrap().clone();
            if path.ends_with("/listen") {
                deepgram(socket, script).await;
            } else if path.ends_with("/stream-input") {
                elevenlabs(socket).await;
            } else {
                cartesia(socket).await;
            }
        });
    }
}

/// Takes the audio until `CloseStream`, then gives the question as the final result and closes.
async fn deepgram(mut socket: Socket, script: Shared) {
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Text(text) = message
            && text.contains("CloseStream")
        {
            tokio::time::sleep(STT_DELAY).await;
            let transcript = script.lock().unwrap().question.clone();
            let result = json!({
                "type": "Results", "is_final": true, "speech_final": true,
                "channel": { "alternatives": [{ "transcript": transcript, "confidence": 0.98 }] },
            });
            let _ = socket.send(Message::text(result.to_string())).await;
            let _ = socket.close(None).await;
            return;
        }
    }
}

/// Reads the text up to the empty message that ends it, then speaks it.
async fn elevenlabs(mut socket: Socket) {
    let mut text = String::new();
    while let Some(Ok(Message::Text(message))) = socket.next().await {
        let piece = serde_json::from_str::<Value>(&message).ok().and_then(|m| m["text"].as_str().map(str::to_string));
        match piece {
            Some(piece) if piece.is_empty() => break,
            Some(piece) => text.push_str(&piece),
            None => return,
        }
    }
    let audio = |data: String| json!({ "audio": data, "isFinal": false, "normalizedAlignment": null });
    speak(&mut socket, text.trim(), audio, json!({ "isFinal": true })).await;
}

/// Reads the one request, then speaks its transcript.
async fn cartesia(mut socket: Socket) {
    let Some(Ok(Message::Text(request))) = socket.next().await else { return };
    let Ok(request) = serde_json::from_str::<Value>(&request) else { return };
    let text = request["transcript"].as_str().unwrap_or_default().to_string();
    let chunk = |data: String| json!({ "type": "chunk", "data": data, "done": false, "status_code": 206, "context_id": "confab" });
    let done = json!({ "type": "done", "done": true, "status_code": 200, "context_id": "confab" });
    speak(&mut socket, &text, chunk, done).await;
}

/// The tone for `text` in base64 pieces, each wrapped by `audio` and sent after its `piece_delay`; then `end`.
async fn speak(socket: &mut Socket, text: &str, audio: impl Fn(String) -> Value, end: Value) {
    for (index, piece) in tone_pieces(text, RATE).into_iter().enumerate() {
        tokio::time::sleep(piece_delay(index)).await;
        let data = base64::engine::general_purpose::STANDARD.encode(piece);
        if socket.send(Message::text(audio(data).to_string())).await.is_err() {
            return;
        }
    }
    let _ = socket.send(Message::text(end.to_string())).await;
    let _ = socket.close(None).await;
}
