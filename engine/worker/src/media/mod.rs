//! The WebRTC transport: live conversations for browsers that join over WebRTC (and the pieces LiveKit's
//! transport, `crate::livekit`, builds on). `config` holds the worker's media settings; `peer` negotiates
//! a call's peer connection, `call` runs it, `face` draws and encodes the agent's face, `presence` decides
//! when its participant has left, `recorder` and `recording_slot` write its recording.

pub mod call;
pub mod config;
pub mod connection_watch;
pub mod face;
pub mod keyframe_requests;
pub mod peer;
pub mod presence;
pub mod recorder;
pub mod recording_slot;

pub use config::{
    CALLS_PER_CORE, CALLS_PER_CORE_WITHOUT_VNNI, DEFAULT_NO_MEDIA_TIMEOUT, MediaConfig, calls_per_core,
    default_max_calls,
};
