//! Resolving agent records into the Agent resource: their attached knowledge bases, tools, guardrails
//! and MCP configurations fetched with one query per kind, references whose target was deleted skipped.

use std::collections::HashMap;

use super::record::{Agent, AgentFields};
use crate::agent_config::Attachments;
use crate::collection::{GUARDRAILS, KNOWLEDGE_BASES, MCP_SERVERS, TOOLS};
use crate::records::guardrails::{Guardrail, to_guardrail};
use crate::records::knowledge_bases::{KnowledgeBase, document_counts, knowledge_base_with_count};
use crate::records::mcp::{Mcp, to_mcp};
use crate::records::tools::{Tool, to_tool};
use crate::{Db, StoredRecord};

/// The attachments of a set of agents, fetched with one query per kind (not one per agent).
struct AttachedRecords {
    knowledge_bases: HashMap<String, KnowledgeBase>,
    tools: HashMap<String, Tool>,
    guardrails: HashMap<String, Guardrail>,
    mcp: HashMap<String, Mcp>,
}

impl AttachedRecords {
    async fn fetch(db: &Db, agents: &[AgentFields]) -> Result<AttachedRecords, sqlx::Error> {
        let ids = |of: fn(&Attachments) -> &Vec<String>| -> Vec<String> {
            let unique: std::collections::BTreeSet<&String> = agents.iter().flat_map(|a| of(&a.attachments)).collect();
            unique.into_iter().cloned().collect()
        };
        let kb_records = KNOWLEDGE_BASES.get_many(db, &ids(|a| &a.knowledge_base_ids)).await?;
        let kb_ids: Vec<String> = kb_records.iter().map(|kb| kb.id.clone()).collect();
        let counts = document_counts(db, &kb_ids).await?;
        let knowledge_bases = kb_records
            .iter()
            .map(|kb| Ok((kb.id.clone(), knowledge_base_with_count(kb, counts.get(&kb.id).copied().unwrap_or(0))?)))
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(AttachedRecords {
            knowledge_bases,
            tools: by_id(TOOLS.get_many(db, &ids(|a| &a.tool_ids)).await?, to_tool)?,
            guardrails: by_id(GUARDRAILS.get_many(db, &ids(|a| &a.guardrail_ids)).await?, to_guardrail)?,
            mcp: by_id(MCP_SERVERS.get_many(db, &ids(|a| &a.mcp_ids)).await?, to_mcp)?,
        })
    }
}

fn by_id<T>(
    records: Vec<StoredRecord>,
    to_resource: fn(&StoredRecord) -> Result<T, sqlx::Error>,
) -> Result<HashMap<String, T>, sqlx::Error> {
    records.iter().map(|record| Ok((record.id.clone(), to_resource(record)?))).collect()
}

/// The attached records that still exist, in the agent's order.
fn attached<T: Clone>(ids: &[String], found: &HashMap<String, T>) -> Vec<T> {
    ids.iter().filter_map(|id| found.get(id).cloned()).collect()
}

/// Resolves an agent record into the API resource.
pub async fn to_agent(db: &Db, record: &StoredRecord) -> Result<Agent, sqlx::Error> {
    let mut agents = to_agents(db, std::slice::from_ref(record)).await?;
    Ok(agents.pop().expect("one agent per record"))
}

/// Resolves agent records into API resources, fetching their attachments once for all of them.
pub async fn to_agents(db: &Db, records: &[StoredRecord]) -> Result<Vec<Agent>, sqlx::Error> {
    let fields = records.iter().map(|record| record.fields()).collect::<Result<Vec<AgentFields>, _>>()?;
    let found = AttachedRecords::fetch(db, &fields).await?;
    Ok(records
        .iter()
        .zip(fields)
        .map(|(record, fields)| Agent {
            id: record.id.clone(),
            knowledge_base: attached(&fields.attachments.knowledge_base_ids, &found.knowledge_bases),
            tool: attached(&fields.attachments.tool_ids, &found.tools),
            guardrail: attached(&fields.attachments.guardrail_ids, &found.guardrails),
            mcp: attached(&fields.attachments.mcp_ids, &found.mcp),
            agent_name: fields.agent_name,
            agent_system_prompt: fields.agent_system_prompt,
            avatars: fields.avatars,
            callback_events: fields.callback_events,
            callback_url: fields.callback_url,
            config: fields.config,
            record: fields.record,
            attachments: fields.attachments,
            webhook_secret: fields.webhook_secret,
            email: fields.email,
            template_id: fields.template_id,
            created_at: record.created_at.clone(),
            updated_at: record.updated_at.clone(),
        })
        .collect())
}
