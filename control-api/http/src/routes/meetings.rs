//! External meetings: sends an agent into a meeting on a third-party platform (`crate::meetings`).
//! Answers plain text, as SPEC.md requires; the conversation's id rides in `X-Conversation-Id`.

use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::{ApiJson, parse_id};
use crate::routes::agents::NOT_FOUND as AGENT_NOT_FOUND;
use crate::routes::conversations::{NewConversation, create_record};
use confab_meetings::{BotContext, MeetingJob, platform};
use confab_store::agent_config::nullable;
use confab_store::collection::AGENTS;
use confab_store::conversations::TYPE_EXTERNAL_MEETING;
use confab_store::error::{ApiError, ApiResult};
use confab_store::meeting_mode::{MODE_ADDRESSED, MODES};
use confab_store::validate;

pub const ACCEPTED_TEXT: &str = "Agent request successfully created.";
pub const UNABLE_TEXT: &str = "Unable to create agent request.";
/// The response header naming the conversation an accepted request created.
pub const CONVERSATION_ID_HEADER: &str = "x-conversation-id";

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExternalMeetingRequest {
    pub agent_id: String,
    pub meeting_url: String,
    #[schema(min_length = 1, max_length = 200)]
    pub user_name: String,
    #[schema(min_length = 1, max_length = 200)]
    pub user_id: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub context: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub wake_phrase: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub mode: String,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_external_meeting))
}

fn plain_text(status: StatusCode, text: &'static str) -> Response {
    (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// Send an agent into a live external meeting. Plain-text answer; the new conversation's id is in the
/// `X-Conversation-Id` header.
#[utoipa::path(post, path = "/v1/ext/externalmeeting", tag = "meetings", request_body = ExternalMeetingRequest,
    responses((status = 200, description = "text/plain `Agent request successfully created.`; header `X-Conversation-Id`"),
        (status = 400, description = "Invalid fields (JSON), or text/plain `Unable to create agent request.` for a \
            meeting URL of no supported platform"),
        (status = 503, description = "text/plain `Unable to create agent request.`: no meeting bot service, or \
            every bot slot busy"), (status = 401), (status = 404)))]
async fn create_external_meeting(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<ExternalMeetingRequest>,
) -> ApiResult<Response> {
    validate::required_name("user_name", &input.user_name)?;
    validate::required_name("user_id", &input.user_id)?;
    validate::max_chars("meeting_url", &input.meeting_url, validate::MAX_TEXT_CHARS)?;
    validate::max_chars("context", &input.context, validate::MAX_TEXT_CHARS)?;
    validate::max_chars("wake_phrase", &input.wake_phrase, validate::MAX_NAME_CHARS)?;
    if !input.mode.is_empty() {
        validate::one_of("mode", &input.mode, MODES)?;
    }
    let agent_id = parse_id(&input.agent_id, ApiError::NotFoundMessage(AGENT_NOT_FOUND))?;
    let agent =
        AGENTS.get(&state.db, &agent_id).await.map_err(ApiError::internal("Failed to create meeting request"))?;
    let Some(agent) = agent else {
        return Err(ApiError::NotFoundMessage(AGENT_NOT_FOUND));
    };
    let Some(meeting) = platform::recognize(&input.meeting_url) else {
        return Ok(plain_text(StatusCode::BAD_REQUEST, UNABLE_TEXT));
    };
    let (Some(bots), Some(calls)) = (state.meetings.clone(), state.calls.clone()) else {
        return Ok(plain_text(StatusCode::SERVICE_UNAVAILABLE, UNABLE_TEXT));
    };
    // Serving alone, the bot's call needs a free media session here (a fleet's capacity is the workers').
    let media_full = !calls.is_fleet() && calls.local_calls().is_some_and(|local| local.active >= local.max);
    if media_full || !bots.reserve() {
        return Ok(plain_text(StatusCode::SERVICE_UNAVAILABLE, UNABLE_TEXT));
    }
    let mode = if input.mode.is_empty() { MODE_ADDRESSED } else { input.mode.as_str() };
    let new = NewConversation {
        agent_id: &agent_id,
        user_name: &input.user_name,
        user_id: &input.user_id,
        context: &input.context,
        meta_data: json!({ "meeting": {
            "platform": meeting.platform.name(),
            "meeting_url": input.meeting_url.trim(),
            "mode": mode,
            "wake_phrase": input.wake_phrase,
        }}),
        conversation_type: TYPE_EXTERNAL_MEETING,
        avatar_key_id: None,
    };
    let conversation = match create_record(&state, new).await {
        Ok(conversation) => conversation,
        Err(err) => {
            bots.release();
            return Err(err);
        }
    };
    let email = agent.fields::<confab_store::agents::AgentFields>().ok().map(|f| f.email).filter(|e| !e.is_empty());
    let job = MeetingJob {
        conversation_id: conversation.id.clone(),
        platform: meeting.platform,
        join_url: meeting.join_url,
        display_name: input.user_name.clone(),
        email,
    };
    bots.send(BotContext { db: state.db.clone(), calls }, job);
    let mut response = plain_text(StatusCode::OK, ACCEPTED_TEXT);
    if let Ok(value) = HeaderValue::from_str(&conversation.id) {
        response.headers_mut().insert(CONVERSATION_ID_HEADER, value);
    }
    Ok(response)
}
