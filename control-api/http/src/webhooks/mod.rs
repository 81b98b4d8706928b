//! Webhooks: the 11 conversation events to the agent's `callback_url`, only those in `callback_events`,
//! in SPEC.md's envelope, from a durable outbox.
//!
//! Every event is stored before it is sent, so a crash or restart loses none. The deliverer sends, per
//! conversation, the oldest pending event first (order is kept); each conversation goes on its own, so a
//! slow receiver delays only its own conversation's events. A delivery is claimed with a lease
//! (`lease_until`, compare-and-set), so several deliverers (control-plane replicas) can share one
//! outbox and each row is sent by one of them at a time; a crashed deliverer's lease runs out and another
//! takes the row. Network errors, timeouts, 5xx and 429 are retried for a day (`schedule`); any other 4xx
//! or an address the SSRF guard refuses marks the event failed, and the next one goes. Each delivery is
//! signed (Standard Webhooks); a redelivery keeps its `webhook-id`.

pub use confab_engine::outbound::guard as ssrf;
pub use confab_engine::outbound::signing;

pub mod config;
pub mod deliverer;
pub mod schedule;

pub use config::WebhookConfig;
pub use deliverer::{Deliverer, MAX_IN_FLIGHT};
