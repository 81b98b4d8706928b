//! An avatar's voices as a chain: the primary (`config.tts`) and its `fallbacks`, tried in order for each
//! sentence. A voice fails a sentence when it errs before its first audio or sends none within its
//! `first_response_timeout`; the next voice says the sentence. A stream that breaks (an error, the end
//! without `Done`, or, unless it is the last voice asked, silence past the deadline) after some audio
//! resumes on the next voice with the words not yet said — estimated from the audio already passed on at
//! a conversational pace, rounded down, so that a word may be said twice but none is lost. Voices that
//! failed recently are skipped (`health`) unless every voice is.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::ProviderError;
use super::health::{Admission, FailureReason, ProviderHealth, ProviderKey};
use super::tts::{SpeechSynthesizer, TTS_STREAM_CAPACITY, TtsEvent, TtsStream};

/// Words per second of speech assumed when a voice broke mid-sentence (150 words a minute).
pub const WORDS_PER_SECOND: f64 = 2.5;
const SAMPLE_RATE: f64 = 16_000.0;

/// One voice of a chain.
pub struct TtsLink {
    pub voice: Arc<dyn SpeechSynthesizer>,
    pub key: ProviderKey,
    pub first_response: Duration,
}

/// The chain: a `SpeechSynthesizer` like any other.
#[derive(Clone)]
pub struct TtsChain {
    links: Arc<Vec<TtsLink>>,
    health: Arc<ProviderHealth>,
}

type Sender = mpsc::Sender<Result<TtsEvent, ProviderError>>;

/// The words of `text` after the first `said` seconds of its speech.
pub fn words_after(text: &str, said: Duration) -> String {
    let skip = (said.as_secs_f64() * WORDS_PER_SECOND).floor() as usize;
    text.split_whitespace().skip(skip).collect::<Vec<_>>().join(" ")
}

enum Outcome {
    Done,
    /// It failed before its first audio, or broke after `audio` seconds of it.
    Failed {
        reason: FailureReason,
        error: ProviderError,
    },
}

impl TtsChain {
    pub fn new(links: Vec<TtsLink>, health: Arc<ProviderHealth>) -> TtsChain {
        assert!(!links.is_empty(), "a chain has a primary");
        TtsChain { links: Arc::new(links), health }
    }

    async fn run(self, text: String, tx: Sender) {
        let now = Instant::now();
        let mut order: VecDeque<(usize, Admission)> = (0..self.links.len())
            .map(|i| (i, self.health.admit(&self.links[i].key, now)))
            .filter(|(_, admission)| *admission != Admission::Skip)
            .collect();
        if order.is_empty() {
            order = (0..self.links.len()).map(|i| (i, Admission::Healthy)).collect();
        }
        let mut remaining = text;
        let mut fell_back = false;
        let mut last_error = ProviderError::protocol("tts", "no voice to ask");
        while let Some((index, admission)) = order.pop_front() {
            let last = order.is_empty();
            let link = &self.links[index];
            self.health.requested(&link.key, fell_back);
            let mut said = Duration::ZERO;
            match self.say(index, admission, &remaining, last, &mut said, &tx).await {
                Outcome::Done => return,
                Outcome::Failed { reason, error } => {
                    tracing::warn!(provider = %link.key.provider, reason = reason.as_str(), "voice failed; asking the next");
                    self.health.failed(&link.key, reason, Instant::now());
                    remaining = words_after(&remaining, said);
                    fell_back = true;
                    last_error = error;
                    if remaining.is_empty() {
                        let _ = tx.send(Ok(TtsEvent::Done(Default::default()))).await;
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Err(last_error)).await;
    }

    /// One voice says `text`, its audio passed on; `said` grows with it.
    async fn say(
        &self,
        index: usize,
        admission: Admission,
        text: &str,
        last: bool,
        said: &mut Duration,
        tx: &Sender,
    ) -> Outcome {
        let link = &self.links[index];
        let started = Instant::now();
        let mut stream: TtsStream = link.voice.synthesize(text);
        let deadline = (!last).then_some(link.first_response);
        let mut answered = false;
        loop {
            let received = tokio::select! {
                _ = tx.closed() => {
                    if admission == Admission::Probe && !answered {
                        self.health.abandoned(&link.key);
                    }
                    return Outcome::Done;
                }
                received = recv_within(&mut stream, deadline) => received,
            };
            let failure = match received {
                Some(Some(Ok(event))) => {
                    if !answered {
                        answered = true;
                        self.health.succeeded(&link.key, started.elapsed());
                    }
                    if let TtsEvent::Audio(audio) = &event {
                        *said += Duration::from_secs_f64(audio.len() as f64 / SAMPLE_RATE);
                    }
                    let done = matches!(event, TtsEvent::Done(_));
                    if tx.send(Ok(event)).await.is_err() || done {
                        return Outcome::Done;
                    }
                    continue;
                }
                Some(Some(Err(error))) => {
                    let reason = if answered { FailureReason::Broken } else { FailureReason::of(&error) };
                    (reason, error)
                }
                Some(None) => {
                    let reason = if answered { FailureReason::Broken } else { FailureReason::Connection };
                    (reason, ProviderError::network("tts", "the voice's stream closed before it was done"))
                }
                None => {
                    let reason = if answered { FailureReason::Broken } else { FailureReason::Deadline };
                    (reason, ProviderError::network("tts", format!("{}: no audio in time", link.key.provider)))
                }
            };
            return Outcome::Failed { reason: failure.0, error: failure.1 };
        }
    }
}

impl SpeechSynthesizer for TtsChain {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        tokio::spawn(self.clone().run(text.to_string(), tx));
        rx
    }
}

/// The next event within `idle` (None when it passed).
async fn recv_within(
    stream: &mut TtsStream,
    idle: Option<Duration>,
) -> Option<Option<Result<TtsEvent, ProviderError>>> {
    match idle {
        Some(idle) => tokio::time::timeout(idle, stream.recv()).await.ok(),
        None => Some(stream.recv().await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_left_are_counted_from_the_audio_said_rounded_down() {
        let text = "The museum opens at ten on Sunday mornings.";
        assert_eq!(words_after(text, Duration::ZERO), text);
        assert_eq!(words_after(text, Duration::from_millis(1_300)), "at ten on Sunday mornings.");
        assert_eq!(words_after(text, Duration::from_secs(10)), "");
    }
}
