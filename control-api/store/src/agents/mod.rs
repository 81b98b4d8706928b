//! The agent domain: what is stored for an agent and the resource it resolves into, whoever reads it
//! (the HTTP routes, the media worker starting a call, webhooks, `confab simulate --agent-id`).

pub mod engine_spec;
pub mod record;
pub mod resolve;

pub use engine_spec::agent_spec;
pub use record::{Agent, AgentAvatar, AgentFields, AgentSettings};
pub use resolve::{to_agent, to_agents};
