//! The voice encoder's input: a 40-band mel *power* spectrogram (librosa's `melspectrogram` as
//! Resemblyzer calls it: 25 ms Hann windows every 10 ms at 16 kHz, the signal zero-padded by half a
//! window at each end, Slaney filters, no logarithm).

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{RealFftPlanner, RealToComplex};

use crate::mel::{BINS, HOP, MelFilter, N_FFT, sparse_mel_filters};

/// Mel bands.
pub const BANDS: usize = 40;

/// Reusable extractor: filters, window, FFT plan and scratch buffers are built once.
pub struct PowerMel {
    filters: Vec<MelFilter>,
    window: Vec<f32>,
    fft: Arc<dyn RealToComplex<f64>>,
    frame: Vec<f64>,
    spectrum: Vec<Complex<f64>>,
    power: Vec<f64>,
}

impl Default for PowerMel {
    fn default() -> Self {
        let fft = RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT);
        PowerMel {
            filters: sparse_mel_filters(BANDS),
            window: (0..N_FFT)
                .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / N_FFT as f32).cos())
                .collect(),
            spectrum: fft.make_output_vec(),
            fft,
            frame: vec![0.0; N_FFT],
            power: vec![0.0; BINS],
        }
    }
}

impl PowerMel {
    /// Frames of `samples` of audio: one every `HOP`, the first centred on sample 0.
    pub fn frames(samples: usize) -> usize {
        1 + samples / HOP
    }

    /// The spectrogram of `audio` (16 kHz), appended to `out` frame by frame (`[frames][BANDS]`).
    pub fn compute(&mut self, audio: &[f32], out: &mut Vec<f32>) {
        let half = (N_FFT / 2) as isize;
        for f in 0..Self::frames(audio.len()) {
            let first = (f * HOP) as isize - half;
            for (k, value) in self.frame.iter_mut().enumerate() {
                let at = first + k as isize;
                let sample = usize::try_from(at).ok().and_then(|i| audio.get(i)).copied().unwrap_or(0.0);
                *value = f64::from(sample * self.window[k]);
            }
            self.fft.process(&mut self.frame, &mut self.spectrum).expect("buffer sizes come from the plan");
            for (power, c) in self.power.iter_mut().zip(&self.spectrum) {
                *power = c.norm_sqr();
            }
            out.extend(self.filters.iter().map(|filter| filter.energy(&self.power) as f32));
        }
    }
}
