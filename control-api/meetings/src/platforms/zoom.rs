//! Zoom's web client (`https://<sub>.zoom.us/wc/join/<id>`; `/j/<id>` links are opened there): type a
//! name, "Join", wait in the waiting room, then join the audio by computer.

use super::Adapter;

pub const ADAPTER: Adapter = Adapter {
    before_join: &["Accept Cookies", "I Agree"],
    name_input: "#input-for-name",
    email_input: Some("#input-for-email"),
    join_buttons: &["Join"],
    lobby_texts: &["Please wait, the meeting host will let you in soon", "Waiting for the host to start"],
    refused_texts: &["The host has removed you from the waiting room", "You cannot join this meeting"],
    in_call: r#"button[aria-label="Leave"]"#,
    after_join: &["Join Audio by Computer"],
    ended_texts: &["This meeting has been ended by host", "The meeting has ended"],
    removed_texts: &["You have been removed from this meeting", "The host has removed you"],
    participant: ".participants-item",
    active_speaker: ".speaker-active-container .video-avatar__avatar-name",
};
