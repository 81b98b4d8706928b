//! confab-engine: the streaming graph that runs live conversations. It knows nothing of HTTP or SQL;
//! the control plane talks to it through the session API and consumes its event stream.
//!
//! - `core`: the sans-IO state machines (VAD gating, endpointing, interruption, playout, call timers).
//! - `events`: the 11 conversation events and their webhook envelope.

pub mod actions;
pub mod agent_spec;
pub mod audio;
pub mod avatar;
pub mod conversation;
pub mod core;
pub mod events;
pub mod knowledge;
pub mod lock;
pub mod outbound;
pub mod pipeline_config;
pub mod priority;
pub mod providers;
pub mod responder;
pub mod runtime;
pub mod session_driver;
pub mod simulate;
pub mod time;
pub mod turn_metrics;
pub mod video;
pub mod word_error;

pub use events::{ConversationEvent, EVENT_NAMES, EventKind};
pub use time::MediaTime;
