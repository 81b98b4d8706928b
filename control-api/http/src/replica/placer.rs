//! The fleet's dispatcher as the HTTP side's `CallPlacer` (a replica): calls go to media workers over
//! NATS; `/metrics` reports the calls of the replica's own embedded worker (`--embedded-worker`), if any.

use std::sync::Arc;

use crate::replica::dispatch::Dispatcher;
use confab_calls::{CallPlacer, IceServers, JoinError, LiveKitJoin, LocalCalls, SignalSocket};

pub struct FleetPlacer {
    pub dispatcher: Arc<Dispatcher>,
    /// The embedded worker's own placer, which reports its calls.
    pub embedded: Option<Arc<dyn CallPlacer>>,
}

#[async_trait::async_trait]
impl CallPlacer for FleetPlacer {
    async fn join(&self, conversation_id: &str, offer_sdp: String) -> Result<String, JoinError> {
        self.dispatcher.join(conversation_id, offer_sdp).await
    }

    async fn join_livekit(&self, join: LiveKitJoin, socket: SignalSocket) -> Result<(), JoinError> {
        self.dispatcher.join_livekit(join, socket).await
    }

    async fn hang_up(&self, conversation_id: &str) -> Result<bool, JoinError> {
        self.dispatcher.hang_up(conversation_id).await
    }

    fn ice_servers(&self) -> IceServers {
        self.dispatcher.ice_servers().clone()
    }

    fn is_fleet(&self) -> bool {
        true
    }

    fn local_calls(&self) -> Option<LocalCalls> {
        self.embedded.as_ref().and_then(|embedded| embedded.local_calls())
    }
}
