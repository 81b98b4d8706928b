//! The byte-level BPE tokenizer a GGUF's metadata describes (`tokenizer.ggml.tokens`, `tokenizer.ggml.merges`;
//! no tokenizer.json ships with these models). Special tokens (`<|…|>`) are matched whole. How text is cut
//! into words before BPE follows `tokenizer.ggml.pre`: Qwen2 and Qwen3 split with Qwen2's pattern (every
//! digit on its own, as the model was trained), Llama 3 with its own (digits in threes), the others with
//! GPT-2's.

use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use super::fail;
use crate::ModelError;

/// Llama 3's pre-tokenizer pattern (`llama-bpe`: digits in runs of at most three).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's pre-tokenizer pattern (its tokenizer.json's `Split` step).
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

pub fn from_gguf(content: &gguf_file::Content) -> Result<Tokenizer, ModelError> {
    let get = |key: &str| content.metadata.get(key).ok_or_else(|| fail(format!("GGUF has no {key}")));
    let tokens = get("tokenizer.ggml.tokens")?.to_vec().map_err(fail)?;
    let merges = get("tokenizer.ggml.merges")?.to_vec().map_err(fail)?;
    let mut vocab = Vocab::default();
    let mut specials = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        let token = token.to_string().map_err(fail)?.clone();
        if token.starts_with("<|") && token.ends_with("|>") {
            specials.push(token.clone());
        }
        vocab.insert(token, id as u32);
    }
    let merges = merges
        .iter()
        .map(|m| {
            let m = m.to_string().map_err(fail)?;
            let (a, b) = m.split_once(' ').ok_or_else(|| fail(format!("bad merge {m:?}")))?;
            Ok((a.to_string(), b.to_string()))
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(fail)?;
    let mut tokenizer = Tokenizer::new(bpe);
    let pre = content.metadata.get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok()).map(String::as_str);
    let pattern = match pre {
        Some("qwen2") => Some(QWEN2_SPLIT),
        Some("llama-bpe" | "llama3") => Some(LLAMA3_SPLIT),
        _ => None,
    };
    if let Some(pattern) = pattern {
        let split =
            Split::new(SplitPattern::Regex(pattern.into()), SplitDelimiterBehavior::Isolated, false).map_err(fail)?;
        tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
            PreTokenizerWrapper::Split(split),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)),
        ])));
    } else {
        tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    }
    tokenizer.with_decoder(Some(ByteLevel::default()));
    tokenizer.add_special_tokens(&specials.iter().map(|s| AddedToken::from(s.clone(), true)).collect::<Vec<_>>());
    Ok(tokenizer)
}
