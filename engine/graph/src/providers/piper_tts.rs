//! The local Piper voice as a synthesizer: inference on the blocking pool (never on a media thread),
//! audio resampled to 16 kHz and streamed piece by piece as the voice decodes it (the first piece of a
//! sentence is out after a fraction of the whole's time; a dropped stream stops the synthesis). Voices are shared by every call of the process (loading one takes over a
//! second, which each call used to pay before it was answered): one is loaded at the first call (on two
//! threads), and more (on one each), up to one per core, only while every loaded voice is busy speaking.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use confab_models::busy::Reserved;
use confab_models::piper::PiperVoice;
use tokio::sync::mpsc;

use super::shared_model::{SharedModels, get_or_load};
use super::tts::{SpeechSynthesizer, TTS_STREAM_CAPACITY, TtsEvent, TtsStream};
use super::{CallMetrics, ProviderError};
use crate::audio::resample::{self, PieceResampler};

/// Threads of the first voice (at most one per core). A reply's first clause is what the user waits for,
/// and a lone call's synthesis has the cores to itself: "The capital of France is Paris." takes 90 ms on
/// two threads, 150 ms on one. The voices loaded for calls speaking at the same time take one thread each.
const FIRST_VOICE_THREADS: usize = 2;

#[derive(Clone)]
pub struct PiperTts {
    voices: Arc<VoicePool>,
}

/// The process's Piper voices of one models directory.
struct VoicePool {
    models_dir: PathBuf,
    voices: Mutex<Vec<Arc<Mutex<PiperVoice>>>>,
    /// At most this many voices (one per core).
    limit: usize,
    /// The first voice's threads.
    first_threads: usize,
}

fn piper_error(err: impl std::fmt::Display) -> ProviderError {
    ProviderError::protocol("piper", err.to_string())
}

impl VoicePool {
    fn load(models_dir: &Path) -> Result<VoicePool, ProviderError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let first_threads = cores.clamp(1, FIRST_VOICE_THREADS);
        let first = PiperVoice::load_joe(models_dir, first_threads).map_err(piper_error)?;
        let limit = cores.clamp(1, 4);
        Ok(VoicePool {
            models_dir: models_dir.to_path_buf(),
            voices: Mutex::new(vec![Arc::new(Mutex::new(first))]),
            limit,
            first_threads,
        })
    }

    /// A free voice, a new one when all are busy and the pool may grow, else the first (waiting for it).
    fn with_voice<T>(&self, speak: impl FnOnce(&mut PiperVoice) -> T) -> Result<T, ProviderError> {
        let voices: Vec<_> = self.voices.lock().map_err(piper_error)?.clone();
        for voice in &voices {
            if let Ok(mut free) = voice.try_lock() {
                return Ok(speak(&mut free));
            }
        }
        let voice = if voices.len() < self.limit {
            let voice = Arc::new(Mutex::new(PiperVoice::load_joe(&self.models_dir, 1).map_err(piper_error)?));
            self.voices.lock().map_err(piper_error)?.push(voice.clone());
            voice
        } else {
            voices[0].clone()
        };
        let mut voice = voice.lock().map_err(|_| piper_error("the voice panicked earlier"))?;
        Ok(speak(&mut voice))
    }
}

impl PiperTts {
    pub fn load(models_dir: &Path) -> Result<PiperTts, ProviderError> {
        static LOADED: OnceLock<SharedModels<PathBuf, VoicePool>> = OnceLock::new();
        let voices = get_or_load(LOADED.get_or_init(Default::default), models_dir.to_path_buf(), || {
            VoicePool::load(models_dir)
        })?;
        Ok(PiperTts { voices })
    }

    /// Speaks `text` at 16 kHz, in full (blocking): the whole clip resampled at once.
    pub fn render(&self, text: &str) -> Result<Vec<f32>, ProviderError> {
        self.voices.with_voice(|voice| {
            let audio = voice.synthesize(text).map_err(piper_error)?;
            resample::clip_to_16k(&audio, voice.sample_rate).map_err(piper_error)
        })?
    }

    /// Speaks `text` at 16 kHz, handing `on_audio` each piece as it is made (blocking); stops when
    /// `on_audio` returns false.
    pub fn speak(&self, text: &str, on_audio: &mut dyn FnMut(Vec<f32>) -> bool) -> Result<(), ProviderError> {
        self.voices.with_voice(|voice| {
            let mut resampler = PieceResampler::new(voice.sample_rate).map_err(piper_error)?;
            let (mut going, mut failed) = (true, None);
            voice
                .speak(text, &mut |piece| {
                    match resampler.push(piece) {
                        Ok(audio) => going = audio.is_empty() || on_audio(audio),
                        Err(err) => (going, failed) = (false, Some(err)),
                    }
                    going
                })
                .map_err(piper_error)?;
            if let Some(err) = failed {
                return Err(piper_error(err));
            }
            let rest = resampler.finish().map_err(piper_error)?;
            if going && !rest.is_empty() {
                on_audio(rest);
            }
            Ok(())
        })?
    }
}

impl SpeechSynthesizer for PiperTts {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        let this = self.clone();
        let text = text.to_string();
        // Held from now: the language model starts no batch while the sentence waits for a thread.
        let reserved = Reserved::new(self.voices.first_threads);
        tokio::spawn(async move {
            let started = Instant::now();
            let pieces = tx.clone();
            let spoken = tokio::task::spawn_blocking(move || {
                let mut first = None;
                drop(reserved);
                this.speak(&text, &mut |audio| {
                    first.get_or_insert_with(|| started.elapsed());
                    pieces.blocking_send(Ok(TtsEvent::Audio(audio))).is_ok()
                })
                .map(|()| first)
            })
            .await;
            match spoken.unwrap_or_else(|e| Err(ProviderError::protocol("piper", e.to_string()))) {
                Ok(first) => {
                    let elapsed = started.elapsed();
                    let first = first.unwrap_or(elapsed);
                    tracing::debug!(
                        first_ms = first.as_millis() as u64,
                        took_ms = elapsed.as_millis() as u64,
                        "piper spoke"
                    );
                    let metrics = CallMetrics { time_to_first: Some(first), duration: elapsed, attempts: 1 };
                    let _ = tx.send(Ok(TtsEvent::Done(metrics))).await;
                }
                Err(err) => {
                    let _ = tx.send(Err(err)).await;
                }
            }
        });
        rx
    }
}
