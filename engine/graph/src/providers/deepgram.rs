//! Deepgram live streaming speech-to-text over WebSocket: 16 kHz linear16 audio as binary frames,
//! `Results` messages back (interim with `is_final: false`, then final), `{"type": "CloseStream"}` to
//! flush the last results, `{"type": "KeepAlive"}` while idle.

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::websocket::connect;
use super::{CallPolicy, ProviderError};

const PROVIDER: &str = "deepgram";
/// Audio chunks waiting to be sent. Full: the engine waits.
pub const AUDIO_QUEUE: usize = 64;
/// Results waiting for the engine. Full: the adapter waits.
pub const RESULT_QUEUE: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub enum SttEvent {
    /// A partial transcript of the speech so far (may change).
    Interim(String),
    /// A final transcript of a stretch of speech; `speech_final` when Deepgram saw the speaker pause.
    Final { text: String, speech_final: bool },
}

#[derive(Debug, Clone)]
pub struct DeepgramStt {
    /// `wss://api.deepgram.com/v1/listen` unless overridden (tests, proxies).
    pub url: String,
    pub api_key: String,
    pub model: String,
    pub policy: CallPolicy,
}

/// A live transcription: push audio in, read results out; dropping `audio` finishes it.
pub struct SttSession {
    pub audio: mpsc::Sender<Vec<f32>>,
    pub results: mpsc::Receiver<Result<SttEvent, ProviderError>>,
}

fn parse_results(message: &Value) -> Option<SttEvent> {
    if message["type"] != "Results" {
        return None;
    }
    let text = message["channel"]["alternatives"][0]["transcript"].as_str().unwrap_or("").trim().to_string();
    if text.is_empty() {
        return None;
    }
    Some(if message["is_final"].as_bool() == Some(true) {
        SttEvent::Final { text, speech_final: message["speech_final"].as_bool() == Some(true) }
    } else {
        SttEvent::Interim(text)
    })
}

impl DeepgramStt {
    pub fn new(api_key: String, model: String) -> DeepgramStt {
        DeepgramStt { url: "wss://api.deepgram.com/v1/listen".into(), api_key, model, policy: CallPolicy::default() }
    }

    /// Opens a live transcription of 16 kHz mono audio.
    pub async fn start(&self) -> Result<SttSession, ProviderError> {
        let url = format!(
            "{}?model={}&encoding=linear16&sample_rate=16000&channels=1&interim_results=true&punctuate=true",
            self.url, self.model
        );
        let socket = connect(
            PROVIDER,
            &url,
            &[("Authorization", format!("Token {}", self.api_key))],
            self.policy.connect_timeout,
        )
        .await?;
        let (mut sink, mut stream) = socket.split();
        let (audio_tx, mut audio_rx) = mpsc::channel::<Vec<f32>>(AUDIO_QUEUE);
        let (results_tx, results) = mpsc::channel(RESULT_QUEUE);
        let idle = self.policy.idle_timeout;
        tokio::spawn(async move {
            let mut sending = true;
            loop {
                tokio::select! {
                    audio = audio_rx.recv(), if sending => match audio {
                        Some(samples) => {
                            let bytes: Vec<u8> = samples.iter().flat_map(|s| crate::audio::pcm::to_i16(*s).to_le_bytes()).collect();
                            if sink.send(Message::binary(bytes)).await.is_err() { sending = false; }
                        }
                        None => {
                            let _ = sink.send(Message::text(r#"{"type":"CloseStream"}"#)).await;
                            sending = false;
                        }
                    },
                    message = tokio::time::timeout(idle, stream.next()) => {
                        let outcome = match message {
                            Err(_) if sending => { let _ = sink.send(Message::text(r#"{"type":"KeepAlive"}"#)).await; continue; }
                            Err(_) => Err(ProviderError::network(PROVIDER, "no results before the idle timeout")),
                            Ok(None) => return,
                            Ok(Some(Err(err))) => Err(ProviderError::network(PROVIDER, err.to_string())),
                            Ok(Some(Ok(Message::Text(text)))) => match serde_json::from_str::<Value>(&text) {
                                Ok(value) => match parse_results(&value) {
                                    Some(event) => Ok(event),
                                    None => continue,
                                },
                                Err(err) => Err(ProviderError::protocol(PROVIDER, format!("bad message: {err}"))),
                            },
                            Ok(Some(Ok(Message::Close(frame)))) => {
                                match frame.filter(|f| u16::from(f.code) != 1000) {
                                    Some(f) => Err(ProviderError::protocol(PROVIDER, format!("closed: {} {}", u16::from(f.code), f.reason))),
                                    None => return,
                                }
                            }
                            Ok(Some(Ok(_))) => continue,
                        };
                        let failed = outcome.is_err();
                        if results_tx.send(outcome).await.is_err() || failed {
                            return; // cancelled, or the stream is over
                        }
                    }
                }
            }
        });
        Ok(SttSession { audio: audio_tx, results })
    }

    /// Transcribes a whole utterance: streams it in 20 ms frames, closes, and joins the final results.
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        let SttSession { audio: tx, mut results } = self.start().await?;
        for frame in audio.chunks(320) {
            tx.send(frame.to_vec()).await.map_err(|_| ProviderError::network(PROVIDER, "the connection closed"))?;
        }
        drop(tx);
        let mut finals = Vec::new();
        while let Some(result) = results.recv().await {
            if let SttEvent::Final { text, .. } = result? {
                finals.push(text);
            }
        }
        Ok(finals.join(" "))
    }
}
