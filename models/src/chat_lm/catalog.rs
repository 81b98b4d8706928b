//! The embedded chat models by the names agents give them (`llm.model` with provider `local`), and their files.

use crate::paths::{QWEN_CODER_Q8, SMOLLM2_Q8};

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

    /// Whether the model was trained to call tools (Qwen's template has a tool format; SmolLM2's has none).
    pub const fn calls_tools(self) -> bool {
        matches!(self, LocalChatModel::QwenCoder05b)
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
