//! The embedded media worker as the HTTP side's `CallPlacer` (`confab serve` alone): a join first claims
//! the conversation for this process, so that a restart after a crash knows which calls it held.

use std::sync::Arc;

use crate::media_worker::MediaWorker;
use confab_calls::placer::{CallPlacer, IceServers, JoinError, LiveKitJoin, LocalCalls, SignalSocket};

pub struct EmbeddedPlacer(pub Arc<MediaWorker>);

#[async_trait::async_trait]
impl CallPlacer for EmbeddedPlacer {
    async fn join(&self, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        self.0.join_alone(conversation_id, offer_sdp).await
    }

    async fn join_livekit(&self, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        self.0.join_livekit_alone(join, socket).await
    }

    async fn hang_up(&self, conversation_id: &str) -> Result<bool, JoinError> {
        Ok(self.0.hang_up(conversation_id))
    }

    fn ice_servers(&self) -> IceServers {
        self.0.config().ice_servers()
    }

    fn is_fleet(&self) -> bool {
        false
    }

    fn local_calls(&self) -> Option<LocalCalls> {
        Some(LocalCalls {
            active: self.0.active_calls(),
            max: self.0.config().max_calls,
            engine: self.0.engine_counters(),
        })
    }
}
