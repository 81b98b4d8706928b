//! External meetings: sends an agent into a meeting on a third-party platform. Answers plain text, as
//! SPEC.md requires. Until a meeting-bot service is configured, every valid request is answered
//! `Unable to create agent request.` (503) — honestly, without creating anything.

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::agent_config::nullable;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, parse_id};
use crate::routes::agents::NOT_FOUND as AGENT_NOT_FOUND;
use crate::store::collection::AGENTS;
use crate::validate;

pub const ACCEPTED_TEXT: &str = "Agent request successfully created.";
pub const UNABLE_TEXT: &str = "Unable to create agent request.";

#[derive(Debug, Deserialize, ToSchema)]
pub struct ExternalMeetingRequest {
    pub agent_id: String,
    pub meeting_url: String,
    pub user_name: String,
    pub user_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub context: String,
    #[serde(default, deserialize_with = "nullable")]
    pub wake_phrase: String,
    #[serde(default, deserialize_with = "nullable")]
    pub mode: String,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_external_meeting))
}

fn plain_text(status: StatusCode, text: &'static str) -> Response {
    (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// Send an agent into a live external meeting. Plain-text answer.
#[utoipa::path(post, path = "/v1/ext/externalmeeting", tag = "meetings", request_body = ExternalMeetingRequest,
    responses((status = 200, description = "text/plain `Agent request successfully created.`"),
        (status = 503, description = "text/plain `Unable to create agent request.`"), (status = 400), (status = 401), (status = 404)))]
async fn create_external_meeting(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<ExternalMeetingRequest>,
) -> ApiResult<Response> {
    validate::required_name("user_name", &input.user_name)?;
    validate::required_name("user_id", &input.user_id)?;
    validate::http_url("meeting_url", &input.meeting_url)?;
    validate::max_chars("context", &input.context, validate::MAX_TEXT_CHARS)?;
    validate::max_chars("wake_phrase", &input.wake_phrase, validate::MAX_NAME_CHARS)?;
    let agent_id = parse_id(&input.agent_id, ApiError::NotFoundMessage(AGENT_NOT_FOUND))?;
    let exists =
        AGENTS.get(&state.db, &agent_id).await.map_err(ApiError::internal("Failed to create meeting request"))?;
    if exists.is_none() {
        return Err(ApiError::NotFoundMessage(AGENT_NOT_FOUND));
    }
    // No meeting-bot service is configured in this build; ACCEPTED_TEXT answers once one is.
    Ok(plain_text(StatusCode::SERVICE_UNAVAILABLE, UNABLE_TEXT))
}
