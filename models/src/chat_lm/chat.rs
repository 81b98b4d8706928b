//! `ChatLm`: a loaded chat model, its tokenizer and the key/value states kept for prompt reuse; prompts in
//! the ChatML template, streamed generation (the module doc of `chat_lm` says how).

use std::path::Path;

use candle_core::Device;
use candle_core::quantized::gguf_file;
use candle_transformers::models::quantized_llama;
use tokenizers::Tokenizer;

use super::catalog::LocalChatModel;
use super::sampler::Sampler;
use super::tokenizer;
use super::weights::Weights;
use super::{fail, qwen2};
use crate::{ModelError, require};

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

/// Nucleus sampling keeps the most probable tokens up to this much of the probability.
pub const TOP_P: f32 = 0.9;

/// The reply's last this many tokens are the ones penalised; the prompt's are not (an answer repeats the
/// question's words: "The capital of France is …").
pub const REPEAT_WINDOW: usize = 64;

/// The model after evaluating `tokens`: its key/value cache holds exactly those positions.
struct PrefixState {
    tokens: Vec<u32>,
    model: Weights,
}

pub struct ChatLm {
    which: LocalChatModel,
    /// The loaded weights with an empty cache: where a prompt with no kept prefix starts.
    model: Weights,
    tokenizer: Tokenizer,
    end_tokens: Vec<u32>,
    /// Most recently used first.
    prefixes: std::collections::VecDeque<PrefixState>,
    /// Prompt tokens evaluated by the last call, for tests and metrics.
    last_evaluated: usize,
}

impl ChatLm {
    pub fn load(models_dir: &Path, which: LocalChatModel) -> Result<ChatLm, ModelError> {
        let path = require(models_dir, which.file())?;
        let mut file = std::fs::File::open(&path).map_err(fail)?;
        let content = gguf_file::Content::read(&mut file).map_err(fail)?;
        let tokenizer = tokenizer::from_gguf(&content)?;
        let end_tokens: Vec<u32> =
            ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        let model = match which {
            LocalChatModel::SmolLm2 => Weights::Llama(
                quantized_llama::ModelWeights::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?,
            ),
            LocalChatModel::QwenCoder05b => {
                Weights::Qwen2(qwen2::Qwen2::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?)
            }
        };
        // candle tiles each matrix for its VNNI kernels at its first product (~0.4 s for Qwen): at load,
        // with the model, rather than in the first call's first turn.
        if let Some(&token) = end_tokens.first() {
            model.clone().evaluate(&[token], 0)?;
        }
        Ok(ChatLm { which, model, tokenizer, end_tokens, prefixes: Default::default(), last_evaluated: 0 })
    }

    /// Which model this is.
    pub fn which(&self) -> LocalChatModel {
        self.which
    }

    /// One message in ChatML.
    fn message(turn: &Turn) -> String {
        format!("<|im_start|>{}\n{}<|im_end|>\n", turn.role, turn.content)
    }

    /// The ChatML prompt of a conversation, ending where the assistant's reply begins.
    pub fn prompt(turns: &[Turn]) -> String {
        let mut prompt = String::new();
        for turn in turns {
            prompt.push_str(&ChatLm::message(turn));
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
        let prompt = ChatLm::prompt(turns);
        let encoding = self.tokenizer.encode(prompt, false).map_err(fail)?;
        let prompt_tokens = encoding.get_ids().to_vec();
        let mut sampler = Sampler::new(299_792_458, temperature, TOP_P);
        let mut generated: Vec<u32> = Vec::with_capacity(max_tokens);
        let mut emitted = String::new();
        let (mut model, mut position) = self.start_from_longest_prefix(&prompt_tokens);
        self.last_evaluated = prompt_tokens.len() - position;
        // The system message's state is kept on its own, for the next call with the same system prompt.
        if let Some(end) = self.system_prompt_end(turns)?.filter(|&end| position < end && end < prompt_tokens.len()) {
            model.evaluate(&prompt_tokens[position..end], position)?;
            position = end;
            self.keep_prefix(prompt_tokens[..end].to_vec(), &model);
        }
        let mut input = prompt_tokens[position..].to_vec();
        let mut evaluated = prompt_tokens.clone();
        for step in 0..max_tokens {
            let logits = model.evaluate(&input, position)?;
            position += input.len();
            if step == 0 {
                self.keep_prefix(evaluated.clone(), &model);
            } else {
                evaluated.push(*generated.last().expect("a token was fed"));
            }
            let recent = &generated[generated.len().saturating_sub(REPEAT_WINDOW)..];
            let mut logits = logits.to_vec1::<f32>().map_err(fail)?;
            let next = sampler.sample(&mut logits, recent, REPEAT_PENALTY);
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
            input = vec![next];
        }
        Ok(())
    }

    /// Evaluates a system prompt now and keeps its state (unless a kept one holds it already), so that the
    /// first prompt beginning with it evaluates only what follows: a call's first answer then comes as
    /// fast as its later ones.
    pub fn warm(&mut self, system: &str) -> Result<(), ModelError> {
        let message = ChatLm::message(&Turn { role: "system", content: system });
        let tokens = self.tokenizer.encode(message, false).map_err(fail)?.get_ids().to_vec();
        if tokens.is_empty() || self.prefixes.iter().any(|kept| kept.tokens == tokens) {
            return Ok(());
        }
        let (mut model, position) = self.start_from_longest_prefix(&tokens);
        model.evaluate(&tokens[position..], position)?;
        self.keep_prefix(tokens, &model);
        Ok(())
    }

    /// The logits of the reply's first token, the prompt evaluated whole from an empty cache (for checking
    /// this implementation against another one on the same weights).
    pub fn first_reply_logits(&self, turns: &[Turn]) -> Result<Vec<f32>, ModelError> {
        let tokens = self.tokenizer.encode(ChatLm::prompt(turns), false).map_err(fail)?;
        let logits = self.model.clone().evaluate(tokens.get_ids(), 0)?;
        logits.to_vec1::<f32>().map_err(fail)
    }

    /// How many of the prompt's tokens are the leading system message, if there is one.
    fn system_prompt_end(&self, turns: &[Turn]) -> Result<Option<usize>, ModelError> {
        match turns.first() {
            Some(first) if first.role == "system" => {
                let tokens = self.tokenizer.encode(ChatLm::message(first), false).map_err(fail)?;
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
    fn start_from_longest_prefix(&mut self, prompt: &[u32]) -> (Weights, usize) {
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

    fn keep_prefix(&mut self, tokens: Vec<u32>, model: &Weights) {
        self.prefixes.retain(|kept| kept.tokens != tokens);
        self.prefixes.push_front(PrefixState { tokens, model: model.clone() });
        self.prefixes.truncate(PREFIX_STATES);
    }
}
