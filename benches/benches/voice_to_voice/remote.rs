//! Local servers speaking the remote providers' wire protocols (OpenAI-compatible transcription, chat
//! completions over SSE, streamed PCM speech; the WebSocket ones in `remote_ws.rs`) with fixed, realistic
//! delays, so that what the engine adds between stages shows: every stage's media-time span minus the delay
//! the server put in it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

/// Transcription: the whole answer after this long.
pub const STT_DELAY: Duration = Duration::from_millis(150);
/// Chat completions: the first token after this long, then one word every `LLM_WORD`.
pub const LLM_FIRST_TOKEN: Duration = Duration::from_millis(250);
pub const LLM_WORD: Duration = Duration::from_millis(20);
/// Speech: the first 100 ms of audio after this long, the rest in 100 ms pieces at twice real time.
pub const TTS_FIRST_AUDIO: Duration = Duration::from_millis(120);
const TTS_PIECE_EVERY: Duration = Duration::from_millis(50);
/// The OpenAI-compatible speech's PCM rate.
const TTS_RATE: usize = 24_000;

/// What the servers answer: the question as its transcript, and a reply naming `answer`.
#[derive(Default)]
pub struct Script {
    pub question: String,
    answer: String,
}

pub type Shared = Arc<Mutex<Script>>;

pub struct ProtocolServers {
    /// The HTTP servers' base URL (`http://…/v1`).
    pub base_url: String,
    /// The WebSocket servers' base URL (`ws://…`).
    pub ws_url: String,
    script: Shared,
}

impl ProtocolServers {
    /// Starts the servers on a thread of their own (their own runtime), on a loopback port.
    pub fn start() -> ProtocolServers {
        let script = Shared::default();
        let state = script.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let websockets = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let ws_url = format!("ws://{}", websockets.local_addr().unwrap());
                tokio::spawn(crate::remote_ws::serve(websockets, state.clone()));
                let app = Router::new()
                    .route("/v1/audio/transcriptions", post(transcribe))
                    .route("/v1/chat/completions", post(chat))
                    .route("/v1/audio/speech", post(speech))
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send((format!("http://{}/v1", listener.local_addr().unwrap()), ws_url)).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let (base_url, ws_url) = rx.recv().unwrap();
        ProtocolServers { base_url, ws_url, script }
    }

    /// The next conversation's question and the word its answer names.
    pub fn script(&self, question: &str, answer: &str) {
        *self.script.lock().unwrap() = Script { question: question.to_string(), answer: answer.to_string() };
    }
}

/// The reply the chat server streams: its first clause ends at the comma (6 words).
pub fn reply(answer: &str) -> String {
    format!("I believe the answer is {answer}, as far as I know.")
}

async fn transcribe(State(script): State<Shared>) -> Response {
    tokio::time::sleep(STT_DELAY).await;
    let text = script.lock().unwrap().question.clone();
    axum::Json(json!({ "text": text })).into_response()
}

async fn chat(State(script): State<Shared>) -> Response {
    let text = reply(&script.lock().unwrap().answer);
    let words: Vec<String> = text.split_inclusive(' ').map(str::to_string).collect();
    let stream = futures_util::stream::unfold((0usize, words), |(index, words)| async move {
        let event = if index < words.len() {
            tokio::time::sleep(if index == 0 { LLM_FIRST_TOKEN } else { LLM_WORD }).await;
            json!({ "choices": [{ "index": 0, "delta": { "content": words[index] }, "finish_reason": null }] })
                .to_string()
        } else if index == words.len() {
            "[DONE]".to_string()
        } else {
            return None;
        };
        Some((Ok::<_, std::io::Error>(format!("data: {event}\n\n")), (index + 1, words)))
    });
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

/// 16-bit PCM at `rate`, in 100 ms pieces: a voiced tone about as long as `text` would take to say.
pub fn tone_pieces(text: &str, rate: usize) -> Vec<Vec<u8>> {
    let samples = (text.len() as f64 * 0.065 * rate as f64) as usize;
    let tone: Vec<i16> = (0..samples)
        .map(|n| ((n as f64 / rate as f64 * 180.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16)
        .collect();
    tone.chunks(rate / 10).map(|chunk| chunk.iter().flat_map(|s| s.to_le_bytes()).collect()).collect()
}

/// How long before speech piece `index` is sent: [`TTS_FIRST_AUDIO`] for the first, [`TTS_PIECE_EVERY`] after.
pub fn piece_delay(index: usize) -> Duration {
    if index == 0 { TTS_FIRST_AUDIO } else { TTS_PIECE_EVERY }
}

/// 24 kHz 16-bit PCM, streamed, each piece after its [`piece_delay`].
async fn speech(body: String) -> Response {
    let text = serde_json::from_str::<serde_json::Value>(&body).unwrap()["input"].as_str().unwrap_or("").to_string();
    let pieces = tone_pieces(&text, TTS_RATE);
    let stream = futures_util::stream::unfold((0usize, pieces), |(index, pieces)| async move {
        let piece = pieces.get(index)?.clone();
        tokio::time::sleep(piece_delay(index)).await;
        Some((Ok::<_, std::io::Error>(piece), (index + 1, pieces)))
    });
    Response::builder().header("content-type", "audio/pcm").body(Body::from_stream(stream)).unwrap()
}
