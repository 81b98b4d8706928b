//! How a runtime is laid out: its threads, its session slots, where the models are, the I/O runtime the
//! agents' provider calls run on.

use std::path::PathBuf;

use super::EVENT_QUEUE;

/// Operator threads of a turn-model thread where the cores allow.
pub const TURN_MODEL_THREADS: usize = 2;

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub media_threads: usize,
    /// Sessions the runtime holds at once; a slot is free again when its session's call has ended.
    pub max_sessions: usize,
    pub models_dir: PathBuf,
    /// Threads ONNX Runtime may use inside one inference call.
    pub inference_intra_threads: usize,
    /// Turn-model threads (each with its own copy of the model, ~8 MB), sharing one queue of questions.
    /// One per core: the turn model is the runtime's largest cost per session.
    pub turn_threads: usize,
    /// Operator threads of each turn-model thread: two where there are two cores. A verdict is what a
    /// commit waits for, and it comes as the reply asked ahead reads its prompt: on two threads, with the
    /// language model waiting for it (it holds every core), a lone call's first audio came ~0.1 s sooner
    /// on two cores than on one (issue 52, docs/performance.md). Under load the verdicts of several calls
    /// share the cores as before (ONNX Runtime's operator threads sleep rather than spin while they wait).
    pub turn_model_threads: usize,
    /// The tokio runtime that runs the agents' provider calls (network I/O, local LLM/STT/TTS on its
    /// blocking pool); required to open sessions with a `Responder`.
    pub io: Option<tokio::runtime::Handle>,
    /// Each session's event queue (`EVENT_QUEUE`); tests make it short to play a consumer that falls behind.
    pub event_queue: usize,
}

impl RuntimeConfig {
    /// One media thread per core.
    pub fn new(models_dir: PathBuf, max_sessions: usize) -> RuntimeConfig {
        let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
        RuntimeConfig {
            media_threads: cores,
            max_sessions,
            models_dir,
            inference_intra_threads: 1,
            turn_threads: cores,
            turn_model_threads: cores.min(TURN_MODEL_THREADS),
            io: None,
            event_queue: EVENT_QUEUE,
        }
    }
}
