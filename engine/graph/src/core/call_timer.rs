//! The max-call-duration timers: a warning shortly before `config.maxCallDuration`, and the timeout at it,
//! which ends the call.
//!
//! "Shortly before" is 30 seconds before the limit, or half-way through calls of 60 seconds or less.

use super::super::time::MediaTime;

/// How long before the limit the warning fires (for limits over twice this).
pub const WARNING_LEAD: MediaTime = MediaTime::from_millis(30_000);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallTimerOutput {
    Warning { at: MediaTime, max: MediaTime },
    Timeout { at: MediaTime, max: MediaTime },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    BeforeWarning,
    BeforeTimeout,
    Done,
}

#[derive(Debug)]
pub struct CallTimer {
    max: MediaTime,
    warning_at: MediaTime,
    state: State,
}

impl CallTimer {
    pub fn new(max: MediaTime) -> CallTimer {
        let lead = if max.0 > 2 * WARNING_LEAD.0 { WARNING_LEAD } else { MediaTime(max.0 / 2) };
        CallTimer { max, warning_at: max - lead, state: State::BeforeWarning }
    }

    pub fn poll_timeout(&self) -> Option<MediaTime> {
        match self.state {
            State::BeforeWarning => Some(self.warning_at),
            State::BeforeTimeout => Some(self.max),
            State::Done => None,
        }
    }

    /// Fires what is due at `now`, at most one output per call (call again until `None`).
    pub fn handle_timeout(&mut self, now: MediaTime) -> Option<CallTimerOutput> {
        match self.state {
            State::BeforeWarning if now >= self.warning_at => {
                self.state = State::BeforeTimeout;
                Some(CallTimerOutput::Warning { at: self.warning_at, max: self.max })
            }
            State::BeforeTimeout if now >= self.max => {
                self.state = State::Done;
                Some(CallTimerOutput::Timeout { at: self.max, max: self.max })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> MediaTime {
        MediaTime::from_millis(v * 1000)
    }

    #[test]
    fn warns_thirty_seconds_before_and_times_out_at_the_limit() {
        let mut t = CallTimer::new(s(300));
        assert_eq!(t.poll_timeout(), Some(s(270)));
        assert_eq!(t.handle_timeout(s(269)), None);
        assert_eq!(t.handle_timeout(s(270)), Some(CallTimerOutput::Warning { at: s(270), max: s(300) }));
        assert_eq!(t.poll_timeout(), Some(s(300)));
        assert_eq!(t.handle_timeout(s(301)), Some(CallTimerOutput::Timeout { at: s(300), max: s(300) }));
        assert_eq!(t.poll_timeout(), None);
    }

    #[test]
    fn short_calls_warn_half_way() {
        let mut t = CallTimer::new(s(40));
        assert_eq!(t.handle_timeout(s(100)), Some(CallTimerOutput::Warning { at: s(20), max: s(40) }));
        assert_eq!(t.handle_timeout(s(100)), Some(CallTimerOutput::Timeout { at: s(40), max: s(40) }));
    }
}
