//! The agent's face on a live call. A thread per call (`confab-face`) takes the agent's audio exactly as
//! the voice sender sends it, 20 ms at a time, and for every 40 ms renders the avatar's frame from those
//! samples (`confab_engine::avatar`), converts the redrawn regions to I420 and encodes VP8; a task writes
//! each frame to the video track (RTP timestamps advance 40 ms a frame); the browser's keyframe requests
//! (PLI/FIR, forwarded by `keyframe_requests`) make the next frame a keyframe. The face is therefore clocked by
//! the voice sender: no separate timer, and the frame carries the audio it was drawn from. The thread runs
//! at a lower priority than the audio path (`confab_engine::video::priority`).
//!
//! Under load the face gives way before the voice: once half its audio queue waits (160 ms behind), every
//! other frame is held still instead of drawn (`LoadPacer`), and the call says so once in the log.
//! Queues: audio to the face thread, 16 frames (320 ms); full means the thread is behind: the audio frame
//! is dropped for the face (not for the voice) and counted (`FaceFeed::dropped`). The frames are numbered,
//! so the thread sees the gap where audio was dropped and codes the frames it would have drawn as still
//! pictures in their place (`FaceEncoder::encode_still`, a fraction of a drawn frame's cost): the face
//! stays on its voice's timeline, a frame every 40 ms, live and in the recording. Encoded frames to the
//! writer, 8; full: the face thread waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use confab_engine::audio::opus_egress::FRAME_16K;
use confab_engine::avatar::{FRAME_SAMPLES, FaceRig, RgbImage};
use confab_engine::video::face_encoder::FaceEncoder;
use confab_engine::video::vp8::Vp8Config;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use rtc::media::Sample;
use rtc::rtp_transceiver::PayloadType;
use tokio::sync::mpsc;
use webrtc::media_stream::track_local::static_sample::TrackLocalStaticSample;
use webrtc::media_stream::track_local::{TrackLocal, TrackLocalEvent};

use super::keyframe_requests::is_keyframe_request;
use super::recording_slot::RecordingSlot;
use crate::session_binding::LoadCounters;

const AUDIO_QUEUE: usize = 16;
const ENCODED_QUEUE: usize = 8;
const FRAME_DURATION: Duration = Duration::from_millis(40);

#[allow(clippy::large_enum_variant)] // inline on purpose: the queue's slots are allocated once, no box per frame
enum FaceInput {
    /// The voice's 20 ms frame number `n` (counted from 0 by the feed, dropped ones included).
    Audio(u64, [f32; FRAME_16K]),
    Keyframe,
}

/// The voice sender's end: offer each 20 ms of the agent's audio as it is sent.
#[derive(Clone)]
pub struct FaceFeed {
    input: Sender<FaceInput>,
    dropped: Arc<AtomicU64>,
    /// Audio frames offered so far: the next one's number.
    offered: Arc<AtomicU64>,
    keyframe_requests: Arc<AtomicU64>,
}

impl FaceFeed {
    /// The face draws from this audio (never waits; a full queue drops the frame and counts it).
    pub fn offer(&self, frame: &[f32]) {
        let mut audio = [0.0; FRAME_16K];
        audio.copy_from_slice(&frame[..FRAME_16K]);
        let number = self.offered.fetch_add(1, Ordering::Relaxed);
        if let Err(TrySendError::Full(_)) = self.input.try_send(FaceInput::Audio(number, audio)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The next frame is a keyframe (the connection came up, or the viewer asked for one).
    pub fn request_keyframe(&self) {
        let _ = self.input.try_send(FaceInput::Keyframe);
    }

    /// Keyframe requests (PLI/FIR) the browser sent.
    pub fn keyframe_requests(&self) -> u64 {
        self.keyframe_requests.load(Ordering::Relaxed)
    }

    /// Audio frames the face thread could not keep up with.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Where the frames go: our VP8 track and what it was negotiated with.
pub struct VideoTrack {
    pub track: Arc<TrackLocalStaticSample>,
    pub ssrc: u32,
    pub payload_type: PayloadType,
}

/// Starts the face: `custom` (a custom avatar's rigged portrait) when given, else the stock face
/// `face_id` (an unknown id is drawn as `DEFAULT_FACE`). Returns the feed; the thread and the writer end when every feed is dropped.
/// Each encoded frame is also handed to `recording` (a no-op when the call is not recorded); frames held
/// still under load are counted in `load`.
pub fn start(
    face_id: &str,
    custom: Option<(RgbImage, FaceRig)>,
    video: VideoTrack,
    seed: u64,
    recording: RecordingSlot,
    load: LoadCounters,
) -> Option<FaceFeed> {
    let encoder = match custom {
        Some((portrait, rig)) => FaceEncoder::with_portrait(portrait, rig, Vp8Config::default(), seed),
        None => FaceEncoder::new(face_id, Vp8Config::default(), seed),
    };
    let face = match encoder {
        Ok(face) => face,
        Err(err) => {
            tracing::error!(error = %err, "the VP8 encoder cannot start; the call has no face");
            return None;
        }
    };
    let (input, audio) = bounded(AUDIO_QUEUE);
    let (encoded_tx, encoded) = mpsc::channel(ENCODED_QUEUE);
    let span = tracing::Span::current(); // the call's, for the face thread's log lines
    std::thread::Builder::new()
        .name("confab-face".into())
        .spawn(move || {
            let _call = span.enter();
            if let Err(err) = confab_engine::priority::lower_for_video() {
                tracing::debug!(error = %err, "the face thread keeps the process's priority");
            }
            run(face, audio, encoded_tx, (recording, load))
        })
        .ok()?;
    let feed = FaceFeed { input, dropped: Arc::default(), offered: Arc::default(), keyframe_requests: Arc::default() };
    tokio::spawn(forward_keyframe_requests(video.track.clone(), feed.clone()));
    tokio::spawn(write_frames(encoded, video));
    Some(feed)
}

/// Each PLI/FIR the browser sends about the face (see `keyframe_requests`) makes the next frame a
/// keyframe. Ends when the track is unbound.
async fn forward_keyframe_requests(track: Arc<TrackLocalStaticSample>, feed: FaceFeed) {
    while let Some(event) = track.poll().await {
        let TrackLocalEvent::OnRtcpPacket(packets) = event else { continue };
        if packets.iter().any(|packet| is_keyframe_request(packet.as_ref())) {
            feed.keyframe_requests.fetch_add(1, Ordering::Relaxed);
            feed.request_keyframe();
        }
    }
}

/// The face thread: a frame for every 40 ms of the voice, drawn from its audio, or held still where
/// that audio was dropped (the frames missing from the numbers received, in their place) or where the
/// thread is behind (`LoadPacer`).
fn run(
    mut face: FaceEncoder,
    input: Receiver<FaceInput>,
    encoded: mpsc::Sender<(Bytes, bool)>,
    (recording, load): (RecordingSlot, LoadCounters),
) {
    let mut frames = FrameAssembler::default();
    let mut pacer = LoadPacer::default();
    let mut said_behind = false;
    let mut expected = 0u64;
    for message in input.iter() {
        let (number, samples) = match message {
            FaceInput::Keyframe => {
                face.request_keyframe();
                continue;
            }
            FaceInput::Audio(number, samples) => (number, samples),
        };
        let missed = (expected..number).map(|_| None);
        expected = number + 1;
        for audio in missed.chain(std::iter::once(Some(&samples))) {
            let Some(ready) = frames.push(audio) else { continue };
            let ready = pacer.pace(ready, input.len());
            if ready == Ready::Still {
                load.face_frame_held();
                if !std::mem::replace(&mut said_behind, true) {
                    tracing::warn!(
                        waiting_ms = input.len() * 20,
                        "the face fell behind its voice (the host is short of CPU): its frames are held still at times, the voice is unaffected"
                    );
                }
            }
            if !send_frame(&mut face, ready, &frames.audio, &encoded, &recording) {
                return;
            }
        }
    }
}

/// Encodes the next frame (drawn from `audio`, or still) for the recording and the writer; false when
/// the writer is gone.
fn send_frame(
    face: &mut FaceEncoder,
    ready: Ready,
    audio: &[f32],
    encoded: &mpsc::Sender<(Bytes, bool)>,
    recording: &RecordingSlot,
) -> bool {
    let index = face.frames();
    let frame = match ready {
        Ready::Drawn => face.encode(audio).map(|(frame, _)| frame),
        Ready::Still => face.encode_still(),
    };
    match frame {
        Ok(frame) => {
            recording.push_video(index, frame.data, frame.keyframe);
            encoded.blocking_send((Bytes::copy_from_slice(frame.data), frame.keyframe)).is_ok()
        }
        Err(err) => {
            tracing::warn!(error = %err, "a video frame failed to encode");
            true
        }
    }
}

/// A video frame's worth of the voice is complete: draw it, or (none of its audio arrived) hold still.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ready {
    Drawn,
    Still,
}

/// The face's frame rate under load: while at least half the audio queue waits (the thread is 160 ms or
/// more behind its voice), every other frame that would be drawn is held still instead, a fraction of a
/// drawn frame's cost, so the thread catches up before its queue fills and drops the voice's frames.
#[derive(Default)]
struct LoadPacer {
    held_last: bool,
}

impl LoadPacer {
    /// What to do with a `ready` frame while `waiting` audio frames queue behind it.
    fn pace(&mut self, ready: Ready, waiting: usize) -> Ready {
        let hold = ready == Ready::Drawn && waiting >= AUDIO_QUEUE / 2 && !self.held_last;
        self.held_last = hold;
        if hold { Ready::Still } else { ready }
    }
}

/// Gathers the voice's 20 ms frames into the 40 ms a video frame is drawn from; a dropped audio frame
/// counts as silence in its place.
struct FrameAssembler {
    audio: Vec<f32>,
    filled: usize,
    heard: bool,
}

impl Default for FrameAssembler {
    fn default() -> Self {
        FrameAssembler { audio: vec![0.0; FRAME_SAMPLES as usize], filled: 0, heard: false }
    }
}

impl FrameAssembler {
    /// Adds the next 20 ms (`None`: dropped); `Some` when a video frame's audio is complete (in `audio`).
    fn push(&mut self, samples: Option<&[f32; FRAME_16K]>) -> Option<Ready> {
        let slot = &mut self.audio[self.filled..self.filled + FRAME_16K];
        match samples {
            Some(samples) => slot.copy_from_slice(samples),
            None => slot.fill(0.0),
        }
        self.heard |= samples.is_some();
        self.filled += FRAME_16K;
        if self.filled < self.audio.len() {
            return None;
        }
        self.filled = 0;
        Some(if std::mem::take(&mut self.heard) { Ready::Drawn } else { Ready::Still })
    }
}

async fn write_frames(mut encoded: mpsc::Receiver<(Bytes, bool)>, video: VideoTrack) {
    while let Some((data, _keyframe)) = encoded.recv().await {
        let sample = Sample { data, duration: FRAME_DURATION, ..Sample::new(Instant::now()) };
        // Before the connection is up, writes fail: the keyframe sent on connection makes up for it.
        let _ = video.track.sample_writer(video.ssrc, video.payload_type).write_sample(&sample).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_face_behind_its_voice_holds_every_other_frame() {
        use Ready::{Drawn, Still};
        let mut pacer = LoadPacer::default();
        let waiting = [0, 7, 8, 8, 8, 12, 3, 9];
        let paced: Vec<Ready> = waiting.iter().map(|&w| pacer.pace(Drawn, w)).collect();
        assert_eq!(paced, [Drawn, Drawn, Still, Drawn, Still, Drawn, Drawn, Still]);
        assert_eq!(pacer.pace(Still, 16), Still, "a frame with no audio stays still");
    }

    #[test]
    fn dropped_audio_becomes_still_frames_on_the_voices_timeline() {
        let voice = [0.5; FRAME_16K];
        let mut frames = FrameAssembler::default();
        let pushed: Vec<Option<Ready>> = [Some(&voice), None, None, None, Some(&voice), Some(&voice)]
            .into_iter()
            .map(|samples| frames.push(samples))
            .collect();
        // 40 ms half heard is drawn (its missing half silent), 40 ms unheard is still, then drawn again.
        assert_eq!(pushed, [None, Some(Ready::Drawn), None, Some(Ready::Still), None, Some(Ready::Drawn)]);
        assert!(frames.audio.iter().all(|&s| s == 0.5));
    }
}
