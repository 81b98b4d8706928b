//! Google Meet's web client (`https://meet.google.com/abc-defg-hij`), as a signed-out guest: type a name,
//! "Ask to join", wait for a participant to admit the bot.

use super::Adapter;

pub const ADAPTER: Adapter = Adapter {
    before_join: &["Got it", "Dismiss"],
    name_input: r#"input[aria-label="Your name"]"#,
    email_input: None,
    join_buttons: &["Ask to join", "Join now"],
    lobby_texts: &["Asking to be let in", "You'll join the call when someone lets you in"],
    refused_texts: &["Someone in the call denied your request to join", "You can't join this call"],
    in_call: r#"button[aria-label="Leave call"]"#,
    after_join: &[],
    ended_texts: &["The call has ended", "You left the meeting"],
    removed_texts: &["You've been removed from the meeting", "You have been removed from the meeting"],
    participant: "[data-participant-id]",
    active_speaker: "[data-participant-id][data-speaking=\"true\"] [data-self-name]",
};
