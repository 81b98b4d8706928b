//! Microsoft Teams' web client (`teams.microsoft.com/l/meetup-join/…`, `teams.live.com/meet/…`): continue
//! in the browser, type a name, "Join now", wait in the lobby.

use super::Adapter;

pub const ADAPTER: Adapter = Adapter {
    before_join: &["Continue on this browser", "Join on the web instead"],
    name_input: r#"input[data-tid="prejoin-display-name-input"]"#,
    email_input: None,
    join_buttons: &["Join now"],
    lobby_texts: &[
        "Someone in the meeting should let you in soon",
        "We've let people in the meeting know you're waiting",
    ],
    refused_texts: &["Sorry, but you were denied access to the meeting", "You've been denied access"],
    in_call: "button#hangup-button",
    after_join: &[],
    ended_texts: &["The meeting has ended", "This meeting has ended"],
    removed_texts: &["You've been removed from this meeting", "Someone removed you from the meeting"],
    participant: r#"[data-tid="roster-participant"]"#,
    active_speaker: r#"[data-tid="roster-participant"][data-speaking="true"] [data-tid="roster-name"]"#,
};
