//! An avatar's speech recognizers as a chain: the primary (`config.stt`) and its `fallbacks`, tried in
//! order for each utterance. A recognizer fails an utterance when it errs or gives no transcript within
//! its `first_response_timeout` (from the request, which is made as the user stops speaking); the next
//! is asked with the same audio. Recognizers that failed recently are skipped (`health`) unless every
//! one is; the last one asked runs on its adapter's own timeouts.
//!
//! With `hedge_after`, when the first recognizer asked has not answered by then, the next one is asked
//! too; the first transcript is used and the other request dropped (its connection closed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ProviderError;
use super::chain::{ProbeGuard, ServedBy, hedged};
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
    pub hedge_after: Option<Duration>,
}

/// What asking one recognizer came to: its transcript, or why it failed.
type Asked = Result<String, (FailureReason, ProviderError)>;

impl SttChain {
    /// The transcript of `audio`, and which recognizer gave it after which failed.
    pub async fn transcribe(&self, audio: &[f32]) -> (Result<String, ProviderError>, ServedBy) {
        let order = self.health.order(self.links.iter().map(|link| &link.key), Instant::now());
        let mut served = ServedBy::default();
        let mut last_error = ProviderError::protocol("stt", "no recognizer to ask");
        let mut position = 0;
        while position < order.len() {
            let (index, admission) = order[position];
            let last = position + 1 == order.len();
            let hedge = self.hedge_after.filter(|_| position == 0 && !last);
            let first = self.ask(index, admission, last, position > 0, audio);
            let outcomes = match hedge {
                None => vec![(index, first.await)],
                Some(after) => {
                    let (next, next_admission) = order[1];
                    let next_last = order.len() == 2;
                    position += 1;
                    hedged(index, first, after, next, || self.ask(next, next_admission, next_last, false, audio)).await
                }
            };
            position += 1;
            for (index, outcome) in outcomes {
                match outcome {
                    Ok(text) => {
                        served.provider = self.links[index].key.provider.clone();
                        return (Ok(text), served);
                    }
                    Err((reason, error)) => {
                        served.failed("stt", &self.links[index].key.provider, reason, "failed an utterance");
                        last_error = error;
                    }
                }
            }
        }
        (Err(last_error), served)
    }

    /// Asks recognizer `index` for the transcript within its deadline (none when it is the `last`),
    /// keeping the health table.
    async fn ask(&self, index: usize, admission: Admission, last: bool, after_fallback: bool, audio: &[f32]) -> Asked {
        let link = &self.links[index];
        self.health.requested(&link.key, after_fallback);
        let mut guard = ProbeGuard::new(&self.health, &link.key, admission == Admission::Probe);
        let started = Instant::now();
        let transcript = Box::pin(link.recognizer.transcribe(audio));
        let of = |error: ProviderError| (FailureReason::of(&error), error);
        let result = match (!last).then_some(link.first_response) {
            Some(deadline) => match tokio::time::timeout(deadline, transcript).await {
                Ok(result) => result.map_err(of),
                Err(_) => Err((FailureReason::Deadline, ProviderError::network("stt", "no transcript in time"))),
            },
            None => transcript.await.map_err(of),
        };
        guard.disarm();
        match &result {
            Ok(_) => self.health.succeeded(&link.key, started.elapsed()),
            Err((reason, _)) => self.health.failed(&link.key, *reason, Instant::now()),
        }
        result
    }
}
