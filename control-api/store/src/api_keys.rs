//! API keys: minted by `confab keys create`, shown once, stored as a SHA-256 hash; a key found valid is
//! believed for `key_cache::KEY_CACHE_TTL` (`Db::keys`). The HTTP middleware that asks is `confab_http::auth`.

use base64::Engine;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::Db;

/// Prefix of every API key, so leaked keys are recognisable by secret scanners.
pub const KEY_PREFIX: &str = "cfb_";

pub fn hash_key(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[derive(Debug, Clone)]
pub struct ApiKeyInfo {
    pub id: String,
    pub name: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// Creates a key and returns `(id, secret)`. Only the hash is stored.
pub async fn create_key(db: &Db, name: &str) -> Result<(String, String), sqlx::Error> {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
    let secret = format!("{KEY_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
    let id = uuid::Uuid::new_v4().to_string();
    sqlx::query("INSERT INTO api_keys (id, name, key_hash, created_at, revoked_at) VALUES ($1, $2, $3, $4, NULL)")
        .bind(&id)
        .bind(name)
        .bind(hash_key(&secret))
        .bind(crate::wall_clock::now_iso())
        .execute(&db.pool)
        .await?;
    Ok((id, secret))
}

pub async fn list_keys(db: &Db) -> Result<Vec<ApiKeyInfo>, sqlx::Error> {
    let rows = sqlx::query("SELECT id, name, created_at, revoked_at FROM api_keys ORDER BY created_at, id")
        .fetch_all(&db.pool)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(ApiKeyInfo {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                created_at: row.try_get("created_at")?,
                revoked_at: row.try_get("revoked_at")?,
            })
        })
        .collect()
}

/// Revokes a key; returns false when no live key has this id.
pub async fn revoke_key(db: &Db, id: &str) -> Result<bool, sqlx::Error> {
    let result = sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
        .bind(crate::wall_clock::now_iso())
        .bind(id)
        .execute(&db.pool)
        .await?;
    // Revocation is immediate in this process; other processes believe a key for `KEY_CACHE_TTL` at most.
    db.keys.forget_all();
    Ok(result.rows_affected() > 0)
}

/// True when `key` names a live key. A key found valid is believed for `key_cache::KEY_CACHE_TTL`.
pub async fn key_is_valid(db: &Db, key: &str) -> Result<bool, sqlx::Error> {
    if !key.starts_with(KEY_PREFIX) {
        return Ok(false);
    }
    let hash = hash_key(key);
    let now = std::time::Instant::now();
    if db.keys.is_valid(&hash, now) {
        return Ok(true);
    }
    if db.health.is_down() {
        // Nothing to ask: a key seen recently is believed; any other cannot be checked now.
        if db.keys.seen_within(&hash, now, crate::key_cache::OUTAGE_GRACE) {
            return Ok(true);
        }
        return Err(sqlx::Error::PoolTimedOut);
    }
    let row = sqlx::query("SELECT COUNT(*) AS n FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL")
        .bind(&hash)
        .fetch_one(&db.pool)
        .await?;
    let valid = row.try_get::<i64, _>("n")? > 0;
    if valid {
        db.keys.remember(hash, now);
    }
    Ok(valid)
}

/// The id of the live key `key`, if it is one (the console's "sign in with a key").
pub async fn live_key_id(db: &Db, key: &str) -> Result<Option<String>, sqlx::Error> {
    if !key.starts_with(KEY_PREFIX) {
        return Ok(None);
    }
    let row = sqlx::query("SELECT id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL")
        .bind(hash_key(key))
        .fetch_optional(&db.pool)
        .await?;
    row.map(|row| row.try_get("id")).transpose()
}

/// Whether the key with this id is live (a console session begun with it lasts as long as the key).
pub async fn id_is_live(db: &Db, id: &str) -> Result<bool, sqlx::Error> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM api_keys WHERE id = $1 AND revoked_at IS NULL")
        .bind(id)
        .fetch_one(&db.pool)
        .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}
