//! A short-lived memory of API keys found valid, so a busy client's requests do not each query the
//! database. Only positive answers are kept (an unknown key is asked every time), each for `KEY_CACHE_TTL`.
//! Revoking a key through this process (`api_keys::revoke_key`) forgets every remembered key at once; a key
//! revoked by another process (`confab keys revoke`, another replica) stops working within the TTL.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a valid key is believed without asking the database again.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(2);
/// While the database does not answer, a key found valid this recently keeps working (for what needs no
/// database).
pub const OUTAGE_GRACE: Duration = Duration::from_secs(600);
/// Keys remembered at most; when full, expired entries are dropped, then everything.
const MAX_KEYS: usize = 4_096;

#[derive(Debug, Default)]
pub struct KeyCache {
    valid_until: Mutex<HashMap<String, Instant>>,
}

impl KeyCache {
    /// True when `key_hash` was found valid less than the TTL before `now`.
    pub fn is_valid(&self, key_hash: &str, now: Instant) -> bool {
        let keys = self.valid_until.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        keys.get(key_hash).is_some_and(|&until| now < until)
    }

    /// True when `key_hash` was found valid within `window` before `now` (while the database cannot be
    /// asked, a key seen this recently is still believed: `db_health`).
    pub fn seen_within(&self, key_hash: &str, now: Instant, window: Duration) -> bool {
        let keys = self.valid_until.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        keys.get(key_hash).is_some_and(|&until| now < until + window.saturating_sub(KEY_CACHE_TTL))
    }

    /// Remembers that `key_hash` was found valid at `now`.
    pub fn remember(&self, key_hash: String, now: Instant) {
        let mut keys = self.valid_until.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if keys.len() >= MAX_KEYS {
            keys.retain(|_, until| now < *until + OUTAGE_GRACE);
            if keys.len() >= MAX_KEYS {
                keys.clear();
            }
        }
        keys.insert(key_hash, now + KEY_CACHE_TTL);
    }

    /// Forgets every key (after a revocation).
    pub fn forget_all(&self) {
        self.valid_until.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn during_an_outage_a_key_seen_recently_is_still_believed() {
        let cache = KeyCache::default();
        let start = Instant::now();
        cache.remember("h".into(), start);
        assert!(cache.seen_within("h", start + OUTAGE_GRACE - Duration::from_millis(1), OUTAGE_GRACE));
        assert!(!cache.seen_within("h", start + OUTAGE_GRACE, OUTAGE_GRACE));
        assert!(!cache.seen_within("other", start, OUTAGE_GRACE));
    }

    #[test]
    fn a_valid_key_is_believed_for_the_ttl_only() {
        let cache = KeyCache::default();
        let start = Instant::now();
        assert!(!cache.is_valid("h", start));
        cache.remember("h".into(), start);
        assert!(cache.is_valid("h", start + KEY_CACHE_TTL - Duration::from_millis(1)));
        assert!(!cache.is_valid("h", start + KEY_CACHE_TTL));
        assert!(!cache.is_valid("other", start));
    }

    #[test]
    fn forgetting_after_a_revocation_is_immediate() {
        let cache = KeyCache::default();
        let start = Instant::now();
        cache.remember("h".into(), start);
        cache.forget_all();
        assert!(!cache.is_valid("h", start));
    }

    #[test]
    fn a_full_cache_makes_room() {
        let cache = KeyCache::default();
        let start = Instant::now();
        for n in 0..MAX_KEYS {
            cache.remember(format!("old{n}"), start);
        }
        let later = start + KEY_CACHE_TTL;
        cache.remember("new".into(), later);
        assert!(cache.is_valid("new", later));
        assert_eq!(cache.valid_until.lock().unwrap().len(), 1, "expired keys were dropped");
    }
}
