//! `confab_turn_wait_seconds`: the engine's question → verdict waits of the turn model (a lock-free
//! histogram of 10 ms buckets the turn threads record into), shown to Prometheus as a histogram with a
//! few bucket edges, built when the page is scraped.

use std::time::Duration;

use confab_engine::runtime::WaitHistogram;
use prometheus::proto::{Bucket, Histogram, Metric, MetricFamily, MetricType};

pub const NAME: &str = "confab_turn_wait_seconds";
const HELP: &str = "Time from an end-of-turn question to the turn model's verdict (queue wait and inference).";

/// Bucket edges in milliseconds: each a multiple of the engine's 10 ms buckets, so the counts are exact
/// (a bucket counts the waits shorter than its edge).
const EDGES_MS: &[u64] = &[20, 50, 100, 200, 300, 500, 750, 1_000, 2_000, 3_000, 5_000];

/// The histogram family for `waits` (empty when the process runs no media).
pub fn family(waits: Option<&WaitHistogram>) -> MetricFamily {
    let mut histogram = Histogram::default();
    let buckets = EDGES_MS
        .iter()
        .map(|&edge| {
            let mut bucket = Bucket::default();
            bucket.set_upper_bound(edge as f64 / 1_000.0);
            bucket.set_cumulative_count(waits.map_or(0, |w| w.count_below(Duration::from_millis(edge))));
            bucket
        })
        .collect();
    histogram.set_bucket(buckets);
    histogram.set_sample_count(waits.map_or(0, WaitHistogram::count));
    histogram.set_sample_sum(waits.map_or(0.0, |w| w.sum().as_secs_f64()));
    let mut metric = Metric::default();
    metric.set_histogram(histogram);
    let mut family = MetricFamily::default();
    family.set_name(NAME.to_string());
    family.set_help(HELP.to_string());
    family.set_field_type(MetricType::HISTOGRAM);
    family.set_metric(vec![metric]);
    family
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, TextEncoder};

    #[test]
    fn the_waits_become_cumulative_buckets_with_their_count_and_sum() {
        let waits = WaitHistogram::default();
        for millis in [15, 40, 40, 180, 2_500, 9_000] {
            waits.record(Duration::from_millis(millis));
        }
        let mut text = Vec::new();
        TextEncoder::new().encode(&[family(Some(&waits))], &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        for line in [
            "# TYPE confab_turn_wait_seconds histogram",
            "confab_turn_wait_seconds_bucket{le=\"0.02\"} 1",
            "confab_turn_wait_seconds_bucket{le=\"0.05\"} 3",
            "confab_turn_wait_seconds_bucket{le=\"0.1\"} 3",
            "confab_turn_wait_seconds_bucket{le=\"0.2\"} 4",
            "confab_turn_wait_seconds_bucket{le=\"3\"} 5",
            "confab_turn_wait_seconds_bucket{le=\"5\"} 5",
            "confab_turn_wait_seconds_bucket{le=\"+Inf\"} 6",
            "confab_turn_wait_seconds_sum 11.775",
            "confab_turn_wait_seconds_count 6",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from:\n{text}");
        }
    }
}
