//! LiveKit signalling frames: each WebSocket message is one binary protobuf, a `SignalRequest` from the
//! client or a `SignalResponse` from Confab.

use livekit_protocol as proto;
use prost::Message;
use proto::{signal_request, signal_response};
use tokio::sync::mpsc;

/// Confab's side of the signalling WebSocket.
#[derive(Clone)]
pub struct Signal {
    to_client: mpsc::Sender<Vec<u8>>,
}

impl Signal {
    pub fn new(to_client: mpsc::Sender<Vec<u8>>) -> Signal {
        Signal { to_client }
    }

    /// Sends `message`; false when the client's socket is gone.
    pub async fn send(&self, message: signal_response::Message) -> bool {
        let frame = proto::SignalResponse { message: Some(message) }.encode_to_vec();
        self.to_client.send(frame).await.is_ok()
    }
}

/// The request in a client's frame; None for a frame that is not one (logged, and ignored as LiveKit's
/// own server does).
pub fn decode(frame: &[u8]) -> Option<signal_request::Message> {
    match proto::SignalRequest::decode(frame) {
        Ok(request) => request.message,
        Err(err) => {
            tracing::debug!(error = %err, "a LiveKit signalling frame that is no SignalRequest");
            None
        }
    }
}

/// The `Leave` Confab sends when it ends the call: disconnect, do not reconnect.
pub fn leave(reason: proto::DisconnectReason) -> signal_response::Message {
    signal_response::Message::Leave(proto::LeaveRequest {
        can_reconnect: false,
        reason: reason as i32,
        action: proto::leave_request::Action::Disconnect as i32,
        regions: None,
    })
}

/// The session description message LiveKit carries offers and answers in.
pub fn description(kind: &str, sdp: String, id: u32) -> proto::SessionDescription {
    proto::SessionDescription { r#type: kind.to_string(), sdp, id, mid_to_track_id: Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_garbage_is_no_request() {
        let frame = proto::SignalRequest { message: Some(signal_request::Message::Ping(42)) }.encode_to_vec();
        assert_eq!(decode(&frame), Some(signal_request::Message::Ping(42)));
        assert_eq!(decode(&[0xff, 0xff, 0xff]), None);
    }
}
