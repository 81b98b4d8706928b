//! The agent's side of a turn: the conversation so far goes to the language model, its streamed text is
//! split into sentences, each sentence is synthesized at once, and the audio becomes playout segments
//! stamped with the turn and epoch. Only what the user heard enters the history.

use std::time::Instant;

use serde_json::Value;

use crate::core::playout::PlayoutSegment;
use crate::core::{Epoch, TurnId};
use crate::providers::ProviderError;
use crate::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use crate::providers::select::{self, Recognizer};
use crate::providers::sentences::SentenceSplitter;
use crate::providers::tts::{SpeechSynthesizer, TtsEvent};
use crate::time::MediaTime;
use crate::turn_metrics::{ReplyTimings, TranscriptTiming};

/// Longest reply, in tokens.
pub const MAX_REPLY_TOKENS: u32 = 256;

pub struct Responder {
    llm: (Box<dyn LanguageModel>, String),
    tts: Box<dyn SpeechSynthesizer>,
    stt: Option<Recognizer>,
    system_prompt: String,
    history: Vec<ChatMessage>,
    /// A transcript made ahead of the commit, the audio range it covers, and how long it took.
    prepared: Option<((MediaTime, MediaTime), String, std::time::Duration)>,
    /// How long the last committed turn's transcript took (`turn_metrics`).
    last_transcript: Option<TranscriptTiming>,
    /// The last reply's provider stages (`turn_metrics`); filled in as they happen, so a cancelled reply
    /// keeps what it reached.
    last_reply: ReplyTimings,
}

impl Responder {
    /// Adapters from the first avatar's `config` (`llm`, `stt`, `tts`) and the agent's prompt.
    pub fn from_config(
        pipeline: &Value,
        system_prompt: String,
        models_dir: &std::path::Path,
    ) -> Result<Responder, ProviderError> {
        Ok(Responder {
            llm: select::language_model(&pipeline["llm"], models_dir)?,
            tts: select::synthesizer(&pipeline["tts"], models_dir)?,
            stt: select::recognizer(&pipeline["stt"], models_dir)?,
            system_prompt,
            history: Vec::new(),
            prepared: None,
            last_transcript: None,
            last_reply: ReplyTimings::default(),
        })
    }

    /// The user's words in 16 kHz audio; empty when no recognizer is configured.
    pub async fn transcribe(&self, audio: &[f32]) -> Result<String, ProviderError> {
        match &self.stt {
            Some(stt) if !audio.is_empty() => stt.transcribe(audio).await,
            _ => Ok(String::new()),
        }
    }

    /// Transcribes `[from, to)` ahead of the commit (while the endpointing delay runs).
    pub async fn prepare_transcript(&mut self, from: MediaTime, to: MediaTime, audio: &[f32]) {
        let started = Instant::now();
        match self.transcribe(audio).await {
            Ok(text) => self.prepared = Some(((from, to), text, started.elapsed())),
            Err(err) => tracing::debug!(error = %err, "early speech-to-text failed; it runs again at the commit"),
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
            Some((range, text, duration)) if range == (from, to) => {
                (text, TranscriptTiming { duration, prepared_ahead: true })
            }
            _ => {
                let text = self.transcribe(audio).await?;
                (text, TranscriptTiming { duration: started.elapsed(), prepared_ahead: false })
            }
        };
        self.last_transcript = Some(timing);
        Ok(text)
    }

    /// How long the last `transcript_for` took, and whether it was prepared ahead.
    pub fn last_transcript(&self) -> Option<TranscriptTiming> {
        self.last_transcript
    }

    /// The provider stages the last `respond` reached, from its language-model request.
    pub fn last_reply(&self) -> ReplyTimings {
        self.last_reply
    }

    /// Records what the user heard of the agent's last reply.
    pub fn heard(&mut self, text: &str) {
        if !text.is_empty() {
            self.history.push(ChatMessage::new("assistant", text));
        }
    }

    /// Answers `user_text`, calling `on_segment` with each synthesized sentence as soon as it is ready.
    pub async fn respond(
        &mut self,
        turn: TurnId,
        epoch: Epoch,
        user_text: &str,
        on_segment: &mut (dyn FnMut(PlayoutSegment) + Send),
    ) -> Result<(), ProviderError> {
        self.history.push(ChatMessage::new("user", user_text));
        let (llm, model) = &self.llm;
        let mut messages = vec![ChatMessage::new("system", self.system_prompt.clone())];
        messages.extend(self.history.iter().cloned());
        let request = ChatRequest {
            model: model.clone(),
            messages,
            tools: Vec::new(),
            max_tokens: MAX_REPLY_TOKENS,
            temperature: 0.6,
            stop: Vec::new(),
        };
        let requested = Instant::now();
        self.last_reply = ReplyTimings::default();
        let mut stream = llm.stream(request);
        let mut splitter = SentenceSplitter::default();
        while let Some(event) = stream.recv().await {
            match event? {
                LlmEvent::Text(text) => {
                    self.last_reply.llm_first_token.get_or_insert_with(|| requested.elapsed());
                    for sentence in splitter.push(&text) {
                        self.speak(requested, turn, epoch, sentence, on_segment).await?;
                    }
                }
                LlmEvent::ToolCall(_) => {} // tools are run by the tools issue
                LlmEvent::Done { .. } => break,
            }
        }
        if let Some(rest) = splitter.finish() {
            self.speak(requested, turn, epoch, rest, on_segment).await?;
        }
        Ok(())
    }

    /// Synthesizes one piece of the reply and hands it to playout; `requested` is when the reply's
    /// language-model request went out (the stages are timed from it).
    async fn speak(
        &mut self,
        requested: Instant,
        turn: TurnId,
        epoch: Epoch,
        text: String,
        on_segment: &mut (dyn FnMut(PlayoutSegment) + Send),
    ) -> Result<(), ProviderError> {
        self.last_reply.first_clause.get_or_insert_with(|| requested.elapsed());
        let mut stream = self.tts.synthesize(&text);
        let mut audio = Vec::new();
        while let Some(event) = stream.recv().await {
            match event? {
                TtsEvent::Audio(chunk) => {
                    self.last_reply.tts_first_audio.get_or_insert_with(|| requested.elapsed());
                    audio.extend(chunk);
                }
                TtsEvent::Done(_) => break,
            }
        }
        self.last_reply.first_segment.get_or_insert_with(|| requested.elapsed());
        on_segment(PlayoutSegment { turn, epoch, text, audio });
        Ok(())
    }
}
