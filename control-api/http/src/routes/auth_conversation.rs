//! `POST /v1/auth/conversation`: how TruGen's official SDK (`trugen-sdk`, `TruGenClient.create_session`) and
//! everything built on LiveKit's client SDKs start a conversation. It creates the conversation record as
//! `POST /v1/ext/conversation` does (same webhooks, transcript, recording and limits) and answers
//! `{"token": JWT}` whose payload holds `rtcServerUrl` (Confab's LiveKit signalling, from `--public-url`) and
//! `accessToken` (a LiveKit access token for the conversation's room; `livekit_token`). See docs/api.md.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::ApiJson;
use crate::livekit_token::rtc_server_url;
use crate::routes::conversations::{NewConversation, create_record, validate_user_fields};
use confab_store::agent_config::nullable;
use confab_store::conversations::TYPE_CONVERSATION;
use confab_store::error::{ApiError, ApiResult};

/// The body `trugen-sdk` 1.1.0 sends; every field may be empty (`""`, `{}`) or left out.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuthConversation {
    /// The agent; when empty, the `X-Agent-Id` header names it.
    #[serde(rename = "agentId", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub agent_id: String,
    #[serde(rename = "userName", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub user_name: String,
    /// The participant's identity in the room.
    #[serde(rename = "userId", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub user_id: String,
    /// Text, or an object (kept as its JSON text); passed to the agent's prompt like a conversation's context.
    #[serde(default)]
    #[schema(value_type = Object, nullable)]
    pub context: Value,
    #[serde(rename = "metaData", default)]
    #[schema(value_type = Object, nullable)]
    pub meta_data: Value,
    /// Kept in `meta_data.room_id` when given (the room is always the conversation's own).
    #[serde(rename = "roomId", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub room_id: String,
    /// Kept in `meta_data.meeting_url` when given; external meetings are `POST /v1/ext/externalmeeting`.
    #[serde(rename = "meetingURL", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub meeting_url: String,
    /// One of the agent's avatars (`avatar_key_id`) to speak with; empty: its first.
    #[serde(rename = "avatarId", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub avatar_id: String,
    /// Kept in `meta_data.mode` when given.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub mode: String,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_auth_conversation))
}

/// `context` as the conversation keeps it: text as given, an object as its JSON text, `{}` or null as none.
fn context_text(context: &Value) -> ApiResult<String> {
    match context {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Object(object) if object.is_empty() => Ok(String::new()),
        object @ Value::Object(_) => Ok(object.to_string()),
        _ => Err(ApiError::bad_request("Invalid request body: context must be text or an object")),
    }
}

/// `metaData` with the SDK's other fields kept beside it when they are not empty.
fn meta_data(input: &AuthConversation) -> ApiResult<Value> {
    let mut meta_data = match &input.meta_data {
        Value::Null => json!({}),
        object @ Value::Object(_) => object.clone(),
        _ => return Err(ApiError::bad_request("Invalid request body: metaData must be an object")),
    };
    for (key, value) in [("room_id", &input.room_id), ("meeting_url", &input.meeting_url), ("mode", &input.mode)] {
        if !value.is_empty() {
            meta_data[key] = json!(value);
        }
    }
    Ok(meta_data)
}

/// Start a conversation for a LiveKit client: `{token}`, a JWT whose payload holds `rtcServerUrl` and
/// `accessToken` (docs/api.md, "LiveKit clients").
#[utoipa::path(post, path = "/v1/auth/conversation", tag = "conversations", request_body = AuthConversation,
    responses((status = 200, description = "`{token}`: a JWT with `rtcServerUrl`, `accessToken`, `conversationId`"),
        (status = 400), (status = 401), (status = 404, description = "`{message: \"Agent details not found\"}`")))]
async fn create_auth_conversation(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(input): ApiJson<AuthConversation>,
) -> ApiResult<Json<Value>> {
    let context = context_text(&input.context)?;
    validate_user_fields(&input.user_name, &input.user_id, &context)?;
    let header_agent = headers.get("x-agent-id").and_then(|value| value.to_str().ok()).unwrap_or_default();
    let agent_id = if input.agent_id.trim().is_empty() { header_agent.trim() } else { input.agent_id.trim() };
    let conversation = create_record(
        &state,
        NewConversation {
            agent_id,
            user_name: &input.user_name,
            user_id: &input.user_id,
            context: &context,
            meta_data: meta_data(&input)?,
            conversation_type: TYPE_CONVERSATION,
            avatar_key_id: Some(input.avatar_id.trim()).filter(|id| !id.is_empty()),
        },
    )
    .await?;
    // The participant's identity: the user's id, or one made for this conversation when none was given.
    let identity = if input.user_id.is_empty() { format!("user-{}", conversation.id) } else { input.user_id.clone() };
    let name = if input.user_name.is_empty() { identity.clone() } else { input.user_name.clone() };
    let now = chrono::Utc::now().timestamp();
    let access_token = state.livekit_keys.access_token(&conversation.id, &identity, &name, now);
    let rtc_url = rtc_server_url(&state.config.public_url);
    let token = state.livekit_keys.session_grant(&rtc_url, access_token, &conversation.id, now);
    Ok(Json(json!({ "token": token })))
}
