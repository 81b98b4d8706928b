//! The agent's side of a turn: the conversation so far goes to the language model, its streamed text is
//! split into sentences, each sentence is synthesized at once, and the audio becomes playout segments
//! stamped with the turn and epoch. Only what the user heard enters the history.
//!
//! Preemptive generation: when a transcript is prepared ahead of the commit (during the endpointing
//! delay), the language model is asked at once, on that transcript and the history as it stands; the
//! commit of the same audio uses that reply, already under way. When the user goes on speaking, the next
//! preparation (or a commit of other audio) drops it, which stops its generation. The early reply is read
//! while the delay runs and its first sentence goes to the voice at once (`speak_ahead`), so that the
//! commit finds its audio ready or under way. On by default; `config.llm.preemptive_generation: false`
//! turns it off. Under load it gives way first: a model shared by the process's calls that other requests
//! wait for is not asked ahead (`LanguageModel::free_for_early_request`); the reply is asked at the commit.
//!
//! Tools and guardrails (`crate::actions`) are offered to the model; the calls it makes are run by
//! `tool_round` and their results go back to it, up to `MAX_TOOL_ROUNDS` times per turn.

pub mod reply_rule;
mod speak_ahead;
mod tool_round;

pub use reply_rule::ReplyRule;

use std::sync::Arc;
use std::time::Instant;

use crate::actions::Actions;
use crate::actions::moderation::ModerationEndpoint;
use crate::core::playout::{PlayoutPiece, PlayoutSegment};
use crate::core::{Epoch, TurnId};
use crate::events::EventKind;
use crate::knowledge::{Retrieval, Snippet, SnippetsUsed, knowledge_message};
use crate::providers::ProviderError;
use crate::providers::chain::ServedBy;
use crate::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, LlmStream, ToolCall, ToolSpec};
use crate::providers::select::{self, Recognizer};
use crate::providers::sentences::{Piece, SentenceSplitter};
use crate::providers::tts::{SpeechSynthesizer, TtsEvent};
use crate::time::MediaTime;
use crate::turn_metrics::{ReplyTimings, TranscriptTiming};

/// Longest reply, in tokens.
pub const MAX_REPLY_TOKENS: u32 = 256;
/// Most rounds of tool calls in one turn; the model's answer after the last is final.
pub const MAX_TOOL_ROUNDS: usize = 4;

/// What a reply produces, in order: audio for playout, and events (`tool_call`).
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyOutput {
    Audio(PlayoutPiece),
    /// An event stamped with the epoch of the reply that began what it reports (a tool call's): when
    /// that reply was interrupted, the conversation drops the event, as playout drops its audio.
    Event {
        epoch: Epoch,
        kind: EventKind,
    },
}

pub struct Responder {
    llm: (Arc<dyn LanguageModel>, String),
    tts: Arc<dyn SpeechSynthesizer>,
    stt: Option<Recognizer>,
    system_prompt: String,
    history: Vec<ChatMessage>,
    /// The early reply's first sentence, handed to the voice before the commit; `speak` takes its speech
    /// instead of asking the voice again.
    spoken_ahead: Option<speak_ahead::SpokenAhead>,
    /// Early replies dropped since the last commit (the user went on speaking).
    early_dropped: u32,
    /// A transcript made ahead of the commit, the audio range it covers, and how long it took.
    prepared: Option<((MediaTime, MediaTime), String, TranscriptTiming)>,
    /// How long the last committed turn's transcript took (`turn_metrics`).
    last_transcript: Option<TranscriptTiming>,
    /// The last reply's provider stages (`turn_metrics`); filled in as they happen, so a cancelled reply
    /// keeps what it reached.
    last_reply: ReplyTimings,
    preemptive_generation: bool,
    /// The log has said that this call's replies wait for the commit because the model is busy.
    said_model_busy: bool,
    /// A reply asked for on the prepared transcript, before the commit.
    early_reply: Option<EarlyReply>,
    /// The agent's tools and guardrails, and the functions offered to the model for them.
    actions: Actions,
    tool_specs: Vec<ToolSpec>,
    /// Where guardrails without a fixed reply are checked, when the provider has a moderation endpoint.
    moderation: Option<ModerationEndpoint>,
    /// Tool calls still running (a barge-in may have dropped the reply that made them).
    in_flight: Option<tool_round::CallsInFlight>,
    /// Guardrail callbacks being sent (fire-and-forget; finished ones are dropped as new ones start).
    callbacks: Vec<tokio::task::JoinHandle<()>>,
    /// The agent's knowledge bases, when it has any.
    retrieval: Option<Retrieval>,
    /// The snippets given to the model with the current turn.
    turn_snippets: Vec<Snippet>,
    /// Which turns are answered (every one unless a meeting says otherwise).
    reply_rule: ReplyRule,
}

/// The reply being made: when its first language-model request went out, its turn and epoch.
#[derive(Debug, Clone, Copy)]
struct Reply {
    requested: Instant,
    turn: TurnId,
    epoch: Epoch,
}

/// A language-model stream started before the commit: the user text it answers and the history length
/// it was built on (both must still hold when the turn commits).
struct EarlyReply {
    user_text: String,
    history_len: usize,
    snippets: Vec<Snippet>,
    ahead: speak_ahead::Ahead,
}

impl Responder {
    /// Adapters from the first avatar's `config` (`llm`, `stt`, `tts`), with the providers' settings
    /// (`env`), and the agent's prompt.
    pub fn from_config(
        pipeline: &crate::agent_spec::PipelineConfig,
        system_prompt: String,
        models_dir: &std::path::Path,
        env: &crate::providers::env::ProviderEnv,
    ) -> Result<Responder, ProviderError> {
        let mut responder = Responder::new(
            select::language_model(&pipeline.llm, models_dir, env)?,
            select::synthesizer(&pipeline.tts, models_dir, env)?,
            select::recognizer(&pipeline.stt, models_dir, env)?,
            system_prompt,
        );
        responder.preemptive_generation = pipeline.llm.preemptive_generation.unwrap_or(true);
        responder.moderation = select::moderation_endpoint(&pipeline.llm, env);
        Ok(responder)
    }

    /// Where guardrails without a fixed reply are checked (default: the `openai` provider's moderation
    /// endpoint, else none: the language model is asked).
    pub fn with_moderation(mut self, endpoint: Option<ModerationEndpoint>) -> Responder {
        self.moderation = endpoint;
        self
    }

    /// Looks up each turn in the agent's knowledge bases.
    pub fn with_retrieval(mut self, retrieval: Retrieval) -> Responder {
        self.retrieval = Some(retrieval);
        self
    }

    /// Answers only the turns `rule` lets through (the others enter the history unanswered).
    pub fn with_reply_rule(mut self, rule: ReplyRule) -> Responder {
        self.reply_rule = rule;
        self
    }

    /// Offers the agent's tools and guardrails to the model, and has the model prepare for the system
    /// message it will be given with them (`LanguageModel::warm`, in the background).
    pub fn with_actions(mut self, actions: Actions) -> Responder {
        self.tool_specs = actions.specs();
        self.actions = actions;
        self.llm.0.warm(&self.request(None, &[]).messages, &self.tool_specs);
        self
    }

    /// A responder on the given adapters (`llm`: the model and its name), preemptive generation on.
    pub fn new(
        llm: (Box<dyn LanguageModel>, String),
        tts: Box<dyn SpeechSynthesizer>,
        stt: Option<Recognizer>,
        system_prompt: String,
    ) -> Responder {
        Responder {
            llm: (Arc::from(llm.0), llm.1),
            tts: Arc::from(tts),
            stt,
            system_prompt,
            history: Vec::new(),
            spoken_ahead: None,
            early_dropped: 0,
            prepared: None,
            last_transcript: None,
            last_reply: ReplyTimings::default(),
            preemptive_generation: true,
            said_model_busy: false,
            early_reply: None,
            actions: Actions::default(),
            tool_specs: Vec::new(),
            moderation: None,
            in_flight: None,
            callbacks: Vec::new(),
            retrieval: None,
            turn_snippets: Vec::new(),
            reply_rule: ReplyRule::default(),
        }
    }

    /// The session's speech recognizer, for work beside the reply (the speech over the agent is judged
    /// while the reply runs: `runtime::agent`).
    pub fn recognizer(&self) -> Option<Recognizer> {
        self.stt.clone()
    }

    /// The user's words in 16 kHz audio; empty when no recognizer is configured.
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        self.transcribe_served(audio).await.0
    }

    /// The user's words, and which recognizer gave them (`turn_metrics`).
    async fn transcribe_served(&self, audio: &[f32]) -> (Result<String, ProviderError>, Option<ServedBy>) {
        match &self.stt {
            Some(stt) if !audio.is_empty() => stt.transcribe_served(audio).await,
            _ => (Ok(String::new()), None),
        }
    }

    /// Transcribes `[from, to)` ahead of the commit (while the endpointing delay runs) and, with
    /// preemptive generation, asks the language model for the reply to it at once.
    pub async fn prepare_transcript(&mut self, from: MediaTime, to: MediaTime, audio: &[f32]) {
        self.drop_early_reply(); // the user went on: an earlier early reply answers too little
        let started = Instant::now();
        let (result, served) = self.transcribe_served(audio).await;
        match result {
            Ok(text) => {
                let timing = TranscriptTiming { duration: started.elapsed(), prepared_ahead: true, served };
                tracing::debug!(%text, took_ms = timing.duration.as_millis() as u64, "transcribed ahead");
                let snippets = self.retrieve(&text).await;
                self.prepared_text((from, to), text, timing, snippets)
            }
            Err(err) => tracing::debug!(error = %err, "early speech-to-text failed; it runs again at the commit"),
        }
    }

    /// Keeps `text` as the transcript of `range` and, with preemptive generation, asks for its reply
    /// (not while tool calls are running: their results come first in the history).
    fn prepared_text(
        &mut self,
        range: (MediaTime, MediaTime),
        text: String,
        timing: TranscriptTiming,
        snippets: Vec<Snippet>,
    ) {
        let early = self.preemptive_generation
            && !text.trim().is_empty()
            && self.in_flight.is_none()
            && self.reply_rule.answers(&text)
            && self.model_free_for_early_reply();
        self.early_reply = early.then(|| EarlyReply {
            ahead: speak_ahead::Ahead::start(self.llm.0.stream(self.request(Some(&text), &snippets)), self.tts.clone()),
            user_text: text.clone(),
            history_len: self.history.len(),
            snippets,
        });
        self.prepared = Some((range, text, timing));
    }

    /// Whether the language model can take a reply asked ahead of the commit now: a model shared with
    /// other calls whose requests wait for it is left to them (under load, committed replies before guesses).
    /// The first time it is not, the call says so in the log.
    fn model_free_for_early_reply(&mut self) -> bool {
        let free = self.llm.0.free_for_early_request();
        if !free && !std::mem::replace(&mut self.said_model_busy, true) {
            tracing::info!(
                model = %self.llm.1,
                "the language model is busy with other calls: this call's replies are asked at the commit, not ahead of it"
            );
        }
        free
    }

    /// The chunks of the agent's knowledge bases for `text` (none without knowledge bases).
    async fn retrieve(&self, text: &str) -> Vec<Snippet> {
        match &self.retrieval {
            Some(retrieval) => retrieval.retrieve(text).await,
            None => Vec::new(),
        }
    }

    /// The language-model request after the history (and `user_text`, when it is not in it yet); the
    /// turn's `snippets` go in a system message just before the user's last message.
    fn request(&self, user_text: Option<&str>, snippets: &[Snippet]) -> ChatRequest {
        let mut messages = vec![ChatMessage::new("system", self.system_prompt.clone())];
        messages.extend(self.history.iter().cloned());
        messages.extend(user_text.map(|text| ChatMessage::new("user", text)));
        if !snippets.is_empty() {
            let last_user = messages.iter().rposition(|m| m.role == "user").unwrap_or(messages.len());
            messages.insert(last_user, ChatMessage::new("system", knowledge_message(snippets)));
        }
        ChatRequest {
            model: self.llm.1.clone(),
            messages,
            tools: self.tool_specs.clone(),
            max_tokens: MAX_REPLY_TOKENS,
            temperature: 0.6,
            stop: Vec::new(),
        }
    }

    /// The transcript of the committed turn `[from, to)`: the one prepared ahead when it covers the same
    /// audio (speech did not resume), else made now.
    pub async fn transcript_for(
        &mut self,
        from: MediaTime,
        to: MediaTime,
        audio: &[f32],
    ) -> Result<String, ProviderError> {
        let started = Instant::now();
        let (text, timing) = match self.prepared.take() {
            Some((range, text, timing)) if range == (from, to) => (text, timing),
            _ => {
                self.drop_early_reply(); // it answers other audio
                let (result, served) = self.transcribe_served(audio).await;
                (result?, TranscriptTiming { duration: started.elapsed(), prepared_ahead: false, served })
            }
        };
        self.last_transcript = Some(timing);
        Ok(text)
    }

    /// How long the last `transcript_for` took, and whether it was prepared ahead.
    pub fn last_transcript(&self) -> Option<TranscriptTiming> {
        self.last_transcript.clone()
    }

    /// The provider stages the last `respond` reached, from its language-model request, and the
    /// providers that served it (the voice's since the last call: a reply's sentences).
    pub fn last_reply(&self) -> ReplyTimings {
        ReplyTimings { llm_served: self.llm.0.served(), tts_served: self.tts.take_served(), ..self.last_reply.clone() }
    }

    /// Records what the user heard of the agent's last reply.
    pub fn heard(&mut self, text: &str) {
        if !text.is_empty() {
            self.history.push(ChatMessage::new("assistant", text));
        }
    }

    /// Answers `user_text`, calling `out` with each sentence's audio as soon as it arrives and with the
    /// events of the tool calls the model makes.
    pub async fn respond(
        &mut self,
        turn: TurnId,
        epoch: Epoch,
        user_text: &str,
        out: &mut (dyn FnMut(ReplyOutput) + Send),
    ) -> Result<(), ProviderError> {
        let requested = Instant::now();
        self.last_reply = ReplyTimings::default();
        self.spoken_ahead = None;
        if !self.reply_rule.answers(user_text) {
            // Not addressed (a meeting): the turn is context for later ones, and nothing is said.
            self.drop_early_reply();
            self.history.push(ChatMessage::new("user", user_text));
            return Ok(());
        }
        // Calls an interrupted reply left running: their results enter the history first.
        self.settle_quietly(out).await;
        let early = self.early_reply.take();
        let (mut received, mut stream) = match early {
            Some(early) if early.user_text == user_text && early.history_len == self.history.len() => {
                self.last_reply.llm_started_early = true;
                self.turn_snippets = early.snippets;
                let head = early.ahead.head().await?;
                self.spoken_ahead = head.first;
                (head.received, head.rest)
            }
            stale => {
                self.early_dropped += u32::from(stale.is_some());
                drop(stale); // stops its generation before the new request queues on the model
                self.turn_snippets = self.retrieve(user_text).await;
                (Vec::new(), self.llm.0.stream(self.request(Some(user_text), &self.turn_snippets)))
            }
        };
        self.last_reply.early_dropped = std::mem::take(&mut self.early_dropped);
        self.report_snippets(turn, user_text);
        self.history.push(ChatMessage::new("user", user_text));
        let reply = Reply { requested, turn, epoch };
        for round in 0..=MAX_TOOL_ROUNDS {
            let calls = self.speak_stream(&reply, std::mem::take(&mut received), stream, out).await?;
            if calls.is_empty() {
                break;
            }
            if round == MAX_TOOL_ROUNDS {
                tracing::warn!(rounds = MAX_TOOL_ROUNDS, "the model kept calling tools; its last calls are not run");
                break;
            }
            if self.run_tool_calls(&reply, user_text, calls, out).await? == tool_round::RoundEnd::Answered {
                break;
            }
            stream = self.llm.0.stream(self.request(None, &self.turn_snippets));
        }
        Ok(())
    }

    /// Hands the turn's snippets, if any, to the retrieval's sink.
    fn report_snippets(&self, turn: TurnId, user_text: &str) {
        let sink = self.retrieval.as_ref().and_then(|r| r.on_used.as_ref());
        if let Some(sink) = sink.filter(|_| !self.turn_snippets.is_empty()) {
            sink(SnippetsUsed { turn: turn.0, query: user_text.to_string(), snippets: self.turn_snippets.clone() });
        }
    }

    /// Drops the early reply, if any (its generation and speech stop), and counts it.
    fn drop_early_reply(&mut self) {
        self.early_dropped += u32::from(self.early_reply.take().is_some());
    }

    /// Speaks one model stream's text sentence by sentence (what was `received` from it ahead first);
    /// returns the tool calls it made.
    async fn speak_stream(
        &mut self,
        reply: &Reply,
        received: Vec<speak_ahead::Received>,
        mut stream: LlmStream,
        out: &mut (dyn FnMut(ReplyOutput) + Send),
    ) -> Result<Vec<ToolCall>, ProviderError> {
        let mut splitter = SentenceSplitter::default();
        let mut calls = Vec::new();
        let mut received = received.into_iter();
        loop {
            let event = match received.next() {
                Some(event) => event,
                None => match stream.recv().await {
                    Some(event) => event,
                    None => break,
                },
            };
            match event? {
                LlmEvent::Text(text) => {
                    self.last_reply.llm_first_token.get_or_insert_with(|| reply.requested.elapsed());
                    for piece in splitter.push(&text) {
                        self.speak(reply, piece, out).await?;
                    }
                }
                LlmEvent::ToolCall(call) => calls.push(call),
                LlmEvent::Done { .. } => break,
            }
        }
        if let Some(rest) = splitter.finish() {
            self.speak(reply, rest, out).await?;
        }
        Ok(calls)
    }

    /// Synthesizes one piece of the reply and hands it to playout as its audio arrives (an open segment,
    /// then more audio, then the close); the stages are timed from the reply's first request.
    async fn speak(
        &mut self,
        reply: &Reply,
        piece: impl Into<Piece>,
        out: &mut (dyn FnMut(ReplyOutput) + Send),
    ) -> Result<(), ProviderError> {
        let piece = piece.into();
        let Reply { requested, turn, epoch } = *reply;
        let mut on_segment = |piece| out(ReplyOutput::Audio(piece));
        self.last_reply.first_clause.get_or_insert_with(|| requested.elapsed());
        let mut stream = match self.spoken_ahead.take() {
            Some(ahead) if ahead.piece == piece => {
                self.last_reply.speech_started_early = true;
                ahead.speech
            }
            _ => self.tts.synthesize(&piece.voiced()),
        };
        // The first audio opens the segment at once (playout starts with it); later audio extends it.
        let mut text = Some(piece.text);
        while let Some(event) = stream.recv().await {
            match event? {
                TtsEvent::Audio(audio) if audio.is_empty() => {}
                TtsEvent::Audio(audio) => match text.take() {
                    Some(text) => {
                        self.last_reply.tts_first_audio.get_or_insert_with(|| requested.elapsed());
                        on_segment(PlayoutPiece::Segment(PlayoutSegment { turn, epoch, text, audio, open: true }));
                    }
                    None => on_segment(PlayoutPiece::More { epoch, audio, last: false }),
                },
                TtsEvent::Done(_) => break,
            }
        }
        self.last_reply.first_segment.get_or_insert_with(|| requested.elapsed());
        match text {
            // No audio came: the text alone still counts as said (as before streaming).
            Some(text) => {
                on_segment(PlayoutPiece::Segment(PlayoutSegment { turn, epoch, text, audio: vec![], open: false }))
            }
            None => on_segment(PlayoutPiece::More { epoch, audio: vec![], last: true }),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::mpsc;

    use super::*;
    use crate::providers::CallMetrics;
    use crate::providers::tts::TtsStream;

    /// Answers every request with "Paris." and records the user messages it was asked about.
    struct CountingLlm(Arc<Mutex<Vec<String>>>);

    impl LanguageModel for CountingLlm {
        fn stream(&self, request: ChatRequest) -> LlmStream {
            self.0.lock().unwrap().push(request.messages.last().unwrap().content.clone());
            let (tx, rx) = mpsc::channel(8);
            tx.try_send(Ok(LlmEvent::Text("Paris.".into()))).unwrap();
            tx.try_send(Ok(LlmEvent::Done { finish_reason: "stop".into(), metrics: CallMetrics::default() })).unwrap();
            rx
        }
    }

    struct Silence;

    impl SpeechSynthesizer for Silence {
        fn synthesize(&self, _text: &str) -> TtsStream {
            let (tx, rx) = mpsc::channel(4);
            tx.try_send(Ok(TtsEvent::Audio(vec![0.0; 160]))).unwrap();
            tx.try_send(Ok(TtsEvent::Audio(vec![0.0; 80]))).unwrap();
            tx.try_send(Ok(TtsEvent::Done(CallMetrics::default()))).unwrap();
            rx
        }
    }

    fn responder(asked: &Arc<Mutex<Vec<String>>>, preemptive: bool) -> Responder {
        let llm: Box<dyn LanguageModel> = Box::new(CountingLlm(asked.clone()));
        let mut responder = Responder::new((llm, "test".into()), Box::new(Silence), None, "Be brief.".into());
        responder.preemptive_generation = preemptive;
        responder
    }

    fn prepare(responder: &mut Responder, from: u64, to: u64, text: &str) {
        let range = (MediaTime::from_samples(from), MediaTime::from_samples(to));
        let timing = TranscriptTiming { prepared_ahead: true, ..TranscriptTiming::default() };
        responder.prepared_text(range, text.into(), timing, Vec::new());
    }

    async fn commit(responder: &mut Responder, from: u64, to: u64, text: &str) -> ReplyTimings {
        let range = (MediaTime::from_samples(from), MediaTime::from_samples(to));
        let heard = responder.transcript_for(range.0, range.1, &[]).await.unwrap();
        let text = if heard.is_empty() { text.to_string() } else { heard };
        responder.respond(TurnId(1), Epoch(1), &text, &mut |_| {}).await.unwrap();
        responder.last_reply()
    }

    #[tokio::test]
    async fn the_commit_of_the_prepared_audio_uses_the_reply_started_early() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut responder = responder(&asked, true);
        prepare(&mut responder, 0, 16_000, "What is the capital of France?");
        let timings = commit(&mut responder, 0, 16_000, "").await;
        assert!(timings.llm_started_early);
        assert_eq!(*asked.lock().unwrap(), ["What is the capital of France?"], "one request, made early");
    }

    /// `CountingLlm` shared with other calls that keep it busy.
    struct BusyLlm(CountingLlm);

    impl LanguageModel for BusyLlm {
        fn stream(&self, request: ChatRequest) -> LlmStream {
            self.0.stream(request)
        }

        fn free_for_early_request(&self) -> bool {
            false
        }
    }

    #[tokio::test]
    async fn a_busy_model_is_asked_at_the_commit_not_ahead_of_it() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let llm: Box<dyn LanguageModel> = Box::new(BusyLlm(CountingLlm(asked.clone())));
        let mut responder = Responder::new((llm, "test".into()), Box::new(Silence), None, "Be brief.".into());
        prepare(&mut responder, 0, 16_000, "What is the capital of France?");
        assert!(asked.lock().unwrap().is_empty(), "nothing asked ahead of the commit");
        let timings = commit(&mut responder, 0, 16_000, "").await;
        assert!(!timings.llm_started_early);
        assert_eq!(*asked.lock().unwrap(), ["What is the capital of France?"], "asked once, at the commit");
    }

    /// A voice that records what it was asked to say.
    struct Recording(Arc<Mutex<Vec<String>>>);

    impl SpeechSynthesizer for Recording {
        fn synthesize(&self, text: &str) -> TtsStream {
            self.0.lock().unwrap().push(text.to_string());
            Silence.synthesize(text)
        }
    }

    #[tokio::test]
    async fn the_early_reply_is_voiced_during_the_delay_and_played_from_the_commit() {
        let (asked, voiced) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let llm: Box<dyn LanguageModel> = Box::new(CountingLlm(asked.clone()));
        let voice = Box::new(Recording(voiced.clone()));
        let mut responder = Responder::new((llm, "test".into()), voice, None, "Be brief.".into());
        prepare(&mut responder, 0, 16_000, "What is the capital of France?");
        for _ in 0..1000 {
            if !voiced.lock().unwrap().is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(*voiced.lock().unwrap(), ["Paris."], "the first sentence goes to the voice before the commit");
        let mut pieces = Vec::new();
        let heard = responder.transcript_for(MediaTime::ZERO, MediaTime::from_samples(16_000), &[]).await.unwrap();
        responder.respond(TurnId(1), Epoch(1), &heard, &mut |piece| pieces.push(piece)).await.unwrap();
        let timings = responder.last_reply();
        assert!(timings.llm_started_early && timings.speech_started_early);
        assert_eq!(*voiced.lock().unwrap(), ["Paris."], "not asked again at the commit");
        let first = match &pieces[0] {
            ReplyOutput::Audio(PlayoutPiece::Segment(segment)) => segment,
            other => panic!("{other:?}"),
        };
        assert_eq!((first.text.as_str(), first.audio.len(), first.epoch), ("Paris.", 160, Epoch(1)));
        assert_eq!(pieces.len(), 3, "the sentence's audio, more of it, its end");
    }

    #[tokio::test]
    async fn a_sentence_reaches_playout_with_its_first_audio_and_grows_as_more_arrives() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut responder = responder(&asked, false);
        let mut pieces = Vec::new();
        responder.respond(TurnId(1), Epoch(2), "Hi", &mut |piece| pieces.push(piece)).await.unwrap();
        let pieces: Vec<PlayoutPiece> = pieces
            .into_iter()
            .map(|output| match output {
                ReplyOutput::Audio(piece) => piece,
                other => panic!("not audio: {other:?}"),
            })
            .collect();
        let segment = PlayoutSegment {
            turn: TurnId(1),
            epoch: Epoch(2),
            text: "Paris.".into(),
            audio: vec![0.0; 160],
            open: true,
        };
        assert_eq!(
            pieces,
            [
                PlayoutPiece::Segment(segment),
                PlayoutPiece::More { epoch: Epoch(2), audio: vec![0.0; 80], last: false },
                PlayoutPiece::More { epoch: Epoch(2), audio: vec![], last: true },
            ]
        );
    }

    #[tokio::test]
    async fn speech_that_goes_on_drops_the_early_reply() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut responder = responder(&asked, true);
        prepare(&mut responder, 0, 16_000, "What is the capital");
        // The user went on: the commit covers more audio, transcribed again (here: given).
        let timings = commit(&mut responder, 0, 32_000, "What is the capital of France?").await;
        assert!(!timings.llm_started_early);
        assert_eq!(timings.early_dropped, 1);
        assert_eq!(*asked.lock().unwrap(), ["What is the capital", "What is the capital of France?"]);
        assert_eq!(responder.history.last().unwrap().content, "What is the capital of France?");
    }

    #[tokio::test]
    async fn without_preemptive_generation_the_request_waits_for_the_commit() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut responder = responder(&asked, false);
        prepare(&mut responder, 0, 16_000, "What is the capital of France?");
        assert!(asked.lock().unwrap().is_empty());
        let timings = commit(&mut responder, 0, 16_000, "").await;
        assert!(!timings.llm_started_early);
        assert_eq!(asked.lock().unwrap().len(), 1);
    }
}
