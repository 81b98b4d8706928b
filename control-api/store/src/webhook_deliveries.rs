//! What the webhook outbox (`crate::outbox`) holds for one conversation, as the console shows it: each
//! event, where it goes, whether it was delivered, how many attempts it took, and when the next is due.

use serde::Serialize;
use sqlx::Row;

use crate::Db;
use crate::outbox::PENDING;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Delivery {
    pub id: String,
    pub event: String,
    pub url: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: i64,
    /// When the next attempt is due (ISO 8601 UTC); None once delivered or failed.
    pub next_attempt_at: Option<String>,
    pub last_error: String,
    pub created_at: String,
}

/// The conversation's deliveries in the order its events happened.
pub async fn of_conversation(db: &Db, conversation_id: &str) -> Result<Vec<Delivery>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, event_name, url, status, attempts, next_attempt_at, last_error, created_at \
         FROM webhook_outbox WHERE conversation_id = $1 ORDER BY seq",
    )
    .bind(conversation_id)
    .fetch_all(&db.pool)
    .await?;
    rows.iter()
        .map(|row| {
            let status: String = row.try_get("status")?;
            let next: i64 = row.try_get("next_attempt_at")?;
            let next_attempt_at = (status == PENDING)
                .then(|| chrono::DateTime::from_timestamp_millis(next))
                .flatten()
                .map(crate::wall_clock::format_iso);
            Ok(Delivery {
                id: row.try_get("id")?,
                event: row.try_get("event_name")?,
                url: row.try_get("url")?,
                status,
                attempts: row.try_get("attempts")?,
                next_attempt_at,
                last_error: row.try_get("last_error")?,
                created_at: row.try_get("created_at")?,
            })
        })
        .collect()
}
