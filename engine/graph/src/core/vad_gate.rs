//! VAD gating: turns per-window speech probabilities into speech start and stop, with hysteresis
//! (separate activation and deactivation thresholds), a minimum speech run that rejects clicks, and a
//! hangover of silence before speech counts as stopped.
//!
//! Reported bounds are the speech bounds themselves, refined on the probabilities:
//! - start: the first window at or above `activation_threshold`, extended back over the windows just
//!   before it that reach `onset_threshold` (soft onsets such as a breathy "h" score between the two),
//!   at most `onset_lookback`;
//! - end: the end of the last window at or above `activation_threshold` (the model's probability tails
//!   off above the deactivation threshold for a window or two after speech).
//!
//! Both are observed later (after the minimum run, after the hangover); the output carries both times.
//!
//! A shorter silence than the hangover is reported too, once per end of speech: `SpeechPaused` says the
//! user may have finished (speech-to-text and the reply can start on it), not that they have (that is
//! `SpeechEnded`, which the endpointing delay and the events follow).
//!
//! Windows of other voices (`core::other_voices`, `handle_window_of`) never start speech — nor, once a room
//! has been heard, unsure ones (near the user's level but not loud: as often the room's louder moments) —
//! but the user's speech is as soft as that now and then: the first or last word of a question is often
//! well below the user's level. So speech the user starts reaches back over such windows just before it when they began
//! at most `other_voice_grace` before (after silence: a soft first word, not the room talking on), and
//! they carry the user's speech on for `other_voice_grace` after the user's last loud window
//! (`Voice::User`); once only other voices have been heard that long, the user's speech ended at that
//! window: the room's talk neither keeps the turn open nor reaches its transcript.
//!
//! That end needs **a room heard**: other voices talking while the user was not (`room_run` of them,
//! longer than a soft first word, gaps shorter than the hangover, within the last `room_memory`). In a room where nobody else has been
//! heard, windows below the user's level are most likely the user's own soft words (a question trailing
//! off, a microphone's gain control catching up), so they carry the user's speech on for
//! `unheard_room_limit`; a room that starts talking just as the user does is caught by that longer limit,
//! and from then on it has been heard.

use std::collections::VecDeque;

use crate::core::other_voices::Voice;
use crate::time::MediaTime;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VadGateConfig {
    /// Probability at or above which a window counts as speech while silent.
    pub activation_threshold: f32,
    /// Probability below which a window counts as silence while speaking.
    pub deactivation_threshold: f32,
    /// Probability at or above which the windows just before speech count as its onset.
    pub onset_threshold: f32,
    /// How far back the onset may extend the start.
    pub onset_lookback: MediaTime,
    /// Speech must last this long before it is reported (rejects clicks and coughs).
    pub min_speech: MediaTime,
    /// Silence must last this long after the last speech window before speech is reported stopped.
    pub hangover: MediaTime,
    /// Silence this long after the last speech window is reported as a pause (shorter than the hangover).
    pub pause: MediaTime,
    /// Other voices carry the user's speech on this long after the user's own last confident window, and
    /// the user's speech reaches back over them when they began at most this long before it.
    pub other_voice_grace: MediaTime,
    /// Soft speech in the user's voice (`Voice::Soft`) carries it on at most this long after their last
    /// loud window: a room whose voices sound like the user's cannot keep a turn open for longer.
    pub soft_voice_limit: MediaTime,
    /// Other voices heard this long while the user was not speaking (gaps shorter than the hangover) are
    /// a room that talks: only then do other voices end the user's speech within `other_voice_grace`. At
    /// least `other_voice_grace`: a shorter run may be the user's soft first word, which their speech
    /// reaches back over.
    pub room_run: MediaTime,
    /// A room heard talking is remembered this long after it was last heard.
    pub room_memory: MediaTime,
    /// Without a room heard, windows below the user's level carry their speech on this long after their
    /// last loud window (their soft words), whatever the voice check says.
    pub unheard_room_limit: MediaTime,
}

impl Default for VadGateConfig {
    fn default() -> Self {
        VadGateConfig {
            activation_threshold: 0.5,
            deactivation_threshold: 0.35,
            onset_threshold: 0.1,
            onset_lookback: MediaTime::from_millis(64),
            min_speech: MediaTime::from_millis(64),
            hangover: MediaTime::from_millis(256),
            pause: MediaTime::from_millis(96),
            other_voice_grace: MediaTime::from_millis(1_000),
            soft_voice_limit: MediaTime::from_millis(2_000),
            room_run: MediaTime::from_millis(1_000),
            room_memory: MediaTime::from_millis(30_000),
            unheard_room_limit: MediaTime::from_millis(3_000),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadGateOutput {
    /// Speech began at `start`; known at `observed_at`.
    SpeechStarted { start: MediaTime, observed_at: MediaTime },
    /// Speech has paused since `last_speech` (it may end there); known at `observed_at`.
    SpeechPaused { last_speech: MediaTime, observed_at: MediaTime },
    /// Speech ended at `last_speech`; known at `observed_at`.
    SpeechEnded { last_speech: MediaTime, observed_at: MediaTime },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// `onset`: start of the current run of windows at or above the onset threshold; `other`: whether a
    /// confident window of another voice is in that run.
    Silent { onset: Option<MediaTime>, other: bool },
    /// Speech since `start` (reported from `onset`), not yet long enough to report.
    Candidate { start: MediaTime, onset: MediaTime },
    /// `last_speech`: end of the last window above deactivation (decides the stop);
    /// `last_confident`: end of the last window above activation (is reported); `paused`: a pause after
    /// `last_confident` has been reported; `last_own`: end of the last window above activation that was
    /// a loud one of the user's (`Voice::User`), or the start of speech.
    Speaking { last_speech: MediaTime, last_confident: MediaTime, paused: bool, last_own: MediaTime },
}

/// Other voices heard while the user was not speaking: the room's talk.
#[derive(Debug, Clone, Copy, Default)]
struct Room {
    /// The current run of them: its first window's start and its last window's end.
    run: Option<(MediaTime, MediaTime)>,
    /// When a run long enough (or other voices going on past the user's speech) was last heard.
    heard_at: Option<MediaTime>,
}

#[derive(Debug)]
pub struct VadGate {
    config: VadGateConfig,
    state: State,
    room: Room,
    outputs: VecDeque<VadGateOutput>,
}

impl VadGate {
    pub fn new(config: VadGateConfig) -> VadGate {
        VadGate {
            config,
            state: State::Silent { onset: None, other: false },
            room: Room::default(),
            outputs: VecDeque::with_capacity(4),
        }
    }

    pub fn is_speaking(&self) -> bool {
        matches!(self.state, State::Speaking { .. })
    }

    /// Speech is beginning or going on, with no pause since its last confident window: the next audio is
    /// most likely more of it.
    pub fn is_mid_speech(&self) -> bool {
        matches!(self.state, State::Candidate { .. } | State::Speaking { paused: false, .. })
    }

    /// The end of the last window confidently speech, while speech goes on.
    pub fn last_confident(&self) -> Option<MediaTime> {
        match self.state {
            State::Speaking { last_confident, .. } => Some(last_confident),
            _ => None,
        }
    }

    /// One VAD window `[start, end)` with its speech probability.
    pub fn handle_window(&mut self, start: MediaTime, end: MediaTime, probability: f32) {
        self.handle_window_of(start, end, probability, Voice::User);
    }

    /// One VAD window and whose voice it is by its level (`core::other_voices`): another voice's never
    /// starts speech (the user's speech right after it may reach back over it), and carries the user's
    /// speech on only within `other_voice_grace` of the user's last loud window (`Voice::User`).
    pub fn handle_window_of(&mut self, start: MediaTime, end: MediaTime, probability: f32, voice: Voice) {
        let c = self.config;
        // Another voice ends the user's speech after the grace, a soft one after its longer limit. Neither
        // starts speech, and once a room has been heard neither does an unsure window: near the user's level
        // but not loud, it is the room's louder moment as often as the user's softer word (which their speech
        // then reaches back over, as over another voice's).
        let other = matches!(voice, Voice::Other | Voice::Soft);
        let cannot_start = other || voice == Voice::Unsure && self.room_heard(end);
        let confident = probability >= c.activation_threshold;
        let carried = probability >= c.deactivation_threshold;
        if voice == Voice::Other && carried && !self.is_speaking() {
            self.room_talks(start, end);
        }
        let limit = if !self.room_heard(end) {
            c.unheard_room_limit
        } else if voice == Voice::Soft {
            c.soft_voice_limit
        } else {
            c.other_voice_grace
        };
        self.state = match self.state {
            State::Silent { onset, other: other_in_onset } if !confident || cannot_start => {
                let onset = (probability >= c.onset_threshold).then(|| onset.unwrap_or(start));
                State::Silent { onset, other: onset.is_some() && (other_in_onset || cannot_start && confident) }
            }
            State::Candidate { onset, .. } if cannot_start && confident => {
                State::Silent { onset: Some(onset), other: true }
            }
            State::Candidate { .. } if !confident => {
                State::Silent { onset: (probability >= c.onset_threshold).then_some(start), other: false }
            }
            State::Silent { onset, other: other_in_onset } => {
                let onset = match onset {
                    Some(o) if other_in_onset && start - o <= c.other_voice_grace => o,
                    Some(o) => o.max(start - c.onset_lookback),
                    None => start,
                };
                self.confirm_if_long_enough(start, onset, end)
            }
            State::Candidate { start: first, onset } => self.confirm_if_long_enough(first, onset, end),
            State::Speaking { paused, last_own, .. } if other && end - last_own >= limit => {
                if !paused {
                    self.outputs.push_back(VadGateOutput::SpeechPaused { last_speech: last_own, observed_at: end });
                }
                self.outputs.push_back(VadGateOutput::SpeechEnded { last_speech: last_own, observed_at: end });
                self.room.heard_at = Some(end);
                // The voices heard since the user's last own window go on: not a soft first word.
                State::Silent { onset: Some(last_own), other: true }
            }
            State::Speaking { last_own, .. } if confident => {
                let last_own = if voice == Voice::User { end } else { last_own };
                State::Speaking { last_speech: end, last_confident: end, paused: false, last_own }
            }
            State::Speaking { last_confident, paused, last_own, .. } if carried => {
                State::Speaking { last_speech: end, last_confident, paused, last_own }
            }
            State::Speaking { last_speech, last_confident, paused, last_own } => {
                let silence = end - last_speech;
                if silence >= c.hangover {
                    self.outputs
                        .push_back(VadGateOutput::SpeechEnded { last_speech: last_confident, observed_at: end });
                    State::Silent { onset: None, other: false }
                } else if !paused && silence >= c.pause {
                    self.outputs
                        .push_back(VadGateOutput::SpeechPaused { last_speech: last_confident, observed_at: end });
                    State::Speaking { last_speech, last_confident, paused: true, last_own }
                } else {
                    State::Speaking { last_speech, last_confident, paused, last_own }
                }
            }
        };
    }

    /// A window of another voice while the user is not speaking, at or above the deactivation threshold
    /// (three voices talking at once score around the activation threshold, now above it, now below).
    fn room_talks(&mut self, start: MediaTime, end: MediaTime) {
        let first = match self.room.run {
            Some((first, last)) if start - last < self.config.hangover => first,
            _ => start,
        };
        self.room.run = Some((first, end));
        if end - first >= self.config.room_run {
            self.room.heard_at = Some(end);
        }
    }

    /// The room was talking into the start of the user's speech at `start`: a run of other voices at least
    /// `room_run` long (`room_talks`) reached within the hangover of it.
    pub fn room_talking_into(&self, start: MediaTime) -> bool {
        self.room
            .run
            .is_some_and(|(first, last)| last - first >= self.config.room_run && last + self.config.hangover > start)
    }

    /// A room has been heard talking within `room_memory` before `at`.
    fn room_heard(&self, at: MediaTime) -> bool {
        self.room.heard_at.is_some_and(|heard| at - heard <= self.config.room_memory)
    }

    fn confirm_if_long_enough(&mut self, first: MediaTime, onset: MediaTime, end: MediaTime) -> State {
        if end - first >= self.config.min_speech {
            self.outputs.push_back(VadGateOutput::SpeechStarted { start: onset, observed_at: end });
            State::Speaking { last_speech: end, last_confident: end, paused: false, last_own: end }
        } else {
            State::Candidate { start: first, onset }
        }
    }

    pub fn poll_output(&mut self) -> Option<VadGateOutput> {
        self.outputs.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = 512; // one 32 ms Silero window

    fn run(probabilities: &[f32]) -> Vec<VadGateOutput> {
        let windows: Vec<(f32, Voice)> = probabilities.iter().map(|&p| (p, Voice::User)).collect();
        run_of(&windows)
    }

    /// Windows as (probability, whose voice).
    fn run_of(windows: &[(f32, Voice)]) -> Vec<VadGateOutput> {
        let mut gate = VadGate::new(VadGateConfig::default());
        let mut out = Vec::new();
        for (i, &(p, voice)) in windows.iter().enumerate() {
            let start = MediaTime(i as u64 * W);
            gate.handle_window_of(start, MediaTime(start.0 + W), p, voice);
            while let Some(o) = gate.poll_output() {
                out.push(o);
            }
        }
        out
    }

    /// `n` windows of probability `p`, another voice's or the user's.
    fn windows(n: usize, p: f32, other: bool) -> Vec<(f32, Voice)> {
        vec![(p, if other { Voice::Other } else { Voice::User }); n]
    }

    /// Windows in `ROOM`: the next table talking 1.12 s (longer than `room_run`) while the user is silent,
    /// then silence.
    const ROOM: u64 = 45;

    /// `script` after a room has been heard talking (`ROOM` windows).
    fn after_a_room(script: Vec<(f32, Voice)>) -> Vec<(f32, Voice)> {
        let mut w = windows(35, 0.9, true);
        w.extend(windows(ROOM as usize - 35, 0.01, false));
        w.extend(script);
        w
    }

    fn started(start: u64, observed: u64) -> VadGateOutput {
        VadGateOutput::SpeechStarted { start: MediaTime(start * W), observed_at: MediaTime(observed * W) }
    }

    fn paused(last: u64, observed: u64) -> VadGateOutput {
        VadGateOutput::SpeechPaused { last_speech: MediaTime(last * W), observed_at: MediaTime(observed * W) }
    }

    fn ended(last: u64, observed: u64) -> VadGateOutput {
        VadGateOutput::SpeechEnded { last_speech: MediaTime(last * W), observed_at: MediaTime(observed * W) }
    }

    #[test]
    fn speech_is_reported_after_the_minimum_run_with_its_true_bounds() {
        let mut p = vec![0.01; 3];
        p.extend([0.9; 10]);
        p.extend([0.01; 12]);
        // Speech in windows 3..13; a pause after 96 ms = 3 windows; 256 ms = 8 windows of hangover.
        assert_eq!(run(&p), vec![started(3, 5), paused(13, 16), ended(13, 21)]);
    }

    #[test]
    fn a_soft_onset_extends_the_start_back_at_most_the_lookback() {
        // Windows 2..5 score between the onset and activation thresholds; speech proper from 5.
        let p = [0.01, 0.01, 0.2, 0.2, 0.2, 0.9, 0.9, 0.9];
        assert_eq!(run(&p), vec![started(3, 7)]);
        let p = [0.01, 0.15, 0.9, 0.9];
        assert_eq!(run(&p), vec![started(1, 4)]);
    }

    #[test]
    fn the_tail_between_thresholds_keeps_speech_open_but_is_not_reported() {
        let mut p = vec![0.9, 0.9, 0.9, 0.4, 0.4];
        p.extend([0.01; 8]);
        // Last confident window is 2 (ends at 3 W); the tail ends at 5 W and the pause and the hangover
        // count from there.
        assert_eq!(run(&p), vec![started(0, 2), paused(3, 8), ended(3, 13)]);
    }

    #[test]
    fn a_single_click_is_not_speech() {
        assert_eq!(run(&[0.01, 0.95, 0.01, 0.01, 0.9, 0.2]), vec![]);
    }

    #[test]
    fn short_pauses_do_not_split_speech() {
        let mut p = vec![0.8, 0.8, 0.4, 0.4, 0.8];
        p.extend([0.0; 7]); // 224 ms pause: shorter than the hangover
        p.extend([0.9; 2]);
        p.extend([0.0; 8]);
        // The first pause is reported (speech may have ended there), then speech goes on.
        assert_eq!(run(&p), vec![started(0, 2), paused(5, 8), paused(14, 17), ended(14, 22)]);
    }

    #[test]
    fn a_pause_is_reported_once_for_the_same_end_of_speech() {
        let mut p = vec![0.9; 3];
        p.extend([0.01; 3]);
        p.push(0.4); // a tail between the thresholds: speech still open, no new confident end
        p.extend([0.01; 8]);
        assert_eq!(run(&p), vec![started(0, 2), paused(3, 6), ended(3, 15)]);
    }

    #[test]
    fn other_voices_never_start_speech() {
        let mut w = windows(40, 0.9, true);
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&w), vec![]);
    }

    #[test]
    fn once_a_room_has_been_heard_only_a_loud_syllable_starts_speech() {
        let unsure = |n: usize| vec![(0.9, Voice::Unsure); n];
        // In a quiet room, windows near the user's level but not loud are their softer speech: they start it.
        let mut w = windows(10, 0.01, false);
        w.extend(unsure(10));
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&w)[0], started(10, 12));
        // After a room has been heard they are as often its louder moments: alone they start nothing...
        let mut w = unsure(10);
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&after_a_room(w)), vec![]);
        // ...and the user's loud syllable right after them starts speech that reaches back over them.
        let mut w = unsure(5);
        w.extend(windows(5, 0.9, false));
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&after_a_room(w))[0], started(ROOM, ROOM + 7));
    }

    #[test]
    fn the_users_speech_over_other_voices_starts_and_reaches_back_only_the_lookback() {
        let mut w = windows(40, 0.9, true);
        w.extend(windows(5, 0.9, false));
        w.extend(windows(10, 0.01, false));
        // The user from window 40, reported from 38 (the 64 ms lookback over the other voices' onset: they
        // have talked for longer than the grace).
        assert_eq!(run_of(&w), vec![started(38, 42), paused(45, 48), ended(45, 53)]);
    }

    #[test]
    fn the_room_talking_into_the_users_start_is_told() {
        let start_after = |w: &[(f32, Voice)]| {
            let mut gate = VadGate::new(VadGateConfig::default());
            for (i, &(p, voice)) in w.iter().enumerate() {
                let start = MediaTime(i as u64 * W);
                gate.handle_window_of(start, MediaTime(start.0 + W), p, voice);
                if let Some(VadGateOutput::SpeechStarted { start, .. }) = gate.poll_output() {
                    return Some((start, gate.room_talking_into(start)));
                }
            }
            None
        };
        // The room talking (longer than `room_run`) right up to the user's speech: told.
        let mut w = windows(40, 0.9, true);
        w.extend(windows(5, 0.9, false));
        assert_eq!(start_after(&w), Some((MediaTime(38 * W), true)));
        // The room stopped a hangover or more before: not told; nor in quiet; nor after a soft first word
        // (other voices shorter than `room_run`).
        let mut w = windows(40, 0.9, true);
        w.extend(windows(8, 0.01, false));
        w.extend(windows(5, 0.9, false));
        assert_eq!(start_after(&w), Some((MediaTime(48 * W), false)));
        assert_eq!(start_after(&windows(5, 0.9, false)), Some((MediaTime::ZERO, false)));
        let mut w = windows(10, 0.01, false);
        w.extend(windows(12, 0.9, true));
        w.extend(windows(5, 0.9, false));
        assert_eq!(start_after(&w), Some((MediaTime(10 * W), false)));
    }

    #[test]
    fn a_soft_first_word_right_after_silence_is_the_users() {
        // A soft first word (taken for another voice by its level) right after silence, then the user's
        // speech: it starts at the soft word.
        let mut w = windows(10, 0.01, false);
        w.extend(windows(12, 0.9, true));
        w.extend(windows(10, 0.9, false));
        assert_eq!(run_of(&w)[0], started(10, 24));
        // Other voices talking for longer than the grace before the user: only the lookback.
        let mut w = windows(10, 0.01, false);
        w.extend(windows(40, 0.9, true));
        w.extend(windows(10, 0.9, false));
        assert_eq!(run_of(&w)[0], started(48, 52));
    }

    #[test]
    fn a_soft_last_word_within_the_grace_is_the_users() {
        // The user's question, then a soft last word (taken for another voice by its level), then silence:
        // all one speech, ending at the soft word's end.
        let mut w = windows(20, 0.9, false);
        w.extend(windows(3, 0.01, false));
        w.extend(windows(8, 0.9, true));
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&w), vec![started(0, 2), paused(20, 23), paused(31, 34), ended(31, 39)]);
    }

    #[test]
    fn other_voices_going_on_past_the_grace_end_the_users_speech_at_the_users_last_window() {
        // The user speaks over the next table, stops; the table goes on: the user's speech ended at their
        // own last window, observed once the table has been heard alone for the grace (1 s = 31.25 windows).
        let mut w = windows(20, 0.9, false);
        w.extend(windows(60, 0.9, true));
        w.extend(windows(10, 0.01, false));
        let r = ROOM;
        assert_eq!(run_of(&after_a_room(w)), vec![started(r, r + 2), paused(r + 20, r + 52), ended(r + 20, r + 52)]);
        // The user resumes over them: a new speech, from the lookback.
        let mut w = windows(20, 0.9, false);
        w.extend(windows(40, 0.9, true));
        w.extend(windows(5, 0.9, false));
        assert_eq!(run_of(&after_a_room(w))[3], started(r + 58, r + 62));
    }

    #[test]
    fn without_a_room_heard_soft_windows_carry_the_users_speech_up_to_the_longer_limit() {
        // Nobody else has talked: 1.9 s of windows below the user's level after their last loud one are
        // their soft words, and the speech ends normally in the silence after them.
        let mut w = windows(20, 0.9, false);
        w.extend(windows(60, 0.9, true));
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&w), vec![started(0, 2), paused(80, 83), ended(80, 88)]);
        // A room that starts as the user speaks ends their speech at their last window once it has gone
        // on for 3 s (93.75 windows); from then on it has been heard, and the next time it ends the user's
        // speech after the 1 s grace.
        let mut w = windows(20, 0.9, false);
        w.extend(windows(100, 0.9, true));
        w.extend(windows(20, 0.9, false));
        w.extend(windows(40, 0.9, true));
        assert_eq!(
            run_of(&w),
            vec![started(0, 2), paused(20, 114), ended(20, 114), started(118, 122), paused(140, 172), ended(140, 172)]
        );
    }

    #[test]
    fn a_room_is_forgotten_after_its_memory() {
        // The room talked, then 31 s of silence (969 windows): the user's soft words carry on again.
        let mut w = windows(969, 0.01, false);
        w.extend(windows(20, 0.9, false));
        w.extend(windows(60, 0.9, true));
        w.extend(windows(10, 0.01, false));
        let r = ROOM + 969;
        assert_eq!(run_of(&after_a_room(w)), vec![started(r, r + 2), paused(r + 80, r + 83), ended(r + 80, r + 88)]);
    }

    #[test]
    fn soft_speech_in_the_users_voice_carries_it_up_to_its_limit_and_never_starts_it() {
        // Soft windows the voice check took for the user's: the speech goes on past the 1 s grace and ends
        // normally when silence follows (windows are 32 ms; times in windows).
        let mut w = windows(20, 0.9, false);
        w.extend(vec![(0.9, Voice::Soft); 40]);
        w.extend(windows(10, 0.01, false));
        assert_eq!(run_of(&w), vec![started(0, 2), paused(60, 63), ended(60, 68)]);
        // A room that sounds like the user keeps the speech on at most the limit (2 s = 62.5 windows).
        let mut w = windows(20, 0.9, false);
        w.extend(vec![(0.9, Voice::Soft); 100]);
        let r = ROOM;
        assert_eq!(run_of(&after_a_room(w)), vec![started(r, r + 2), paused(r + 20, r + 83), ended(r + 20, r + 83)]);
        // And never starts speech of its own.
        assert_eq!(run_of(&vec![(0.9, Voice::Soft); 50]), vec![]);
    }

    #[test]
    fn only_the_users_loud_windows_renew_the_grace() {
        // The room's louder moments (near the user's level, not loud: `Unsure`) between its other windows
        // do not keep the user's speech open past the grace after the user's last loud window.
        let mut w = windows(20, 0.9, false);
        for _ in 0..10 {
            w.extend(windows(4, 0.9, true));
            w.push((0.9, Voice::Unsure));
        }
        w.extend(windows(10, 0.01, false));
        let r = ROOM;
        assert_eq!(run_of(&after_a_room(w)), vec![started(r, r + 2), paused(r + 20, r + 52), ended(r + 20, r + 52)]);
    }
}
