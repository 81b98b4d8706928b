//! A knowledge base record (`KnowledgeBaseFields`) and its API resource (`KnowledgeBase`, with its
//! document count); document bodies and chunks are in `crate::knowledge`.

use serde::{Deserialize, Serialize};
use sqlx::Row;
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::{Db, StoredRecord};

/// Most documents accepted in one request.
pub const MAX_DOCUMENTS_PER_REQUEST: usize = 100;
/// Longest document, in characters.
pub const MAX_DOCUMENT_CHARS: usize = 200_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct KnowledgeBaseFields {
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct KnowledgeBase {
    pub id: String,
    #[serde(flatten)]
    pub fields: KnowledgeBaseFields,
    pub document_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct KnowledgeBaseWithDocuments {
    #[serde(flatten)]
    pub knowledge_base: KnowledgeBase,
    pub documents: Vec<DocumentSummary>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct DocumentSummary {
    pub id: String,
    pub title: String,
    /// Length of the content in characters.
    pub characters: i64,
    pub created_at: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AddDocuments {
    pub documents: Vec<DocumentInput>,
}

#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct DocumentInput {
    #[serde(default)]
    pub title: String,
    pub content: String,
}

pub async fn document_count(db: &Db, id: &str) -> Result<i64, sqlx::Error> {
    Ok(document_counts(db, &[id.to_string()]).await?.get(id).copied().unwrap_or(0))
}

/// Documents per knowledge base, for these ids (absent: none), one query per `IDS_PER_QUERY` ids.
pub async fn document_counts(db: &Db, ids: &[String]) -> Result<std::collections::HashMap<String, i64>, sqlx::Error> {
    let mut counts = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(crate::IDS_PER_QUERY) {
        let sql = format!(
            "SELECT knowledge_base_id, COUNT(*) AS n FROM knowledge_documents WHERE knowledge_base_id IN ({})
             GROUP BY knowledge_base_id",
            crate::placeholders(chunk.len())
        );
        let rows = chunk.iter().fold(sqlx::query(&sql), |query, id| query.bind(id)).fetch_all(&db.pool).await?;
        for row in &rows {
            counts.insert(row.try_get("knowledge_base_id")?, row.try_get("n")?);
        }
    }
    Ok(counts)
}

pub async fn to_knowledge_base(db: &Db, record: &StoredRecord) -> Result<KnowledgeBase, sqlx::Error> {
    knowledge_base_with_count(record, document_count(db, &record.id).await?)
}

/// The API resource of a knowledge base whose documents were counted already.
pub fn knowledge_base_with_count(record: &StoredRecord, document_count: i64) -> Result<KnowledgeBase, sqlx::Error> {
    Ok(KnowledgeBase {
        id: record.id.clone(),
        fields: record.fields()?,
        document_count,
        created_at: record.created_at.clone(),
        updated_at: record.updated_at.clone(),
    })
}
