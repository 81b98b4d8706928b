//! Each provider's requests, failures by reason, fallbacks served, skips and first-response latency,
//! per stage, from the engine's process-wide health table (`confab_engine::providers::health`), mirrored
//! when the page is scraped. The `provider` label is the provider that was asked (`openai:gpt-4o-mini`,
//! `local:qwen2.5-0.5b-instruct`, `custom@NAME:model` for a named endpoint), not the one configured first.

use confab_engine::providers::health::ProviderHealth;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use super::mirrors::register;

/// Seconds to a provider's first response.
const FIRST_RESPONSE_BUCKETS: &[f64] = &[0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0];

pub(super) struct ProviderSeries {
    requests: IntCounterVec,
    failures: IntCounterVec,
    fallbacks: IntCounterVec,
    skipped: IntCounterVec,
    first_response: HistogramVec,
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(registry, IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
}

impl ProviderSeries {
    pub(super) fn new(registry: &Registry) -> ProviderSeries {
        let stage = &["stage", "provider"];
        ProviderSeries {
            requests: counter(registry, "confab_provider_requests_total", "Requests sent to each provider of each stage (llm, stt, tts).", stage),
            failures: counter(
                registry,
                "confab_provider_failures_total",
                "Requests a provider failed, by reason: connection, server_error, rate_limited, protocol, deadline (no first response within first_response_timeout), broken (mid-stream).",
                &["stage", "provider", "reason"],
            ),
            fallbacks: counter(
                registry,
                "confab_provider_fallbacks_total",
                "Requests a provider was asked because one before it in the stage's chain (config fallbacks) had failed them.",
                stage,
            ),
            skipped: counter(
                registry,
                "confab_provider_skipped_total",
                "Requests that skipped a provider because it had failed recently (its backoff had not passed, or another request was probing it).",
                stage,
            ),
            first_response: register(
                registry,
                HistogramVec::new(
                    HistogramOpts::new(
                        "confab_provider_first_response_seconds",
                        "Seconds from a request to the provider's first response (LLM: first token; TTS: first audio; STT: the transcript).",
                    )
                    .buckets(FIRST_RESPONSE_BUCKETS.to_vec()),
                    stage,
                )
                .expect("valid metric"),
            ),
        }
    }

    /// Brings the series up to the health table's counts and observes the latencies recorded since.
    pub(super) fn mirror(&self, health: &ProviderHealth) {
        for (key, counts) in health.counts() {
            let labels = [key.stage, key.provider.as_str()];
            for (series, total) in [
                (&self.requests, counts.requests),
                (&self.fallbacks, counts.fallbacks_served),
                (&self.skipped, counts.skipped),
            ] {
                let counter = series.with_label_values(&labels);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
            for (reason, total) in counts.failures {
                let counter = self.failures.with_label_values(&[key.stage, key.provider.as_str(), reason]);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
        }
        for (key, seconds) in health.take_latencies() {
            self.first_response.with_label_values(&[key.stage, key.provider.as_str()]).observe(seconds);
        }
    }
}
