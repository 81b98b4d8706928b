//! What the three provider chains (`llm_chain`, `stt_chain`, `tts_chain`) share: the record of which
//! provider served and which failed before it (`ServedBy`, kept for `turn_metrics` in a `ServedLog`),
//! a probe let go of (`ProbeGuard`), the race of a request and its hedge (`hedged`), and the wait for a
//! stream's next item within a deadline.

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};

use super::ProviderError;
use super::health::{FailureReason, ProviderHealth, ProviderKey};

/// Which provider served a request, and the providers that failed it before, with why (`provider` as
/// `/metrics` names it, `reason` a `FailureReason`'s name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServedBy {
    pub provider: String,
    pub fell_back: Vec<(String, &'static str)>,
}

impl ServedBy {
    /// Notes that `provider` failed the request for `reason` (and says so in the log, as `what`).
    pub fn failed(&mut self, stage: &'static str, provider: &str, reason: FailureReason, what: &str) {
        tracing::warn!(stage, %provider, reason = reason.as_str(), "provider {what}; asking the next");
        self.fell_back.push((provider.to_string(), reason.as_str()));
    }
}

/// What a chain served since it was last asked: `replace`d per request (the language model, whose
/// reply is one request) or `merge`d per request until `take`n (the voice, which says a reply sentence
/// by sentence; the recognizer).
#[derive(Debug, Default)]
pub struct ServedLog(Mutex<Option<ServedBy>>);

impl ServedLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<ServedBy>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn replace(&self, served: ServedBy) {
        *self.lock() = Some(served);
    }

    /// Adds one request's record: its provider (when one served) becomes the last provider, its
    /// failures follow the earlier ones.
    pub fn merge(&self, served: ServedBy) {
        let mut log = self.lock();
        let entry = log.get_or_insert_with(ServedBy::default);
        if !served.provider.is_empty() {
            entry.provider = served.provider;
        }
        entry.fell_back.extend(served.fell_back);
    }

    pub fn last(&self) -> Option<ServedBy> {
        self.lock().clone()
    }

    pub fn take(&self) -> Option<ServedBy> {
        self.lock().take()
    }
}

/// Tells the health table that a probing request was let go of (cancelled) unless it was `disarm`ed
/// after reporting.
pub struct ProbeGuard<'a> {
    health: &'a ProviderHealth,
    key: &'a ProviderKey,
    armed: bool,
}

impl<'a> ProbeGuard<'a> {
    /// Armed when the request is the one that probes `key`.
    pub fn new(health: &'a ProviderHealth, key: &'a ProviderKey, probe: bool) -> ProbeGuard<'a> {
        ProbeGuard { health, key, armed: probe }
    }

    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.health.abandoned(self.key);
        }
    }
}

/// Races a request (`first`, to link `a`) and its hedge (`second()`, to link `b`), which starts once
/// `after` has passed or as soon as `first` fails: the first success wins and the other is dropped
/// (which cancels it); a failure waits for the other. The outcomes in the order they came, ending with
/// the winner when there is one.
pub async fn hedged<T, E, A, F, B>(
    a: usize,
    first: A,
    after: Duration,
    b: usize,
    second: F,
) -> Vec<(usize, Result<T, E>)>
where
    A: Future<Output = Result<T, E>>,
    F: FnOnce() -> B,
    B: Future<Output = Result<T, E>>,
{
    let first_failed = Notify::new();
    let second = async {
        tokio::select! {
            _ = tokio::time::sleep(after) => {}
            _ = first_failed.notified() => {}
        }
        second().await
    };
    let (mut first, mut second) = (pin!(first), pin!(second));
    let (mut first_done, mut second_done) = (false, false);
    let mut outcomes = Vec::new();
    while !(first_done && second_done) {
        let (index, outcome) = tokio::select! {
            outcome = &mut first, if !first_done => {
                first_done = true;
                if outcome.is_err() {
                    first_failed.notify_one();
                }
                (a, outcome)
            }
            outcome = &mut second, if !second_done => {
                second_done = true;
                (b, outcome)
            }
        };
        let won = outcome.is_ok();
        outcomes.push((index, outcome));
        if won {
            break;
        }
    }
    outcomes
}

/// How a stream being passed on ended, once it had begun answering.
pub enum Relayed {
    /// It was done (or the receiver let go).
    Done,
    Broken(ProviderError),
}

/// The next piece of a `stage`'s stream that has begun answering; `Err` ends the relay: `Relayed::Done`
/// when the receiver (`tx`'s other end) let go, `Relayed::Broken` when the stream errs, closes before it
/// is done or (with `idle`) stays silent that long.
pub async fn next_piece<T, U>(
    stream: &mut mpsc::Receiver<Result<T, ProviderError>>,
    idle: Option<Duration>,
    tx: &mpsc::Sender<U>,
    stage: &'static str,
) -> Result<T, Relayed> {
    let received = tokio::select! {
        _ = tx.closed() => return Err(Relayed::Done),
        received = recv_within(stream, idle) => received,
    };
    match received {
        Some(Some(Ok(piece))) => Ok(piece),
        Some(Some(Err(error))) => Err(Relayed::Broken(error)),
        Some(None) => Err(Relayed::Broken(ProviderError::network(stage, "the stream closed before it was done"))),
        None => Err(Relayed::Broken(ProviderError::network(stage, "the stream went silent mid-answer"))),
    }
}

/// The next item of `stream` within `idle` (None when it passed; no limit without one).
pub async fn recv_within<T>(stream: &mut mpsc::Receiver<T>, idle: Option<Duration>) -> Option<Option<T>> {
    match idle {
        Some(idle) => tokio::time::timeout(idle, stream.recv()).await.ok(),
        None => Some(stream.recv().await),
    }
}

/// Sleeps until `at`; forever when there is no such time.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_hedge_starts_after_its_time_or_when_the_first_fails_and_the_first_success_wins() {
        let answer = |ms: u64, ok: bool| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if ok { Ok(ms) } else { Err(ms) }
        };
        // The first is slow: the hedge, started at 200 ms, answers at 300 ms.
        let started = tokio::time::Instant::now();
        assert_eq!(
            hedged(0, answer(2_000, true), Duration::from_millis(200), 1, || answer(100, true)).await,
            [(1, Ok(100))]
        );
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        // The first answers before the hedge's time: the hedge never starts.
        assert_eq!(
            hedged(0, answer(150, true), Duration::from_millis(200), 1, || answer(1, true)).await,
            [(0, Ok(150))]
        );
        // The first fails at 50 ms: the hedge starts at once, not at 200 ms.
        let started = tokio::time::Instant::now();
        let outcomes = hedged(0, answer(50, false), Duration::from_millis(200), 1, || answer(100, true)).await;
        assert_eq!(outcomes, [(0, Err(50)), (1, Ok(100))]);
        assert_eq!(started.elapsed(), Duration::from_millis(150));
        // Both fail: both outcomes, in the order they came.
        let outcomes = hedged(0, answer(500, false), Duration::from_millis(100), 1, || answer(100, false)).await;
        assert_eq!(outcomes, [(1, Err(100)), (0, Err(500))]);
    }

    #[test]
    fn a_merged_log_keeps_the_last_provider_and_every_failure_until_taken() {
        let log = ServedLog::default();
        log.merge(ServedBy { provider: "openai:tts-1".into(), fell_back: vec![] });
        log.merge(ServedBy { provider: "local:piper".into(), fell_back: vec![("openai:tts-1".into(), "deadline")] });
        log.merge(ServedBy { provider: String::new(), fell_back: vec![("local:piper".into(), "broken")] });
        let served = log.take().unwrap();
        assert_eq!(served.provider, "local:piper");
        assert_eq!(served.fell_back, vec![("openai:tts-1".into(), "deadline"), ("local:piper".into(), "broken")]);
        assert_eq!(log.take(), None);
    }
}
