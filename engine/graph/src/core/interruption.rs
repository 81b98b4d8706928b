//! Interruption (barge-in): user speech over the agent's voice.
//!
//! With backchannels ignored (the default, `Backchannels::Ignore`), speech over the agent is judged by
//! what it says before it interrupts: the agent's voice dips (`DuckPlayout`) and, once the speech has
//! lasted `min_duration`, its transcript is asked for (`JudgeOverlap`) and asked again every
//! `JUDGE_EVERY` while it goes on. A word that is not a backchannel (`crate::core::backchannel`)
//! interrupts; so does speech that goes on past `MAX_BACKCHANNEL`. Speech that ends having said only
//! backchannels (or nothing: a laugh, a cough) leaves the agent talking (`Backchannel`): it is not a user
//! turn. When the agent stops before the judgement, or the speech cannot be transcribed, the speech is
//! handed on as ordinary user speech (`Released`), or interrupts by the duration rule.
//!
//! With `Backchannels::Interrupt` (the rule before backchannels were told apart), playout pauses while the
//! user speaks over the agent; once the speech has lasted `min_duration` (and, when required, produced at
//! least one word) the agent is interrupted. Speech that stops sooner is a false interruption: playout
//! resumes.
//!
//! An interruption moves the epoch on: producers are cancelled and queued audio flushed.

use std::collections::VecDeque;

use super::Epoch;
use crate::time::MediaTime;

/// Speech over the agent that goes on this long interrupts it, whatever it says.
pub const MAX_BACKCHANNEL: MediaTime = MediaTime::from_millis(1_500);
/// The first transcript of speech over the agent is asked for this long before it has lasted
/// `min_duration`, so that words that interrupt are known when it has (Moonshine takes 100–200 ms on a
/// loaded 2-core host); the interruption itself waits for `min_duration`.
pub const JUDGE_LEAD: MediaTime = MediaTime::from_millis(150);
/// ... but never before this much of it has been heard.
pub const MIN_JUDGED_SPEECH: MediaTime = MediaTime::from_millis(300);
/// While speech over the agent goes on, its transcript is asked for again this long after the last one
/// came back.
pub const JUDGE_EVERY: MediaTime = MediaTime::from_millis(200);
/// Speech over the agent whose transcript up to this long before its end said only backchannels is a
/// backchannel when it ends, without a last transcript; and while it goes on, it is judged again only once
/// more than this much new speech has been heard. No word fits in so little, and a speech-to-text model
/// asked again about the same sound with a few more milliseconds may hear words that are not there
/// (Moonshine heard espeak-ng's "yeah, right" as "Yeah, right." up to 96 ms before its end, "The F. Riot."
/// to its end).
pub const JUDGED_MARGIN: MediaTime = MediaTime::from_millis(100);
/// Once speech over the agent has ended, its transcript is waited for until this long after its last
/// speech; then the duration rule decides.
pub const JUDGE_PATIENCE: MediaTime = MediaTime::from_millis(1_000);

/// What speech over the agent made only of backchannels ("mm-hmm", "yeah", "okay") does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backchannels {
    /// The agent goes on talking; the speech is not a user turn.
    #[default]
    Ignore,
    /// Any speech over the agent that lasts `min_duration` interrupts it.
    Interrupt,
}

impl Backchannels {
    pub fn parse(name: &str) -> Option<Backchannels> {
        match name {
            "ignore" => Some(Backchannels::Ignore),
            "interrupt" => Some(Backchannels::Interrupt),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterruptionConfig {
    /// Overlapping user speech must last this long to interrupt (with backchannels ignored: before its
    /// words are first judged).
    pub min_duration: MediaTime,
    /// Also require at least one transcribed word (needs a streaming STT).
    pub require_words: bool,
    pub backchannels: Backchannels,
}

impl Default for InterruptionConfig {
    fn default() -> Self {
        InterruptionConfig {
            min_duration: MediaTime::from_millis(500),
            require_words: false,
            backchannels: Backchannels::Ignore,
        }
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
    /// The user's speech ended at `at` (its last speech), known at `observed_at`.
    UserSpeechEnded {
        at: MediaTime,
        observed_at: MediaTime,
    },
    /// Words transcribed so far in the overlapping speech.
    UserWords {
        count: usize,
        at: MediaTime,
    },
    /// The speech over the agent has been heard, confidently speech, until `to`.
    UserSpeechUntil {
        to: MediaTime,
    },
    /// The answer to `JudgeOverlap { to, .. }`, known at `at`: whether the speech said only backchannels;
    /// `None` when it could not be transcribed.
    OverlapJudged {
        to: MediaTime,
        backchannel: Option<bool>,
        at: MediaTime,
    },
}

/// Why speech over the agent interrupted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptReason {
    /// It lasted `min_duration` (backchannels interrupt).
    Overlap,
    /// It said something other than backchannels.
    Words,
    /// It went on past `MAX_BACKCHANNEL`.
    TooLong,
    /// It could not be transcribed in time and lasted `min_duration`.
    Unjudged,
}

impl InterruptReason {
    pub fn name(self) -> &'static str {
        match self {
            InterruptReason::Overlap => "overlap",
            InterruptReason::Words => "words",
            InterruptReason::TooLong => "too_long",
            InterruptReason::Unjudged => "unjudged",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptionOutput {
    PausePlayout {
        at: MediaTime,
    },
    ResumePlayout {
        at: MediaTime,
    },
    /// The agent's voice dips while the speech over it is judged.
    DuckPlayout {
        at: MediaTime,
    },
    /// The agent's voice back to its level.
    RestorePlayout {
        at: MediaTime,
    },
    /// Transcribe the user's audio `[from, to)` and answer with `OverlapJudged`.
    JudgeOverlap {
        from: MediaTime,
        to: MediaTime,
    },
    /// The speech over the agent since `since` was a backchannel, decided at `at`: the agent goes on, and
    /// the speech is not a user turn.
    Backchannel {
        since: MediaTime,
        at: MediaTime,
    },
    /// The speech since `since` was not judged (the agent stopped first, or it was short and could not be
    /// transcribed): it is ordinary user speech.
    Released {
        since: MediaTime,
    },
    /// The agent is interrupted by the speech since `since`; everything older than `epoch` is stale.
    Interrupted {
        since: MediaTime,
        at: MediaTime,
        epoch: Epoch,
        reason: InterruptReason,
    },
}

/// Speech over the agent being judged (backchannels ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Judging {
    since: MediaTime,
    /// The end of the audio whose transcript is awaited, when one is.
    asked_to: Option<MediaTime>,
    /// When to ask for the transcript again while the speech goes on.
    next: MediaTime,
    /// The end of the audio last judged to be only backchannels.
    heard_to: Option<MediaTime>,
    /// The end of the last speech heard so far (`UserSpeechUntil`): a transcript is asked for up to there,
    /// not into the silence after it (where a speech-to-text model may hear words that are not there).
    speech_to: MediaTime,
    /// The speech's last speech, once it has ended.
    ended: Option<MediaTime>,
    /// Words that interrupt were heard before the speech had lasted `min_duration`: it interrupts then.
    interrupt_at: Option<MediaTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Quiet,
    AgentSpeaking,
    /// The user started speaking over the agent at `since` (backchannels interrupt).
    Overlap {
        since: MediaTime,
        words: usize,
    },
    Judging(Judging),
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

    /// Whether speech over the agent is being judged (its outcome not yet known).
    pub fn is_judging(&self) -> bool {
        matches!(self.state, State::Judging(_))
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
            (State::Judging(judging), AgentStoppedSpeaking { .. }) => {
                self.outputs.push_back(InterruptionOutput::Released { since: judging.since });
                State::Quiet
            }
            (_, AgentStoppedSpeaking { .. }) => State::Quiet,
            (State::AgentSpeaking, UserSpeechStarted { at }) => match self.config.backchannels {
                Backchannels::Interrupt => {
                    self.outputs.push_back(InterruptionOutput::PausePlayout { at });
                    State::Overlap { since: at, words: 0 }
                }
                Backchannels::Ignore => {
                    self.outputs.push_back(InterruptionOutput::DuckPlayout { at });
                    let min = self.config.min_duration;
                    let first = min.saturating_sub(JUDGE_LEAD).max(min.min(MIN_JUDGED_SPEECH));
                    State::Judging(Judging {
                        since: at,
                        asked_to: None,
                        next: at + first,
                        heard_to: None,
                        speech_to: at,
                        ended: None,
                        interrupt_at: None,
                    })
                }
            },
            // The speech over the agent resumed before it was judged: the same overlap goes on.
            (State::Judging(judging), UserSpeechStarted { .. }) => State::Judging(Judging { ended: None, ..judging }),
            (State::Overlap { .. }, UserSpeechEnded { at, .. }) => {
                self.outputs.push_back(InterruptionOutput::ResumePlayout { at });
                State::AgentSpeaking
            }
            (State::Judging(judging), UserSpeechEnded { observed_at, .. }) if judging.interrupt_at.is_some() => {
                self.interrupt(judging.since, observed_at, InterruptReason::Words);
                return;
            }
            (State::Judging(mut judging), UserSpeechEnded { at, observed_at }) => {
                judging.ended = Some(at);
                if judging.heard_to.is_some_and(|heard| heard + JUDGED_MARGIN >= at) {
                    // What was judged already covers the speech.
                    self.backchannel(judging.since, observed_at);
                    return;
                }
                if judging.asked_to.is_none() {
                    self.ask(&mut judging, at);
                }
                State::Judging(judging)
            }
            (State::Judging(judging), UserSpeechUntil { to }) => {
                State::Judging(Judging { speech_to: judging.speech_to.max(to), ..judging })
            }
            (State::Overlap { since, .. }, UserWords { count, at }) => {
                self.state = State::Overlap { since, words: count };
                self.handle_timeout(at);
                return;
            }
            (State::Judging(judging), OverlapJudged { to, backchannel, at }) if judging.asked_to == Some(to) => {
                self.judged(Judging { asked_to: None, ..judging }, to, backchannel, at);
                self.handle_timeout(at);
                return;
            }
            (state, _) => state,
        };
    }

    /// Asks for the transcript of the speech being judged, up to `to`.
    fn ask(&mut self, judging: &mut Judging, to: MediaTime) {
        judging.asked_to = Some(to);
        self.outputs.push_back(InterruptionOutput::JudgeOverlap { from: judging.since, to });
    }

    /// The transcript of the speech up to `to` said only backchannels (`Some(true)`), more, or could not
    /// be made.
    fn judged(&mut self, mut judging: Judging, to: MediaTime, backchannel: Option<bool>, at: MediaTime) {
        let lasted = judging.ended.unwrap_or(to).saturating_sub(judging.since);
        match (backchannel, judging.ended) {
            (Some(false), None) if at < judging.since + self.config.min_duration => {
                judging.interrupt_at = Some(judging.since + self.config.min_duration);
                self.state = State::Judging(judging);
            }
            (Some(false), _) => self.interrupt(judging.since, at, InterruptReason::Words),
            (None, _) if lasted >= self.config.min_duration => {
                self.interrupt(judging.since, at, InterruptReason::Unjudged)
            }
            (None, Some(_)) => self.release(judging.since),
            (Some(true), Some(end)) if to >= end => self.backchannel(judging.since, at),
            (Some(true), Some(end)) => {
                self.ask(&mut judging, end);
                self.state = State::Judging(judging);
            }
            (_, None) => {
                judging.next = at + JUDGE_EVERY;
                if backchannel == Some(true) {
                    judging.heard_to = Some(to);
                }
                self.state = State::Judging(judging);
            }
        }
    }

    /// The speech since `since` said only backchannels: the agent goes on at its level.
    fn backchannel(&mut self, since: MediaTime, at: MediaTime) {
        self.outputs.push_back(InterruptionOutput::RestorePlayout { at });
        self.outputs.push_back(InterruptionOutput::Backchannel { since, at });
        self.state = State::AgentSpeaking;
    }

    fn interrupt(&mut self, since: MediaTime, at: MediaTime, reason: InterruptReason) {
        self.epoch = Epoch(self.epoch.0 + 1);
        self.outputs.push_back(InterruptionOutput::Interrupted { since, at, epoch: self.epoch, reason });
        self.state = State::Quiet;
    }

    /// The speech is handed on unjudged; the agent goes on at its level.
    fn release(&mut self, since: MediaTime) {
        self.outputs.push_back(InterruptionOutput::RestorePlayout { at: since });
        self.outputs.push_back(InterruptionOutput::Released { since });
        self.state = State::AgentSpeaking;
    }

    /// When the overlap will have lasted long enough, a transcript is due, or one is waited for too long.
    pub fn poll_timeout(&self) -> Option<MediaTime> {
        match self.state {
            State::Overlap { since, words } if words > 0 || !self.config.require_words => {
                Some(since + self.config.min_duration)
            }
            State::Judging(Judging { interrupt_at: Some(at), .. }) => Some(at),
            State::Judging(Judging { ended: Some(end), .. }) => Some(end + JUDGE_PATIENCE),
            State::Judging(Judging { since, asked_to, next, ended: None, .. }) => {
                let too_long = since + MAX_BACKCHANNEL;
                Some(if asked_to.is_none() { next.min(too_long) } else { too_long })
            }
            _ => None,
        }
    }

    pub fn handle_timeout(&mut self, now: MediaTime) {
        if self.poll_timeout().is_none_or(|deadline| now < deadline) {
            return;
        }
        match self.state {
            State::Overlap { since, .. } => self.interrupt(since, now, InterruptReason::Overlap),
            State::Judging(Judging { since, interrupt_at: Some(_), .. }) => {
                self.interrupt(since, now, InterruptReason::Words)
            }
            State::Judging(judging) => match judging.ended {
                Some(end) if end.saturating_sub(judging.since) >= self.config.min_duration => {
                    self.interrupt(judging.since, now, InterruptReason::Unjudged)
                }
                Some(_) => self.release(judging.since),
                None if now >= judging.since + MAX_BACKCHANNEL => {
                    self.interrupt(judging.since, now, InterruptReason::TooLong)
                }
                None => {
                    let mut judging = judging;
                    let judged_to = judging.heard_to.map_or(judging.since, |heard| heard + JUDGED_MARGIN);
                    if judging.speech_to > judged_to {
                        let to = judging.speech_to;
                        self.ask(&mut judging, to);
                    } else {
                        judging.next = now + JUDGE_EVERY; // too little new speech to hold a word
                    }
                    self.state = State::Judging(judging);
                }
            },
            _ => {}
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

    const INTERRUPT: InterruptionConfig = InterruptionConfig {
        min_duration: MediaTime::from_millis(500),
        require_words: false,
        backchannels: Backchannels::Interrupt,
    };

    /// Runs `inputs` in order, each after the timeouts due before its time, then the timeouts due until
    /// `until`.
    fn script(config: InterruptionConfig, inputs: &[InterruptionInput], until: MediaTime) -> Vec<InterruptionOutput> {
        let mut d = InterruptionDetector::new(config);
        let mut out = Vec::new();
        let at = |i: &InterruptionInput| match *i {
            AgentStartedSpeaking { at }
            | AgentStoppedSpeaking { at }
            | UserSpeechStarted { at }
            | UserSpeechEnded { observed_at: at, .. }
            | UserWords { at, .. }
            | UserSpeechUntil { to: at }
            | OverlapJudged { at, .. } => at,
        };
        for input in inputs {
            while let Some(deadline) = d.poll_timeout().filter(|t| *t < at(input)) {
                d.handle_timeout(deadline);
                out.extend(std::iter::from_fn(|| d.poll_output()));
            }
            d.handle_input(*input);
            out.extend(std::iter::from_fn(|| d.poll_output()));
        }
        while let Some(deadline) = d.poll_timeout().filter(|t| *t <= until) {
            d.handle_timeout(deadline);
            out.extend(std::iter::from_fn(|| d.poll_output()));
        }
        out
    }

    #[test]
    fn long_overlap_interrupts_at_the_minimum_duration() {
        let out =
            script(INTERRUPT, &[AgentStartedSpeaking { at: ms(0) }, UserSpeechStarted { at: ms(1000) }], ms(5000));
        assert_eq!(
            out,
            vec![
                PausePlayout { at: ms(1000) },
                Interrupted { since: ms(1000), at: ms(1500), epoch: Epoch(1), reason: InterruptReason::Overlap }
            ]
        );
    }

    #[test]
    fn short_overlap_is_a_false_interruption_and_resumes() {
        let out = script(
            INTERRUPT,
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                UserSpeechEnded { at: ms(1300), observed_at: ms(1300) },
            ],
            ms(5000),
        );
        assert_eq!(out, vec![PausePlayout { at: ms(1000) }, ResumePlayout { at: ms(1300) }]);
    }

    #[test]
    fn words_can_be_required() {
        let config = InterruptionConfig { require_words: true, ..INTERRUPT };
        let no_words = script(
            config,
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(100) },
                UserSpeechEnded { at: ms(2000), observed_at: ms(2000) },
            ],
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
        assert_eq!(
            late_words,
            vec![
                PausePlayout { at: ms(100) },
                Interrupted { since: ms(100), at: ms(900), epoch: Epoch(1), reason: InterruptReason::Overlap }
            ]
        );
    }

    #[test]
    fn speech_while_the_agent_is_quiet_is_not_an_interruption() {
        for config in [INTERRUPT, InterruptionConfig::default()] {
            let out =
                script(config, &[UserSpeechStarted { at: ms(0) }, AgentStartedSpeaking { at: ms(100) }], ms(5000));
            assert_eq!(out, vec![]);
        }
    }

    /// "Mm-hmm" over the agent, 0.74 s: judged 350 ms in ("mm", `JUDGE_LEAD` before the 500 ms minimum),
    /// again once it ended, a backchannel both times: the voice dips and comes back, nothing is interrupted.
    #[test]
    fn a_backchannel_dips_the_voice_and_leaves_the_agent_talking() {
        let judged = |to: u64, at: u64| OverlapJudged { to: ms(to), backchannel: Some(true), at: ms(at) };
        let out = script(
            InterruptionConfig::default(),
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                UserSpeechUntil { to: ms(1340) },
                judged(1340, 1400),
                UserSpeechUntil { to: ms(1740) },
                UserSpeechEnded { at: ms(1740), observed_at: ms(1740) },
                judged(1740, 2050),
            ],
            ms(9000),
        );
        assert_eq!(
            out,
            vec![
                DuckPlayout { at: ms(1000) },
                JudgeOverlap { from: ms(1000), to: ms(1340) },
                JudgeOverlap { from: ms(1000), to: ms(1740) },
                RestorePlayout { at: ms(2050) },
                Backchannel { since: ms(1000), at: ms(2050) },
            ]
        );
    }

    /// "Wait, stop": the first transcript has a word that is not a backchannel. Known before the speech has
    /// lasted the minimum, it interrupts at the minimum; known after, when it is known.
    #[test]
    fn a_word_that_is_not_a_backchannel_interrupts_when_it_is_heard() {
        for (known, interrupted) in [(1400, 1500), (1540, 1540)] {
            let out = script(
                InterruptionConfig::default(),
                &[
                    AgentStartedSpeaking { at: ms(0) },
                    UserSpeechStarted { at: ms(1000) },
                    UserSpeechUntil { to: ms(1340) },
                    OverlapJudged { to: ms(1340), backchannel: Some(false), at: ms(known) },
                ],
                ms(9000),
            );
            let reason = InterruptReason::Words;
            assert_eq!(
                out,
                vec![
                    DuckPlayout { at: ms(1000) },
                    JudgeOverlap { from: ms(1000), to: ms(1340) },
                    Interrupted { since: ms(1000), at: ms(interrupted), epoch: Epoch(1), reason },
                ]
            );
        }
    }

    /// "Yeah, yeah, yeah…" that goes on: asked again 200 ms after each answer (up to the speech heard by
    /// then), interrupted at 1.5 s.
    #[test]
    fn backchannels_that_go_on_past_the_limit_interrupt() {
        let judged = |to: u64, at: u64| OverlapJudged { to: ms(to), backchannel: Some(true), at: ms(at) };
        let mut inputs = vec![AgentStartedSpeaking { at: ms(0) }, UserSpeechStarted { at: ms(1000) }];
        for to in [1340, 1590, 1840, 2090, 2340] {
            inputs.extend([UserSpeechUntil { to: ms(to) }, judged(to, to + 50)]);
        }
        let out = script(InterruptionConfig::default(), &inputs, ms(9000));
        let asked = [1340, 1590, 1840, 2090, 2340].map(|to| JudgeOverlap { from: ms(1000), to: ms(to) });
        let reason = InterruptReason::TooLong;
        let expected: Vec<InterruptionOutput> = [DuckPlayout { at: ms(1000) }]
            .into_iter()
            .chain(asked)
            .chain([Interrupted { since: ms(1000), at: ms(2500), epoch: Epoch(1), reason }])
            .collect();
        assert_eq!(out, expected);
    }

    /// A short "no" (0.3 s): judged once it ended, and it interrupts then.
    #[test]
    fn a_short_word_is_judged_when_it_ends() {
        let out = script(
            InterruptionConfig::default(),
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                UserSpeechEnded { at: ms(1300), observed_at: ms(1300) },
                OverlapJudged { to: ms(1300), backchannel: Some(false), at: ms(1590) },
            ],
            ms(9000),
        );
        assert_eq!(
            out,
            vec![
                DuckPlayout { at: ms(1000) },
                JudgeOverlap { from: ms(1000), to: ms(1300) },
                Interrupted { since: ms(1000), at: ms(1590), epoch: Epoch(1), reason: InterruptReason::Words },
            ]
        );
    }

    /// No transcript can be made (no speech-to-text): short speech is handed on as user speech, speech
    /// that lasted the minimum duration interrupts; a transcript that never comes is waited for until
    /// `JUDGE_PATIENCE` after the speech.
    #[test]
    fn speech_that_cannot_be_judged_falls_back_to_the_duration_rule() {
        let short = script(
            InterruptionConfig::default(),
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                UserSpeechEnded { at: ms(1300), observed_at: ms(1300) },
                OverlapJudged { to: ms(1300), backchannel: None, at: ms(1310) },
            ],
            ms(9000),
        );
        assert_eq!(short[2..], [RestorePlayout { at: ms(1000) }, Released { since: ms(1000) }]);
        let long = script(
            InterruptionConfig::default(),
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                UserSpeechUntil { to: ms(1340) },
                OverlapJudged { to: ms(1340), backchannel: None, at: ms(1360) },
                UserSpeechUntil { to: ms(1540) },
                OverlapJudged { to: ms(1540), backchannel: None, at: ms(1580) },
            ],
            ms(9000),
        );
        assert_eq!(
            long[2..],
            [
                JudgeOverlap { from: ms(1000), to: ms(1540) },
                Interrupted { since: ms(1000), at: ms(1580), epoch: Epoch(1), reason: InterruptReason::Unjudged }
            ]
        );
        let never = script(
            InterruptionConfig::default(),
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                UserSpeechEnded { at: ms(1700), observed_at: ms(1700) },
            ],
            ms(9000),
        );
        assert_eq!(
            never[1..],
            [
                JudgeOverlap { from: ms(1000), to: ms(1700) },
                Interrupted { since: ms(1000), at: ms(2700), epoch: Epoch(1), reason: InterruptReason::Unjudged }
            ]
        );
    }

    /// The agent finishes its sentence while the speech over it is judged: the speech is the user's.
    #[test]
    fn speech_the_agent_stops_for_is_handed_on() {
        let out = script(
            InterruptionConfig::default(),
            &[
                AgentStartedSpeaking { at: ms(0) },
                UserSpeechStarted { at: ms(1000) },
                AgentStoppedSpeaking { at: ms(1200) },
            ],
            ms(9000),
        );
        assert_eq!(out, vec![DuckPlayout { at: ms(1000) }, Released { since: ms(1000) }]);
    }
}
