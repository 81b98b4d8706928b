//! Prometheus metrics at `GET /metrics` (text exposition format 0.0.4): HTTP requests by route and
//! status, each live turn's stage latencies by provider, live sessions, the engine's media counters and
//! its turn model's waits (`turn_wait`), the embedded language models' queues and webhook deliveries.
//! One registry per process (`metrics()`); the engine's and queues' counters and the session gauges are
//! read when the page is scraped. Every series is listed in docs/api.md ("Metrics").

mod mirrors;
mod provider_health;
mod providers;
mod registry;
mod turn_wait;

pub use providers::Providers;
pub use registry::{Metrics, metrics};
