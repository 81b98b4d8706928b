//! Knowledge bases inside conversations. A document added to a knowledge base is cut into chunks
//! (`chunk`) and each chunk embedded with all-MiniLM-L6-v2 (`Embedder`); the control plane stores them.
//! At conversation start the chunks of the agent's knowledge bases form one `Knowledge` (an int8
//! `VectorIndex` searched exhaustively). Each committed user turn is embedded and the `TOP_K` chunks
//! scoring at least `MIN_SCORE` go to the language model with that turn (`responder`), and are
//! reported as the turn's snippets.

pub mod chunk;
pub mod index;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use confab_models::minilm::{DIMENSIONS, MiniLm};
use serde::Serialize;

use crate::providers::shared_model::{SharedModels, get_or_load};
use index::VectorIndex;

/// Chunks given to the model per turn, at most.
pub const TOP_K: usize = 3;
/// Cosine similarity a chunk needs to be given to the model.
pub const MIN_SCORE: f32 = 0.25;

pub type Embedding = [f32; DIMENSIONS];

/// One chunk of a document, with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chunk {
    pub knowledge_base_id: String,
    pub document_id: String,
    /// The document's title.
    pub title: String,
    pub text: String,
}

/// A chunk retrieved for a turn, and how similar it is to the turn's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snippet {
    #[serde(flatten)]
    pub chunk: Chunk,
    pub score: f32,
}

/// The searchable knowledge of one agent.
#[derive(Debug, Default)]
pub struct Knowledge {
    index: VectorIndex,
    chunks: Vec<Chunk>,
}

impl Knowledge {
    pub fn new(entries: impl IntoIterator<Item = (Chunk, Embedding)>) -> Knowledge {
        let mut knowledge = Knowledge { index: VectorIndex::new(), chunks: Vec::new() };
        for (chunk, embedding) in entries {
            knowledge.index.push(&embedding);
            knowledge.chunks.push(chunk);
        }
        knowledge
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The chunks most similar to `query`: at most `k`, each scoring at least `min_score`, best first.
    pub fn search(&self, query: &Embedding, k: usize, min_score: f32) -> Vec<Snippet> {
        self.index
            .search(query, k)
            .into_iter()
            .filter(|(score, _)| *score >= min_score)
            .map(|(score, position)| Snippet { chunk: self.chunks[position].clone(), score })
            .collect()
    }
}

/// The process's embedding model (one per models directory), shared by every call: requests queue on it.
#[derive(Clone)]
pub struct Embedder {
    model: Arc<Mutex<MiniLm>>,
}

impl Embedder {
    pub fn load(models_dir: &Path) -> Result<Embedder, confab_models::ModelError> {
        static LOADED: OnceLock<SharedModels<PathBuf, Mutex<MiniLm>>> = OnceLock::new();
        let model = get_or_load(LOADED.get_or_init(Default::default), models_dir.to_path_buf(), || {
            MiniLm::load(models_dir, 1).map(Mutex::new)
        })?;
        Ok(Embedder { model })
    }

    /// Embeddings of `texts` (blocking: call it off the async threads).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>, confab_models::ModelError> {
        let mut model = self.model.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut embeddings = Vec::with_capacity(texts.len());
        for batch in texts.chunks(16) {
            embeddings.extend(model.embed(batch)?);
        }
        Ok(embeddings)
    }

    /// The embedding of one text, on the blocking pool.
    pub async fn embed_one(&self, text: &str) -> Result<Embedding, String> {
        let (embedder, text) = (self.clone(), text.to_string());
        tokio::task::spawn_blocking(move || embedder.embed(&[&text]))
            .await
            .map_err(|err| err.to_string())?
            .map_err(|err| err.to_string())?
            .pop()
            .ok_or_else(|| "no embedding".to_string())
    }
}

/// What a turn retrieved: handed to the control plane, which records it on the conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnippetsUsed {
    pub turn: u64,
    /// The user's words the chunks were retrieved for.
    pub query: String,
    pub snippets: Vec<Snippet>,
}

/// Where a conversation's retrieved snippets are reported.
pub type SnippetSink = Arc<dyn Fn(SnippetsUsed) + Send + Sync>;

/// A conversation's knowledge, its embedder, and where its snippets go.
#[derive(Clone)]
pub struct Retrieval {
    pub knowledge: Arc<Knowledge>,
    pub embedder: Embedder,
    pub on_used: Option<SnippetSink>,
}

impl Retrieval {
    /// The snippets for `text` (none when the knowledge is empty or the embedding fails, which is logged).
    pub async fn retrieve(&self, text: &str) -> Vec<Snippet> {
        if self.knowledge.is_empty() || text.trim().is_empty() {
            return Vec::new();
        }
        match self.embedder.embed_one(text).await {
            Ok(query) => self.knowledge.search(&query, TOP_K, MIN_SCORE),
            Err(err) => {
                tracing::warn!(error = %err, "could not embed the turn; answering without the knowledge base");
                Vec::new()
            }
        }
    }
}

/// The system message that gives a turn's snippets to the model.
pub fn knowledge_message(snippets: &[Snippet]) -> String {
    let mut text = String::from(
        "Facts from the knowledge base that may help with the user's next message (use them when they are \
         relevant; do not mention this list):",
    );
    for snippet in snippets {
        text.push_str("\n- ");
        text.push_str(&snippet.chunk.text.replace('\n', " "));
    }
    text
}
