//! Noise suppression before hearing: steady noise (fans, traffic, hum, a street) is taken out of the user's
//! audio before the VAD and speech-to-text hear it, with RNNoise (`nnnoiseless`, its Rust port: a small
//! recurrent network that sets a gain per frequency band every 10 ms).
//!
//! RNNoise works on 48 kHz audio in 10 ms frames (480 samples, in 16-bit range). Each 20 ms frame of the
//! engine's 16 kHz audio is resampled up to 48 kHz (two RNNoise frames), denoised and resampled back
//! ([`Denoiser`]); the round trip delays what is heard by [`Denoiser::delay`].
//!
//! When it runs is the call's [`NoiseSuppression`]: `auto` (the default) starts it once the call's
//! [`NoiseFloor`] says the room is noisy, and keeps it on for the rest of the call; a quiet call is heard
//! as it was (RNNoise's gains also shape clean speech a little, and it costs more CPU than the rest of the
//! front end together: `docs/performance.md`). `on` runs it from the first frame, `off` never.

use nnnoiseless::DenoiseState;

use super::AudioError;
use super::level::mean_square;
use super::resample::StreamResampler;
use crate::time::{MediaTime, SAMPLE_RATE};

/// RNNoise's sample rate.
const DENOISER_RATE: u32 = 48_000;
/// One RNNoise frame: 10 ms at 48 kHz.
const DENOISER_FRAME: usize = DenoiseState::FRAME_SIZE;
/// The engine's frame: 20 ms at 16 kHz.
const FRAME: usize = 320;
/// One engine frame at 48 kHz: two RNNoise frames.
const FRAME_48K: usize = FRAME * (DENOISER_RATE / SAMPLE_RATE) as usize;
/// RNNoise takes samples in 16-bit range.
const PCM_SCALE: f32 = 32_768.0;

/// When a call's noise is suppressed (`stt.noise_suppression`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NoiseSuppression {
    /// From the moment the call's noise floor says the room is noisy ([`NOISY_FLOOR_RMS`]).
    #[default]
    Auto,
    /// From the first frame.
    On,
    /// Never: the audio is heard as it arrives (a client that suppresses noise itself).
    Off,
}

impl NoiseSuppression {
    /// The names the API accepts, in `stt.noise_suppression`.
    pub const NAMES: [&str; 3] = ["auto", "on", "off"];

    pub fn parse(name: &str) -> Option<NoiseSuppression> {
        match name {
            "auto" => Some(NoiseSuppression::Auto),
            "on" => Some(NoiseSuppression::On),
            "off" => Some(NoiseSuppression::Off),
            _ => None,
        }
    }
}

/// A noise floor at or above this RMS (−50 dBFS) is a noisy room: a quiet room through a microphone sits
/// near −60 dBFS and below, speech at −30 to −15 dBFS, a fan or a street 10 dB under the speech above it.
pub const NOISY_FLOOR_RMS: f32 = 0.003_16;
/// Frames in one block of the floor's minimum (300 ms).
const FLOOR_BLOCK_FRAMES: u32 = 15;
/// Blocks the floor is the minimum over: 1.5 s, longer than the gaps between a speaker's words are apart,
/// so speech alone does not raise it; steady noise fills every gap and does.
const FLOOR_BLOCKS: usize = 5;

/// The call's noise floor: the quietest 20 ms frame of the last 1.5 s (minimum statistics). Speech leaves
/// gaps between its words at the room's level; steady noise raises every frame.
#[derive(Debug, Clone)]
pub struct NoiseFloor {
    /// The quietest frame's mean square in the block being filled.
    block_min: f32,
    frames_in_block: u32,
    /// The last blocks' minima (mean squares), a ring.
    minima: [f32; FLOOR_BLOCKS],
    blocks: usize,
}

impl Default for NoiseFloor {
    fn default() -> Self {
        NoiseFloor { block_min: f32::INFINITY, frames_in_block: 0, minima: [0.0; FLOOR_BLOCKS], blocks: 0 }
    }
}

impl NoiseFloor {
    /// Takes one frame; the floor's RMS once 1.5 s have been heard.
    pub fn push(&mut self, frame: &[f32]) -> Option<f32> {
        self.block_min = self.block_min.min(mean_square(frame));
        self.frames_in_block += 1;
        if self.frames_in_block == FLOOR_BLOCK_FRAMES {
            self.minima[self.blocks % FLOOR_BLOCKS] = self.block_min;
            self.blocks += 1;
            self.block_min = f32::INFINITY;
            self.frames_in_block = 0;
        }
        self.floor()
    }

    /// The floor's RMS: the quietest frame of the last `FLOOR_BLOCKS` blocks (None until they are heard).
    pub fn floor(&self) -> Option<f32> {
        (self.blocks >= FLOOR_BLOCKS).then(|| self.minima.iter().copied().fold(f32::INFINITY, f32::min).sqrt())
    }
}

/// RNNoise around the engine's 16 kHz frames.
pub struct Denoiser {
    up: StreamResampler,
    down: StreamResampler,
    state: Box<DenoiseState<'static>>,
    /// One RNNoise frame's input, scaled to 16-bit range.
    scaled: [f32; DENOISER_FRAME],
    /// The frame denoised, at 48 kHz.
    denoised: [f32; FRAME_48K],
}

impl Denoiser {
    pub fn new() -> Result<Denoiser, AudioError> {
        Ok(Denoiser {
            up: StreamResampler::between(SAMPLE_RATE, DENOISER_RATE, FRAME)?,
            down: StreamResampler::between(DENOISER_RATE, SAMPLE_RATE, FRAME_48K)?,
            state: DenoiseState::new(),
            scaled: [0.0; DENOISER_FRAME],
            denoised: [0.0; FRAME_48K],
        })
    }

    /// How much older what comes out is than what goes in: the two resamplers' filters and RNNoise's frame.
    pub fn delay(&self) -> MediaTime {
        let at_48k = self.up.delay() + DENOISER_FRAME;
        MediaTime((at_48k / (DENOISER_RATE / SAMPLE_RATE) as usize + self.down.delay()) as u64)
    }

    /// Denoises one 20 ms frame at 16 kHz in place (what comes out is `delay()` older).
    pub fn process(&mut self, frame: &mut [f32]) -> Result<(), AudioError> {
        if frame.len() != FRAME {
            return Err(AudioError::Resample(format!("expected {FRAME} samples, got {}", frame.len())));
        }
        let up = self.up.process(frame)?;
        for (input, output) in up.chunks_exact(DENOISER_FRAME).zip(self.denoised.chunks_exact_mut(DENOISER_FRAME)) {
            for (scaled, sample) in self.scaled.iter_mut().zip(input) {
                *scaled = sample * PCM_SCALE;
            }
            self.state.process_frame(output, &self.scaled);
        }
        for sample in &mut self.denoised {
            *sample /= PCM_SCALE;
        }
        let down = self.down.process(&self.denoised)?;
        frame.copy_from_slice(down);
        Ok(())
    }
}

/// What the suppressor did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suppressed {
    /// Heard as it arrived.
    No,
    /// Denoised.
    Yes,
    /// Denoised, the first frame: the room turned out noisy (`auto`) or suppression is `on`.
    Started,
}

/// One call's noise suppression: its mode, its noise floor and, once started, its denoiser.
pub struct NoiseSuppressor {
    mode: NoiseSuppression,
    floor: NoiseFloor,
    denoiser: Option<Denoiser>,
    /// The denoiser failed (it cannot, for 20 ms frames); the audio is heard as it arrives from then on.
    failed: bool,
}

impl NoiseSuppressor {
    pub fn new(mode: NoiseSuppression) -> NoiseSuppressor {
        NoiseSuppressor { mode, floor: NoiseFloor::default(), denoiser: None, failed: false }
    }

    /// How much later the denoised audio is heard, once frames are being denoised.
    pub fn delay(&self) -> Option<MediaTime> {
        self.denoiser.as_ref().map(Denoiser::delay)
    }

    /// Takes one 20 ms frame of the user's audio at 16 kHz and suppresses its noise in place when it should.
    pub fn process(&mut self, frame: &mut [f32]) -> Suppressed {
        if self.failed || self.mode == NoiseSuppression::Off {
            return Suppressed::No;
        }
        let mut started = false;
        if self.denoiser.is_none() {
            let noisy = match self.mode {
                NoiseSuppression::On => true,
                _ => self.floor.push(frame).is_some_and(|floor| floor >= NOISY_FLOOR_RMS),
            };
            if !noisy {
                return Suppressed::No;
            }
            match Denoiser::new() {
                Ok(denoiser) => self.denoiser = Some(denoiser),
                Err(e) => return self.fail(e),
            }
            started = true;
        }
        let Some(denoiser) = self.denoiser.as_mut() else { return Suppressed::No };
        match denoiser.process(frame) {
            Ok(()) if started => Suppressed::Started,
            Ok(()) => Suppressed::Yes,
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: AudioError) -> Suppressed {
        tracing::warn!(error = %e, "the noise suppressor failed: the user's audio is heard as it arrives");
        self.failed = true;
        self.denoiser = None;
        Suppressed::No
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise generator (xorshift), uniform in [-amplitude, amplitude].
    fn noise(samples: usize, amplitude: f32, seed: u32) -> Vec<f32> {
        let mut state = seed.max(1);
        (0..samples)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state as f32 / u32::MAX as f32 * 2.0 - 1.0) * amplitude
            })
            .collect()
    }

    fn rms(samples: &[f32]) -> f32 {
        (samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32).sqrt()
    }

    #[test]
    fn names_parse() {
        for name in NoiseSuppression::NAMES {
            assert!(NoiseSuppression::parse(name).is_some(), "{name}");
        }
        assert_eq!(NoiseSuppression::parse("Auto"), None);
        assert_eq!(NoiseSuppression::default(), NoiseSuppression::Auto);
    }

    #[test]
    fn the_floor_is_the_quietest_frame_of_the_last_one_and_a_half_seconds() {
        let mut floor = NoiseFloor::default();
        let loud = [0.1f32; FRAME];
        let quiet = [0.001f32; FRAME];
        // One quiet frame among loud ones (a gap between words) holds the floor down for 1.5 s.
        assert_eq!(floor.push(&quiet), None);
        for _ in 1..75 {
            assert!(floor.push(&loud).is_none_or(|f| (f - 0.001).abs() < 1e-6));
        }
        assert!((floor.floor().unwrap() - 0.001).abs() < 1e-6);
        // 1.5 s later the gap has left the window.
        for _ in 0..75 {
            floor.push(&loud);
        }
        assert!((floor.floor().unwrap() - 0.1).abs() < 1e-6);
    }

    #[test]
    fn auto_starts_in_steady_noise_and_not_in_silence() {
        let mut quiet = NoiseSuppressor::new(NoiseSuppression::Auto);
        let hiss = noise(16_000 * 3, 0.0009, 7);
        assert!(hiss.chunks_exact(FRAME).all(|f| quiet.process(&mut f.to_vec()) == Suppressed::No));
        let mut noisy = NoiseSuppressor::new(NoiseSuppression::Auto);
        let fan = noise(16_000 * 3, 0.05, 7);
        let outcomes: Vec<Suppressed> = fan.chunks_exact(FRAME).map(|f| noisy.process(&mut f.to_vec())).collect();
        // The floor is known after 1.5 s (75 frames); the room is noisy from then on.
        assert_eq!(outcomes.iter().position(|&s| s == Suppressed::Started), Some(74));
        assert!(outcomes[75..].iter().all(|&s| s == Suppressed::Yes));
        let mut off = NoiseSuppressor::new(NoiseSuppression::Off);
        assert!(fan.chunks_exact(FRAME).all(|f| off.process(&mut f.to_vec()) == Suppressed::No));
    }

    #[test]
    fn the_round_trip_delays_the_audio_by_tens_of_milliseconds() {
        let delay = Denoiser::new().unwrap().delay();
        assert!(delay > MediaTime::from_millis(10) && delay < MediaTime::from_millis(60), "{delay:?}");
    }

    #[test]
    fn white_noise_is_suppressed() {
        let mut suppressor = NoiseSuppressor::new(NoiseSuppression::On);
        let mut hiss = noise(16_000 * 2, 0.05, 11);
        for frame in hiss.chunks_exact_mut(FRAME) {
            suppressor.process(frame);
        }
        // Uniform noise of amplitude 0.05: 0.029 RMS. RNNoise, once settled, takes it 9 dB down.
        let after = rms(&hiss[16_000..]);
        assert!(after < 0.05 / 3.0_f32.sqrt() / 2.0, "white noise at {after:.4} RMS after (was 0.029)");
    }
}
