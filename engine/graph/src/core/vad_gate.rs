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

use std::collections::VecDeque;

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
    /// `onset`: start of the current run of windows at or above the onset threshold.
    Silent { onset: Option<MediaTime> },
    /// Speech since `start` (reported from `onset`), not yet long enough to report.
    Candidate { start: MediaTime, onset: MediaTime },
    /// `last_speech`: end of the last window above deactivation (decides the stop);
    /// `last_confident`: end of the last window above activation (is reported); `paused`: a pause after
    /// `last_confident` has been reported.
    Speaking { last_speech: MediaTime, last_confident: MediaTime, paused: bool },
}

#[derive(Debug)]
pub struct VadGate {
    config: VadGateConfig,
    state: State,
    outputs: VecDeque<VadGateOutput>,
}

impl VadGate {
    pub fn new(config: VadGateConfig) -> VadGate {
        VadGate { config, state: State::Silent { onset: None }, outputs: VecDeque::with_capacity(4) }
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
        self.handle_window_of(start, end, probability, false);
    }

    /// One VAD window, `other` when it is another voice's (`core::other_voices`): such a window neither
    /// starts speech nor carries it on, but its probability still marks an onset that the user's speech
    /// right after it reaches back over.
    pub fn handle_window_of(&mut self, start: MediaTime, end: MediaTime, probability: f32, other: bool) {
        let c = self.config;
        let active = !other && probability >= c.activation_threshold;
        let carried = !other && probability >= c.deactivation_threshold;
        self.state = match (self.state, active) {
            (State::Silent { onset }, false) => {
                State::Silent { onset: (probability >= c.onset_threshold).then(|| onset.unwrap_or(start)) }
            }
            (State::Candidate { .. }, false) => {
                State::Silent { onset: (probability >= c.onset_threshold).then_some(start) }
            }
            (State::Silent { onset }, true) => {
                let onset = onset.map(|o| o.max(start - c.onset_lookback)).unwrap_or(start);
                self.confirm_if_long_enough(start, onset, end)
            }
            (State::Candidate { start: first, onset }, true) => self.confirm_if_long_enough(first, onset, end),
            (State::Speaking { last_confident, paused, .. }, _) if carried => match active {
                true => State::Speaking { last_speech: end, last_confident: end, paused: false },
                false => State::Speaking { last_speech: end, last_confident, paused },
            },
            (State::Speaking { last_speech, last_confident, paused }, _) => {
                let silence = end - last_speech;
                if silence >= c.hangover {
                    self.outputs
                        .push_back(VadGateOutput::SpeechEnded { last_speech: last_confident, observed_at: end });
                    State::Silent { onset: None }
                } else if !paused && silence >= c.pause {
                    self.outputs
                        .push_back(VadGateOutput::SpeechPaused { last_speech: last_confident, observed_at: end });
                    State::Speaking { last_speech, last_confident, paused: true }
                } else {
                    State::Speaking { last_speech, last_confident, paused }
                }
            }
        };
    }

    fn confirm_if_long_enough(&mut self, first: MediaTime, onset: MediaTime, end: MediaTime) -> State {
        if end - first >= self.config.min_speech {
            self.outputs.push_back(VadGateOutput::SpeechStarted { start: onset, observed_at: end });
            State::Speaking { last_speech: end, last_confident: end, paused: false }
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
        let mut gate = VadGate::new(VadGateConfig::default());
        let mut out = Vec::new();
        for (i, p) in probabilities.iter().enumerate() {
            let start = MediaTime(i as u64 * W);
            gate.handle_window(start, MediaTime(start.0 + W), *p);
            while let Some(o) = gate.poll_output() {
                out.push(o);
            }
        }
        out
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
}
