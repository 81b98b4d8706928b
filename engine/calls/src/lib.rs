//! confab-calls: the seam between what holds calls (the media worker, in `confab serve` or a fleet's
//! `confab worker`) and what keeps their records and places them (the store, the HTTP side). It carries
//! no database and no HTTP:
//! - `placer`: `CallPlacer`, where the HTTP side places calls (the embedded worker or the fleet), with
//!   `JoinError` and the LiveKit join and signal-socket types;
//! - `records`: `CallRecords`, the port a call reads and writes its records through (a typed
//!   `SessionSpec` out of the conversation, events, turn metrics, claims, heartbeats in);
//! - `fleet_protocol` and `fleet_relay`: what replicas and workers say over NATS;
//! - `metrics`: the process's one Prometheus registry; `recordings`: where a call's recording lives.

pub mod fleet_protocol;
pub mod fleet_relay;
pub mod metrics;
pub mod placer;
pub mod recordings;
pub mod records;

pub use placer::{CallPlacer, IceServers, JoinError, LiveKitJoin, LocalCalls, SignalSocket};
pub use records::{CallEndHook, CallRecords, CallSummary, Claim, LOCAL_WORKER, RecordsError, SessionSpec, WorkerBeat};
