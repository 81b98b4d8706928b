//! HTTP routes, one module per resource; each exposes `router()`.

pub mod agents;
pub mod auth_conversation;
pub mod conversations;
pub mod guardrails;
pub mod join;
pub mod knowledge;
pub mod livekit;
pub mod mcp;
pub mod meetings;
pub mod sessions;
pub mod templates;
pub mod tools;
pub mod webrtc;
