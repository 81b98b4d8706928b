//! Which meeting platform a `meeting_url` belongs to, and the URL the bot opens for it. Only the three
//! platforms' own web addresses are recognised; anything else is refused before a conversation exists.

use url::Url;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    GoogleMeet,
    Zoom,
    Teams,
}

impl Platform {
    /// The name stored with the conversation (`meta_data.meeting.platform`) and used in logs.
    pub fn name(self) -> &'static str {
        match self {
            Platform::GoogleMeet => "google_meet",
            Platform::Zoom => "zoom",
            Platform::Teams => "teams",
        }
    }

    pub fn from_name(name: &str) -> Option<Platform> {
        [Platform::GoogleMeet, Platform::Zoom, Platform::Teams].into_iter().find(|p| p.name() == name)
    }
}

/// A recognised meeting: its platform and the page the bot opens (Zoom's `/j/<id>` becomes the web
/// client's `/wc/join/<id>`, which joins in the browser instead of offering the desktop app).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeetingUrl {
    pub platform: Platform,
    pub join_url: String,
}

/// Recognises `meeting_url`; None for a malformed URL or another site.
pub fn recognize(meeting_url: &str) -> Option<MeetingUrl> {
    let url = Url::parse(meeting_url.trim()).ok()?;
    if url.scheme() != "https" || !url.username().is_empty() || url.password().is_some() || url.port().is_some() {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    let segments: Vec<&str> = url.path_segments()?.filter(|s| !s.is_empty()).collect();
    let platform = if host == "meet.google.com" {
        matches!(segments.as_slice(), [code] if is_meet_code(code)).then_some(Platform::GoogleMeet)?
    } else if host == "zoom.us" || host.ends_with(".zoom.us") {
        let id = match segments.as_slice() {
            ["j", id] | ["wc", "join", id] | ["wc", id, "join"] => *id,
            _ => return None,
        };
        if !(9..=11).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut join = url.clone();
        join.set_path(&format!("/wc/join/{id}"));
        return Some(MeetingUrl { platform: Platform::Zoom, join_url: join.to_string() });
    } else if host == "teams.microsoft.com" {
        matches!(segments.as_slice(), ["l", "meetup-join", _, ..]).then_some(Platform::Teams)?
    } else if host == "teams.live.com" {
        matches!(segments.as_slice(), ["meet", id] if id.bytes().all(|b| b.is_ascii_digit()))
            .then_some(Platform::Teams)?
    } else {
        return None;
    };
    Some(MeetingUrl { platform, join_url: url.to_string() })
}

/// Google Meet's meeting codes: `abc-defg-hij`.
fn is_meet_code(code: &str) -> bool {
    let parts: Vec<&str> = code.split('-').collect();
    parts.len() == 3
        && [3, 4, 3]
            .iter()
            .zip(&parts)
            .all(|(len, part)| part.len() == *len && part.bytes().all(|b| b.is_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn platform(url: &str) -> Option<Platform> {
        recognize(url).map(|m| m.platform)
    }

    #[test]
    fn the_three_platforms_are_recognised() {
        assert_eq!(platform("https://meet.google.com/abc-defg-hij"), Some(Platform::GoogleMeet));
        assert_eq!(platform("https://meet.google.com/abc-defg-hij?authuser=0"), Some(Platform::GoogleMeet));
        assert_eq!(platform("https://us02web.zoom.us/j/85212345678?pwd=abc.1"), Some(Platform::Zoom));
        assert_eq!(platform("https://zoom.us/wc/join/852123456"), Some(Platform::Zoom));
        assert_eq!(platform("https://acme.zoom.us/wc/85212345678/join"), Some(Platform::Zoom));
        assert_eq!(
            platform("https://teams.microsoft.com/l/meetup-join/19%3ameeting_N2Y%40thread.v2/0?context=%7b%7d"),
            Some(Platform::Teams)
        );
        assert_eq!(platform("https://teams.live.com/meet/9381234567?p=abcdef"), Some(Platform::Teams));
    }

    #[test]
    fn zoom_links_open_the_web_client() {
        let meeting = recognize("https://us02web.zoom.us/j/85212345678?pwd=abc.1").unwrap();
        assert_eq!(meeting.join_url, "https://us02web.zoom.us/wc/join/85212345678?pwd=abc.1");
    }

    #[test]
    fn other_sites_and_malformed_urls_are_refused() {
        for url in [
            "",
            "meet.google.com/abc-defg-hij",
            "http://meet.google.com/abc-defg-hij",
            "https://meet.google.com/",
            "https://meet.google.com/abcdefghij",
            "https://meet.google.com/ABC-DEFG-HIJ",
            "https://meet.google.com.evil.example/abc-defg-hij",
            "https://user@meet.google.com/abc-defg-hij",
            "https://meet.google.com:8443/abc-defg-hij",
            "https://zoom.us/j/12",
            "https://zoom.us/j/85212345678x",
            "https://evilzoom.us/j/85212345678",
            "https://zoom.us/meeting/85212345678",
            "https://teams.microsoft.com/",
            "https://teams.live.com/meet/abc",
            "https://example.com/meet",
            "ftp://zoom.us/j/85212345678",
        ] {
            assert_eq!(platform(url), None, "{url}");
        }
    }
}
