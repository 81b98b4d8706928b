//! Wall-clock timestamps as the API shows them: ISO 8601 in UTC with microseconds and a `Z`.
//! The fixed width keeps them sortable as text in both databases.

pub fn now_iso() -> String {
    format_iso(chrono::Utc::now())
}

pub fn format_iso(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Fractional Unix seconds, the webhook envelope's `timestamp`.
pub fn unix_seconds_now() -> f64 {
    let now = chrono::Utc::now();
    now.timestamp() as f64 + f64::from(now.timestamp_subsec_micros()) / 1e6
}
