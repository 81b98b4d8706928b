//! One account of a call whose connection never comes up (a caller behind a NAT that ICE cannot cross):
//! a single WARN line naming the candidates the caller offered, and `confab_calls_never_connected_total`
//! counted — instead of the WebRTC stack's line per media tick (those are kept below WARN by the
//! process's log filter, `confab` main). A connection that comes up is not mentioned here.

use tokio::sync::watch;
use webrtc::peer_connection::RTCPeerConnectionState;

/// The candidates in `sdp`, each as `<protocol> <address>:<port> <type>`.
pub fn offered_candidates(sdp: &str) -> Vec<String> {
    sdp.lines()
        .filter_map(|line| line.trim_end().strip_prefix("a=candidate:"))
        .filter_map(|candidate| {
            // foundation component protocol priority address port "typ" type …
            let fields: Vec<&str> = candidate.split_whitespace().collect();
            let kind = fields.iter().position(|f| *f == "typ").and_then(|at| fields.get(at + 1))?;
            Some(format!("{} {}:{} {kind}", fields.get(2)?.to_lowercase(), fields.get(4)?, fields.get(5)?))
        })
        .collect()
}

/// Waits until the connection is up (then says nothing) or fails or closes without having come up (then
/// says so once, with what the caller offered).
pub async fn watch(conversation_id: String, mut state: watch::Receiver<RTCPeerConnectionState>, offered: Vec<String>) {
    loop {
        let now = *state.borrow_and_update();
        match now {
            RTCPeerConnectionState::Connected => return,
            RTCPeerConnectionState::Failed | RTCPeerConnectionState::Closed => break,
            _ => {}
        }
        if state.changed().await.is_err() {
            break;
        }
    }
    confab_calls::metrics::metrics().call_never_connected();
    let candidates = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
    tracing::warn!(
        %conversation_id,
        %candidates,
        "the call's connection never came up: ICE found no working pair with the caller's candidates"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_named_by_protocol_address_and_type() {
        let sdp = "v=0\r\na=candidate:1 1 UDP 2122252543 10.0.0.5 50000 typ host\r\n\
                   a=candidate:2 1 udp 1686052607 203.0.113.9 61000 typ srflx raddr 10.0.0.5 rport 50000\r\n";
        assert_eq!(offered_candidates(sdp), ["udp 10.0.0.5:50000 host", "udp 203.0.113.9:61000 srflx"]);
        assert!(offered_candidates("v=0\r\n").is_empty());
    }
}
