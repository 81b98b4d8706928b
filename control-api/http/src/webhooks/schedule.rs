//! When a failed delivery is tried again. Retries are bounded by time, not by count: an event is retried
//! for `retry_window` after it was stored (a day by default), on the schedule 1 s, 5 s, 30 s, 2 min, 10 min,
//! 30 min, then hourly (× `retry_unit`, ±20% jitter), like Svix and Stripe. A `Retry-After` is a lower
//! bound on the next delay: it can make the next attempt later, never sooner, and never ends the window
//! early. An attempt that fails after the window has closed fails the event for good; a scheduled delay
//! that would pass the window's end is cut to it, so the last try happens at the deadline (or, when a
//! `Retry-After` asks for later, then).

use std::time::{Duration, SystemTime};

/// The longest `Retry-After` honoured: a receiver cannot push an event past a day in one step.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// A `Retry-After` header's delay (RFC 9110 §10.2.3): delta-seconds or an HTTP-date, as seen at `now`;
/// a date in the past means no delay. Anything else (negative, fractional, garbage) is ignored (None).
/// The delay is capped at `MAX_RETRY_AFTER`, so any value is safe to add to a timestamp.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: too many of them is simply "a long time".
        value.parse::<u64>().map_or(MAX_RETRY_AFTER, Duration::from_secs)
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

/// Delays before each retry, in units of `retry_unit`; after the last, every `HOURLY` units.
pub const RETRY_SCHEDULE: [u32; 6] = [1, 5, 30, 120, 600, 1800];
pub const HOURLY: u32 = 3600;

/// The next attempt's time (Unix milliseconds) after attempt number `attempts` (1 for the first) failed
/// at `now_ms`, or None when the window has closed. `jitter` is in [0.8, 1.2].
pub fn next_attempt(
    created_ms: i64,
    now_ms: i64,
    attempts: i64,
    retry_after: Option<Duration>,
    retry_unit: Duration,
    retry_window: Duration,
    jitter: f64,
) -> Option<i64> {
    let deadline = created_ms + retry_window.as_millis() as i64;
    if now_ms >= deadline {
        return None;
    }
    let units = RETRY_SCHEDULE.get(attempts.max(1) as usize - 1).copied().unwrap_or(HOURLY);
    let planned = ((retry_unit * units).mul_f64(jitter).as_millis() as i64).min(deadline - now_ms);
    let asked = retry_after.map_or(0, |asked| asked.min(MAX_RETRY_AFTER).as_millis() as i64);
    Some(now_ms + planned.max(asked))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn retry_after_as_seconds_or_a_date_never_beyond_a_day() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 2015-10-21 07:28:00 GMT
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO), "in the past");
        assert_eq!(parse_retry_after("Thu, 22 Oct 2015 07:30:00 GMT", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("18446744073709551615", now), Some(MAX_RETRY_AFTER));
        for ignored in ["", "-1", "1.5", "soon", "+5", "0x10"] {
            assert_eq!(parse_retry_after(ignored, now), None, "{ignored:?}");
        }
        // The largest value still schedules within i64 milliseconds, a day later at most.
        let huge = parse_retry_after("18446744073709551615", now);
        assert_eq!(next_attempt(0, 0, 1, huge, SECOND, DAY, 1.0), Some(86_400_000));
        assert_eq!(next_attempt(0, 0, 1, Some(Duration::MAX), SECOND, DAY, 1.0), Some(86_400_000));
    }

    #[test]
    fn the_schedule_then_hourly_until_the_window_closes() {
        let delays: Vec<i64> =
            (1..=9).map(|n| next_attempt(0, 1_000, n, None, SECOND, DAY, 1.0).unwrap() - 1_000).collect();
        assert_eq!(delays, [1_000, 5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 3_600_000, 3_600_000]);
        // Jitter scales the planned delay.
        assert_eq!(next_attempt(0, 0, 2, None, SECOND, DAY, 0.8), Some(4_000));
        // The last try is moved to the deadline; after it, nothing.
        let day_ms = DAY.as_millis() as i64;
        assert_eq!(next_attempt(0, day_ms - 10, 40, None, SECOND, DAY, 1.0), Some(day_ms));
        assert_eq!(next_attempt(0, day_ms, 41, None, SECOND, DAY, 1.0), None);
    }

    #[test]
    fn retry_after_can_only_make_the_next_attempt_later() {
        // "Retry-After: 1" when the schedule says 30 s: 30 s.
        assert_eq!(next_attempt(0, 0, 3, Some(SECOND), SECOND, DAY, 1.0), Some(30_000));
        // "Retry-After: 120" when the schedule says 5 s: 120 s.
        assert_eq!(next_attempt(0, 0, 2, Some(120 * SECOND), SECOND, DAY, 1.0), Some(120_000));
        // Near the deadline the schedule is cut to it, a Retry-After is not.
        let day_ms = DAY.as_millis() as i64;
        assert_eq!(next_attempt(0, day_ms - 500, 9, Some(SECOND), SECOND, DAY, 1.0), Some(day_ms + 500));
        // A short Retry-After answered on every attempt never ends the window early: a hundred attempts in,
        // the event is still being retried, hourly.
        let mut now = 0;
        for attempt in 1..=20 {
            let next = next_attempt(0, now, attempt, Some(SECOND), SECOND, DAY, 1.0).expect("still in the window");
            assert!(next > now);
            now = next;
        }
        assert!(now < DAY.as_millis() as i64);
    }
}
