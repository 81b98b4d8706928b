//! One adapter per meeting platform: the selectors and texts of its web client's join flow, kept in one
//! file each so that a platform changing its page means editing one table. `driver.js` reads an adapter
//! (as JSON) to find the pre-join screen, the lobby, the call and its end.
//!
//! These tables match the platforms' pages as meeting-bot projects describe them and as this project's
//! fake platforms reproduce them; they are verified against those fakes only (docs/meetings.md says how
//! an operator checks a real platform).

pub mod google_meet;
pub mod teams;
pub mod zoom;

use serde::Serialize;

use super::platform::Platform;

/// How a platform's web client is driven. Texts are matched case-insensitively in the page's visible
/// text; selectors are CSS.
#[derive(Debug, Clone, Serialize)]
pub struct Adapter {
    /// Buttons clicked, when present, before the name is typed ("Continue on this browser").
    pub before_join: &'static [&'static str],
    /// The display-name field of the pre-join screen.
    pub name_input: &'static str,
    /// An e-mail field some pre-join screens show (filled with the agent's e-mail when it has one).
    pub email_input: Option<&'static str>,
    /// The button that asks to join (first one present is clicked, once the name is in).
    pub join_buttons: &'static [&'static str],
    /// Shown while waiting to be admitted.
    pub lobby_texts: &'static [&'static str],
    /// Shown when the host refused to admit the bot.
    pub refused_texts: &'static [&'static str],
    /// Present only while in the call (the leave button).
    pub in_call: &'static str,
    /// Buttons clicked, when present, once in the call ("Join Audio by Computer").
    pub after_join: &'static [&'static str],
    /// Shown when the meeting is over for everyone.
    pub ended_texts: &'static [&'static str],
    /// Shown when the bot was removed from the meeting.
    pub removed_texts: &'static [&'static str],
    /// One element per participant in the call, the bot included.
    pub participant: &'static str,
    /// The element naming whoever is speaking now (its text is the name).
    pub active_speaker: &'static str,
}

/// The adapter of `platform`.
pub fn adapter(platform: Platform) -> &'static Adapter {
    match platform {
        Platform::GoogleMeet => &google_meet::ADAPTER,
        Platform::Zoom => &zoom::ADAPTER,
        Platform::Teams => &teams::ADAPTER,
    }
}
