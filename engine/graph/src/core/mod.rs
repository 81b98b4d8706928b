//! The sans-IO conversational core: one plain state machine per concern. Each takes inputs stamped with
//! media time and yields outputs; none reads a clock, sleeps, allocates per frame or does I/O. After any
//! input, drain `poll_output` until it returns `None`, then ask `poll_timeout` when to call
//! `handle_timeout` next.

pub mod backchannel;
pub mod call_timer;
pub mod endpoint;
pub mod interruption;
pub mod other_voices;
pub mod playout;
pub mod presets;
pub mod vad_gate;

/// Identifies one user turn (one committed utterance and the agent's reply to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TurnId(pub u64);

/// Bumped by every interruption; anything stamped with an older epoch is stale and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(pub u64);
