//! The reply asked for before the commit (preemptive generation) is read while the endpointing delay runs:
//! as soon as its first sentence is complete it goes to the voice, so that at the commit the first audio is
//! ready, or under way, rather than asked for then. Nothing is played before the commit: the sentence's
//! audio waits in its stream. Dropping an [`Ahead`] (the user went on speaking) stops the reading, the
//! model's generation and the synthesis.

use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinHandle;

use crate::providers::ProviderError;
use crate::providers::llm::{LlmEvent, LlmStream};
use crate::providers::sentences::{Piece, SentenceSplitter};
use crate::providers::tts::{SpeechSynthesizer, TtsStream};

/// What the model sent, as the stream gave it.
pub(super) type Received = Result<LlmEvent, ProviderError>;

/// An early reply being read in the background.
pub(super) struct Ahead {
    task: JoinHandle<Head>,
}

/// What the reading got to: the model's events up to the end of the first sentence (the reply reads them
/// again, in order, before the rest of the stream), the rest of the stream, and the first sentence with
/// its speech under way.
pub(super) struct Head {
    pub(super) received: Vec<Received>,
    pub(super) rest: LlmStream,
    pub(super) first: Option<SpokenAhead>,
}

/// A sentence handed to the voice ahead of the commit.
pub(super) struct SpokenAhead {
    pub(super) piece: Piece,
    pub(super) speech: TtsStream,
}

impl Ahead {
    /// Starts reading `stream`; its first sentence goes to `voice`.
    pub(super) fn start(stream: LlmStream, voice: Arc<dyn SpeechSynthesizer>) -> Ahead {
        Ahead { task: tokio::spawn(read_first_sentence(stream, voice)) }
    }

    /// The head of the reply, once its first sentence has gone to the voice (or the reply ended, or
    /// failed, before one was complete).
    pub(super) async fn head(mut self) -> Result<Head, ProviderError> {
        (&mut self.task).await.map_err(|err| ProviderError::protocol("llm", format!("the early reply stopped: {err}")))
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_first_sentence(mut stream: LlmStream, voice: Arc<dyn SpeechSynthesizer>) -> Head {
    let asked = Instant::now();
    let mut first_text = None;
    let mut splitter = SentenceSplitter::default();
    let mut received = Vec::new();
    let first = loop {
        let Some(event) = stream.recv().await else { break splitter.finish() };
        if matches!(event, Ok(LlmEvent::Text(_))) {
            first_text.get_or_insert_with(|| asked.elapsed());
        }
        let sentence = match &event {
            Ok(LlmEvent::Text(text)) => splitter.push(text).into_iter().next(),
            Ok(LlmEvent::ToolCall(_)) => None,
            Ok(LlmEvent::Done { .. }) => {
                received.push(event);
                break splitter.finish();
            }
            Err(_) => {
                received.push(event);
                break None;
            }
        };
        received.push(event);
        if sentence.is_some() {
            break sentence;
        }
    };
    if let Some(piece) = &first {
        tracing::debug!(
            first_text_ms = first_text.unwrap_or_default().as_millis() as u64,
            piece_ms = asked.elapsed().as_millis() as u64,
            text = %piece.text,
            "the early reply's first piece goes to the voice"
        );
    }
    let first = first.map(|piece| SpokenAhead { speech: voice.synthesize(&piece.voiced()), piece });
    Head { received, rest: stream, first }
}
