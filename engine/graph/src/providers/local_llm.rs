//! The local language models (Qwen2.5-Coder-0.5B-Instruct by default, SmolLM2-135M-Instruct, or a GGUF
//! file of the user's; llama.cpp) as a streaming `LanguageModel`. Each piece of text is sent as it is
//! decoded, and a dropped receiver stops generation at the next token. The process's default model is the
//! embedded one unless `--local-llm` names a file ([`set_default_model`]); [`check`] says at an agent's
//! creation whether the model it names can be run. A file an agent names is read only from the models
//! directory and the directories the operator allows ([`set_allowed_model_dirs`], [`places`]); the
//! operator's `--local-llm` may be any file.
//!
//! One model per process, models directory and model, shared by every call behind a bounded queue
//! (`model_queue`: one generation at a time, since on two cores a second would only halve both; at most
//! [`QUEUE_CAPACITY`] waiting; a request that finds it full gets a [`busy`] error at once; one whose stream
//! was dropped while it waited never starts). Its kept prompt states (`ChatLm`) let a conversation's next
//! turn, and a new call with a known system prompt, skip the prompt already evaluated.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use confab_models::ModelError;
use confab_models::chat_lm::template::{Message, ToolFunction};
use confab_models::chat_lm::{CallFormat, ChatLm, ChatModelChoice, LocalChatModel, ModelPlaces, gguf};
use tokio::sync::mpsc;

use super::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, LlmStream, ToolSpec};
use super::local_tool_format::{self, CallScanner};
use super::model_queue::{Job, ModelQueue, QUEUE_CAPACITY, QueueCounters, Refused};
use super::openai_llm::LLM_STREAM_CAPACITY;
use super::shared_model::{SharedModels, get_or_load};
use super::{CallMetrics, ProviderError};

/// The embedded models by name, the embedded default first.
pub const MODELS: [&str; 2] = [LocalChatModel::ALL[0].name(), LocalChatModel::ALL[1].name()];

static DEFAULT_MODEL: OnceLock<String> = OnceLock::new();
static ALLOWED_MODEL_DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Makes `model` (a GGUF's path or name, as agents name one) the process's default local model: what an
/// agent created without naming one runs, and what a call runs when its agent names none. Set once, at
/// start (`--local-llm`); later calls change nothing and return false.
pub fn set_default_model(model: &str) -> bool {
    DEFAULT_MODEL.set(model.trim().to_string()).is_ok()
}

/// The process's default local model: `--local-llm`'s, else the embedded default.
pub fn default_model() -> &'static str {
    DEFAULT_MODEL.get().map_or(MODELS[0], String::as_str)
}

/// Whether the operator named a file as the default (`--local-llm`) instead of the embedded default.
pub fn default_is_operator_file() -> bool {
    DEFAULT_MODEL.get().is_some_and(|model| LocalChatModel::from_name(model).is_none())
}

/// Adds `dirs` to the places an agent may name a GGUF file in, beside the models directory
/// (`--allow-model-dir`). Set once, at start; later calls change nothing and return false.
pub fn set_allowed_model_dirs(dirs: Vec<PathBuf>) -> bool {
    ALLOWED_MODEL_DIRS.set(dirs).is_ok()
}

/// Where an agent may name a GGUF file: `models_dir` and the directories the operator allows.
pub fn places(models_dir: &Path) -> ModelPlaces {
    ModelPlaces::new(models_dir, ALLOWED_MODEL_DIRS.get().map_or(&[], Vec::as_slice))
}

/// The model an agent's `name` names. Empty, or the operator's default spelled as the operator spelled
/// it, is the operator's choice (any file); so is an absolute path to the default's file (agents stored
/// with it before defaults were kept unnamed). Every other name is found only in [`places`].
fn choose(models_dir: &Path, name: &str) -> Result<ChatModelChoice, ModelError> {
    let name = name.trim();
    if name.is_empty() || name == default_model() {
        return ChatModelChoice::resolve_operator(models_dir, default_model());
    }
    ChatModelChoice::resolve(&places(models_dir), name).or_else(|refused| {
        match ChatModelChoice::resolve_operator(models_dir, default_model()) {
            Ok(ChatModelChoice::File(default)) if Path::new(name).is_absolute() && same_file(&default, name) => {
                Ok(ChatModelChoice::File(default))
            }
            _ => Err(refused),
        }
    })
}

fn same_file(path: &Path, other: &str) -> bool {
    matches!((path.canonicalize(), Path::new(other).canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// Whether the model an agent's `name` names can be run: an embedded model's name, or a GGUF file (in the
/// places an agent may name one) of an architecture, tokenizer and chat template Confab runs (its header is
/// read, not its weights). Err: why not, for the person who named it, naming the model as they did.
pub fn check(models_dir: &Path, name: &str) -> Result<(), String> {
    let shown = if name.trim().is_empty() { default_model() } else { name.trim() };
    match choose(models_dir, name).map_err(|err| err.to_string())? {
        ChatModelChoice::Embedded(_) => Ok(()),
        ChatModelChoice::File(path) => gguf::inspect(&path).map(|_| ()).map_err(|err| match err {
            ModelError::Unsupported { reason, .. } => format!("{shown} cannot be used: {reason}"),
            other => other.to_string(),
        }),
    }
}

/// Whether the operator's `--local-llm` can be run: any GGUF file the process can read (by an absolute
/// path, or inside `models_dir`), or an embedded model's name. Err: why not.
pub fn check_default(models_dir: &Path, name: &str) -> Result<(), String> {
    match ChatModelChoice::resolve_operator(models_dir, name).map_err(|err| err.to_string())? {
        ChatModelChoice::Embedded(_) => Ok(()),
        ChatModelChoice::File(path) => gguf::inspect(&path).map(|_| ()).map_err(|err| err.to_string()),
    }
}

/// What the queues of the process's local language models have done (for `/metrics`).
pub fn queue_counters() -> &'static QueueCounters {
    static COUNTERS: OnceLock<QueueCounters> = OnceLock::new();
    COUNTERS.get_or_init(QueueCounters::default)
}

/// The error of a request that found the model's queue full (retryable: the queue empties as replies end).
fn busy(name: &str) -> ProviderError {
    ProviderError::network("local-llm", format!("{name} is busy: {QUEUE_CAPACITY} requests are already waiting for it"))
}

/// A loaded model's queue, with what the calls need to know of it.
struct Loaded {
    queue: ModelQueue<ChatLm>,
    name: String,
    call_format: CallFormat,
}

#[derive(Clone)]
pub struct LocalLlm {
    loaded: Arc<Loaded>,
}

impl LocalLlm {
    /// The process's copy of the model `name` names (the process's default when empty) for `models_dir`,
    /// loaded on first use.
    pub fn load(models_dir: &Path, name: &str) -> Result<LocalLlm, ProviderError> {
        static LOADED: OnceLock<SharedModels<(PathBuf, ChatModelChoice), Loaded>> = OnceLock::new();
        let failed = |err: ModelError| ProviderError::protocol("local-llm", err.to_string());
        let choice = choose(models_dir, name).map_err(failed)?;
        let loaded =
            get_or_load(LOADED.get_or_init(Default::default), (models_dir.to_path_buf(), choice.clone()), || {
                let model = ChatLm::load_choice(models_dir, &choice).map_err(failed)?;
                let (name, call_format) = (model.name().to_string(), model.call_format());
                let queue = ModelQueue::start(model, &format!("confab-llm-{name}"), queue_counters()).map_err(|e| {
                    ProviderError::protocol("local-llm", format!("cannot start the model's thread: {e}"))
                })?;
                Ok(Loaded { queue, name, call_format })
            })?;
        Ok(LocalLlm { loaded })
    }

    /// The model's name (an embedded model's, or its file's).
    pub fn name(&self) -> &str {
        &self.loaded.name
    }

    /// Why a job was refused, as the error its caller gets.
    fn refusal(&self, refused: Refused) -> ProviderError {
        match refused {
            Refused::Full => busy(&self.loaded.name),
            Refused::Stopped => ProviderError::protocol("local-llm", "the model stopped after a panic"),
        }
    }
}

/// The model's messages and tools for a request's: a model whose template takes tools is given them; one
/// whose template has none (SmolLM2) is offered none, and an assistant's tool-call message with no text is
/// left out of its prompt.
fn prompt_parts(
    call_format: CallFormat,
    messages: &[ChatMessage],
    tools: &[ToolSpec],
) -> (Vec<Message>, Vec<ToolFunction>) {
    let calls_tools = call_format != CallFormat::None;
    let tools = local_tool_format::functions(if calls_tools { tools } else { &[] });
    let messages = local_tool_format::messages(
        messages.iter().filter(|m| calls_tools || !m.content.is_empty() || m.tool_calls.is_empty()),
    );
    (messages, tools)
}

/// The longest the model waits, after a piece of text, for the reader to take it.
const HAND_OVER: Duration = Duration::from_millis(1);

/// Waits (at most [`HAND_OVER`]) until the reader has taken what was sent: a sentence the text completes
/// then goes to the voice, which holds the cores, before the model starts its next token beside it.
fn wait_until_taken(tx: &mpsc::Sender<Result<LlmEvent, ProviderError>>) {
    let since = Instant::now();
    while tx.capacity() < tx.max_capacity() && since.elapsed() < HAND_OVER {
        std::thread::sleep(Duration::from_micros(50));
    }
}

impl LanguageModel for LocalLlm {
    /// Queues the evaluation of what the next request begins with (`messages`, the tools, the opening of the
    /// user's next message) while the call sets up or the user is yet to speak; a request that comes
    /// meanwhile waits for it, then starts after it. Skipped when the queue is full: it only saves time.
    fn warm(&self, messages: &[ChatMessage], tools: &[ToolSpec]) {
        let (messages, tools) = prompt_parts(self.loaded.call_format, messages, tools);
        let warm = move |model: &mut ChatLm| {
            if let Err(err) = model.warm(&messages, &tools) {
                tracing::warn!(error = %err, "the local language model could not evaluate the next prompt's beginning ahead");
            }
        };
        if let Err(refused) = self.loaded.queue.push(Job::new(warm, || true)) {
            tracing::debug!(error = %self.refusal(refused), "the next prompt's beginning is not evaluated ahead");
        }
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (tx, rx) = mpsc::channel(LLM_STREAM_CAPACITY);
        let call_format = self.loaded.call_format;
        let queued = Instant::now();
        let (refused_tx, read_tx) = (tx.clone(), tx.clone());
        let generate = move |model: &mut ChatLm| {
            let mut metrics = CallMetrics { attempts: 1, ..CallMetrics::default() };
            let (messages, tools) = prompt_parts(call_format, &request.messages, &request.tools);
            let mut scanner = CallScanner::new(call_format);
            let mut on_text = |text: &str| {
                metrics.time_to_first.get_or_insert_with(|| queued.elapsed());
                match scanner.push(text) {
                    Some(text) => {
                        let read = tx.blocking_send(Ok(LlmEvent::Text(text))).is_ok();
                        if read {
                            wait_until_taken(&tx);
                        }
                        read
                    }
                    None => !tx.is_closed(),
                }
            };
            let result = model.generate(
                &messages,
                &tools,
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
            // In the reply's own job (a job still queued when the process exits could run into ggml's
            // teardown), after the reply is out.
            model.warm_after_reply();
        };
        // A request whose stream was dropped while it waited (a discarded reply) never starts.
        if let Err(refused) = self.loaded.queue.push(Job::new(generate, move || !read_tx.is_closed())) {
            let _ = refused_tx.try_send(Err(self.refusal(refused)));
        }
        rx
    }

    fn free_for_early_request(&self) -> bool {
        // Behind the reply being written, if any, but never ahead of another call's waiting request.
        let free = self.loaded.queue.none_waiting();
        if !free {
            queue_counters().early_deferred.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        free
    }
}
