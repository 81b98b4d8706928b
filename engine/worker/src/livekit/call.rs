//! One call of a LiveKit client, from its JoinResponse (sent by the worker as it admits the call: the agent
//! already in the room with its tracks) to its end. The signalling session runs here: Confab's subscriber
//! offer first;
//! the client's answer starts the agent's voice and face on it; the client's publisher offers are answered
//! and the person's audio tracks are heard, one after another, on the engine's input; trickled candidates
//! go to their connection; pings are answered. The engine's events become what the room shows
//! (`room_events`): the agent's state, the speakers, the words. The call ends when the client leaves (a
//! `leave`, its socket closing, no ping for `PING_TIMEOUT_SECONDS`, its connection failing: then
//! `participant_left` and `call_ended`), or when the engine ends it (hang-up, maximum duration,
//! shutdown: then Confab sends `leave` with action DISCONNECT first).

use std::sync::Arc;
use std::time::{Duration, Instant};

use confab_engine::events::ConversationEvent;
use livekit_protocol as proto;
use proto::{signal_request, signal_response};
use tokio::sync::{Notify, broadcast, mpsc};
use webrtc::media_stream::track_remote::TrackRemote;
use webrtc::peer_connection::{RTCIceCandidateInit, RTCPeerConnectionState};

use super::data_channel;
use super::peers::{Publisher, Subscriber};
use super::room::{self, Room};
use super::room_events::{RoomEvents, RoomSignal};
use super::signal::{self, Signal};
use super::words::TextStreams;
use crate::call_session::CallSession;
use crate::media::MediaConfig;
use crate::media::call::{MediaClock, ReceivingCall, VoiceTrack, receive_voice, send_voice};
use crate::media::face::{self, FaceFeed, VideoTrack};
use crate::media::recording_slot::RecordingSlot;
use crate::session_binding::{LiveConversation, LoadCounters};

/// How often the call looks at its connections and the client's pings.
const SUPERVISE_INTERVAL: Duration = Duration::from_millis(200);

/// The signalling side of a LiveKit call, as the worker hands it over.
pub struct LiveKitCall {
    pub room: Room,
    pub signal: Signal,
    pub from_client: mpsc::Receiver<Vec<u8>>,
}

/// Why the call ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// The engine ended the session (max duration, a hang-up it was asked for).
    Engine,
    /// The worker asked for a hang-up (API, shutdown).
    HungUp,
    /// The client left: the reason is logged.
    Left(&'static str),
}

/// What the loop holds of the call.
struct Call {
    room: Room,
    signal: Signal,
    subscriber: Subscriber,
    publisher: Publisher,
    room_events: RoomEvents,
    streams: TextStreams,
    words: mpsc::Sender<proto::DataPacket>,
    /// The agent's voice and face, started by the subscriber's answer.
    agent_media: Option<AgentMedia>,
    /// The engine's output until the agent's media takes it.
    output: Option<rtrb::Consumer<f32>>,
    agent: AgentLook,
    last_ping: Instant,
}

struct AgentMedia {
    sending: tokio::task::JoinHandle<()>,
    face: Option<FaceFeed>,
    keyframe_sent: bool,
}

/// Runs the call to its end.
pub async fn run(
    session: CallSession,
    live: LiveConversation,
    call: LiveKitCall,
    config: MediaConfig,
    recording: RecordingSlot,
    hang_up: Arc<Notify>,
) {
    let LiveConversation {
        conversation_id,
        session_id,
        user_id,
        face: face_id,
        custom_face,
        input,
        output,
        load,
        mut finished,
        events,
        ..
    } = live;
    let LiveKitCall { room, signal, mut from_client } = call;
    let agent = AgentLook { face_id, custom_face, recording: recording.clone(), load: load.clone() };
    let opened = open(&config, room, signal.clone(), output, agent).await;
    let (ending, call, listening) = match opened {
        Ok((mut call, remote_tracks)) => {
            let listening = hear(&session, &conversation_id, (input, load), remote_tracks, recording.clone());
            let ending = converse(&mut call, &mut from_client, events, &hang_up, &mut finished).await;
            (ending, Some(call), Some(listening))
        }
        Err(err) => {
            tracing::warn!(%conversation_id, error = %err, "the LiveKit call could not be set up");
            (Ending::Left("set-up failed"), None, None)
        }
    };
    match ending {
        Ending::Engine => {}
        Ending::HungUp => {
            tracing::info!(%conversation_id, "hang-up");
            session.hang_up(session_id);
        }
        Ending::Left(reason) => {
            tracing::info!(%conversation_id, reason, "the participant left");
            let participant = if user_id.is_empty() { "user" } else { user_id.as_str() };
            session.participant_left(session_id, participant);
        }
    }
    if ending != Ending::Engine {
        let _ = finished.await;
    }
    // The client hears it from us before its connections close.
    if !matches!(ending, Ending::Left(_)) {
        signal.send(signal::leave(proto::DisconnectReason::RoomClosed)).await;
    }
    if let Some(listening) = listening {
        listening.abort();
    }
    if let Some(call) = call {
        call.close(&conversation_id).await;
    }
    session.finish();
    tracing::info!(%conversation_id, "LiveKit call over");
}

/// What the agent looks like on the call.
struct AgentLook {
    face_id: String,
    custom_face: Option<(confab_engine::avatar::RgbImage, confab_engine::avatar::FaceRig)>,
    recording: RecordingSlot,
    /// Where the face counts the frames it holds still.
    load: LoadCounters,
}

/// Sends the subscriber's offer (the client has its JoinResponse); the call, and the person's tracks as
/// they come.
async fn open(
    config: &MediaConfig,
    room: Room,
    signal: Signal,
    output: rtrb::Consumer<f32>,
    agent: AgentLook,
) -> Result<(Call, mpsc::Receiver<Arc<dyn TrackRemote>>), String> {
    let (subscriber, offer) = Subscriber::offer(config, &room).await.map_err(|e| e.to_string())?;
    let mut publisher = Publisher::new(config).await.map_err(|e| e.to_string())?;
    if !signal.send(signal_response::Message::Offer(signal::description("offer", offer, 1))).await {
        return Err("the client's socket closed".into());
    }
    let (words, packets) = mpsc::channel(data_channel::QUEUE);
    tokio::spawn(data_channel::send_on(subscriber.reliable.clone(), packets));
    tokio::spawn(data_channel::drain(subscriber.lossy.clone()));
    let remote_tracks = std::mem::replace(&mut publisher.built.remote_tracks, mpsc::channel(1).1);
    let room_events = RoomEvents::new(&room.agent_audio.sid);
    let call = Call {
        room,
        signal,
        subscriber,
        publisher,
        room_events,
        streams: TextStreams::default(),
        words,
        agent_media: None,
        output: Some(output),
        agent,
        last_ping: Instant::now(),
    };
    Ok((call, remote_tracks))
}

/// The STUN/TURN servers the JoinResponse gives the client.
pub fn ice_servers(config: &MediaConfig) -> Vec<proto::IceServer> {
    let servers = config.ice_servers();
    if servers.urls.is_empty() {
        return vec![];
    }
    vec![proto::IceServer {
        urls: servers.urls,
        username: servers.username.unwrap_or_default(),
        credential: servers.credential.unwrap_or_default(),
    }]
}

/// The person's audio into the engine: each track they publish is heard in turn (a newer one replaces
/// the one heard); the record goes IN_PROGRESS with the first packet.
fn hear(
    session: &CallSession,
    conversation_id: &str,
    (mut input, load): (rtrb::Producer<f32>, LoadCounters),
    mut tracks: mpsc::Receiver<Arc<dyn TrackRemote>>,
    recording: RecordingSlot,
) -> tokio::task::JoinHandle<()> {
    let (first_packet, marking) = session.in_progress_on_first_media(conversation_id);
    let conversation_id = conversation_id.to_string();
    tokio::spawn(async move {
        let clock = MediaClock::default();
        let mut first_packet = Some(first_packet);
        let mut next = tracks.recv().await;
        while let Some(track) = next {
            if track.kind().await != rtc::rtp_transceiver::rtp_sender::RtpCodecKind::Audio {
                next = tracks.recv().await;
                continue;
            }
            tokio::select! {
                _ = receive_voice(track, &mut input, &load, &clock, ReceivingCall {
                    first_packet: &mut first_packet,
                    recording: &recording,
                    conversation_id: &conversation_id,
                }) => {
                    next = tracks.recv().await;
                }
                newer = tracks.recv() => next = newer,
            }
        }
        let _ = marking.await;
    })
}

/// The signalling loop: until the client leaves, the engine ends the call or a hang-up is asked for.
async fn converse(
    call: &mut Call,
    from_client: &mut mpsc::Receiver<Vec<u8>>,
    mut events: broadcast::Receiver<ConversationEvent>,
    hang_up: &Notify,
    finished: &mut tokio::task::JoinHandle<()>,
) -> Ending {
    let mut ticker = tokio::time::interval(SUPERVISE_INTERVAL);
    let mut data_channels = std::mem::replace(&mut call.publisher.built.data_channels, mpsc::channel(1).1);
    let mut engine_speaks = true;
    loop {
        tokio::select! {
            _ = &mut *finished => return Ending::Engine,
            _ = hang_up.notified() => return Ending::HungUp,
            frame = from_client.recv() => {
                let Some(frame) = frame else { return Ending::Left("socket closed") };
                call.last_ping = Instant::now();
                if let Some(request) = signal::decode(&frame)
                    && let Some(ending) = call.on_request(request).await
                {
                    return ending;
                }
            }
            event = events.recv(), if engine_speaks => match event {
                Ok(event) => call.show(&event).await,
                Err(broadcast::error::RecvError::Lagged(skipped)) => {
                    tracing::debug!(skipped, "the room fell behind the engine's events");
                }
                Err(broadcast::error::RecvError::Closed) => engine_speaks = false,
            },
            Some(channel) = data_channels.recv() => {
                tokio::spawn(data_channel::drain(channel));
            }
            _ = ticker.tick() => {
                if let Some(ending) = call.supervise() {
                    return ending;
                }
            }
        }
    }
}

impl Call {
    /// Handles one request of the client; the call's end when it ends it.
    async fn on_request(&mut self, request: signal_request::Message) -> Option<Ending> {
        match request {
            signal_request::Message::Answer(answer) => {
                if let Err(err) = self.subscriber.accept(answer.sdp).await {
                    tracing::warn!(error = %err, "the client's subscriber answer was refused");
                    return Some(Ending::Left("subscriber answer refused"));
                }
                self.start_agent_media().await;
            }
            signal_request::Message::Offer(offer) => match self.publisher.answer(offer.sdp).await {
                Ok(sdp) => {
                    let answer = signal::description("answer", sdp, offer.id);
                    self.signal.send(signal_response::Message::Answer(answer)).await;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the client's publisher offer was refused");
                    return Some(Ending::Left("publisher offer refused"));
                }
            },
            signal_request::Message::Trickle(trickle) => {
                let Ok(candidate) = serde_json::from_str::<RTCIceCandidateInit>(&trickle.candidate_init) else {
                    tracing::debug!("a trickled candidate that is not RTCIceCandidateInit JSON");
                    return None;
                };
                if trickle.target == proto::SignalTarget::Subscriber as i32 {
                    self.subscriber.add_candidate(candidate).await;
                } else {
                    self.publisher.add_candidate(candidate).await;
                }
            }
            signal_request::Message::AddTrack(request) => {
                let track = Room::published_track(&request);
                if request.r#type == proto::TrackType::Audio as i32 {
                    self.room_events.user_track = track.sid.clone();
                }
                let published = proto::TrackPublishedResponse { cid: request.cid, track: Some(track) };
                self.signal.send(signal_response::Message::TrackPublished(published)).await;
            }
            signal_request::Message::Leave(_) => return Some(Ending::Left("leave")),
            signal_request::Message::Ping(timestamp) => {
                self.signal.send(signal_response::Message::Pong(timestamp)).await;
            }
            signal_request::Message::PingReq(ping) => {
                let pong = proto::Pong {
                    last_ping_timestamp: ping.timestamp,
                    timestamp: chrono::Utc::now().timestamp_millis(),
                };
                self.signal.send(signal_response::Message::PongResp(pong)).await;
            }
            // Mute needs nothing: a muted track sends no audio, the engine hears silence. The rest
            // (subscriptions, layers, metadata, simulation) asks for nothing a 1:1 room has.
            _ => {}
        }
        None
    }

    /// The agent's voice and face go out once the client has answered the subscriber offer.
    async fn start_agent_media(&mut self) {
        let Some(output) = self.output.take() else { return };
        let voice_payload = self.subscriber.voice.payload_type().await.ok().flatten();
        let Some(voice_payload) = voice_payload else {
            tracing::warn!("the client accepts no Opus audio from the agent");
            return;
        };
        let face_payload = self.subscriber.face.payload_type().await.ok().flatten();
        let face = face_payload.and_then(|payload_type| {
            let track =
                VideoTrack { track: self.subscriber.face.track.clone(), ssrc: self.subscriber.face.ssrc, payload_type };
            let seed = u64::from(self.subscriber.face.ssrc);
            let agent = &mut self.agent;
            face::start(
                &agent.face_id,
                agent.custom_face.take(),
                track,
                seed,
                agent.recording.clone(),
                agent.load.clone(),
            )
        });
        let voice = VoiceTrack {
            track: self.subscriber.voice.track.clone(),
            ssrc: self.subscriber.voice.ssrc,
            payload_type: voice_payload,
        };
        let sending = tokio::spawn(send_voice(output, voice, self.agent.recording.clone(), face.clone()));
        self.agent_media = Some(AgentMedia { sending, face, keyframe_sent: false });
    }

    /// Shows one engine event in the room.
    async fn show(&mut self, event: &ConversationEvent) {
        for signal in self.room_events.on_event(&event.kind) {
            match signal {
                RoomSignal::AgentState(state) => {
                    if self.room.set_agent_state(state) {
                        let update = proto::ParticipantUpdate { participants: vec![self.room.agent_info()] };
                        self.signal.send(signal_response::Message::Update(update)).await;
                    }
                }
                RoomSignal::Speakers { user, agent } => {
                    let speaker = |sid: &str, active: bool| proto::SpeakerInfo {
                        sid: sid.to_string(),
                        level: if active { 1.0 } else { 0.0 },
                        active,
                    };
                    let speakers = vec![speaker(&self.room.user.sid, user), speaker(&self.room.agent.sid, agent)];
                    let changed = proto::SpeakersChanged { speakers };
                    self.signal.send(signal_response::Message::SpeakersChanged(changed)).await;
                }
                RoomSignal::AgentWords(transcript) => {
                    let now = chrono::Utc::now().timestamp_millis();
                    for packet in self.streams.packets(&self.room.agent, &transcript, now) {
                        let _ = self.words.try_send(packet);
                    }
                }
                RoomSignal::UserWords(transcript) => {
                    let now = chrono::Utc::now().timestamp_millis();
                    for packet in self.streams.packets(&self.room.user, &transcript, now) {
                        let _ = self.words.try_send(packet);
                    }
                }
            }
        }
    }

    /// The client is gone when it stops pinging or its subscriber connection fails or closes.
    fn supervise(&mut self) -> Option<Ending> {
        if self.last_ping.elapsed() > Duration::from_secs(room::PING_TIMEOUT_SECONDS as u64) {
            return Some(Ending::Left("no ping"));
        }
        let state = *self.subscriber.built.state.borrow_and_update();
        if let Some(media) = &mut self.agent_media
            && state == RTCPeerConnectionState::Connected
            && !media.keyframe_sent
        {
            // Frames written before the connection was up were lost: start the picture afresh.
            media.face.iter().for_each(FaceFeed::request_keyframe);
            media.keyframe_sent = true;
        }
        match state {
            RTCPeerConnectionState::Failed => Some(Ending::Left("connection failed")),
            RTCPeerConnectionState::Closed => Some(Ending::Left("connection closed")),
            _ => None,
        }
    }

    /// Stops the agent's media (its sender has drained the engine's output) and closes both connections.
    async fn close(self, conversation_id: &str) {
        if let Some(media) = self.agent_media {
            let _ = media.sending.await;
            if let Some(face) = &media.face {
                let (dropped, keyframe_requests) = (face.dropped(), face.keyframe_requests());
                tracing::info!(%conversation_id, dropped, keyframe_requests, "the face's call is over");
            }
        }
        for connection in [&self.subscriber.built.connection, &self.publisher.built.connection] {
            if let Err(err) = connection.close().await {
                tracing::debug!(%conversation_id, error = %err, "closing a peer connection");
            }
        }
    }
}
