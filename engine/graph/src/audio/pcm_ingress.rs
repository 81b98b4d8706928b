//! PCM ingress for streams: interleaved 16-bit or float audio at any accepted rate and channel count,
//! in pieces of any length, out as mono 16 kHz. Input is gathered into fixed chunks (about 20 ms, a whole
//! number of the rate ratio's units) for the resampler; every buffer is allocated when the format is set.

use super::resample::StreamResampler;
use super::{AudioError, check_format, pcm};
use crate::time::SAMPLE_RATE;

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Input samples per resampler chunk: at least 20 ms, and a multiple of `rate / gcd(rate, 16 kHz)` so each
/// chunk gives a whole number of 16 kHz samples.
pub fn chunk_for(rate: u32) -> usize {
    let unit = (rate / gcd(rate, SAMPLE_RATE)) as usize;
    let twenty_ms = (rate / 50) as usize;
    twenty_ms.div_ceil(unit) * unit
}

pub struct PcmIngress {
    channels: usize,
    mono: Vec<f32>,
    pending: Vec<f32>,
    chunk: usize,
    resampler: StreamResampler,
    out: Vec<f32>,
}

impl PcmIngress {
    pub fn new(rate: u32, channels: u16) -> Result<PcmIngress, AudioError> {
        check_format(rate, channels)?;
        let chunk = chunk_for(rate);
        Ok(PcmIngress {
            channels: usize::from(channels),
            mono: vec![0.0; chunk * 4],
            pending: Vec::with_capacity(chunk * 2),
            chunk,
            resampler: StreamResampler::new(rate, chunk)?,
            out: Vec::with_capacity(SAMPLE_RATE as usize / 10),
        })
    }

    /// Interleaved 16-bit samples; returns the 16 kHz audio completed by them (valid until the next call).
    pub fn push_i16(&mut self, interleaved: &[i16]) -> Result<&[f32], AudioError> {
        self.out.clear();
        for piece in interleaved.chunks(self.mono.len() * self.channels) {
            let frames = pcm::downmix_i16(piece, self.channels, &mut self.mono);
            self.absorb(frames)?;
        }
        Ok(&self.out)
    }

    /// Interleaved float samples; returns the 16 kHz audio completed by them (valid until the next call).
    pub fn push_f32(&mut self, interleaved: &[f32]) -> Result<&[f32], AudioError> {
        self.out.clear();
        for piece in interleaved.chunks(self.mono.len() * self.channels) {
            let frames = pcm::downmix_f32(piece, self.channels, &mut self.mono);
            self.absorb(frames)?;
        }
        Ok(&self.out)
    }

    fn absorb(&mut self, frames: usize) -> Result<(), AudioError> {
        let mut taken = 0;
        while taken < frames {
            let n = (self.chunk - self.pending.len()).min(frames - taken);
            self.pending.extend_from_slice(&self.mono[taken..taken + n]);
            taken += n;
            if self.pending.len() == self.chunk {
                let resampled = self.resampler.process(&self.pending)?;
                self.out.extend_from_slice(resampled);
                self.pending.clear();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_give_whole_16k_samples() {
        for rate in [8_000u32, 11_025, 16_000, 22_050, 24_000, 44_100, 48_000, 96_000, 192_000] {
            let chunk = chunk_for(rate) as u64;
            assert_eq!(chunk * u64::from(SAMPLE_RATE) % u64::from(rate), 0, "{rate}");
            assert!(chunk >= u64::from(rate / 50), "{rate}");
        }
    }

    #[test]
    fn odd_sized_stereo_pieces_come_out_as_the_right_amount_of_16k_mono() {
        let mut ingress = PcmIngress::new(44_100, 2).unwrap();
        let second: Vec<i16> = (0..44_100 * 2).map(|i| (((i / 2) as f32 * 0.06).sin() * 8000.0) as i16).collect();
        let mut total = 0;
        for piece in second.chunks(1234) {
            total += ingress.push_i16(piece).unwrap().len();
        }
        // Everything but the last partial chunk (under 20 ms) has come out.
        assert!((15_680..=16_000).contains(&total), "{total}");
        let mut floats = PcmIngress::new(8_000, 1).unwrap();
        assert_eq!(floats.push_f32(&vec![0.1; 8_000]).unwrap().len(), 16_000);
        assert!(PcmIngress::new(4_000, 1).is_err());
        assert!(PcmIngress::new(48_000, 0).is_err());
    }
}
