//! Media time: a count of samples at the engine's internal 16 kHz rate since the session began. All
//! conversational logic runs on it; only the runtime reads clocks, and converts at its edge.

use std::ops::{Add, Sub};
use std::time::Duration;

/// The engine's internal sample rate.
pub const SAMPLE_RATE: u32 = 16_000;
const SAMPLES_PER_MS: u64 = SAMPLE_RATE as u64 / 1000;

/// An instant or a span on the media clock, in 16 kHz samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MediaTime(pub u64);

impl MediaTime {
    pub const ZERO: MediaTime = MediaTime(0);

    pub const fn from_samples(samples: u64) -> MediaTime {
        MediaTime(samples)
    }

    pub const fn from_millis(millis: u64) -> MediaTime {
        MediaTime(millis.saturating_mul(SAMPLES_PER_MS))
    }

    /// Rounds to the nearest sample.
    pub fn from_duration(duration: Duration) -> MediaTime {
        MediaTime((duration.as_nanos() * u128::from(SAMPLE_RATE) / 1_000_000_000) as u64)
    }

    /// Rounds to the nearest sample; negative and non-finite values become zero.
    pub fn from_secs_f64(seconds: f64) -> MediaTime {
        if seconds.is_finite() && seconds > 0.0 {
            MediaTime((seconds * f64::from(SAMPLE_RATE)).round() as u64)
        } else {
            MediaTime::ZERO
        }
    }

    pub const fn samples(self) -> u64 {
        self.0
    }

    pub fn as_duration(self) -> Duration {
        let rate = u64::from(SAMPLE_RATE);
        Duration::from_secs(self.0 / rate) + Duration::from_nanos(self.0 % rate * 1_000_000_000 / rate)
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / f64::from(SAMPLE_RATE)
    }

    pub fn saturating_sub(self, other: MediaTime) -> MediaTime {
        MediaTime(self.0.saturating_sub(other.0))
    }
}

impl Add for MediaTime {
    type Output = MediaTime;
    /// Saturates: a deadline past the end of the clock (an agent's `maxCallDuration` of 1e300 seconds) is
    /// "never", not an overflow.
    fn add(self, other: MediaTime) -> MediaTime {
        MediaTime(self.0.saturating_add(other.0))
    }
}

impl Sub for MediaTime {
    type Output = MediaTime;
    /// Saturates at zero: a span never goes negative.
    fn sub(self, other: MediaTime) -> MediaTime {
        self.saturating_sub(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_the_clock_saturates() {
        // Found by the `agent_json` fuzz target: maxCallDuration 1e300 s overflowed `now + duration`.
        let never = MediaTime::from_secs_f64(1e300);
        assert_eq!(never, MediaTime(u64::MAX));
        assert_eq!(MediaTime::from_millis(5) + never, never);
        assert_eq!(never.as_duration(), Duration::from_secs(u64::MAX / 16_000) + Duration::from_nanos(975_937_500));
        assert_eq!(MediaTime::from_millis(u64::MAX), never);
        assert_eq!(MediaTime::from_millis(1_500).as_duration(), Duration::from_millis(1_500));
    }

    #[test]
    fn conversions_are_exact_on_sample_boundaries() {
        assert_eq!(MediaTime::from_millis(500).samples(), 8000);
        assert_eq!(MediaTime::from_secs_f64(0.5), MediaTime::from_millis(500));
        assert_eq!(MediaTime::from_duration(Duration::from_millis(32)).samples(), 512);
        assert_eq!(MediaTime(8000).as_duration(), Duration::from_millis(500));
        assert_eq!(MediaTime(4000).as_secs_f64(), 0.25);
        assert_eq!(MediaTime(10) - MediaTime(20), MediaTime::ZERO);
    }
}
