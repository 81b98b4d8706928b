//! How a meeting bot takes part (`mode` of `POST /v1/ext/externalmeeting`): the request validates it,
//! the media worker turns it into the agent's reply rule.

/// `mode`: answers when addressed by name or wake phrase, or asked a question (the default).
pub const MODE_ADDRESSED: &str = "addressed";
/// `mode`: answers every turn, like a 1:1 call.
pub const MODE_ALWAYS: &str = "always";
/// `mode`: listens and transcribes, never speaks.
pub const MODE_OBSERVER: &str = "observer";
pub const MODES: &[&str] = &[MODE_ADDRESSED, MODE_ALWAYS, MODE_OBSERVER];
