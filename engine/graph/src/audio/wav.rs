//! WAV files: reading any PCM or float WAV as mono 16 kHz, and writing 16-bit mono.

use std::path::Path;

use super::{AudioError, check_format, pcm, resample};
use crate::time::SAMPLE_RATE;

/// Reads a WAV file (16/24/32-bit PCM or 32-bit float, any rate from 8 to 192 kHz, up to 8 channels) and
/// returns its audio as mono at 16 kHz.
pub fn read_mono_16k(path: &Path) -> Result<Vec<f32>, AudioError> {
    let name = path.display().to_string();
    let reader =
        hound::WavReader::open(path).map_err(|e| AudioError::Wav { path: name.clone(), message: e.to_string() })?;
    to_mono_16k(reader, &name)
}

/// The same for a WAV in memory; `name` says where it came from in errors.
pub fn decode_mono_16k(bytes: &[u8], name: &str) -> Result<Vec<f32>, AudioError> {
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes))
        .map_err(|e| AudioError::Wav { path: name.to_string(), message: e.to_string() })?;
    to_mono_16k(reader, name)
}

fn to_mono_16k<R: std::io::Read>(mut reader: hound::WavReader<R>, name: &str) -> Result<Vec<f32>, AudioError> {
    let fail = |message: String| AudioError::Wav { path: name.to_string(), message };
    let spec = reader.spec();
    check_format(spec.sample_rate, spec.channels)?;
    let channels = usize::from(spec.channels);
    let interleaved: Vec<f32> = match (spec.sample_format, spec.bits_per_sample) {
        (hound::SampleFormat::Float, 32) => {
            let samples: Vec<f32> =
                reader.samples::<f32>().collect::<Result<_, _>>().map_err(|e| fail(e.to_string()))?;
            // NaN or infinity is a corrupt file (the resampler's FFT cannot take it); louder than full
            // scale is clipped, as a sound card would.
            if samples.iter().any(|s| !s.is_finite()) {
                return Err(fail("the file holds samples that are not numbers (NaN or infinite)".into()));
            }
            samples.into_iter().map(|s| s.clamp(-1.0, 1.0)).collect()
        }
        (hound::SampleFormat::Int, bits @ 8..=32) => {
            let scale = 1.0 / (1u64 << (bits - 1)) as f32;
            reader
                .samples::<i32>()
                .map(|s| s.map(|v| v as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(|e| fail(e.to_string()))?
        }
        (format, bits) => {
            return Err(fail(format!("unsupported sample format {format:?} with {bits} bits")));
        }
    };
    if interleaved.len() < channels {
        return Err(AudioError::Empty);
    }
    let mut mono = vec![0.0; interleaved.len() / channels];
    pcm::downmix_f32(&interleaved, channels, &mut mono);
    resample::clip_to_16k(&mono, spec.sample_rate)
}

/// Writes mono 16 kHz floats as a 16-bit PCM WAV.
pub fn write_mono_16k(path: &Path, samples: &[f32]) -> Result<(), AudioError> {
    let fail = |e: hound::Error| AudioError::Wav { path: path.display().to_string(), message: e.to_string() };
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: SAMPLE_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec).map_err(fail)?;
    for &sample in samples {
        writer.write_sample(pcm::to_i16(sample)).map_err(fail)?;
    }
    writer.finalize().map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_wav(path: &Path, rate: u32, channels: u16, frames: usize) {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(path, spec).unwrap();
        for i in 0..frames * usize::from(channels) {
            w.write_sample(((i % 100) as i16 - 50) * 100).unwrap();
        }
        w.finalize().unwrap();
    }

    #[test]
    fn reads_stereo_44k_as_mono_16k() {
        let dir = std::env::temp_dir().join(format!("confab-wav-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stereo.wav");
        write_wav(&path, 44_100, 2, 44_100);
        let mono = read_mono_16k(&path).unwrap();
        assert!((mono.len() as i64 - 16_000).abs() <= 2);
        let round_trip = dir.join("out.wav");
        write_mono_16k(&round_trip, &mono).unwrap();
        assert_eq!(read_mono_16k(&round_trip).unwrap().len(), mono.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = std::env::temp_dir().join(format!("confab-badwav-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("text.wav");
        std::fs::write(&text, b"this is not audio").unwrap();
        assert!(matches!(read_mono_16k(&text), Err(AudioError::Wav { .. })));
        let good = dir.join("good.wav");
        write_wav(&good, 16_000, 1, 1000);
        let bytes = std::fs::read(&good).unwrap();
        let truncated = dir.join("truncated.wav");
        std::fs::write(&truncated, &bytes[..30]).unwrap();
        assert!(read_mono_16k(&truncated).is_err());
        let empty = dir.join("empty.wav");
        write_wav(&empty, 16_000, 1, 0);
        assert!(matches!(read_mono_16k(&empty), Err(AudioError::Empty)));
        let absurd = dir.join("absurd.wav");
        write_wav(&absurd, 1_000_000, 1, 10);
        assert!(matches!(read_mono_16k(&absurd), Err(AudioError::SampleRate(1_000_000))));
        assert!(matches!(read_mono_16k(&dir.join("missing.wav")), Err(AudioError::Wav { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
