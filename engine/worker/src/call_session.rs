//! What a transport needs of the media worker to run one call, whatever carries its media: the engine
//! session's controls (hang up, the participant left), the call's records (IN_PROGRESS with the first
//! media), the no-media timeout, and a way to say the call is over. Today's WebRTC transport
//! (`media::call`) runs on it; the next transport is a sibling that takes the same.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use confab_engine::lock::lock;
use confab_engine::runtime::{CallRuntime, SessionId};

use confab_calls::CallRecords;

pub struct CallSession {
    pub records: Arc<dyn CallRecords>,
    /// The engine the call's session runs on: the threaded runtime in the worker, any `CallRuntime` (the
    /// stepped one included) for a transport driven on its own clock.
    pub runtime: Arc<Mutex<dyn CallRuntime + Send>>,
    /// A participant whose audio stops this long (or never starts) has left.
    pub no_media_timeout: Duration,
    /// Called once when the call is over (the worker forgets it, freeing its place).
    pub over: Box<dyn FnOnce() + Send>,
}

impl CallSession {
    /// Hangs up: the engine ends the call cleanly (`call_ended`).
    pub fn hang_up(&self, session: SessionId) {
        lock(&self.runtime).close_session(session);
    }

    /// The participant is gone: `participant_left` (with their id), then the call ends.
    pub fn participant_left(&self, session: SessionId, participant: &str) {
        lock(&self.runtime).participant_left(session, participant);
    }

    /// The sender whose first message marks the record IN_PROGRESS (the participant's first media), and
    /// the task that waits for it.
    pub fn in_progress_on_first_media(
        &self,
        conversation_id: &str,
    ) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let (first_media, first_media_rx) = tokio::sync::oneshot::channel();
        let (records, id) = (self.records.clone(), conversation_id.to_string());
        let marking = tokio::spawn(async move {
            if first_media_rx.await.is_ok()
                && let Err(err) = records.media_started(&id).await
            {
                tracing::error!(conversation_id = %id, error = %err, "cannot mark the conversation IN_PROGRESS");
            }
        });
        (first_media, marking)
    }

    /// The call is over.
    pub fn finish(self) {
        (self.over)();
    }
}
