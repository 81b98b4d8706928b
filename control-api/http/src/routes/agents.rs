//! Agents over HTTP: creation (full form, short form, from a template), listing, reading and deletion.
//! The records and their resolution into the Agent resource are the agent domain's (`confab_store::agents`).

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::avatars::custom::find_completed;
use crate::avatars::stock_catalog::find_stock_avatar;
use crate::extract::{ApiJson, ApiQuery, parse_id};
use crate::page_cache::{CachedPage, page_key};
use crate::pagination::ListQuery;
use crate::routes::templates::TemplateFields;
use confab_store::agent_config::{Attachments, PipelineConfig, PipelineRules, nullable};
use confab_store::agents::record::{MAX_AVATARS, MAX_CALL_DURATION_LIMIT_SECONDS};
use confab_store::agents::{Agent, AgentAvatar, AgentFields, AgentSettings, to_agent, to_agents};
use confab_store::collection::{AGENTS, GUARDRAILS, KNOWLEDGE_BASES, MCP_SERVERS, TEMPLATES, TOOLS};
use confab_store::error::{ApiError, ApiResult};
use confab_store::validate;
use confab_store::{Db, StoredRecord};

pub const NOT_FOUND: &str = "Agent details not found";
const READ_FAILED: &str = "Failed to retrieve agent details";
const CREATE_FAILED: &str = "Failed to create agent";

/// `POST /v1/ext/agent`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateAgent {
    #[schema(min_length = 1, max_length = 200)]
    pub agent_name: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub agent_system_prompt: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub avatars: Vec<AgentAvatar>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub config: AgentSettings,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub callback_url: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub callback_events: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub record: bool,
    #[serde(flatten)]
    pub attachments: Attachments,
}

/// `POST /v1/agent/api`: the short form.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateAgentShort {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub system_prompt: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub avatar_ids: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub callback_url: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub callback_events: Vec<String>,
}

/// `POST /v1/ext/agentbytemplate`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateAgentFromTemplate {
    pub template_id: String,
    #[serde(default)]
    pub avatar_key_id: Option<String>,
    #[serde(default)]
    pub avatar_ids: Option<Vec<String>>,
    #[serde(default)]
    pub email: Option<String>,
    /// Appended after the template's system prompt.
    #[serde(default)]
    pub context_override: Option<String>,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, delete_agent))
        .routes(routes!(create_agent_short))
        .routes(routes!(create_agent_from_template))
}

fn new_webhook_secret() -> String {
    let mut bytes = [0u8; 24];
    rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn validate_callback(url: &str, events: &mut Vec<String>) -> ApiResult<()> {
    validate::optional_http_url("callback_url", url)?;
    for event in events.iter() {
        validate::one_of("callback_events", event, &confab_engine::EVENT_NAMES)?;
    }
    let mut seen = Vec::with_capacity(events.len());
    events.retain(|event| {
        if seen.contains(event) {
            false
        } else {
            seen.push(event.clone());
            true
        }
    });
    Ok(())
}

async fn validate_fields(db: &Db, models_dir: &std::path::Path, fields: &mut AgentFields) -> ApiResult<()> {
    validate::required_name("agent_name", &fields.agent_name)?;
    validate::max_chars("agent_system_prompt", &fields.agent_system_prompt, validate::MAX_TEXT_CHARS)?;
    validate::max_chars(
        "config.conversationalContext",
        &fields.config.conversational_context,
        validate::MAX_TEXT_CHARS,
    )?;
    let duration = fields.config.max_call_duration;
    if !(duration.is_finite() && duration > 0.0 && duration <= MAX_CALL_DURATION_LIMIT_SECONDS) {
        return Err(ApiError::bad_request(format!(
            "Invalid request body: config.maxCallDuration must be seconds between 0 and {MAX_CALL_DURATION_LIMIT_SECONDS}"
        )));
    }
    if fields.avatars.len() > MAX_AVATARS {
        return Err(ApiError::bad_request(format!("Invalid request body: at most {MAX_AVATARS} avatars")));
    }
    for (index, avatar) in fields.avatars.iter_mut().enumerate() {
        validate::required_name(&format!("avatars[{index}].avatar_key_id"), &avatar.avatar_key_id)?;
        validate::max_chars(&format!("avatars[{index}].persona_name"), &avatar.persona_name, validate::MAX_NAME_CHARS)?;
        let prefix = format!("avatars[{index}].config.");
        avatar.config.normalize(&prefix)?;
        avatar.config.check_local_model(&prefix, models_dir)?;
    }
    validate_callback(&fields.callback_url, &mut fields.callback_events)?;
    fields.attachments.validate(db).await
}

async fn insert_agent(state: &AppState, mut fields: AgentFields) -> ApiResult<Json<Value>> {
    let db = &state.db;
    validate_fields(db, &state.config.models_dir, &mut fields).await?;
    let record = StoredRecord::new(uuid::Uuid::new_v4().to_string(), &fields.agent_name, &fields);
    AGENTS.insert(&db.pool, &record).await.map_err(ApiError::internal(CREATE_FAILED))?;
    Ok(Json(
        json!({ "id": record.id, "message": "Agent created successfully", "webhook_secret": fields.webhook_secret }),
    ))
}

/// Create an agent from its full description.
#[utoipa::path(post, path = "/v1/ext/agent", tag = "agents", request_body = CreateAgent,
    responses((status = 200, description = "`{id, message: \"Agent created successfully\", webhook_secret}`"), (status = 400), (status = 401)))]
async fn create_agent(State(state): State<AppState>, ApiJson(input): ApiJson<CreateAgent>) -> ApiResult<Json<Value>> {
    let fields = AgentFields {
        agent_name: input.agent_name,
        agent_system_prompt: input.agent_system_prompt,
        avatars: input.avatars,
        callback_url: input.callback_url,
        callback_events: input.callback_events,
        config: input.config,
        record: input.record,
        attachments: input.attachments,
        webhook_secret: new_webhook_secret(),
        email: String::new(),
        template_id: String::new(),
    };
    insert_agent(&state, fields).await
}

/// Create an agent from the short form; avatars get the default (local) pipeline.
#[utoipa::path(post, path = "/v1/agent/api", tag = "agents", request_body = CreateAgentShort,
    responses((status = 200, description = "`{id, message: \"Agent created successfully\", webhook_secret}`"), (status = 400), (status = 401)))]
async fn create_agent_short(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<CreateAgentShort>,
) -> ApiResult<Json<Value>> {
    let avatars = input
        .avatar_ids
        .into_iter()
        .map(|avatar_key_id| AgentAvatar {
            persona_name: find_stock_avatar(&avatar_key_id).map(|a| a.avatar_name.clone()).unwrap_or_default(),
            avatar_key_id,
            config: PipelineConfig::default(),
        })
        .collect();
    let fields = AgentFields {
        agent_name: input.name,
        agent_system_prompt: input.system_prompt,
        avatars,
        callback_url: input.callback_url,
        callback_events: input.callback_events,
        config: AgentSettings::default(),
        record: false,
        attachments: Attachments::default(),
        webhook_secret: new_webhook_secret(),
        email: String::new(),
        template_id: String::new(),
    };
    insert_agent(&state, fields).await
}

/// The persona name of a stock or completed custom avatar; None when it cannot be fetched.
async fn avatar_persona(db: &Db, avatar_key_id: &str) -> Result<Option<String>, sqlx::Error> {
    if let Some(stock) = find_stock_avatar(avatar_key_id) {
        return Ok(Some(stock.avatar_name.clone()));
    }
    Ok(find_completed(db, avatar_key_id).await?.map(|custom| custom.avatar_name))
}

/// Create an agent from a template: it inherits the template's prompt, pipeline and attachments.
#[utoipa::path(post, path = "/v1/ext/agentbytemplate", tag = "agents", request_body = CreateAgentFromTemplate,
    responses((status = 200, description = "`{id, message: \"Agent created successfully\", webhook_secret}`"),
        (status = 400, description = "`{error: \"Invalid request body\"}`"),
        (status = 404, description = "`{error: \"Failed to fetch template/avatar\"}`"), (status = 401)))]
async fn create_agent_from_template(
    State(state): State<AppState>,
    body: Result<ApiJson<CreateAgentFromTemplate>, ApiError>,
) -> ApiResult<Json<Value>> {
    let invalid = || ApiError::bad_request("Invalid request body");
    let input = match body {
        Ok(ApiJson(input)) => input,
        Err(ApiError::PayloadTooLarge) => return Err(ApiError::PayloadTooLarge),
        Err(_) => return Err(invalid()),
    };
    let avatar_ids: Vec<String> = match (input.avatar_ids, input.avatar_key_id) {
        (Some(ids), _) if !ids.is_empty() => ids,
        (_, Some(id)) if !id.trim().is_empty() => vec![id],
        _ => return Err(invalid()),
    };
    let email = input.email.unwrap_or_default();
    let context_override = input.context_override.unwrap_or_default();
    if email.chars().count() > validate::MAX_NAME_CHARS || context_override.chars().count() > validate::MAX_TEXT_CHARS {
        return Err(invalid());
    }

    let fetch_failed = || ApiError::NotFound("Failed to fetch template/avatar");
    let template_id = uuid::Uuid::parse_str(&input.template_id).map_err(|_| fetch_failed())?.hyphenated().to_string();
    let template = TEMPLATES
        .get(&state.db, &template_id)
        .await
        .map_err(ApiError::internal(CREATE_FAILED))?
        .ok_or_else(fetch_failed)?;
    let template: TemplateFields = template.fields().map_err(ApiError::internal(CREATE_FAILED))?;
    let mut avatars = Vec::with_capacity(avatar_ids.len());
    for avatar_key_id in avatar_ids {
        let persona = avatar_persona(&state.db, &avatar_key_id).await.map_err(ApiError::internal(CREATE_FAILED))?;
        let persona_name = persona.ok_or_else(fetch_failed)?;
        avatars.push(AgentAvatar { avatar_key_id, persona_name, config: template.config.clone() });
    }
    let agent_system_prompt = match (template.system_prompt.is_empty(), context_override.is_empty()) {
        (_, true) => template.system_prompt.clone(),
        (true, false) => context_override,
        (false, false) => format!("{}\n\n{}", template.system_prompt, context_override),
    };
    let mut attachments = template.attachments.clone();
    // References to records deleted since the template was saved are dropped, not refused.
    attachments.knowledge_base_ids = existing(&state.db, KNOWLEDGE_BASES, attachments.knowledge_base_ids).await?;
    attachments.tool_ids = existing(&state.db, TOOLS, attachments.tool_ids).await?;
    attachments.guardrail_ids = existing(&state.db, GUARDRAILS, attachments.guardrail_ids).await?;
    attachments.mcp_ids = existing(&state.db, MCP_SERVERS, attachments.mcp_ids).await?;
    let fields = AgentFields {
        agent_name: template.name,
        agent_system_prompt,
        avatars,
        callback_url: String::new(),
        callback_events: Vec::new(),
        config: AgentSettings::default(),
        record: false,
        attachments,
        webhook_secret: new_webhook_secret(),
        email,
        template_id,
    };
    insert_agent(&state, fields).await
}

async fn existing(db: &Db, collection: confab_store::Collection, ids: Vec<String>) -> ApiResult<Vec<String>> {
    let missing = collection.missing(db, &ids).await.map_err(ApiError::internal(CREATE_FAILED))?;
    Ok(ids.into_iter().filter(|id| !missing.contains(id)).collect())
}

/// List agents, newest first; `search` matches the name or the id.
#[utoipa::path(get, path = "/v1/ext/agent", tag = "agents", params(ListQuery),
    responses((status = 200, body = [Agent], headers(("X-Total-Count" = i64))), (status = 400), (status = 401),
        (status = 500, description = "`{error: \"Failed to retrieve agent details\"}`")))]
async fn list_agents(State(state): State<AppState>, ApiQuery(query): ApiQuery<ListQuery>) -> ApiResult<Response> {
    let (page, search) = (query.page()?, query.search()?);
    let key = page_key("agents", page, search);
    if let Some(cached) = state.pages.get(&key, Instant::now()) {
        return Ok(cached.into_response());
    }
    let generation = state.pages.generation();
    let (records, total) = AGENTS.list(&state.db, search, page).await.map_err(ApiError::internal(READ_FAILED))?;
    let agents = to_agents(&state.db, &records).await.map_err(ApiError::internal(READ_FAILED))?;
    let body = serde_json::to_vec(&agents).map_err(ApiError::internal(READ_FAILED))?;
    let rendered = CachedPage { body: body.into(), total };
    state.pages.put(key, generation, rendered.clone(), Instant::now());
    Ok(rendered.into_response())
}

#[utoipa::path(get, path = "/v1/ext/agent/{id}", tag = "agents",
    responses((status = 200, body = Agent), (status = 404, description = "`{message: \"Agent details not found\"}`")))]
async fn get_agent(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Agent>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    let record = AGENTS
        .get(&state.db, &id)
        .await
        .map_err(ApiError::internal(READ_FAILED))?
        .ok_or(ApiError::NotFoundMessage(NOT_FOUND))?;
    Ok(Json(to_agent(&state.db, &record).await.map_err(ApiError::internal(READ_FAILED))?))
}

/// Permanently delete an agent. Its conversations stay readable.
#[utoipa::path(delete, path = "/v1/ext/agent/{id}", tag = "agents",
    responses((status = 200, description = "`{id, message: \"Agent deleted successfully\"}`"),
        (status = 404, description = "`{message: \"Agent details not found\"}`"),
        (status = 500, description = "`{error: \"Failed to delete agent\"}`")))]
async fn delete_agent(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFoundMessage(NOT_FOUND))?;
    if !AGENTS.delete(&state.db.pool, &id).await.map_err(ApiError::internal("Failed to delete agent"))? {
        return Err(ApiError::NotFoundMessage(NOT_FOUND));
    }
    Ok(Json(json!({ "id": id, "message": "Agent deleted successfully" })))
}
