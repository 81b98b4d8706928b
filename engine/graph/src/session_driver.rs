//! The one session driver: it applies a conversation's outputs (`ConversationOutput`) and the agent's results
//! (`AgentResult`) for the runtime's media thread (`runtime::media`), which every call runs on — the join
//! page, the fleet's workers, meeting bots, and `confab simulate` (a recording played to the stepped or the
//! threaded runtime). The bookkeeping lives here once: each turn's stage times (`TurnMetricsLog`), what the
//! agent was heard to say (for its next prompt), which turns are over. The host says only where the work
//! runs (`SessionHost`): the session's agent (a task on the I/O runtime, or in line when stepped) and the
//! inference threads (or their in-line stand-ins).

use crate::conversation::{Conversation, ConversationOutput, OverlapDecision};
use crate::core::playout::PlayoutPiece;
use crate::core::{Epoch, TurnId};
use crate::events::{ConversationEvent, EventKind};
use crate::time::MediaTime;
use crate::turn_metrics::{ReplyTimings, TranscriptTiming, TurnMetrics, TurnMetricsLog};

/// What the agent's work hands back to its session.
pub enum AgentResult {
    /// The committed turn's text, and how long speech-to-text took (`turn_metrics`).
    Transcript { turn: TurnId, text: String, timing: Option<TranscriptTiming> },
    /// A sentence's audio as it arrives (`PlayoutPiece`).
    Segment(PlayoutPiece),
    /// An event of the reply (`tool_call`), stamped when the session takes it; dropped there when `epoch`
    /// (the reply that began what it reports) was interrupted.
    Event { epoch: Epoch, kind: EventKind },
    /// The reply is complete; the provider stages it went through (`turn_metrics`).
    ReplyEnd { turn: TurnId, timings: ReplyTimings },
    /// The transcript of the user's speech over the agent up to `to` (`SessionHost::judge_overlap`);
    /// `None` when it could not be made.
    OverlapWords { to: MediaTime, text: Option<String> },
}

/// Everything the session's work answers, entering the session through one door
/// (`DrivenSession::handle_input`), whichever thread or task computed it.
pub enum SessionInput {
    /// The VAD's speech probability for the user's audio `[start, end)`, and the audio's level (dBFS) when
    /// known.
    VadWindow { start: MediaTime, end: MediaTime, probability: f32, level: Option<f32> },
    /// A voiceprint of the user's audio up to `end` (a voice check: `core::other_voices`).
    Voiceprint { end: MediaTime, print: confab_models::voice_encoder::Voiceprint },
    /// The turn model's verdict on the speech that ended at `last_speech`.
    TurnVerdict { last_speech: MediaTime, user_done: bool },
    /// A result of the agent's work.
    Agent(AgentResult),
}

/// Where a session's work runs. Every method is called by `DrivenSession::drive` after its bookkeeping.
pub trait SessionHost {
    /// The media time the host stands at: the session's clock live, the paced clock in a simulation.
    fn now(&self) -> MediaTime;
    /// A conversation event, to its consumer.
    fn event(&mut self, event: ConversationEvent);
    /// Turns whose stage times are complete.
    fn turns_over(&mut self, turns: Vec<TurnMetrics>);
    /// What the user heard of the agent's last words (`agent.stopped_speaking`), for its next prompt.
    fn heard(&mut self, text: &str);
    /// Start speech-to-text of the turn's audio `[from, to)` ahead of its commit (and, with it, the early
    /// reply); nothing is answered: the commit's `transcribe` takes the result when it covers its audio.
    fn prepare_transcript(&mut self, session: &mut DrivenSession, from: MediaTime, to: MediaTime);
    /// Run the turn model on the user's audio up to `last_speech` and answer with
    /// `Conversation::turn_prediction`.
    fn predict_turn(&mut self, session: &mut DrivenSession, last_speech: MediaTime);
    /// Transcribe the committed turn, audio `[from, to)`, and answer with `AgentResult::Transcript`
    /// (`DrivenSession::apply`); with no way to transcribe, an empty text at `at`.
    fn transcribe(&mut self, session: &mut DrivenSession, turn: TurnId, from: MediaTime, to: MediaTime, at: MediaTime);
    /// Answer the committed turn: its reply's results, ending with `AgentResult::ReplyEnd`.
    fn respond(&mut self, session: &mut DrivenSession, turn: TurnId, epoch: Epoch, user_text: String);
    /// Stop producing anything older than `epoch`.
    fn cancel_reply(&mut self, epoch: Epoch);
    /// Transcribe the user's speech over the agent, audio `[from, to)`, and answer with
    /// `AgentResult::OverlapWords` (with no way to transcribe, `None` at once).
    fn judge_overlap(&mut self, session: &mut DrivenSession, from: MediaTime, to: MediaTime);
    /// What speech over the agent came to (counted and logged; `turn_metrics` has it already).
    fn overlap_decided(&mut self, decision: &OverlapDecision);
}

/// A conversation and its turns' stage times: the state every host drives the same way.
pub struct DrivenSession {
    pub conversation: Conversation,
    pub metrics: TurnMetricsLog,
}

impl DrivenSession {
    pub fn new(conversation: Conversation, metrics: TurnMetricsLog) -> DrivenSession {
        DrivenSession { conversation, metrics }
    }

    /// Applies one answer of the session's work as of media time `now` (then `drive` applies what it led to).
    pub fn handle_input(&mut self, input: SessionInput, now: MediaTime) {
        match input {
            SessionInput::VadWindow { start, end, probability, level } => {
                self.conversation.vad_window_at_level(start, end, probability, level)
            }
            SessionInput::Voiceprint { end, print } => self.conversation.voiceprint(end, print),
            SessionInput::TurnVerdict { last_speech, user_done } => {
                self.conversation.turn_prediction(last_speech, user_done, now)
            }
            SessionInput::Agent(result) => self.apply(result, now),
        }
    }

    fn apply(&mut self, result: AgentResult, now: MediaTime) {
        match result {
            AgentResult::Transcript { turn, text, timing } => {
                self.metrics.transcript(turn, now, timing);
                self.conversation.transcript(turn, text, now);
            }
            AgentResult::Segment(segment) => self.conversation.agent_segment(segment),
            AgentResult::Event { epoch, kind } => self.conversation.agent_event(now, epoch, kind),
            AgentResult::ReplyEnd { turn, timings } => {
                self.metrics.reply(turn, timings);
                self.conversation.agent_reply_end(turn, now);
            }
            AgentResult::OverlapWords { to, text } => self.conversation.overlap_words(to, text, now),
        }
    }

    /// Applies every output the conversation has, through `host`.
    pub fn drive(&mut self, host: &mut impl SessionHost) {
        while let Some(output) = self.conversation.poll_output() {
            match output {
                ConversationOutput::Event(event) => self.event(event, host),
                ConversationOutput::PrepareTranscript { from, to, .. } => host.prepare_transcript(self, from, to),
                ConversationOutput::PredictTurn { turn, last_speech, .. } => {
                    self.metrics.speech_ended(turn, last_speech);
                    host.predict_turn(self, last_speech);
                }
                ConversationOutput::Transcribe { turn, from, to, at } => {
                    let superseded = self.metrics.committed(turn, at);
                    if !superseded.is_empty() {
                        host.turns_over(superseded);
                    }
                    host.transcribe(self, turn, from, to, at);
                }
                ConversationOutput::Respond { turn, epoch, user_text } => {
                    self.metrics.llm_request(turn, host.now());
                    host.respond(self, turn, epoch, user_text);
                }
                ConversationOutput::CancelReply { epoch } => host.cancel_reply(epoch),
                ConversationOutput::JudgeOverlap { from, to } => host.judge_overlap(self, from, to),
                ConversationOutput::OverlapDecided(decision) => {
                    host.overlap_decided(&decision);
                    self.metrics.overlap(decision);
                }
                ConversationOutput::EndCall { .. } => {}
            }
        }
    }

    /// An event's bookkeeping, then the event. The call's end closes every open turn before its event;
    /// `agent.stopped_speaking` closes the turn it ends after its event.
    fn event(&mut self, event: ConversationEvent, host: &mut impl SessionHost) {
        let at = MediaTime::from_duration(event.media_time);
        let mut after = Vec::new();
        match &event.kind {
            EventKind::AgentStartedSpeaking { .. } => self.metrics.started_speaking(at),
            EventKind::AgentInterrupted => self.metrics.interrupted(at),
            EventKind::AgentStoppedSpeaking { text } => {
                host.heard(text);
                after.extend(self.metrics.stopped_speaking());
            }
            EventKind::CallEnded => {
                let open = self.metrics.finish_all();
                if !open.is_empty() {
                    host.turns_over(open);
                }
            }
            _ => {}
        }
        host.event(event);
        if !after.is_empty() {
            host.turns_over(after);
        }
    }
}
