//! Provider health, shared by every call of the process: a provider that failed a request is skipped by
//! the next requests (of any call) for a backoff window, then one request probes it while the others
//! still skip; a success makes it healthy again. So one incident costs one request its deadline, not
//! every turn of every call. It also counts, per stage and provider, what `/metrics` reports: requests,
//! failures by reason, fallbacks taken, and the first-response latencies (drained at each scrape).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// First backoff after a failure; doubled for each further one in a row, up to `MAX_BACKOFF`.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(5);
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// First-response latencies kept between two scrapes (older ones are dropped beyond it).
const MAX_PENDING_LATENCIES: usize = 10_000;

/// Why a provider failed a request (the `reason` label of `/metrics`, and `turn_metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// It did not connect, or the connection broke before any answer.
    Connection,
    /// It answered with a retryable HTTP status (5xx).
    ServerError,
    /// It answered 429.
    RateLimited,
    /// It answered with a status that is not retryable, or with data that is not its protocol.
    Protocol,
    /// No first response within its `first_response_timeout`.
    Deadline,
    /// Its stream broke, or went silent, after it had begun answering.
    Broken,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Connection => "connection",
            FailureReason::ServerError => "server_error",
            FailureReason::RateLimited => "rate_limited",
            FailureReason::Protocol => "protocol",
            FailureReason::Deadline => "deadline",
            FailureReason::Broken => "broken",
        }
    }

    /// The reason of an error a provider returned before answering.
    pub fn of(error: &super::ProviderError) -> FailureReason {
        match error.status {
            Some(429) => FailureReason::RateLimited,
            Some(status) if status >= 500 => FailureReason::ServerError,
            Some(_) => FailureReason::Protocol,
            None if error.retryable => FailureReason::Connection,
            None => FailureReason::Protocol,
        }
    }
}

/// Whether a request may go to a provider now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It is healthy.
    Healthy,
    /// It failed, its backoff has passed, and this request is the one that probes it.
    Probe,
    /// It failed recently (or is being probed): skip it.
    Skip,
}

#[derive(Debug, Default)]
struct State {
    failures_in_a_row: u32,
    skip_until: Option<Instant>,
    probing: bool,
}

/// Counts of one stage's provider, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderCounts {
    pub requests: u64,
    /// Failures by reason.
    pub failures: HashMap<&'static str, u64>,
    /// Requests this provider served after another one before it had failed.
    pub fallbacks_served: u64,
    /// Requests skipped because it was backing off.
    pub skipped: u64,
}

/// A provider of one stage, as `/metrics` labels it: `stage` is `llm`, `stt` or `tts`; `provider` its
/// name and model (`openai:gpt-4o-mini`, `local:qwen2.5-0.5b-instruct`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderKey {
    pub stage: &'static str,
    pub provider: String,
}

#[derive(Default)]
struct Table {
    states: HashMap<ProviderKey, State>,
    counts: HashMap<ProviderKey, ProviderCounts>,
    latencies: Vec<(ProviderKey, f64)>,
}

/// The health of providers and their counts.
pub struct ProviderHealth {
    first_backoff: Duration,
    table: Mutex<Table>,
}

static PROCESS: LazyLock<Arc<ProviderHealth>> = LazyLock::new(|| Arc::new(ProviderHealth::new(FIRST_BACKOFF)));

/// The process's table, which every call's chains share.
pub fn process_health() -> Arc<ProviderHealth> {
    PROCESS.clone()
}

impl ProviderHealth {
    /// A table whose first backoff is `first_backoff` (tests use a short one).
    pub fn new(first_backoff: Duration) -> ProviderHealth {
        ProviderHealth { first_backoff, table: Mutex::new(Table::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether a request may go to `key` at `now` (a `Probe` must be followed by `succeeded`, `failed` or
    /// `abandoned`).
    pub fn admit(&self, key: &ProviderKey, now: Instant) -> Admission {
        let mut table = self.lock();
        let state = table.states.entry(key.clone()).or_default();
        let admission = match state.skip_until {
            None => Admission::Healthy,
            Some(until) if now >= until && !state.probing => {
                state.probing = true;
                Admission::Probe
            }
            Some(_) => Admission::Skip,
        };
        if admission == Admission::Skip {
            table.counts.entry(key.clone()).or_default().skipped += 1;
        }
        admission
    }

    /// The providers (`keys`, in a chain's order) to ask for one request, by index, with their
    /// admission: those admitted now, or every one (as healthy) when none is, so that a request is never
    /// refused for health alone.
    pub fn order<'a>(&self, keys: impl IntoIterator<Item = &'a ProviderKey>, now: Instant) -> Vec<(usize, Admission)> {
        let keys: Vec<&ProviderKey> = keys.into_iter().collect();
        let admitted: Vec<(usize, Admission)> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| (i, self.admit(key, now)))
            .filter(|(_, admission)| *admission != Admission::Skip)
            .collect();
        if admitted.is_empty() { (0..keys.len()).map(|i| (i, Admission::Healthy)).collect() } else { admitted }
    }

    /// A request went to `key` (`after_fallback`: another provider before it failed this request).
    pub fn requested(&self, key: &ProviderKey, after_fallback: bool) {
        let mut table = self.lock();
        let counts = table.counts.entry(key.clone()).or_default();
        counts.requests += 1;
        if after_fallback {
            counts.fallbacks_served += 1;
        }
    }

    /// `key` answered first after `latency`: healthy again.
    pub fn succeeded(&self, key: &ProviderKey, latency: Duration) {
        let mut table = self.lock();
        table.states.insert(key.clone(), State::default());
        if table.latencies.len() >= MAX_PENDING_LATENCIES {
            table.latencies.remove(0);
        }
        table.latencies.push((key.clone(), latency.as_secs_f64()));
    }

    /// `key` failed a request at `now`: skipped for a backoff that doubles with each failure in a row.
    pub fn failed(&self, key: &ProviderKey, reason: FailureReason, now: Instant) {
        let mut table = self.lock();
        let state = table.states.entry(key.clone()).or_default();
        state.failures_in_a_row = state.failures_in_a_row.saturating_add(1);
        let doublings = state.failures_in_a_row.saturating_sub(1).min(16);
        let backoff = (self.first_backoff * 2u32.pow(doublings)).min(MAX_BACKOFF.max(self.first_backoff));
        state.skip_until = Some(now + backoff);
        state.probing = false;
        *table.counts.entry(key.clone()).or_default().failures.entry(reason.as_str()).or_default() += 1;
    }

    /// A probing request ended without telling (it was cancelled): the next request probes instead.
    pub fn abandoned(&self, key: &ProviderKey) {
        if let Some(state) = self.lock().states.get_mut(key) {
            state.probing = false;
        }
    }

    /// Every provider's counts so far.
    pub fn counts(&self) -> Vec<(ProviderKey, ProviderCounts)> {
        let mut counts: Vec<_> = self.lock().counts.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        counts.sort_by(|a, b| a.0.cmp(&b.0));
        counts
    }

    /// The first-response latencies (seconds) recorded since the last call.
    pub fn take_latencies(&self) -> Vec<(ProviderKey, f64)> {
        std::mem::take(&mut self.lock().latencies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ProviderKey {
        ProviderKey { stage: "llm", provider: "openai:m".into() }
    }

    #[test]
    fn a_failed_provider_is_skipped_then_probed_once_then_healthy() {
        let health = ProviderHealth::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(health.admit(&key(), t0), Admission::Healthy);
        health.failed(&key(), FailureReason::ServerError, t0);
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(4)), Admission::Skip);
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(5)), Admission::Probe);
        // While the probe runs, the others still skip.
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(6)), Admission::Skip);
        health.succeeded(&key(), Duration::from_millis(300));
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(6)), Admission::Healthy);
        let counts = &health.counts()[0].1;
        assert_eq!((counts.skipped, counts.failures.get("server_error")), (2, Some(&1)));
        assert_eq!(health.take_latencies(), vec![(key(), 0.3)]);
    }

    #[test]
    fn failures_in_a_row_double_the_backoff_and_an_abandoned_probe_lets_another_probe() {
        let health = ProviderHealth::new(Duration::from_secs(5));
        let t0 = Instant::now();
        health.failed(&key(), FailureReason::Deadline, t0);
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(5)), Admission::Probe);
        health.failed(&key(), FailureReason::Deadline, t0 + Duration::from_secs(5));
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(14)), Admission::Skip);
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(15)), Admission::Probe);
        health.abandoned(&key());
        assert_eq!(health.admit(&key(), t0 + Duration::from_secs(15)), Admission::Probe);
    }
}
