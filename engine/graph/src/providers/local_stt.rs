//! The embedded speech-to-text models, chosen by `config.stt.model` when the provider is `local`:
//! `moonshine-base` (the default; ONNX Runtime) or `whisper-tiny.en` (candle).
//!
//! Each model is loaded once per process and models directory and shared by every session; a transcription
//! runs on the blocking pool and holds the model for its duration, so concurrent utterances queue on it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use confab_models::moonshine::MoonshineStt;
use confab_models::whisper::WhisperStt;

use super::ProviderError;
use super::shared_model::{SharedModels, get_or_load};

/// The local models by name, the default first.
pub const MODELS: &[&str] = &["moonshine-base", "whisper-tiny.en"];
/// ONNX Runtime threads per Moonshine call: two where there are two cores. One model serves every call, one
/// utterance at a time (its lock), so a second thread is a second core for the utterance the user waits
/// on: 5.2 s of speech in 0.36 s instead of 0.49 s on two cores (`cargo bench --bench local_models`).
fn moonshine_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

enum Loaded {
    Moonshine(Box<Mutex<MoonshineStt>>),
    Whisper(Box<Mutex<WhisperStt>>),
}

/// A loaded local model, shared.
#[derive(Clone)]
pub struct LocalStt {
    name: &'static str,
    model: Arc<Loaded>,
}

impl LocalStt {
    /// The model named `model` (empty: the default), loaded on first use.
    pub fn load(model: &str, models_dir: &Path) -> Result<LocalStt, ProviderError> {
        let name = match model.trim() {
            "" => MODELS[0],
            wanted => MODELS.iter().copied().find(|m| *m == wanted).ok_or_else(|| {
                ProviderError::protocol(
                    "stt",
                    format!("the local stt model \"{wanted}\" is not in this build ({})", MODELS.join(", ")),
                )
            })?,
        };
        static LOADED: OnceLock<SharedModels<(PathBuf, &'static str), Loaded>> = OnceLock::new();
        let fail = |e: confab_models::ModelError| ProviderError::protocol(name, e.to_string());
        let model = get_or_load(LOADED.get_or_init(Default::default), (models_dir.to_path_buf(), name), || {
            Ok(match name {
                "whisper-tiny.en" => Loaded::Whisper(Box::new(Mutex::new(WhisperStt::load(models_dir).map_err(fail)?))),
                _ => {
                    let mut moonshine = MoonshineStt::load(models_dir, moonshine_threads()).map_err(fail)?;
                    // Its first run allocates ONNX Runtime's buffers (a third slower than later ones): at load,
                    // not in the first call's first turn.
                    moonshine.transcribe(&[0.0; 16_000]).map_err(fail)?;
                    Loaded::Moonshine(Box::new(Mutex::new(moonshine)))
                }
            })
        })?;
        Ok(LocalStt { name, model })
    }

    /// The text of 16 kHz speech.
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        let model = self.model.clone();
        let audio = audio.to_vec();
        let name = self.name;
        let fail = move |message: String| ProviderError::protocol(name, message);
        tokio::task::spawn_blocking(move || {
            let panicked = || fail("the model panicked earlier".into());
            match &*model {
                Loaded::Moonshine(m) => m.lock().map_err(|_| panicked())?.transcribe(&audio),
                Loaded::Whisper(m) => m.lock().map_err(|_| panicked())?.transcribe(&audio),
            }
            .map_err(|e| fail(e.to_string()))
        })
        .await
        .map_err(|e| fail(e.to_string()))?
    }
}
