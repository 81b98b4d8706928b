//! The audio front end: PCM and Opus ingress, downmixing, resampling to the engine's 16 kHz, noise
//! suppression before hearing, and WAV files for `confab simulate`.

pub mod denoise;
pub mod level;
pub mod opus_egress;
pub mod opus_ingress;
pub mod pcm;
pub mod pcm_ingress;
pub mod resample;
pub mod wav;

#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    #[error("cannot read the WAV file {path}: {message}")]
    Wav { path: String, message: String },
    #[error("unsupported sample rate {0} Hz (8,000 to 192,000 Hz are accepted)")]
    SampleRate(u32),
    #[error("unsupported channel count {0} (1 to 8 are accepted)")]
    Channels(u16),
    #[error("the audio is empty")]
    Empty,
    #[error("resampler error: {0}")]
    Resample(String),
    #[error("corrupt Opus packet: {0}")]
    Opus(String),
    #[error("Opus encoder error: {0}")]
    OpusEncode(String),
}

/// Sample rates the front end accepts.
pub const MIN_SAMPLE_RATE: u32 = 8_000;
pub const MAX_SAMPLE_RATE: u32 = 192_000;
pub const MAX_CHANNELS: u16 = 8;

pub fn check_format(sample_rate: u32, channels: u16) -> Result<(), AudioError> {
    if !(MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&sample_rate) {
        return Err(AudioError::SampleRate(sample_rate));
    }
    if channels == 0 || channels > MAX_CHANNELS {
        return Err(AudioError::Channels(channels));
    }
    Ok(())
}
