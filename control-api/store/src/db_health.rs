//! Whether the database answers, as this process last saw it. A watcher (`watch`) asks it every second
//! with a short timeout; a request whose answer went wrong asks it at once (`confirm_outage`). While it is
//! known to be down, requests that need it are refused at once (503 with `Retry-After`, `confab_http`)
//! instead of each waiting out the pool's acquire timeout. The operator is told once when it goes
//! (WARN) and once when it comes back (INFO, with how long it was gone); `/metrics` shows
//! `confab_database_up`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Db;

/// How long a probe may take before the database counts as not answering.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(800);
/// How often the watcher asks.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// What clients are told to wait before retrying (`Retry-After`, seconds).
pub const RETRY_AFTER_SECONDS: u64 = 2;

#[derive(Debug, Default)]
pub struct DbHealth {
    down_since: Mutex<Option<Instant>>,
}

impl DbHealth {
    pub fn is_down(&self) -> bool {
        self.down_since.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_some()
    }

    /// Records a failed probe; true when this is the news that it went down.
    fn went_down(&self, now: Instant) -> bool {
        let mut down = self.down_since.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let news = down.is_none();
        down.get_or_insert(now);
        news
    }

    /// Records a good probe; how long it had been down, when it had.
    fn came_back(&self, now: Instant) -> Option<Duration> {
        let mut down = self.down_since.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        down.take().map(|since| now.saturating_duration_since(since))
    }
}

impl Db {
    /// Asks the database (`SELECT 1`, `PROBE_TIMEOUT` at most), records the answer, tells the operator of
    /// a change, and returns whether it answered.
    pub async fn probe(&self) -> bool {
        let asked = sqlx::query("SELECT 1").execute(&self.pool);
        let answer = tokio::time::timeout(PROBE_TIMEOUT, asked).await;
        let now = Instant::now();
        match answer {
            Ok(Ok(_)) => {
                if let Some(gone) = self.health.came_back(now) {
                    tracing::info!(down_for_s = gone.as_secs_f64(), "the database answers again");
                }
                confab_calls::metrics::metrics().database_up(true);
                true
            }
            failed => {
                if self.health.went_down(now) {
                    let error = match failed {
                        Ok(Err(err)) => err.to_string(),
                        _ => format!("no answer within {} ms", PROBE_TIMEOUT.as_millis()),
                    };
                    tracing::warn!(%error, "the database is not answering: requests that need it get 503 until it does");
                }
                confab_calls::metrics::metrics().database_up(false);
                false
            }
        }
    }

    /// After a request failed on the database: whether the database is down (asked now, unless already
    /// known to be).
    pub async fn confirm_outage(&self) -> bool {
        self.health.is_down() || !self.probe().await
    }

    /// Asks every `PROBE_EVERY` for as long as the process runs.
    pub async fn watch(self) {
        let mut tick = tokio::time::interval(PROBE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.probe().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_news_is_told_once_each_way() {
        let health = DbHealth::default();
        let start = Instant::now();
        assert!(!health.is_down());
        assert!(health.went_down(start));
        assert!(!health.went_down(start + Duration::from_secs(1)), "known already");
        assert!(health.is_down());
        assert_eq!(health.came_back(start + Duration::from_secs(5)), Some(Duration::from_secs(5)));
        assert_eq!(health.came_back(start + Duration::from_secs(6)), None);
        assert!(!health.is_down());
    }
}
