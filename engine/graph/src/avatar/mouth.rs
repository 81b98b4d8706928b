//! The mouth's driving signal from the agent's outgoing audio: each video frame shows the 40 ms of
//! audio sent with it, and its loudness and brightness (zero-crossing rate) set how far the jaw opens
//! and whether the lips spread ("ee", "s") or round ("oo", "o"). This works for every voice (Piper
//! included) because it reads the samples, not the text.
//!
//! Syllables, not a held-open mouth: the opening follows the frame's level against the phrase's running
//! peak, not its level alone. A syllable's vowel sits at the peak and opens the jaw as wide as the voice's
//! loudness allows; the consonants between vowels are 10–20 dB below it and narrow the mouth towards a
//! near-closure (stops and nasals: p, b, m). A level scale alone saturates through every word of a voice
//! at a normal level and holds the mouth open.
//!
//! Exact on media time: a frame whose audio is silent shows a closed mouth (so the face stops speaking
//! on the frame the audio stops, interruption included); a voiced frame opens it at once, and moves
//! between shapes with a short blend (coarticulation) while speech goes on.

/// Below this level (dBFS) a frame is silence: the mouth is closed.
pub const SILENCE_DBFS: f32 = -48.0;
/// At this level (dBFS) and above, the jaw is fully open.
const LOUD_DBFS: f32 = -14.0;
/// How much of the way to the new shape one frame moves while speaking (the rest is the previous shape).
const BLEND: f32 = 0.7;
/// How far below the phrase's running peak a voiced frame narrows the mouth to its least opening.
const SYLLABLE_RANGE_DB: f32 = 18.0;
/// How fast the running peak falls (dB per second) when the voice goes quieter or stops.
const PEAK_DECAY_DB_PER_SECOND: f32 = 6.0;
/// The least opening of a voiced frame: a consonant's near-closure, still visibly speaking.
const LEAST_VOICED_OPEN: f32 = 0.08;

/// Where the mouth is in one video frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MouthShape {
    /// Jaw opening, 0 (closed) to 1.
    pub open: f32,
    /// Lip spread: −1 rounded, 0 neutral, 1 spread.
    pub spread: f32,
}

impl MouthShape {
    pub const CLOSED: MouthShape = MouthShape { open: 0.0, spread: 0.0 };

    pub fn is_closed(self) -> bool {
        self.open == 0.0
    }
}

/// Follows the agent's audio, one video frame at a time.
#[derive(Debug)]
pub struct MouthDriver {
    shape: MouthShape,
    /// The phrase's running peak level (dBFS): a syllable's vowel reaches it.
    peak_dbfs: f32,
}

impl Default for MouthDriver {
    fn default() -> Self {
        MouthDriver { shape: MouthShape::CLOSED, peak_dbfs: f32::NEG_INFINITY }
    }
}

impl MouthDriver {
    /// The shape for the video frame that carries `audio` (16 kHz samples, any length).
    pub fn next(&mut self, audio: &[f32], sample_rate: u32) -> MouthShape {
        let (level, crossings_hz) = features(audio, sample_rate);
        let seconds = audio.len() as f32 / sample_rate as f32;
        self.peak_dbfs = level.max(self.peak_dbfs - PEAK_DECAY_DB_PER_SECOND * seconds);
        if level < SILENCE_DBFS {
            self.shape = MouthShape::CLOSED;
            return self.shape;
        }
        // How wide this voice opens at its loudest, then how near this frame is to its syllable's peak.
        let loudness = ((self.peak_dbfs - SILENCE_DBFS) / (LOUD_DBFS - SILENCE_DBFS)).clamp(0.0, 1.0).sqrt();
        let nucleus = ((level - self.peak_dbfs + SYLLABLE_RANGE_DB) / SYLLABLE_RANGE_DB).clamp(0.0, 1.0);
        let open = loudness * nucleus * nucleus;
        // Vowels with low zero-crossing rates are rounded; bright sounds (fricatives, "ee") spread.
        let spread = ((crossings_hz - 1_400.0) / 1_400.0).clamp(-1.0, 1.0);
        let target = MouthShape { open: open.max(LEAST_VOICED_OPEN), spread };
        self.shape = if self.shape.is_closed() {
            target // speech starts on this frame: no blend from closed, so the first voiced frame shows it
        } else {
            MouthShape {
                open: self.shape.open + BLEND * (target.open - self.shape.open),
                spread: self.shape.spread + BLEND * (target.spread - self.shape.spread),
            }
        };
        self.shape
    }
}

/// Level in dBFS (RMS) and zero-crossing rate in crossings per second / 2 (a frequency estimate).
fn features(audio: &[f32], sample_rate: u32) -> (f32, f32) {
    if audio.is_empty() {
        return (f32::NEG_INFINITY, 0.0);
    }
    let mut energy = 0.0f32;
    let mut crossings = 0u32;
    let mut previous = audio[0];
    for &sample in audio {
        energy += sample * sample;
        crossings += u32::from((sample < 0.0) != (previous < 0.0));
        previous = sample;
    }
    let rms = (energy / audio.len() as f32).sqrt();
    let level = 20.0 * rms.max(1e-9).log10();
    let seconds = audio.len() as f32 / sample_rate as f32;
    (level, crossings as f32 / seconds / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f32, amplitude: f32, samples: usize) -> Vec<f32> {
        (0..samples).map(|i| amplitude * (i as f32 * hz * std::f32::consts::TAU / 16_000.0).sin()).collect()
    }

    #[test]
    fn silence_closes_the_mouth_at_once_and_speech_opens_it_at_once() {
        let mut mouth = MouthDriver::default();
        assert!(mouth.next(&[0.0; 640], 16_000).is_closed());
        let open = mouth.next(&tone(300.0, 0.3, 640), 16_000);
        assert!(open.open > 0.5, "{open:?}");
        assert!(open.spread < 0.0, "a low sound rounds the lips: {open:?}");
        assert!(mouth.next(&[0.0; 640], 16_000).is_closed(), "closes on the first silent frame");
    }

    #[test]
    fn louder_opens_wider_and_brighter_spreads() {
        let mut quiet = MouthDriver::default();
        let mut loud = MouthDriver::default();
        assert!(quiet.next(&tone(300.0, 0.02, 640), 16_000).open < loud.next(&tone(300.0, 0.3, 640), 16_000).open);
        let mut bright = MouthDriver::default();
        assert!(bright.next(&tone(3_000.0, 0.1, 640), 16_000).spread > 0.5);
    }

    #[test]
    fn shapes_blend_while_speech_goes_on() {
        let mut mouth = MouthDriver::default();
        let first = mouth.next(&tone(300.0, 0.3, 640), 16_000);
        let second = mouth.next(&tone(3_000.0, 0.3, 640), 16_000);
        assert!(second.spread > first.spread && second.spread < 1.0, "{first:?} then {second:?}");
    }
}
