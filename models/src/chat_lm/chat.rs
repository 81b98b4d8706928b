//! `ChatLm`: a loaded chat model, its tokenizer, its chat template and the key/value states kept for
//! prompt reuse; streamed generation (the module doc of `chat_lm` says how).

use std::path::Path;

use candle_core::Device;
use candle_core::quantized::gguf_file;
use candle_transformers::models::{quantized_llama, quantized_qwen3};
use tokenizers::Tokenizer;

use super::catalog::{ChatModelChoice, LocalChatModel};
use super::gguf::{self, Architecture};
use super::sampler::Sampler;
use super::template::{CallFormat, ChatTemplate, Message, ToolFunction};
use super::tokenizer;
use super::weights::Weights;
use super::{fail, qwen2};
use crate::{ModelError, require};

/// Tokens that end a reply in the families Confab runs, beside the file's own end-of-sequence token.
const END_TOKENS: [&str; 5] = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"];

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
    name: String,
    /// The loaded weights with an empty cache: where a prompt with no kept prefix starts.
    model: Weights,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    end_tokens: Vec<u32>,
    /// Most recently used first.
    prefixes: std::collections::VecDeque<PrefixState>,
    /// Prompt tokens evaluated by the last call, for tests and metrics.
    last_evaluated: usize,
}

impl ChatLm {
    /// An embedded model from `models_dir`.
    pub fn load(models_dir: &Path, which: LocalChatModel) -> Result<ChatLm, ModelError> {
        ChatLm::open(&require(models_dir, which.file())?, which.name())
    }

    /// The model an agent chose.
    pub fn load_choice(models_dir: &Path, choice: &ChatModelChoice) -> Result<ChatLm, ModelError> {
        ChatLm::open(&choice.path(models_dir)?, &choice.name())
    }

    /// The GGUF at `path`, known as `name`: any file `gguf::inspect` accepts.
    pub fn open(path: &Path, name: &str) -> Result<ChatLm, ModelError> {
        let mut file = std::fs::File::open(path).map_err(fail)?;
        let content = gguf_file::Content::read(&mut file).map_err(fail)?;
        let summary = gguf::summarize(path, &content)?;
        let tokenizer = tokenizer::from_gguf(&content)?;
        let token_text = |key: &str| {
            let id = content.metadata.get(key).and_then(|v| v.to_u32().ok())?;
            tokenizer.id_to_token(id)
        };
        let eos = token_text("tokenizer.ggml.eos_token_id");
        let bos = token_text("tokenizer.ggml.bos_token_id").unwrap_or_default();
        let template_source = content.metadata.get("tokenizer.chat_template").and_then(|v| v.to_string().ok()).cloned();
        let template = ChatTemplate::new(template_source.as_deref(), &bos, eos.as_deref().unwrap_or_default())
            .map_err(|why| ModelError::Unsupported { path: path.display().to_string(), reason: why })?;
        let mut end_tokens: Vec<u32> = END_TOKENS.iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        end_tokens.extend(eos.and_then(|eos| tokenizer.token_to_id(&eos)).filter(|id| !end_tokens.contains(id)));
        let model = match summary.architecture {
            Architecture::Llama => Weights::Llama(
                quantized_llama::ModelWeights::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?,
            ),
            Architecture::Qwen2 => {
                Weights::Qwen2(qwen2::Qwen2::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?)
            }
            Architecture::Qwen3 => Weights::Qwen3(
                quantized_qwen3::ModelWeights::from_gguf(content, &mut file, &Device::Cpu).map_err(fail)?,
            ),
        };
        // candle tiles each matrix for its VNNI kernels at its first product (~0.4 s for Qwen): at load,
        // with the model, rather than in the first call's first turn.
        if let Some(&token) = end_tokens.first() {
            model.clone().evaluate(&[token], 0)?;
        }
        Ok(ChatLm {
            name: name.to_string(),
            model,
            tokenizer,
            template,
            end_tokens,
            prefixes: Default::default(),
            last_evaluated: 0,
        })
    }

    /// The name the model goes by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the model writes tool calls, from its template (`CallFormat::None`: it is offered no tools).
    pub fn call_format(&self) -> CallFormat {
        self.template.call_format()
    }

    /// The prompt for a conversation, in the model's template, ending where the assistant's reply begins.
    pub fn prompt(&self, messages: &[Message], tools: &[ToolFunction]) -> Result<String, ModelError> {
        self.template.render(messages, tools, true)
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        Ok(self.tokenizer.encode(text, false).map_err(fail)?.get_ids().to_vec())
    }

    /// The tokens every prompt that opens with this system message (and these tools) begins with: the
    /// system message rendered alone, when prompts begin with it (ChatML, Llama 3); else the text two
    /// prompts differing only in their user message share, cut after its last special token (so that it
    /// tokenizes the same alone as within a prompt; Qwen3's template refuses a conversation without a user
    /// message). None when the template cannot say.
    fn system_prefix(&self, system: &Message, tools: &[ToolFunction]) -> Option<Vec<u32>> {
        let render = |user: &str| self.template.render(&[system.clone(), Message::new("user", user)], tools, true).ok();
        let (a, b) = (render("\u{1}")?, render("\u{2}")?);
        let shared = a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or(a.len(), |((i, _), _)| i);
        let alone = self.template.render(std::slice::from_ref(system), tools, false).ok();
        let text = match alone {
            Some(alone) if !alone.is_empty() && a[..shared].starts_with(&alone) => alone,
            _ => a[..a[..shared].rfind("|>")? + 2].to_string(),
        };
        self.encode(&text).ok().filter(|tokens| !tokens.is_empty())
    }

    /// Generates a reply to `messages` (offering `tools` when the template takes them), calling `on_text`
    /// with each new piece of text; generation stops when `on_text` returns false (cancelled), at an end
    /// token, at a stop sequence, or after `max_tokens`.
    pub fn generate(
        &mut self,
        messages: &[Message],
        tools: &[ToolFunction],
        max_tokens: usize,
        temperature: f64,
        stop: &[String],
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<(), ModelError> {
        let prompt_tokens = self.encode(&self.prompt(messages, tools)?)?;
        let mut sampler = Sampler::new(299_792_458, temperature, TOP_P);
        let mut generated: Vec<u32> = Vec::with_capacity(max_tokens);
        let mut emitted = String::new();
        let (mut model, mut position) = self.start_from_longest_prefix(&prompt_tokens);
        self.last_evaluated = prompt_tokens.len() - position;
        // The system message's state is kept on its own, for the next call with the same system prompt.
        let system = messages.first().filter(|m| m.role == "system").and_then(|m| self.system_prefix(m, tools));
        if let Some(end) = system
            .filter(|prefix| prompt_tokens.starts_with(prefix))
            .map(|prefix| prefix.len())
            .filter(|&end| position < end && end < prompt_tokens.len())
        {
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
    pub fn warm(&mut self, system: &str, tools: &[ToolFunction]) -> Result<(), ModelError> {
        let Some(tokens) = self.system_prefix(&Message::new("system", system), tools) else { return Ok(()) };
        if self.prefixes.iter().any(|kept| kept.tokens == tokens) {
            return Ok(());
        }
        let (mut model, position) = self.start_from_longest_prefix(&tokens);
        model.evaluate(&tokens[position..], position)?;
        self.keep_prefix(tokens, &model);
        Ok(())
    }

    /// The logits of the reply's first token, the prompt evaluated whole from an empty cache (for checking
    /// this implementation against another one on the same weights).
    pub fn first_reply_logits(&self, messages: &[Message]) -> Result<Vec<f32>, ModelError> {
        let tokens = self.encode(&self.prompt(messages, &[])?)?;
        let logits = self.model.clone().evaluate(&tokens, 0)?;
        logits.to_vec1::<f32>().map_err(fail)
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
