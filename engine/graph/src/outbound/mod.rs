//! Requests Confab makes to addresses its users give it: webhooks, tools, MCP servers, guardrail
//! callbacks. One address guard (`guard`) for all of them, and the Standard Webhooks signature
//! (`signing`) for what Confab posts.

pub mod guard;
pub mod signing;
