//! Opus ingress: decodes packets (48 kHz mono, as WebRTC sends them) and resamples each 20 ms of them to
//! 16 kHz; packets shorter than 20 ms (10 ms, 2.5 ms: a client may send them) wait until 20 ms has come.
//! Buffers are allocated once; a corrupt packet is an error, never a panic.

use super::{AudioError, resample::StreamResampler};

/// Opus decodes at 48 kHz.
pub const OPUS_RATE: u32 = 48_000;
/// Samples of a 20 ms frame at 48 kHz.
pub const FRAME_48K: usize = 960;
/// Longest Opus frame (120 ms at 48 kHz).
const MAX_FRAME_48K: usize = 5760;

pub struct OpusIngress {
    decoder: opus::Decoder,
    pcm: Vec<f32>,
    /// Decoded audio not yet resampled (less than 20 ms of it between packets).
    pending: Vec<f32>,
    resampler: StreamResampler,
    out: Vec<f32>,
}

impl OpusIngress {
    pub fn new() -> Result<OpusIngress, AudioError> {
        Ok(OpusIngress {
            decoder: opus::Decoder::new(OPUS_RATE, opus::Channels::Mono)
                .map_err(|e| AudioError::Opus(e.to_string()))?,
            pcm: vec![0.0; MAX_FRAME_48K],
            pending: Vec::with_capacity(MAX_FRAME_48K + FRAME_48K),
            resampler: StreamResampler::new(OPUS_RATE, FRAME_48K)?,
            out: Vec::with_capacity(MAX_FRAME_48K / 3),
        })
    }

    /// Decodes one packet and returns its audio at 16 kHz (valid until the next call).
    pub fn decode(&mut self, packet: &[u8]) -> Result<&[f32], AudioError> {
        let decoded =
            self.decoder.decode_float(packet, &mut self.pcm, false).map_err(|e| AudioError::Opus(e.to_string()))?;
        self.out.clear();
        self.pending.extend_from_slice(&self.pcm[..decoded]);
        let whole = self.pending.len() / FRAME_48K * FRAME_48K;
        for chunk in self.pending[..whole].chunks_exact(FRAME_48K) {
            let resampled = self.resampler.process(chunk)?;
            self.out.extend_from_slice(resampled);
        }
        self.pending.drain(..whole);
        Ok(&self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_real_packets_and_refuses_corrupt_ones() {
        let mut encoder = opus::Encoder::new(OPUS_RATE, opus::Channels::Mono, opus::Application::Voip).unwrap();
        let mut ingress = OpusIngress::new().unwrap();
        let tone: Vec<f32> = (0..FRAME_48K).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
        let mut packet = vec![0u8; 4000];
        let mut total = 0;
        for _ in 0..5 {
            let n = encoder.encode_float(&tone, &mut packet).unwrap();
            total += ingress.decode(&packet[..n]).unwrap().len();
        }
        assert_eq!(total, 5 * 320);
        assert!(ingress.decode(&[0xff, 0xff, 0xff, 0xff, 0x00, 0x01]).is_err());
        // 10 ms packets: each second one completes 20 ms, which is resampled then.
        let mut ingress = OpusIngress::new().unwrap();
        let heard: Vec<usize> = (0..6)
            .map(|_| {
                let n = encoder.encode_float(&tone[..FRAME_48K / 2], &mut packet).unwrap();
                ingress.decode(&packet[..n]).unwrap().len()
            })
            .collect();
        assert_eq!(heard, [0, 320, 0, 320, 0, 320]);
        // An empty packet (packet loss) must not panic; whatever it decodes to is fine.
        let _ = ingress.decode(&[]);
    }
}
