//! One peer connection, negotiated WHIP-style: the browser's offer in, our complete answer out (ICE
//! candidates gathered before answering, no trickle). We send Opus audio (the agent's voice) and a VP8
//! video track (the avatar's frames; empty until the avatar renderer lands, but negotiated now), and
//! receive the browser's Opus microphone.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtc::ice::mdns::MulticastDnsMode;
use rtc::rtp_transceiver::PayloadType;
use rtc::rtp_transceiver::rtp_sender::{
    RTCRtpCodec, RTCRtpCodecParameters, RTCRtpCodingParameters, RTCRtpEncodingParameters, RtpCodecKind,
};
use tokio::sync::{mpsc, watch};
use webrtc::media_stream::MediaStreamTrack;
use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_local::static_sample::TrackLocalStaticSample;
use webrtc::media_stream::track_remote::TrackRemote;
use webrtc::peer_connection::{
    MediaEngine, PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
    RTCIceCandidateType, RTCIceGatheringState, RTCIceServer, RTCPeerConnectionState, RTCSessionDescription,
    Registry, SettingEngineBuilder, register_default_interceptors,
};

use super::MediaConfig;

/// Opus, as browsers offer it (RFC 7587: always 48 kHz, two channels in SDP).
pub const OPUS_PAYLOAD_TYPE: u8 = 111;
pub const VP8_PAYLOAD_TYPE: u8 = 96;
/// Longest wait for our ICE candidates before answering with what we have.
pub const GATHERING_TIMEOUT: Duration = Duration::from_secs(5);
/// Remote tracks waiting for the call to take them.
const TRACK_QUEUE: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("Invalid SDP offer: {0}")]
    Offer(String),
    #[error("WebRTC error: {0}")]
    Transport(String),
}

fn transport(err: impl std::fmt::Display) -> PeerError {
    PeerError::Transport(err.to_string())
}

/// A negotiated peer connection and what the call needs from it.
pub struct Negotiated {
    pub connection: Arc<dyn PeerConnection>,
    pub answer_sdp: String,
    pub audio: Arc<TrackLocalStaticSample>,
    pub audio_ssrc: u32,
    pub audio_payload_type: PayloadType,
    /// The avatar's track (kept so it stays negotiated; frames arrive with the avatar renderer).
    pub video: Arc<TrackLocalStaticSample>,
    /// The browser's tracks, as they open.
    pub remote_tracks: mpsc::Receiver<Arc<dyn TrackRemote>>,
    /// The connection's state, as it changes.
    pub state: watch::Receiver<RTCPeerConnectionState>,
}

struct Events {
    gathered: mpsc::Sender<()>,
    tracks: mpsc::Sender<Arc<dyn TrackRemote>>,
    state: watch::Sender<RTCPeerConnectionState>,
}

#[async_trait::async_trait]
impl PeerConnectionEventHandler for Events {
    async fn on_ice_gathering_state_change(&self, state: RTCIceGatheringState) {
        if state == RTCIceGatheringState::Complete {
            let _ = self.gathered.try_send(());
        }
    }

    async fn on_connection_state_change(&self, state: RTCPeerConnectionState) {
        tracing::debug!(%state, "peer connection state");
        let _ = self.state.send(state);
    }

    async fn on_track(&self, track: Arc<dyn TrackRemote>) {
        let _ = self.tracks.try_send(track);
    }
}

fn opus() -> RTCRtpCodec {
    RTCRtpCodec {
        mime_type: "audio/opus".to_owned(),
        clock_rate: 48_000,
        channels: 2,
        sdp_fmtp_line: "minptime=10;useinbandfec=1".to_owned(),
        rtcp_feedback: vec![],
    }
}

fn vp8() -> RTCRtpCodec {
    RTCRtpCodec {
        mime_type: "video/VP8".to_owned(),
        clock_rate: 90_000,
        channels: 0,
        sdp_fmtp_line: String::new(),
        rtcp_feedback: vec![],
    }
}

fn local_track(kind: RtpCodecKind, codec: RTCRtpCodec, ssrc: u32) -> Result<Arc<TrackLocalStaticSample>, PeerError> {
    let track = MediaStreamTrack::new(
        "confab".to_owned(),
        format!("confab-{kind}"),
        format!("agent {kind}"),
        kind,
        vec![RTCRtpEncodingParameters {
            rtp_coding_parameters: RTCRtpCodingParameters { ssrc: Some(ssrc), ..Default::default() },
            codec,
            ..Default::default()
        }],
    );
    Ok(Arc::new(TrackLocalStaticSample::new(Instant::now(), track).map_err(transport)?))
}

/// The UDP address the connection binds: port 0 (any), or the first free port of the configured range.
fn udp_bind_addr(config: &MediaConfig) -> Result<SocketAddr, PeerError> {
    let Some((first, last)) = config.udp_ports else {
        return Ok(SocketAddr::new(config.rtc_ip, 0));
    };
    // Start at a random port of the range so concurrent calls rarely race for the same one.
    let span = u32::from(last - first) + 1;
    let offset = rand::random::<u32>() % span;
    (0..span)
        .map(|i| first + ((offset + i) % span) as u16)
        .map(|port| SocketAddr::new(config.rtc_ip, port))
        .find(|addr| UdpSocket::bind(addr).is_ok())
        .ok_or_else(|| PeerError::Transport(format!("no free UDP port in {first}-{last}")))
}

fn ice_servers(config: &MediaConfig) -> Vec<RTCIceServer> {
    config
        .ice_servers
        .iter()
        .map(|url| RTCIceServer {
            urls: vec![url.clone()],
            username: config.ice_username.clone().unwrap_or_default(),
            credential: config.ice_credential.clone().unwrap_or_default(),
            ..Default::default()
        })
        .collect()
}

/// Builds a peer connection for `offer_sdp` and answers it.
pub async fn negotiate(config: &MediaConfig, offer_sdp: String) -> Result<Negotiated, PeerError> {
    let offer = RTCSessionDescription::offer(offer_sdp).map_err(|e| PeerError::Offer(e.to_string()))?;
    if !offer.sdp.contains("m=audio") {
        return Err(PeerError::Offer("the offer has no audio section".into()));
    }
    let mut media = MediaEngine::default();
    media
        .register_codec(
            RTCRtpCodecParameters { rtp_codec: opus(), payload_type: OPUS_PAYLOAD_TYPE, ..Default::default() },
            RtpCodecKind::Audio,
        )
        .map_err(transport)?;
    media
        .register_codec(
            RTCRtpCodecParameters { rtp_codec: vp8(), payload_type: VP8_PAYLOAD_TYPE, ..Default::default() },
            RtpCodecKind::Video,
        )
        .map_err(transport)?;
    let registry = register_default_interceptors(Registry::new(), &mut media).map_err(transport)?;
    // No mDNS: a browser's `.local` candidates only resolve on its own LAN, the browser's connectivity
    // checks teach us its address anyway (peer-reflexive), and joining the multicast group fails on hosts
    // and namespaces without multicast.
    let mut settings = SettingEngineBuilder::new()
        .with_include_loopback_candidate(config.rtc_ip.is_loopback())
        .with_multicast_dns_mode(MulticastDnsMode::Disabled);
    if !config.public_ips.is_empty() {
        let ips = config.public_ips.iter().map(IpAddr::to_string).collect();
        settings = settings.with_nat_1to1_ips(ips, RTCIceCandidateType::Host);
    }
    let (gathered, mut gathered_rx) = mpsc::channel(1);
    let (tracks, remote_tracks) = mpsc::channel(TRACK_QUEUE);
    let (state_tx, state) = watch::channel(RTCPeerConnectionState::New);
    let connection = PeerConnectionBuilder::new()
        .with_configuration(RTCConfigurationBuilder::new().with_ice_servers(ice_servers(config)).build())
        .with_media_engine(media)
        .with_setting_engine(settings.build())
        .with_interceptor_registry(registry)
        .with_handler(Arc::new(Events { gathered, tracks, state: state_tx }))
        .with_udp_addrs(vec![udp_bind_addr(config)?])
        .build()
        .await
        .map_err(transport)?;
    let connection: Arc<dyn PeerConnection> = Arc::new(connection);

    let audio_ssrc = rand::random::<u32>();
    let audio = local_track(RtpCodecKind::Audio, opus(), audio_ssrc)?;
    let audio_sender = connection.add_track(audio.clone() as Arc<dyn TrackLocal>).await.map_err(transport)?;
    let video = local_track(RtpCodecKind::Video, vp8(), rand::random::<u32>())?;
    connection.add_track(video.clone() as Arc<dyn TrackLocal>).await.map_err(transport)?;

    let answered = async {
        connection.set_remote_description(offer).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        let answer = connection.create_answer(None).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        connection.set_local_description(answer).await.map_err(transport)?;
        let _ = tokio::time::timeout(GATHERING_TIMEOUT, gathered_rx.recv()).await;
        let answer = connection.local_description().await.ok_or_else(|| transport("no local description"))?;
        let parameters = audio_sender.get_parameters().await.map_err(transport)?;
        let payload_type = parameters
            .rtp_parameters
            .codecs
            .first()
            .map(|codec| codec.payload_type)
            .ok_or_else(|| PeerError::Offer("the offer accepts no Opus audio".into()))?;
        Ok::<_, PeerError>((answer.sdp, payload_type))
    };
    match answered.await {
        Ok((answer_sdp, audio_payload_type)) => Ok(Negotiated {
            connection,
            answer_sdp,
            audio,
            audio_ssrc,
            audio_payload_type,
            video,
            remote_tracks,
            state,
        }),
        Err(err) => {
            let _ = connection.close().await;
            Err(err)
        }
    }
}
