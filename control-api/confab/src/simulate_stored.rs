//! `confab simulate --agent-id ID`: a stored agent runs one conversation from a WAV file, as a live call
//! would. The agent is read as the API returns it (tools, guardrails, MCP servers, knowledge bases,
//! prompt and providers resolved; a template's attachments were copied into the agent when it was made);
//! a conversation record (`type: "simulation"`, no join link) is created; every event is applied like a
//! live call's (status, transcript, webhook outbox) and each turn's metrics are stored; guardrail
//! callbacks go out from the engine, and each turn's knowledge-base snippets are recorded. When the conversation is over, this process delivers its webhooks
//! (`WEBHOOK_DRAIN` at most; what is still pending stays in the outbox for `confab serve` on the same
//! database to deliver). Event lines go to stdout as with `--agent FILE`; the conversation id is printed
//! on stderr.

use std::time::Duration;

use anyhow::Context;
use confab_engine::simulate::{Observed, SimulateOptions};
use serde_json::json;
use tokio::sync::mpsc;

use confab_http::routes::conversations::{NewConversation, new_summary};
use confab_http::webhooks::{Deliverer, WebhookConfig};
use confab_store::Db;
use confab_store::agents::{AgentFields, agent_spec, to_agent};
use confab_store::collection::AGENTS;
use confab_store::conversations;
use confab_store::outbox;

/// The `type` of conversations made by `confab simulate --agent-id`.
pub const TYPE_SIMULATION: &str = "simulation";
/// Longest wait for the conversation's webhooks after it ends.
pub const WEBHOOK_DRAIN: Duration = Duration::from_secs(30);

/// Runs the stored agent `agent_id` on `options.input` (`options.agent` is not read), with its own face: a
/// completed custom avatar's portrait is read from the same database.
pub async fn run(db: Db, agent_id: &str, mut options: SimulateOptions) -> anyhow::Result<String> {
    let record = AGENTS.get(&db, agent_id).await?.with_context(|| format!("agent {agent_id} not found"))?;
    let fields: AgentFields = record.fields()?;
    let resolved = to_agent(&db, &record).await?;
    let knowledge_base_ids: Vec<String> = resolved.knowledge_base.iter().map(|kb| kb.id.clone()).collect();
    let spec = agent_spec(&resolved);
    if let Some(face) = spec.avatars.first() {
        options.custom_face = confab_store::avatars::assets::load(&db, &face.avatar_key_id).await?;
    }
    let id = uuid::Uuid::new_v4().to_string();
    let new = NewConversation {
        agent_id,
        user_name: "simulation",
        user_id: "simulation",
        context: "",
        meta_data: json!({ "input": options.input.display().to_string() }),
        conversation_type: TYPE_SIMULATION,
        avatar_key_id: None,
    };
    conversations::insert(&db, &new_summary(id.clone(), agent_id.to_string(), &fields, new, String::new())).await?;
    eprintln!("conversation {id}");

    let (events_tx, events) = mpsc::channel(confab_worker::session_binding::BRIDGE_QUEUE);
    let (metrics_tx, metrics) = mpsc::channel(confab_worker::session_binding::BRIDGE_QUEUE);
    let recorder = tokio::spawn(confab_store::conversation_events::consume(db.clone(), id.clone(), events, None, None));
    let pipeline = confab_engine::agent_spec::PipelineConfig::of_agent(&spec);
    let providers = confab_calls::metrics::Providers::of_pipeline(&pipeline);
    let metrics_writer = tokio::spawn(confab_worker::session_binding::store_turn_metrics(
        confab_store::call_records::StoreRecords::new(db.clone(), None),
        id.clone(),
        providers,
        metrics,
    ));
    let models_dir = options.models_dir.clone();
    let (retrieval, snippets_writer) =
        confab_store::conversation_knowledge::retrieval(&db, &models_dir, &knowledge_base_ids, &id).await.unzip();
    let conversation_id = id.clone();
    let allow_private = options.allow_private_urls;
    let engine = tokio::task::spawn_blocking(move || {
        let mut observe = |observed: Observed<'_>| match observed {
            Observed::Event(event) => {
                let _ = events_tx.blocking_send(event.clone());
            }
            Observed::TurnMetrics(turn) => {
                let _ = metrics_tx.blocking_send(turn.clone());
            }
        };
        let mut stdout = std::io::stdout().lock();
        confab_engine::simulate::run_agent(&spec, &conversation_id, &options, retrieval, &mut stdout, &mut observe)
            .map(|_| ())
    });
    let outcome = engine.await.context("the simulation panicked")?;
    recorder.await.context("recording the conversation failed")?;
    metrics_writer.await.context("storing turn metrics failed")?;
    if let Some(writer) = snippets_writer {
        writer.await.context("recording snippets failed")?;
    }
    outcome?;
    deliver_webhooks(&db, &id, allow_private).await?;
    Ok(id)
}

/// Delivers the conversation's pending webhooks, for `WEBHOOK_DRAIN` at most.
async fn deliver_webhooks(db: &Db, conversation_id: &str, allow_private: bool) -> anyhow::Result<()> {
    let deliverer = Deliverer::new(db.clone(), WebhookConfig { allow_private, ..WebhookConfig::default() });
    let task = tokio::spawn(deliverer.run());
    let deadline = tokio::time::Instant::now() + WEBHOOK_DRAIN;
    let pending = loop {
        let pending = outbox::pending_count(db, conversation_id).await?;
        if pending == 0 || tokio::time::Instant::now() >= deadline {
            break pending;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    task.abort();
    if pending > 0 {
        eprintln!("{pending} webhook deliveries still pending; `confab serve` on this database will retry them");
    }
    Ok(())
}
