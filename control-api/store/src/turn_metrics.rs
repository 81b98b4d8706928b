//! Each live turn's stages (`turn_metrics`): written by the call's bridge as the engine reports a turn
//! over, read back by `GET /v1/ext/conversation/{id}/turn-metrics`.

use serde_json::Value;
use sqlx::Row;

use super::Db;

/// Stores one turn's metrics (a turn reported twice keeps the first).
pub async fn insert(db: &Db, conversation_id: &str, turn: i64, body: &Value) -> Result<(), sqlx::Error> {
    let mut tx = db.begin_write().await?;
    sqlx::query(
        "INSERT INTO turn_metrics (conversation_id, turn, body, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (conversation_id, turn) DO NOTHING",
    )
    .bind(conversation_id)
    .bind(turn)
    .bind(body.to_string())
    .bind(crate::wall_clock::now_iso())
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// A conversation's turns, in order.
pub async fn list(db: &Db, conversation_id: &str) -> Result<Vec<Value>, sqlx::Error> {
    let rows = sqlx::query("SELECT body FROM turn_metrics WHERE conversation_id = $1 ORDER BY turn")
        .bind(conversation_id)
        .fetch_all(&db.pool)
        .await?;
    rows.iter()
        .map(|row| {
            let body: String = row.try_get("body")?;
            serde_json::from_str(&body).map_err(|e| sqlx::Error::Decode(Box::new(e)))
        })
        .collect()
}
