//! One conversation's turn-taking, composed from the core state machines: VAD windows in, events and
//! requests to the providers out. Sans-IO like its parts: the driver feeds media-time-stamped inputs,
//! drains `poll_output`, and calls `handle_timeout` at `poll_timeout`.
//!
//! Requests (`PrepareTranscript`, `PredictTurn`, `Transcribe`, `Respond`, `CancelReply`) name audio by
//! media-time ranges; the driver owns the audio and the models and answers with `turn_prediction`,
//! `transcript`, and the agent's segments.
//!
//! Speech over the agent is judged before it interrupts (`crate::core::interruption`, backchannels ignored):
//! its VAD outputs are held back from the endpointer, so a backchannel ("mm-hmm") opens no user turn, and
//! handed on once it interrupts (or is handed on unjudged). `JudgeOverlap` asks for its transcript; the
//! decision, with its reason and words, comes out as `OverlapDecided`.
//!
//! Speech-to-text (and the reply, with preemptive generation) may start on a turn before it is committed:
//! `PrepareTranscript` is asked at the VAD's first short pause (the user may be done), and again at the end
//! of speech when the audio differs (the user went on); the commit of the same audio finds it done.

use std::collections::VecDeque;

use crate::audio::denoise::NoiseSuppression;
use crate::core::backchannel::{goes_on_from, only_backchannels};
use crate::core::call_timer::{CallTimer, CallTimerOutput};
use crate::core::endpoint::{EndpointConfig, EndpointInput, EndpointOutput, Endpointer};
use crate::core::interruption::{InterruptionConfig, InterruptionDetector, InterruptionInput, InterruptionOutput};
use crate::core::other_voices::{OtherVoices, Voice, VoiceLevels};
use crate::core::playout::{Playout, PlayoutOutput, PlayoutPiece};
use crate::core::vad_gate::{VadGate, VadGateConfig, VadGateOutput};
use crate::core::{Epoch, TurnId};
use crate::events::{ConversationEvent, EventKind};
use crate::time::MediaTime;
use confab_models::voice_encoder::Voiceprint;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ConversationConfig {
    pub vad: VadGateConfig,
    pub endpoint: EndpointConfig,
    pub interruption: InterruptionConfig,
    pub max_call_duration: Option<MediaTime>,
    /// Whether the user's audio is denoised before the VAD and speech-to-text hear it (the media front
    /// end applies it; the conversation sees the audio it hears).
    pub noise_suppression: NoiseSuppression,
    /// Whether, once the user has been heard, voices well below their level are not the user's
    /// (`core::other_voices`, the default) or every voice is.
    pub other_voices: OtherVoices,
}

/// Audio handed to speech-to-text starts this long before the turn's detected start: a soft first
/// consonant ("wh", "h", "f") can score below the VAD's thresholds, or arrive just after a network
/// hiccup, and a word cut at its onset is misheard ("What is…" became "But is…" in a loaded browser
/// call). Speech-to-text takes the leading silence in its stride.
pub const STT_PRE_ROLL: MediaTime = MediaTime::from_millis(300);
/// The pre-roll when the room was talking into the start of the user's speech (`VadGate::room_talking_into`):
/// those 300 ms were the room's words ("Because of what do bees make?"), so speech-to-text reads from just
/// before the start (which already reaches back over the VAD's onset windows).
pub const STT_PRE_ROLL_OVER_THE_ROOM: MediaTime = MediaTime::from_millis(64);
/// Starts of speech the room talked into, newest last (a few turns' worth).
const ROOM_STARTS_KEPT: usize = 8;

/// The turn model hears the speech and this much of the silence after it. Its reference pipeline (pipecat,
/// with the 0.2 s VAD stop it recommends beside Smart Turn) hands it every chunk up to the VAD's stop,
/// trailing silence included; cut at the last speech frame instead, the model heard half of the 20 spoken
/// questions of `voice_to_voice` as unfinished, and 6 of them with this tail (`docs/performance.md`).
/// Shorter than the VAD gate's hangover, so the tail has been heard when the model is asked.
pub const TURN_MODEL_TAIL: MediaTime = MediaTime::from_millis(200);

/// Where the audio the turn model judges for the speech that ended at `last_speech` ends.
pub fn turn_model_end(last_speech: MediaTime) -> MediaTime {
    last_speech + TURN_MODEL_TAIL
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConversationOutput {
    Event(ConversationEvent),
    /// Speech may have ended at `to`: transcribe the turn's audio `[from, to)` ahead of the commit (read
    /// from `transcription_start(from)`), and with it start the reply. A later request for the same turn
    /// supersedes it; the commit names the audio it ends up with (`Transcribe`).
    PrepareTranscript {
        turn: TurnId,
        from: MediaTime,
        to: MediaTime,
    },
    /// Run the turn model on the user's audio up to `last_speech`; the turn's speech began at `from`.
    PredictTurn {
        turn: TurnId,
        from: MediaTime,
        last_speech: MediaTime,
    },
    /// Transcribe the user's turn, audio `[from, to)` (read from `transcription_start(from)`); the turn
    /// was committed at `at`.
    Transcribe {
        turn: TurnId,
        from: MediaTime,
        to: MediaTime,
        at: MediaTime,
    },
    /// Answer the user's committed turn; produce segments stamped with `epoch`.
    Respond {
        turn: TurnId,
        epoch: Epoch,
        user_text: String,
    },
    /// Stop producing anything older than `epoch`.
    CancelReply {
        epoch: Epoch,
    },
    /// The call is over (max duration reached).
    EndCall {
        at: MediaTime,
    },
    /// Transcribe the user's speech over the agent, audio `[from, to)` (read from
    /// `transcription_start(from)`), and answer with `Conversation::overlap_words`.
    JudgeOverlap {
        from: MediaTime,
        to: MediaTime,
    },
    /// What speech over the agent came to, and why.
    OverlapDecided(OverlapDecision),
}

/// The outcome of speech over the agent: it interrupted the agent, or was a backchannel the agent talked on
/// through (`turn_metrics`, `/metrics`, the log).
#[derive(Debug, Clone, PartialEq)]
pub struct OverlapDecision {
    /// When the speech began, and when it was decided.
    pub since: MediaTime,
    pub at: MediaTime,
    pub interrupted: bool,
    /// `backchannel`, or why it interrupted (`InterruptReason::name`).
    pub reason: &'static str,
    /// The last transcript of the speech (empty when none was made).
    pub words: String,
}

pub struct Conversation {
    vad: VadGate,
    endpoint: Endpointer,
    interruption: InterruptionDetector,
    playout: Playout,
    timer: Option<CallTimer>,
    /// Start of the current user turn's speech.
    turn_start: Option<MediaTime>,
    /// Starts of the user's speech that the room talked into (`STT_PRE_ROLL_OVER_THE_ROOM`), newest last.
    room_starts: VecDeque<MediaTime>,
    /// The audio of the current turn last asked to be transcribed ahead (`PrepareTranscript`).
    prepared: Option<(MediaTime, MediaTime)>,
    ended: bool,
    /// The committed turn whose transcript has been asked for and not arrived.
    awaiting_transcript: Option<TurnId>,
    /// The turn whose reply has been asked for and not finished.
    awaiting_reply: Option<TurnId>,
    /// The VAD's outputs for speech over the agent while it is judged: handed on to the endpointer when it
    /// interrupts (or is released), dropped when it was a backchannel.
    held: Vec<VadGateOutput>,
    /// The last transcript of the speech being judged.
    overlap_words: String,
    /// Its last transcript that said only backchannels.
    backchannel_heard: Option<String>,
    /// The end of the agent's last rendered frame.
    rendered_to: MediaTime,
    /// The user's level and the room's: other voices well below the user are not the user.
    voices: VoiceLevels,
    /// A VAD probability at or above this is speech (the gate's activation threshold).
    speech_probability: f32,
    /// `ConversationConfig::other_voices`.
    other_voices: OtherVoices,
    outputs: VecDeque<ConversationOutput>,
}

impl Conversation {
    pub fn new(config: ConversationConfig) -> Conversation {
        Conversation {
            vad: VadGate::new(config.vad),
            endpoint: Endpointer::new(config.endpoint),
            interruption: InterruptionDetector::new(config.interruption),
            playout: Playout::new(),
            timer: config.max_call_duration.map(CallTimer::new),
            turn_start: None,
            room_starts: VecDeque::with_capacity(ROOM_STARTS_KEPT),
            prepared: None,
            ended: false,
            awaiting_transcript: None,
            awaiting_reply: None,
            held: Vec::new(),
            overlap_words: String::new(),
            backchannel_heard: None,
            rendered_to: MediaTime::ZERO,
            voices: VoiceLevels::default(),
            speech_probability: config.vad.activation_threshold,
            other_voices: config.other_voices,
            outputs: VecDeque::with_capacity(16),
        }
    }

    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// True while a user turn is beginning, being spoken or awaits commit, its transcript or reply is
    /// awaited, or the agent has audio to play.
    pub fn is_busy(&self) -> bool {
        self.vad.is_speaking()
            || self.vad.is_mid_speech()
            || self.endpoint.poll_timeout().is_some()
            || self.awaiting_transcript.is_some()
            || self.awaiting_reply.is_some()
            || self.playout.has_audio()
    }

    /// The user is mid-speech (`VadGate::is_mid_speech`) while the agent has nothing to play: a gap in the
    /// user's audio now is late delivery more likely than silence, and worth waiting for (the live media
    /// thread holds the session's clock for it rather than hear silence in the middle of a word).
    pub fn would_wait_for_user_audio(&self) -> bool {
        !self.ended && self.vad.is_mid_speech() && !self.playout.has_audio()
    }

    fn event(&mut self, at: MediaTime, kind: EventKind) {
        self.outputs.push_back(ConversationOutput::Event(ConversationEvent { media_time: at.as_duration(), kind }));
    }

    /// One VAD window `[start, end)` of user audio and its speech probability (its level unknown: nothing
    /// is taken for another voice).
    pub fn vad_window(&mut self, start: MediaTime, end: MediaTime, probability: f32) {
        self.vad_window_at_level(start, end, probability, None);
    }

    /// One VAD window `[start, end)` of user audio, its speech probability and its level (dBFS), by which
    /// speech well below the user's own is taken for another voice (`core::other_voices`).
    pub fn vad_window_at_level(&mut self, start: MediaTime, end: MediaTime, probability: f32, level: Option<f32>) {
        if self.ended {
            return;
        }
        let speech = probability >= self.speech_probability;
        let voice = match level {
            Some(level) if self.other_voices == OtherVoices::Ignore => self.voices.voice_of(level, end, speech),
            _ => Voice::User,
        };
        self.handle_timeout(start);
        self.vad.handle_window_of(start, end, probability, voice);
        self.drain_vad();
        if let Some(to) = self.vad.last_confident().filter(|_| self.interruption.is_judging()) {
            self.interruption.handle_input(InterruptionInput::UserSpeechUntil { to });
        }
    }

    /// Where the audio speech-to-text reads for speech that began at `from` starts: `STT_PRE_ROLL` before
    /// it, or `STT_PRE_ROLL_OVER_THE_ROOM` when the room was talking into it.
    pub fn transcription_start(&self, from: MediaTime) -> MediaTime {
        let over_the_room = self.room_starts.contains(&from);
        from.saturating_sub(if over_the_room { STT_PRE_ROLL_OVER_THE_ROOM } else { STT_PRE_ROLL })
    }

    /// Whether the call wants voice checks (`voiceprint`): it tells the user's voice from other voices.
    pub fn wants_voiceprints(&self) -> bool {
        self.other_voices == OtherVoices::Ignore && !self.ended
    }

    /// A voiceprint of the user's audio up to `end` (`core::other_voices`, voice checks).
    pub fn voiceprint(&mut self, end: MediaTime, print: Voiceprint) {
        if self.wants_voiceprints() {
            let speaking = self.turn_start.is_some() || self.vad.is_speaking();
            self.voices.voiceprint(end, print, speaking);
        }
    }

    fn drain_vad(&mut self) {
        while let Some(output) = self.vad.poll_output() {
            match output {
                VadGateOutput::SpeechStarted { start, .. } => {
                    if self.vad.room_talking_into(start) {
                        if self.room_starts.len() == ROOM_STARTS_KEPT {
                            self.room_starts.pop_front();
                        }
                        self.room_starts.push_back(start);
                    }
                    self.interruption.handle_input(InterruptionInput::UserSpeechStarted { at: start });
                    if self.interruption.is_judging() {
                        if self.held.is_empty() {
                            self.overlap_words.clear();
                            self.backchannel_heard = None;
                        }
                        self.held.push(output);
                    } else {
                        self.user_speech(output);
                    }
                }
                VadGateOutput::SpeechPaused { .. } | VadGateOutput::SpeechEnded { .. } => {
                    if self.held.is_empty() {
                        self.user_speech(output);
                    } else {
                        self.held.push(output);
                    }
                    if let VadGateOutput::SpeechEnded { last_speech, observed_at } = output {
                        let ended = InterruptionInput::UserSpeechEnded { at: last_speech, observed_at };
                        self.interruption.handle_input(ended);
                    }
                }
            }
            self.drain_machines();
        }
    }

    /// The user's speech as a turn: its events, the endpointer, transcripts ahead.
    fn user_speech(&mut self, output: VadGateOutput) {
        match output {
            VadGateOutput::SpeechStarted { start, .. } => {
                self.event(start, EventKind::UserStartedSpeaking);
                if self.turn_start.is_none() {
                    // What was heard since the last turn (a backchannel, speech talked over) is not the user's.
                    self.voices.speech_dropped();
                }
                self.turn_start.get_or_insert(start);
                self.endpoint.handle_input(EndpointInput::SpeechStarted { at: start });
            }
            VadGateOutput::SpeechPaused { last_speech, .. } => self.prepare_transcript(last_speech),
            VadGateOutput::SpeechEnded { last_speech, observed_at } => {
                self.event(last_speech, EventKind::UserStoppedSpeaking);
                self.endpoint.handle_input(EndpointInput::SpeechEnded { last_speech, observed_at });
            }
        }
    }

    /// The speech held back while it was judged becomes the user's (it interrupted, or was not judged).
    fn hand_on_held_speech(&mut self) {
        for output in std::mem::take(&mut self.held) {
            self.user_speech(output);
        }
    }

    fn overlap_decided(&mut self, since: MediaTime, at: MediaTime, interrupted: bool, reason: &'static str) {
        let words = std::mem::take(&mut self.overlap_words);
        self.backchannel_heard = None;
        self.outputs.push_back(ConversationOutput::OverlapDecided(OverlapDecision {
            since,
            at,
            interrupted,
            reason,
            words,
        }));
    }

    /// Asks for the current turn's audio up to `to` to be transcribed ahead, unless it has been already.
    fn prepare_transcript(&mut self, to: MediaTime) {
        let range = (self.turn_start.unwrap_or(MediaTime::ZERO), to);
        if self.prepared != Some(range) {
            self.prepared = Some(range);
            let turn = self.endpoint.current_turn();
            self.outputs.push_back(ConversationOutput::PrepareTranscript { turn, from: range.0, to });
        }
    }

    /// The turn model's probability that the user is done with the speech that ended at `last_speech`.
    pub fn turn_prediction(&mut self, last_speech: MediaTime, user_done: bool, observed_at: MediaTime) {
        self.endpoint.handle_input(EndpointInput::TurnPrediction { last_speech, user_done, observed_at });
        self.drain_machines();
    }

    /// Words transcribed so far in speech overlapping the agent (streaming STT).
    pub fn user_words(&mut self, count: usize, at: MediaTime) {
        self.interruption.handle_input(InterruptionInput::UserWords { count, at });
        self.drain_machines();
    }

    /// The transcript of the user's speech over the agent up to `to` (`JudgeOverlap`), known at `at`; `None`
    /// when it could not be made. A transcript that says more than backchannels interrupts when it goes on
    /// from the last one that said only backchannels ("Yeah, right." → "Yeah, right, wait."); one that
    /// hears the same sound as other words ("Yeah, right." → "The F. Riot.", Moonshine on a few more
    /// milliseconds of it) is the model changing its mind, not the user: the earlier hearing stands.
    pub fn overlap_words(&mut self, to: MediaTime, text: Option<String>, at: MediaTime) {
        let backchannel = text.map(|text| {
            if only_backchannels(&text) {
                self.backchannel_heard = Some(text.clone());
                self.overlap_words = text;
                return true;
            }
            match &self.backchannel_heard {
                Some(heard) if !goes_on_from(&text, heard) => true,
                _ => {
                    self.overlap_words = text;
                    false
                }
            }
        });
        self.interruption.handle_input(InterruptionInput::OverlapJudged { to, backchannel, at });
        self.drain_machines();
    }

    /// The final transcript of a committed turn: emits `utterance_committed` and asks for a reply.
    pub fn transcript(&mut self, turn: TurnId, text: String, at: MediaTime) {
        if self.awaiting_transcript == Some(turn) {
            self.awaiting_transcript = None;
        }
        self.event(at, EventKind::UtteranceCommitted { text: text.clone() });
        if !text.trim().is_empty() {
            let epoch = self.interruption.epoch();
            self.awaiting_reply = Some(turn);
            self.outputs.push_back(ConversationOutput::Respond { turn, epoch, user_text: text });
        }
    }

    /// A sentence's audio, or more of it, for playout.
    pub fn agent_segment(&mut self, piece: PlayoutPiece) {
        self.playout.push(piece);
    }

    /// An event the agent's side observed while replying (a `tool_call`), stamped `at`; dropped when the
    /// reply of `epoch` was interrupted (or the call is over), as its audio is.
    pub fn agent_event(&mut self, at: MediaTime, epoch: Epoch, kind: EventKind) {
        if !self.ended && epoch >= self.interruption.epoch() {
            self.event(at, kind);
        }
    }

    pub fn agent_reply_end(&mut self, turn: TurnId, now: MediaTime) {
        if self.awaiting_reply == Some(turn) {
            self.awaiting_reply = None;
        }
        self.playout.end_of_reply(turn, now);
        self.drain_machines();
    }

    /// Renders the agent's next frame of audio at `now`.
    pub fn render(&mut self, now: MediaTime, out: &mut [f32]) {
        self.playout.render(now, out);
        self.rendered_to = now + MediaTime(out.len() as u64);
        self.drain_machines();
    }

    pub fn poll_timeout(&self) -> Option<MediaTime> {
        [
            self.endpoint.poll_timeout(),
            self.interruption.poll_timeout(),
            self.playout.poll_timeout(),
            self.timer.as_ref().and_then(CallTimer::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn handle_timeout(&mut self, now: MediaTime) {
        while let Some(deadline) = self.poll_timeout().filter(|deadline| *deadline <= now) {
            self.endpoint.handle_timeout(deadline);
            self.interruption.handle_timeout(deadline);
            self.stop_a_stalled_reply(deadline);
            while let Some(fired) = self.timer.as_mut().and_then(|timer| timer.handle_timeout(deadline)) {
                self.on_timer(fired);
            }
            self.drain_machines();
        }
    }

    /// The playout watchdog (`PLAYOUT_STALL`): a reply that has played nothing for that long is abandoned;
    /// the agent stops with what was heard, and its producers are cancelled.
    fn stop_a_stalled_reply(&mut self, now: MediaTime) {
        if self.playout.poll_timeout().is_some_and(|deadline| now >= deadline) {
            let epoch = self.interruption.advance_epoch();
            self.playout.handle_timeout(now, epoch);
            self.awaiting_reply = None;
            self.outputs.push_back(ConversationOutput::CancelReply { epoch });
        }
    }

    fn on_timer(&mut self, fired: CallTimerOutput) {
        match fired {
            CallTimerOutput::Warning { at, max } => self.event(
                at,
                EventKind::MaxCallDurationWarning {
                    call_duration: at.as_duration(),
                    max_call_duration: max.as_duration(),
                },
            ),
            CallTimerOutput::Timeout { at, max } => {
                self.event(
                    at,
                    EventKind::MaxCallDurationTimeout {
                        call_duration: at.as_duration(),
                        max_call_duration: max.as_duration(),
                    },
                );
                self.end_call(at);
            }
        }
    }

    /// The participant is gone (the transport closed, ICE failed, or their media stopped):
    /// `participant_left`, then the call ends as on a hang-up.
    pub fn participant_left(&mut self, at: MediaTime, participant: String) {
        if self.ended {
            return;
        }
        self.event(at, EventKind::ParticipantLeft { id: participant });
        self.end_call(at);
    }

    /// Ends the call: the agent stops where it is and `call_ended` follows.
    pub fn end_call(&mut self, at: MediaTime) {
        if self.ended {
            return;
        }
        let epoch = Epoch(self.interruption.epoch().0 + 1);
        self.playout.flush(epoch, at);
        self.drain_machines();
        self.ended = true;
        self.held.clear();
        self.awaiting_transcript = None;
        self.awaiting_reply = None;
        self.outputs.push_back(ConversationOutput::CancelReply { epoch });
        self.outputs.push_back(ConversationOutput::EndCall { at });
        self.event(at, EventKind::CallEnded);
    }

    fn drain_machines(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(output) = self.endpoint.poll_output() {
                progressed = true;
                match output {
                    EndpointOutput::PredictTurn { turn, last_speech } => {
                        self.prepare_transcript(last_speech);
                        let from = self.turn_start.unwrap_or(MediaTime::ZERO);
                        self.outputs.push_back(ConversationOutput::PredictTurn { turn, from, last_speech })
                    }
                    EndpointOutput::Commit { turn, last_speech, at } => {
                        let from = self.turn_start.take().unwrap_or(MediaTime::ZERO);
                        self.voices.turn_committed();
                        self.prepared = None;
                        self.awaiting_transcript = Some(turn);
                        self.outputs.push_back(ConversationOutput::Transcribe { turn, from, to: last_speech, at });
                    }
                    EndpointOutput::CommitCancelled { .. } => {}
                }
            }
            while let Some(output) = self.interruption.poll_output() {
                progressed = true;
                match output {
                    InterruptionOutput::PausePlayout { .. } => self.playout.pause(),
                    InterruptionOutput::ResumePlayout { .. } => self.playout.resume(),
                    InterruptionOutput::DuckPlayout { .. } => self.playout.duck(),
                    InterruptionOutput::RestorePlayout { .. } => self.playout.restore(),
                    InterruptionOutput::JudgeOverlap { from, to } => {
                        self.outputs.push_back(ConversationOutput::JudgeOverlap { from, to })
                    }
                    InterruptionOutput::Backchannel { since, at } => {
                        self.held.clear();
                        self.overlap_decided(since, at, false, "backchannel");
                    }
                    InterruptionOutput::Released { .. } => {
                        self.playout.restore();
                        self.overlap_words.clear();
                        self.backchannel_heard = None;
                        self.hand_on_held_speech();
                    }
                    InterruptionOutput::Interrupted { since, at, epoch, reason } => {
                        // A voice that only dipped played on until now: it stops where it was heard.
                        let at = if self.playout.is_paused() { at } else { at.max(self.rendered_to) };
                        self.hand_on_held_speech();
                        self.overlap_decided(since, at, true, reason.name());
                        self.event(at, EventKind::AgentInterrupted);
                        self.awaiting_reply = None;
                        self.outputs.push_back(ConversationOutput::CancelReply { epoch });
                        self.playout.flush(epoch, at);
                    }
                }
            }
            while let Some(output) = self.playout.poll_output() {
                progressed = true;
                match output {
                    PlayoutOutput::AgentStartedSpeaking { at, text, .. } => {
                        self.event(at, EventKind::AgentStartedSpeaking { text });
                        self.interruption.handle_input(InterruptionInput::AgentStartedSpeaking { at });
                    }
                    PlayoutOutput::AgentStoppedSpeaking { at, heard, .. } => {
                        self.event(at, EventKind::AgentStoppedSpeaking { text: heard });
                        self.interruption.handle_input(InterruptionInput::AgentStoppedSpeaking { at });
                    }
                }
            }
            if !progressed {
                break;
            }
        }
    }

    pub fn poll_output(&mut self) -> Option<ConversationOutput> {
        self.outputs.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::interruption::Backchannels;
    use crate::core::playout::PlayoutSegment;

    const W: u64 = 512;
    const FRAME: usize = 320;

    #[test]
    fn the_turn_model_is_asked_once_its_tail_of_silence_has_been_heard() {
        // The model is asked when the VAD gate reports the end of speech, a hangover after it.
        assert!(
            turn_model_end(MediaTime::from_millis(1280))
                < MediaTime::from_millis(1280) + VadGateConfig::default().hangover
        );
    }

    fn names(outputs: &[(u64, ConversationOutput)]) -> Vec<(u64, String)> {
        outputs
            .iter()
            .map(|(t, o)| match o {
                ConversationOutput::Event(e) => (*t, format!("{}@{}", e.kind.name(), e.media_time.as_millis())),
                other => (*t, format!("{other:?}")),
            })
            .collect()
    }

    /// Backchannels interrupt (the rule before they were told apart).
    fn backchannels_interrupt() -> ConversationConfig {
        let interruption = InterruptionConfig { backchannels: Backchannels::Interrupt, ..Default::default() };
        ConversationConfig { interruption, ..Default::default() }
    }

    /// Speech in windows 10..40 and 120..160 of 200, a one-sentence reply to the first turn (the user
    /// barges in during it): the outputs, each with the window it came out in.
    fn a_turn_a_reply_and_a_barge_in_outputs(c: &mut Conversation) -> Vec<(u64, ConversationOutput)> {
        let speech = |w: u64| (10..40).contains(&w) || (120..160).contains(&w);
        scripted_call(c, 200, speech, 4.0, |_| unreachable!("backchannels interrupt"))
    }

    /// A call of `windows` VAD windows, speech where `speech` says; the first turn is answered with a
    /// sentence of `reply_seconds`, and speech over it is heard as `overlap_words(to)` says. The outputs,
    /// each with the window it came out in.
    fn scripted_call(
        c: &mut Conversation,
        windows: u64,
        speech: impl Fn(u64) -> bool,
        reply_seconds: f64,
        overlap_words: impl Fn(MediaTime) -> String,
    ) -> Vec<(u64, ConversationOutput)> {
        let mut out: Vec<(u64, ConversationOutput)> = Vec::new();
        let mut agent_audio = [0.0f32; FRAME];
        // Time advances window by window; "now" is the end of the window just received. Agent frames are
        // rendered as their start time passes, before the window's outputs are handled.
        let mut next_render = 0u64;
        for w in 0..windows {
            let (start, end) = (MediaTime(w * W), MediaTime((w + 1) * W));
            while next_render < end.0 {
                c.render(MediaTime(next_render), &mut agent_audio);
                next_render += FRAME as u64;
            }
            c.vad_window(start, end, if speech(w) { 0.9 } else { 0.05 });
            while let Some(o) = c.poll_output() {
                match &o {
                    ConversationOutput::PredictTurn { last_speech, .. } => c.turn_prediction(*last_speech, true, end),
                    ConversationOutput::Transcribe { turn, .. } => c.transcript(*turn, "what time is it".into(), end),
                    ConversationOutput::Respond { turn, epoch, .. } => {
                        c.agent_segment(PlayoutPiece::Segment(PlayoutSegment {
                            turn: *turn,
                            epoch: *epoch,
                            text: "It is noon and the sun is out.".into(),
                            audio: vec![0.2; (reply_seconds * 16_000.0) as usize],
                            open: false,
                        }));
                        c.agent_reply_end(*turn, end);
                    }
                    ConversationOutput::JudgeOverlap { to, .. } => c.overlap_words(*to, Some(overlap_words(*to)), end),
                    _ => {}
                }
                out.push((w, o));
            }
        }
        out
    }

    /// A user turn, the agent's reply, and the user barging in: exact outputs.
    #[test]
    fn a_turn_a_reply_and_a_barge_in() {
        let mut c = Conversation::new(backchannels_interrupt());
        let out = a_turn_a_reply_and_a_barge_in_outputs(&mut c);
        let names = names(&out);
        let expected: Vec<(u64, &str)> = vec![
            (11, "user.started_speaking@320"),
            // Speech ends at window 40 (1280 ms): after a 96 ms pause speech-to-text may start on it;
            (42, "PrepareTranscript { turn: TurnId(1), from: MediaTime(5120), to: MediaTime(20480) }"),
            // after the 256 ms hangover speech has stopped and the turn model is asked (the same audio is
            // not transcribed again).
            (47, "user.stopped_speaking@1280"),
            (47, "PredictTurn { turn: TurnId(1), from: MediaTime(5120), last_speech: MediaTime(20480) }"),
            // Commit due at 1280 + 500 = 1780 ms, handled at window 56 (starting 1792 ms); the transcript
            // arrives at its end (1824 ms).
            (56, "Transcribe { turn: TurnId(1), from: MediaTime(5120), to: MediaTime(20480), at: MediaTime(28480) }"),
            (56, "utterance_committed@1824"),
            (56, "Respond { turn: TurnId(1), epoch: Epoch(0), user_text: \"what time is it\" }"),
            // Playout starts at the first 20 ms frame that begins after the segment arrived.
            (57, "agent.started_speaking@1840"),
            // The user speaks over the agent from 3840 ms; 500 ms later the agent is interrupted.
            (121, "user.started_speaking@3840"),
            (
                136,
                "OverlapDecided(OverlapDecision { since: MediaTime(61440), at: MediaTime(69440), interrupted: true, reason: \"overlap\", words: \"\" })",
            ),
            (136, "agent.interrupted@4340"),
            (136, "CancelReply { epoch: Epoch(1) }"),
            (136, "agent.stopped_speaking@4340"),
        ];
        let got: Vec<(u64, &str)> = names.iter().map(|(w, s)| (*w, s.as_str())).take(expected.len()).collect();
        assert_eq!(got, expected);
        let heard = out.iter().find_map(|(_, o)| match o {
            ConversationOutput::Event(ConversationEvent { kind: EventKind::AgentStoppedSpeaking { text }, .. }) => {
                Some(text.clone())
            }
            _ => None,
        });
        // Played from 1840 ms until the pause observed at 3904 ms (frames up to 3920 ms): 2.08 s of 4 s,
        // so about half the sentence, whole words only.
        assert_eq!(heard.as_deref(), Some("It is noon and"));
    }

    /// A `tool_call` of the interrupted reply (epoch 0) that reaches the conversation after
    /// `agent.interrupted` is dropped, as its audio is; one of the current epoch is emitted.
    #[test]
    fn an_interrupted_reply_emits_no_event_after_agent_interrupted() {
        let mut c = Conversation::new(backchannels_interrupt());
        let out = a_turn_a_reply_and_a_barge_in_outputs(&mut c);
        assert!(names(&out).iter().any(|(_, name)| name == "CancelReply { epoch: Epoch(1) }"));
        let tool_call = |name: &str| EventKind::ToolCall {
            tool_name: name.into(),
            parameters: serde_json::json!({}),
            result: serde_json::json!({ "ok": true }),
        };
        let later = MediaTime(200 * W);
        c.agent_event(later, Epoch(0), tool_call("of_the_interrupted_reply"));
        c.agent_event(later, Epoch(1), tool_call("of_the_next_reply"));
        let events: Vec<serde_json::Value> = std::iter::from_fn(|| c.poll_output())
            .filter_map(|o| match o {
                ConversationOutput::Event(e) => Some(e.kind.payload()),
                _ => None,
            })
            .collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["tool_name"], "of_the_next_reply");
    }

    /// Over a long answer the user says "mm hmm" (windows 120..143, 0.74 s) and later "wait, stop"
    /// (windows 200..240): the first dips the voice, is judged twice (at 0.5 s, then to its end) and
    /// leaves the agent talking, with no user turn; the second interrupts when its first transcript is
    /// heard, and only then becomes the user's turn.
    #[test]
    fn a_backchannel_is_not_a_turn_and_a_real_interruption_still_is() {
        let mut c = Conversation::new(ConversationConfig::default());
        let speech = |w: u64| (10..40).contains(&w) || (120..143).contains(&w) || (200..240).contains(&w);
        let words = |to: MediaTime| if to < MediaTime(200 * W) { "Mm-hmm.".to_string() } else { "Wait, stop.".into() };
        let out = scripted_call(&mut c, 260, speech, 10.0, words);
        let got: Vec<(u64, String)> = names(&out).into_iter().filter(|(w, _)| *w >= 57).collect();
        let got: Vec<(u64, &str)> = got.iter().map(|(w, s)| (*w, s.as_str())).collect();
        let expected: Vec<(u64, &str)> = vec![
            (57, "agent.started_speaking@1840"),
            // "Mm-hmm" from 3840 ms: judged 350 ms in (`JUDGE_LEAD` before the 500 ms minimum), up to the
            // speech heard by then (4192 ms), again 200 ms after each answer (up to 4448 ms, then to its last
            // speech, 4576 ms): when the end of speech is seen (window 150, the 256 ms hangover after it),
            // what was judged covers it all.
            (131, "JudgeOverlap { from: MediaTime(61440), to: MediaTime(67072) }"),
            (139, "JudgeOverlap { from: MediaTime(61440), to: MediaTime(71168) }"),
            (147, "JudgeOverlap { from: MediaTime(61440), to: MediaTime(73216) }"),
            (
                150,
                "OverlapDecided(OverlapDecision { since: MediaTime(61440), at: MediaTime(77312), interrupted: false, reason: \"backchannel\", words: \"Mm-hmm.\" })",
            ),
            // "Wait, stop" from 6400 ms: its first transcript (350 ms in) is known before it has lasted the
            // 500 ms minimum, and it interrupts then, seen at window 216 (its start, 6912 ms), where the
            // dipped voice has played to (6960 ms: this harness renders a window ahead); the held speech
            // becomes the user's turn.
            (211, "JudgeOverlap { from: MediaTime(102400), to: MediaTime(108032) }"),
            (216, "user.started_speaking@6400"),
            (
                216,
                "OverlapDecided(OverlapDecision { since: MediaTime(102400), at: MediaTime(111360), interrupted: true, reason: \"words\", words: \"Wait, stop.\" })",
            ),
            (216, "agent.interrupted@6960"),
            (216, "CancelReply { epoch: Epoch(1) }"),
            (216, "agent.stopped_speaking@6960"),
            (242, "PrepareTranscript { turn: TurnId(2), from: MediaTime(102400), to: MediaTime(122880) }"),
            (247, "user.stopped_speaking@7680"),
            (247, "PredictTurn { turn: TurnId(2), from: MediaTime(102400), last_speech: MediaTime(122880) }"),
        ];
        assert_eq!(got[..expected.len()], expected[..]);
    }

    /// The speech-to-text model hears "yeah, right" at 500 ms, then the same sound with a little more as
    /// other words: the agent talks on, and the decision names what was heard as a backchannel.
    #[test]
    fn a_transcript_that_changes_its_mind_about_a_backchannel_does_not_interrupt() {
        let mut c = Conversation::new(ConversationConfig::default());
        let speech = |w: u64| (10..40).contains(&w) || (120..150).contains(&w);
        let heard =
            |to: MediaTime| if to < MediaTime(141 * W) { "Yeah, right.".to_string() } else { "The F. Riot.".into() };
        let out = scripted_call(&mut c, 200, speech, 10.0, heard);
        let decisions: Vec<&OverlapDecision> = out
            .iter()
            .filter_map(|(_, o)| match o {
                ConversationOutput::OverlapDecided(decision) => Some(decision),
                _ => None,
            })
            .collect();
        assert_eq!(decisions.len(), 1, "{:?}", names(&out));
        assert_eq!((decisions[0].interrupted, decisions[0].words.as_str()), (false, "Yeah, right."));
        assert!(!names(&out).iter().any(|(_, name)| name.starts_with("agent.interrupted")));
    }

    /// A pause longer than 96 ms but shorter than the hangover, then more speech: the audio up to the
    /// pause is prepared, then the whole turn's, and the commit names the whole turn's.
    #[test]
    fn speech_that_goes_on_after_a_pause_is_prepared_again_to_its_end() {
        let mut c = Conversation::new(ConversationConfig::default());
        let speech = |w: u64| (10..30).contains(&w) || (35..50).contains(&w);
        let mut out = Vec::new();
        for w in 0..90u64 {
            let (start, end) = (MediaTime(w * W), MediaTime((w + 1) * W));
            c.vad_window(start, end, if speech(w) { 0.9 } else { 0.05 });
            while let Some(o) = c.poll_output() {
                if let ConversationOutput::PredictTurn { last_speech, .. } = &o {
                    c.turn_prediction(*last_speech, true, end);
                }
                out.push((w, o));
            }
        }
        let requests: Vec<(u64, String)> = names(&out).into_iter().filter(|(_, name)| !name.contains('@')).collect();
        let expected = [
            (32, "PrepareTranscript { turn: TurnId(1), from: MediaTime(5120), to: MediaTime(15360) }"),
            (52, "PrepareTranscript { turn: TurnId(1), from: MediaTime(5120), to: MediaTime(25600) }"),
            (57, "PredictTurn { turn: TurnId(1), from: MediaTime(5120), last_speech: MediaTime(25600) }"),
            (66, "Transcribe { turn: TurnId(1), from: MediaTime(5120), to: MediaTime(25600), at: MediaTime(33600) }"),
        ];
        let requests: Vec<(u64, &str)> = requests.iter().map(|(w, s)| (*w, s.as_str())).collect();
        assert_eq!(requests, expected);
    }

    #[test]
    fn speech_to_text_reads_less_before_a_start_the_room_talked_into() {
        let mut c = Conversation::new(ConversationConfig::default());
        // The user at -20 dBFS (windows 10..40), committed; the room at -35 dBFS (80..120), talking on into
        // the user's second question (120..150).
        let voice = |w: u64| match w {
            10..40 | 120..150 => Some(-20.0),
            80..120 => Some(-35.0),
            _ => None,
        };
        let mut starts = Vec::new();
        for w in 0..200u64 {
            let (start, end) = (MediaTime(w * W), MediaTime((w + 1) * W));
            let level = voice(w);
            c.vad_window_at_level(start, end, if level.is_some() { 0.9 } else { 0.05 }, Some(level.unwrap_or(-70.0)));
            while let Some(o) = c.poll_output() {
                match &o {
                    ConversationOutput::PredictTurn { last_speech, .. } => c.turn_prediction(*last_speech, true, end),
                    ConversationOutput::Transcribe { turn, from, .. } => {
                        starts.push((*from, c.transcription_start(*from)));
                        c.transcript(*turn, "what time is it".into(), end);
                    }
                    _ => {}
                }
            }
        }
        // The first turn, in quiet: the whole pre-roll. The second, which the room talked into (from window
        // 118, the lookback over its onset): only the short one.
        let first = MediaTime(10 * W);
        let second = MediaTime(118 * W);
        assert_eq!(starts, vec![(first, first - STT_PRE_ROLL), (second, second - STT_PRE_ROLL_OVER_THE_ROOM)]);
    }

    #[test]
    fn max_duration_warns_then_ends_the_call() {
        let mut c = Conversation::new(ConversationConfig {
            max_call_duration: Some(MediaTime::from_millis(100_000)),
            ..Default::default()
        });
        c.handle_timeout(MediaTime::from_millis(200_000));
        let out: Vec<String> = std::iter::from_fn(|| c.poll_output()).map(|o| format!("{o:?}")).collect();
        assert_eq!(out.len(), 5, "{out:?}");
        assert!(out[0].contains("max_call_duration_warning"));
        assert!(out[1].contains("max_call_duration_timeout"));
        assert!(out[3].starts_with("EndCall { at: MediaTime(1600000) }"));
        assert!(out[4].contains("call_ended"));
        assert!(c.is_ended());
    }

    #[test]
    fn a_participant_leaving_mid_reply_ends_the_call() {
        let mut c = Conversation::new(ConversationConfig::default());
        c.agent_segment(PlayoutPiece::Segment(PlayoutSegment {
            turn: TurnId(0),
            epoch: Epoch(0),
            text: "Hello there, how can I help?".into(),
            audio: vec![0.2; 32_000],
            open: false,
        }));
        let mut frame = [0.0f32; FRAME];
        for t in 0..10u64 {
            c.render(MediaTime(t * FRAME as u64), &mut frame);
        }
        c.participant_left(MediaTime(3_200), "u-1".into());
        c.participant_left(MediaTime(6_400), "u-1".into());
        let out: Vec<String> = std::iter::from_fn(|| c.poll_output())
            .map(|o| match o {
                ConversationOutput::Event(e) => format!("{}@{}", e.kind.name(), e.media_time.as_millis()),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            out,
            [
                "agent.started_speaking@0",
                "participant_left@200",
                "agent.stopped_speaking@200",
                "CancelReply { epoch: Epoch(1) }",
                "EndCall { at: MediaTime(3200) }",
                "call_ended@200",
            ]
        );
        assert!(c.is_ended());
    }

    /// The playout watchdog through the conversation: a reply whose sentence stops arriving stops
    /// `PLAYOUT_STALL` after its last audio (`agent.stopped_speaking` with what was heard), its producers are
    /// cancelled with a new epoch, and the next turn's reply is asked for in that epoch and spoken.
    #[test]
    fn a_stalled_reply_stops_and_the_next_turn_is_answered() {
        use crate::core::playout::PLAYOUT_STALL;
        let mut c = Conversation::new(ConversationConfig::default());
        c.agent_segment(PlayoutPiece::Segment(PlayoutSegment {
            turn: TurnId(1),
            epoch: Epoch(0),
            text: "Let me see.".into(),
            audio: vec![0.2; 3_200],
            open: true,
        }));
        let mut frame = [0.0f32; FRAME];
        let last_audio = MediaTime(3_200);
        let stall = last_audio + PLAYOUT_STALL;
        let mut now = MediaTime::ZERO;
        let mut out = Vec::new();
        while now <= stall {
            c.handle_timeout(now);
            c.render(now, &mut frame);
            out.extend(std::iter::from_fn(|| c.poll_output()));
            now = now + MediaTime(FRAME as u64);
        }
        let names: Vec<String> = out
            .iter()
            .map(|o| match o {
                ConversationOutput::Event(e) => format!("{}@{}", e.kind.name(), e.media_time.as_millis()),
                other => format!("{other:?}"),
            })
            .collect();
        // The producers are cancelled, then the agent stops (as on an interruption).
        assert_eq!(
            names,
            ["agent.started_speaking@0", "CancelReply { epoch: Epoch(1) }", "agent.stopped_speaking@20200"]
        );
        assert!(matches!(&out[2], ConversationOutput::Event(ConversationEvent {
            kind: EventKind::AgentStoppedSpeaking { text }, .. }) if text == "Let me see."));
        assert_eq!(c.poll_timeout(), None);
        c.transcript(TurnId(2), "hello?".into(), now);
        let respond = std::iter::from_fn(|| c.poll_output()).find(|o| matches!(o, ConversationOutput::Respond { .. }));
        assert_eq!(
            respond,
            Some(ConversationOutput::Respond { turn: TurnId(2), epoch: Epoch(1), user_text: "hello?".into() })
        );
    }
}
