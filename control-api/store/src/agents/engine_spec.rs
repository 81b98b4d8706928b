//! The stored agent as the engine runs it: the Agent resource (its attachments resolved) turned into the
//! engine's `AgentSpec` field by field — the pipelines are the same typed `PipelineConfig`, the tools,
//! guardrails and MCP servers become the engine's action records — with no JSON in between.

use confab_engine::actions::records::{
    ActionsSpec, EventMessagesRecord, FunctionRecord, GuardrailRecord, McpRecord, MessageRecord, RequestRecord,
    ToolRecord,
};
use confab_engine::agent_spec::{AgentSettingsSpec, AgentSpec, AvatarSpec};

use super::record::Agent;
use crate::records::guardrails::Guardrail;
use crate::records::mcp::Mcp;
use crate::records::tools::Tool;

/// What the engine runs of `agent`.
pub fn agent_spec(agent: &Agent) -> AgentSpec {
    AgentSpec {
        agent_name: agent.agent_name.clone(),
        agent_system_prompt: agent.agent_system_prompt.clone(),
        avatars: agent
            .avatars
            .iter()
            .map(|avatar| AvatarSpec { avatar_key_id: avatar.avatar_key_id.clone(), config: avatar.config.clone() })
            .collect(),
        config: AgentSettingsSpec {
            max_call_duration: Some(agent.config.max_call_duration),
            conversational_context: agent.config.conversational_context.clone(),
        },
        actions: ActionsSpec {
            tool: agent.tool.iter().map(tool_record).collect(),
            guardrail: agent.guardrail.iter().map(guardrail_record).collect(),
            mcp: agent.mcp.iter().map(mcp_record).collect(),
            webhook_secret: agent.webhook_secret.clone(),
        },
    }
}

fn tool_record(tool: &Tool) -> ToolRecord {
    let fields = &tool.fields;
    let spoken = |message: &str| MessageRecord { message: message.to_string(), delay: None };
    let messages = &fields.event_messages;
    ToolRecord {
        tool_type: fields.tool_type.clone(),
        schema: FunctionRecord {
            name: fields.schema.name.clone(),
            description: fields.schema.description.clone(),
            // The parameters' JSON Schema is offered to the model as the document it is.
            parameters: Some(serde_json::to_value(&fields.schema.parameters).expect("parameters serialize")),
        },
        request_config: RequestRecord {
            method: fields.request_config.method.clone(),
            url: fields.request_config.url.clone(),
            headers: fields.request_config.headers.clone(),
        },
        event_messages: EventMessagesRecord {
            on_start: spoken(&messages.on_start.message),
            on_success: spoken(&messages.on_success.message),
            on_error: spoken(&messages.on_error.message),
            on_delay: MessageRecord {
                message: messages.on_delay.message.clone(),
                delay: Some(messages.on_delay.delay),
            },
        },
    }
}

fn guardrail_record(guardrail: &Guardrail) -> GuardrailRecord {
    let fields = &guardrail.fields;
    GuardrailRecord {
        id: guardrail.id.clone(),
        key: fields.key.clone(),
        name: fields.name.clone(),
        category: fields.category.clone(),
        prompt: fields.prompt.clone(),
        response_message: fields.response_message.clone(),
        callback_url: fields.callback_url.clone(),
    }
}

fn mcp_record(mcp: &Mcp) -> McpRecord {
    let fields = &mcp.fields;
    McpRecord {
        name: fields.name.clone(),
        mcp_type: fields.mcp_type.clone(),
        request_config: RequestRecord {
            method: String::new(),
            url: fields.request_config.url.clone(),
            headers: fields.request_config.headers.clone(),
        },
    }
}
