//! WAV from a remote or local voice (`decode_wav`): any bytes give samples or an error, never a panic,
//! and never more than the header's data could hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(samples) = confab_engine::providers::tts::decode_wav(data) {
        // At least 8 kHz and one byte per sample: resampling to 16 kHz at most doubles the sample count.
        assert!(samples.len() <= data.len().saturating_mul(4) + 16, "{} samples from {} bytes", samples.len(), data.len());
        assert!(samples.iter().all(|s| s.is_finite()));
    }
});
