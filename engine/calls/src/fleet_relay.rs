//! LiveKit signalling between a replica (which holds the client's WebSocket) and the worker that holds the
//! call, over core NATS: the client's frames on `confab.rtc.<relay>.up`, the call's on
//! `confab.rtc.<relay>.down`, one NATS message per frame; an empty message says that side closed. Both
//! sides subscribe before the call is admitted, so no frame is published to nobody. (Core NATS delivers a
//! publisher's messages to a subscriber in order; a relay that breaks shows as the client's missing pings
//! on the worker, and as the server's missing pongs on the client.)

use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::placer::SignalSocket;

/// Frames waiting in either direction on a relay.
pub const FRAME_QUEUE: usize = 64;

/// The subjects of relay `relay`: (client → call, call → client).
pub fn subjects(relay: &str) -> (String, String) {
    (format!("confab.rtc.{relay}.up"), format!("confab.rtc.{relay}.down"))
}

/// Publishes each frame of `frames` on `subject`, then an empty message when `frames` ends.
pub async fn publish_frames(client: async_nats::Client, subject: String, mut frames: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = frames.recv().await {
        if frame.is_empty() {
            continue; // an empty frame would read as the end
        }
        if client.publish(subject.clone(), frame.into()).await.is_err() {
            return;
        }
    }
    let _ = client.publish(subject, bytes::Bytes::new()).await;
    let _ = client.flush().await;
}

/// Delivers the messages of `subscriber` to `frames` until an empty one, the subscription's end or
/// `frames` closing.
pub async fn deliver_frames(mut subscriber: async_nats::Subscriber, frames: mpsc::Sender<Vec<u8>>) {
    while let Some(message) = subscriber.next().await {
        if message.payload.is_empty() || frames.send(message.payload.to_vec()).await.is_err() {
            break;
        }
    }
    let _ = subscriber.unsubscribe().await;
}

/// The worker's end of relay `relay`: a `SignalSocket` whose frames come from the client's subject and go to
/// the call's (subscribed before this returns).
pub async fn worker_socket(
    client: &async_nats::Client,
    relay: &str,
) -> Result<SignalSocket, async_nats::SubscribeError> {
    let (up, down) = subjects(relay);
    let subscriber = client.subscribe(up).await?;
    let (incoming, from_client) = mpsc::channel(FRAME_QUEUE);
    let (to_client, outgoing) = mpsc::channel(FRAME_QUEUE);
    tokio::spawn(deliver_frames(subscriber, incoming));
    tokio::spawn(publish_frames(client.clone(), down, outgoing));
    Ok(SignalSocket { from_client, to_client })
}
