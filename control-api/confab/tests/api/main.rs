//! The API suite: every operation and every error row of SPEC.md, run on SQLite and on PostgreSQL.

mod support;

mod agents;
mod auth;
mod avatars;
mod bad_input;
mod console;
mod conversations;
mod fleet_records;
mod guardrails;
mod knowledge;
mod livekit_auth;
mod meeting_records;
mod openapi;
mod signalling;
mod templates;
mod tools_and_mcp;
mod webhooks;
