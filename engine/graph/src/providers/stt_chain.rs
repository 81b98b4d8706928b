//! An avatar's speech recognizers as a chain: the primary (`config.stt`) and its `fallbacks`, tried in
//! order for each utterance. A recognizer fails an utterance when it errs or gives no transcript within
//! its `first_response_timeout` (from the request, which is made as the user stops speaking); the next
//! is asked with the same audio. Recognizers that failed recently are skipped (`health`) unless every
//! one is; the last one asked runs on its adapter's own timeouts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ProviderError;
use super::health::{Admission, FailureReason, ProviderHealth, ProviderKey};
use super::select::Recognizer;

/// One recognizer of a chain.
pub struct SttLink {
    pub recognizer: Recognizer,
    pub key: ProviderKey,
    pub first_response: Duration,
}

/// The chain (shared by a call's clones of its recognizer).
pub struct SttChain {
    pub links: Vec<SttLink>,
    pub health: Arc<ProviderHealth>,
}

/// Tells the health table that a probe was let go of, unless it reported before.
struct ProbeGuard<'a> {
    health: &'a ProviderHealth,
    key: &'a ProviderKey,
    armed: bool,
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.health.abandoned(self.key);
        }
    }
}

impl SttChain {
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        let now = Instant::now();
        let mut order: Vec<(usize, Admission)> = (0..self.links.len())
            .map(|i| (i, self.health.admit(&self.links[i].key, now)))
            .filter(|(_, admission)| *admission != Admission::Skip)
            .collect();
        if order.is_empty() {
            order = (0..self.links.len()).map(|i| (i, Admission::Healthy)).collect();
        }
        let mut last_error = ProviderError::protocol("stt", "no recognizer to ask");
        for (position, &(index, admission)) in order.iter().enumerate() {
            let link = &self.links[index];
            let last = position + 1 == order.len();
            self.health.requested(&link.key, position > 0);
            let mut guard = ProbeGuard { health: &self.health, key: &link.key, armed: admission == Admission::Probe };
            let started = Instant::now();
            let result = match (!last).then_some(link.first_response) {
                Some(deadline) => tokio::time::timeout(deadline, Box::pin(link.recognizer.transcribe(audio)))
                    .await
                    .unwrap_or_else(|_| Err(ProviderError::network("stt", "no transcript in time"))),
                None => Box::pin(link.recognizer.transcribe(audio)).await,
            };
            guard.armed = false;
            match result {
                Ok(text) => {
                    self.health.succeeded(&link.key, started.elapsed());
                    return Ok(text);
                }
                Err(error) => {
                    let reason = if error.message == "no transcript in time" {
                        FailureReason::Deadline
                    } else {
                        FailureReason::of(&error)
                    };
                    tracing::warn!(provider = %link.key.provider, reason = reason.as_str(), "speech-to-text failed; asking the next");
                    self.health.failed(&link.key, reason, Instant::now());
                    last_error = error;
                }
            }
        }
        Err(last_error)
    }
}
