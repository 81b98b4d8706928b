//! A call's recording: a WebM file of the agent's face (VP8, when the call has one) and both voices
//! mixed (Opus, 20 ms packets, 16 kHz mono input). The agent's frames set the pace (one every 20 ms
//! while the call lasts); the user's audio waits in a short queue and is mixed into the agent frame that
//! follows it, so the two sides stay aligned to within a frame or two of network jitter. Video frame `n`
//! (from the face thread, drawn from agent frames `2n` and `2n + 1`) is stamped `40n` ms; audio packets
//! wait (at most `AUDIO_WAITING`) for the video frame of their time so that the file's timestamps only
//! increase; a video frame later than the audio already written is dropped. The file is finished (cues
//! and duration written) when the call ends.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use confab_engine::audio::AudioError;
use confab_engine::audio::opus_egress::{FRAME_16K, OpusEgress};
use confab_engine::video::webm::{WebmError, WebmWriter};

/// The recording's audio input rate (the engine's).
pub const RECORDING_RATE: u32 = 16_000;
/// User audio waiting for the agent's next frame (1 s). Full: the oldest is dropped (a stalled agent side).
const USER_BACKLOG: usize = 16_000;
/// Audio packets waiting for their video frame (1 s). Full: the oldest is written, and a video frame
/// older than it will be dropped.
const AUDIO_WAITING: usize = 50;
const AUDIO_PACKET_NS: u64 = 20_000_000;
const VIDEO_FRAME_NS: u64 = 40_000_000;

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error(transparent)]
    Container(#[from] WebmError),
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error("cannot create the recordings directory: {0}")]
    Directory(#[from] std::io::Error),
}

pub struct Recorder {
    path: PathBuf,
    webm: WebmWriter,
    opus: OpusEgress,
    has_video: bool,
    user: VecDeque<f32>,
    mixed: [f32; FRAME_16K],
    agent_frames: u64,
    waiting: VecDeque<(u64, Vec<u8>)>,
    /// Packet buffers written out, reused for the next packets (no allocation per frame).
    spare: Vec<Vec<u8>>,
    written_until: u64,
    pub dropped_video_frames: u64,
}

impl Recorder {
    /// Creates the file (and its directory); `video` = the face's (width, height) when the call has one.
    pub fn create(path: &Path, video: Option<(u32, u32)>) -> Result<Recorder, RecordingError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        Ok(Recorder {
            path: path.to_path_buf(),
            webm: WebmWriter::create(path, video, RECORDING_RATE)?,
            opus: OpusEgress::new()?,
            has_video: video.is_some(),
            user: VecDeque::with_capacity(USER_BACKLOG),
            mixed: [0.0; FRAME_16K],
            agent_frames: 0,
            waiting: VecDeque::with_capacity(AUDIO_WAITING + 1),
            spare: Vec::with_capacity(AUDIO_WAITING + 1),
            written_until: 0,
            dropped_video_frames: 0,
        })
    }

    /// The user's audio as it arrives (16 kHz).
    pub fn push_user(&mut self, samples: &[f32]) {
        let overflow = (self.user.len() + samples.len()).saturating_sub(USER_BACKLOG);
        self.user.drain(..overflow.min(self.user.len()));
        self.user.extend(samples.iter().skip(samples.len().saturating_sub(USER_BACKLOG)));
    }

    /// One 20 ms frame of the agent's audio, mixed with the user's audio that arrived before it.
    pub fn push_agent(&mut self, frame: &[f32]) -> Result<(), RecordingError> {
        for (mixed, &agent) in self.mixed.iter_mut().zip(frame) {
            *mixed = (agent + self.user.pop_front().unwrap_or(0.0)).clamp(-1.0, 1.0);
        }
        let at = self.agent_frames * AUDIO_PACKET_NS;
        self.agent_frames += 1;
        let encoded = self.opus.encode(&self.mixed)?;
        if !self.has_video {
            self.webm.add_audio(at, encoded)?;
            self.written_until = at;
            return Ok(());
        }
        let mut packet = self.spare.pop().unwrap_or_default();
        packet.clear();
        packet.extend_from_slice(encoded);
        self.waiting.push_back((at, packet));
        while self.waiting.len() > AUDIO_WAITING {
            self.write_oldest_audio()?;
        }
        Ok(())
    }

    /// Video frame `index` of the face (40 ms each, from the start of the agent's audio).
    pub fn push_video(&mut self, index: u64, frame: &[u8], keyframe: bool) -> Result<(), RecordingError> {
        let at = index * VIDEO_FRAME_NS;
        if at < self.written_until || !self.has_video {
            self.dropped_video_frames += 1;
            return Ok(());
        }
        while self.waiting.front().is_some_and(|(audio_at, _)| *audio_at <= at) {
            self.write_oldest_audio()?;
        }
        self.webm.add_video(at, frame, keyframe)?;
        self.written_until = at;
        Ok(())
    }

    /// Writes the oldest waiting audio packet and keeps its buffer for reuse.
    fn write_oldest_audio(&mut self) -> Result<(), RecordingError> {
        let Some((at, packet)) = self.waiting.pop_front() else { return Ok(()) };
        self.webm.add_audio(at, &packet)?;
        self.written_until = self.written_until.max(at);
        self.spare.push(packet);
        Ok(())
    }

    /// Completes the file; returns its path.
    pub fn finish(mut self) -> Result<PathBuf, RecordingError> {
        while !self.waiting.is_empty() {
            self.write_oldest_audio()?;
        }
        self.webm.finish()?;
        Ok(self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(path: &Path) -> String {
        let output = std::process::Command::new("ffprobe")
            .args(["-v", "error", "-count_packets", "-of", "csv=p=0", "-show_entries"])
            .arg("stream=codec_name,nb_read_packets")
            .arg(path)
            .output()
            .expect("ffprobe is installed (scripts/setup.sh)");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    #[test]
    fn audio_only_calls_record_both_sides_as_opus() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls").join("c.webm");
        let mut recorder = Recorder::create(&path, None).unwrap();
        recorder.push_user(&[0.25; 480]);
        for _ in 0..10 {
            recorder.push_agent(&[0.1; 320]).unwrap();
        }
        assert_eq!(recorder.finish().unwrap(), path);
        assert_eq!(probe(&path).trim(), "opus,10");
    }

    #[test]
    fn face_frames_interleave_with_the_voices_and_late_ones_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.webm");
        let mut recorder = Recorder::create(&path, Some((64, 64))).unwrap();
        let mut encoder = confab_engine::video::vp8::Vp8Encoder::new(confab_engine::video::vp8::Vp8Config {
            width: 64,
            height: 64,
            ..Default::default()
        })
        .unwrap();
        for index in 0..10u64 {
            recorder.push_agent(&[0.1; 320]).unwrap();
            recorder.push_agent(&[0.1; 320]).unwrap();
            let frame = encoder.encode().unwrap();
            recorder.push_video(index, frame.data, frame.keyframe).unwrap();
        }
        let frame = encoder.encode().unwrap();
        recorder.push_video(3, frame.data, frame.keyframe).unwrap(); // late: its time is written
        assert_eq!(recorder.dropped_video_frames, 1);
        recorder.finish().unwrap();
        assert_eq!(probe(&path).trim().lines().collect::<Vec<_>>(), ["vp8,10", "opus,20"]);
    }

    #[test]
    fn a_stalled_agent_side_keeps_only_the_last_second_of_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let mut recorder = Recorder::create(&dir.path().join("c.webm"), None).unwrap();
        recorder.push_user(&vec![0.1; USER_BACKLOG]);
        recorder.push_user(&[0.2; 100]);
        assert_eq!(recorder.user.len(), USER_BACKLOG);
        assert_eq!(recorder.user.back(), Some(&0.2));
        assert_eq!(recorder.user.front(), Some(&0.1));
    }
}
