//! Catching up on the user's audio without losing a word. A media thread that falls more than five ticks
//! behind skips those ticks (`MediaThread::run`), while the user's audio keeps arriving at 50 frames a
//! second: each skip leaves its frames waiting in the session's input ring, and a thread starved again and
//! again would fill the ring (2 s) until the transport drops the newest audio — words, heard as fragments.
//! Taking the backlog in a burst is no better: a burst of VAD windows overflows the VAD queue and the
//! speech in it is never judged. So the backlog is spent where nobody hears it: while more than
//! `TRIM_ABOVE` waits, a pause longer than `PAUSE_KEPT` is shortened, one silent frame at a time, never
//! speech. What the engine hears is the user's words with shorter long pauses (a pause still ends a turn:
//! it is shortened to `PAUSE_KEPT`, no further, then heard at its real length once caught up).

use crate::audio::level::is_silent;

use super::media::FRAME;

/// The backlog above which long pauses are shortened (0.8 s: below the 1 s at which the input used to
/// overflow, so a call that never lost audio before hears exactly what it heard before). What waits below
/// it is the input's adaptive jitter buffer, untouched: a backlog cut to 200 ms or 500 ms raised Firefox's
/// live word error in `live_hearing` on a loaded 2-core AVX2 host (2.3 → 5.3 % and 3.1 → 6.9 %).
pub const TRIM_ABOVE: usize = 40 * FRAME;
/// Frames of each pause always heard (300 ms: longer than the VAD's hangover, so speech is heard to end
/// as before).
pub const PAUSE_KEPT: u32 = 15;

/// One session's pause trimming: how long the current pause has been heard.
#[derive(Debug, Default)]
pub struct PauseTrim {
    /// Silent frames heard since the last sound.
    silent_run: u32,
}

impl PauseTrim {
    /// Drops the silent frames at the head of `input` that a long pause can spare while its backlog is over
    /// `TRIM_ABOVE`; returns how many frames it dropped. Stops at the first frame with sound in it.
    pub fn trim(&mut self, input: &mut rtrb::Consumer<f32>) -> u64 {
        let mut dropped = 0;
        while self.silent_run >= PAUSE_KEPT && input.slots() > TRIM_ABOVE {
            let Ok(chunk) = input.read_chunk(FRAME) else { break };
            let (first, second) = chunk.as_slices();
            if !(is_silent(first) && is_silent(second)) {
                break; // the chunk is dropped uncommitted: the frame stays for the tick to hear
            }
            chunk.commit_all();
            dropped += 1;
        }
        dropped
    }

    /// The frame the tick took from the input (a whole frame of the user's audio).
    pub fn heard(&mut self, frame: &[f32]) {
        self.silent_run = if is_silent(frame) { self.silent_run.saturating_add(1) } else { 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of `levels` (0.0: digital silence) into a ring of `capacity` frames.
    fn ring(levels: &[f32], capacity: usize) -> (rtrb::Producer<f32>, rtrb::Consumer<f32>) {
        let (mut producer, consumer) = rtrb::RingBuffer::new(capacity * FRAME);
        for &level in levels {
            for _ in 0..FRAME {
                producer.push(level).unwrap();
            }
        }
        (producer, consumer)
    }

    fn take(trim: &mut PauseTrim, input: &mut rtrb::Consumer<f32>) -> f32 {
        let chunk = input.read_chunk(FRAME).unwrap();
        let frame: Vec<f32> = chunk.as_slices().0.iter().chain(chunk.as_slices().1).copied().collect();
        chunk.commit_all();
        trim.heard(&frame);
        frame[0]
    }

    /// Frames kept below the trimming threshold.
    const KEPT: usize = TRIM_ABOVE / FRAME;

    #[test]
    fn only_the_long_pause_of_a_backlog_is_shortened_and_every_sound_is_heard() {
        // 16 frames of a pause heard, then a backlog of KEPT + 12 frames: KEPT + 4 of silence, then 8 of a word.
        let mut trim = PauseTrim::default();
        let (_, mut input) = ring(&[0.0; 16], 128);
        for _ in 0..16 {
            take(&mut trim, &mut input);
        }
        let backlog = [vec![0.0; KEPT + 4], vec![0.2; 8]].concat();
        let (_, mut input) = ring(&backlog, 128);
        // Silence is dropped until the backlog is down to TRIM_ABOVE: 12 of the KEPT + 4 silent frames.
        assert_eq!(trim.trim(&mut input), 12);
        assert_eq!(input.slots(), TRIM_ABOVE);
        let heard: Vec<f32> = (0..KEPT).map(|_| take(&mut trim, &mut input)).collect();
        let expected = [vec![0.0; KEPT - 8], vec![0.2; 8]].concat();
        assert_eq!(heard, expected);
    }

    #[test]
    fn a_short_pause_and_sound_are_never_dropped() {
        // A pause heard for 14 frames (under PAUSE_KEPT): a backlog of silence stays.
        let mut trim = PauseTrim::default();
        let (_, mut input) = ring(&[0.0; 14], 128);
        for _ in 0..14 {
            take(&mut trim, &mut input);
        }
        let (_, mut input) = ring(&[0.0; 100], 128);
        assert_eq!(trim.trim(&mut input), 0);
        take(&mut trim, &mut input); // the 15th frame of the pause: now it may be shortened
        assert_eq!(trim.trim(&mut input), 99 - KEPT as u64);
        // A backlog that starts with sound is not touched, however long the pause before it.
        let (_, mut input) = ring(&[[0.001_5; 1].as_slice(), &[0.0; 100]].concat(), 128);
        assert_eq!(trim.trim(&mut input), 0);
        assert_eq!(take(&mut trim, &mut input), 0.001_5);
        assert_eq!(trim.trim(&mut input), 0, "sound ended the pause");
    }
}
