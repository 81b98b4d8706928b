//! WHIP-style signalling for the join page, authenticated by the conversation's session token (never
//! the API key): the browser POSTs its complete SDP offer (`application/sdp`) and gets the complete
//! answer back (201, `Location` of the call); DELETE on that location hangs up. See docs/api.md.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::routes::conversations::NOT_FOUND;
use crate::routes::sessions::authorize;
use confab_calls::JoinError;
use confab_store::conversations;
use confab_store::error::{ApiError, ApiResult};

pub const NO_MEDIA_WORKER: &str = "Media worker unavailable: run `confab models fetch` and restart the server";
/// A fleet replica that cannot reach NATS, or whose worker vanished while admitting the call.
pub const FLEET_UNAVAILABLE: &str = "Media workers unreachable; try again later";
/// Largest SDP offer read (a browser's, with every candidate, is a few kilobytes).
pub const MAX_OFFER_BYTES: usize = 64 * 1024;
pub const NO_CALL: &str = "No call in progress";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(join_call, hang_up))
}

/// Join the conversation's call: an SDP offer in, the SDP answer out (ICE candidates included; no trickle).
#[utoipa::path(post, path = "/v1/session/conversation/{id}/webrtc", tag = "sessions",
    request_body(content = String, content_type = "application/sdp"),
    responses((status = 201, description = "The SDP answer (`application/sdp`); `Location` names the call"),
        (status = 400, description = "Invalid SDP offer"), (status = 401), (status = 404),
        (status = 413, description = "An offer over 64 KiB"),
        (status = 409, description = "The conversation has ended, or already has a participant"),
        (status = 415), (status = 503, description = "No media worker, or no free session")))]
async fn join_call(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> ApiResult<Response> {
    // The token first: nothing of the body is read for a caller without one.
    let id = authorize(&state, &headers, &id)?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/sdp");
    if !content_type.trim().to_ascii_lowercase().starts_with("application/sdp") {
        return Err(ApiError::UnsupportedMediaType("The offer must be application/sdp"));
    }
    let bytes = axum::body::to_bytes(body, MAX_OFFER_BYTES).await.map_err(|_| ApiError::PayloadTooLarge)?;
    let offer = String::from_utf8(bytes.to_vec()).map_err(|_| ApiError::bad_request("Invalid SDP offer: not UTF-8"))?;
    conversations::get(&state.db, &id).await?.ok_or(ApiError::NotFound(NOT_FOUND))?;
    let Some(calls) = &state.calls else {
        return Err(ApiError::Unavailable(NO_MEDIA_WORKER));
    };
    let joined = calls.join(&id, offer).await;
    let in_fleet = calls.is_fleet();
    let answer = joined.map_err(|err| match err {
        JoinError::Ended => ApiError::Conflict("Conversation has ended"),
        JoinError::Busy => ApiError::Conflict("Conversation already has a participant"),
        JoinError::Full => {
            confab_calls::metrics::metrics().call_refused_full();
            ApiError::Unavailable("No free media session; try again later")
        }
        JoinError::Unavailable(cause) if in_fleet => {
            // A NATS outage is told once, when the connection goes; not once per refused join.
            if cause != crate::replica::dispatch::NATS_DOWN {
                tracing::warn!(conversation_id = %id, %cause, "the fleet could not place the call");
            }
            ApiError::Unavailable(FLEET_UNAVAILABLE)
        }
        JoinError::Unavailable(_) => ApiError::Unavailable(NO_MEDIA_WORKER),
        // The SDP parser's message, its first line only (never a backtrace that follows it).
        JoinError::InvalidOffer(message) => {
            ApiError::bad_request(format!("Invalid SDP offer: {}", message.lines().next().unwrap_or_default()))
        }
        other => ApiError::internal("Cannot start the call")(other),
    })?;
    let location = format!("/v1/session/conversation/{id}/webrtc");
    Ok((
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/sdp".to_string()), (header::LOCATION, location)],
        answer,
    )
        .into_response())
}

/// Hang up the conversation's call: the call ends cleanly (`call_ended`) and the record reads ENDED.
#[utoipa::path(delete, path = "/v1/session/conversation/{id}/webrtc", tag = "sessions",
    responses((status = 204), (status = 401), (status = 404, description = "No call in progress")))]
async fn hang_up(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> ApiResult<StatusCode> {
    let id = authorize(&state, &headers, &id)?;
    let found = state.hang_up_call(&id).await.map_err(ApiError::internal("Cannot hang up"))?;
    if found { Ok(StatusCode::NO_CONTENT) } else { Err(ApiError::NotFound(NO_CALL)) }
}
