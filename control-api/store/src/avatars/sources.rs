//! The picture a custom avatar was made from, as uploaded (base64 in `custom_avatar_sources`), kept until
//! its generation has run and for as long as the avatar exists.

use base64::Engine;
use sqlx::Row;

use crate::Db;

/// Keeps `image` as the source of avatar `avatar_id` (in the caller's transaction, with the avatar).
pub async fn insert<'c, E>(executor: E, avatar_id: &str, image: &[u8]) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    sqlx::query("INSERT INTO custom_avatar_sources (avatar_id, image_base64) VALUES ($1, $2)")
        .bind(avatar_id)
        .bind(base64::engine::general_purpose::STANDARD.encode(image))
        .execute(executor)
        .await
        .map(|_| ())
}

/// The source of avatar `avatar_id` as stored (base64), if it has one.
pub async fn load_base64(db: &Db, avatar_id: &str) -> Result<Option<String>, sqlx::Error> {
    let row = sqlx::query("SELECT image_base64 FROM custom_avatar_sources WHERE avatar_id = $1")
        .bind(avatar_id)
        .fetch_optional(&db.pool)
        .await?;
    row.map(|row| row.try_get("image_base64")).transpose()
}

/// Forgets the source of a deleted avatar (in the caller's transaction).
pub async fn delete<'c, E>(executor: E, avatar_id: &str) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    sqlx::query("DELETE FROM custom_avatar_sources WHERE avatar_id = $1")
        .bind(avatar_id)
        .execute(executor)
        .await
        .map(|_| ())
}
