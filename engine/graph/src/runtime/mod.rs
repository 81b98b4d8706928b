//! The runtime around the sans-IO core: named media threads that each run many sessions' audio front
//! ends on a 20 ms tick; a VAD thread that runs windows batched across every session with a window
//! ready; and a pool of turn-model threads sharing one queue. A media thread's work is one clockless step
//! (`MediaThread::tick`) that its thread paces on the wall clock; `SteppedRuntime` runs the same step with
//! the inference and agent work in line, for tests that step media time exactly, and for `confab simulate`.
//! Callers drive either through `CallRuntime`.
//!
//! Sessions live in reusable slots (`slots`): a `SessionId` is a slot and a generation, per-session
//! tables are arrays indexed by slot. A panic in any session's work or any inference call is contained
//! (`contain`): logged, counted in `RuntimeCounters::panics`, and the affected calls end with `call_ended`.
//!
//! On media threads: no allocation per frame, no locks, no logging per frame. Every queue is bounded;
//! each capacity below says what happens when it is full. tokio is not used here.

pub mod agent;
mod config;
mod contain;
mod counters;
mod event_outbox;
mod handle;
mod inference;
mod jobs;
mod media;
mod slots;
mod stepped;
mod threads;
mod turn_backlog;
mod wait_histogram;

pub use config::RuntimeConfig;
pub use counters::RuntimeCounters;
pub use event_outbox::EVENT_BACKLOG;
pub use handle::{CallRuntime, SessionHandle};
pub use media::{FRAME, INPUT_JITTER_BUFFER, TICK};
pub use slots::SessionId;
pub use stepped::SteppedRuntime;
pub use threads::Runtime;
pub use wait_histogram::WaitHistogram;

/// Per-session input ring, in 16 kHz samples (3 s: room for a browser's burst after a stall, and for
/// what a sender whose clock runs fast sends ahead: the headless browsers of the tests sent 4.6–6.6 % more than
/// real time, `docs/engine.md`). Full: the newest samples are dropped and counted.
pub const INPUT_RING_SAMPLES: usize = 48_000;
/// Per-session output ring, in 16 kHz samples (1 s). Full: rendered audio is dropped and counted.
pub const OUTPUT_RING_SAMPLES: usize = 16_000;
/// Per-session event queue. Full: later events wait in the session's outbox (`EventOutbox`, up to
/// `EVENT_BACKLOG` more, then dropped and counted); the media thread never waits for a consumer.
pub const EVENT_QUEUE: usize = 256;
/// Turn metrics waiting to be read; full: the newest are dropped (they are diagnostics, not records).
pub const TURN_METRICS_QUEUE: usize = 64;
/// VAD windows waiting for inference, across all sessions. Full: the window counts as silence, counted.
pub const VAD_QUEUE: usize = 8_192;
/// Turn-model requests waiting (in the queue from the media threads, and again in the turn threads'
/// backlog). Full: the oldest question gets no verdict, so its conservative max delay stands; counted.
pub const TURN_QUEUE: usize = 256;
/// Voice checks waiting for the voice thread, across all sessions (one per session per 640 ms of sound,
/// when the call tells the user's voice from others). Full: the check is dropped, counted.
pub const VOICE_QUEUE: usize = 256;
/// Commands to a media thread (open or close a session). Full: the caller waits.
pub const COMMAND_QUEUE: usize = 64;
/// Largest VAD batch one inference call runs.
pub const MAX_VAD_BATCH: usize = 256;
