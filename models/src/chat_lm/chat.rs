//! `ChatLm`: a chat model on llama.cpp — the process's shared weights, this model's own context (its
//! key/value cache and the states kept in it, `kept`), its chat template; streamed generation (the module
//! doc of `chat_lm` says how).

use std::num::NonZeroU32;
use std::path::Path;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{DecodeError, LlamaContextLoadError};

use super::catalog::{ChatModelChoice, LocalChatModel};
use super::gguf;
use super::kept::{KeptStates, WORKING};
use super::sampler::Sampler;
use super::template::{CallFormat, ChatTemplate, Message, ToolFunction};
use super::threads::ThreadShare;
use super::{fail, llama};
use crate::busy::thread_cpu_seconds;
use crate::{ModelError, require};

/// Tokens that end a reply in the families Confab runs, beside those llama.cpp marks as ending one.
const END_TOKENS: [&str; 5] = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"];

/// How much less likely a token the reply already holds becomes (llama.cpp's usual 1.1): without it the
/// 135M model talks itself into loops ("the opposite of the opposite of …" until the token bound).
pub const REPEAT_PENALTY: f32 = 1.1;

/// Nucleus sampling keeps the most probable tokens up to this much of the probability.
pub const TOP_P: f32 = 0.9;

/// The reply's last this many tokens are the ones penalised; the prompt's are not (an answer repeats the
/// question's words: "The capital of France is …").
pub const REPEAT_WINDOW: usize = 64;

/// Positions a context holds, across the working sequence and the kept states (fewer when the model was
/// trained on fewer). Qwen2.5-0.5B's cache costs 12 KiB a position: 96 MiB.
pub const CONTEXT_POSITIONS: u32 = 8192;

/// Tokens evaluated in one llama.cpp batch.
const BATCH: usize = 512;
/// Tokens read at a time while the model computes on fewer threads than cores (other inference holds
/// some), and for a short prompt: the model takes the cores back as soon as they are free rather than
/// reading the whole prompt on one thread, and the other inference of the same turn (the turn model's
/// verdict, asked while the question's prompt is read) waits at most one small batch for the cores.
const SHARED_BATCH: usize = 4;
/// A prompt this short (a question after a kept state) is read [`SHARED_BATCH`] tokens at a time; reading
/// a few tokens costs about as much per token in one batch as in several.
const SHORT_PROMPT: usize = 32;

/// The sampler's seed (a reply at a temperature above 0 is the same for the same prompt).
const SEED: u64 = 299_792_458;

pub struct ChatLm {
    name: String,
    model: &'static LlamaModel,
    context: LlamaContext<'static>,
    template: ChatTemplate,
    end_tokens: Vec<LlamaToken>,
    kept: KeptStates,
    batch: LlamaBatch<'static>,
    /// Prompt tokens evaluated by the last call, for tests and metrics.
    last_evaluated: usize,
    /// `context`'s own pointer, for what the binding does not offer (setting its threads).
    raw: Option<llama::RawContext>,
    threads: ThreadShare,
    /// The conversation just replied to, with the reply, and its tools: the next opening is still to be
    /// evaluated ahead of the user's next message ([`ChatLm::warm_after_reply`]).
    after_reply: Option<(Vec<Message>, Vec<ToolFunction>)>,
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

    /// The GGUF at `path`, known as `name`: any chat model llama.cpp loads. Its weights are shared with
    /// every other `ChatLm` of the same file in the process; the context (the cache) is this one's own.
    pub fn open(path: &Path, name: &str) -> Result<ChatLm, ModelError> {
        let header = gguf::header(path)?;
        let model =
            llama::model(path).map_err(|why| gguf::refused(path, format!("llama.cpp cannot load it: {why}")))?;
        let vocab = model.vocab();
        let token_text = |token: LlamaToken| {
            (token.0 >= 0).then(|| vocab.text(token).map(|t| t.to_string_lossy().into_owned())).flatten()
        };
        let bos = token_text(vocab.bos()).unwrap_or_default();
        let eos = token_text(vocab.eos()).unwrap_or_default();
        let template = ChatTemplate::new(header.chat_template.as_deref(), &bos, &eos)
            .map_err(|why| ModelError::Unsupported { path: path.display().to_string(), reason: why })?;
        let mut end_tokens: Vec<LlamaToken> = END_TOKENS
            .iter()
            .filter_map(|text| match vocab.tokenize(text.as_bytes(), false, true).as_slice() {
                [token] if vocab.is_control(*token) || vocab.is_eog(*token) => Some(*token),
                _ => None,
            })
            .collect();
        if vocab.eos().0 >= 0 && !end_tokens.contains(&vocab.eos()) {
            end_tokens.push(vocab.eos());
        }
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = cores as i32;
        let positions = CONTEXT_POSITIONS.min(model.n_ctx_train().max(256));
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(positions))
            .with_n_batch(BATCH as u32)
            .with_n_ubatch(BATCH as u32)
            .with_n_seq_max(KeptStates::SEQUENCES)
            .with_kv_unified(true)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            .with_no_perf(true);
        llama::clear_error();
        let context = model.new_context(llama::backend(), params).map_err(|err: LlamaContextLoadError| {
            fail(format!("cannot make a context: {}", llama::take_error().unwrap_or_else(|| err.to_string())))
        })?;
        let raw = llama::context_pointer(&context, threads);
        let threads = ThreadShare::new(cores, raw.is_some());
        let mut chat = ChatLm {
            name: name.to_string(),
            model,
            context,
            template,
            end_tokens,
            kept: KeptStates::default(),
            batch: LlamaBatch::new(BATCH, 1),
            last_evaluated: 0,
            raw,
            threads,
            after_reply: None,
        };
        // The first product prepares llama.cpp's kernels and buffers: at load, with the model, rather than
        // in the first call's first turn.
        if let Some(&token) = chat.end_tokens.first() {
            chat.evaluate(&[token], 0)?;
        }
        Ok(chat)
    }

    /// Whether the model can change its threads as the host's load changes (the binding's context pointer
    /// was confirmed: `llama::context_pointer`).
    pub fn threads_settable(&self) -> bool {
        self.raw.is_some()
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

    /// The tokens of `text`, special tokens (`<|im_start|>`) read as such; nothing added.
    fn encode(&self, text: &str) -> Vec<LlamaToken> {
        self.model.vocab().tokenize(text.as_bytes(), false, true)
    }

    /// The tokens every conversation `with(text)` makes begins with, whatever `text` is: two such prompts
    /// (with these tools), differing only in `text`, tokenized, up to their first difference. None when the
    /// template cannot render them.
    fn shared_prefix(&self, with: impl Fn(&str) -> Vec<Message>, tools: &[ToolFunction]) -> Option<Vec<LlamaToken>> {
        let render = |text: &str| self.template.render(&with(text), tools, true).ok().map(|t| self.encode(&t));
        let (a, b) = (render("\u{1}")?, render("\u{2}")?);
        let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        Some(a[..shared].to_vec()).filter(|tokens| !tokens.is_empty())
    }

    /// The text of a reply's token: special tokens written out (Qwen's `<tool_call>`, which the tool-call
    /// reader looks for), except the chat markers (`<|im_start|>`, `<|eot_id|>`, …), which are not text.
    fn piece(&self, token: LlamaToken) -> Vec<u8> {
        let vocab = self.model.vocab();
        let marker = vocab.is_control(token)
            && vocab
                .text(token)
                .and_then(|t| t.to_str().ok())
                .is_some_and(|t| t.starts_with("<|") && t.ends_with("|>"));
        if marker { Vec::new() } else { vocab.token_to_piece(token, true, None) }
    }

    /// Evaluates `tokens` in the working sequence after the `position` already there; the logits after
    /// the last of them. A cache too full for them is emptied of the kept states once.
    fn evaluate(&mut self, tokens: &[LlamaToken], position: usize) -> Result<Vec<f32>, ModelError> {
        let capacity = self.context.n_ctx() as usize;
        if position + tokens.len() > capacity {
            return Err(fail(format!(
                "the conversation needs {} positions; the model's context holds {capacity}",
                position + tokens.len()
            )));
        }
        let mut start = 0;
        while start < tokens.len() {
            let threads = self.threads.threads();
            let size =
                if threads < self.threads.cores() || tokens.len() <= SHORT_PROMPT { SHARED_BATCH } else { BATCH };
            let chunk = &tokens[start..(start + size).min(tokens.len())];
            let last_chunk = start + chunk.len() == tokens.len();
            self.batch.clear();
            for (i, &token) in chunk.iter().enumerate() {
                let wants_logits = last_chunk && i + 1 == chunk.len();
                self.batch.add(token, (position + start + i) as i32, &[WORKING], wants_logits).map_err(fail)?;
            }
            self.decode(threads)?;
            start += chunk.len();
        }
        Ok(self.context.get_logits_ith(self.batch.n_tokens() - 1).to_vec())
    }

    /// Decodes the batch on `threads` threads (those the host leaves the model now); a cache too full for
    /// it is emptied of the kept states once.
    fn decode(&mut self, threads: usize) -> Result<(), ModelError> {
        if let Some(raw) = &mut self.raw {
            raw.set_threads(threads as i32);
        }
        let cpu = thread_cpu_seconds();
        let decoded = match llama::decoding(|| self.context.decode(&mut self.batch)) {
            Ok(()) => Ok(()),
            Err(DecodeError::NoKvCacheSlot) => {
                self.kept.forget(&mut self.context);
                llama::decoding(|| self.context.decode(&mut self.batch)).map_err(fail)
            }
            Err(err) => Err(fail(err)),
        };
        self.threads.ran(threads, thread_cpu_seconds() - cpu);
        tracing::trace!(tokens = self.batch.n_tokens(), threads, "decoded");
        decoded
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
        self.warm_after_reply();
        let prompt = self.encode(&self.prompt(messages, tools)?);
        if prompt.is_empty() {
            return Err(fail("the prompt is empty"));
        }
        let mut sampler = Sampler::new(SEED, temperature, TOP_P);
        let mut position = self.kept.start(&mut self.context, &prompt);
        self.last_evaluated = prompt.len() - position;
        let mut logits = self.evaluate(&prompt[position..], position)?;
        position = prompt.len();
        self.kept.keep(&mut self.context, &prompt);
        // What the working sequence holds: the prompt, then each reply token once it is evaluated.
        let mut evaluated = prompt;
        let mut generated: Vec<u32> = Vec::with_capacity(max_tokens);
        let mut bytes: Vec<u8> = Vec::new();
        let mut emitted = 0;
        for step in 0..max_tokens {
            let recent = &generated[generated.len().saturating_sub(REPEAT_WINDOW)..];
            let next = LlamaToken(sampler.sample(&mut logits, recent, REPEAT_PENALTY) as i32);
            if self.end_tokens.contains(&next) || self.model.vocab().is_eog(next) {
                // The reply's state: the next turn's prompt begins with this prompt and this reply, and
                // (heard whole) the opening of the user's next message, evaluated after the reply is
                // reported done (`warm_after_reply`). A reply that calls a tool is followed by the tool's
                // result, not by the user.
                self.kept.keep(&mut self.context, &evaluated);
                let text = String::from_utf8_lossy(&bytes);
                if !self.calls_a_tool(&text, tools) {
                    let mut conversation = messages.to_vec();
                    conversation.push(Message::new("assistant", &text));
                    self.after_reply = Some((conversation, tools.to_vec()));
                }
                break;
            }
            generated.push(next.0 as u32);
            bytes.extend(self.piece(next));
            let text = String::from_utf8_lossy(&bytes);
            if let Some(cut) = stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                if cut > emitted && !on_text(&text[emitted..cut]) {
                    return Ok(());
                }
                break;
            }
            // Emit only whole characters; a multi-byte character may span tokens.
            if text.len() > emitted && !text.ends_with('\u{FFFD}') {
                if !on_text(&text[emitted..]) {
                    return Ok(());
                }
                emitted = text.len();
            }
            if step + 1 < max_tokens {
                logits = self.evaluate(&[next], position)?;
                position += 1;
                evaluated.push(next);
            }
        }
        Ok(())
    }

    /// Evaluates the opening of the user's next message after the last reply, if not done yet: the caller
    /// does it once the reply has been handed on (a reply whose last sentence waits for its end is not
    /// held back by it); `generate` does it first otherwise. Only time is saved by it: a failure is logged,
    /// not returned (a cache too full for the opening fails the next prompt the same way).
    pub fn warm_after_reply(&mut self) {
        if let Some((conversation, tools)) = self.after_reply.take()
            && let Err(err) = self.warm(&conversation, &tools)
        {
            tracing::debug!(error = %err, "the next message's opening is not evaluated ahead");
        }
    }

    /// Evaluates now what the next prompt will begin with — `messages` (a call's system message at its
    /// start; `generate` does it for the conversation and its reply when a reply ends) and the opening of the user's next message (in ChatML
    /// `<|im_start|>user\n`) — and keeps that state (unless a kept one holds it already): the next prompt
    /// then evaluates only the user's words and what follows them.
    pub fn warm(&mut self, messages: &[Message], tools: &[ToolFunction]) -> Result<(), ModelError> {
        let next_user = |text: &str| {
            let mut conversation = messages.to_vec();
            conversation.push(Message::new("user", text));
            conversation
        };
        match self.shared_prefix(next_user, tools) {
            Some(tokens) => self.evaluate_ahead(tokens),
            None => Ok(()),
        }
    }

    /// Whether the reply `text` calls one of `tools`, in the template's way of writing calls.
    fn calls_a_tool(&self, text: &str, tools: &[ToolFunction]) -> bool {
        !tools.is_empty()
            && match self.template.call_format() {
                CallFormat::None => false,
                CallFormat::Tagged => text.contains("<tool_call>"),
                CallFormat::BareJson => text.trim_start().starts_with('{'),
            }
    }

    /// Evaluates `tokens` from the kept state that holds most of them, and keeps their state.
    fn evaluate_ahead(&mut self, mut tokens: Vec<LlamaToken>) -> Result<(), ModelError> {
        // `start` leaves at least one token to evaluate: ask for a state one token longer than the prefix.
        tokens.push(LlamaToken(-1));
        let position = self.kept.start(&mut self.context, &tokens);
        tokens.pop();
        if position == tokens.len() {
            return Ok(());
        }
        self.evaluate(&tokens[position..], position)?;
        self.kept.keep(&mut self.context, &tokens);
        Ok(())
    }

    /// Prompt tokens the last call evaluated (the rest came from a kept state).
    pub fn last_evaluated(&self) -> usize {
        self.last_evaluated
    }

    /// Forgets every kept state (and the opening still to be evaluated after the last reply): the next
    /// prompt is evaluated whole.
    pub fn forget_prefixes(&mut self) {
        self.kept.forget(&mut self.context);
        self.after_reply = None;
    }
}
