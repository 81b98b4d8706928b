//! Resampling to the engine's 16 kHz with rubato's synchronous FFT resampler: whole clips for files, and
//! a streaming form with fixed input chunks (e.g. 20 ms at 48 kHz) whose buffers are allocated once (also
//! between other rates: the noise suppressor's 16 → 48 → 16 kHz).

use audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

use super::AudioError;
use crate::time::SAMPLE_RATE;

fn err(e: impl std::fmt::Display) -> AudioError {
    AudioError::Resample(e.to_string())
}

/// Resamples a whole mono clip from `rate` to 16 kHz (the resampler's delay trimmed).
pub fn clip_to_16k(samples: &[f32], rate: u32) -> Result<Vec<f32>, AudioError> {
    if rate == SAMPLE_RATE {
        return Ok(samples.to_vec());
    }
    if samples.is_empty() {
        return Ok(Vec::new());
    }
    let mut resampler = Fft::<f32>::new(rate as usize, SAMPLE_RATE as usize, 1024, 1, FixedSync::Input).map_err(err)?;
    let needed = resampler.process_all_needed_output_len(samples.len());
    let mut output = vec![0.0f32; needed];
    let input = InterleavedSlice::new(samples, 1, samples.len()).map_err(err)?;
    let mut output_adapter = InterleavedSlice::new_mut(&mut output, 1, needed).map_err(err)?;
    let (_, produced) =
        resampler.process_all_into_buffer(&input, &mut output_adapter, samples.len(), None).map_err(err)?;
    output.truncate(produced);
    Ok(output)
}

/// Streaming mono resampler to 16 kHz for fixed-size input chunks.
pub struct StreamResampler {
    resampler: Option<Fft<f32>>,
    chunk_in: usize,
    output: Vec<f32>,
}

impl StreamResampler {
    /// `chunk_in` input samples per call at `rate` (must give a whole number of 16 kHz samples).
    pub fn new(rate: u32, chunk_in: usize) -> Result<StreamResampler, AudioError> {
        StreamResampler::between(rate, SAMPLE_RATE, chunk_in)
    }

    /// `chunk_in` input samples per call at `from`, resampled to `to` (a whole number of samples each call).
    pub fn between(from: u32, to: u32, chunk_in: usize) -> Result<StreamResampler, AudioError> {
        let resampler = if from == to {
            None
        } else {
            Some(Fft::<f32>::new(from as usize, to as usize, chunk_in, 1, FixedSync::Both).map_err(err)?)
        };
        let max_out = resampler.as_ref().map(|r| r.output_frames_max()).unwrap_or(chunk_in);
        Ok(StreamResampler { resampler, chunk_in, output: vec![0.0; max_out] })
    }

    /// How many output samples the resampler's filter delays its input by (0 when it passes through).
    pub fn delay(&self) -> usize {
        self.resampler.as_ref().map_or(0, |r| r.output_delay())
    }

    /// Resamples one chunk; returns the 16 kHz samples (valid until the next call).
    pub fn process(&mut self, chunk: &[f32]) -> Result<&[f32], AudioError> {
        if chunk.len() != self.chunk_in {
            return Err(AudioError::Resample(format!("expected {} input samples, got {}", self.chunk_in, chunk.len())));
        }
        let Some(resampler) = self.resampler.as_mut() else {
            self.output[..chunk.len()].copy_from_slice(chunk);
            return Ok(&self.output[..chunk.len()]);
        };
        let input = InterleavedSlice::new(chunk, 1, chunk.len()).map_err(err)?;
        let capacity = self.output.len();
        let mut output = InterleavedSlice::new_mut(&mut self.output, 1, capacity).map_err(err)?;
        let (_, produced) = resampler.process_into_buffer(&input, &mut output, None).map_err(err)?;
        Ok(&self.output[..produced])
    }
}

/// Resamples a clip that arrives in pieces of any length (a voice decoding a sentence piece by piece) to
/// 16 kHz as the pieces come: the filter's delay trimmed at the start, flushed by `finish`, the whole as
/// long as `clip_to_16k` makes it.
pub struct PieceResampler {
    stream: StreamResampler,
    rate: u32,
    chunk: usize,
    pending: Vec<f32>,
    /// Output samples still to drop (the filter's delay).
    to_skip: usize,
    taken: usize,
    given: usize,
}

impl PieceResampler {
    /// A clip at `rate`, which must be a multiple of 50 Hz (20 ms chunks).
    pub fn new(rate: u32) -> Result<PieceResampler, AudioError> {
        if rate == 0 || rate % 50 != 0 {
            return Err(AudioError::Resample(format!("cannot resample {rate} Hz in 20 ms chunks")));
        }
        let chunk = (rate / 50) as usize;
        let stream = StreamResampler::new(rate, chunk)?;
        let to_skip = stream.delay();
        Ok(PieceResampler { stream, rate, chunk, pending: Vec::with_capacity(chunk * 2), to_skip, taken: 0, given: 0 })
    }

    /// The 16 kHz audio `piece` completes (possibly none yet).
    pub fn push(&mut self, piece: &[f32]) -> Result<Vec<f32>, AudioError> {
        self.pending.extend_from_slice(piece);
        self.taken += piece.len();
        let out = self.resample_whole_chunks()?;
        self.given += out.len();
        Ok(out)
    }

    /// The rest of the clip's audio, once its last piece has been pushed: the filter flushed with
    /// silence, cut to the clip's length at 16 kHz.
    pub fn finish(mut self) -> Result<Vec<f32>, AudioError> {
        let wanted = (self.taken as u64 * SAMPLE_RATE as u64).div_ceil(self.rate as u64) as usize;
        let mut out = Vec::new();
        while self.given + out.len() < wanted {
            let missing = self.chunk - self.pending.len() % self.chunk;
            self.pending.resize(self.pending.len() + missing, 0.0);
            out.extend(self.resample_whole_chunks()?);
        }
        out.truncate(wanted - self.given);
        Ok(out)
    }

    /// Resamples the whole chunks pending, dropping what is left of the filter's delay.
    fn resample_whole_chunks(&mut self) -> Result<Vec<f32>, AudioError> {
        let mut out = Vec::with_capacity(self.pending.len() * SAMPLE_RATE as usize / self.rate as usize + 1);
        let mut at = 0;
        while self.pending.len() - at >= self.chunk {
            let resampled = self.stream.process(&self.pending[at..at + self.chunk])?;
            let skipped = self.to_skip.min(resampled.len());
            out.extend_from_slice(&resampled[skipped..]);
            self.to_skip -= skipped;
            at += self.chunk;
        }
        self.pending.drain(..at);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f32, seconds: f32) -> Vec<f32> {
        (0..(rate as f32 * seconds) as usize)
            .map(|i| (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin() * 0.5)
            .collect()
    }

    #[test]
    fn a_clip_resampled_in_pieces_matches_the_whole() {
        let clip = tone(22_050, 440.0, 1.3);
        let whole = clip_to_16k(&clip, 22_050).unwrap();
        let mut pieces = PieceResampler::new(22_050).unwrap();
        let mut out = Vec::new();
        for piece in [&clip[..4_096], &clip[4_096..4_100], &clip[4_100..20_000], &clip[20_000..]] {
            out.extend(pieces.push(piece).unwrap());
        }
        out.extend(pieces.finish().unwrap());
        assert_eq!(out.len(), whole.len());
        // The same tone, in time: no delay and no gap (a different filter length, so not the same samples).
        let worst = out[400..out.len() - 400].iter().zip(&whole[400..]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(worst < 0.01, "{worst}");
    }

    #[test]
    fn clip_keeps_duration_and_pitch() {
        let out = clip_to_16k(&tone(48_000, 440.0, 1.0), 48_000).unwrap();
        assert!((out.len() as i64 - 16_000).abs() <= 2, "{}", out.len());
        // Zero crossings of a 440 Hz tone over one second: about 880.
        let crossings = out.windows(2).filter(|w| (w[0] < 0.0) != (w[1] < 0.0)).count();
        assert!((870..=890).contains(&crossings), "{crossings}");
    }

    #[test]
    fn streaming_48k_chunks_give_320_samples_each() {
        let mut r = StreamResampler::new(48_000, 960).unwrap();
        let input = tone(48_000, 300.0, 0.2);
        let mut total = 0;
        for chunk in input.chunks_exact(960) {
            let out = r.process(chunk).unwrap();
            assert_eq!(out.len(), 320);
            total += out.len();
        }
        assert_eq!(total, 3200);
        assert!(r.process(&input[..100]).is_err());
    }
}
