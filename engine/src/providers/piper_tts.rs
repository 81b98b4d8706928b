//! The local Piper voice as a synthesizer: inference on the blocking pool (never on a media thread),
//! audio resampled to 16 kHz.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use confab_models::piper::PiperVoice;
use tokio::sync::mpsc;

use super::tts::{SpeechSynthesizer, TTS_STREAM_CAPACITY, TtsEvent, TtsStream};
use super::{CallMetrics, ProviderError};
use crate::audio::resample;

#[derive(Clone)]
pub struct PiperTts {
    voice: Arc<Mutex<PiperVoice>>,
}

impl PiperTts {
    pub fn load(models_dir: &Path) -> Result<PiperTts, ProviderError> {
        let voice = PiperVoice::load_joe(models_dir, 1).map_err(|e| ProviderError::protocol("piper", e.to_string()))?;
        Ok(PiperTts { voice: Arc::new(Mutex::new(voice)) })
    }

    /// Speaks `text` at 16 kHz, in full (blocking).
    pub fn render(&self, text: &str) -> Result<Vec<f32>, ProviderError> {
        let mut voice =
            self.voice.lock().map_err(|_| ProviderError::protocol("piper", "the voice panicked earlier"))?;
        let audio = voice.synthesize(text).map_err(|e| ProviderError::protocol("piper", e.to_string()))?;
        resample::clip_to_16k(&audio, voice.sample_rate).map_err(|e| ProviderError::protocol("piper", e.to_string()))
    }
}

impl SpeechSynthesizer for PiperTts {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        let this = self.clone();
        let text = text.to_string();
        tokio::spawn(async move {
            let started = Instant::now();
            let rendered = tokio::task::spawn_blocking(move || this.render(&text)).await;
            let result = rendered.unwrap_or_else(|e| Err(ProviderError::protocol("piper", e.to_string())));
            match result {
                Ok(audio) => {
                    let elapsed = started.elapsed();
                    let metrics = CallMetrics { time_to_first: Some(elapsed), duration: elapsed, attempts: 1 };
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
