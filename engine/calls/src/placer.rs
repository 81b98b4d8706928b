//! The seam between the HTTP side and whatever runs calls: `CallPlacer`. The embedded media worker
//! implements it for `confab serve` alone (`confab_worker::placer`), the fleet's dispatcher for a replica
//! (`confab_http::replica`). Routes and meeting bots place, hang up and describe calls through it, and know
//! nothing of WebRTC or NATS; the next transport is one more implementation.

use std::sync::Arc;

use confab_engine::runtime::RuntimeCounters;

/// Why a call could not be placed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("Conversation has ended")]
    Ended,
    #[error("Conversation already has a participant")]
    Busy,
    #[error("No free media session; try again later")]
    Full,
    #[error("Media worker unavailable: {0}")]
    Unavailable(String),
    /// The participant's offer cannot be answered (the message says why).
    #[error("Invalid SDP offer: {0}")]
    InvalidOffer(String),
    #[error("WebRTC error: {0}")]
    Transport(String),
    #[error("Cannot start the conversation: {0}")]
    Live(String),
    /// The call's records could not be read or written.
    #[error(transparent)]
    Records(#[from] crate::records::RecordsError),
}

/// STUN/TURN servers the join page gives browsers.
#[derive(Debug, Clone, Default)]
pub struct IceServers {
    pub urls: Vec<String>,
    pub username: Option<String>,
    pub credential: Option<String>,
}

/// A LiveKit client admitted by its access token to the room of `conversation_id`.
#[derive(Debug, Clone)]
pub struct LiveKitJoin {
    pub conversation_id: String,
    /// The token's `sub`: the participant's identity.
    pub identity: String,
    /// The token's `name`.
    pub name: String,
}

/// LiveKit signalling frames (binary `SignalRequest`s in, `SignalResponse`s out) between the client's
/// WebSocket and the call. The call dropping `to_client` closes the WebSocket; the client closing it ends
/// `from_client`.
pub struct SignalSocket {
    pub from_client: tokio::sync::mpsc::Receiver<Vec<u8>>,
    pub to_client: tokio::sync::mpsc::Sender<Vec<u8>>,
}

/// The calls this process holds itself (its embedded media worker), for `/metrics`.
pub struct LocalCalls {
    pub active: usize,
    pub max: usize,
    pub engine: Arc<RuntimeCounters>,
}

/// Where this process's calls go.
#[async_trait::async_trait]
pub trait CallPlacer: Send + Sync {
    /// Places the call of `conversation_id` with the participant's SDP offer; the SDP answer. The call
    /// then runs until hang-up, the participant leaving, its maximum duration or shutdown.
    async fn join(&self, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError>;
    /// Places the call of a LiveKit client (`/rtc`): the call speaks LiveKit's signalling on `socket` and
    /// runs until the client leaves, hang-up, its maximum duration or shutdown.
    async fn join_livekit(&self, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        let _ = (join, socket);
        Err(JoinError::Unavailable("LiveKit signalling is not served by this placer".into()))
    }
    /// Hangs up the call of `conversation_id`; false when none is in progress.
    async fn hang_up(&self, conversation_id: &str) -> Result<bool, JoinError>;
    /// The STUN/TURN servers participants are given.
    fn ice_servers(&self) -> IceServers;
    /// True in a fleet replica: calls run on other processes, which queue them.
    fn is_fleet(&self) -> bool;
    /// The calls this process holds itself; None when it holds none.
    fn local_calls(&self) -> Option<LocalCalls>;
}
