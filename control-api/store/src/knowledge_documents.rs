//! Knowledge-base documents: their text, in the order they were added (`position`). Chunks and embeddings
//! made from them are `crate::knowledge`'s.

use sqlx::Row;

use crate::Db;
use crate::records::knowledge_bases::{DocumentInput, DocumentSummary};

/// The documents of knowledge base `knowledge_base_id`, in the order they were added.
pub async fn summaries(db: &Db, knowledge_base_id: &str) -> Result<Vec<DocumentSummary>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, title, content, created_at FROM knowledge_documents WHERE knowledge_base_id = $1 ORDER BY position",
    )
    .bind(knowledge_base_id)
    .fetch_all(&db.pool)
    .await?;
    rows.iter()
        .map(|row| {
            let content: String = row.try_get("content")?;
            Ok(DocumentSummary {
                id: row.try_get("id")?,
                title: row.try_get("title")?,
                characters: content.chars().count() as i64,
                created_at: row.try_get("created_at")?,
            })
        })
        .collect()
}

/// Adds `documents` after the knowledge base's last, in one transaction; their ids, or None when the
/// knowledge base does not exist.
pub async fn add(
    db: &Db,
    knowledge_base_id: &str,
    documents: &[DocumentInput],
) -> Result<Option<Vec<String>>, sqlx::Error> {
    let mut tx = db.begin_write().await?;
    let exists: i64 = sqlx::query("SELECT COUNT(*) AS n FROM knowledge_bases WHERE id = $1")
        .bind(knowledge_base_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
    if exists == 0 {
        return Ok(None);
    }
    let now = crate::wall_clock::now_iso();
    let first_position: i64 = sqlx::query(
        "SELECT COALESCE(MAX(position), 0) + 1 AS next FROM knowledge_documents WHERE knowledge_base_id = $1",
    )
    .bind(knowledge_base_id)
    .fetch_one(&mut *tx)
    .await?
    .try_get("next")?;
    let mut ids = Vec::with_capacity(documents.len());
    for (position, document) in (first_position..).zip(documents) {
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO knowledge_documents (id, knowledge_base_id, title, content, position, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(knowledge_base_id)
        .bind(&document.title)
        .bind(&document.content)
        .bind(position)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        ids.push(id);
    }
    tx.commit().await?;
    Ok(Some(ids))
}

/// Deletes every document of a knowledge base (with the knowledge base, in the caller's transaction).
pub async fn delete_all<'c, E>(executor: E, knowledge_base_id: &str) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    sqlx::query("DELETE FROM knowledge_documents WHERE knowledge_base_id = $1")
        .bind(knowledge_base_id)
        .execute(executor)
        .await
        .map(|_| ())
}
