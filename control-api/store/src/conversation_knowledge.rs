//! A conversation's knowledge: the agent's knowledge bases loaded for retrieval (`store::knowledge`), and
//! a writer that records each turn's retrieved snippets on the conversation (`snippets`), in order.

use std::path::Path;
use std::sync::Arc;

use confab_engine::knowledge::{Embedder, Retrieval, SnippetsUsed};
use tokio::sync::mpsc;

use crate::{Db, conversations, knowledge};

/// Turns whose snippets wait for the database. Full (the database is that far behind): a turn's snippets
/// are not recorded, and that is logged; the call goes on.
pub const SNIPPETS_QUEUE: usize = 64;

/// The retrieval over the knowledge bases `ids` (an agent's) for `conversation_id`, and the task writing
/// its snippets (it ends once the retrieval is dropped and everything is written);
/// None when the agent has no knowledge base with documents, or the embedding model is missing (logged).
pub async fn retrieval(
    db: &Db,
    models_dir: &Path,
    ids: &[String],
    conversation_id: &str,
) -> Option<(Retrieval, tokio::task::JoinHandle<()>)> {
    let loaded = match knowledge::load(db, models_dir, ids).await {
        Ok(loaded) => loaded?,
        Err(err) => {
            tracing::warn!(%conversation_id, error = %err, "the agent's knowledge bases are not used in this conversation");
            return None;
        }
    };
    let embedder = match Embedder::load(models_dir) {
        Ok(embedder) => embedder,
        Err(err) => {
            tracing::warn!(%conversation_id, error = %err, "no embedding model; knowledge bases not used");
            return None;
        }
    };
    let (used_tx, mut used) = mpsc::channel::<SnippetsUsed>(SNIPPETS_QUEUE);
    let (db, id) = (db.clone(), conversation_id.to_string());
    let writer = tokio::spawn(async move {
        while let Some(turn) = used.recv().await {
            let body = serde_json::to_value(&turn).expect("snippets serialize");
            if let Err(err) = conversations::append_snippets(&db, &id, &body).await {
                tracing::warn!(conversation_id = %id, error = %err, "could not record a turn's snippets");
            }
        }
    });
    tracing::info!(%conversation_id, chunks = loaded.len(), "knowledge bases loaded");
    let conversation = conversation_id.to_string();
    let on_used = Arc::new(move |turn| {
        if let Err(mpsc::error::TrySendError::Full(_)) = used_tx.try_send(turn) {
            tracing::warn!(conversation_id = %conversation, "a turn's snippets are not recorded: the database is {SNIPPETS_QUEUE} turns behind");
        }
    });
    Some((Retrieval { knowledge: loaded, embedder, on_used: Some(on_used) }, writer))
}
