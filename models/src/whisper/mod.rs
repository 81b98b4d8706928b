//! Whisper tiny.en with candle: the weights converted from CTranslate2 at fetch time (`convert`), the
//! log-mel features from `mel`, greedy decoding of the utterance's text.

pub mod convert;

use std::path::Path;

use candle_core::{Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{Config, model::Whisper};
use tokenizers::Tokenizer;

use crate::mel::{LogMel, N_MELS, WHISPER_SAMPLES};
use crate::registry::{WHISPER_CONFIG, WHISPER_SAFETENSORS, WHISPER_TOKENIZER};
use crate::{ModelError, require};

/// Longest transcript, in tokens.
pub const MAX_TOKENS: usize = 224;

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference {
        model: "whisper",
        message: message.to_string(),
    }
}

/// tiny.en's shape.
pub fn tiny_en_config(suppress_tokens: Vec<u32>) -> Config {
    Config {
        num_mel_bins: 80,
        max_source_positions: 1500,
        d_model: 384,
        encoder_attention_heads: 6,
        encoder_layers: 4,
        vocab_size: 51_864,
        max_target_positions: 448,
        decoder_attention_heads: 6,
        decoder_layers: 4,
        suppress_tokens,
    }
}

pub struct WhisperStt {
    model: Whisper,
    tokenizer: Tokenizer,
    mel: LogMel,
    features: Vec<f32>,
    suppress: Vec<u32>,
    suppress_at_start: Vec<u32>,
    start: [u32; 2],
    end_of_text: u32,
}

impl WhisperStt {
    pub fn load(models_dir: &Path) -> Result<WhisperStt, ModelError> {
        let weights = require(models_dir, WHISPER_SAFETENSORS)?;
        let tokenizer =
            Tokenizer::from_file(require(models_dir, WHISPER_TOKENIZER)?).map_err(fail)?;
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(require(models_dir, WHISPER_CONFIG)?).map_err(fail)?,
        )
        .map_err(fail)?;
        let ids = |key: &str| -> Vec<u32> {
            config[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_u64())
                        .map(|v| v as u32)
                        .collect()
                })
                .unwrap_or_default()
        };
        let token = |text: &str| {
            tokenizer
                .token_to_id(text)
                .ok_or_else(|| fail(format!("no token {text}")))
        };
        let start = [token("<|startoftranscript|>")?, token("<|notimestamps|>")?];
        let end_of_text = token("<|endoftext|>")?;
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(&[weights], candle_core::DType::F32, &Device::Cpu)
        }
        .map_err(fail)?;
        let suppress = ids("suppress_ids");
        let model = Whisper::load(&vb, tiny_en_config(suppress.clone())).map_err(fail)?;
        Ok(WhisperStt {
            model,
            tokenizer,
            mel: LogMel::whisper(),
            features: vec![0.0; N_MELS * (WHISPER_SAMPLES / crate::mel::HOP)],
            suppress,
            suppress_at_start: ids("suppress_ids_begin"),
            start,
            end_of_text,
        })
    }

    /// The text of up to 30 s of 16 kHz speech.
    pub fn transcribe(&mut self, audio: &[f32]) -> Result<String, ModelError> {
        let frames = self.mel.frames();
        self.mel.compute(audio, &mut self.features);
        let mel =
            Tensor::from_slice(&self.features, (1, N_MELS, frames), &Device::Cpu).map_err(fail)?;
        let audio_features = self.model.encoder.forward(&mel, true).map_err(fail)?;
        let mut tokens: Vec<u32> = self.start.to_vec();
        let vocab = self.model.config.vocab_size;
        for step in 0..MAX_TOKENS {
            let input = Tensor::new(tokens.as_slice(), &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .map_err(fail)?;
            let hidden = self
                .model
                .decoder
                .forward(&input, &audio_features, step == 0)
                .map_err(fail)?;
            let last = hidden.i((..1, tokens.len() - 1..)).map_err(fail)?;
            let logits = self
                .model
                .decoder
                .final_linear(&last)
                .and_then(|l| l.i(0)?.i(0))
                .map_err(fail)?;
            let mut logits: Vec<f32> = logits.to_vec1().map_err(fail)?;
            let banned = self.suppress.iter().chain(if step == 0 {
                self.suppress_at_start.iter()
            } else {
                [].iter()
            });
            for &id in banned {
                if (id as usize) < vocab {
                    logits[id as usize] = f32::NEG_INFINITY;
                }
            }
            let next = logits
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| i as u32)
                .unwrap_or(self.end_of_text);
            if next == self.end_of_text {
                break;
            }
            tokens.push(next);
        }
        let text = self
            .tokenizer
            .decode(&tokens[self.start.len()..], true)
            .map_err(fail)?;
        Ok(text.trim().to_string())
    }
}
