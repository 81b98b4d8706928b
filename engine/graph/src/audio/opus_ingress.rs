//! Opus ingress: a participant's RTP packets in, the engine's 16 kHz audio out. Each packet is decoded
//! (48 kHz mono, as WebRTC sends it) and each 20 ms of the result resampled to 16 kHz; packets shorter
//! than 20 ms (10 ms, 2.5 ms: a client may send them) wait until 20 ms has come. Buffers are allocated
//! once; a corrupt packet is an error, never a panic.
//!
//! The packets are read as RTP carries them, by sequence number and timestamp, not merely as they come:
//! - **Padding** (a packet whose payload is empty once its padding is taken off) carries no audio:
//!   libwebrtc sends runs of them on the audio stream as bandwidth probes, mostly when a stream starts,
//!   i.e. in a question's first syllable. Handed to the decoder, each would read as a lost packet and be
//!   concealed for the decoder's longest frame: 120 ms of made-up audio per probe, a second of it inside
//!   "What" ("What is the capital of France?" was heard "But is a capital of France,").
//! - A packet **not newer** than the last one (a duplicate, or one overtaken by later ones) is dropped:
//!   its time has been heard already.
//! - **Lost packets** (sequence numbers skipped while the timestamp moved on) are concealed for exactly the
//!   time they covered, up to [`MAX_CONCEALED`]: the decoder's loss concealment, then the next packet's
//!   in-band FEC for the last lost frame. A longer loss is heard as the silence the media thread gives an
//!   input that runs short.
//! - A timestamp that jumps with no sequence number skipped is the sender pausing in silence (DTX): there
//!   is nothing to conceal.

use super::{AudioError, resample::StreamResampler};

/// Opus decodes at 48 kHz (and its RTP timestamps count at 48 kHz whatever the audio's bandwidth).
pub const OPUS_RATE: u32 = 48_000;
/// Samples of a 20 ms frame at 48 kHz.
pub const FRAME_48K: usize = 960;
/// Longest Opus frame (120 ms at 48 kHz).
const MAX_FRAME_48K: usize = 5760;
/// The most of a loss that is concealed (48 kHz samples: 120 ms, the decoder's longest frame).
pub const MAX_CONCEALED: usize = MAX_FRAME_48K;
/// Loss concealment comes in whole steps of 2.5 ms (libopus' smallest frame), at 48 kHz.
const CONCEAL_STEP: usize = 120;

/// What the ingress needs of one RTP packet of the participant's audio.
#[derive(Debug, Clone, Copy)]
pub struct RtpOpus<'a> {
    pub sequence: u16,
    /// At 48 kHz.
    pub timestamp: u32,
    /// The Opus packet, padding removed (empty for a padding-only packet).
    pub payload: &'a [u8],
}

/// What a stream's packets were, counted as they were received.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IngressCounts {
    /// Packets decoded.
    pub decoded: u64,
    /// Padding-only packets (no audio).
    pub padding: u64,
    /// Duplicates and packets overtaken by later ones: dropped.
    pub stale: u64,
    /// Sequence numbers skipped.
    pub lost: u64,
    /// Audio made up for lost packets, in 48 kHz samples.
    pub concealed: u64,
}

pub struct OpusIngress {
    decoder: opus::Decoder,
    pcm: Vec<f32>,
    /// Decoded audio not yet resampled (less than 20 ms of it between packets).
    pending: Vec<f32>,
    resampler: StreamResampler,
    out: Vec<f32>,
    /// The newest sequence number received (padding included).
    last_sequence: Option<u16>,
    /// The timestamp the audio decoded so far ends at.
    next_timestamp: Option<u32>,
    counts: IngressCounts,
}

impl OpusIngress {
    pub fn new() -> Result<OpusIngress, AudioError> {
        Ok(OpusIngress {
            decoder: opus::Decoder::new(OPUS_RATE, opus::Channels::Mono)
                .map_err(|e| AudioError::Opus(e.to_string()))?,
            pcm: vec![0.0; MAX_FRAME_48K],
            pending: Vec::with_capacity(2 * MAX_FRAME_48K + FRAME_48K),
            resampler: StreamResampler::new(OPUS_RATE, FRAME_48K)?,
            out: Vec::with_capacity(2 * MAX_FRAME_48K / 3),
            last_sequence: None,
            next_timestamp: None,
            counts: IngressCounts::default(),
        })
    }

    /// What the stream's packets were, so far.
    pub fn counts(&self) -> IngressCounts {
        self.counts
    }

    /// Takes one RTP packet; returns the 16 kHz audio it completes (valid until the next call; empty for
    /// padding, a stale packet, or less than 20 ms decoded since the last 20 ms).
    pub fn receive(&mut self, packet: RtpOpus<'_>) -> Result<&[f32], AudioError> {
        self.out.clear();
        let skipped = match self.last_sequence {
            None => 0,
            Some(last) => {
                let ahead = packet.sequence.wrapping_sub(last);
                if ahead == 0 || ahead >= 0x8000 {
                    self.counts.stale += 1;
                    return Ok(&self.out);
                }
                ahead - 1
            }
        };
        self.last_sequence = Some(packet.sequence);
        self.counts.lost += u64::from(skipped);
        if packet.payload.is_empty() {
            self.counts.padding += 1;
            return Ok(&self.out);
        }
        if skipped > 0 {
            self.conceal_before(packet)?;
        }
        let decoded = self
            .decoder
            .decode_float(packet.payload, &mut self.pcm, false)
            .map_err(|e| AudioError::Opus(e.to_string()))?;
        self.counts.decoded += 1;
        self.next_timestamp = Some(packet.timestamp.wrapping_add(decoded as u32));
        self.pending.extend_from_slice(&self.pcm[..decoded]);
        self.resample_pending()?;
        Ok(&self.out)
    }

    /// Conceals the time between the audio decoded so far and `packet` (packets were lost), up to
    /// `MAX_CONCEALED`: loss concealment, then `packet`'s in-band FEC for the frame just before it (the
    /// decoder conceals that too when the packet carries none).
    fn conceal_before(&mut self, packet: RtpOpus<'_>) -> Result<(), AudioError> {
        let Some(expected) = self.next_timestamp else { return Ok(()) };
        let gap = packet.timestamp.wrapping_sub(expected);
        if gap == 0 || gap >= 0x8000_0000 {
            return Ok(()); // only padding was lost, or the stream went back in time: nothing to fill
        }
        let missing = (gap as usize).min(MAX_CONCEALED) / CONCEAL_STEP * CONCEAL_STEP;
        let frame = opus::packet::get_nb_samples(packet.payload, OPUS_RATE)
            .map_err(|e| AudioError::Opus(e.to_string()))?
            .min(missing);
        let opus_err = |e: opus::Error| AudioError::Opus(e.to_string());
        if missing > frame {
            let concealed =
                self.decoder.decode_float(&[], &mut self.pcm[..missing - frame], false).map_err(opus_err)?;
            self.pending.extend_from_slice(&self.pcm[..concealed]);
            self.counts.concealed += concealed as u64;
        }
        if frame > 0 {
            let recovered =
                self.decoder.decode_float(packet.payload, &mut self.pcm[..frame], true).map_err(opus_err)?;
            self.pending.extend_from_slice(&self.pcm[..recovered]);
            self.counts.concealed += recovered as u64;
        }
        Ok(())
    }

    /// Resamples the whole 20 ms pending into `out`.
    fn resample_pending(&mut self) -> Result<(), AudioError> {
        let whole = self.pending.len() / FRAME_48K * FRAME_48K;
        for chunk in self.pending[..whole].chunks_exact(FRAME_48K) {
            let resampled = self.resampler.process(chunk)?;
            self.out.extend_from_slice(resampled);
        }
        self.pending.drain(..whole);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(samples: usize) -> Vec<f32> {
        (0..samples).map(|i| (i as f32 * 0.05).sin() * 0.3).collect()
    }

    fn encoder() -> opus::Encoder {
        opus::Encoder::new(OPUS_RATE, opus::Channels::Mono, opus::Application::Voip).unwrap()
    }

    /// `frames` 20 ms packets of a tone.
    fn packets(frames: usize) -> Vec<Vec<u8>> {
        let mut encoder = encoder();
        let mut packet = vec![0u8; 4000];
        tone(frames * FRAME_48K)
            .chunks_exact(FRAME_48K)
            .map(|frame| {
                let n = encoder.encode_float(frame, &mut packet).unwrap();
                packet[..n].to_vec()
            })
            .collect()
    }

    fn rtp(sequence: u16, frame: u32, payload: &[u8]) -> RtpOpus<'_> {
        RtpOpus { sequence, timestamp: 1_000 + frame * FRAME_48K as u32, payload }
    }

    #[test]
    fn decodes_real_packets_and_refuses_corrupt_ones() {
        let mut ingress = OpusIngress::new().unwrap();
        let mut total = 0;
        for (i, packet) in packets(5).iter().enumerate() {
            total += ingress.receive(rtp(i as u16, i as u32, packet)).unwrap().len();
        }
        assert_eq!(total, 5 * 320);
        assert!(ingress.receive(rtp(5, 5, &[0xff, 0xff, 0xff, 0xff, 0x00, 0x01])).is_err());
        // 10 ms packets: each second one completes 20 ms, which is resampled then.
        let mut encoder = encoder();
        let mut packet = vec![0u8; 4000];
        let mut ingress = OpusIngress::new().unwrap();
        let heard: Vec<usize> = (0..6u16)
            .map(|i| {
                let n = encoder.encode_float(&tone(FRAME_48K / 2), &mut packet).unwrap();
                let timestamp = u32::from(i) * FRAME_48K as u32 / 2;
                ingress.receive(RtpOpus { sequence: i, timestamp, payload: &packet[..n] }).unwrap().len()
            })
            .collect();
        assert_eq!(heard, [0, 320, 0, 320, 0, 320]);
    }

    /// libwebrtc's bandwidth probes: runs of padding-only packets (the last audio packet's timestamp, new
    /// sequence numbers, no payload) between audio packets. They add no audio.
    #[test]
    fn padding_packets_add_no_audio() {
        let audio = packets(4);
        let mut ingress = OpusIngress::new().unwrap();
        let mut heard = Vec::new();
        let mut sequence = 60_000u16;
        for (frame, packet) in audio.iter().enumerate() {
            heard.push(ingress.receive(rtp(sequence, frame as u32, packet)).unwrap().len());
            for _ in 0..8 {
                sequence = sequence.wrapping_add(1);
                heard.push(ingress.receive(rtp(sequence, frame as u32, &[])).unwrap().len());
            }
            sequence = sequence.wrapping_add(1);
        }
        assert_eq!(heard.iter().sum::<usize>(), 4 * 320, "{heard:?}");
        let counts = ingress.counts();
        assert_eq!((counts.decoded, counts.padding, counts.lost, counts.concealed), (4, 32, 0, 0));
    }

    #[test]
    fn lost_packets_are_concealed_for_their_time_and_dtx_pauses_are_not() {
        let audio = packets(12);
        let mut ingress = OpusIngress::new().unwrap();
        let mut total = 0;
        // Packets 0–2, then 3 and 4 lost (40 ms), then 5–7.
        for frame in [0u16, 1, 2, 5, 6, 7] {
            total += ingress.receive(rtp(frame, u32::from(frame), &audio[usize::from(frame)])).unwrap().len();
        }
        assert_eq!(total, 8 * 320, "six packets and 40 ms concealed");
        assert_eq!((ingress.counts().lost, ingress.counts().concealed), (2, 2 * FRAME_48K as u64));
        // A pause in silence (DTX): the next packet is the next sequence number, 200 ms later.
        total += ingress.receive(rtp(8, 18, &audio[8])).unwrap().len();
        assert_eq!(total, 9 * 320);
        // A long loss: concealed up to 120 ms, the rest is the media thread's silence.
        total += ingress.receive(rtp(30, 60, &audio[9])).unwrap().len();
        assert_eq!(total, 9 * 320 + MAX_CONCEALED / 3 + 320);
        assert_eq!(ingress.counts().lost, 2 + 21);
    }

    #[test]
    fn duplicates_and_overtaken_packets_are_dropped() {
        let audio = packets(4);
        let mut ingress = OpusIngress::new().unwrap();
        let heard: Vec<usize> = [(0u16, 0usize), (1, 1), (1, 1), (0, 0), (3, 3), (2, 2)]
            .iter()
            .map(|&(sequence, frame)| ingress.receive(rtp(sequence, frame as u32, &audio[frame])).unwrap().len())
            .collect();
        // Packet 2 came after 3: 3's arrival concealed its 20 ms; 2 itself is too late to be heard.
        assert_eq!(heard, [320, 320, 0, 0, 640, 0]);
        assert_eq!((ingress.counts().stale, ingress.counts().lost), (3, 1));
    }
}
