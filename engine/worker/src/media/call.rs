//! One call over WebRTC: the browser's Opus is decoded into the engine's input ring; the engine's output
//! is encoded to Opus and sent on the audio track, and drawn as the agent's face on the video track
//! (`face`; a keyframe as soon as the connection is up); a supervisor ends the call when the participant hangs
//! up, the peer connection closes or fails, or their audio stops for the no-media timeout
//! (`participant_left`, then `call_ended`). The record goes IN_PROGRESS with the first audio packet.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use confab_engine::audio::opus_egress::{FRAME_16K, OpusEgress};
use confab_engine::audio::opus_ingress::{OpusIngress, RtpOpus};
use rtc::media::Sample;
use rtc::rtp_transceiver::PayloadType;
use rtc::rtp_transceiver::rtp_sender::RtpCodecKind;
use tokio::sync::Notify;
use webrtc::media_stream::track_local::static_sample::TrackLocalStaticSample;
use webrtc::media_stream::track_remote::{TrackRemote, TrackRemoteEvent};
use webrtc::peer_connection::RTCPeerConnectionState;

use super::face::{self, FaceFeed, VideoTrack};
use super::peer::Negotiated;
use super::presence::{Connection, Presence};
use super::recording_slot::RecordingSlot;
use crate::call_session::CallSession;
use crate::session_binding::{LiveConversation, LoadCounters};

/// How often the agent's audio is taken from the engine and sent (it arrives in 20 ms frames).
const SEND_INTERVAL: Duration = Duration::from_millis(10);
/// How often the supervisor looks at the connection and the media clock.
const SUPERVISE_INTERVAL: Duration = Duration::from_millis(200);
const FRAME_DURATION: Duration = Duration::from_millis(20);

/// When the participant's audio last arrived, shared by the receiving task and the supervisor.
pub struct MediaClock {
    started: Instant,
    /// Milliseconds since `started` of the last audio packet (0: none yet).
    last_audio_ms: AtomicU64,
}

impl Default for MediaClock {
    fn default() -> MediaClock {
        MediaClock { started: Instant::now(), last_audio_ms: AtomicU64::new(0) }
    }
}

impl MediaClock {
    fn audio_arrived(&self) {
        let ms = self.started.elapsed().as_millis().max(1) as u64;
        self.last_audio_ms.store(ms, Ordering::Relaxed);
    }

    /// How long since the last audio packet (or since the call started, before the first).
    pub fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_audio_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }
}

/// Runs the call to its end.
pub async fn run(
    session: CallSession,
    live: LiveConversation,
    negotiated: Negotiated,
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
        finished,
        ..
    } = live;
    let Negotiated {
        connection,
        audio,
        audio_ssrc,
        audio_payload_type,
        mut remote_tracks,
        mut state,
        video,
        video_ssrc,
        video_payload_type,
        ..
    } = negotiated;
    let face = video_payload_type.and_then(|payload_type| {
        let track = VideoTrack { track: video.clone(), ssrc: video_ssrc, payload_type };
        face::start(&face_id, custom_face, track, u64::from(video_ssrc), recording.clone(), load.clone())
    });
    let shared = Arc::new(MediaClock::default());

    // The browser's microphone into the engine; the record goes IN_PROGRESS with its first packet.
    let (first_packet, marking) = session.in_progress_on_first_media(&conversation_id);
    let receiving = {
        let (shared, recording, conversation_id) = (shared.clone(), recording.clone(), conversation_id.clone());
        tokio::spawn(async move {
            let mut input = Some(input);
            let mut first_packet = Some(first_packet);
            while let Some(track) = remote_tracks.recv().await {
                if track.kind().await != RtpCodecKind::Audio {
                    continue;
                }
                let Some(mut input) = input.take() else { continue };
                let call = ReceivingCall {
                    first_packet: &mut first_packet,
                    recording: &recording,
                    conversation_id: conversation_id.as_str(),
                };
                receive_voice(track, &mut input, &load, &shared, call).await;
                return;
            }
        })
    };
    // The engine's voice to the browser.
    let sending = tokio::spawn(send_voice(
        output,
        VoiceTrack { track: audio, ssrc: audio_ssrc, payload_type: audio_payload_type },
        recording.clone(),
        face.clone(),
    ));
    let mut face_keyframe_sent = false;

    // The supervisor: ends the call on hang-up, a lost connection or silence.
    let no_media_timeout = session.no_media_timeout;
    let mut ticker = tokio::time::interval(SUPERVISE_INTERVAL);
    let mut finished = finished;
    let mut presence = Presence::new(no_media_timeout);
    let supervised_since = Instant::now();
    let ended_by_engine = loop {
        tokio::select! {
            _ = &mut finished => break true,
            _ = hang_up.notified() => {
                tracing::info!(%conversation_id, "hang-up");
                session.hang_up(session_id);
                break false;
            }
            _ = ticker.tick() => {
                let current = *state.borrow_and_update();
                if current == RTCPeerConnectionState::Connected && !face_keyframe_sent {
                    // Frames written before the connection was up were lost: start the picture afresh.
                    face.iter().for_each(FaceFeed::request_keyframe);
                    face_keyframe_sent = true;
                }
                let connection = match current {
                    RTCPeerConnectionState::Disconnected => Connection::Disconnected,
                    RTCPeerConnectionState::Failed => Connection::Failed,
                    RTCPeerConnectionState::Closed => Connection::Closed,
                    _ => Connection::Up,
                };
                let left = presence.check(supervised_since.elapsed(), connection, shared.silent_for());
                if let Some(departure) = left {
                    tracing::info!(%conversation_id, reason = departure.reason(), "the participant left");
                    let participant = if user_id.is_empty() { "user" } else { user_id.as_str() };
                    session.participant_left(session_id, participant);
                    break false;
                }
            }
        }
    };
    if !ended_by_engine {
        let _ = finished.await;
    }
    receiving.abort();
    marking.abort();
    let _ = sending.await;
    if let Some(face) = &face {
        let (dropped, keyframe_requests) = (face.dropped(), face.keyframe_requests());
        tracing::info!(%conversation_id, dropped, keyframe_requests, "the face's call is over");
    }
    drop(face);
    drop(video);
    if let Err(err) = connection.close().await {
        tracing::debug!(%conversation_id, error = %err, "closing the peer connection");
    }
    session.finish();
    tracing::info!(%conversation_id, "call over");
}

/// Where the agent's voice goes: our Opus track and what it was negotiated with.
pub struct VoiceTrack {
    pub track: Arc<TrackLocalStaticSample>,
    pub ssrc: u32,
    pub payload_type: PayloadType,
}

/// Sends the engine's voice: every `SEND_INTERVAL`, each complete 20 ms frame in `output` is recorded,
/// encoded to Opus and written to the track, and offered to the `face` that draws from it. Returns when
/// the engine abandons `output` (and it is drained).
pub async fn send_voice(
    mut output: rtrb::Consumer<f32>,
    voice: VoiceTrack,
    recording: RecordingSlot,
    face: Option<FaceFeed>,
) {
    let Ok(mut encoder) = OpusEgress::new() else { return };
    let mut frame = [0.0f32; FRAME_16K];
    let mut tick = tokio::time::interval(SEND_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        while output.slots() >= FRAME_16K {
            let Ok(chunk) = output.read_chunk(FRAME_16K) else { break };
            let (first, second) = chunk.as_slices();
            frame[..first.len()].copy_from_slice(first);
            frame[first.len()..].copy_from_slice(second);
            chunk.commit_all();
            recording.push_agent(&frame);
            if let Some(face) = &face {
                face.offer(&frame);
            }
            let Ok(packet) = encoder.encode(&frame) else { continue };
            let sample = Sample {
                data: Bytes::copy_from_slice(packet),
                duration: FRAME_DURATION,
                ..Sample::new(Instant::now())
            };
            // Before the connection is up, writes fail: that audio is simply not heard.
            let _ = voice.track.sample_writer(voice.ssrc, voice.payload_type).write_sample(&sample).await;
        }
        if output.is_abandoned() && output.slots() < FRAME_16K {
            return; // the engine ended the session
        }
    }
}

/// The call a received voice belongs to, beside the engine's ring: who hears of its first packet, its
/// recording, its name in the log.
pub struct ReceivingCall<'a> {
    pub first_packet: &'a mut Option<tokio::sync::oneshot::Sender<()>>,
    pub recording: &'a RecordingSlot,
    pub conversation_id: &'a str,
}

/// A track's decoder, which says in the log what the track's packets were once it is over (or dropped with
/// its call).
struct TrackTally<'a> {
    decoder: OpusIngress,
    conversation_id: &'a str,
}

impl Drop for TrackTally<'_> {
    fn drop(&mut self) {
        let counts = self.decoder.counts();
        tracing::info!(
            conversation_id = self.conversation_id,
            decoded = counts.decoded,
            padding = counts.padding,
            stale = counts.stale,
            lost = counts.lost,
            concealed_ms = counts.concealed / 48,
            "the participant's audio track is over (packets decoded; padding-only and stale ones skipped; lost ones concealed)"
        );
    }
}

/// Receives the participant's voice: each Opus packet of `track` is read as RTP carries it (padding and stale
/// packets skipped, lost ones concealed: `OpusIngress`), decoded (to 16 kHz), recorded and
/// written to `input`, the engine's ring (what does not fit is dropped: counted in `overflows` packet by
/// packet, said in the log when it first happens, with how far into the call, and in total when the track
/// ends). `first_packet` fires with the first packet (and is taken); `conversation_id` names the call in the
/// log. Returns when the track ends or the engine abandons `input`; a participant who publishes another
/// track is heard on the same ring.
pub async fn receive_voice(
    track: Arc<dyn TrackRemote>,
    input: &mut rtrb::Producer<f32>,
    load: &LoadCounters,
    clock: &MediaClock,
    call: ReceivingCall<'_>,
) {
    let ReceivingCall { first_packet, recording, conversation_id } = call;
    let Ok(decoder) = OpusIngress::new() else { return };
    let mut tally = TrackTally { decoder, conversation_id };
    let mut dropped = 0u64;
    let receiving_since = Instant::now();
    let mut received = 0u64;
    while let Some(event) = track.poll().await {
        let TrackRemoteEvent::OnRtpPacket(packet) = event else {
            if matches!(event, TrackRemoteEvent::OnEnded) {
                break;
            }
            continue;
        };
        clock.audio_arrived();
        if let Some(first_packet) = first_packet.take() {
            let _ = first_packet.send(());
        }
        let rtp = RtpOpus {
            sequence: packet.header.sequence_number,
            timestamp: packet.header.timestamp,
            payload: &packet.payload,
        };
        let Ok(samples) = tally.decoder.receive(rtp) else { continue };
        recording.push_user(samples);
        received += samples.len() as u64;
        let Ok(chunk) = input.write_chunk_uninit(samples.len().min(input.slots())) else { continue };
        let written = chunk.fill_from_iter(samples.iter().copied());
        let missed = samples.len() - written;
        if missed > 0 {
            if dropped == 0 {
                tracing::warn!(
                    conversation_id,
                    after_s = receiving_since.elapsed().as_secs_f64(),
                    received_s = received as f64 / 16_000.0,
                    abandoned = input.is_abandoned(),
                    "user audio dropped: the engine's input ring was full (the call's audio came faster than it was heard)"
                );
            }
            dropped += missed as u64;
            load.input_overflow();
        }
        if input.is_abandoned() {
            break;
        }
    }
    if dropped > 0 {
        tracing::warn!(
            conversation_id,
            dropped,
            "the call lost samples (16 kHz) of the user's audio to a full input ring"
        );
    }
}
