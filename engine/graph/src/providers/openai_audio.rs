//! OpenAI-compatible speech endpoints: `POST /audio/speech` (TTS, streamed raw 24 kHz 16-bit PCM) and
//! `POST /audio/transcriptions` (STT, a WAV upload answered with `{"text": …}`).

use std::time::Instant;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::tts::{SpeechSynthesizer, TTS_STREAM_CAPACITY, TtsEvent, TtsStream};
use super::{CallMetrics, CallPolicy, ProviderError};
use crate::audio::pcm_ingress::PcmIngress;

/// `response_format: "pcm"` is 24 kHz, 16-bit, mono, little-endian.
pub const OPENAI_PCM_RATE: u32 = 24_000;

#[derive(Debug, Clone)]
pub struct OpenAiAudio {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub voice: String,
    pub policy: CallPolicy,
    client: reqwest::Client,
}

impl OpenAiAudio {
    pub fn new(
        base_url: impl Into<String>,
        api_key: Option<String>,
        model: impl Into<String>,
        voice: impl Into<String>,
        policy: CallPolicy,
    ) -> OpenAiAudio {
        let client =
            reqwest::Client::builder().connect_timeout(policy.connect_timeout).build().expect("an HTTP client");
        OpenAiAudio {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key,
            model: model.into(),
            voice: voice.into(),
            policy,
            client,
        }
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.client.post(format!("{}{path}", self.base_url));
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Transcribes 16 kHz mono audio; answers the text.
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        let wav = encode_wav(audio);
        let started = std::time::Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let part = reqwest::multipart::Part::bytes(wav.clone())
                .file_name("audio.wav")
                .mime_str("audio/wav")
                .expect("a valid MIME type");
            let form = reqwest::multipart::Form::new()
                .text("model", self.model.clone())
                .text("response_format", "json")
                .part("file", part);
            let error = match tokio::time::timeout(
                self.policy.first_byte_timeout,
                self.post("/audio/transcriptions").multipart(form).send(),
            )
            .await
            {
                Err(_) => ProviderError::network("openai-stt", "timed out"),
                Ok(Err(err)) => ProviderError::network("openai-stt", err.to_string()),
                Ok(Ok(response)) if response.status().is_success() => {
                    let body: serde_json::Value =
                        response.json().await.map_err(|e| ProviderError::protocol("openai-stt", e.to_string()))?;
                    return body["text"]
                        .as_str()
                        .map(|t| t.trim().to_string())
                        .ok_or_else(|| ProviderError::protocol("openai-stt", "no text in the answer"));
                }
                Ok(Ok(response)) => {
                    let status = response.status().as_u16();
                    ProviderError::from_status("openai-stt", status, &response.text().await.unwrap_or_default())
                }
            };
            let backoff = self.policy.backoff * 2u32.pow(attempts - 1);
            if !self.policy.retry_after(&error, attempts, started.elapsed(), backoff) {
                return Err(error);
            }
            tokio::time::sleep(backoff).await;
        }
    }

    async fn speak(
        &self,
        text: String,
        tx: &mpsc::Sender<Result<TtsEvent, ProviderError>>,
    ) -> Result<(), ProviderError> {
        let started = Instant::now();
        let body =
            serde_json::json!({ "model": self.model, "input": text, "voice": self.voice, "response_format": "pcm" });
        let sent = tokio::select! {
            // Let go of (close) a request whose audio is no longer wanted, even before its headers.
            _ = tx.closed() => return Ok(()),
            sent = tokio::time::timeout(self.policy.first_byte_timeout, self.post("/audio/speech").json(&body).send()) => sent,
        };
        let response = match sent {
            Err(_) => return Err(ProviderError::network("openai-tts", "timed out")),
            Ok(Err(err)) => return Err(ProviderError::network("openai-tts", err.to_string())),
            Ok(Ok(response)) if response.status().is_success() => response,
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                return Err(ProviderError::from_status(
                    "openai-tts",
                    status,
                    &response.text().await.unwrap_or_default(),
                ));
            }
        };
        let mut ingress =
            PcmIngress::new(OPENAI_PCM_RATE, 1).map_err(|e| ProviderError::protocol("openai-tts", e.to_string()))?;
        let mut stream = response.bytes_stream();
        let mut odd_byte: Option<u8> = None;
        let mut metrics = CallMetrics { attempts: 1, ..CallMetrics::default() };
        loop {
            let chunk = tokio::select! {
                _ = tx.closed() => return Ok(()),
                chunk = tokio::time::timeout(self.policy.idle_timeout, stream.next()) => chunk,
            };
            let bytes = match chunk {
                Err(_) => {
                    return Err(ProviderError::network("openai-tts", "the audio stream stalled"));
                }
                Ok(None) => break,
                Ok(Some(Err(err))) => {
                    return Err(ProviderError::network("openai-tts", format!("the audio stream broke: {err}")));
                }
                Ok(Some(Ok(bytes))) => bytes,
            };
            metrics.time_to_first.get_or_insert_with(|| started.elapsed());
            let mut raw: Vec<u8> = odd_byte.take().into_iter().chain(bytes.iter().copied()).collect();
            if raw.len() % 2 == 1 {
                odd_byte = raw.pop();
            }
            let samples: Vec<i16> = raw.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
            let audio =
                ingress.push_i16(&samples).map_err(|e| ProviderError::protocol("openai-tts", e.to_string()))?.to_vec();
            if !audio.is_empty() && tx.send(Ok(TtsEvent::Audio(audio))).await.is_err() {
                return Ok(());
            }
        }
        metrics.duration = started.elapsed();
        let _ = tx.send(Ok(TtsEvent::Done(metrics))).await;
        Ok(())
    }
}

impl SpeechSynthesizer for OpenAiAudio {
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

/// 16 kHz mono floats as a 16-bit WAV in memory.
pub fn encode_wav(audio: &[f32]) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: crate::time::SAMPLE_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut bytes = std::io::Cursor::new(Vec::with_capacity(44 + audio.len() * 2));
    {
        let mut writer = hound::WavWriter::new(&mut bytes, spec).expect("writing to memory");
        for &sample in audio {
            writer.write_sample(crate::audio::pcm::to_i16(sample)).expect("writing to memory");
        }
        writer.finalize().expect("writing to memory");
    }
    bytes.into_inner()
}
