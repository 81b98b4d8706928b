//! SmolLM2-135M-Instruct from its GGUF with candle's quantized llama. The tokenizer is built from the
//! GGUF metadata (byte-level BPE: `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`; no tokenizer.json
//! ships); prompts use the model's ChatML template; generation streams text and stops at
//! `<|im_end|>`, the end-of-text token, a stop sequence or the token bound.

use std::path::Path;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use crate::registry::SMOLLM2;
use crate::{ModelError, require};

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference { model: "smollm2", message: message.to_string() }
}

/// One chat message for the template.
pub struct Turn<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

pub struct SmolLm {
    model: ModelWeights,
    tokenizer: Tokenizer,
    end_tokens: Vec<u32>,
}

/// The byte-level BPE tokenizer described by a GGUF's metadata.
fn tokenizer_from_gguf(content: &gguf_file::Content) -> Result<Tokenizer, ModelError> {
    let get = |key: &str| content.metadata.get(key).ok_or_else(|| fail(format!("GGUF has no {key}")));
    let tokens = get("tokenizer.ggml.tokens")?.to_vec().map_err(fail)?;
    let merges = get("tokenizer.ggml.merges")?.to_vec().map_err(fail)?;
    let mut vocab = Vocab::default();
    let mut specials = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        let token = token.to_string().map_err(fail)?.clone();
        if token.starts_with("<|") && token.ends_with("|>") {
            specials.push(token.clone());
        }
        vocab.insert(token, id as u32);
    }
    let merges = merges
        .iter()
        .map(|m| {
            let m = m.to_string().map_err(fail)?;
            let (a, b) = m.split_once(' ').ok_or_else(|| fail(format!("bad merge {m:?}")))?;
            Ok((a.to_string(), b.to_string()))
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(fail)?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    tokenizer.add_special_tokens(&specials.iter().map(|s| AddedToken::from(s.clone(), true)).collect::<Vec<_>>());
    Ok(tokenizer)
}

impl SmolLm {
    pub fn load(models_dir: &Path) -> Result<SmolLm, ModelError> {
        let path = require(models_dir, SMOLLM2)?;
        let mut file = std::fs::File::open(&path).map_err(fail)?;
        let content = gguf_file::Content::read(&mut file).map_err(fail)?;
        let tokenizer = tokenizer_from_gguf(&content)?;
        let end_tokens = ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        let model = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?;
        Ok(SmolLm { model, tokenizer, end_tokens })
    }

    /// The ChatML prompt of a conversation, ending where the assistant's reply begins.
    pub fn prompt(turns: &[Turn]) -> String {
        let mut prompt = String::new();
        for turn in turns {
            prompt.push_str(&format!("<|im_start|>{}\n{}<|im_end|>\n", turn.role, turn.content));
        }
        prompt.push_str("<|im_start|>assistant\n");
        prompt
    }

    /// Generates a reply to `turns`, calling `on_text` with each new piece of text; generation stops when
    /// `on_text` returns false (cancelled), at the end token, at a stop sequence, or after `max_tokens`.
    pub fn generate(
        &mut self,
        turns: &[Turn],
        max_tokens: usize,
        temperature: f64,
        stop: &[String],
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<(), ModelError> {
        let prompt = SmolLm::prompt(turns);
        let encoding = self.tokenizer.encode(prompt, false).map_err(fail)?;
        let prompt_tokens = encoding.get_ids().to_vec();
        let mut sampler = LogitsProcessor::new(299_792_458, (temperature > 0.0).then_some(temperature), Some(0.9));
        let mut generated: Vec<u32> = Vec::with_capacity(max_tokens);
        let mut emitted = String::new();
        let mut input =
            Tensor::new(prompt_tokens.as_slice(), &Device::Cpu).and_then(|t| t.unsqueeze(0)).map_err(fail)?;
        let mut position = 0;
        for _ in 0..max_tokens {
            let logits = self.model.forward(&input, position).and_then(|l| l.squeeze(0)).map_err(fail)?;
            position += input.dim(1).map_err(fail)?;
            let next = sampler.sample(&logits).map_err(fail)?;
            if self.end_tokens.contains(&next) {
                break;
            }
            generated.push(next);
            let text = self.tokenizer.decode(&generated, true).map_err(fail)?;
            if let Some(cut) = stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                if cut > emitted.len() && !on_text(&text[emitted.len()..cut]) {
                    return Ok(());
                }
                break;
            }
            // Emit only whole characters; a multi-byte character may span tokens.
            if text.len() > emitted.len() && !text.ends_with('\u{FFFD}') {
                if !on_text(&text[emitted.len()..]) {
                    return Ok(());
                }
                emitted = text;
            }
            input = Tensor::new(&[next], &Device::Cpu).and_then(|t| t.unsqueeze(0)).map_err(fail)?;
        }
        Ok(())
    }
}
