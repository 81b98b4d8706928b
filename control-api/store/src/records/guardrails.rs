//! A guardrail record (`GuardrailFields`) and its API resource (`Guardrail`); the permanent `key`
//! derivation (lowercase, every non-alphanumeric character to `_`; `_2`, `_3`… on collision) and its reservation.

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use sqlx::Row;

use crate::{Db, StoredRecord};

/// Body of create and of full replace: fields left out are cleared.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct GuardrailInput {
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub name: String,
    /// The rule; empty when left out.
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    /// Spoken verbatim when the guardrail fires; when empty, a moderation check is used instead.
    #[serde(default)]
    pub response_message: Option<String>,
    /// Empty, or an http(s) URL that receives `guardrail_triggered`.
    #[serde(default)]
    pub callback_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct GuardrailFields {
    pub key: String,
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub name: String,
    pub category: String,
    pub prompt: String,
    pub response_message: String,
    pub callback_url: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct Guardrail {
    pub id: String,
    #[serde(flatten)]
    pub fields: GuardrailFields,
    pub created_at: String,
    pub updated_at: String,
}

/// Lowercases the name and replaces every character that is not an ASCII letter or digit with `_`.
pub fn base_key(name: &str) -> String {
    name.to_lowercase().chars().map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' }).collect()
}

pub fn to_guardrail(record: &StoredRecord) -> Result<Guardrail, sqlx::Error> {
    Ok(Guardrail {
        id: record.id.clone(),
        fields: record.fields()?,
        created_at: record.created_at.clone(),
        updated_at: record.updated_at.clone(),
    })
}

/// Reserves the first free key among `base`, `base_2`, `base_3`, …; the primary key of
/// `guardrail_keys` settles races between concurrent creates.
pub async fn reserve_key(db: &Db, base: &str, guardrail_id: &str) -> Result<String, sqlx::Error> {
    for n in 1u32.. {
        let candidate = if n == 1 { base.to_string() } else { format!("{base}_{n}") };
        let taken: i64 = sqlx::query("SELECT COUNT(*) AS n FROM guardrail_keys WHERE key = $1")
            .bind(&candidate)
            .fetch_one(&db.pool)
            .await?
            .try_get("n")?;
        if taken > 0 {
            continue;
        }
        let inserted = sqlx::query("INSERT INTO guardrail_keys (key, guardrail_id) VALUES ($1, $2)")
            .bind(&candidate)
            .bind(guardrail_id)
            .execute(&db.pool)
            .await;
        match inserted {
            Ok(_) => return Ok(candidate),
            Err(sqlx::Error::Database(err)) if err.is_unique_violation() => continue,
            Err(err) => return Err(err),
        }
    }
    unreachable!("the key space is unbounded")
}

/// Frees `key` (its guardrail was not stored after all).
pub async fn release_key<'c, E>(executor: E, key: &str) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    sqlx::query("DELETE FROM guardrail_keys WHERE key = $1").bind(key).execute(executor).await.map(|_| ())
}

/// Frees the key of a deleted guardrail.
pub async fn release_keys_of<'c, E>(executor: E, guardrail_id: &str) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    sqlx::query("DELETE FROM guardrail_keys WHERE guardrail_id = $1")
        .bind(guardrail_id)
        .execute(executor)
        .await
        .map(|_| ())
}
