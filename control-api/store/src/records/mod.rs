//! The records an agent attaches by id: their stored fields and the API resources built from them. The
//! routes that create, list and delete them are the HTTP crate's; `crate::agents` resolves an agent's
//! attachments into these.

pub mod guardrails;
pub mod knowledge_bases;
pub mod mcp;
pub mod tools;
