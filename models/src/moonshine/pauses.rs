//! Long pauses shortened before Moonshine reads the audio.
//!
//! A turn's audio can hold a long quiet stretch: the user paused before going on, or a short noise came
//! before the speech (Firefox sends a burst of sound as its microphone starts). Moonshine then at times
//! writes nothing at all: its first token is the end. Seen on a live call: a noise of 0.25 s, 0.62 s of
//! quiet, then "What is the capital of France?": an empty transcript (the end token's probability at the
//! first step 0.86); with the quiet cut to 0.3 s, the question read whole (0.10). Quiet is a 20 ms frame
//! under −50 dBFS RMS; a quiet run longer than [`LONGEST_PAUSE`] keeps half of that at each end.

use std::borrow::Cow;

use super::SAMPLE_RATE;

/// The longest quiet stretch Moonshine is given: 0.3 s.
pub const LONGEST_PAUSE: usize = SAMPLE_RATE * 3 / 10;
/// Frames the audio is judged in: 20 ms.
const FRAME: usize = SAMPLE_RATE / 50;
/// A frame is quiet under this RMS level (−50 dBFS), compared squared.
const QUIET_POWER: f32 = 0.003_162 * 0.003_162;

/// `audio` with each quiet run longer than [`LONGEST_PAUSE`] shortened to it (the run's middle taken
/// out); borrowed unchanged when there is none.
pub fn shorten_pauses(audio: &[f32]) -> Cow<'_, [f32]> {
    let cuts = long_pauses(audio);
    if cuts.is_empty() {
        return Cow::Borrowed(audio);
    }
    let mut kept = Vec::with_capacity(audio.len());
    let mut from = 0;
    for (start, end) in cuts {
        kept.extend_from_slice(&audio[from..start + LONGEST_PAUSE / 2]);
        from = end - LONGEST_PAUSE / 2;
    }
    kept.extend_from_slice(&audio[from..]);
    Cow::Owned(kept)
}

/// How long `audio` is audible: its 20 ms frames above the quiet level, in seconds.
pub fn audible_seconds(audio: &[f32]) -> f32 {
    let loud = audio.chunks(FRAME).filter(|f| f.iter().map(|s| s * s).sum::<f32>() / f.len() as f32 >= QUIET_POWER);
    loud.count() as f32 * FRAME as f32 / SAMPLE_RATE as f32
}

/// The quiet runs `[start, end)` longer than [`LONGEST_PAUSE`], in whole frames.
fn long_pauses(audio: &[f32]) -> Vec<(usize, usize)> {
    let mut pauses = Vec::new();
    let mut quiet_since = None;
    for (index, frame) in audio.chunks(FRAME).enumerate() {
        let start = index * FRAME;
        let power = frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32;
        match (power < QUIET_POWER, quiet_since) {
            (true, None) => quiet_since = Some(start),
            (false, Some(since)) => {
                if start - since > LONGEST_PAUSE {
                    pauses.push((since, start));
                }
                quiet_since = None;
            }
            _ => {}
        }
    }
    if let Some(since) = quiet_since
        && audio.len() - since > LONGEST_PAUSE
    {
        pauses.push((since, audio.len()));
    }
    pauses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(seconds: f32) -> Vec<f32> {
        (0..(seconds * SAMPLE_RATE as f32) as usize).map(|i| 0.3 * (i as f32 * 0.1).sin()).collect()
    }

    #[test]
    fn long_quiet_runs_keep_half_the_longest_pause_at_each_end() {
        let mut audio = tone(0.2);
        audio.extend(vec![0.000_1; SAMPLE_RATE]); // 1 s under −50 dBFS
        audio.extend(tone(0.5));
        audio.extend(vec![0.0; SAMPLE_RATE / 5]); // 0.2 s: short enough to keep
        audio.extend(tone(0.1));
        audio.extend(vec![0.0; SAMPLE_RATE / 2]); // trailing 0.5 s
        let shortened = shorten_pauses(&audio);
        let cut = SAMPLE_RATE - LONGEST_PAUSE + SAMPLE_RATE / 2 - LONGEST_PAUSE;
        assert_eq!(shortened.len(), audio.len() - cut);
        // The speech around the first pause is intact and now 0.3 s apart.
        let speech_at = |s: &[f32], from: usize| from + s[from..].iter().position(|v| v.abs() > 0.01).unwrap();
        assert_eq!(speech_at(&shortened, 3_200), 3_200 + LONGEST_PAUSE + 1);
        assert_eq!(&shortened[..3_200], &audio[..3_200]);
    }

    #[test]
    fn audio_without_long_pauses_is_read_as_it_is() {
        let mut audio = tone(0.5);
        audio.extend(vec![0.0; LONGEST_PAUSE]);
        audio.extend(tone(0.5));
        assert!(matches!(shorten_pauses(&audio), Cow::Borrowed(_)));
    }
}
