//! A call's recording: both sides mixed into one 16 kHz mono 16-bit WAV file. The agent's frames set the
//! pace (one every 20 ms while the call lasts); the user's audio waits in a short queue and is mixed into
//! the agent frame that follows it, so the two sides stay aligned to within a frame or two of network
//! jitter. The file is finished (its header completed) when the call ends.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use confab_engine::audio::pcm::to_i16;

/// The recording's sample rate (the engine's).
pub const RECORDING_RATE: u32 = 16_000;
/// User audio waiting for the agent's next frame (1 s). Full: the oldest is dropped (a stalled agent side).
const USER_BACKLOG: usize = 16_000;

pub struct Recorder {
    path: PathBuf,
    writer: hound::WavWriter<BufWriter<File>>,
    user: VecDeque<f32>,
}

impl Recorder {
    /// Creates the file (and its directory).
    pub fn create(path: &Path) -> Result<Recorder, hound::Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: RECORDING_RATE,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        Ok(Recorder {
            path: path.to_path_buf(),
            writer: hound::WavWriter::create(path, spec)?,
            user: VecDeque::with_capacity(USER_BACKLOG),
        })
    }

    /// The user's audio as it arrives (16 kHz).
    pub fn push_user(&mut self, samples: &[f32]) {
        let overflow = (self.user.len() + samples.len()).saturating_sub(USER_BACKLOG);
        self.user.drain(..overflow.min(self.user.len()));
        self.user.extend(samples.iter().skip(samples.len().saturating_sub(USER_BACKLOG)));
    }

    /// One frame of the agent's audio, mixed with the user's audio that arrived before it.
    pub fn push_agent(&mut self, frame: &[f32]) -> Result<(), hound::Error> {
        for &agent in frame {
            let user = self.user.pop_front().unwrap_or(0.0);
            self.writer.write_sample(to_i16(agent + user))?;
        }
        Ok(())
    }

    /// Completes the file; returns its path.
    pub fn finish(self) -> Result<PathBuf, hound::Error> {
        self.writer.finalize()?;
        Ok(self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_are_mixed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls").join("c.wav");
        let mut recorder = Recorder::create(&path).unwrap();
        recorder.push_user(&[0.25; 480]);
        recorder.push_agent(&[0.5; 320]).unwrap();
        recorder.push_agent(&[0.0; 320]).unwrap();
        assert_eq!(recorder.finish().unwrap(), path);
        let mut reader = hound::WavReader::open(&path).unwrap();
        assert_eq!(reader.spec().sample_rate, RECORDING_RATE);
        let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
        assert_eq!(samples.len(), 640);
        assert_eq!(samples[0], to_i16(0.75));
        assert_eq!(samples[400], to_i16(0.25));
        assert_eq!(samples[500], 0);
    }

    #[test]
    fn a_stalled_agent_side_keeps_only_the_last_second_of_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let mut recorder = Recorder::create(&dir.path().join("c.wav")).unwrap();
        recorder.push_user(&vec![0.1; USER_BACKLOG]);
        recorder.push_user(&[0.2; 100]);
        assert_eq!(recorder.user.len(), USER_BACKLOG);
        assert_eq!(recorder.user.back(), Some(&0.2));
        assert_eq!(recorder.user.front(), Some(&0.1));
    }
}
