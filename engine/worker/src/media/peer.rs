//! One peer connection, negotiated WHIP-style: the browser's offer in, our complete answer out (ICE
//! candidates gathered before answering, no trickle). We send Opus audio (the agent's voice) and a VP8
//! video track (the avatar's frames, from `face`), and
//! receive the browser's Opus microphone.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtc::ice::mdns::MulticastDnsMode;
use rtc::interceptor::Slot;
use rtc::rtp_transceiver::rtp_sender::{
    RTCRtpCodec, RTCRtpCodecParameters, RTCRtpCodingParameters, RTCRtpEncodingParameters, RtpCodecKind,
};
use rtc::rtp_transceiver::{PayloadType, RTCRtpTransceiverDirection, RTCRtpTransceiverInit};
use tokio::sync::{mpsc, watch};
use webrtc::data_channel::DataChannel;
use webrtc::media_stream::MediaStreamTrack;
use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_local::static_sample::TrackLocalStaticSample;
use webrtc::media_stream::track_remote::TrackRemote;
use webrtc::peer_connection::{
    MediaEngine, PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
    RTCIceCandidateType, RTCIceGatheringState, RTCIceServer, RTCPeerConnectionState, RTCSessionDescription, Registry,
    SettingEngineBuilder, register_default_interceptors,
};
use webrtc::rtp_transceiver::RtpSender;

use super::MediaConfig;
use super::keyframe_requests::{self, KeyframeRequests};

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

impl From<PeerError> for confab_calls::JoinError {
    fn from(err: PeerError) -> Self {
        match err {
            PeerError::Offer(message) => confab_calls::JoinError::InvalidOffer(message),
            PeerError::Transport(message) => confab_calls::JoinError::Transport(message),
        }
    }
}

pub(crate) fn transport(err: impl std::fmt::Display) -> PeerError {
    PeerError::Transport(err.to_string())
}

/// A negotiated peer connection and what the call needs from it.
pub struct Negotiated {
    pub connection: Arc<dyn PeerConnection>,
    pub answer_sdp: String,
    pub audio: Arc<TrackLocalStaticSample>,
    pub audio_ssrc: u32,
    pub audio_payload_type: PayloadType,
    /// The avatar's VP8 track.
    pub video: Arc<TrackLocalStaticSample>,
    pub video_ssrc: u32,
    /// None when the offer takes no video: the call is voice only.
    pub video_payload_type: Option<PayloadType>,
    /// The browser's tracks, as they open.
    pub remote_tracks: mpsc::Receiver<Arc<dyn TrackRemote>>,
    /// The connection's state, as it changes.
    pub state: watch::Receiver<RTCPeerConnectionState>,
}

struct Events {
    gathered: mpsc::Sender<()>,
    tracks: mpsc::Sender<Arc<dyn TrackRemote>>,
    data_channels: mpsc::Sender<Arc<dyn DataChannel>>,
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

    async fn on_data_channel(&self, channel: Arc<dyn DataChannel>) {
        let _ = self.data_channels.try_send(channel);
    }
}

pub(crate) fn opus() -> RTCRtpCodec {
    RTCRtpCodec {
        mime_type: "audio/opus".to_owned(),
        clock_rate: 48_000,
        channels: 2,
        sdp_fmtp_line: "minptime=10;useinbandfec=1".to_owned(),
        rtcp_feedback: vec![],
    }
}

pub(crate) fn vp8() -> RTCRtpCodec {
    RTCRtpCodec {
        mime_type: "video/VP8".to_owned(),
        clock_rate: 90_000,
        channels: 0,
        sdp_fmtp_line: String::new(),
        rtcp_feedback: vec![],
    }
}

fn local_track(kind: RtpCodecKind, codec: RTCRtpCodec, ssrc: u32) -> Result<Arc<TrackLocalStaticSample>, PeerError> {
    named_local_track(kind, codec, ssrc, "confab", &format!("confab-{kind}"))
}

/// A local track of `kind` sending `codec` on `ssrc`, with the stream and track ids its `msid` carries.
pub(crate) fn named_local_track(
    kind: RtpCodecKind,
    codec: RTCRtpCodec,
    ssrc: u32,
    stream_id: &str,
    track_id: &str,
) -> Result<Arc<TrackLocalStaticSample>, PeerError> {
    let track = MediaStreamTrack::new(
        stream_id.to_owned(),
        track_id.to_owned(),
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
        })
        .collect()
}

/// ICE counts from the offer, not from the answer: a call whose admission is slow (a cold start of the
/// models, a loaded machine: 30 s was seen beside two browsers on two cores) must not fail before the
/// browser has even had the answer. A dead participant is still noticed at once: disconnected after 5 s,
/// and the call's no-media timeout.
const ICE_FAILED_AFTER: Duration = Duration::from_secs(90);
const ICE_DISCONNECTED_AFTER: Duration = Duration::from_secs(5);
const ICE_KEEPALIVE: Duration = Duration::from_secs(2);

/// A peer connection with our codecs (Opus, VP8), ICE settings and event channels.
pub(crate) struct Built {
    pub connection: Arc<dyn PeerConnection>,
    pub gathered: mpsc::Receiver<()>,
    pub remote_tracks: mpsc::Receiver<Arc<dyn TrackRemote>>,
    /// Data channels the other side opens.
    pub data_channels: mpsc::Receiver<Arc<dyn DataChannel>>,
    pub state: watch::Receiver<RTCPeerConnectionState>,
}

pub(crate) async fn build(config: &MediaConfig) -> Result<Built, PeerError> {
    let mut media = MediaEngine::default();
    media
        .register_codec(
            RTCRtpCodecParameters { rtp_codec: opus(), payload_type: OPUS_PAYLOAD_TYPE },
            RtpCodecKind::Audio,
        )
        .map_err(transport)?;
    media
        .register_codec(RTCRtpCodecParameters { rtp_codec: vp8(), payload_type: VP8_PAYLOAD_TYPE }, RtpCodecKind::Video)
        .map_err(transport)?;
    let registry = register_default_interceptors(Registry::new(), &mut media)
        .map_err(transport)?
        .with(Slot::from(keyframe_requests::SLOT), KeyframeRequests::default());
    // No mDNS: a browser's `.local` candidates only resolve on its own LAN, the browser's connectivity
    // checks teach us its address anyway (peer-reflexive), and joining the multicast group fails on hosts
    // and namespaces without multicast.
    let mut settings = SettingEngineBuilder::new()
        .with_ice_timeouts(Some(ICE_DISCONNECTED_AFTER), Some(ICE_FAILED_AFTER), Some(ICE_KEEPALIVE))
        .with_include_loopback_candidate(config.rtc_ip.is_loopback())
        .with_multicast_dns_mode(MulticastDnsMode::Disabled);
    if !config.public_ips.is_empty() {
        let ips = config.public_ips.iter().map(IpAddr::to_string).collect();
        settings = settings.with_nat_1to1_ips(ips, RTCIceCandidateType::Host);
    }
    let (gathered_tx, gathered) = mpsc::channel(1);
    let (tracks, remote_tracks) = mpsc::channel(TRACK_QUEUE);
    let (data_channels_tx, data_channels) = mpsc::channel(TRACK_QUEUE);
    let (state_tx, state) = watch::channel(RTCPeerConnectionState::New);
    let connection = PeerConnectionBuilder::new()
        .with_configuration(RTCConfigurationBuilder::new().with_ice_servers(ice_servers(config)).build())
        .with_media_engine(media)
        .with_setting_engine(settings.build())
        .with_interceptor_registry(registry)
        .with_handler(Arc::new(Events {
            gathered: gathered_tx,
            tracks,
            data_channels: data_channels_tx,
            state: state_tx,
        }))
        .with_udp_addrs(vec![udp_bind_addr(config)?])
        .build()
        .await
        .map_err(transport)?;
    Ok(Built { connection: Arc::new(connection), gathered, remote_tracks, data_channels, state })
}

/// Our Opus track on `connection`: (track, its SSRC, its sender).
async fn add_voice(
    connection: &Arc<dyn PeerConnection>,
) -> Result<(Arc<TrackLocalStaticSample>, u32, Arc<dyn RtpSender>), PeerError> {
    let ssrc = rand::random::<u32>();
    let track = local_track(RtpCodecKind::Audio, opus(), ssrc)?;
    let sender = connection.add_track(track.clone() as Arc<dyn TrackLocal>).await.map_err(transport)?;
    Ok((track, ssrc, sender))
}

/// The payload type negotiated for `sender`'s codec, if any.
pub(crate) async fn negotiated_payload_type(sender: &Arc<dyn RtpSender>) -> Result<Option<PayloadType>, PeerError> {
    let parameters = sender.get_parameters().await.map_err(transport)?;
    Ok(parameters.rtp_parameters.codecs.first().map(|codec| codec.payload_type))
}

/// Our complete local description, once ICE gathering completes (or `GATHERING_TIMEOUT` passes).
pub(crate) async fn gathered_description(built: &mut Built) -> Result<String, PeerError> {
    let _ = tokio::time::timeout(GATHERING_TIMEOUT, built.gathered.recv()).await;
    let description = built.connection.local_description().await.ok_or_else(|| transport("no local description"))?;
    Ok(description.sdp)
}

/// Builds a peer connection for `offer_sdp` and answers it.
pub async fn negotiate(config: &MediaConfig, offer_sdp: String) -> Result<Negotiated, PeerError> {
    let offer = RTCSessionDescription::offer(offer_sdp).map_err(|e| PeerError::Offer(e.to_string()))?;
    if !offer.sdp.contains("m=audio") {
        return Err(PeerError::Offer("the offer has no audio section".into()));
    }
    let mut built = build(config).await?;
    let connection = built.connection.clone();
    let answered = async {
        let (audio, audio_ssrc, audio_sender) = add_voice(&connection).await?;
        let video_ssrc = rand::random::<u32>();
        let video = local_track(RtpCodecKind::Video, vp8(), video_ssrc)?;
        let video_sender = connection.add_track(video.clone() as Arc<dyn TrackLocal>).await.map_err(transport)?;
        connection.set_remote_description(offer).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        let answer = connection.create_answer(None).await.map_err(|e| PeerError::Offer(e.to_string()))?;
        connection.set_local_description(answer).await.map_err(transport)?;
        let answer_sdp = gathered_description(&mut built).await?;
        let audio_payload_type = negotiated_payload_type(&audio_sender)
            .await?
            .ok_or_else(|| PeerError::Offer("the offer accepts no Opus audio".into()))?;
        let video_payload_type = negotiated_payload_type(&video_sender).await?;
        Ok::<_, PeerError>((answer_sdp, audio, audio_ssrc, audio_payload_type, (video, video_ssrc, video_payload_type)))
    };
    match answered.await {
        Ok((answer_sdp, audio, audio_ssrc, audio_payload_type, (video, video_ssrc, video_payload_type))) => {
            Ok(Negotiated {
                connection,
                answer_sdp,
                audio,
                audio_ssrc,
                audio_payload_type,
                video,
                video_ssrc,
                video_payload_type,
                remote_tracks: built.remote_tracks,
                state: built.state,
            })
        }
        Err(err) => {
            let _ = connection.close().await;
            Err(err)
        }
    }
}

/// The other end of a call, as a browser would be: it offers Opus both ways and receives video. The
/// benchmarks and tests drive calls with it where a browser would be too heavy.
pub struct Offerer {
    pub connection: Arc<dyn PeerConnection>,
    pub offer_sdp: String,
    /// The microphone track.
    pub audio: Arc<TrackLocalStaticSample>,
    pub audio_ssrc: u32,
    audio_sender: Arc<dyn RtpSender>,
    pub remote_tracks: mpsc::Receiver<Arc<dyn TrackRemote>>,
    pub state: watch::Receiver<RTCPeerConnectionState>,
}

impl Offerer {
    /// A connection with a sending microphone and a receive-only video transceiver, and its offer.
    pub async fn new(config: &MediaConfig) -> Result<Offerer, PeerError> {
        let mut built = build(config).await?;
        let connection = built.connection.clone();
        let (audio, audio_ssrc, audio_sender) = add_voice(&connection).await?;
        let receive_only =
            RTCRtpTransceiverInit { direction: RTCRtpTransceiverDirection::Recvonly, ..Default::default() };
        connection.add_transceiver_from_kind(RtpCodecKind::Video, Some(receive_only)).await.map_err(transport)?;
        let offer = connection.create_offer(None).await.map_err(transport)?;
        connection.set_local_description(offer).await.map_err(transport)?;
        let offer_sdp = gathered_description(&mut built).await?;
        Ok(Offerer {
            connection,
            offer_sdp,
            audio,
            audio_ssrc,
            audio_sender,
            remote_tracks: built.remote_tracks,
            state: built.state,
        })
    }

    /// Applies the answer; returns the payload type to send the microphone with.
    pub async fn accept(&self, answer_sdp: String) -> Result<PayloadType, PeerError> {
        let answer = RTCSessionDescription::answer(answer_sdp).map_err(|e| PeerError::Offer(e.to_string()))?;
        self.connection.set_remote_description(answer).await.map_err(transport)?;
        negotiated_payload_type(&self.audio_sender)
            .await?
            .ok_or_else(|| PeerError::Offer("the answer accepts no Opus audio".into()))
    }
}
