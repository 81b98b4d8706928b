//! The chat models agents name (`llm.model` with provider `local`): the embedded ones by name, and a GGUF
//! file of the user's, by path or by name, found only in the places an API key may name ([`ModelPlaces`]);
//! the operator's `--local-llm` may name any file.

use std::path::{Path, PathBuf};

use super::places::ModelPlaces;
use crate::paths::{QWEN_CODER_Q8, SMOLLM2_Q8};
use crate::{ModelError, require};

/// The embedded models' names, for a reason that lists them.
fn embedded_names() -> String {
    let names: Vec<&str> = LocalChatModel::ALL.iter().map(|m| m.name()).collect();
    names.join(", ")
}

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
    /// What `name` names when an agent names it (over the API, or in `simulate --agent`'s file): empty,
    /// the embedded default; an embedded model's name; else a GGUF file inside `places` (by a name or a path
    /// relative to the models directory or an allowed one, or by an absolute path inside one). Anything else
    /// is refused with one reason, which says neither whether the file exists nor where the server keeps
    /// its files. Whether the file is a model Confab can run is `gguf::inspect`'s question, not this one's.
    pub fn resolve(places: &ModelPlaces, name: &str) -> Result<ChatModelChoice, ModelError> {
        let name = name.trim();
        if let Some(embedded) = ChatModelChoice::embedded(name) {
            return Ok(embedded);
        }
        places.find(name).map(ChatModelChoice::File).ok_or_else(|| ModelError::Unsupported {
            path: name.to_string(),
            reason: format!(
                "no such model: name one of {} or a GGUF file in the models directory (by its name, or a path inside it) or in a directory the server allows",
                embedded_names()
            ),
        })
    }

    /// What `name` names when the operator names it (`--local-llm`): as [`resolve`](Self::resolve), and
    /// any GGUF file the process can read, by its absolute path or a path inside `models_dir`.
    pub fn resolve_operator(models_dir: &Path, name: &str) -> Result<ChatModelChoice, ModelError> {
        let name = name.trim();
        if let Some(embedded) = ChatModelChoice::embedded(name) {
            return Ok(embedded);
        }
        let candidates = [models_dir.join(name), models_dir.join(format!("{name}.gguf"))];
        if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
            return Ok(ChatModelChoice::File(found));
        }
        Err(ModelError::Unsupported {
            path: name.to_string(),
            reason: format!(
                "no such model: name one of {} or a GGUF file (an absolute path, or a path or name inside the models directory {})",
                embedded_names(),
                models_dir.display()
            ),
        })
    }

    /// The embedded model `name` names (the default when empty).
    fn embedded(name: &str) -> Option<ChatModelChoice> {
        if name.is_empty() {
            return Some(ChatModelChoice::Embedded(LocalChatModel::DEFAULT));
        }
        LocalChatModel::from_name(name).map(ChatModelChoice::Embedded)
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
        let dir_path = dir.path().canonicalize().unwrap();
        std::fs::write(dir_path.join("mine.gguf"), b"GGUF").unwrap();
        let places = ModelPlaces::new(&dir_path, &[]);
        let resolve = |name: &str| ChatModelChoice::resolve(&places, name);
        assert_eq!(resolve("").unwrap(), ChatModelChoice::Embedded(LocalChatModel::DEFAULT));
        assert_eq!(resolve(" SmolLM2-135M-Instruct ").unwrap(), ChatModelChoice::Embedded(LocalChatModel::SmolLm2));
        let mine = ChatModelChoice::File(dir_path.join("mine.gguf"));
        assert_eq!(resolve("mine").unwrap(), mine);
        assert_eq!(resolve("mine.gguf").unwrap(), mine);
        assert_eq!(resolve(&dir_path.join("mine.gguf").display().to_string()).unwrap(), mine);
        assert_eq!(mine.name(), "mine.gguf");
        let err = resolve("theirs.gguf").unwrap_err().to_string();
        assert!(err.starts_with("theirs.gguf cannot be used: no such model: name one of qwen2.5-coder-0.5b-instruct, smollm2-135m-instruct or a GGUF file"), "{err}");
    }

    /// A file outside the places and one that does not exist get the same words, and neither names the
    /// models directory; the operator's choice is not held to the places.
    #[test]
    fn a_name_outside_the_places_is_refused_as_if_it_did_not_exist() {
        let (models, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let outside = elsewhere.path().join("real.gguf");
        std::fs::write(&outside, b"GGUF").unwrap();
        let places = ModelPlaces::new(models.path(), &[]);
        let reason = |name: &str| match ChatModelChoice::resolve(&places, name).unwrap_err() {
            ModelError::Unsupported { reason, .. } => reason,
            other => panic!("{other}"),
        };
        let (exists, missing) = (reason(&outside.display().to_string()), reason("/nonexistent/model.gguf"));
        assert_eq!(exists, missing);
        assert_eq!(reason("/etc/passwd"), missing);
        assert!(!missing.contains(&models.path().display().to_string()), "{missing}");
        assert_eq!(
            ChatModelChoice::resolve_operator(models.path(), &outside.display().to_string()).unwrap(),
            ChatModelChoice::File(outside)
        );
    }
}
