//! Endpointing: decides when the user's turn is over.
//!
//! After speech ends, the turn is committed `min_delay` after the last speech frame when the turn model
//! (or its absence) says the user is done, and `max_delay` after it when the model says the user will
//! continue. Until the model answers, the conservative `max_delay` deadline stands; an answer that
//! arrives after its deadline commits at once. New speech cancels a pending commit.

use std::collections::VecDeque;

use super::TurnId;
use crate::time::MediaTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointConfig {
    pub min_delay: MediaTime,
    pub max_delay: MediaTime,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(3000) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointInput {
    SpeechStarted {
        at: MediaTime,
    },
    SpeechEnded {
        last_speech: MediaTime,
        observed_at: MediaTime,
    },
    /// The turn model's verdict on the speech that ended at `last_speech`, known at `observed_at`.
    TurnPrediction {
        last_speech: MediaTime,
        user_done: bool,
        observed_at: MediaTime,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointOutput {
    /// Ask the turn model about the turn's audio up to `last_speech`.
    PredictTurn { turn: TurnId, last_speech: MediaTime },
    /// The user's turn is over at `at`.
    Commit { turn: TurnId, at: MediaTime, last_speech: MediaTime },
    /// New speech at `at` cancelled a pending commit; the turn goes on.
    CommitCancelled { turn: TurnId, at: MediaTime },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Speaking,
    Pending { last_speech: MediaTime, deadline: MediaTime },
}

#[derive(Debug)]
pub struct Endpointer {
    config: EndpointConfig,
    state: State,
    turn: TurnId,
    outputs: VecDeque<EndpointOutput>,
}

impl Endpointer {
    pub fn new(config: EndpointConfig) -> Endpointer {
        Endpointer { config, state: State::Idle, turn: TurnId(1), outputs: VecDeque::with_capacity(4) }
    }

    /// The turn currently being spoken or awaiting commit.
    pub fn current_turn(&self) -> TurnId {
        self.turn
    }

    pub fn handle_input(&mut self, input: EndpointInput) {
        match (self.state, input) {
            (State::Pending { .. }, EndpointInput::SpeechStarted { at }) => {
                self.outputs.push_back(EndpointOutput::CommitCancelled { turn: self.turn, at });
                self.state = State::Speaking;
            }
            (_, EndpointInput::SpeechStarted { .. }) => self.state = State::Speaking,
            (State::Speaking, EndpointInput::SpeechEnded { last_speech, observed_at }) => {
                self.state = State::Pending { last_speech, deadline: last_speech + self.config.max_delay };
                self.outputs.push_back(EndpointOutput::PredictTurn { turn: self.turn, last_speech });
                self.handle_timeout(observed_at);
            }
            (
                State::Pending { last_speech, .. },
                EndpointInput::TurnPrediction { last_speech: about, user_done, observed_at },
            ) if about == last_speech => {
                let delay = if user_done { self.config.min_delay } else { self.config.max_delay };
                self.state = State::Pending { last_speech, deadline: last_speech + delay };
                self.handle_timeout(observed_at);
            }
            // Stale predictions (speech resumed since) and stray ends are ignored.
            _ => {}
        }
    }

    /// When `handle_timeout` must next be called, if a commit is pending.
    pub fn poll_timeout(&self) -> Option<MediaTime> {
        match self.state {
            State::Pending { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    /// Commits when `now` has reached the deadline; a late call commits at `now`.
    pub fn handle_timeout(&mut self, now: MediaTime) {
        if let State::Pending { last_speech, deadline } = self.state
            && now >= deadline
        {
            self.outputs.push_back(EndpointOutput::Commit { turn: self.turn, at: now.max(deadline), last_speech });
            self.turn = TurnId(self.turn.0 + 1);
            self.state = State::Idle;
        }
    }

    pub fn poll_output(&mut self) -> Option<EndpointOutput> {
        self.outputs.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EndpointInput::*;
    use EndpointOutput::*;

    fn ms(v: u64) -> MediaTime {
        MediaTime::from_millis(v)
    }

    /// Feeds `(time, input)` in order, firing timeouts that fall before each input, then up to `until`.
    fn script(inputs: &[(u64, EndpointInput)], until: u64) -> Vec<(u64, EndpointOutput)> {
        let mut e = Endpointer::new(EndpointConfig::default());
        let mut out = Vec::new();
        let drain = |e: &mut Endpointer, now: u64, out: &mut Vec<(u64, EndpointOutput)>| {
            while let Some(o) = e.poll_output() {
                out.push((now, o));
            }
        };
        for &(t, input) in inputs {
            while let Some(deadline) = e.poll_timeout().filter(|d| *d <= ms(t)) {
                e.handle_timeout(deadline);
                drain(&mut e, deadline.0 / 16, &mut out);
            }
            e.handle_input(input);
            drain(&mut e, t, &mut out);
        }
        while let Some(deadline) = e.poll_timeout().filter(|d| *d <= ms(until)) {
            e.handle_timeout(deadline);
            drain(&mut e, deadline.0 / 16, &mut out);
        }
        out
    }

    #[test]
    fn done_commits_min_delay_after_last_speech() {
        let out = script(
            &[
                (100, SpeechStarted { at: ms(100) }),
                (1356, SpeechEnded { last_speech: ms(1100), observed_at: ms(1356) }),
                (1400, TurnPrediction { last_speech: ms(1100), user_done: true, observed_at: ms(1400) }),
            ],
            10_000,
        );
        assert_eq!(
            out,
            vec![
                (1356, PredictTurn { turn: TurnId(1), last_speech: ms(1100) }),
                (1600, Commit { turn: TurnId(1), at: ms(1600), last_speech: ms(1100) }),
            ]
        );
    }

    #[test]
    fn continuing_waits_max_delay_and_new_speech_cancels() {
        let out = script(
            &[
                (0, SpeechStarted { at: ms(0) }),
                (1256, SpeechEnded { last_speech: ms(1000), observed_at: ms(1256) }),
                (1300, TurnPrediction { last_speech: ms(1000), user_done: false, observed_at: ms(1300) }),
                (2500, SpeechStarted { at: ms(2500) }),
                // The stale verdict about the first pause is ignored.
                (2600, TurnPrediction { last_speech: ms(1000), user_done: true, observed_at: ms(2600) }),
                (3256, SpeechEnded { last_speech: ms(3000), observed_at: ms(3256) }),
                (3300, TurnPrediction { last_speech: ms(3000), user_done: false, observed_at: ms(3300) }),
            ],
            20_000,
        );
        assert_eq!(
            out,
            vec![
                (1256, PredictTurn { turn: TurnId(1), last_speech: ms(1000) }),
                (2500, CommitCancelled { turn: TurnId(1), at: ms(2500) }),
                (3256, PredictTurn { turn: TurnId(1), last_speech: ms(3000) }),
                (6000, Commit { turn: TurnId(1), at: ms(6000), last_speech: ms(3000) }),
            ]
        );
    }

    #[test]
    fn without_a_verdict_the_max_delay_stands_and_late_verdicts_commit_at_once() {
        let silent_model = script(
            &[(0, SpeechStarted { at: ms(0) }), (756, SpeechEnded { last_speech: ms(500), observed_at: ms(756) })],
            10_000,
        );
        assert_eq!(silent_model.last(), Some(&(3500, Commit { turn: TurnId(1), at: ms(3500), last_speech: ms(500) })));

        let late = script(
            &[
                (0, SpeechStarted { at: ms(0) }),
                (756, SpeechEnded { last_speech: ms(500), observed_at: ms(756) }),
                (1400, TurnPrediction { last_speech: ms(500), user_done: true, observed_at: ms(1400) }),
            ],
            10_000,
        );
        assert_eq!(late.last(), Some(&(1400, Commit { turn: TurnId(1), at: ms(1400), last_speech: ms(500) })));
    }

    #[test]
    fn turns_are_numbered() {
        let out = script(
            &[
                (0, SpeechStarted { at: ms(0) }),
                (756, SpeechEnded { last_speech: ms(500), observed_at: ms(756) }),
                (760, TurnPrediction { last_speech: ms(500), user_done: true, observed_at: ms(760) }),
                (2000, SpeechStarted { at: ms(2000) }),
                (2756, SpeechEnded { last_speech: ms(2500), observed_at: ms(2756) }),
                (2760, TurnPrediction { last_speech: ms(2500), user_done: true, observed_at: ms(2760) }),
            ],
            10_000,
        );
        let commits: Vec<_> = out
            .iter()
            .filter_map(|(_, o)| if let Commit { turn, at, .. } = o { Some((*turn, *at)) } else { None })
            .collect();
        assert_eq!(commits, vec![(TurnId(1), ms(1000)), (TurnId(2), ms(3000))]);
    }
}
