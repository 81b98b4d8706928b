//! Knowledge-base chunks: each document cut into chunks (`confab_engine::knowledge::chunk`), each chunk
//! embedded with all-MiniLM-L6-v2 and stored with its embedding (384 little-endian f32, base64) in
//! `knowledge_chunks`. Documents are indexed when they are added; a document without chunks (added before
//! indexing existed, or while the model was missing) is indexed when a conversation first needs it.
//! `load` builds an agent's searchable `Knowledge`, cached per process until its knowledge bases change.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use confab_engine::knowledge::chunk::chunk;
use confab_engine::knowledge::{Chunk, Embedder, Embedding, Knowledge};
use confab_models::minilm::DIMENSIONS;
use sqlx::Row;

use super::Db;

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("the embedding model is not available: {0} (run `confab models fetch`)")]
    Model(String),
    #[error(transparent)]
    Store(#[from] sqlx::Error),
}

fn encode(embedding: &Embedding) -> String {
    let bytes: Vec<u8> = embedding.iter().flat_map(|v| v.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode(text: &str) -> Option<Embedding> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    if bytes.len() != DIMENSIONS * 4 {
        return None;
    }
    let mut embedding = [0.0f32; DIMENSIONS];
    for (value, raw) in embedding.iter_mut().zip(bytes.chunks_exact(4)) {
        *value = f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
    }
    Some(embedding)
}

/// Embeds `texts` on the blocking pool.
async fn embed(models_dir: &Path, texts: Vec<String>) -> Result<Vec<Embedding>, KnowledgeError> {
    let models_dir = models_dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let embedder = Embedder::load(&models_dir).map_err(|e| KnowledgeError::Model(e.to_string()))?;
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed(&texts).map_err(|e| KnowledgeError::Model(e.to_string()))
    })
    .await
    .map_err(|e| KnowledgeError::Model(e.to_string()))?
}

/// Chunks and embeds one document and stores its chunks (replacing any it had); returns how many.
pub async fn index_document(
    db: &Db,
    models_dir: &Path,
    knowledge_base_id: &str,
    document_id: &str,
    content: &str,
) -> Result<usize, KnowledgeError> {
    let chunks = chunk(content);
    let embeddings = embed(models_dir, chunks.clone()).await?;
    let mut tx = db.begin_write().await?;
    sqlx::query("DELETE FROM knowledge_chunks WHERE document_id = $1").bind(document_id).execute(&mut *tx).await?;
    for (seq, (text, embedding)) in chunks.iter().zip(&embeddings).enumerate() {
        sqlx::query(
            "INSERT INTO knowledge_chunks (document_id, seq, knowledge_base_id, content, embedding) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(document_id)
        .bind(seq as i64)
        .bind(knowledge_base_id)
        .bind(text)
        .bind(encode(embedding))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(chunks.len())
}

/// Indexes the documents of `knowledge_base_ids` that have no chunks yet.
pub async fn index_missing(db: &Db, models_dir: &Path, knowledge_base_ids: &[String]) -> Result<(), KnowledgeError> {
    for kb in knowledge_base_ids {
        let rows = sqlx::query(
            "SELECT d.id, d.content FROM knowledge_documents d WHERE d.knowledge_base_id = $1 \
             AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c WHERE c.document_id = d.id) ORDER BY d.position",
        )
        .bind(kb)
        .fetch_all(&db.pool)
        .await?;
        for row in rows {
            let (id, content): (String, String) = (row.try_get("id")?, row.try_get("content")?);
            index_document(db, models_dir, kb, &id, &content).await?;
        }
    }
    Ok(())
}

/// Removes a knowledge base's chunks (with the knowledge base).
pub async fn delete_chunks(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    knowledge_base_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM knowledge_chunks WHERE knowledge_base_id = $1")
        .bind(knowledge_base_id)
        .execute(&mut **tx)
        .await
        .map(|_| ())
}

/// What identifies the stored state of a set of knowledge bases (chunk count and newest document).
async fn signature(db: &Db, knowledge_base_ids: &[String]) -> Result<Vec<(i64, String)>, sqlx::Error> {
    let mut signature = Vec::with_capacity(knowledge_base_ids.len());
    for kb in knowledge_base_ids {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM knowledge_chunks WHERE knowledge_base_id = $1) AS chunks, \
             (SELECT COALESCE(MAX(created_at), '') FROM knowledge_documents WHERE knowledge_base_id = $1) AS newest",
        )
        .bind(kb)
        .fetch_one(&db.pool)
        .await?;
        signature.push((row.try_get("chunks")?, row.try_get("newest")?));
    }
    Ok(signature)
}

type Cached = (Vec<(i64, String)>, Arc<Knowledge>);

/// The searchable knowledge of `knowledge_base_ids` (None when they hold no documents). Documents not yet
/// indexed are indexed first. Kept per process until the knowledge bases change.
pub async fn load(
    db: &Db,
    models_dir: &Path,
    knowledge_base_ids: &[String],
) -> Result<Option<Arc<Knowledge>>, KnowledgeError> {
    static CACHE: OnceLock<Mutex<HashMap<Vec<String>, Cached>>> = OnceLock::new();
    if knowledge_base_ids.is_empty() {
        return Ok(None);
    }
    index_missing(db, models_dir, knowledge_base_ids).await?;
    let signature = signature(db, knowledge_base_ids).await?;
    let cache = CACHE.get_or_init(Default::default);
    let key = knowledge_base_ids.to_vec();
    if let Some((stored, knowledge)) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key)
        && *stored == signature
    {
        return Ok(Some(knowledge.clone()));
    }
    let mut entries = Vec::new();
    for kb in knowledge_base_ids {
        let rows = sqlx::query(
            "SELECT c.document_id, c.content, c.embedding, d.title FROM knowledge_chunks c \
             JOIN knowledge_documents d ON d.id = c.document_id \
             WHERE c.knowledge_base_id = $1 ORDER BY d.position, c.seq",
        )
        .bind(kb)
        .fetch_all(&db.pool)
        .await?;
        for row in rows {
            let embedding: String = row.try_get("embedding")?;
            let Some(embedding) = decode(&embedding) else { continue };
            let chunk = Chunk {
                knowledge_base_id: kb.clone(),
                document_id: row.try_get("document_id")?,
                title: row.try_get("title")?,
                text: row.try_get("content")?,
            };
            entries.push((chunk, embedding));
        }
    }
    if entries.is_empty() {
        return Ok(None);
    }
    let knowledge = Arc::new(Knowledge::new(entries));
    cache.lock().unwrap_or_else(|p| p.into_inner()).insert(key, (signature, knowledge.clone()));
    Ok(Some(knowledge))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_survive_the_text_column() {
        let mut embedding = [0.0f32; DIMENSIONS];
        embedding.iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 * 0.37).sin());
        assert_eq!(decode(&encode(&embedding)), Some(embedding));
        assert_eq!(decode("AAAA"), None);
    }
}
