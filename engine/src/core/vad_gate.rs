//! VAD gating: turns per-window speech probabilities into speech start and stop, with hysteresis
//! (separate activation and deactivation thresholds), a minimum speech run that rejects clicks, and a
//! hangover of silence before speech counts as stopped.
//!
//! Event times are the speech bounds themselves: the start of the first speech window, and the end of
//! the last speech window. They are observed later (after the minimum run, after the hangover); the
//! output carries both.

use std::collections::VecDeque;

use crate::time::MediaTime;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VadGateConfig {
    /// Probability at or above which a window counts as speech while silent.
    pub activation_threshold: f32,
    /// Probability below which a window counts as silence while speaking.
    pub deactivation_threshold: f32,
    /// Speech must last this long before it is reported (rejects clicks and coughs).
    pub min_speech: MediaTime,
    /// Silence must last this long after the last speech window before speech is reported stopped.
    pub hangover: MediaTime,
}

impl Default for VadGateConfig {
    fn default() -> Self {
        VadGateConfig {
            activation_threshold: 0.5,
            deactivation_threshold: 0.35,
            min_speech: MediaTime::from_millis(64),
            hangover: MediaTime::from_millis(256),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadGateOutput {
    /// Speech began at `start`; known at `observed_at`.
    SpeechStarted {
        start: MediaTime,
        observed_at: MediaTime,
    },
    /// Speech ended at `last_speech` (end of the last speech window); known at `observed_at`.
    SpeechEnded {
        last_speech: MediaTime,
        observed_at: MediaTime,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Silent,
    /// Speech windows seen since `start`, not yet long enough to report.
    Candidate {
        start: MediaTime,
    },
    Speaking {
        last_speech: MediaTime,
    },
}

#[derive(Debug)]
pub struct VadGate {
    config: VadGateConfig,
    state: State,
    outputs: VecDeque<VadGateOutput>,
}

impl VadGate {
    pub fn new(config: VadGateConfig) -> VadGate {
        VadGate {
            config,
            state: State::Silent,
            outputs: VecDeque::with_capacity(4),
        }
    }

    pub fn is_speaking(&self) -> bool {
        matches!(self.state, State::Speaking { .. })
    }

    /// One VAD window `[start, end)` with its speech probability.
    pub fn handle_window(&mut self, start: MediaTime, end: MediaTime, probability: f32) {
        let c = self.config;
        self.state = match self.state {
            State::Silent | State::Candidate { .. } if probability < c.activation_threshold => {
                State::Silent
            }
            State::Silent => self.confirm_if_long_enough(start, end),
            State::Candidate { start: candidate } => self.confirm_if_long_enough(candidate, end),
            State::Speaking { .. } if probability >= c.deactivation_threshold => {
                State::Speaking { last_speech: end }
            }
            State::Speaking { last_speech } => {
                if end - last_speech >= c.hangover {
                    self.outputs.push_back(VadGateOutput::SpeechEnded {
                        last_speech,
                        observed_at: end,
                    });
                    State::Silent
                } else {
                    State::Speaking { last_speech }
                }
            }
        };
    }

    fn confirm_if_long_enough(&mut self, start: MediaTime, end: MediaTime) -> State {
        if end - start >= self.config.min_speech {
            self.outputs.push_back(VadGateOutput::SpeechStarted {
                start,
                observed_at: end,
            });
            State::Speaking { last_speech: end }
        } else {
            State::Candidate { start }
        }
    }

    /// The input has ended: speech still open is closed at its last speech window.
    pub fn finish(&mut self, now: MediaTime) {
        if let State::Speaking { last_speech } = self.state {
            self.outputs.push_back(VadGateOutput::SpeechEnded {
                last_speech,
                observed_at: now,
            });
        }
        self.state = State::Silent;
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

    #[test]
    fn speech_is_reported_after_the_minimum_run_with_its_true_start() {
        let mut p = vec![0.1; 3];
        p.extend([0.9; 10]);
        p.extend([0.1; 12]);
        assert_eq!(
            run(&p),
            vec![
                VadGateOutput::SpeechStarted {
                    start: MediaTime(3 * W),
                    observed_at: MediaTime(5 * W)
                },
                // last speech window ends at 13 W; 256 ms = 8 windows of hangover.
                VadGateOutput::SpeechEnded {
                    last_speech: MediaTime(13 * W),
                    observed_at: MediaTime(21 * W)
                },
            ]
        );
    }

    #[test]
    fn a_single_click_is_not_speech() {
        assert_eq!(run(&[0.1, 0.95, 0.1, 0.1, 0.9, 0.2]), vec![]);
    }

    #[test]
    fn hysteresis_keeps_speech_open_between_thresholds_and_short_pauses_do_not_split() {
        let mut p = vec![0.8, 0.8, 0.4, 0.4, 0.8];
        p.extend([0.0; 7]); // 224 ms pause: shorter than the hangover
        p.extend([0.9; 2]);
        p.extend([0.0; 8]);
        assert_eq!(
            run(&p),
            vec![
                VadGateOutput::SpeechStarted {
                    start: MediaTime(0),
                    observed_at: MediaTime(2 * W)
                },
                VadGateOutput::SpeechEnded {
                    last_speech: MediaTime(14 * W),
                    observed_at: MediaTime(22 * W)
                },
            ]
        );
    }

    #[test]
    fn finish_closes_open_speech() {
        let mut gate = VadGate::new(VadGateConfig::default());
        for i in 0..4 {
            gate.handle_window(MediaTime(i * W), MediaTime((i + 1) * W), 0.9);
        }
        gate.poll_output();
        gate.finish(MediaTime(4 * W));
        assert_eq!(
            gate.poll_output(),
            Some(VadGateOutput::SpeechEnded {
                last_speech: MediaTime(4 * W),
                observed_at: MediaTime(4 * W)
            })
        );
    }
}
