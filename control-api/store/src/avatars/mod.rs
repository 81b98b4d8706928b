//! The pictures an agent's face is drawn from: stock faces and custom portraits as PNG (`portrait`), and the
//! rigged faces kept for custom avatars (`assets`), and the pictures they were made from (`sources`). The HTTP routes that create and list avatars are the
//! HTTP crate's.

pub mod assets;
pub mod portrait;
pub mod sources;
