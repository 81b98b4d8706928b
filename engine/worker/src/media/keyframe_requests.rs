//! Keyframe requests from the browser reach the call. webrtc-rs ends inbound RTCP inside its interceptor
//! chain unless an interceptor marks a packet for the application; this one, last in the chain, lets
//! through the picture-loss indications (PLI) and full intra requests (FIR) only, marked
//! `DeliverToApplication`, and drops the rest (receiver reports, NACKs: the chain has acted on them).
//! The video track then reports them (`TrackLocalEvent::OnRtcpPacket`) and the face encodes a keyframe.

use std::collections::VecDeque;
use std::time::Instant;

use rtc::interceptor::{Attribute, Interceptor, Packet, StreamInfo, TaggedPacket};
use rtc::rtcp;
use rtc::rtcp::payload_feedbacks::full_intra_request::FullIntraRequest;
use rtc::rtcp::payload_feedbacks::picture_loss_indication::PictureLossIndication;
use rtc::sansio::Protocol;
use rtc::shared::error::Error;

/// The chain position: after every default interceptor (the application-most end).
pub const SLOT: usize = 14_000;

/// True for a PLI or a FIR.
pub fn is_keyframe_request(packet: &dyn rtcp::Packet) -> bool {
    let any = packet.as_any();
    any.is::<PictureLossIndication>() || any.is::<FullIntraRequest>()
}

#[derive(Default)]
pub struct KeyframeRequests {
    read: VecDeque<TaggedPacket>,
    write: VecDeque<TaggedPacket>,
}

impl Protocol<TaggedPacket, TaggedPacket, ()> for KeyframeRequests {
    type Rout = TaggedPacket;
    type Wout = TaggedPacket;
    type Eout = ();
    type Error = Error;
    type Time = Instant;

    fn handle_read(&mut self, mut message: TaggedPacket) -> Result<(), Error> {
        if let Packet::Rtcp(packets) = &message.message.packet {
            let requests: Vec<Box<dyn rtcp::Packet>> =
                packets.iter().filter(|packet| is_keyframe_request(packet.as_ref())).cloned().collect();
            if requests.is_empty() {
                return Ok(());
            }
            message.message.packet = Packet::Rtcp(requests);
            message.message.add(Attribute::DeliverToApplication);
        }
        self.read.push_back(message);
        Ok(())
    }

    fn poll_read(&mut self) -> Option<TaggedPacket> {
        self.read.pop_front()
    }

    fn handle_write(&mut self, message: TaggedPacket) -> Result<(), Error> {
        self.write.push_back(message);
        Ok(())
    }

    fn poll_write(&mut self) -> Option<TaggedPacket> {
        self.write.pop_front()
    }
}

impl Interceptor for KeyframeRequests {
    fn bind_local_stream(&mut self, _info: &StreamInfo) {}
    fn unbind_local_stream(&mut self, _info: &StreamInfo) {}
    fn bind_remote_stream(&mut self, _info: &StreamInfo) {}
    fn unbind_remote_stream(&mut self, _info: &StreamInfo) {}
}

#[cfg(test)]
mod tests {
    use rtc::interceptor::AttributedPacket;
    use rtc::rtcp::receiver_report::ReceiverReport;
    use rtc::shared::TransportContext;

    use super::*;

    fn tagged(packets: Vec<Box<dyn rtcp::Packet>>) -> TaggedPacket {
        TaggedPacket {
            now: Instant::now(),
            transport: TransportContext::default(),
            message: AttributedPacket::new(Packet::Rtcp(packets)),
        }
    }

    #[test]
    fn only_keyframe_requests_go_on_to_the_application() {
        let mut interceptor = KeyframeRequests::default();
        interceptor.handle_read(tagged(vec![Box::new(ReceiverReport::default())])).unwrap();
        assert!(interceptor.poll_read().is_none(), "a receiver report stops here");
        let pli = PictureLossIndication { sender_ssrc: 1, media_ssrc: 2 };
        interceptor.handle_read(tagged(vec![Box::new(ReceiverReport::default()), Box::new(pli)])).unwrap();
        let delivered = interceptor.poll_read().expect("the PLI goes on");
        assert!(delivered.message.has(&Attribute::DeliverToApplication));
        let Packet::Rtcp(packets) = &delivered.message.packet else { panic!("RTCP") };
        assert_eq!(packets.len(), 1);
        assert!(is_keyframe_request(packets[0].as_ref()));
    }
}
