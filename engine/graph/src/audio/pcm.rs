//! PCM conversions: 16-bit integers to floats and interleaved channels down to mono, into buffers the
//! caller owns (no allocation here).

/// Scale of a 16-bit sample.
const I16_SCALE: f32 = 1.0 / 32_768.0;

/// Averages interleaved `channels` of 16-bit samples into mono floats; returns the frames written.
pub fn downmix_i16(interleaved: &[i16], channels: usize, out: &mut [f32]) -> usize {
    let frames = (interleaved.len() / channels).min(out.len());
    let gain = I16_SCALE / channels as f32;
    for (frame, o) in interleaved.chunks_exact(channels).take(frames).zip(out.iter_mut()) {
        *o = frame.iter().map(|&s| f32::from(s)).sum::<f32>() * gain;
    }
    frames
}

/// Averages interleaved `channels` of float samples into mono; returns the frames written.
pub fn downmix_f32(interleaved: &[f32], channels: usize, out: &mut [f32]) -> usize {
    let frames = (interleaved.len() / channels).min(out.len());
    let gain = 1.0 / channels as f32;
    for (frame, o) in interleaved.chunks_exact(channels).take(frames).zip(out.iter_mut()) {
        *o = frame.iter().sum::<f32>() * gain;
    }
    frames
}

/// Float to 16-bit with clipping.
pub fn to_i16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32_767.0).round() as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downmixes_and_scales() {
        let mut out = [0.0; 2];
        assert_eq!(downmix_i16(&[16384, 0, -32768, -32768], 2, &mut out), 2);
        assert_eq!(out, [0.25, -1.0]);
        assert_eq!(downmix_f32(&[1.0, 0.0, 0.5, 0.5, 9.0], 2, &mut out), 2);
        assert_eq!(out, [0.5, 0.5]);
        assert_eq!((to_i16(2.0), to_i16(-2.0), to_i16(0.0)), (32767, -32767, 0));
    }
}
