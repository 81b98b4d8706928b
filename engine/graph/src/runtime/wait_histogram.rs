//! A lock-free histogram of waits (10 ms buckets up to 5 s, then one bucket for anything longer) that
//! the engine's threads record into without allocating, and that a reader turns into percentiles or
//! into cumulative counts at chosen edges (a Prometheus histogram).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Width of one bucket.
pub const BUCKET: Duration = Duration::from_millis(10);
/// Buckets below the overflow bucket: waits up to 5 s are told apart.
const BUCKETS: usize = 500;

pub struct WaitHistogram {
    /// `counts[i]` holds waits in `[i × BUCKET, (i + 1) × BUCKET)`; the last one everything longer.
    counts: [AtomicU64; BUCKETS + 1],
    /// The sum of every recorded wait, in nanoseconds.
    sum_nanos: AtomicU64,
}

impl Default for WaitHistogram {
    fn default() -> Self {
        WaitHistogram { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_nanos: AtomicU64::new(0) }
    }
}

impl std::fmt::Debug for WaitHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitHistogram")
            .field("count", &self.count())
            .field("p50", &self.quantile(0.5))
            .field("p95", &self.quantile(0.95))
            .finish()
    }
}

impl WaitHistogram {
    pub fn record(&self, wait: Duration) {
        let bucket = (wait.as_nanos() / BUCKET.as_nanos()).min(BUCKETS as u128) as usize;
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(wait.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// The sum of every recorded wait.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed))
    }

    /// How many recorded waits were shorter than `edge`, which is a multiple of `BUCKET` (rounded down
    /// to one otherwise) up to 5 s; at 5 s or more, every wait up to 5 s.
    pub fn count_below(&self, edge: Duration) -> u64 {
        let buckets = ((edge.as_nanos() / BUCKET.as_nanos()) as usize).min(BUCKETS);
        self.counts[..buckets].iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The upper edge of the bucket holding the `q`-quantile (0 < q ≤ 1) of the recorded waits, so the
    /// true value is at most one bucket below it; None when nothing was recorded, `Duration::MAX` when
    /// it lies in the overflow bucket.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        // The rank of the quantile among the sorted waits, 1-based (nearest rank).
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count.load(Ordering::Relaxed);
            if seen >= rank {
                return Some(if bucket == BUCKETS { Duration::MAX } else { BUCKET * (bucket as u32 + 1) });
            }
        }
        unreachable!("the rank is at most the total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_the_upper_edges_of_the_nearest_rank_buckets() {
        let histogram = WaitHistogram::default();
        assert_eq!(histogram.quantile(0.5), None);
        for millis in [0, 9, 10, 25, 25, 40, 99, 120, 4_999, 7_000] {
            histogram.record(Duration::from_millis(millis));
        }
        assert_eq!(histogram.count(), 10);
        assert_eq!(histogram.quantile(0.1), Some(Duration::from_millis(10))); // 0 ms
        assert_eq!(histogram.quantile(0.2), Some(Duration::from_millis(10))); // 9 ms
        assert_eq!(histogram.quantile(0.3), Some(Duration::from_millis(20))); // 10 ms
        assert_eq!(histogram.quantile(0.5), Some(Duration::from_millis(30))); // 25 ms
        assert_eq!(histogram.quantile(0.8), Some(Duration::from_millis(130))); // 120 ms
        assert_eq!(histogram.quantile(0.9), Some(Duration::from_millis(5_000))); // 4,999 ms
        assert_eq!(histogram.quantile(1.0), Some(Duration::MAX)); // 7 s: past the last bucket
        assert_eq!(histogram.sum(), Duration::from_millis(12_327));
        assert_eq!(histogram.count_below(Duration::from_millis(10)), 2);
        assert_eq!(histogram.count_below(Duration::from_millis(30)), 5);
        assert_eq!(histogram.count_below(Duration::from_millis(100)), 7);
        assert_eq!(histogram.count_below(Duration::from_secs(5)), 9);
        assert_eq!(histogram.count_below(Duration::from_secs(60)), 9);
    }
}
