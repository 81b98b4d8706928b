//! The network of each architecture (candle's quantized llama and qwen3, our `qwen2`) behind one forward
//! pass.

use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen3};

use super::{fail, qwen2};
use crate::ModelError;

/// The network of one architecture; cloning copies only the key/value cache.
#[derive(Clone)]
pub(super) enum Weights {
    Llama(quantized_llama::ModelWeights),
    Qwen2(qwen2::Qwen2),
    Qwen3(quantized_qwen3::ModelWeights),
}

impl Weights {
    pub(super) fn forward(&mut self, tokens: &Tensor, position: usize) -> candle_core::Result<Tensor> {
        match self {
            Weights::Llama(model) => model.forward(tokens, position),
            Weights::Qwen2(model) => model.forward(tokens, position),
            Weights::Qwen3(model) => model.forward(tokens, position),
        }
    }

    /// Evaluates `tokens` after the `position` already cached; the logits after the last of them.
    pub(super) fn evaluate(&mut self, tokens: &[u32], position: usize) -> Result<Tensor, ModelError> {
        let input = Tensor::new(tokens, &Device::Cpu).and_then(|t| t.unsqueeze(0)).map_err(fail)?;
        self.forward(&input, position).and_then(|logits| logits.squeeze(0)).map_err(fail)
    }
}
