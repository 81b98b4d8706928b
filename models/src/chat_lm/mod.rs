//! Chat language models from GGUF files, with candle: the embedded SmolLM2-135M-Instruct (llama
//! architecture, candle's quantized llama) and Qwen2.5-Coder-0.5B-Instruct ([`qwen2`]), each run from the
//! copy `requantize` makes at fetch time (candle multiplies Q4_1 and Q5_0 without SIMD, Q8_0 and the
//! K-quants with it), and any GGUF of the user's in the llama, qwen2 or qwen3 architecture ([`gguf`] says
//! whether a file is one; [`ChatModelChoice`] finds it). Qwen2's Q8_0 matrices are widened at load so that
//! candle multiplies them with its VNNI kernels (`projection`). The tokenizer is built from the GGUF
//! metadata ([`tokenizer`]); prompts are rendered with the file's own chat template ([`template`]);
//! generation streams text and stops at an end token, a stop sequence or the token bound; tokens the reply already holds are penalised ([`REPEAT_PENALTY`]) so
//! that it does not loop, and each token is sampled from the nucleus ([`TOP_P`]) by `sampler`.
//!
//! Prompts are not evaluated from scratch each turn: the model's key/value state is kept after each prompt
//! and after each reply ([`PREFIX_STATES`] of them, most recent first), and a new prompt that begins with a
//! kept state's tokens evaluates only the tokens after them. A conversation's next turn thus evaluates only
//! the new user message (its prompt is the previous one plus the reply and the new message); a new call
//! with the same system prompt starts from the system prompt's state. A kept state costs only its
//! key/value tensors (the weights are shared).

mod catalog;
mod chat;
pub mod gguf;
mod places;
pub mod projection;
pub mod qwen2;
pub mod requantize;
mod sampler;
pub mod template;
mod tokenizer;
mod weights;

pub use catalog::{ChatModelChoice, LocalChatModel};
pub use chat::{ChatLm, PREFIX_STATES, REPEAT_PENALTY, REPEAT_WINDOW, TOP_P};
pub use places::ModelPlaces;
pub use template::{CallFormat, Message, TemplateCall, ToolFunction};

use crate::ModelError;

fn fail(message: impl std::fmt::Display) -> ModelError {
    ModelError::Inference { model: "chat-lm", message: message.to_string() }
}
