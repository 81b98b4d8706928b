//! The data channels of a LiveKit call: the agent's words go out on the subscriber's `_reliable` channel
//! once it opens (packets sent before are kept until then, in order); what clients send on theirs is read
//! and let go (Confab acts on no client data yet).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use livekit_protocol as proto;
use prost::Message;
use tokio::sync::mpsc;
use webrtc::data_channel::{DataChannel, DataChannelEvent};

/// Packets waiting for the channel.
pub const QUEUE: usize = 64;

/// Sends each packet of `packets` on `channel`, from when it opens until either ends.
pub async fn send_on(channel: Arc<dyn DataChannel>, mut packets: mpsc::Receiver<proto::DataPacket>) {
    let mut open = false;
    let mut waiting: VecDeque<proto::DataPacket> = VecDeque::new();
    loop {
        tokio::select! {
            event = channel.poll() => match event {
                Some(DataChannelEvent::OnOpen) => {
                    open = true;
                    while let Some(packet) = waiting.pop_front() {
                        if !send(&channel, &packet).await {
                            return;
                        }
                    }
                }
                Some(DataChannelEvent::OnClose) | None => return,
                Some(_) => {}
            },
            packet = packets.recv() => match packet {
                None => return,
                Some(packet) if open => {
                    if !send(&channel, &packet).await {
                        return;
                    }
                }
                Some(packet) => waiting.push_back(packet),
            },
        }
    }
}

async fn send(channel: &Arc<dyn DataChannel>, packet: &proto::DataPacket) -> bool {
    let bytes = BytesMut::from(packet.encode_to_vec().as_slice());
    match channel.send(bytes).await {
        Ok(()) => true,
        Err(err) => {
            tracing::debug!(error = %err, "the data channel refused a packet");
            false
        }
    }
}

/// Reads `channel` to its end, letting each message go.
pub async fn drain(channel: Arc<dyn DataChannel>) {
    while let Some(event) = channel.poll().await {
        if matches!(event, DataChannelEvent::OnClose) {
            return;
        }
    }
}
