//! Providers: the engine's ears, mind and voice. Speech-to-text, language models and text-to-speech are
//! streaming, cancellable calls selected by the agent's `provider`/`model` strings.
//!
//! One policy for every adapter (this module): timeouts, a `retryable` flag on errors (4xx never
//! retried), retries only before the first byte of a stream, and metrics per call. Cancellation is by
//! dropping the receiving end of a stream: the adapter's task sees it at once and closes the
//! connection rather than draining it.

pub mod chain;
pub mod continuation;
pub mod deepgram;
pub mod env;
pub mod health;
pub mod llm;
pub mod llm_chain;
pub mod local_llm;
pub mod local_stt;
pub mod local_tool_format;
pub mod model_queue;
pub mod openai_audio;
pub mod openai_llm;
pub mod piper_tts;
pub mod select;
pub mod sentences;
pub mod shared_model;
pub mod sse;
pub mod stt_chain;
pub mod tts;
pub mod tts_chain;
pub mod websocket;
pub mod ws_tts;

use std::time::Duration;

/// What went wrong in a provider call, and whether trying again could help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{provider}: {message}")]
pub struct ProviderError {
    pub provider: &'static str,
    pub message: String,
    /// HTTP status, when the provider answered with one.
    pub status: Option<u16>,
    /// Network errors, timeouts, 5xx and 429 are retryable; other 4xx and bad data are not.
    pub retryable: bool,
}

impl ProviderError {
    pub fn from_status(provider: &'static str, status: u16, body: &str) -> ProviderError {
        let retryable = status == 429 || status >= 500;
        let detail: String = body.chars().take(300).collect();
        ProviderError { provider, message: format!("HTTP {status}: {detail}"), status: Some(status), retryable }
    }

    pub fn network(provider: &'static str, message: impl Into<String>) -> ProviderError {
        ProviderError { provider, message: message.into(), status: None, retryable: true }
    }

    pub fn protocol(provider: &'static str, message: impl Into<String>) -> ProviderError {
        ProviderError { provider, message: message.into(), status: None, retryable: false }
    }
}

/// Timeouts and retries shared by every adapter.
#[derive(Debug, Clone, Copy)]
pub struct CallPolicy {
    pub connect_timeout: Duration,
    /// From sending the request to the first byte of the answer.
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks of a stream.
    pub idle_timeout: Duration,
    /// Attempts after the first, only for retryable errors before any output.
    pub retries: u32,
    pub backoff: Duration,
    /// No attempt starts later than this after the request (its stage's `first_response_timeout`: a
    /// retry past the deadline is the next provider's job).
    pub retry_window: Option<Duration>,
    /// Whether a 429 is retried on the same provider (not when a fallback follows: it falls over at once).
    pub retry_rate_limited: bool,
}

impl CallPolicy {
    /// The policy of a provider in a stage's chain: when a fallback follows (`has_next`), no retry at
    /// all (an error falls over to it at once, and the health table spares the next requests the failed
    /// provider); else retries only within `deadline`.
    pub fn in_chain(deadline: Duration, has_next: bool) -> CallPolicy {
        let defaults = CallPolicy::default();
        CallPolicy {
            retries: if has_next { 0 } else { defaults.retries },
            retry_window: Some(deadline),
            retry_rate_limited: !has_next,
            ..defaults
        }
    }

    /// Whether to try again after `error` on attempt `attempts` (1 for the first), `elapsed` after the
    /// request, before waiting `backoff`.
    pub fn retry_after(&self, error: &ProviderError, attempts: u32, elapsed: Duration, backoff: Duration) -> bool {
        error.retryable
            && attempts <= self.retries
            && (self.retry_rate_limited || error.status != Some(429))
            && self.retry_window.is_none_or(|window| elapsed + backoff < window)
    }
}

impl Default for CallPolicy {
    fn default() -> Self {
        CallPolicy {
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(20),
            retries: 2,
            backoff: Duration::from_millis(250),
            retry_window: None,
            retry_rate_limited: true,
        }
    }
}

/// Measured for each call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallMetrics {
    /// Time to the first token (LLM), byte of audio (TTS) or partial transcript (STT).
    pub time_to_first: Option<Duration>,
    pub duration: Duration,
    pub attempts: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_with_a_fallback_never_retries_and_the_last_retries_only_within_its_deadline() {
        let (server, limited) = (ProviderError::from_status("x", 503, ""), ProviderError::from_status("x", 429, ""));
        let backoff = Duration::from_millis(250);
        let with_next = CallPolicy::in_chain(Duration::from_secs(2), true);
        assert!(!with_next.retry_after(&server, 1, Duration::ZERO, backoff));
        assert!(!with_next.retry_after(&limited, 1, Duration::ZERO, backoff));
        let last = CallPolicy::in_chain(Duration::from_secs(2), false);
        assert!(last.retry_after(&server, 1, Duration::ZERO, backoff));
        assert!(last.retry_after(&limited, 2, Duration::from_millis(500), backoff));
        assert!(!last.retry_after(&server, 1, Duration::from_millis(1_800), backoff), "past the deadline");
        assert!(!last.retry_after(&server, 3, Duration::ZERO, backoff), "two retries at most");
        assert!(!last.retry_after(&ProviderError::from_status("x", 400, ""), 1, Duration::ZERO, backoff));
    }
}
