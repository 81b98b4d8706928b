//! The embedded language models (Qwen2.5-Coder-0.5B-Instruct by default, or SmolLM2-135M-Instruct; candle)
//! as a streaming `LanguageModel`. Each piece of text is sent as it is decoded, and a dropped receiver stops
//! generation at the next token.
//!
//! One model per process, models directory and model, shared by every call behind a bounded queue
//! (`model_queue`: one generation at a time, since on two cores a second would only halve both; at most
//! [`QUEUE_CAPACITY`] waiting; a request that finds it full gets a [`busy`] error at once; one whose stream
//! was dropped while it waited never starts). Its kept prompt states (`ChatLm`) let a conversation's next
//! turn, and a new call with a known system prompt, skip the prompt already evaluated.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use confab_models::chat_lm::{ChatLm, LocalChatModel, Turn};
use tokio::sync::mpsc;

use super::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, LlmStream, ToolSpec};
use super::local_tool_format::{self, CallScanner};
use super::model_queue::{Job, ModelQueue, QUEUE_CAPACITY, QueueCounters, Refused};
use super::openai_llm::LLM_STREAM_CAPACITY;
use super::shared_model::{SharedModels, get_or_load};
use super::{CallMetrics, ProviderError};

/// The local models by name, the default first.
pub const MODELS: [&str; 2] = [LocalChatModel::ALL[0].name(), LocalChatModel::ALL[1].name()];

/// What the queues of the process's local language models have done (for `/metrics`).
pub fn queue_counters() -> &'static QueueCounters {
    static COUNTERS: OnceLock<QueueCounters> = OnceLock::new();
    COUNTERS.get_or_init(QueueCounters::default)
}

/// The error of a request that found the model's queue full (retryable: the queue empties as replies end).
fn busy(which: LocalChatModel) -> ProviderError {
    ProviderError::network(
        "local-llm",
        format!("{} is busy: {QUEUE_CAPACITY} requests are already waiting for it", which.name()),
    )
}

#[derive(Clone)]
pub struct LocalLlm {
    queue: Arc<ModelQueue<ChatLm>>,
    which: LocalChatModel,
}

impl LocalLlm {
    /// The process's copy of the model `name` names (the default when empty) for `models_dir`, loaded on
    /// first use.
    pub fn load(models_dir: &Path, name: &str) -> Result<LocalLlm, ProviderError> {
        static LOADED: OnceLock<SharedModels<(PathBuf, LocalChatModel), ModelQueue<ChatLm>>> = OnceLock::new();
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
        let queue = get_or_load(LOADED.get_or_init(Default::default), (models_dir.to_path_buf(), which), || {
            let model =
                ChatLm::load(models_dir, which).map_err(|e| ProviderError::protocol("local-llm", e.to_string()))?;
            ModelQueue::start(model, &format!("confab-llm-{}", which.name()), queue_counters())
                .map_err(|e| ProviderError::protocol("local-llm", format!("cannot start the model's thread: {e}")))
        })?;
        Ok(LocalLlm { queue, which })
    }

    /// The model's name.
    pub fn name(&self) -> &'static str {
        self.which.name()
    }

    /// The tools the model is given: all of `offered` for a model that calls tools, none for the others.
    fn given<'a, T>(&self, offered: &'a [T]) -> &'a [T] {
        if self.which.calls_tools() { offered } else { &[] }
    }

    /// Why a job was refused, as the error its caller gets.
    fn refusal(&self, refused: Refused) -> ProviderError {
        match refused {
            Refused::Full => busy(self.which),
            Refused::Stopped => ProviderError::protocol("local-llm", "the model stopped after a panic"),
        }
    }
}

impl LanguageModel for LocalLlm {
    /// Queues the system message's evaluation (with the tools, for a model that calls them) while the call
    /// sets up; a request that comes meanwhile waits for it, then starts after the system message. Skipped
    /// when the queue is full: it only saves time.
    fn warm(&self, system_prompt: &str, tools: &[ToolSpec]) {
        let system = ChatMessage::new("system", system_prompt);
        let (_, system) = local_tool_format::turns([&system], self.given(tools)).remove(0);
        let warm = move |model: &mut ChatLm| {
            if let Err(err) = model.warm(&system) {
                tracing::warn!(error = %err, "the local language model could not evaluate the system prompt ahead");
            }
        };
        if let Err(refused) = self.queue.push(Job::new(warm, || true)) {
            tracing::debug!(error = %self.refusal(refused), "the system prompt is not evaluated ahead");
        }
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (tx, rx) = mpsc::channel(LLM_STREAM_CAPACITY);
        let calls_tools = self.which.calls_tools();
        let queued = Instant::now();
        let (refused_tx, read_tx) = (tx.clone(), tx.clone());
        let generate = move |model: &mut ChatLm| {
            let mut metrics = CallMetrics { attempts: 1, ..CallMetrics::default() };
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
                metrics.time_to_first.get_or_insert_with(|| queued.elapsed());
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
            metrics.duration = queued.elapsed();
            let (text, calls) = scanner.finish();
            let finish_reason = if calls.is_empty() { "stop" } else { "tool_calls" };
            let held = text.map(LlmEvent::Text).into_iter().chain(calls.into_iter().map(LlmEvent::ToolCall));
            let _ = match result {
                Ok(()) => held
                    .chain([LlmEvent::Done { finish_reason: finish_reason.into(), metrics }])
                    .try_for_each(|event| tx.blocking_send(Ok(event))),
                Err(err) => tx.blocking_send(Err(ProviderError::protocol("local-llm", err.to_string()))),
            };
        };
        // A request whose stream was dropped while it waited (a discarded reply) never starts.
        if let Err(refused) = self.queue.push(Job::new(generate, move || !read_tx.is_closed())) {
            let _ = refused_tx.try_send(Err(self.refusal(refused)));
        }
        rx
    }
}
