//! LiveKit signalling frames: each WebSocket message is one binary protobuf, a `SignalRequest` from the
//! client or a `SignalResponse` from Confab.

use std::collections::HashMap;

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

/// The session description message LiveKit carries offers and answers in, with each media section's
/// track id by its `mid`: Firefox gives remote tracks ids of its own (not the `TR_` ids in `a=msid`), and
/// LiveKit's clients then find the track a receiver carries by its `mid` in this map.
pub fn description(kind: &str, sdp: String, id: u32) -> proto::SessionDescription {
    let mid_to_track_id = track_ids_by_mid(&sdp);
    proto::SessionDescription { r#type: kind.to_string(), sdp, id, mid_to_track_id }
}

/// `mid` → track id of every media section of `sdp` that names both (`a=mid:`, `a=msid:<stream> <track>`).
fn track_ids_by_mid(sdp: &str) -> HashMap<String, String> {
    let mut found = HashMap::new();
    for section in sdp.split("\nm=").skip(1) {
        let attribute = |name: &str| section.lines().find_map(|line| line.trim_end().strip_prefix(name));
        let track = attribute("a=msid:").and_then(|msid| msid.split_whitespace().nth(1));
        if let (Some(mid), Some(track)) = (attribute("a=mid:"), track) {
            found.insert(mid.to_string(), track.to_string());
        }
    }
    found
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

    #[test]
    fn an_offer_names_each_sections_track_by_its_mid() {
        let sdp = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n\
                   m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=msid:PA_a|PA_a-av TR_voice\r\n\
                   m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=msid:PA_a|PA_a-av TR_face\r\na=mid:1\r\n\
                   m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:2\r\n";
        let description = description("offer", sdp.to_string(), 1);
        let expected: HashMap<String, String> =
            [("0".into(), "TR_voice".into()), ("1".into(), "TR_face".into())].into_iter().collect();
        assert_eq!(description.mid_to_track_id, expected);
        assert_eq!((description.r#type.as_str(), description.id), ("offer", 1));
    }
}
