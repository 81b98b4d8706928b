//! Silero VAD (v6 ONNX) with a batch dimension: one call runs a 32 ms window for each of many sessions.
//! Each session keeps its own recurrent state and 64-sample context; the batch buffers are allocated once
//! for the largest batch and reused.

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;

use crate::paths::SILERO_VAD;
use crate::{ModelError, onnx};

/// Samples per VAD window at 16 kHz (32 ms).
pub const WINDOW: usize = 512;
/// Samples of the previous window the model sees before each window.
pub const CONTEXT: usize = 64;
const STATE: usize = 128;

/// One session's recurrent state.
#[derive(Debug, Clone)]
pub struct SileroState {
    state: [f32; 2 * STATE],
    context: [f32; CONTEXT],
}

impl Default for SileroState {
    fn default() -> Self {
        SileroState { state: [0.0; 2 * STATE], context: [0.0; CONTEXT] }
    }
}

pub struct SileroVad {
    session: Session,
    max_batch: usize,
    input: Vec<f32>,
    state: Vec<f32>,
}

impl SileroVad {
    /// Loads the model; `max_batch` bounds the windows of one call.
    pub fn load(models_dir: &Path, max_batch: usize, intra_threads: usize) -> Result<SileroVad, ModelError> {
        let session = onnx::load_session(models_dir, SILERO_VAD, intra_threads)?;
        Ok(SileroVad {
            session,
            max_batch,
            input: vec![0.0; max_batch * (CONTEXT + WINDOW)],
            state: vec![0.0; 2 * max_batch * STATE],
        })
    }

    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// Runs `windows[i]` (each `WINDOW` samples) with `states[i]`, writing speech probabilities to
    /// `probabilities[i]` and advancing the states. At most `max_batch` windows.
    pub fn infer(
        &mut self,
        windows: &[&[f32]],
        states: &mut [&mut SileroState],
        probabilities: &mut [f32],
    ) -> Result<(), ModelError> {
        let batch = windows.len();
        assert!(batch <= self.max_batch && states.len() == batch && probabilities.len() == batch, "batch shape");
        if batch == 0 {
            return Ok(());
        }
        let row = CONTEXT + WINDOW;
        for (b, (window, state)) in windows.iter().zip(states.iter()).enumerate() {
            assert_eq!(window.len(), WINDOW, "a VAD window is {WINDOW} samples");
            self.input[b * row..b * row + CONTEXT].copy_from_slice(&state.context);
            self.input[b * row + CONTEXT..(b + 1) * row].copy_from_slice(window);
            for layer in 0..2 {
                let to = (layer * batch + b) * STATE;
                self.state[to..to + STATE].copy_from_slice(&state.state[layer * STATE..(layer + 1) * STATE]);
            }
        }
        let fail = |e: ort::Error| ModelError::Inference { model: "silero-vad", message: e.to_string() };
        let sample_rate = [16_000i64];
        let input = TensorRef::from_array_view(([batch, row], &self.input[..batch * row])).map_err(fail)?;
        let state_in =
            TensorRef::from_array_view(([2, batch, STATE], &self.state[..2 * batch * STATE])).map_err(fail)?;
        let sr = TensorRef::from_array_view(((), &sample_rate[..])).map_err(fail)?;
        let outputs =
            self.session.run(ort::inputs!["input" => input, "state" => state_in, "sr" => sr]).map_err(fail)?;
        let (_, output) = outputs["output"].try_extract_tensor::<f32>().map_err(fail)?;
        let (_, state_out) = outputs["stateN"].try_extract_tensor::<f32>().map_err(fail)?;
        for (b, state) in states.iter_mut().enumerate() {
            probabilities[b] = output[b];
            for layer in 0..2 {
                let from = (layer * batch + b) * STATE;
                state.state[layer * STATE..(layer + 1) * STATE].copy_from_slice(&state_out[from..from + STATE]);
            }
            state.context.copy_from_slice(&windows[b][WINDOW - CONTEXT..]);
        }
        Ok(())
    }
}
