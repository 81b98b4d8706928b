//! Session tokens: minted with the API key, used by a browser for one conversation and nothing else.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::extract::{ApiJson, parse_id};
use crate::routes::conversations::{NOT_FOUND, NewConversation, create_record, read_detail, validate_user_fields};
use confab_store::agent_config::nullable;
use confab_store::conversations::{self, ConversationDetail, TYPE_CONVERSATION};
use confab_store::error::{ApiError, ApiResult};

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateSessionToken {
    /// Start a new conversation with this agent…
    #[serde(default)]
    pub agent_id: Option<String>,
    /// …or admit the holder to this existing conversation.
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(rename = "userId", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub user_id: String,
    #[serde(rename = "userName", default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub user_name: String,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(nullable)]
    pub context: String,
}

/// The API-key side: minting.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_session_token))
}

/// The token side: routes authenticated by a session token, never the API key.
pub fn session_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_session_conversation))
}

/// Mint a session token (JWT, 10 minutes) bound to one conversation.
#[utoipa::path(post, path = "/v1/ext/session-token", tag = "sessions", request_body = CreateSessionToken,
    responses((status = 200, description = "`{token, conversation_id, expires_at, expires_in, join_link}`"), (status = 400), (status = 401), (status = 404)))]
async fn create_session_token(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<CreateSessionToken>,
) -> ApiResult<Json<Value>> {
    validate_user_fields(&input.user_name, &input.user_id, &input.context)?;
    let conversation_id = match (input.agent_id.as_deref(), input.conversation_id.as_deref()) {
        (Some(agent_id), None) => {
            let new = NewConversation {
                agent_id,
                user_name: &input.user_name,
                user_id: &input.user_id,
                context: &input.context,
                meta_data: json!({}),
                conversation_type: TYPE_CONVERSATION,
                avatar_key_id: None,
            };
            create_record(&state, new).await?.id
        }
        (None, Some(conversation_id)) => {
            let id = parse_id(conversation_id, ApiError::NotFound(NOT_FOUND))?;
            let failed = ApiError::internal("Failed to create session token");
            conversations::get(&state.db, &id).await.map_err(failed)?.ok_or(ApiError::NotFound(NOT_FOUND))?.id
        }
        _ => {
            return Err(ApiError::bad_request("Invalid request body: give exactly one of agent_id or conversation_id"));
        }
    };
    let session = state.mint_session(&conversation_id, &input.user_id, &input.user_name, &input.context);
    if input.agent_id.is_some() {
        conversations::set_join_link(&state.db, &conversation_id, &session.join_link)
            .await
            .map_err(ApiError::internal("Failed to create session token"))?;
    }
    Ok(Json(json!({
        "token": session.token,
        "conversation_id": conversation_id,
        "expires_at": session.expires_at,
        "expires_in": crate::session_token::SESSION_TOKEN_TTL_SECONDS,
        "join_link": session.join_link,
    })))
}

pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim())
}

/// The conversation a session token admits (`Authorization: Bearer <token>`).
#[utoipa::path(get, path = "/v1/session/conversation/{id}", tag = "sessions",
    responses((status = 200, body = ConversationDetail), (status = 401)))]
async fn get_session_conversation(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<ConversationDetail>> {
    let id = authorize(&state, &headers, &id)?;
    Ok(Json(read_detail(&state, &id).await?))
}

/// Checks the request's session token (`Authorization: Bearer`) against conversation `id`; returns the
/// id in its canonical form.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap, id: &str) -> ApiResult<String> {
    let token = bearer(headers).ok_or(ApiError::Unauthorized)?;
    state.session_keys.verify(token, id).map_err(|_| ApiError::Unauthorized)?;
    parse_id(id, ApiError::NotFound(NOT_FOUND))
}
