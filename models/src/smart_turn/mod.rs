//! Smart Turn v3.2: the end-of-turn model. Given the user's audio up to the end of their speech (the last
//! 8 s, zero-padded at the front when shorter), it gives the probability that the user has finished.
//! It runs the copy `prepare` makes at fetch time (each GELU one operator: ~10% cheaper, same results).

pub mod prepare;

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;

use crate::busy::Busy;
use crate::mel::{FRAMES, LogMel, N_MELS, SAMPLES};
use crate::paths::SMART_TURN_PREPARED;
use crate::{ModelError, onnx};

/// Probability above which the user is taken to be done.
pub const DONE_THRESHOLD: f32 = 0.5;

pub struct SmartTurn {
    session: Session,
    mel: LogMel,
    window: Vec<f32>,
    features: Vec<f32>,
    /// The session's operator threads.
    threads: usize,
}

impl SmartTurn {
    pub fn load(models_dir: &Path, intra_threads: usize) -> Result<SmartTurn, ModelError> {
        SmartTurn::load_file(models_dir, SMART_TURN_PREPARED, intra_threads)
    }

    /// Loads the model stored as `stored_as` under the models directory (the package's own file, to compare).
    pub fn load_file(models_dir: &Path, stored_as: &str, intra_threads: usize) -> Result<SmartTurn, ModelError> {
        Ok(SmartTurn {
            session: onnx::load_session(models_dir, stored_as, intra_threads)?,
            mel: LogMel::new(),
            window: vec![0.0; SAMPLES],
            features: vec![0.0; N_MELS * FRAMES],
            threads: intra_threads,
        })
    }

    /// Probability that the turn in `audio` (16 kHz, ending at the end of speech) is complete.
    pub fn predict(&mut self, audio: &[f32]) -> Result<f32, ModelError> {
        let _busy = Busy::start(self.threads);
        let take = audio.len().min(SAMPLES);
        let front = SAMPLES - take;
        self.window[..front].fill(0.0);
        self.window[front..].copy_from_slice(&audio[audio.len() - take..]);
        self.mel.compute(&self.window, &mut self.features);
        let fail = |e: ort::Error| ModelError::Inference { model: "smart-turn", message: e.to_string() };
        let input = TensorRef::from_array_view(([1usize, N_MELS, FRAMES], &self.features[..])).map_err(fail)?;
        let outputs = self.session.run(ort::inputs!["input_features" => input]).map_err(fail)?;
        let (_, probability) = outputs[0].try_extract_tensor::<f32>().map_err(fail)?;
        Ok(probability[0])
    }
}
