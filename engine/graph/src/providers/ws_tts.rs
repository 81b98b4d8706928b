//! Streaming speech synthesis over WebSocket: ElevenLabs (`stream-input`) and Cartesia (`/tts/websocket`),
//! both asked for raw 16 kHz 16-bit PCM, which arrives base64-encoded in JSON messages.
//!
//! One connection per sentence (simple and cancellable: dropping the stream closes the socket).

use std::time::Instant;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::tts::{SpeechSynthesizer, TTS_STREAM_CAPACITY, TtsEvent, TtsStream};
use super::websocket::{Socket, connect};
use super::{CallMetrics, CallPolicy, ProviderError};

/// Which protocol, with its connection details.
#[derive(Debug, Clone)]
pub enum WsVoice {
    ElevenLabs { base_url: String, api_key: String, voice_id: String, model_id: String },
    Cartesia { base_url: String, api_key: String, voice_id: String, model_id: String },
}

#[derive(Debug, Clone)]
pub struct WsTts {
    pub voice: WsVoice,
    pub policy: CallPolicy,
}

impl WsTts {
    pub fn elevenlabs(api_key: String, voice_id: String, model_id: String) -> WsTts {
        let base_url = "wss://api.elevenlabs.io".to_string();
        WsTts { voice: WsVoice::ElevenLabs { base_url, api_key, voice_id, model_id }, policy: CallPolicy::default() }
    }

    pub fn cartesia(api_key: String, voice_id: String, model_id: String) -> WsTts {
        let base_url = "wss://api.cartesia.ai".to_string();
        WsTts { voice: WsVoice::Cartesia { base_url, api_key, voice_id, model_id }, policy: CallPolicy::default() }
    }

    fn provider(&self) -> &'static str {
        match self.voice {
            WsVoice::ElevenLabs { .. } => "elevenlabs",
            WsVoice::Cartesia { .. } => "cartesia",
        }
    }

    /// Connects and sends the sentence; returns the socket to read audio from.
    async fn open(&self, text: &str) -> Result<Socket, ProviderError> {
        let provider = self.provider();
        let timeout = self.policy.connect_timeout;
        let send_failed = |e: tokio_tungstenite::tungstenite::Error| {
            ProviderError::network(provider, format!("the connection broke: {e}"))
        };
        match &self.voice {
            WsVoice::ElevenLabs { base_url, api_key, voice_id, model_id } => {
                let url = format!(
                    "{base_url}/v1/text-to-speech/{voice_id}/stream-input?model_id={model_id}&output_format=pcm_16000"
                );
                let mut socket = connect(provider, &url, &[("xi-api-key", api_key.clone())], timeout).await?;
                let init = json!({ "text": " ", "voice_settings": { "stability": 0.5, "similarity_boost": 0.8 } });
                socket.send(Message::text(init.to_string())).await.map_err(send_failed)?;
                let sentence = json!({ "text": format!("{} ", text.trim()), "try_trigger_generation": true });
                socket.send(Message::text(sentence.to_string())).await.map_err(send_failed)?;
                socket.send(Message::text(json!({ "text": "" }).to_string())).await.map_err(send_failed)?;
                Ok(socket)
            }
            WsVoice::Cartesia { base_url, api_key, voice_id, model_id } => {
                let url = format!("{base_url}/tts/websocket?cartesia_version=2024-11-13");
                let mut socket = connect(provider, &url, &[("X-API-Key", api_key.clone())], timeout).await?;
                let request = json!({
                    "model_id": model_id,
                    "transcript": text,
                    "voice": { "mode": "id", "id": voice_id },
                    "output_format": { "container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000 },
                    "context_id": "confab",
                    "language": "en",
                });
                socket.send(Message::text(request.to_string())).await.map_err(send_failed)?;
                Ok(socket)
            }
        }
    }

    /// What one server message means: audio, the end, an error, or nothing.
    fn interpret(&self, message: &Value) -> Result<(Option<Vec<f32>>, bool), ProviderError> {
        let provider = self.provider();
        let (audio, done, error) = match self.voice {
            WsVoice::ElevenLabs { .. } => (
                message["audio"].as_str(),
                message["isFinal"].as_bool() == Some(true),
                message.get("error").or_else(|| message.get("message").filter(|_| message.get("audio").is_none())),
            ),
            WsVoice::Cartesia { .. } => (
                message["data"].as_str().filter(|_| message["type"] == "chunk"),
                message["done"].as_bool() == Some(true),
                message.get("error").filter(|_| message["type"] == "error"),
            ),
        };
        if let Some(error) = error {
            let status = message["status_code"].as_u64().map(|s| s as u16);
            let retryable = status.is_some_and(|s| s == 429 || s >= 500);
            return Err(ProviderError { provider, message: error.to_string(), status, retryable });
        }
        let samples = match audio {
            Some(data) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|e| ProviderError::protocol(provider, format!("bad audio: {e}")))?;
                Some(bytes.chunks_exact(2).map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0).collect())
            }
            None => None,
        };
        Ok((samples, done))
    }

    async fn speak(
        &self,
        text: String,
        tx: &mpsc::Sender<Result<TtsEvent, ProviderError>>,
    ) -> Result<(), ProviderError> {
        let provider = self.provider();
        let started = Instant::now();
        let mut socket = tokio::select! {
            socket = self.open(&text) => socket?,
            _ = tx.closed() => return Ok(()),
        };
        let mut metrics = CallMetrics { attempts: 1, ..CallMetrics::default() };
        loop {
            let message = tokio::select! {
                _ = tx.closed() => { let _ = socket.close(None).await; return Ok(()); }
                message = tokio::time::timeout(self.policy.idle_timeout, socket.next()) => message,
            };
            let text = match message {
                Err(_) => return Err(ProviderError::network(provider, "the audio stream stalled")),
                Ok(None) => {
                    return Err(ProviderError::network(provider, "the connection closed before the end of the audio"));
                }
                Ok(Some(Err(err))) => {
                    return Err(ProviderError::network(provider, format!("the connection broke: {err}")));
                }
                Ok(Some(Ok(Message::Text(text)))) => text,
                Ok(Some(Ok(Message::Close(frame)))) => {
                    let reason = frame.map(|f| format!("{} {}", u16::from(f.code), f.reason)).unwrap_or_default();
                    return Err(ProviderError::network(
                        provider,
                        format!("closed before the end of the audio: {reason}"),
                    ));
                }
                Ok(Some(Ok(_))) => continue,
            };
            let message: Value = serde_json::from_str(&text)
                .map_err(|e| ProviderError::protocol(provider, format!("bad message: {e}")))?;
            let (audio, done) = self.interpret(&message)?;
            if let Some(audio) = audio.filter(|a| !a.is_empty()) {
                metrics.time_to_first.get_or_insert_with(|| started.elapsed());
                if tx.send(Ok(TtsEvent::Audio(audio))).await.is_err() {
                    return Ok(());
                }
            }
            if done {
                metrics.duration = started.elapsed();
                let _ = tx.send(Ok(TtsEvent::Done(metrics))).await;
                let _ = socket.close(None).await;
                return Ok(());
            }
        }
    }
}

impl SpeechSynthesizer for WsTts {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        let this = self.clone();
        let text = text.to_string();
        tokio::spawn(async move {
            if let Err(err) = this.speak(text, &tx).await {
                let _ = tx.send(Err(err)).await;
            }
        });
        rx
    }
}
