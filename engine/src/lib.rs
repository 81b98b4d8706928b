//! confab-engine: the streaming graph that runs live conversations. It knows nothing of HTTP or SQL;
//! the control plane talks to it through the session API and consumes its event stream.

pub mod events;

pub use events::{ConversationEvent, EVENT_NAMES, EventKind};
