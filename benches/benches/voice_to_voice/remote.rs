//! Local servers speaking the remote providers' wire protocols (OpenAI-compatible transcription, chat
//! completions over SSE, streamed PCM speech) with fixed, realistic delays, so that what the engine adds
//! between stages shows: every stage's media-time span minus the delay the server put in it.

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
const TTS_RATE: usize = 24_000;

/// What the servers answer: the question as its transcript, and a reply naming `answer`.
#[derive(Default)]
struct Script {
    question: String,
    answer: String,
}

type Shared = Arc<Mutex<Script>>;

pub struct ProtocolServers {
    pub base_url: String,
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
                let app = Router::new()
                    .route("/v1/audio/transcriptions", post(transcribe))
                    .route("/v1/chat/completions", post(chat))
                    .route("/v1/audio/speech", post(speech))
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(format!("http://{}/v1", listener.local_addr().unwrap())).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        ProtocolServers { base_url: rx.recv().unwrap(), script }
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

/// 24 kHz 16-bit PCM: a voiced tone about as long as the text would take to say.
async fn speech(body: String) -> Response {
    let text = serde_json::from_str::<serde_json::Value>(&body).unwrap()["input"].as_str().unwrap_or("").to_string();
    let samples = (text.len() as f64 * 0.065 * TTS_RATE as f64) as usize;
    let piece = TTS_RATE / 10;
    let pieces: Vec<Vec<u8>> = (0..samples)
        .map(|n| {
            let t = n as f64 / TTS_RATE as f64;
            ((t * 180.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16
        })
        .collect::<Vec<i16>>()
        .chunks(piece)
        .map(|chunk| chunk.iter().flat_map(|s| s.to_le_bytes()).collect())
        .collect();
    let stream = futures_util::stream::unfold((0usize, pieces), |(index, pieces)| async move {
        let delay = if index == 0 { TTS_FIRST_AUDIO } else { Duration::from_millis(50) };
        let piece = pieces.get(index)?.clone();
        tokio::time::sleep(delay).await;
        Some((Ok::<_, std::io::Error>(piece), (index + 1, pieces)))
    });
    Response::builder().header("content-type", "audio/pcm").body(Body::from_stream(stream)).unwrap()
}
