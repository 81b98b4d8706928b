//! Interruption (barge-in): user speech over the agent's voice. While the user speaks over the agent,
//! playout pauses; once the speech has lasted `min_duration` (and, when required, produced at least one
//! word), the agent is interrupted: the epoch moves on, producers are cancelled and queued audio flushed.
//! Speech that stops sooner, or with no words, is a false interruption: playout resumes.

use std::collections::VecDeque;

use super::Epoch;
use crate::time::MediaTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterruptionConfig {
    /// Overlapping user speech must last this long to interrupt.
    pub min_duration: MediaTime,
    /// Also require at least one transcribed word (needs a streaming STT).
    pub require_words: bool,
}

impl Default for InterruptionConfig {
    fn default() -> Self {
        InterruptionConfig { min_duration: MediaTime::from_millis(500), require_words: false }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptionInput {
    AgentStartedSpeaking {
        at: MediaTime,
    },
    AgentStoppedSpeaking {
        at: MediaTime,
    },
    UserSpeechStarted {
        at: MediaTime,
    },
    UserSpeechEnded {
        at: MediaTime,
    },
    /// Words transcribed so far in the overlapping speech.
    UserWords {
        count: usize,
        at: MediaTime,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptionOutput {
    PausePlayout {
        at: MediaTime,
    },
    ResumePlayout {
        at: MediaTime,
    },
    /// The agent is interrupted; everything older than `epoch` is stale.
    Interrupted {
        at: MediaTime,
        epoch: Epoch,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Quiet,
    AgentSpeaking,
    /// The user started speaking over the agent at `since`.
    Overlap {
        since: MediaTime,
        words: usize,
    },
}

#[derive(Debug)]
pub struct InterruptionDetector {
    config: InterruptionConfig,
    state: State,
    epoch: Epoch,
    outputs: VecDeque<InterruptionOutput>,
}

impl InterruptionDetector {
    pub fn new(config: InterruptionConfig) -> InterruptionDetector {
        InterruptionDetector { config, state: State::Quiet, epoch: Epoch(0), outputs: VecDeque::with_capacity(4) }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Moves to the next epoch without an interruption (the agent's reply was abandoned: everything older
    /// is stale) and returns it.
    pub fn advance_epoch(&mut self) -> Epoch {
        self.epoch = Epoch(self.epoch.0 + 1);
        self.epoch
    }

    pub fn handle_input(&mut self, input: InterruptionInput) {
        use InterruptionInput::*;
        self.state = match (self.state, input) {
            (State::Quiet, AgentStartedSpeaking { .. }) => State::AgentSpeaking,
            (_, AgentStoppedSpeaking { .. }) => State::Quiet,
            (State::AgentSpeaking, UserSpeechStarted { at }) => {
                self.outputs.push_back(InterruptionOutput::PausePlayout { at });
                State::Overlap { since: at, words: 0 }
            }
            (State::Overlap { .. }, UserSpeechEnded { at }) => {
                self.outputs.push_back(InterruptionOutput::ResumePlayout { at });
                State::AgentSpeaking
            }
            (State::Overlap { since, .. }, UserWords { count, at }) => {
                let state = State::Overlap { since, words: count };
                self.state = state;
                self.handle_timeout(at);
                return;
            }
            (state, _) => state,
        };
    }

    /// When the overlap will have lasted long enough, if the user is speaking over the agent.
    pub fn poll_timeout(&self) -> Option<MediaTime> {
        match self.state {
            State::Overlap { since, words } if words > 0 || !self.config.require_words => {
                Some(since + self.config.min_duration)
            }
            _ => None,
        }
    }

    pub fn handle_timeout(&mut self, now: MediaTime) {
        if let Some(deadline) = self.poll_timeout()
            && now >= deadline
        {
            self.epoch = Epoch(self.epoch.0 + 1);
            self.outputs.push_back(InterruptionOutput::Interrupted { at: now, epoch: self.epoch });
            self.state = State::Quiet;
        }
    }

    pub fn poll_output(&mut self) -> Option<InterruptionOutput> {
        self.outputs.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use InterruptionInput::*;
    use InterruptionOutput::*;

    fn ms(v: u64) -> MediaTime {
        MediaTime::from_millis(v)
    }

    fn script(config: InterruptionConfig, inputs: &[InterruptionInput], until: MediaTime) -> Vec<InterruptionOutput> {
        let mut d = InterruptionDetector::new(config);
        let mut out = Vec::new();
        let at = |i: &InterruptionInput| match *i {
            AgentStartedSpeaking { at }
            | AgentStoppedSpeaking { at }
            | UserSpeechStarted { at }
            | UserSpeechEnded { at }
            | UserWords { at, .. } => at,
        };
        for input in inputs {
            if let Some(deadline) = d.poll_timeout().filter(|t| *t <= at(input)) {
                d.handle_timeout(deadline);
            }
            d.handle_input(*input);
            while let Some(o) = d.poll_output() {
                out.push(o);
            }
        }
        if let Some(deadline) = d.poll_timeout().filter(|t| *t <= until) {
            d.handle_timeout(deadline);
        }
        out.extend(std::iter::from_fn(|| d.poll_output()));
        out
    }

    #[test]
    fn long_overlap_interrupts_at_the_minimum_duration() {
        let out = script(
            InterruptionConfig::default(),
            &[AgentStartedSpeaking { at: ms(0) }, UserSpeechStarted { at: ms(1000) }],
            ms(5000),
        );
        assert_eq!(out, vec![PausePlayout { at: ms(1000) }, Interrupted { at: ms(1500), epoch: Epoch(1) }]);
    }

    #[test]
    fn short_overlap_is_a_false_interruption_and_resumes() {
        let out = script(
            InterruptionConfig::default(),
            &[AgentStartedSpeaking { at: ms(0) }, UserSpeechStarted { at: ms(1000) }, UserSpeechEnded { at: ms(1300) }],
            ms(5000),
        );
        assert_eq!(out, vec![PausePlayout { at: ms(1000) }, ResumePlayout { at: ms(1300) }]);
    }

    #[test]
    fn words_can_be_required() {
        let config = InterruptionConfig { require_words: true, ..Default::default() };
        let no_words = script(
            config,
            &[AgentStartedSpeaking { at: ms(0) }, UserSpeechStarted { at: ms(100) }, UserSpeechEnded { at: ms(2000) }],
            ms(5000),
        );
        assert_eq!(no_words, vec![PausePlayout { at: ms(100) }, ResumePlayout { at: ms(2000) }]);
        let late_words = script(
            config,
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(100) },
                UserWords { count: 2, at: ms(900) },
            ],
            ms(5000),
        );
        assert_eq!(late_words, vec![PausePlayout { at: ms(100) }, Interrupted { at: ms(900), epoch: Epoch(1) }]);
    }

    #[test]
    fn speech_while_the_agent_is_quiet_is_not_an_interruption() {
        let out = script(
            InterruptionConfig::default(),
            &[UserSpeechStarted { at: ms(0) }, AgentStartedSpeaking { at: ms(100) }],
            ms(5000),
        );
        assert_eq!(out, vec![]);
    }
}
