//! How a runtime is laid out: its threads, its session slots, where the models are, the I/O runtime the
//! agents' provider calls run on.

use std::path::PathBuf;

use super::EVENT_QUEUE;

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
            io: None,
            event_queue: EVENT_QUEUE,
        }
    }
}
