//! Whose voice it is: Resemblyzer's GE2E speaker encoder (PyPI `resemblyzer` 0.1.4, Apache-2.0; Wan et
//! al., "Generalized End-to-End Loss for Speaker Verification"). A 3-layer LSTM of 256 reads 1.6 s of
//! 40-band mel power spectrogram; its last hidden state, through a linear layer and a ReLU, L2-normed, is
//! a 256-value *voiceprint*: two stretches of one person's speech point the same way (cosine near 1),
//! two people's less so. The weights are read from the package's own checkpoint (`torch_legacy`), no
//! conversion. `benches/scripts/speaker_embeddings.py` is the numpy reference this port follows.
//!
//! What it tells apart (measured there): a natural voice (Piper's joe) from espeak-ng's voices (joe–joe
//! 0.80–0.89, joe–espeak ≤ 0.64 on whole questions); espeak-ng's voices from one another it does not
//! (their shared synthesiser dominates).

mod features;
mod lstm;
pub mod torch_legacy;

use std::path::Path;

use ndarray::{Array1, Array2, Array3, Axis};

use crate::paths::VOICE_ENCODER;
use crate::{ModelError, require};
pub use features::{BANDS, PowerMel};
use lstm::Lstm;

/// Values in a voiceprint.
pub const VOICEPRINT: usize = 256;
/// Spectrogram frames the encoder reads at once (1.6 s).
pub const PARTIAL_FRAMES: usize = 160;
/// Samples of a partial at 16 kHz (1.6 s).
pub const PARTIAL_SAMPLES: usize = PARTIAL_FRAMES * crate::mel::HOP;
/// Partials start this many frames apart in a longer utterance (1.3 a second, Resemblyzer's rate).
const PARTIAL_STEP: usize = 77;
/// The last partial of an utterance is kept only when this much of it is audio, not padding.
const MIN_COVERAGE: f32 = 0.75;
/// Audio is scaled to this RMS level (dBFS) before it is encoded.
const TARGET_DBFS: f32 = -30.0;

/// A unit vector that stands for a voice.
#[derive(Debug, Clone, PartialEq)]
pub struct Voiceprint(pub Vec<f32>);

impl Voiceprint {
    /// Cosine similarity (both are unit vectors): 1 for the same direction.
    pub fn similarity(&self, other: &Voiceprint) -> f32 {
        self.0.iter().zip(&other.0).map(|(a, b)| a * b).sum()
    }

    /// The mean direction of `prints` (None when there are none).
    pub fn mean<'a>(prints: impl IntoIterator<Item = &'a Voiceprint>) -> Option<Voiceprint> {
        let mut sum = vec![0.0f32; VOICEPRINT];
        let mut any = false;
        for print in prints {
            sum.iter_mut().zip(&print.0).for_each(|(s, v)| *s += v);
            any = true;
        }
        any.then(|| normalized(sum))
    }
}

fn normalized(mut values: Vec<f32>) -> Voiceprint {
    let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    values.iter_mut().for_each(|v| *v /= norm);
    Voiceprint(values)
}

/// The encoder, with its scratch buffers.
pub struct VoiceEncoder {
    layers: [Lstm; 3],
    /// `[256 in][256 out]`.
    linear: Array2<f32>,
    linear_bias: Array1<f32>,
    mel: PowerMel,
    spectrogram: Vec<f32>,
}

impl VoiceEncoder {
    /// Loads the encoder stored by `confab models fetch`.
    pub fn load(models_dir: &Path) -> Result<VoiceEncoder, ModelError> {
        VoiceEncoder::from_checkpoint(&require(models_dir, VOICE_ENCODER)?)
    }

    /// Loads the encoder from Resemblyzer's `pretrained.pt`.
    pub fn from_checkpoint(path: &Path) -> Result<VoiceEncoder, ModelError> {
        let unusable = |reason: String| ModelError::Unsupported { path: path.display().to_string(), reason };
        let file = std::fs::File::open(path).map_err(|e| unusable(e.to_string()))?;
        let mut weights =
            torch_legacy::read_state_dict(&mut std::io::BufReader::new(file), "model_state").map_err(unusable)?;
        let mut take = |name: &str, shape: &[usize]| {
            let tensor = weights.remove(name).ok_or_else(|| unusable(format!("no tensor {name}")))?;
            if tensor.shape != shape {
                return Err(unusable(format!("{name} is {:?}, not {shape:?}", tensor.shape)));
            }
            Ok(tensor.values)
        };
        let mut layer = |index: usize, inputs: usize| -> Result<Lstm, ModelError> {
            let gates = 4 * VOICEPRINT;
            Ok(Lstm::new(
                inputs,
                take(&format!("lstm.weight_ih_l{index}"), &[gates, inputs])?,
                take(&format!("lstm.weight_hh_l{index}"), &[gates, VOICEPRINT])?,
                take(&format!("lstm.bias_ih_l{index}"), &[gates])?,
                take(&format!("lstm.bias_hh_l{index}"), &[gates])?,
            ))
        };
        let layers = [layer(0, BANDS)?, layer(1, VOICEPRINT)?, layer(2, VOICEPRINT)?];
        let linear =
            Array2::from_shape_vec((VOICEPRINT, VOICEPRINT), take("linear.weight", &[VOICEPRINT, VOICEPRINT])?)
                .expect("shape checked")
                .reversed_axes()
                .as_standard_layout()
                .into_owned();
        let linear_bias = Array1::from(take("linear.bias", &[VOICEPRINT])?);
        Ok(VoiceEncoder { layers, linear, linear_bias, mel: PowerMel::default(), spectrogram: Vec::new() })
    }

    /// The voiceprint of one stretch of speech (16 kHz) of at most 1.6 s (zero-padded to it): the unit
    /// that a call compares as it hears.
    pub fn embed_partial(&mut self, audio: &[f32]) -> Voiceprint {
        let audio = &audio[..audio.len().min(PARTIAL_SAMPLES)];
        let mut padded = scaled_to_target(audio);
        padded.resize(PARTIAL_SAMPLES, 0.0);
        self.encode(&padded, &[0]).pop().expect("one partial")
    }

    /// The voiceprint of a whole utterance: its 1.6 s partials (1.3 a second) averaged.
    pub fn embed_utterance(&mut self, audio: &[f32]) -> Voiceprint {
        let hop = crate::mel::HOP;
        let mut audio = scaled_to_target(audio);
        let frames = (audio.len() + 1).div_ceil(hop);
        let mut starts: Vec<usize> =
            (0..(frames + PARTIAL_STEP + 1).saturating_sub(PARTIAL_FRAMES).max(1)).step_by(PARTIAL_STEP).collect();
        let last = *starts.last().expect("at least one partial");
        let coverage = audio.len().saturating_sub(last * hop) as f32 / PARTIAL_SAMPLES as f32;
        if starts.len() > 1 && coverage < MIN_COVERAGE {
            starts.pop();
        }
        let end = (starts.last().expect("at least one partial") + PARTIAL_FRAMES) * hop;
        audio.resize(end.max(audio.len()), 0.0);
        let partials = self.encode(&audio, &starts);
        Voiceprint::mean(&partials).expect("at least one partial")
    }

    /// Voiceprints of the 1.6 s partials of `audio` that start at the spectrogram frames `starts`.
    fn encode(&mut self, audio: &[f32], starts: &[usize]) -> Vec<Voiceprint> {
        self.spectrogram.clear();
        self.mel.compute(audio, &mut self.spectrogram);
        let mut batch = Array3::<f32>::zeros((starts.len(), PARTIAL_FRAMES, BANDS));
        for (mut partial, &start) in batch.outer_iter_mut().zip(starts) {
            let frames = &self.spectrogram[start * BANDS..(start + PARTIAL_FRAMES) * BANDS];
            partial.assign(&ndarray::ArrayView2::from_shape((PARTIAL_FRAMES, BANDS), frames).expect("sized"));
        }
        let mut hidden = batch;
        for layer in &self.layers {
            hidden = layer.run(&hidden);
        }
        let last = hidden.index_axis(Axis(1), PARTIAL_FRAMES - 1);
        let raw = last.dot(&self.linear) + &self.linear_bias;
        raw.outer_iter().map(|row| normalized(row.iter().map(|v| v.max(0.0)).collect())).collect()
    }
}

/// `audio` scaled so that its RMS is `TARGET_DBFS` (silence stays silence).
fn scaled_to_target(audio: &[f32]) -> Vec<f32> {
    let rms = (audio.iter().map(|s| s * s).sum::<f32>() / audio.len().max(1) as f32).sqrt();
    let gain = 10f32.powf(TARGET_DBFS / 20.0) / rms.max(1e-9);
    audio.iter().map(|s| s * gain).collect()
}
