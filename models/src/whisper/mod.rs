//! Whisper tiny.en with candle: the weights converted from CTranslate2 at fetch time (`convert`), the
//! log-mel features from `mel`, greedy decoding of the utterance's text, redone with a beam search when the
//! greedy transcript is unsure.

pub mod convert;

use std::path::Path;

use candle_core::{Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{Config, model::Whisper};
use tokenizers::Tokenizer;

use crate::busy::Busy;
use crate::mel::{LogMel, N_MELS, WHISPER_SAMPLES};
use crate::paths::{WHISPER_CONFIG, WHISPER_SAFETENSORS, WHISPER_TOKENIZER};
use crate::{ModelError, require};

/// Longest transcript, in tokens.
pub const MAX_TOKENS: usize = 224;
/// Hypotheses kept by the beam search (Whisper's own default).
pub const BEAM_SIZE: usize = 5;
/// Mean log-probability per token below which a greedy transcript is redone with the beam search.
pub const GREEDY_CONFIDENCE: f32 = -0.30;

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference { model: "whisper", message: message.to_string() }
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
        let tokenizer = Tokenizer::from_file(require(models_dir, WHISPER_TOKENIZER)?).map_err(fail)?;
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(require(models_dir, WHISPER_CONFIG)?).map_err(fail)?)
                .map_err(fail)?;
        let ids = |key: &str| -> Vec<u32> {
            config[key]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_u64()).map(|v| v as u32).collect())
                .unwrap_or_default()
        };
        let token = |text: &str| tokenizer.token_to_id(text).ok_or_else(|| fail(format!("no token {text}")));
        let start = [token("<|startoftranscript|>")?, token("<|notimestamps|>")?];
        let end_of_text = token("<|endoftext|>")?;
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[weights], candle_core::DType::F32, &Device::Cpu) }
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
        // candle computes on every core.
        let _busy = Busy::start(std::thread::available_parallelism().map_or(1, |n| n.get()));
        let frames = self.mel.frames();
        self.mel.compute(audio, &mut self.features);
        let mel = Tensor::from_slice(&self.features, (1, N_MELS, frames), &Device::Cpu).map_err(fail)?;
        let audio_features = self.model.encoder.forward(&mel, true).map_err(fail)?;
        // Greedy first; when it is unsure (low mean log-probability), beam search decides.
        let (mut tokens, confidence) = self.beam_search(&audio_features, 1)?;
        tracing::debug!(confidence, "greedy transcript");
        if confidence < GREEDY_CONFIDENCE {
            tokens = self.beam_search(&audio_features, BEAM_SIZE)?.0;
        }
        let text = self.tokenizer.decode(&tokens, true).map_err(fail)?;
        Ok(text.trim().to_string())
    }

    /// Log-probabilities of the next token for each row of `hidden` (`[beams, len, d_model]`), with the
    /// suppressed tokens (and, at the first step, the ones suppressed at the start) impossible.
    fn next_log_probs(&self, hidden: &Tensor, first_step: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        let (beams, len, _) = hidden.dims3().map_err(fail)?;
        let last = hidden.i((.., len - 1..)).map_err(fail)?;
        let logits = self.model.decoder.final_linear(&last).and_then(|l| l.squeeze(1)).map_err(fail)?;
        let log_probs =
            candle_nn::ops::log_softmax(&self.mask(&logits, first_step)?, candle_core::D::Minus1).map_err(fail)?;
        (0..beams).map(|b| log_probs.i(b).and_then(|row| row.to_vec1::<f32>()).map_err(fail)).collect()
    }

    /// `logits` with every token that may not come next set to −∞.
    fn mask(&self, logits: &Tensor, first_step: bool) -> Result<Tensor, ModelError> {
        let vocab = logits.dim(candle_core::D::Minus1).map_err(fail)?;
        let mut mask = vec![0f32; vocab];
        let banned = self.suppress.iter().chain(if first_step { self.suppress_at_start.iter() } else { [].iter() });
        for &id in banned {
            if (id as usize) < vocab {
                mask[id as usize] = f32::NEG_INFINITY;
            }
        }
        // Special and timestamp tokens follow <|endoftext|>; text never contains them.
        for value in mask.iter_mut().skip(self.end_of_text as usize + 1) {
            *value = f32::NEG_INFINITY;
        }
        let mask = Tensor::from_vec(mask, vocab, &Device::Cpu).map_err(fail)?;
        logits.broadcast_add(&mask).map_err(fail)
    }

    /// Beam search (`BEAM_SIZE` beams, scores normalised by length) over the decoder; the text tokens of
    /// the best finished hypothesis.
    fn beam_search(&mut self, audio_features: &Tensor, width: usize) -> Result<(Vec<u32>, f32), ModelError> {
        let features = audio_features.repeat((width, 1, 1)).map_err(fail)?;
        let mut beams: Vec<(Vec<u32>, f32)> = vec![(self.start.to_vec(), 0.0); width];
        let mut finished: Vec<(Vec<u32>, f32)> = Vec::new();
        for step in 0..MAX_TOKENS {
            let rows: Vec<u32> = beams.iter().flat_map(|(tokens, _)| tokens.iter().copied()).collect();
            let len = beams[0].0.len();
            let input = Tensor::from_vec(rows, (width, len), &Device::Cpu).map_err(fail)?;
            let hidden = self.model.decoder.forward(&input, &features, step == 0).map_err(fail)?;
            let log_probs = self.next_log_probs(&hidden, step == 0)?;
            // At the first step every beam is the same: expand only the first.
            let sources = if step == 0 { 1 } else { width };
            let mut candidates: Vec<(usize, u32, f32)> = Vec::with_capacity(sources * width * 2);
            for (b, row) in log_probs.iter().enumerate().take(sources) {
                let mut best: Vec<(u32, f32)> = row.iter().enumerate().map(|(t, lp)| (t as u32, *lp)).collect();
                best.select_nth_unstable_by(width * 2, |a, b| b.1.total_cmp(&a.1));
                for &(token, lp) in &best[..width * 2] {
                    candidates.push((b, token, beams[b].1 + lp));
                }
            }
            candidates.sort_by(|a, b| b.2.total_cmp(&a.2));
            let mut next = Vec::with_capacity(width);
            for (b, token, score) in candidates {
                if !score.is_finite() {
                    continue;
                }
                let mut tokens = beams[b].0.clone();
                if token == self.end_of_text {
                    let text_len = (tokens.len() - self.start.len()).max(1) as f32;
                    finished.push((tokens.split_off(self.start.len()), score / text_len));
                } else if next.len() < width {
                    tokens.push(token);
                    next.push((tokens, score));
                }
                if next.len() == width {
                    break;
                }
            }
            if finished.len() >= width || next.len() < width {
                break;
            }
            beams = next;
        }
        if finished.is_empty() {
            let (tokens, score) = beams.swap_remove(0);
            let text_len = (tokens.len() - self.start.len()).max(1) as f32;
            return Ok((tokens[self.start.len()..].to_vec(), score / text_len));
        }
        finished.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(finished.swap_remove(0))
    }
}
