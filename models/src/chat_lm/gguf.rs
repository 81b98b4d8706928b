//! Whether a GGUF file is a chat model Confab can run, read from its header alone (metadata and tensor
//! list, not the weights): its architecture, tokenizer and chat template. Agents naming a file are checked
//! with it when they are created, so a bad file is refused then, with its reason, rather than at a call.

use std::path::Path;

use candle_core::quantized::gguf_file;

use super::template::{CallFormat, ChatTemplate};
use crate::ModelError;

/// The network architectures Confab runs (`general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// Llama 3.x, SmolLM2 (candle's quantized llama).
    Llama,
    /// Qwen2, Qwen2.5 (our `qwen2`).
    Qwen2,
    /// Qwen3 (candle's quantized qwen3).
    Qwen3,
}

impl Architecture {
    fn from_gguf(name: &str) -> Option<Architecture> {
        match name {
            "llama" => Some(Architecture::Llama),
            "qwen2" => Some(Architecture::Qwen2),
            "qwen3" => Some(Architecture::Qwen3),
            _ => None,
        }
    }
}

/// What `inspect` read from a runnable GGUF.
#[derive(Debug, Clone)]
pub struct GgufSummary {
    pub architecture: Architecture,
    /// `general.name`, when the file has one.
    pub name: Option<String>,
    /// How the model calls tools, from its chat template (`CallFormat::None`: it is offered none).
    pub call_format: CallFormat,
    /// Whether the file carries its own chat template (false: it is prompted in ChatML).
    pub own_template: bool,
}

/// The reason a file cannot be run, worded for the person who named it: one line (a library's error can
/// carry a backtrace on the lines after its message).
fn refused(path: &Path, why: impl std::fmt::Display) -> ModelError {
    let why = why.to_string();
    let first_line = why.lines().next().unwrap_or_default().trim_end();
    ModelError::Unsupported { path: path.display().to_string(), reason: first_line.to_string() }
}

/// Reads the header of `path` and says whether Confab can run it as a chat model.
pub fn inspect(path: &Path) -> Result<GgufSummary, ModelError> {
    if !path.is_file() {
        return Err(refused(path, "no such file"));
    }
    let mut file = std::fs::File::open(path).map_err(|err| refused(path, format!("cannot be read: {err}")))?;
    let content = gguf_file::Content::read(&mut file).map_err(|err| {
        // The parser's words (and, with RUST_BACKTRACE set, its backtrace) are the log's, not the reason's.
        let detail = err.to_string();
        tracing::warn!(file = %path.display(), error = detail.lines().next().unwrap_or_default(), "not a GGUF file");
        refused(path, "not a GGUF file")
    })?;
    summarize(path, &content)
}

/// `inspect` on a header already read.
pub(super) fn summarize(path: &Path, content: &gguf_file::Content) -> Result<GgufSummary, ModelError> {
    let text = |key: &str| content.metadata.get(key).and_then(|v| v.to_string().ok()).cloned();
    let architecture = text("general.architecture").unwrap_or_default();
    let architecture = Architecture::from_gguf(&architecture).ok_or_else(|| {
        let named = if architecture.is_empty() { "no architecture".to_string() } else { format!("a {architecture} model") };
        refused(
            path,
            format!(
                "{named}; Confab runs the llama (Llama 3.x, SmolLM2), qwen2 (Qwen2, Qwen2.5) and qwen3 (Qwen3) architectures"
            ),
        )
    })?;
    match text("tokenizer.ggml.model").as_deref() {
        Some("gpt2") => {}
        Some(other) => {
            return Err(refused(
                path,
                format!(
                    "its tokenizer is {other:?}; Confab reads byte-level BPE (\"gpt2\") tokenizers: Llama 3.x, Qwen and SmolLM2 have one, Llama 2 and Mistral do not"
                ),
            ));
        }
        None => return Err(refused(path, "it holds no tokenizer (tokenizer.ggml.model)")),
    }
    for key in ["tokenizer.ggml.tokens", "tokenizer.ggml.merges"] {
        if !content.metadata.contains_key(key) {
            return Err(refused(path, format!("its tokenizer has no {key}")));
        }
    }
    if !content.tensor_infos.contains_key("token_embd.weight") {
        return Err(refused(path, "it holds no token embeddings (token_embd.weight): not a complete model"));
    }
    let template =
        ChatTemplate::new(text("tokenizer.chat_template").as_deref(), "", "").map_err(|why| refused(path, why))?;
    Ok(GgufSummary {
        architecture,
        name: text("general.name"),
        call_format: template.call_format(),
        own_template: template.is_own(),
    })
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::gguf_file::Value;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    use super::*;

    /// A GGUF header with `metadata` and one small embedding tensor (when `embeddings`).
    fn gguf(dir: &Path, name: &str, metadata: &[(&str, Value)], embeddings: bool) -> std::path::PathBuf {
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        let tensor =
            QTensor::quantize(&Tensor::zeros((4, 32), candle_core::DType::F32, &Device::Cpu).unwrap(), GgmlDType::F32)
                .unwrap();
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let tensors: Vec<(&str, &QTensor)> = if embeddings { vec![("token_embd.weight", &tensor)] } else { vec![] };
        gguf_file::write(&mut file, &metadata, &tensors).unwrap();
        path
    }

    fn text(value: &str) -> Value {
        Value::String(value.into())
    }

    fn list(values: &[&str]) -> Value {
        Value::Array(values.iter().map(|v| text(v)).collect())
    }

    fn reason(path: &Path) -> String {
        match inspect(path) {
            Err(ModelError::Unsupported { reason, .. }) => reason,
            other => panic!("{path:?} accepted or failed otherwise: {other:?}"),
        }
    }

    #[test]
    fn files_that_are_not_runnable_chat_models_are_refused_with_their_reason() {
        let dir = tempfile::tempdir().unwrap();
        fn with(architecture: &str, extra: &[(&'static str, Value)]) -> Vec<(&'static str, Value)> {
            let mut metadata = vec![
                ("general.architecture", text(architecture)),
                ("tokenizer.ggml.model", text("gpt2")),
                ("tokenizer.ggml.tokens", list(&["a", "b", "ab"])),
                ("tokenizer.ggml.merges", list(&["a b"])),
            ];
            metadata.extend(extra.iter().cloned());
            metadata
        }

        assert_eq!(reason(&dir.path().join("absent.gguf")), "no such file");
        let not_gguf = dir.path().join("weights.bin");
        std::fs::write(&not_gguf, b"PK\x03\x04 a zip file, not a model").unwrap();
        assert_eq!(reason(&not_gguf), "not a GGUF file", "the parser's words stay in the log");

        let bert = gguf(dir.path(), "bert.gguf", &with("bert", &[]), true);
        assert_eq!(
            reason(&bert),
            "a bert model; Confab runs the llama (Llama 3.x, SmolLM2), qwen2 (Qwen2, Qwen2.5) and qwen3 (Qwen3) architectures"
        );
        let mut sentencepiece = with("llama", &[]);
        sentencepiece[1].1 = text("llama");
        let llama2 = gguf(dir.path(), "llama2.gguf", &sentencepiece, true);
        assert!(
            reason(&llama2).starts_with("its tokenizer is \"llama\"; Confab reads byte-level BPE"),
            "{}",
            reason(&llama2)
        );
        let headless = gguf(dir.path(), "headless.gguf", &with("qwen2", &[]), false);
        assert!(reason(&headless).contains("no token embeddings"), "{}", reason(&headless));
        let broken =
            gguf(dir.path(), "broken.gguf", &with("qwen3", &[("tokenizer.chat_template", text("{% if %}"))]), true);
        assert!(reason(&broken).starts_with("its chat template does not compile"), "{}", reason(&broken));

        let fine = gguf(dir.path(), "fine.gguf", &with("qwen3", &[("general.name", text("Tiny"))]), true);
        let summary = inspect(&fine).expect("a qwen3 header with a tokenizer is accepted");
        assert_eq!((summary.architecture, summary.name.as_deref()), (Architecture::Qwen3, Some("Tiny")));
        assert!(!summary.own_template, "no template: prompted in ChatML");
    }
}
