//! The embedded language models (Qwen2.5-Coder-0.5B-Instruct by default, or SmolLM2-135M-Instruct; candle)
//! as a streaming `LanguageModel`. Generation
//! runs on the blocking pool; each piece of text is sent as it is decoded, and a dropped receiver stops
//! generation at the next token.
//!
//! One model per process, models directory and model, shared by every call: requests queue on it (one
//! generation at a time; on two cores a second would only halve both), and its kept prompt states (`ChatLm`) let a
//! conversation's next turn, and a new call with a known system prompt, skip the prompt already evaluated.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use confab_models::chat_lm::{ChatLm, LocalChatModel, Turn};
use tokio::sync::mpsc;

use super::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, LlmStream, ToolSpec};
use super::local_tool_format::{self, CallScanner};
use super::openai_llm::LLM_STREAM_CAPACITY;
use super::shared_model::{SharedModels, get_or_load};
use super::{CallMetrics, ProviderError};

/// The local models by name, the default first.
pub const MODELS: [&str; 2] = [LocalChatModel::ALL[0].name(), LocalChatModel::ALL[1].name()];

#[derive(Clone)]
pub struct LocalLlm {
    model: Arc<Mutex<ChatLm>>,
    /// Which model it is, known without waiting for the model's lock (a generation may hold it for seconds).
    which: LocalChatModel,
}

impl LocalLlm {
    /// The process's copy of the model `name` names (the default when empty) for `models_dir`, loaded on
    /// first use.
    pub fn load(models_dir: &Path, name: &str) -> Result<LocalLlm, ProviderError> {
        static LOADED: OnceLock<SharedModels<(PathBuf, LocalChatModel), Mutex<ChatLm>>> = OnceLock::new();
        let which = if name.trim().is_empty() {
            LocalChatModel::DEFAULT
        } else {
            LocalChatModel::from_name(name).ok_or_else(|| {
                ProviderError::protocol(
                    "local-llm",
                    format!("no local language model is named {name:?}; use one of {MODELS:?}"),
                )
            })?
        };
        let model = get_or_load(LOADED.get_or_init(Default::default), (models_dir.to_path_buf(), which), || {
            ChatLm::load(models_dir, which)
                .map(Mutex::new)
                .map_err(|e| ProviderError::protocol("local-llm", e.to_string()))
        })?;
        Ok(LocalLlm { model, which })
    }

    /// The model's name.
    pub fn name(&self) -> &'static str {
        self.which.name()
    }

    /// The tools the model is given: all of `offered` for a model that calls tools, none for the others.
    fn given<'a, T>(&self, offered: &'a [T]) -> &'a [T] {
        if self.which.calls_tools() { offered } else { &[] }
    }
}

impl LanguageModel for LocalLlm {
    /// Evaluates the system message (with the tools, for a model that calls them) on the blocking pool, or
    /// a thread of its own outside a runtime, while the call sets up; a request that comes meanwhile waits
    /// for it, then starts after the system message.
    fn warm(&self, system_prompt: &str, tools: &[ToolSpec]) {
        let system = ChatMessage::new("system", system_prompt);
        let (_, system) = local_tool_format::turns([&system], self.given(tools)).remove(0);
        let model = self.model.clone();
        let warm = move || {
            let Ok(mut model) = model.lock() else { return };
            if let Err(err) = model.warm(&system) {
                tracing::warn!(error = %err, "the local language model could not evaluate the system prompt ahead");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(warm)),
            Err(_) => drop(std::thread::spawn(warm)),
        }
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (tx, rx) = mpsc::channel(LLM_STREAM_CAPACITY);
        let model = self.model.clone();
        let calls_tools = self.which.calls_tools();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut metrics = CallMetrics { attempts: 1, ..CallMetrics::default() };
            let Ok(mut model) = model.lock() else {
                let _ = tx.blocking_send(Err(ProviderError::protocol("local-llm", "the model panicked earlier")));
                return;
            };
            // Qwen is given the tools in its template's format; SmolLM2 has none and is offered none: an
            // assistant's tool-call message with no text is left out of its prompt.
            let tools = if calls_tools { request.tools.as_slice() } else { &[] };
            let messages = request
                .messages
                .iter()
                .filter(|m| !tools.is_empty() || !m.content.is_empty() || m.tool_calls.is_empty());
            let written = local_tool_format::turns(messages, tools);
            let turns: Vec<Turn> = written.iter().map(|(role, content)| Turn { role, content }).collect();
            let mut scanner = CallScanner::default();
            let mut on_text = |text: &str| {
                metrics.time_to_first.get_or_insert_with(|| started.elapsed());
                match scanner.push(text) {
                    Some(text) => tx.blocking_send(Ok(LlmEvent::Text(text))).is_ok(),
                    None => !tx.is_closed(),
                }
            };
            let result = model.generate(
                &turns,
                request.max_tokens as usize,
                f64::from(request.temperature),
                &request.stop,
                &mut on_text,
            );
            metrics.duration = started.elapsed();
            let (text, calls) = scanner.finish();
            let finish_reason = if calls.is_empty() { "stop" } else { "tool_calls" };
            let held = text.map(LlmEvent::Text).into_iter().chain(calls.into_iter().map(LlmEvent::ToolCall));
            let _ = match result {
                Ok(()) => held
                    .chain([LlmEvent::Done { finish_reason: finish_reason.into(), metrics }])
                    .try_for_each(|event| tx.blocking_send(Ok(event))),
                Err(err) => tx.blocking_send(Err(ProviderError::protocol("local-llm", err.to_string()))),
            };
        });
        rx
    }
}
