//! How the deliverer sends: private addresses allowed or not, timeouts, the retry unit and window, the
//! lease margin and the polling interval.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Deliver to loopback and private addresses (tests, local development).
    pub allow_private: bool,
    /// Time for one delivery attempt, connection to answer.
    pub request_timeout: Duration,
    /// The unit of `schedule::RETRY_SCHEDULE` (a second in production).
    pub retry_unit: Duration,
    /// How long after it was stored an event is still retried.
    pub retry_window: Duration,
    /// A claimed delivery is leased for `request_timeout` plus this; a deliverer that dies mid-delivery
    /// holds its rows that long, then another deliverer sends them again (same `webhook-id`).
    pub lease_margin: Duration,
    /// How often the deliverer looks for due events when not woken.
    pub poll_interval: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            allow_private: false,
            request_timeout: Duration::from_secs(10),
            retry_unit: Duration::from_secs(1),
            retry_window: Duration::from_secs(24 * 3600),
            lease_margin: Duration::from_secs(5),
            poll_interval: Duration::from_millis(500),
        }
    }
}
