//! The fleet: control-plane replicas (`confab serve --nats …`) and media workers (`confab worker`) over
//! NATS JetStream and PostgreSQL. What runs where:
//! - `dispatch` and `replica` run in a replica: calls become jobs on the work queue, offers are relayed
//!   to the worker that took the job, lost workers' calls are ended, webhooks are delivered.
//! - `worker` runs in a media worker: it takes jobs while it has free slots, claims conversations,
//!   answers offers and runs the calls (with `crate::media`).
//! - `protocol` is what both say to each other.

pub mod dispatch;
pub mod protocol;
pub mod replica;
pub mod worker;
