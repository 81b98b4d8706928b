//! What the media threads and the inference threads say to each other: VAD windows and turn-model
//! questions going in, probabilities and verdicts coming back.

use std::time::Instant;

use confab_models::silero::WINDOW;

use super::slots::SessionId;
use crate::time::MediaTime;

/// One VAD window of one session, carried inline (no allocation).
pub struct VadJob {
    pub thread: usize,
    pub session: SessionId,
    pub start: MediaTime,
    pub window: [f32; WINDOW],
    /// The energy gate has judged the window silence (`VadDecision::InferAsSilence`): the model runs on it so
    /// its state follows the audio, and its result is probability 0.
    pub as_silence: bool,
    /// The window's level (dBFS).
    pub level: f32,
}

pub struct VadResult {
    pub session: SessionId,
    pub start: MediaTime,
    pub probability: f32,
    pub level: f32,
}

/// The turn model's question: the user's audio up to the end of their speech.
pub struct TurnJob {
    pub thread: usize,
    pub session: SessionId,
    pub last_speech: MediaTime,
    pub audio: Vec<f32>,
    /// When the media thread asked.
    pub asked_at: Instant,
    /// After this the turn has ended at its max endpointing delay: the question is dropped unanswered
    /// (counted in `turn_stale`) rather than spend 50 ms on a verdict nobody reads (`turn_backlog`).
    pub answer_by: Instant,
}

/// A voice check (`core::other_voices`): the user's last 1.6 s of audio up to `end`, to be voiceprinted.
pub struct VoiceJob {
    pub thread: usize,
    pub session: SessionId,
    pub end: MediaTime,
    pub audio: Vec<f32>,
}

pub enum InferenceResult {
    Vad(VadResult),
    /// The voiceprint of a `VoiceJob`'s audio.
    Voice {
        session: SessionId,
        end: MediaTime,
        print: confab_models::voice_encoder::Voiceprint,
    },
    Turn {
        session: SessionId,
        last_speech: MediaTime,
        user_done: bool,
    },
    /// Inference panicked on this session's input: its call is ended.
    Failed {
        session: SessionId,
    },
}

impl InferenceResult {
    pub fn session(&self) -> SessionId {
        match self {
            InferenceResult::Vad(result) => result.session,
            InferenceResult::Turn { session, .. }
            | InferenceResult::Voice { session, .. }
            | InferenceResult::Failed { session } => *session,
        }
    }
}
