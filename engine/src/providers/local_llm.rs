//! The embedded language model (SmolLM2-135M-Instruct, candle) as a streaming `LanguageModel`. Generation
//! runs on the blocking pool; each piece of text is sent as it is decoded, and a dropped receiver stops
//! generation at the next token.
//!
//! One model per process and models directory, shared by every call: requests queue on it (one generation
//! at a time; on two cores a second would only halve both), and its kept prompt states (`SmolLm`) let a
//! conversation's next turn, and a new call with a known system prompt, skip the prompt already evaluated.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use confab_models::smollm::{SmolLm, Turn};
use tokio::sync::mpsc;

use super::llm::{ChatRequest, LanguageModel, LlmEvent, LlmStream};
use super::openai_llm::LLM_STREAM_CAPACITY;
use super::shared_model::{SharedModels, get_or_load};
use super::{CallMetrics, ProviderError};

#[derive(Clone)]
pub struct LocalLlm {
    model: Arc<Mutex<SmolLm>>,
}

impl LocalLlm {
    /// The process's model for `models_dir`, loaded on first use.
    pub fn load(models_dir: &Path) -> Result<LocalLlm, ProviderError> {
        static LOADED: OnceLock<SharedModels<PathBuf, Mutex<SmolLm>>> = OnceLock::new();
        let model = get_or_load(LOADED.get_or_init(Default::default), models_dir.to_path_buf(), || {
            SmolLm::load(models_dir).map(Mutex::new).map_err(|e| ProviderError::protocol("local-llm", e.to_string()))
        })?;
        Ok(LocalLlm { model })
    }
}

impl LanguageModel for LocalLlm {
    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (tx, rx) = mpsc::channel(LLM_STREAM_CAPACITY);
        let model = self.model.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut metrics = CallMetrics { attempts: 1, ..CallMetrics::default() };
            // SmolLM2 has no tool format: the assistant's tool-call messages (empty text) are left out,
            // tool results stay as `tool` turns.
            let turns: Vec<Turn> = request
                .messages
                .iter()
                .filter(|m| !m.content.is_empty() || m.tool_calls.is_empty())
                .map(|m| Turn { role: &m.role, content: &m.content })
                .collect();
            let Ok(mut model) = model.lock() else {
                let _ = tx.blocking_send(Err(ProviderError::protocol("local-llm", "the model panicked earlier")));
                return;
            };
            let mut on_text = |text: &str| {
                metrics.time_to_first.get_or_insert_with(|| started.elapsed());
                tx.blocking_send(Ok(LlmEvent::Text(text.to_string()))).is_ok()
            };
            let result = model.generate(
                &turns,
                request.max_tokens as usize,
                f64::from(request.temperature),
                &request.stop,
                &mut on_text,
            );
            metrics.duration = started.elapsed();
            let _ = match result {
                Ok(()) => tx.blocking_send(Ok(LlmEvent::Done { finish_reason: "stop".into(), metrics })),
                Err(err) => tx.blocking_send(Err(ProviderError::protocol("local-llm", err.to_string()))),
            };
        });
        rx
    }
}
