//! LiveKit's signalling endpoint for LiveKit's client SDKs (and `trugen-sdk` on them): the WebSocket at
//! `/rtc` (the dual-PeerConnection protocol, version 17) and `/rtc/validate`, which clients call to learn
//! why a connection was refused. The access token (from `POST /v1/auth/conversation`) comes as the
//! `access_token` query parameter or `Authorization: Bearer`; it names the conversation's room. This side
//! checks the token and relays binary frames between the WebSocket and the call (`CallPlacer::join_livekit`;
//! the protocol itself is `confab_worker::livekit`). `/rtc/v1` (single PeerConnection) is not served: it
//! answers 404, and clients fall back to `/rtc`. Refusals are plain text, as LiveKit's server answers them.

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::AppState;
use crate::routes::sessions::bearer;
use crate::routes::webrtc::NO_MEDIA_WORKER;
use confab_calls::{JoinError, LiveKitJoin, SignalSocket};
use confab_store::conversations::{self, STATUS_ENDED};

/// Frames waiting in either direction.
const FRAME_QUEUE: usize = 64;
/// Largest signalling frame read (offers with every candidate are a few kilobytes).
const MAX_FRAME_BYTES: usize = 256 * 1024;

/// What `/rtc/v1/validate` answers (404: clients then fall back to `/rtc`).
pub const NO_V1: &str = "the single-PeerConnection protocol (/rtc/v1) is not served here: use /rtc";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/rtc", get(signal))
        .route("/rtc/validate", get(validate))
        .route("/rtc/v1/validate", get(|| async { with_cors((StatusCode::NOT_FOUND, NO_V1).into_response()) }))
}

/// Validation is read by pages on other origins (LiveKit's JS SDK fetches it from the app's page).
fn with_cors(mut response: Response) -> Response {
    let any = axum::http::HeaderValue::from_static("*");
    response.headers_mut().insert(axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN, any);
    response
}

#[derive(Debug, Deserialize)]
struct TokenQuery {
    access_token: Option<String>,
}

/// A refusal: the status and the text clients show.
type Refusal = (StatusCode, String);

/// The participant a request's access token admits, if the conversation can still be joined.
async fn admitted(state: &AppState, query: &TokenQuery, headers: &HeaderMap) -> Result<LiveKitJoin, Refusal> {
    let token = query.access_token.as_deref().or_else(|| bearer(headers)).unwrap_or("").trim();
    if token.is_empty() {
        return Err((StatusCode::UNAUTHORIZED, "no access token".into()));
    }
    let claims = state
        .livekit_keys
        .verify(token)
        .map_err(|err| (StatusCode::UNAUTHORIZED, format!("invalid access token: {err}")))?;
    if !claims.video.room_join || claims.video.room.is_empty() {
        return Err((StatusCode::UNAUTHORIZED, "the access token grants no room to join".into()));
    }
    let conversation = conversations::get(&state.db, &claims.video.room)
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "reading the conversation of a LiveKit join");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal server error".to_string())
        })?
        .ok_or((StatusCode::NOT_FOUND, "room not found".to_string()))?;
    if conversation.status == STATUS_ENDED {
        return Err((StatusCode::CONFLICT, "Conversation has ended".into()));
    }
    if state.calls.is_none() {
        return Err((StatusCode::SERVICE_UNAVAILABLE, NO_MEDIA_WORKER.into()));
    }
    Ok(LiveKitJoin { conversation_id: claims.video.room, identity: claims.sub, name: claims.name })
}

/// `GET /rtc/validate`: 200 `success` when the token would be admitted, else the refusal (readable from any
/// origin).
async fn validate(State(state): State<AppState>, Query(query): Query<TokenQuery>, headers: HeaderMap) -> Response {
    with_cors(match admitted(&state, &query, &headers).await {
        Ok(_) => (StatusCode::OK, "success").into_response(),
        Err(refusal) => refusal.into_response(),
    })
}

/// `GET /rtc`: the signalling WebSocket.
async fn signal(
    State(state): State<AppState>,
    Query(query): Query<TokenQuery>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let join = match admitted(&state, &query, &headers).await {
        Ok(join) => join,
        Err(refusal) => return refusal.into_response(),
    };
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    upgrade.max_message_size(MAX_FRAME_BYTES).on_upgrade(move |socket| relay(state, socket, join))
}

/// Places the call and relays its frames until either side closes. Frames flow while the call is being
/// placed: the JoinResponse comes first, before the engine session has started.
async fn relay(state: AppState, socket: WebSocket, join: LiveKitJoin) {
    let Some(calls) = state.calls.clone() else { return };
    let (to_client, mut outgoing) = mpsc::channel(FRAME_QUEUE);
    let (incoming, from_client) = mpsc::channel(FRAME_QUEUE);
    let conversation_id = join.conversation_id.clone();
    let (mut sink, mut stream) = socket.split();
    let placing = calls.join_livekit(join, SignalSocket { from_client, to_client });
    tokio::pin!(placing);
    let mut placed = false;
    loop {
        tokio::select! {
            result = &mut placing, if !placed => {
                placed = true;
                if let Err(err) = result {
                    refuse(&mut sink, &conversation_id, err).await;
                    return;
                }
            }
            frame = outgoing.recv() => match frame {
                Some(frame) => {
                    if sink.send(Message::Binary(frame.into())).await.is_err() {
                        return;
                    }
                }
                None if !placed => {
                    // The call was refused before it ran: say why.
                    if let Err(err) = (&mut placing).await {
                        refuse(&mut sink, &conversation_id, err).await;
                    }
                    return;
                }
                None => {
                    let _ = sink.send(Message::Close(None)).await;
                    return;
                }
            },
            message = stream.next() => match message {
                Some(Ok(Message::Binary(frame))) => {
                    if incoming.send(frame.to_vec()).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {} // text, ping, pong: nothing of the protocol
            },
        }
    }
}

/// Closes the socket of a call that could not be placed, with the reason.
async fn refuse(sink: &mut futures_util::stream::SplitSink<WebSocket, Message>, conversation_id: &str, err: JoinError) {
    if matches!(err, JoinError::Full) {
        confab_calls::metrics::metrics().call_refused_full();
    }
    let reason = match &err {
        JoinError::Ended | JoinError::Busy | JoinError::Full => err.to_string(),
        other => {
            tracing::warn!(%conversation_id, error = %other, "a LiveKit call could not be placed");
            "Cannot start the call".to_string()
        }
    };
    let close = axum::extract::ws::CloseFrame { code: 1011, reason: reason.into() };
    let _ = sink.send(Message::Close(Some(close))).await;
}
