//! LiveKit's object ids: a kind prefix (`RM_` room, `PA_` participant, `TR_` track, `SG_` transcription
//! segment) and 12 random letters and digits. Clients check the prefixes (a participant id without `PA_`
//! makes LiveKit's Rust SDK panic), so every id Confab hands a LiveKit client is made here.

use rand::Rng;
use rand::distr::Alphanumeric;

pub const ROOM: &str = "RM_";
pub const PARTICIPANT: &str = "PA_";
pub const TRACK: &str = "TR_";
pub const SEGMENT: &str = "SG_";

/// A new id of the kind `prefix`.
pub fn new_id(prefix: &str) -> String {
    let suffix: String = rand::rng().sample_iter(Alphanumeric).take(12).map(char::from).collect();
    format!("{prefix}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_prefix_and_differ() {
        let (a, b) = (new_id(PARTICIPANT), new_id(PARTICIPANT));
        assert!(a.starts_with("PA_") && a.len() == 15, "{a}");
        assert_ne!(a, b);
        assert!(new_id(TRACK).starts_with("TR_"));
    }
}
