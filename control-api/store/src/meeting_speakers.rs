//! Who is speaking in each meeting, as the platform's page shows it: the bot sets it about four times a
//! second, and a user transcript entry recorded in this process takes the name (`speaker`). In a fleet,
//! the call's transcript is written by the media worker, which does not see the page: no names there.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

fn table() -> &'static Mutex<HashMap<String, String>> {
    static SPEAKERS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    SPEAKERS.get_or_init(Default::default)
}

/// Records who speaks now in the meeting of `conversation_id` (None: nobody shown; the last name stays).
pub fn set(conversation_id: &str, speaker: Option<String>) {
    if let Some(name) = speaker {
        table().lock().unwrap_or_else(|e| e.into_inner()).insert(conversation_id.to_string(), name);
    }
}

/// The last speaker shown in the meeting of `conversation_id`.
pub fn current(conversation_id: &str) -> Option<String> {
    table().lock().unwrap_or_else(|e| e.into_inner()).get(conversation_id).cloned()
}

pub fn forget(conversation_id: &str) {
    table().lock().unwrap_or_else(|e| e.into_inner()).remove(conversation_id);
}
