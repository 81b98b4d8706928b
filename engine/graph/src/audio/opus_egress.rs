//! Opus egress: encodes the agent's voice, 20 ms frames of 16 kHz mono, into Opus packets for RTP. Opus
//! encodes 16 kHz input natively (wideband), so nothing is resampled; a receiver decodes at any rate, and
//! the RTP clock stays 48 kHz (960 ticks a packet). Buffers are allocated once.

use super::AudioError;

/// The agent's audio rate.
pub const EGRESS_RATE: u32 = 16_000;
/// Samples of a 20 ms frame at 16 kHz.
pub const FRAME_16K: usize = 320;
/// RTP timestamp ticks of one 20 ms frame (Opus RTP clock, 48 kHz).
pub const RTP_TICKS_PER_FRAME: u32 = 960;
/// Bitrate of the agent's voice.
pub const BITRATE: i32 = 32_000;
/// Encoder complexity (0–10): 5 costs about half of the default 10 and is indistinguishable for speech.
pub const COMPLEXITY: i32 = 5;
/// Largest packet we produce (RFC 7587 recommends at most 1275 bytes a frame).
const MAX_PACKET: usize = 1275;

pub struct OpusEgress {
    encoder: opus::Encoder,
    packet: Vec<u8>,
}

impl OpusEgress {
    pub fn new() -> Result<OpusEgress, AudioError> {
        let opus_error = |e: opus::Error| AudioError::OpusEncode(e.to_string());
        let mut encoder =
            opus::Encoder::new(EGRESS_RATE, opus::Channels::Mono, opus::Application::Voip).map_err(opus_error)?;
        encoder.set_bitrate(opus::Bitrate::Bits(BITRATE)).map_err(opus_error)?;
        encoder.set_complexity(COMPLEXITY).map_err(opus_error)?;
        Ok(OpusEgress { encoder, packet: vec![0; MAX_PACKET] })
    }

    /// Encodes one 20 ms frame (320 samples at 16 kHz); the packet is valid until the next call.
    pub fn encode(&mut self, frame: &[f32]) -> Result<&[u8], AudioError> {
        if frame.len() != FRAME_16K {
            return Err(AudioError::OpusEncode(format!("an Opus frame is {FRAME_16K} samples, not {}", frame.len())));
        }
        let n =
            self.encoder.encode_float(frame, &mut self.packet).map_err(|e| AudioError::OpusEncode(e.to_string()))?;
        Ok(&self.packet[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::opus_ingress::{FRAME_48K, OpusIngress, RtpOpus};

    /// A tone survives the round trip through our egress and ingress: same level, same pitch.
    #[test]
    fn the_agent_voice_round_trips_through_opus() {
        let mut egress = OpusEgress::new().unwrap();
        let mut ingress = OpusIngress::new().unwrap();
        let tone: Vec<f32> =
            (0..16_000).map(|i| 0.3 * (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 16_000.0).sin()).collect();
        let mut decoded = Vec::new();
        for (i, frame) in tone.chunks(FRAME_16K).enumerate() {
            let packet = egress.encode(frame).unwrap().to_vec();
            assert!(packet.len() < 200, "32 kbit/s is 80 bytes a frame, got {}", packet.len());
            let rtp = RtpOpus { sequence: i as u16, timestamp: (i * FRAME_48K) as u32, payload: &packet };
            decoded.extend_from_slice(ingress.receive(rtp).unwrap());
        }
        assert_eq!(decoded.len(), 16_000);
        let rms = |s: &[f32]| (s.iter().map(|v| v * v).sum::<f32>() / s.len() as f32).sqrt();
        let settled = &decoded[4_000..];
        assert!((rms(settled) - rms(&tone[4_000..])).abs() < 0.03, "level {} vs {}", rms(settled), rms(&tone));
        // 440 Hz: 880 zero crossings a second, 660 in the last 0.75 s.
        let crossings = settled.windows(2).filter(|w| (w[0] < 0.0) != (w[1] < 0.0)).count();
        assert!((650..=670).contains(&crossings), "{crossings} zero crossings");
        assert!(egress.encode(&tone[..100]).is_err());
    }
}
