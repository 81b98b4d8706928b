//! A guardrail record (`GuardrailFields`) and its API resource (`Guardrail`); the permanent `key`
//! derivation (lowercase, every non-alphanumeric character to `_`; `_2`, `_3`… on collision, settled by the route).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::StoredRecord;

/// Body of create and of full replace: fields left out are cleared.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GuardrailInput {
    #[schema(min_length = 1, max_length = 200)]
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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GuardrailFields {
    pub key: String,
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    pub category: String,
    pub prompt: String,
    pub response_message: String,
    pub callback_url: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
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
