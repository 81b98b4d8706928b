//! Chat language models from GGUF files, on llama.cpp: the embedded Qwen2.5-Coder-0.5B-Instruct (the
//! default) and SmolLM2-135M-Instruct, each run from the Q8_0 copy `requantize` makes at fetch time, and
//! any GGUF of the user's that llama.cpp loads as a chat model ([`gguf`] says whether a file is one, from
//! its header and vocabulary; [`ChatModelChoice`] finds it). Each file is loaded once per process and its
//! weights shared (`llama`); each [`ChatLm`] has its own llama.cpp context. Prompts are rendered with the
//! file's own chat template ([`template`]) and tokenized by llama.cpp; generation streams text and stops at
//! an end token, a stop sequence or the token bound; tokens the reply already holds are penalised
//! ([`REPEAT_PENALTY`]) so that it does not loop, and each token is sampled from the nucleus ([`TOP_P`]) by
//! `sampler`.
//!
//! Prompts are not evaluated from scratch each turn: the key/value state is kept after each prompt and
//! after each reply ([`PREFIX_STATES`] of them, most recent first, as sequences of the context's cache:
//! `kept`), and a new prompt evaluates only the tokens after the longest beginning it shares with a kept
//! state. `ChatLm::warm` evaluates ahead what the next prompt will begin with (a call's system prompt at
//! its start; the conversation when a reply ends; each with the opening of the user's next message), so a
//! turn's prompt evaluates only the user's words and the template's closing; a new call with the same
//! system prompt starts from the system prompt's state.

mod catalog;
mod chat;
pub mod gguf;
mod kept;
mod llama;
mod places;
pub mod requantize;
mod sampler;
pub mod template;
mod threads;

pub use catalog::{ChatModelChoice, LocalChatModel};
pub use chat::{CONTEXT_POSITIONS, ChatLm, REPEAT_PENALTY, REPEAT_WINDOW, TOP_P};
pub use kept::PREFIX_STATES;
pub use llama::system_info;
pub use places::ModelPlaces;
pub use template::{CallFormat, Message, TemplateCall, ToolFunction};
pub use threads::threads_in_use;

use crate::ModelError;

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference { model: "chat-lm", message: message.to_string() }
}
