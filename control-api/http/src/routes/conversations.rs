//! Conversations: creation (with a join link and a session token), listing with filters, and the
//! single-record form with its transcript.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::{ApiJson, ApiQuery, parse_id};
use crate::pagination::{self, with_total};
use crate::routes::agents::NOT_FOUND as AGENT_NOT_FOUND;
use confab_store::agent_config::nullable;
use confab_store::agents::AgentFields;
use confab_store::collection::AGENTS;
use confab_store::conversations::{
    self, ConversationDetail, ConversationFilter, ConversationSummary, STATUS_STARTED, TYPE_CONVERSATION,
    TYPE_EXTERNAL_MEETING,
};
use confab_store::error::{ApiError, ApiResult};
use confab_store::validate;

pub const NOT_FOUND: &str = "Conversation not found";
const LIST_FAILED: &str = "Failed to retrieve conversation details";

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateConversation {
    pub agent_id: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub user_name: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub user_id: String,
    /// Free-form context passed to the agent's system prompt.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub context: String,
    #[serde(default)]
    #[schema(value_type = Object, nullable)]
    pub meta_data: Option<Value>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConversationQuery {
    /// Number of records to skip (default 0).
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Records per page, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub perpage: Option<i64>,
    /// Matches id, user name, agent name or status; no NUL character.
    #[param(max_length = 200, pattern = r"^[^\x00]*$")]
    pub search: Option<String>,
    /// Created on or after this day (YYYY-MM-DD, UTC).
    #[param(format = Date)]
    pub from: Option<String>,
    /// Created on or before this day (YYYY-MM-DD, UTC): before the following day.
    #[param(format = Date)]
    pub to: Option<String>,
    /// `conversation` or `external_meeting` (empty: every type).
    #[serde(rename = "type")]
    #[param(pattern = "^(conversation|external_meeting)?$")]
    pub conversation_type: Option<String>,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_conversation, list_conversations))
        .routes(routes!(get_conversation))
        .routes(routes!(get_recording))
        .routes(routes!(get_turn_metrics))
}

/// Each turn's stages of a live conversation, in turn order (`docs/engine.md`, "turn_metrics"): written
/// when a turn is over, so a call in progress shows the turns finished so far.
#[utoipa::path(get, path = "/v1/ext/conversation/{id}/turn-metrics", tag = "conversations",
    responses((status = 200, description = "`{data: [turn_metrics…]}`"), (status = 401),
        (status = 404, description = "`{error: \"Conversation not found\"}`")))]
async fn get_turn_metrics(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    const FAILED: &str = "Failed to retrieve conversation";
    let conversation = conversations::get(&state.db, &id).await.map_err(ApiError::internal(FAILED))?;
    conversation.ok_or(ApiError::NotFound(NOT_FOUND))?;
    let turns = confab_store::turn_metrics::list(&state.db, &id).await.map_err(ApiError::internal(FAILED))?;
    Ok(Json(json!({ "data": turns })))
}

fn day(field: &str, value: &Option<String>) -> ApiResult<Option<NaiveDate>> {
    match value.as_deref().filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(text) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("Invalid query: {field} must be a date as YYYY-MM-DD"))),
    }
}

pub struct NewConversation<'a> {
    pub agent_id: &'a str,
    pub user_name: &'a str,
    pub user_id: &'a str,
    pub context: &'a str,
    pub meta_data: Value,
    pub conversation_type: &'a str,
    /// The agent's avatar to speak with (`avatar_key_id`); None: its first.
    pub avatar_key_id: Option<&'a str>,
}

/// Creates a conversation record for an existing agent; 404 when the agent does not exist.
pub async fn create_record(state: &AppState, new: NewConversation<'_>) -> ApiResult<ConversationSummary> {
    let agent_id = parse_id(new.agent_id, ApiError::NotFoundMessage(AGENT_NOT_FOUND))?;
    let failed = ApiError::internal("Failed to create conversation");
    let agent =
        AGENTS.get(&state.db, &agent_id).await.map_err(failed)?.ok_or(ApiError::NotFoundMessage(AGENT_NOT_FOUND))?;
    let fields: AgentFields = agent.fields().map_err(ApiError::internal("Failed to create conversation"))?;
    if let Some(chosen) = new.avatar_key_id
        && !fields.avatars.iter().any(|avatar| avatar.avatar_key_id == chosen)
    {
        return Err(ApiError::bad_request(format!(
            "Invalid request body: avatarId \"{chosen}\" is not one of the agent's avatars"
        )));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let join_link = if new.conversation_type == TYPE_CONVERSATION { state.join_link(&id, None) } else { String::new() };
    let conversation = new_summary(id, agent_id, &fields, new, join_link);
    conversations::insert(&state.db, &conversation)
        .await
        .map_err(ApiError::internal("Failed to create conversation"))?;
    Ok(conversation)
}

/// A new conversation record (STARTED, active) of the agent `agent_id`.
pub fn new_summary(
    id: String,
    agent_id: String,
    fields: &AgentFields,
    new: NewConversation<'_>,
    join_link: String,
) -> ConversationSummary {
    let now = confab_store::wall_clock::now_iso();
    ConversationSummary {
        join_link,
        id,
        agent_id,
        agent_name: fields.agent_name.clone(),
        context: new.context.to_string(),
        meta_data: new.meta_data,
        status: STATUS_STARTED.to_string(),
        is_active: true,
        created_at: now.clone(),
        updated_at: now,
        job_id: None,
        feedback: String::new(),
        rating: None,
        usage_status: String::new(),
        usage_json: "{}".to_string(),
        snippets: json!({}),
        user_name: new.user_name.to_string(),
        user_id: new.user_id.to_string(),
        chat_history: json!({}),
        conversation_type: new.conversation_type.to_string(),
        avatar_id: match new.avatar_key_id {
            Some(chosen) => chosen.to_string(),
            None => fields.avatars.first().map(|avatar| avatar.avatar_key_id.clone()).unwrap_or_default(),
        },
        is_recorded: false,
        recording_url: String::new(),
        end_reason: None,
    }
}

pub fn validate_user_fields(user_name: &str, user_id: &str, context: &str) -> ApiResult<()> {
    validate::max_chars("user_name", user_name, validate::MAX_NAME_CHARS)?;
    validate::max_chars("user_id", user_id, validate::MAX_NAME_CHARS)?;
    validate::max_chars("context", context, validate::MAX_TEXT_CHARS)
}

/// Start a conversation with an agent: answers the list-form record (STARTED, with `join_link`) plus
/// `session_token`, `session_token_expires_at`.
#[utoipa::path(post, path = "/v1/ext/conversation", tag = "conversations", request_body = CreateConversation,
    responses((status = 200, body = ConversationSummary), (status = 400), (status = 401),
        (status = 404, description = "`{message: \"Agent details not found\"}`")))]
async fn create_conversation(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<CreateConversation>,
) -> ApiResult<Json<Value>> {
    validate_user_fields(&input.user_name, &input.user_id, &input.context)?;
    let meta_data = match input.meta_data {
        None | Some(Value::Null) => json!({}),
        Some(object @ Value::Object(_)) => object,
        Some(_) => {
            return Err(ApiError::bad_request("Invalid request body: meta_data must be an object"));
        }
    };
    let mut conversation = create_record(
        &state,
        NewConversation {
            agent_id: &input.agent_id,
            user_name: &input.user_name,
            user_id: &input.user_id,
            context: &input.context,
            meta_data,
            conversation_type: TYPE_CONVERSATION,
            avatar_key_id: None,
        },
    )
    .await?;
    let session = state.mint_session(&conversation.id, &input.user_id, &input.user_name, &input.context);
    conversation.join_link = session.join_link.clone();
    conversations::set_join_link(&state.db, &conversation.id, &conversation.join_link)
        .await
        .map_err(ApiError::internal("Failed to create conversation"))?;
    let mut body = serde_json::to_value(&conversation).expect("conversation serializes");
    body["session_token"] = json!(session.token);
    body["session_token_expires_at"] = json!(session.expires_at);
    Ok(Json(body))
}

/// List conversations, newest first.
#[utoipa::path(get, path = "/v1/ext/conversation", tag = "conversations", params(ConversationQuery),
    responses((status = 200, body = [ConversationSummary], headers(("X-Total-Count" = i64))), (status = 400), (status = 401),
        (status = 500, description = "`{error: \"Failed to retrieve conversation details\"}`")))]
async fn list_conversations(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ConversationQuery>,
) -> ApiResult<Response> {
    let page = pagination::page(query.offset, query.perpage)?;
    let search = pagination::search(&query.search)?;
    let from = day("from", &query.from)?.map(|d| d.format("%Y-%m-%d").to_string());
    let before = day("to", &query.to)?
        .map(|d| d.succ_opt().ok_or_else(|| ApiError::bad_request("Invalid query: to is out of range")))
        .transpose()?
        .map(|d| d.format("%Y-%m-%d").to_string());
    if let Some(kind) = query.conversation_type.as_deref().filter(|kind| !kind.is_empty()) {
        validate::one_of("type", kind, &[TYPE_CONVERSATION, TYPE_EXTERNAL_MEETING]).map_err(|_| {
            ApiError::bad_request(format!("Invalid query: type must be {TYPE_CONVERSATION} or {TYPE_EXTERNAL_MEETING}"))
        })?;
    }
    let filter = ConversationFilter {
        search,
        from: from.as_deref(),
        before: before.as_deref(),
        conversation_type: query.conversation_type.as_deref(),
    };
    let (items, total) =
        conversations::list(&state.db, &filter, page).await.map_err(ApiError::internal(LIST_FAILED))?;
    Ok(with_total(items, total))
}

/// One conversation with its transcript.
#[utoipa::path(get, path = "/v1/ext/conversation/{id}", tag = "conversations",
    responses((status = 200, body = ConversationDetail), (status = 404, description = "`{error: \"Conversation not found\"}`")))]
async fn get_conversation(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<ConversationDetail>> {
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    Ok(Json(read_detail(&state, &id).await?))
}

pub async fn read_detail(state: &AppState, id: &str) -> ApiResult<ConversationDetail> {
    let failed = ApiError::internal("Failed to retrieve conversation");
    let summary = conversations::get(&state.db, id).await.map_err(failed)?.ok_or(ApiError::NotFound(NOT_FOUND))?;
    let transcript = conversations::transcript(&state.db, id)
        .await
        .map_err(ApiError::internal("Failed to retrieve conversation"))?;
    Ok(summary.into_detail(transcript))
}

pub const NO_RECORDING: &str = "Recording not found";

/// The call's recording (WebM: the agent's face as VP8 and both voices mixed as Opus; calls recorded
/// before the face existed: 16 kHz mono WAV), for API-key holders only.
#[utoipa::path(get, path = "/v1/ext/conversation/{id}/recording", tag = "conversations",
    responses((status = 200, description = "video/webm (older recordings: audio/wav)", content_type = "video/webm"), (status = 401),
        (status = 404, description = "No such conversation, or it was not recorded")))]
async fn get_recording(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    use axum::http::header;
    use axum::response::IntoResponse;
    let id = parse_id(&id, ApiError::NotFound(NOT_FOUND))?;
    let conversation = conversations::get(&state.db, &id).await?.ok_or(ApiError::NotFound(NOT_FOUND))?;
    if !conversation.is_recorded {
        return Err(ApiError::NotFound(NO_RECORDING));
    }
    let (path, media_type) = confab_calls::recordings::recorded_file(&state.config.recordings_dir, &id)
        .ok_or(ApiError::NotFound(NO_RECORDING))?;
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("bin").to_string();
    let file = tokio::fs::File::open(&path).await.map_err(|_| ApiError::NotFound(NO_RECORDING))?;
    let length = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    let body = axum::body::Body::from_stream(tokio_util::io::ReaderStream::new(file));
    Ok((
        [
            (header::CONTENT_TYPE, media_type.to_string()),
            (header::CONTENT_LENGTH, length.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{id}.{extension}\"")),
        ],
        body,
    )
        .into_response())
}
