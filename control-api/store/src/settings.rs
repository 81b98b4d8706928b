//! Server-wide secrets kept in the database so every replica shares them (the session-token key, the
//! LiveKit access tokens' secret).

use base64::Engine;
use sqlx::Row;

use super::Db;

/// Returns the named secret, creating a random one on first use. Concurrent first uses agree: the
/// insert is ignored when another replica won, and the stored value is read back.
pub async fn secret(db: &Db, name: &str) -> Result<String, sqlx::Error> {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
    let candidate = base64::engine::general_purpose::STANDARD.encode(bytes);
    sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
        .bind(name)
        .bind(candidate)
        .execute(&db.pool)
        .await?;
    let row = sqlx::query("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(&db.pool).await?;
    row.try_get("value")
}
