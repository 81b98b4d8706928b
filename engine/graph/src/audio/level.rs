//! Signal level: a cheap energy gate in front of the VAD. A window whose RMS is below the floor is
//! silence whatever a model would say (Silero's recurrent state can keep its probability high for a
//! window or two of digital silence after speech), and skipping inference there saves most of the VAD's
//! cost on idle sessions.

/// RMS below which a window is silence: −60 dBFS.
pub const SILENCE_FLOOR_RMS: f32 = 0.001;

/// True when the window's RMS is below [`SILENCE_FLOOR_RMS`].
pub fn is_silent(window: &[f32]) -> bool {
    if window.is_empty() {
        return true;
    }
    let energy: f32 = window.iter().map(|s| s * s).sum();
    energy < SILENCE_FLOOR_RMS * SILENCE_FLOOR_RMS * window.len() as f32
}

/// The window's mean square (its RMS squared; 0 when empty).
pub fn mean_square(window: &[f32]) -> f32 {
    window.iter().map(|s| s * s).sum::<f32>() / window.len().max(1) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_minus_sixty_dbfs() {
        assert!(is_silent(&[0.0; 512]));
        assert!(is_silent(&[0.0009; 512]));
        assert!(!is_silent(&[0.0011; 512]));
        let mut click = [0.0f32; 512];
        click[3] = 0.5;
        assert!(!is_silent(&click));
    }
}

/// Silent windows after which the VAD model's state has settled and inference can be skipped (~1 s).
pub const SETTLE_WINDOWS: u32 = 32;

/// What to do with one VAD window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadDecision {
    /// Run the model and use its probability.
    Infer,
    /// Run the model (so its state follows the audio) but the window is silence: probability 0.
    InferAsSilence,
    /// Long silence: skip the model; probability 0.
    Skip,
}

/// Per-session energy gate in front of the VAD model.
#[derive(Debug, Default, Clone)]
pub struct SilenceGate {
    silent_run: u32,
}

impl SilenceGate {
    pub fn decide(&mut self, window: &[f32]) -> VadDecision {
        if !is_silent(window) {
            self.silent_run = 0;
            return VadDecision::Infer;
        }
        self.silent_run = self.silent_run.saturating_add(1);
        if self.silent_run > SETTLE_WINDOWS { VadDecision::Skip } else { VadDecision::InferAsSilence }
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;

    #[test]
    fn long_silence_is_skipped_and_sound_resumes_inference() {
        let mut gate = SilenceGate::default();
        let silence = [0.0f32; 512];
        let sound = [0.1f32; 512];
        assert_eq!(gate.decide(&sound), VadDecision::Infer);
        let decisions: Vec<VadDecision> = (0..SETTLE_WINDOWS + 2).map(|_| gate.decide(&silence)).collect();
        assert!(decisions[..SETTLE_WINDOWS as usize].iter().all(|d| *d == VadDecision::InferAsSilence));
        assert_eq!(decisions[SETTLE_WINDOWS as usize..], [VadDecision::Skip, VadDecision::Skip]);
        assert_eq!(gate.decide(&sound), VadDecision::Infer);
    }
}
