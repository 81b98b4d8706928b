//! The chat models agents name (`llm.model` with provider `local`): the embedded ones by name, and any
//! GGUF file of the user's, by path or by its name in the models directory.

use std::path::{Path, PathBuf};

use crate::paths::{QWEN_CODER_Q8, SMOLLM2_Q8};
use crate::{ModelError, require};

/// The embedded chat models, by the names agents give them (`llm.model` with provider `local`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalChatModel {
    /// Qwen2.5-Coder-0.5B-Instruct: the default; answers short factual questions far better.
    QwenCoder05b,
    /// SmolLM2-135M-Instruct: four times cheaper, often wrong.
    SmolLm2,
}

impl LocalChatModel {
    pub const ALL: [LocalChatModel; 2] = [LocalChatModel::QwenCoder05b, LocalChatModel::SmolLm2];
    pub const DEFAULT: LocalChatModel = LocalChatModel::QwenCoder05b;

    pub const fn name(self) -> &'static str {
        match self {
            LocalChatModel::QwenCoder05b => "qwen2.5-coder-0.5b-instruct",
            LocalChatModel::SmolLm2 => "smollm2-135m-instruct",
        }
    }

    /// The model an agent names (case-insensitive); None for a name no embedded model has.
    pub fn from_name(name: &str) -> Option<LocalChatModel> {
        LocalChatModel::ALL.into_iter().find(|model| model.name().eq_ignore_ascii_case(name.trim()))
    }

    pub(super) fn file(self) -> &'static str {
        match self {
            LocalChatModel::QwenCoder05b => QWEN_CODER_Q8,
            LocalChatModel::SmolLm2 => SMOLLM2_Q8,
        }
    }
}

/// A chat model an agent names: an embedded one, or a GGUF file of the user's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChatModelChoice {
    Embedded(LocalChatModel),
    File(PathBuf),
}

impl ChatModelChoice {
    /// What `name` names: empty, the default; an embedded model's name; else a GGUF file, by absolute path
    /// (joining keeps it whole), by a path inside `models_dir`, or by its name there without `.gguf`.
    /// Whether the file is a model Confab can run is `gguf::inspect`'s question, not this one's.
    pub fn resolve(models_dir: &Path, name: &str) -> Result<ChatModelChoice, ModelError> {
        let name = name.trim();
        if name.is_empty() {
            return Ok(ChatModelChoice::Embedded(LocalChatModel::DEFAULT));
        }
        if let Some(model) = LocalChatModel::from_name(name) {
            return Ok(ChatModelChoice::Embedded(model));
        }
        let candidates = [models_dir.join(name), models_dir.join(format!("{name}.gguf"))];
        if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
            return Ok(ChatModelChoice::File(found));
        }
        let names: Vec<&str> = LocalChatModel::ALL.iter().map(|m| m.name()).collect();
        Err(ModelError::Unsupported {
            path: name.to_string(),
            reason: format!(
                "no such model: name one of {} or a GGUF file (an absolute path, or a path or name inside the models directory {})",
                names.join(", "),
                models_dir.display()
            ),
        })
    }

    /// The file to load.
    pub fn path(&self, models_dir: &Path) -> Result<PathBuf, ModelError> {
        match self {
            ChatModelChoice::Embedded(model) => require(models_dir, model.file()),
            ChatModelChoice::File(path) => Ok(path.clone()),
        }
    }

    /// The name it goes by in logs and metrics: the embedded model's name, or the file's name.
    pub fn name(&self) -> String {
        match self {
            ChatModelChoice::Embedded(model) => model.name().to_string(),
            ChatModelChoice::File(path) => {
                path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_embedded_models_or_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mine.gguf"), b"GGUF").unwrap();
        let resolve = |name: &str| ChatModelChoice::resolve(dir.path(), name);
        assert_eq!(resolve("").unwrap(), ChatModelChoice::Embedded(LocalChatModel::DEFAULT));
        assert_eq!(resolve(" SmolLM2-135M-Instruct ").unwrap(), ChatModelChoice::Embedded(LocalChatModel::SmolLm2));
        let mine = ChatModelChoice::File(dir.path().join("mine.gguf"));
        assert_eq!(resolve("mine").unwrap(), mine);
        assert_eq!(resolve("mine.gguf").unwrap(), mine);
        assert_eq!(resolve(&dir.path().join("mine.gguf").display().to_string()).unwrap(), mine);
        assert_eq!(mine.name(), "mine.gguf");
        let err = resolve("theirs.gguf").unwrap_err().to_string();
        assert!(err.starts_with("theirs.gguf cannot be used: no such model: name one of qwen2.5-coder-0.5b-instruct, smollm2-135m-instruct or a GGUF file"), "{err}");
    }
}
