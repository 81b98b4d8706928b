//! Whether the participant is still in the call: the call supervisor's decision, without I/O. The
//! supervisor samples the peer connection's state and how long no audio has arrived, with the time
//! since the call started, and asks `Presence::check`; the answer depends on those inputs alone, so the
//! timeouts are tested exactly.

use std::time::Duration;

/// The peer connection as the supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Not connected yet (new, connecting) or connected.
    Up,
    /// ICE lost the path; it may come back.
    Disconnected,
    Failed,
    Closed,
}

/// Why the participant counts as gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    ConnectionFailed,
    ConnectionClosed,
    /// Disconnected for the whole no-media timeout.
    StayedDisconnected,
    /// No audio packet for the whole no-media timeout (connection up or not).
    NoMedia,
}

impl Departure {
    /// The reason logged when the participant leaves.
    pub fn reason(self) -> &'static str {
        match self {
            Departure::ConnectionFailed => "the connection failed",
            Departure::ConnectionClosed => "the connection closed",
            Departure::StayedDisconnected => "the connection stayed disconnected",
            Departure::NoMedia => "no media",
        }
    }
}

/// Tracks how long the connection has been disconnected and decides when the participant has left.
#[derive(Debug, Clone)]
pub struct Presence {
    no_media_timeout: Duration,
    disconnected_since: Option<Duration>,
}

impl Presence {
    pub fn new(no_media_timeout: Duration) -> Presence {
        Presence { no_media_timeout, disconnected_since: None }
    }

    /// One sample at `now` (time since the call started): the connection's state, and how long no audio
    /// has arrived (`silent_for`). `Some` once the participant has left; a failed or closed connection
    /// counts at once, a disconnection or silence only once it has lasted the whole no-media timeout.
    pub fn check(&mut self, now: Duration, connection: Connection, silent_for: Duration) -> Option<Departure> {
        self.disconnected_since = match connection {
            Connection::Disconnected => self.disconnected_since.or(Some(now)),
            _ => None,
        };
        match connection {
            Connection::Failed => Some(Departure::ConnectionFailed),
            Connection::Closed => Some(Departure::ConnectionClosed),
            _ if self.disconnected_since.is_some_and(|since| now - since >= self.no_media_timeout) => {
                Some(Departure::StayedDisconnected)
            }
            _ if silent_for >= self.no_media_timeout => Some(Departure::NoMedia),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn silence_counts_only_once_it_has_lasted_the_timeout() {
        let mut presence = Presence::new(TIMEOUT);
        assert_eq!(presence.check(ms(0), Connection::Up, ms(0)), None);
        assert_eq!(presence.check(ms(12_000), Connection::Up, ms(9_999)), None);
        assert_eq!(presence.check(ms(12_001), Connection::Up, ms(10_000)), Some(Departure::NoMedia));
        // Audio again resets it: the caller's `silent_for` is measured from the last packet.
        assert_eq!(presence.check(ms(12_200), Connection::Up, ms(20)), None);
    }

    #[test]
    fn a_disconnection_is_forgiven_until_it_has_lasted_the_timeout() {
        let mut presence = Presence::new(TIMEOUT);
        assert_eq!(presence.check(ms(1_000), Connection::Disconnected, ms(0)), None);
        assert_eq!(presence.check(ms(10_999), Connection::Disconnected, ms(0)), None);
        assert_eq!(presence.check(ms(11_000), Connection::Disconnected, ms(0)), Some(Departure::StayedDisconnected));
    }

    #[test]
    fn reconnecting_starts_the_disconnection_clock_afresh() {
        let mut presence = Presence::new(TIMEOUT);
        assert_eq!(presence.check(ms(1_000), Connection::Disconnected, ms(0)), None);
        assert_eq!(presence.check(ms(9_000), Connection::Up, ms(0)), None);
        assert_eq!(presence.check(ms(9_200), Connection::Disconnected, ms(0)), None);
        assert_eq!(presence.check(ms(19_199), Connection::Disconnected, ms(0)), None);
        assert_eq!(presence.check(ms(19_200), Connection::Disconnected, ms(0)), Some(Departure::StayedDisconnected));
    }

    #[test]
    fn a_failed_or_closed_connection_counts_at_once() {
        assert_eq!(Presence::new(TIMEOUT).check(ms(1), Connection::Failed, ms(0)), Some(Departure::ConnectionFailed));
        assert_eq!(Presence::new(TIMEOUT).check(ms(1), Connection::Closed, ms(0)), Some(Departure::ConnectionClosed));
    }

    #[test]
    fn silence_while_disconnected_still_ends_the_call() {
        let mut presence = Presence::new(TIMEOUT);
        assert_eq!(presence.check(ms(5_000), Connection::Disconnected, ms(5_000)), None);
        assert_eq!(presence.check(ms(10_000), Connection::Disconnected, ms(10_000)), Some(Departure::NoMedia));
    }
}
