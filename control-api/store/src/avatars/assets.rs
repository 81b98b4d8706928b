//! A completed custom avatar's face asset: the rigged portrait (PNG) and its rig (JSON), made from the
//! uploaded picture by `confab_engine::avatar::from_image` and kept in the database beside the
//! avatar's record (so any process that runs calls can load it). Deleting the avatar deletes them.

use std::path::{Path, PathBuf};

use base64::Engine;
use confab_engine::avatar::from_image::{AvatarBuilder, RiggedPortrait};
use confab_engine::avatar::{FaceRig, RgbImage};
use sqlx::Row;

use super::portrait::{decode_png, encode_png};
use crate::Db;

/// The side of a custom avatar's stored portrait (the live video's default size).
pub const PORTRAIT_SIDE: usize = 512;

/// The face models, loaded by the first job and kept for the next (loading both costs about 50 ms), with
/// the directory they came from. The lock also means only one picture is rigged at a time: the models are
/// small, but a burst of uploads must not starve the calls running beside them.
static RIGGER: tokio::sync::Mutex<Option<(PathBuf, AvatarBuilder)>> = tokio::sync::Mutex::const_new(None);

/// Rigs the face in `image` (blocking work, off the async threads); the error is the user's reason.
pub async fn rig(models_dir: &Path, image: Vec<u8>) -> Result<RiggedPortrait, String> {
    let mut rigger = RIGGER.lock().await;
    let loaded = rigger.take().filter(|(dir, _)| dir == models_dir);
    let models_dir = models_dir.to_path_buf();
    let (result, builder) = tokio::task::spawn_blocking(move || {
        let mut builder = match loaded {
            Some((_, builder)) => builder,
            None => match AvatarBuilder::load(&models_dir) {
                Ok(builder) => builder,
                Err(err) => {
                    tracing::error!(error = %err, "custom avatars cannot be rigged: the face models are missing");
                    let reason = "The face models are not installed on this server (run `confab models fetch`)";
                    return (Err(reason.to_string()), None);
                }
            },
        };
        let result = builder.build(&image, PORTRAIT_SIDE).map_err(|err| err.to_string());
        (result, Some((models_dir, builder)))
    })
    .await
    .map_err(|err| {
        tracing::error!(error = %crate::error::one_line(&err.to_string()), "face rigging panicked");
        "Face rigging failed".to_string()
    })?;
    *rigger = builder;
    result
}

/// Stores (or replaces) the asset of `avatar_id`.
pub async fn store(db: &Db, avatar_id: &str, rigged: &RiggedPortrait) -> Result<(), sqlx::Error> {
    let portrait = base64::engine::general_purpose::STANDARD.encode(encode_png(&rigged.portrait));
    let rig = serde_json::to_string(&rigged.rig).expect("rigs serialize");
    let mut tx = db.begin_write().await?;
    sqlx::query("DELETE FROM custom_avatar_assets WHERE avatar_id = $1").bind(avatar_id).execute(&mut *tx).await?;
    sqlx::query("INSERT INTO custom_avatar_assets (avatar_id, portrait_png_base64, rig_json) VALUES ($1, $2, $3)")
        .bind(avatar_id)
        .bind(portrait)
        .bind(rig)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// Deletes the asset of `avatar_id` inside the caller's transaction.
pub async fn delete(conn: &mut sqlx::AnyConnection, avatar_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM custom_avatar_assets WHERE avatar_id = $1").bind(avatar_id).execute(conn).await?;
    Ok(())
}

/// The rigged portrait of a custom avatar, if `avatar_key_id` names one that has an asset.
pub async fn load(db: &Db, avatar_key_id: &str) -> Result<Option<(RgbImage, FaceRig)>, sqlx::Error> {
    let Ok(id) = uuid::Uuid::parse_str(avatar_key_id) else {
        return Ok(None);
    };
    let row = sqlx::query("SELECT portrait_png_base64, rig_json FROM custom_avatar_assets WHERE avatar_id = $1")
        .bind(id.hyphenated().to_string())
        .fetch_optional(&db.pool)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let portrait: String = row.try_get("portrait_png_base64")?;
    let rig: String = row.try_get("rig_json")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(portrait)
        .map_err(|err| err.to_string())
        .and_then(|png| decode_png(&png))
        .and_then(|image| serde_json::from_str::<FaceRig>(&rig).map(|rig| (image, rig)).map_err(|err| err.to_string()));
    match decoded {
        Ok(face) => Ok(Some(face)),
        Err(err) => {
            tracing::error!(avatar_id = %id, error = %err, "a custom avatar's stored face cannot be read");
            Ok(None)
        }
    }
}

/// Counts the assets of `avatar_id` (0 or 1; for tests that check nothing is left behind).
pub async fn count(db: &Db, avatar_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query("SELECT COUNT(*) AS n FROM custom_avatar_assets WHERE avatar_id = $1")
        .bind(avatar_id)
        .fetch_one(&db.pool)
        .await?
        .try_get("n")
}
