//! One-time console sign-in links: `confab serve` mints one as it starts and prints it; the table keeps
//! only its code's hash. A link is good for `LINK_TTL` and for one sign-in, across every replica that
//! shares the database (the redeeming `UPDATE` is the single point where it is spent).

use std::time::Duration;

use base64::Engine;

use crate::Db;
use crate::api_keys::hash_key;
use crate::outbox::now_millis;

/// How long a printed link stays good.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);

/// A new one-time code (URL-safe); only its hash is stored.
pub async fn mint(db: &Db) -> Result<String, sqlx::Error> {
    let mut bytes = [0u8; 24];
    rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
    let code = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    sqlx::query("INSERT INTO console_links (code_hash, expires_ms, used_ms) VALUES ($1, $2, NULL)")
        .bind(hash_key(&code))
        .bind(now_millis() + LINK_TTL.as_millis() as i64)
        .execute(&db.pool)
        .await?;
    // Spent and expired links are of no further use.
    sqlx::query("DELETE FROM console_links WHERE expires_ms < $1")
        .bind(now_millis() - 86_400_000)
        .execute(&db.pool)
        .await?;
    Ok(code)
}

/// Spends `code`: true exactly once for a code minted here and not yet expired.
pub async fn redeem(db: &Db, code: &str) -> Result<bool, sqlx::Error> {
    let now = now_millis();
    let spent = sqlx::query(
        "UPDATE console_links SET used_ms = $1 WHERE code_hash = $2 AND used_ms IS NULL AND expires_ms > $1",
    )
    .bind(now)
    .bind(hash_key(code))
    .execute(&db.pool)
    .await?;
    Ok(spent.rows_affected() == 1)
}
