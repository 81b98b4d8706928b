//! The two peer connections of a LiveKit client (the `/rtc` protocol): the **subscriber**, which Confab
//! offers at once, carrying the agent's voice and face (both tracks in the agent's one stream, each with
//! its `TR_` id) and the server's data channels (`_reliable`, `_lossy`; the words go out on `_reliable`);
//! and the **publisher**, which the client offers when it publishes its microphone (again for every track
//! it publishes or unpublishes) and Confab answers with each offer's `id`. Our descriptions carry our ICE
//! candidates (gathered before they are sent); the client's trickled candidates are applied once the
//! connection they belong to has its remote description, and kept until then.

use std::sync::Arc;

use rtc::rtp_transceiver::PayloadType;
use rtc::rtp_transceiver::rtp_sender::RtpCodecKind;
use webrtc::data_channel::{DataChannel, RTCDataChannelInit};
use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_local::static_sample::TrackLocalStaticSample;
use webrtc::peer_connection::{PeerConnection, RTCIceCandidateInit, RTCSessionDescription};
use webrtc::rtp_transceiver::RtpSender;

use super::room::Room;
use crate::media::MediaConfig;
use crate::media::peer::{self, Built, PeerError, transport};

pub const RELIABLE: &str = "_reliable";
pub const LOSSY: &str = "_lossy";

/// A client's candidates for a connection, applied once it has a remote description (a candidate
/// applied before it is refused by the connection, and lost).
#[derive(Default)]
struct Candidates {
    described: bool,
    waiting: Vec<RTCIceCandidateInit>,
    /// Candidates the connection took.
    applied: usize,
}

impl Candidates {
    async fn add(&mut self, connection: &Arc<dyn PeerConnection>, candidate: RTCIceCandidateInit) {
        if !self.described {
            self.waiting.push(candidate);
            return;
        }
        self.apply(connection, candidate).await;
    }

    async fn described(&mut self, connection: &Arc<dyn PeerConnection>) {
        self.described = true;
        for candidate in std::mem::take(&mut self.waiting) {
            self.apply(connection, candidate).await;
        }
    }

    async fn apply(&mut self, connection: &Arc<dyn PeerConnection>, candidate: RTCIceCandidateInit) {
        match connection.add_ice_candidate(candidate).await {
            Ok(()) => self.applied += 1,
            Err(err) => tracing::debug!(error = %err, "a client's ICE candidate was refused"),
        }
    }
}

/// A track we send and its sender (whose parameters say the negotiated payload type).
pub struct SentTrack {
    pub track: Arc<TrackLocalStaticSample>,
    pub ssrc: u32,
    sender: Arc<dyn RtpSender>,
}

impl SentTrack {
    async fn add(
        connection: &Arc<dyn PeerConnection>,
        kind: RtpCodecKind,
        stream_id: &str,
        track_sid: &str,
    ) -> Result<SentTrack, PeerError> {
        let ssrc = rand::random::<u32>();
        let codec = if kind == RtpCodecKind::Audio { peer::opus() } else { peer::vp8() };
        let track = peer::named_local_track(kind, codec, ssrc, stream_id, track_sid)?;
        let sender = connection.add_track(track.clone() as Arc<dyn TrackLocal>).await.map_err(transport)?;
        Ok(SentTrack { track, ssrc, sender })
    }

    /// The payload type the client accepted for this track; None when it accepted none.
    pub async fn payload_type(&self) -> Result<Option<PayloadType>, PeerError> {
        peer::negotiated_payload_type(&self.sender).await
    }
}

/// The agent's side of the call: Confab offers.
pub struct Subscriber {
    pub(crate) built: Built,
    pub voice: SentTrack,
    pub face: SentTrack,
    pub reliable: Arc<dyn DataChannel>,
    pub lossy: Arc<dyn DataChannel>,
    candidates: Candidates,
}

impl Subscriber {
    /// The connection with the agent's tracks and data channels, and its offer.
    pub async fn offer(config: &MediaConfig, room: &Room) -> Result<(Subscriber, String), PeerError> {
        let mut built = peer::build(config).await?;
        let connection = built.connection.clone();
        let made = async {
            let stream = room.agent_stream_id();
            let voice = SentTrack::add(&connection, RtpCodecKind::Audio, &stream, &room.agent_audio.sid).await?;
            let face = SentTrack::add(&connection, RtpCodecKind::Video, &stream, &room.agent_video.sid).await?;
            let reliable = connection
                .create_data_channel(RELIABLE, Some(RTCDataChannelInit { ordered: true, ..Default::default() }))
                .await
                .map_err(transport)?;
            let lossy_init = RTCDataChannelInit { ordered: false, max_retransmits: Some(0), ..Default::default() };
            let lossy = connection.create_data_channel(LOSSY, Some(lossy_init)).await.map_err(transport)?;
            let offer = connection.create_offer(None).await.map_err(transport)?;
            connection.set_local_description(offer).await.map_err(transport)?;
            let sdp = peer::gathered_description(&mut built).await?;
            Ok::<_, PeerError>((voice, face, reliable, lossy, sdp))
        };
        match made.await {
            Ok((voice, face, reliable, lossy, sdp)) => {
                Ok((Subscriber { built, voice, face, reliable, lossy, candidates: Candidates::default() }, sdp))
            }
            Err(err) => {
                let _ = connection.close().await;
                Err(err)
            }
        }
    }

    /// Applies the client's answer.
    pub async fn accept(&mut self, answer_sdp: String) -> Result<(), PeerError> {
        let answer = RTCSessionDescription::answer(answer_sdp).map_err(|e| PeerError::Offer(e.to_string()))?;
        self.built.connection.set_remote_description(answer).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        self.candidates.described(&self.built.connection).await;
        Ok(())
    }

    pub async fn add_candidate(&mut self, candidate: RTCIceCandidateInit) {
        self.candidates.add(&self.built.connection, candidate).await;
    }
}

/// The person's side of the call: the client offers, Confab answers.
pub struct Publisher {
    pub(crate) built: Built,
    answered_once: bool,
    candidates: Candidates,
}

impl Publisher {
    pub async fn new(config: &MediaConfig) -> Result<Publisher, PeerError> {
        Ok(Publisher { built: peer::build(config).await?, answered_once: false, candidates: Candidates::default() })
    }

    /// Answers the client's (first or next) offer.
    pub async fn answer(&mut self, offer_sdp: String) -> Result<String, PeerError> {
        let connection = self.built.connection.clone();
        let offer = RTCSessionDescription::offer(offer_sdp).map_err(|e| PeerError::Offer(e.to_string()))?;
        connection.set_remote_description(offer).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        self.candidates.described(&connection).await;
        let answer = connection.create_answer(None).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        connection.set_local_description(answer).await.map_err(transport)?;
        if !self.answered_once {
            // The first answer waits for our candidates; later ones carry the same.
            self.answered_once = true;
            return peer::gathered_description(&mut self.built).await;
        }
        let description = connection.local_description().await.ok_or_else(|| transport("no local description"))?;
        Ok(description.sdp)
    }

    pub async fn add_candidate(&mut self, candidate: RTCIceCandidateInit) {
        self.candidates.add(&self.built.connection, candidate).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::peer::Offerer;

    fn config() -> MediaConfig {
        let scratch = std::env::temp_dir();
        MediaConfig::new(std::net::IpAddr::from([127, 0, 0, 1]), scratch.clone(), scratch)
    }

    /// LiveKit's clients trickle candidates as soon as they have them, which can be before Confab has
    /// the offer they belong to: they wait for it, and are then taken.
    #[tokio::test]
    async fn a_candidate_before_the_remote_description_waits_for_it() {
        let client = Offerer::new(&config()).await.unwrap();
        let mut publisher = Publisher::new(&config()).await.unwrap();
        let candidate = RTCIceCandidateInit {
            candidate: "candidate:1 1 udp 2122252543 127.0.0.1 50000 typ host".into(),
            sdp_mid: Some("0".into()),
            sdp_mline_index: Some(0),
            ..Default::default()
        };
        publisher.add_candidate(candidate.clone()).await;
        assert_eq!((publisher.candidates.waiting.len(), publisher.candidates.applied), (1, 0));
        publisher.answer(client.offer_sdp.clone()).await.unwrap();
        assert_eq!((publisher.candidates.waiting.len(), publisher.candidates.applied), (0, 1));
        publisher.add_candidate(candidate).await;
        assert_eq!(publisher.candidates.applied, 2, "once described, at once");
    }
}
