//! SmolLM2-135M-Instruct from its GGUF with candle's quantized llama (the Q8_0 copy made at fetch time,
//! `requantize`: candle multiplies Q4_1 without SIMD). The tokenizer is built from the
//! GGUF metadata (byte-level BPE: `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`; no tokenizer.json
//! ships); prompts use the model's ChatML template; generation streams text and stops at
//! `<|im_end|>`, the end-of-text token, a stop sequence or the token bound; tokens the reply already holds
//! are penalised ([`REPEAT_PENALTY`]) so that it does not loop.
//!
//! Prompts are not evaluated from scratch each turn: the model's key/value state is kept after each prompt
//! and after each reply ([`PREFIX_STATES`] of them, most recent first), and a new prompt that begins with a
//! kept state's tokens evaluates only the tokens after them. A conversation's next turn thus evaluates only
//! the new user message (its prompt is the previous one plus the reply and the new message); a new call
//! with the same system prompt starts from the system prompt's state. A kept state costs only its
//! key/value tensors (the weights are shared).

pub mod requantize;

use std::path::Path;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use candle_transformers::utils::apply_repeat_penalty;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use crate::registry::SMOLLM2_Q8;
use crate::{ModelError, require};

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference { model: "smollm2", message: message.to_string() }
}

/// One chat message for the template.
pub struct Turn<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

/// Key/value states kept for prompt reuse.
pub const PREFIX_STATES: usize = 8;

/// How much less likely a token the reply already holds becomes (llama.cpp's usual 1.1): without it the
/// 135M model talks itself into loops ("the opposite of the opposite of …" until the token bound).
pub const REPEAT_PENALTY: f32 = 1.1;

/// The reply's last this many tokens are the ones penalised; the prompt's are not (an answer repeats the
/// question's words: "The capital of France is …").
pub const REPEAT_WINDOW: usize = 64;

/// The model after evaluating `tokens`: its key/value cache holds exactly those positions.
struct PrefixState {
    tokens: Vec<u32>,
    model: ModelWeights,
}

pub struct SmolLm {
    /// The loaded weights with an empty cache: where a prompt with no kept prefix starts.
    model: ModelWeights,
    tokenizer: Tokenizer,
    end_tokens: Vec<u32>,
    /// Most recently used first.
    prefixes: std::collections::VecDeque<PrefixState>,
    /// Prompt tokens evaluated by the last call, for tests and metrics.
    last_evaluated: usize,
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
        let path = require(models_dir, SMOLLM2_Q8)?;
        let mut file = std::fs::File::open(&path).map_err(fail)?;
        let content = gguf_file::Content::read(&mut file).map_err(fail)?;
        let tokenizer = tokenizer_from_gguf(&content)?;
        let end_tokens = ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        let model = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?;
        Ok(SmolLm { model, tokenizer, end_tokens, prefixes: Default::default(), last_evaluated: 0 })
    }

    /// One message in ChatML.
    fn message(turn: &Turn) -> String {
        format!("<|im_start|>{}\n{}<|im_end|>\n", turn.role, turn.content)
    }

    /// The ChatML prompt of a conversation, ending where the assistant's reply begins.
    pub fn prompt(turns: &[Turn]) -> String {
        let mut prompt = String::new();
        for turn in turns {
            prompt.push_str(&SmolLm::message(turn));
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
        let (mut model, mut position) = self.start_from_longest_prefix(&prompt_tokens);
        self.last_evaluated = prompt_tokens.len() - position;
        // The system message's state is kept on its own, for the next call with the same system prompt.
        if let Some(end) = self.system_prompt_end(turns)?.filter(|&end| position < end && end < prompt_tokens.len()) {
            let system = Tensor::new(&prompt_tokens[position..end], &Device::Cpu).and_then(|t| t.unsqueeze(0));
            model.forward(&system.map_err(fail)?, position).map_err(fail)?;
            position = end;
            self.keep_prefix(prompt_tokens[..end].to_vec(), &model);
        }
        let mut input =
            Tensor::new(&prompt_tokens[position..], &Device::Cpu).and_then(|t| t.unsqueeze(0)).map_err(fail)?;
        let mut evaluated = prompt_tokens.clone();
        for step in 0..max_tokens {
            let logits = model.forward(&input, position).and_then(|l| l.squeeze(0)).map_err(fail)?;
            position += input.dim(1).map_err(fail)?;
            if step == 0 {
                self.keep_prefix(evaluated.clone(), &model);
            } else {
                evaluated.push(*generated.last().expect("a token was fed"));
            }
            let recent = &generated[generated.len().saturating_sub(REPEAT_WINDOW)..];
            let logits = if recent.is_empty() {
                logits
            } else {
                apply_repeat_penalty(&logits, REPEAT_PENALTY, recent).map_err(fail)?
            };
            let next = sampler.sample(&logits).map_err(fail)?;
            if self.end_tokens.contains(&next) {
                // The reply's state: the next turn's prompt begins with this prompt and this reply.
                self.keep_prefix(evaluated, &model);
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

    /// How many of the prompt's tokens are the leading system message, if there is one.
    fn system_prompt_end(&self, turns: &[Turn]) -> Result<Option<usize>, ModelError> {
        match turns.first() {
            Some(first) if first.role == "system" => {
                let tokens = self.tokenizer.encode(SmolLm::message(first), false).map_err(fail)?;
                Ok(Some(tokens.get_ids().len()))
            }
            _ => Ok(None),
        }
    }

    /// Prompt tokens the last call evaluated (the rest came from a kept state).
    pub fn last_evaluated(&self) -> usize {
        self.last_evaluated
    }

    /// Forgets every kept state: the next prompt is evaluated whole.
    pub fn forget_prefixes(&mut self) {
        self.prefixes.clear();
    }

    /// The model state to continue from and its position: the longest kept state whose tokens begin
    /// `prompt` (leaving at least one token to evaluate, whose logits start the reply), else the empty one.
    fn start_from_longest_prefix(&mut self, prompt: &[u32]) -> (ModelWeights, usize) {
        let best = (0..self.prefixes.len())
            .filter(|&i| {
                let kept = &self.prefixes[i].tokens;
                kept.len() < prompt.len() && prompt.starts_with(kept)
            })
            .max_by_key(|&i| self.prefixes[i].tokens.len());
        match best.and_then(|i| self.prefixes.remove(i)) {
            Some(state) => {
                let start = (state.model.clone(), state.tokens.len());
                self.prefixes.push_front(state);
                start
            }
            None => (self.model.clone(), 0),
        }
    }

    fn keep_prefix(&mut self, tokens: Vec<u32>, model: &ModelWeights) {
        self.prefixes.retain(|kept| kept.tokens != tokens);
        self.prefixes.push_front(PrefixState { tokens, model: model.clone() });
        self.prefixes.truncate(PREFIX_STATES);
    }
}
