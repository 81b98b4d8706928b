//! The speech-synthesis interface and the local espeak-ng voice.
//!
//! A synthesizer turns one sentence into a stream of 16 kHz mono audio chunks; dropping the receiver
//! cancels it.

use std::time::Instant;

use tokio::sync::mpsc;

use super::{CallMetrics, ProviderError};

/// Chunks buffered between a synthesizer and the engine. Full: the synthesizer waits.
pub const TTS_STREAM_CAPACITY: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub enum TtsEvent {
    /// More of the sentence's audio, 16 kHz mono.
    Audio(Vec<f32>),
    Done(CallMetrics),
}

pub type TtsStream = mpsc::Receiver<Result<TtsEvent, ProviderError>>;

pub trait SpeechSynthesizer: Send + Sync {
    fn synthesize(&self, text: &str) -> TtsStream;

    /// Which voice said the sentences since the last call, and the voices that failed them before
    /// (`tts_chain::TtsChain`); None for a single voice.
    fn take_served(&self) -> Option<super::chain::ServedBy> {
        None
    }
}

/// The espeak-ng program as a voice (`model_id: "espeak-ng"`); `voice` is an espeak-ng voice name.
#[derive(Debug, Clone)]
pub struct EspeakVoice {
    pub voice: String,
    /// Words per minute.
    pub speed: u32,
}

impl Default for EspeakVoice {
    fn default() -> Self {
        EspeakVoice { voice: "en-us".into(), speed: 165 }
    }
}

impl EspeakVoice {
    /// Synthesizes `text` to 16 kHz mono, in full.
    pub async fn render(&self, text: &str) -> Result<Vec<f32>, ProviderError> {
        let output = tokio::process::Command::new("espeak-ng")
            .args(["-v", &self.voice, "-s", &self.speed.to_string(), "--stdout", "--"])
            .arg(text)
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|err| {
                ProviderError::protocol(
                    "espeak-ng",
                    format!("cannot run espeak-ng ({err}); install it (scripts/setup.sh)"),
                )
            })?;
        if !output.status.success() {
            return Err(ProviderError::protocol(
                "espeak-ng",
                String::from_utf8_lossy(&output.stderr).trim().to_string(),
            ));
        }
        decode_wav(&output.stdout).map_err(|message| ProviderError::protocol("espeak-ng", message))
    }
}

/// A WAV in memory (espeak-ng's output, whose header has no length when streamed) to 16 kHz mono, with the
/// same format checks as a WAV file (`audio::wav`).
pub fn decode_wav(bytes: &[u8]) -> Result<Vec<f32>, String> {
    // espeak-ng writes 0xFFFFFFFF as the data length on stdout; hound wants the real one.
    let mut fixed = bytes.to_vec();
    let data_chunk = fixed.windows(4).position(|w| w == b"data").filter(|&at| at >= 8 && at + 8 <= fixed.len());
    if let Some(data_at) = data_chunk {
        let length = (fixed.len() - data_at - 8) as u32;
        fixed[data_at + 4..data_at + 8].copy_from_slice(&length.to_le_bytes());
        let riff = (fixed.len() - 8) as u32;
        fixed[4..8].copy_from_slice(&riff.to_le_bytes());
    }
    crate::audio::wav::decode_mono_16k(&fixed, "the voice's WAV").map_err(|e| e.to_string())
}

impl SpeechSynthesizer for EspeakVoice {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        let voice = self.clone();
        let text = text.to_string();
        tokio::spawn(async move {
            let started = Instant::now();
            let result = tokio::select! {
                result = voice.render(&text) => result,
                _ = tx.closed() => return,
            };
            match result {
                Ok(audio) => {
                    let metrics = CallMetrics {
                        time_to_first: Some(started.elapsed()),
                        duration: started.elapsed(),
                        attempts: 1,
                    };
                    if tx.send(Ok(TtsEvent::Audio(audio))).await.is_ok() {
                        let _ = tx.send(Ok(TtsEvent::Done(metrics))).await;
                    }
                }
                Err(err) => {
                    let _ = tx.send(Err(err)).await;
                }
            }
        });
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::decode_wav;

    /// A mono WAV of `samples` at `sample_rate` (16-bit integer or 32-bit float, by the sample type).
    fn mono_wav<S: hound::Sample + Copy>(sample_rate: u32, samples: &[S]) -> Vec<u8> {
        let (bits_per_sample, sample_format) = match std::mem::size_of::<S>() {
            2 => (16, hound::SampleFormat::Int),
            _ => (32, hound::SampleFormat::Float),
        };
        let spec = hound::WavSpec { channels: 1, sample_rate, bits_per_sample, sample_format };
        let mut wav = Vec::new();
        let mut writer = hound::WavWriter::new(std::io::Cursor::new(&mut wav), spec).unwrap();
        samples.iter().for_each(|&s| writer.write_sample(s).unwrap());
        writer.finalize().unwrap();
        wav
    }

    #[test]
    fn truncated_or_odd_wavs_are_errors_not_panics() {
        // A `data` tag with no room for its length, or before any RIFF header: once an index underflow.
        for bytes in [&b"data"[..], b"RIFFdata", b"RIFF\0\0\0\0WAVEdata", b"", b"RIFF"] {
            assert!(decode_wav(bytes).is_err(), "{bytes:?}");
        }
        // A rate below 8 kHz would be resampled up by thousands of times: refused like a WAV file's.
        assert!(decode_wav(&mono_wav(1, &[1000i16; 100])).is_err());
    }

    #[test]
    fn float_wavs_with_nan_are_refused_and_loud_ones_clipped() {
        // Found by the `wav` fuzz target: NaN samples made the resampler's inverse FFT fail inside rubato,
        // which unwraps the error (a panic).
        let float_wav = |samples: &[f32]| mono_wav(8_000, samples);
        let crash = include_bytes!("../../../../fuzz/seeds/wav/crash-rubato-nan.wav");
        assert!(decode_wav(crash).is_err());
        assert!(decode_wav(&float_wav(&[0.1, f32::NAN, 0.2])).is_err());
        assert!(decode_wav(&float_wav(&[0.1, f32::INFINITY])).is_err());
        let loud = decode_wav(&float_wav(&[1e30; 800])).unwrap();
        assert!(loud.iter().all(|s| s.is_finite() && s.abs() <= 1.5), "clipped before resampling");
    }

    #[test]
    fn a_streamed_wav_without_lengths_decodes() {
        let samples: Vec<i16> = (0..1600).map(|i| ((i % 50) * 100) as i16).collect();
        let mut wav = mono_wav(16_000, &samples);
        // As espeak-ng writes it on stdout: 0xFFFFFFFF for both lengths.
        wav[4..8].copy_from_slice(&[0xFF; 4]);
        let data_at = wav.windows(4).position(|w| w == b"data").unwrap();
        wav[data_at + 4..data_at + 8].copy_from_slice(&[0xFF; 4]);
        assert_eq!(decode_wav(&wav).unwrap().len(), 1600);
    }
}
