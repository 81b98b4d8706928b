//! A webhook receiver's `Retry-After`, through to the next attempt's time: any header value gives a delay
//! of at most a day (or none), and the schedule never overflows or goes back in time.
#![no_main]

use std::time::{Duration, SystemTime};

use confab_http::webhooks::schedule::{MAX_RETRY_AFTER, next_attempt, parse_retry_after};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else { return };
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_000);
    let asked = parse_retry_after(value, now);
    if let Some(delay) = asked {
        assert!(delay <= MAX_RETRY_AFTER);
    }
    let now_ms = 1_764_000_000_000;
    for attempts in [1, 2, 7, 1_000] {
        let day = Duration::from_secs(86_400);
        if let Some(at) = next_attempt(now_ms - 5_000, now_ms, attempts, asked, Duration::from_secs(1), day, 1.2) {
            assert!(at >= now_ms, "the next attempt is not in the past");
            assert!(at <= now_ms + 2 * 86_400_000, "nor more than two days away");
        }
    }
});
