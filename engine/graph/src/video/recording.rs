//! A conversation as a WebM file: the agent's face, rendered from the agent's audio on the media clock,
//! as VP8 at 25 fps, and both voices mixed as Opus (20 ms packets). Video frame `n` is drawn from the
//! audio of `[40n, 40n + 40) ms`, the same samples its two audio packets carry, so the file is in sync
//! by construction. Used by `confab simulate --out DIR` (`DIR/avatar.webm`).

use std::path::Path;

use crate::audio::AudioError;
use crate::audio::opus_egress::{FRAME_16K, OpusEgress};
use crate::avatar::FRAME_SAMPLES;

use crate::avatar::{FaceRig, RgbImage};

pub use super::face_encoder::DEFAULT_FACE;
use super::face_encoder::FaceEncoder;
use super::vp8::{Vp8Config, Vp8Error};
use super::webm::{WebmError, WebmWriter};

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error(transparent)]
    Video(#[from] Vp8Error),
    #[error(transparent)]
    Container(#[from] WebmError),
    #[error(transparent)]
    Audio(#[from] AudioError),
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordingSummary {
    pub video_frames: usize,
    pub audio_packets: usize,
    pub keyframes: usize,
}

/// Writes `path`: the rigged portrait `face` (a stock face or a custom avatar's, at any size) speaking
/// `agent_audio`, with `user_audio` mixed in (both 16 kHz mono, same clock, the longer sets the length).
pub fn write_conversation_webm(
    path: &Path,
    (portrait, rig): (RgbImage, FaceRig),
    agent_audio: &[f32],
    user_audio: &[f32],
) -> Result<RecordingSummary, RecordingError> {
    let config = Vp8Config::default();
    let mut face = FaceEncoder::with_portrait(portrait, rig, config, 1)?;
    let mut opus = OpusEgress::new()?;
    let mut webm = WebmWriter::create(path, Some((config.width, config.height)), 16_000)?;
    let frame = FRAME_SAMPLES as usize;
    let length = agent_audio.len().max(user_audio.len());
    let frames = length.div_ceil(frame);
    let sample = |audio: &[f32], i: usize| audio.get(i).copied().unwrap_or(0.0);
    let (mut agent, mut mixed) = (vec![0.0f32; frame], vec![0.0f32; FRAME_16K]);
    let mut summary = RecordingSummary { video_frames: 0, audio_packets: 0, keyframes: 0 };
    for index in 0..frames {
        let start = index * frame;
        for (offset, value) in agent.iter_mut().enumerate() {
            *value = sample(agent_audio, start + offset);
        }
        let (encoded, _) = face.encode(&agent)?;
        let at_ns = |samples: usize| samples as u64 * 1_000_000_000 / 16_000;
        webm.add_video(at_ns(start), encoded.data, encoded.keyframe)?;
        summary.video_frames += 1;
        summary.keyframes += usize::from(encoded.keyframe);
        for packet_start in (start..start + frame).step_by(FRAME_16K) {
            for (offset, value) in mixed.iter_mut().enumerate() {
                let i = packet_start + offset;
                *value = (sample(agent_audio, i) + sample(user_audio, i)).clamp(-1.0, 1.0);
            }
            webm.add_audio(at_ns(packet_start), opus.encode(&mixed)?)?;
            summary.audio_packets += 1;
        }
    }
    webm.finish()?;
    Ok(summary)
}
