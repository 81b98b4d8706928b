//! The speech-synthesis interface and the local espeak-ng voice.
//!
//! A synthesizer turns one sentence into a stream of 16 kHz mono audio chunks; dropping the receiver
//! cancels it.

use std::io::Cursor;
use std::time::Instant;

use tokio::sync::mpsc;

use super::{CallMetrics, ProviderError};
use crate::audio::resample;

/// Chunks buffered between a synthesizer and the engine. Full: the synthesizer waits.
pub const TTS_STREAM_CAPACITY: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub enum TtsEvent {
    /// More of the sentence's audio, 16 kHz mono.
    Audio(Vec<f32>),
    Done(CallMetrics),
}

pub type TtsStream = mpsc::Receiver<Result<TtsEvent, ProviderError>>;

pub trait SpeechSynthesizer: Send + Sync {
    fn synthesize(&self, text: &str) -> TtsStream;
}

/// The espeak-ng program as a voice (`model_id: "espeak-ng"`); `voice` is an espeak-ng voice name.
#[derive(Debug, Clone)]
pub struct EspeakVoice {
    pub voice: String,
    /// Words per minute.
    pub speed: u32,
}

impl Default for EspeakVoice {
    fn default() -> Self {
        EspeakVoice { voice: "en-us".into(), speed: 165 }
    }
}

impl EspeakVoice {
    /// Synthesizes `text` to 16 kHz mono, in full.
    pub async fn render(&self, text: &str) -> Result<Vec<f32>, ProviderError> {
        let output = tokio::process::Command::new("espeak-ng")
            .args(["-v", &self.voice, "-s", &self.speed.to_string(), "--stdout", "--"])
            .arg(text)
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|err| {
                ProviderError::protocol(
                    "espeak-ng",
                    format!("cannot run espeak-ng ({err}); install it (scripts/setup.sh)"),
                )
            })?;
        if !output.status.success() {
            return Err(ProviderError::protocol(
                "espeak-ng",
                String::from_utf8_lossy(&output.stderr).trim().to_string(),
            ));
        }
        decode_wav(&output.stdout).map_err(|message| ProviderError::protocol("espeak-ng", message))
    }
}

/// A WAV in memory (espeak-ng's output, whose header has no length when streamed) to 16 kHz mono.
pub fn decode_wav(bytes: &[u8]) -> Result<Vec<f32>, String> {
    // espeak-ng writes 0xFFFFFFFF as the data length on stdout; hound wants the real one.
    let mut fixed = bytes.to_vec();
    if let Some(data_at) = fixed.windows(4).position(|w| w == b"data") {
        let length = (fixed.len() - data_at - 8) as u32;
        fixed[data_at + 4..data_at + 8].copy_from_slice(&length.to_le_bytes());
        let riff = (fixed.len() - 8) as u32;
        fixed[4..8].copy_from_slice(&riff.to_le_bytes());
    }
    let mut reader = hound::WavReader::new(Cursor::new(fixed)).map_err(|e| e.to_string())?;
    let spec = reader.spec();
    let samples: Vec<f32> = reader
        .samples::<i16>()
        .map(|s| s.map(|v| f32::from(v) / 32_768.0))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let channels = usize::from(spec.channels.max(1));
    let mut mono = vec![0.0; samples.len() / channels];
    crate::audio::pcm::downmix_f32(&samples, channels, &mut mono);
    resample::clip_to_16k(&mono, spec.sample_rate).map_err(|e| e.to_string())
}

impl SpeechSynthesizer for EspeakVoice {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        let voice = self.clone();
        let text = text.to_string();
        tokio::spawn(async move {
            let started = Instant::now();
            let result = tokio::select! {
                result = voice.render(&text) => result,
                _ = tx.closed() => return,
            };
            match result {
                Ok(audio) => {
                    let metrics = CallMetrics {
                        time_to_first: Some(started.elapsed()),
                        duration: started.elapsed(),
                        attempts: 1,
                    };
                    if tx.send(Ok(TtsEvent::Audio(audio))).await.is_ok() {
                        let _ = tx.send(Ok(TtsEvent::Done(metrics))).await;
                    }
                }
                Err(err) => {
                    let _ = tx.send(Err(err)).await;
                }
            }
        });
        rx
    }
}
