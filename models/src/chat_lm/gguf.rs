//! Whether a GGUF file is a chat model Confab can run, without reading its weights: its header (read with
//! ggml's own GGUF reader: architecture, name, chat template), then llama.cpp's load of everything but the
//! weights (an architecture it knows, complete hyperparameters, a tokenizer it reads, every tensor). Agents naming a file are
//! checked with it when they are created, so a bad file is refused then, with its reason, rather than at a
//! call. llama.cpp's load says only that it failed; the reason is the error it logged (`llama`).

use std::path::Path;

use llama_cpp_2::gguf::GgufContext;

use super::llama;
use super::template::{CallFormat, ChatTemplate};
use crate::ModelError;

/// Architectures llama.cpp runs as encoders only (embeddings, not replies).
const ENCODERS: [&str; 8] =
    ["bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "neo-bert", "modern-bert", "t5encoder", "eurobert"];

/// What `inspect` read from a runnable GGUF.
#[derive(Debug, Clone)]
pub struct GgufSummary {
    /// `general.architecture` (llama, qwen2, qwen3, gemma3, phi3, …).
    pub architecture: String,
    /// `general.name`, when the file has one.
    pub name: Option<String>,
    /// How the model calls tools, from its chat template (`CallFormat::None`: it is offered none).
    pub call_format: CallFormat,
    /// Whether the file carries its own chat template (false: it is prompted in ChatML).
    pub own_template: bool,
}

/// What a GGUF's header says of it.
pub(super) struct Header {
    pub(super) architecture: String,
    pub(super) name: Option<String>,
    pub(super) chat_template: Option<String>,
}

/// The reason a file cannot be run, worded for the person who named it: one line.
pub(super) fn refused(path: &Path, why: impl std::fmt::Display) -> ModelError {
    let why = why.to_string();
    let first_line = why.lines().next().unwrap_or_default().trim_end();
    ModelError::Unsupported { path: path.display().to_string(), reason: first_line.to_string() }
}

/// Reads `path`'s header and says whether Confab can run it as a chat model (llama.cpp loads all of it but
/// its weights to say so).
pub fn inspect(path: &Path) -> Result<GgufSummary, ModelError> {
    let header = header(path)?;
    let template = ChatTemplate::new(header.chat_template.as_deref(), "", "").map_err(|why| refused(path, why))?;
    llama::check_loads(path).map_err(|why| refused(path, format!("llama.cpp cannot load it: {why}")))?;
    Ok(GgufSummary {
        architecture: header.architecture,
        name: header.name,
        call_format: template.call_format(),
        own_template: template.is_own(),
    })
}

/// The header of a GGUF that names a decoder architecture. Err: why not, for the person who named it.
pub(super) fn header(path: &Path) -> Result<Header, ModelError> {
    if !path.is_file() {
        return Err(refused(path, "no such file"));
    }
    if let Err(err) = std::fs::File::open(path) {
        return Err(refused(path, format!("cannot be read: {err}")));
    }
    llama::backend();
    llama::clear_error();
    let Some(gguf) = GgufContext::from_file(path) else {
        // ggml's words go to the log, not the reason ("failed to read magic", "tensor data not within
        // file bounds"): the person learns what the file is not.
        if let Some(detail) = llama::take_error() {
            tracing::warn!(file = %path.display(), error = detail, "not a GGUF file");
        }
        return Err(refused(path, "not a GGUF file"));
    };
    let text = |key: &str| {
        let index = gguf.find_key(key);
        (index >= 0 && gguf.kv_type(index) == llama_cpp_sys_2::GGUF_TYPE_STRING)
            .then(|| gguf.val_str(index).map(str::to_string))
            .flatten()
    };
    let architecture = text("general.architecture").unwrap_or_default();
    if architecture.is_empty() {
        return Err(refused(path, "it names no architecture (general.architecture): not a model llama.cpp can load"));
    }
    if ENCODERS.contains(&architecture.as_str()) {
        return Err(refused(path, format!("a {architecture} model computes embeddings; a chat model writes replies")));
    }
    Ok(Header { architecture, name: text("general.name"), chat_template: text("tokenizer.chat_template") })
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::gguf_file::{self, Value};
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    use super::*;

    /// A GGUF header with `metadata` and one small embedding tensor.
    fn gguf(dir: &Path, name: &str, metadata: &[(&str, Value)]) -> std::path::PathBuf {
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        let tensor =
            QTensor::quantize(&Tensor::zeros((4, 32), candle_core::DType::F32, &Device::Cpu).unwrap(), GgmlDType::F32)
                .unwrap();
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        gguf_file::write(&mut file, &metadata, &[("token_embd.weight", &tensor)]).unwrap();
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

    #[test]
    fn files_that_are_not_runnable_chat_models_are_refused_with_their_reason() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(reason(&dir.path().join("absent.gguf")), "no such file");
        let not_gguf = dir.path().join("weights.bin");
        std::fs::write(&not_gguf, b"PK\x03\x04 a zip file, not a model").unwrap();
        assert_eq!(reason(&not_gguf), "not a GGUF file", "ggml's words stay in the log");

        let bert = gguf(dir.path(), "bert.gguf", &with("bert", &[]));
        assert_eq!(reason(&bert), "a bert model computes embeddings; a chat model writes replies");
        let nameless = gguf(dir.path(), "nameless.gguf", &with("", &[]));
        assert!(reason(&nameless).starts_with("it names no architecture"), "{}", reason(&nameless));
        let broken = gguf(dir.path(), "broken.gguf", &with("qwen3", &[("tokenizer.chat_template", text("{% if %}"))]));
        assert!(reason(&broken).starts_with("its chat template does not compile"), "{}", reason(&broken));
    }

    /// What llama.cpp cannot load is refused with the error it logged, not "null result".
    #[test]
    fn what_llama_cpp_cannot_load_is_refused_with_its_own_reason() {
        let dir = tempfile::tempdir().unwrap();
        let unknown = gguf(dir.path(), "unknown.gguf", &with("frobnicator", &[]));
        let why = reason(&unknown);
        assert!(why.starts_with("llama.cpp cannot load it: "), "{why}");
        assert!(why.contains("unknown model architecture: 'frobnicator'"), "{why}");
        // A known architecture whose hyperparameters are missing: llama.cpp names the key.
        let incomplete = gguf(dir.path(), "incomplete.gguf", &with("qwen2", &[]));
        let why = reason(&incomplete);
        assert!(why.starts_with("llama.cpp cannot load it: ") && why.contains("qwen2.context_length"), "{why}");
    }
}
