//! Whisper log-mel features (80 mel bins, 25 ms Hann windows every 10 ms, Slaney mel scale): for Smart
//! Turn v3, `WhisperFeatureExtractor(chunk_length=8)` with waveform normalisation, 8 s of 16 kHz audio →
//! `[80, 800]`; for Whisper itself, 30 s without normalisation → `[80, 3000]`.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{RealFftPlanner, RealToComplex};

pub const N_FFT: usize = 400;
pub const HOP: usize = 160;
pub const N_MELS: usize = 80;
/// Smart Turn's window: 8 s.
pub const SAMPLES: usize = 16_000 * 8;
pub const FRAMES: usize = SAMPLES / HOP;
/// Whisper's window: 30 s.
pub const WHISPER_SAMPLES: usize = 16_000 * 30;
/// Bins of one frame's power spectrum.
pub(crate) const BINS: usize = N_FFT / 2 + 1;

fn hz_to_mel(hz: f64) -> f64 {
    if hz >= 1000.0 { 15.0 + (hz / 1000.0).ln() * (27.0 / 6.4f64.ln()) } else { 3.0 * hz / 200.0 }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel >= 15.0 { 1000.0 * ((6.4f64.ln() / 27.0) * (mel - 15.0)).exp() } else { 200.0 * mel / 3.0 }
}

/// One triangular filter: its first non-zero FFT bin and its weights from there (the filter is zero
/// outside them).
pub(crate) struct MelFilter {
    first_bin: usize,
    weights: Vec<f64>,
}

impl MelFilter {
    /// The filter's energy in one frame's power spectrum (`BINS` values).
    pub(crate) fn energy(&self, power: &[f64]) -> f64 {
        let power = &power[self.first_bin..self.first_bin + self.weights.len()];
        self.weights.iter().zip(power).map(|(w, p)| w * p).sum()
    }
}

/// `n_mels` Slaney filters over 0–8 kHz without their zeros: each mel bin is a dot product over the few
/// FFT bins its triangle covers, not over all 201.
pub(crate) fn sparse_mel_filters(n_mels: usize) -> Vec<MelFilter> {
    mel_filters(n_mels)
        .iter()
        .map(|row| {
            let first = row.iter().position(|&w| w != 0.0).unwrap_or(0);
            let last = row.iter().rposition(|&w| w != 0.0).unwrap_or(0);
            MelFilter { first_bin: first, weights: row[first..=last].to_vec() }
        })
        .collect()
}

/// Slaney-normalised triangular filters, `[n_mels][BINS]`.
fn mel_filters(n_mels: usize) -> Vec<[f64; BINS]> {
    let (mel_min, mel_max) = (hz_to_mel(0.0), hz_to_mel(8000.0));
    let filter_hz: Vec<f64> =
        (0..n_mels + 2).map(|i| mel_to_hz(mel_min + (mel_max - mel_min) * i as f64 / (n_mels + 1) as f64)).collect();
    let fft_hz: Vec<f64> = (0..BINS).map(|i| 8000.0 * i as f64 / (BINS - 1) as f64).collect();
    (0..n_mels)
        .map(|m| {
            let mut row = [0.0; BINS];
            let enorm = 2.0 / (filter_hz[m + 2] - filter_hz[m]);
            for (bin, hz) in fft_hz.iter().enumerate() {
                let down = (hz - filter_hz[m]) / (filter_hz[m + 1] - filter_hz[m]);
                let up = (filter_hz[m + 2] - hz) / (filter_hz[m + 2] - filter_hz[m + 1]);
                row[bin] = down.min(up).max(0.0) * enorm;
            }
            row
        })
        .collect()
}

/// Reusable feature extractor: filters, window, FFT plan and scratch buffers are built once.
pub struct LogMel {
    filters: Vec<MelFilter>,
    window: [f64; N_FFT],
    fft: Arc<dyn RealToComplex<f64>>,
    samples: usize,
    frames: usize,
    normalize: bool,
    padded: Vec<f64>,
    frame: Vec<f64>,
    spectrum: Vec<Complex<f64>>,
    /// Power spectra, frame by frame: `[frames][BINS]`.
    power: Vec<f64>,
}

impl Default for LogMel {
    fn default() -> Self {
        LogMel::new()
    }
}

impl LogMel {
    /// Smart Turn's features: 8 s, normalised.
    pub fn new() -> LogMel {
        LogMel::with_window(SAMPLES, true)
    }

    /// Whisper's features: 30 s, not normalised.
    pub fn whisper() -> LogMel {
        LogMel::with_window(WHISPER_SAMPLES, false)
    }

    fn with_window(samples: usize, normalize: bool) -> LogMel {
        let mut window = [0.0; N_FFT];
        for (i, w) in window.iter_mut().enumerate() {
            *w = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / N_FFT as f64).cos();
        }
        let fft = RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT);
        let frames = samples / HOP;
        LogMel {
            filters: sparse_mel_filters(N_MELS),
            window,
            spectrum: fft.make_output_vec(),
            fft,
            samples,
            frames,
            normalize,
            padded: vec![0.0; samples + N_FFT],
            frame: vec![0.0; N_FFT],
            power: vec![0.0; BINS * frames],
        }
    }

    /// Frames of output (`samples / 160`).
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Features of `audio` (16 kHz; the window's length from the start, zero-padded at the end when
    /// shorter) into `out`, laid out `[N_MELS][frames]`.
    pub fn compute(&mut self, audio: &[f32], out: &mut [f32]) {
        let (samples, frames) = (self.samples, self.frames);
        assert_eq!(out.len(), N_MELS * frames, "output is [80, frames]");
        let n = audio.len().min(samples);
        let (mean, scale) = if self.normalize {
            let mean = audio[..n].iter().map(|&s| f64::from(s)).sum::<f64>() / samples as f64;
            let variance = (audio[..n].iter().map(|&s| (f64::from(s) - mean).powi(2)).sum::<f64>()
                + (samples - n) as f64 * mean * mean)
                / samples as f64;
            (mean, 1.0 / (variance + 1e-7).sqrt())
        } else {
            (0.0, 1.0)
        };
        let pad = N_FFT / 2;
        for i in 0..samples {
            let sample = if i < n { f64::from(audio[i]) } else { 0.0 };
            self.padded[pad + i] = (sample - mean) * scale;
        }
        for i in 0..pad {
            self.padded[pad - 1 - i] = self.padded[pad + 1 + i]; // reflect, excluding the edge
            self.padded[pad + samples + i] = self.padded[pad + samples - 2 - i];
        }
        for f in 0..frames {
            let start = f * HOP;
            for (k, value) in self.frame.iter_mut().enumerate() {
                *value = self.padded[start + k] * self.window[k];
            }
            self.fft.process(&mut self.frame, &mut self.spectrum).expect("buffer sizes come from the plan");
            for (power, c) in self.power[f * BINS..(f + 1) * BINS].iter_mut().zip(&self.spectrum) {
                *power = c.norm_sqr();
            }
        }
        let mut max = f64::NEG_INFINITY;
        for (m, filter) in self.filters.iter().enumerate() {
            for f in 0..frames {
                let energy = filter.energy(&self.power[f * BINS..(f + 1) * BINS]);
                let log = energy.max(1e-10).log10();
                max = max.max(log);
                out[m * frames + f] = log as f32;
            }
        }
        let floor = (max - 8.0) as f32;
        for value in out.iter_mut() {
            *value = (value.max(floor) + 4.0) / 4.0;
        }
    }
}
