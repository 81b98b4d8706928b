//! A browser's SDP offer as the signalling route passes it to webrtc-rs (`RTCSessionDescription::offer`,
//! which parses it): any text gives a description or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtc::peer_connection::sdp::RTCSessionDescription;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(offer) = RTCSessionDescription::offer(text.to_string()) {
        let _ = offer.unmarshal();
    }
});
