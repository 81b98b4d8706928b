//! An avatar's voices as a chain: the primary (`config.tts`) and its `fallbacks`, tried in order for each
//! sentence. A voice fails a sentence when it errs before its first audio or sends none within its
//! `first_response_timeout`; the next voice says the sentence. A stream that breaks (an error, the end
//! without `Done`, or, unless it is the last voice asked, silence past the deadline) after some audio
//! resumes on the next voice with the words not yet said — estimated from the audio already passed on at
//! a conversational pace, rounded down, so that a word may be said twice but none is lost. Voices that
//! failed recently are skipped (`health`) unless every voice is. Which voice said the sentences, and
//! which failed them, is kept until `take_served` (one reply's sentences, for `turn_metrics`).
//!
//! With `hedge_after`, when the first voice asked has sent no audio by then, the next voice is asked
//! for the same sentence too; the first to send audio says it and the other is dropped.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::ProviderError;
use super::chain::{ProbeGuard, Relayed, ServedBy, ServedLog, hedged, next_piece, recv_within};
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
    hedge_after: Option<Duration>,
    served: Arc<ServedLog>,
}

type Sender = mpsc::Sender<Result<TtsEvent, ProviderError>>;

/// The words of `text` after the first `said` seconds of its speech.
pub fn words_after(text: &str, said: Duration) -> String {
    let skip = (said.as_secs_f64() * WORDS_PER_SECOND).floor() as usize;
    text.split_whitespace().skip(skip).collect::<Vec<_>>().join(" ")
}

/// A voice that has begun a sentence: its stream and first event.
struct Opened {
    index: usize,
    stream: TtsStream,
    first: TtsEvent,
}

/// What asking one voice for its first audio came to.
type Opening = Result<Opened, (FailureReason, ProviderError)>;

impl TtsChain {
    /// `links` in order (at least one); `health` the table to consult and keep.
    pub fn new(links: Vec<TtsLink>, health: Arc<ProviderHealth>, hedge_after: Option<Duration>) -> TtsChain {
        assert!(!links.is_empty(), "a chain has a primary");
        TtsChain { links: Arc::new(links), health, hedge_after, served: Arc::default() }
    }

    async fn run(self, text: String, tx: Sender) {
        let mut order: VecDeque<(usize, Admission)> =
            self.health.order(self.links.iter().map(|link| &link.key), Instant::now()).into();
        let mut remaining = text;
        let mut served = ServedBy::default();
        let mut last_error = ProviderError::protocol("tts", "no voice to ask");
        let mut first_asked = true;
        while let Some((index, admission)) = order.pop_front() {
            let last = order.is_empty();
            let after_fallback = !served.fell_back.is_empty();
            let first = self.open(index, admission, &remaining, last, after_fallback);
            let hedge = self.hedge_after.filter(|_| std::mem::take(&mut first_asked) && !last);
            let opening = async {
                match hedge {
                    None => vec![(index, first.await)],
                    Some(after) => {
                        let (next, next_admission) = order[0];
                        let next_last = order.len() == 1;
                        let second = || self.open(next, next_admission, &remaining, next_last, false);
                        hedged(index, first, after, next, second).await
                    }
                }
            };
            let outcomes = tokio::select! {
                _ = tx.closed() => return,
                outcomes = opening => outcomes,
            };
            let mut opened = None;
            for (index, outcome) in outcomes {
                match outcome {
                    Ok(voice) => opened = Some(voice),
                    Err((reason, error)) => {
                        served.failed("tts", &self.links[index].key.provider, reason, "failed a sentence");
                        last_error = error;
                    }
                }
                // The voice a hedge raced against is used up: failed, or the one that won.
                if hedge.is_some() && order.front().is_some_and(|&(next, _)| next == index) {
                    order.pop_front();
                }
            }
            let Some(opened) = opened else { continue };
            let (index, last) = (opened.index, order.is_empty());
            let mut said = Duration::ZERO;
            match self.relay(opened, last, &mut said, &tx).await {
                Relayed::Done => {
                    served.provider = self.links[index].key.provider.clone();
                    remaining.clear();
                    break;
                }
                Relayed::Broken(error) => {
                    let key = &self.links[index].key;
                    served.failed("tts", &key.provider, FailureReason::Broken, "broke mid-sentence");
                    self.health.failed(key, FailureReason::Broken, Instant::now());
                    remaining = words_after(&remaining, said);
                    last_error = error;
                    if remaining.is_empty() {
                        let _ = tx.send(Ok(TtsEvent::Done(Default::default()))).await;
                        break;
                    }
                }
            }
        }
        let failed = !remaining.is_empty();
        self.served.merge(served);
        if failed {
            let _ = tx.send(Err(last_error)).await;
        }
    }

    /// Asks voice `index` to say `text` and waits for its first event, within its deadline unless it is
    /// the `last`, keeping the health table.
    async fn open(&self, index: usize, admission: Admission, text: &str, last: bool, after_fallback: bool) -> Opening {
        let link = &self.links[index];
        self.health.requested(&link.key, after_fallback);
        let mut guard = ProbeGuard::new(&self.health, &link.key, admission == Admission::Probe);
        let started = Instant::now();
        let mut stream = link.voice.synthesize(text);
        let deadline = (!last).then_some(link.first_response);
        let outcome = match recv_within(&mut stream, deadline).await {
            Some(Some(Ok(first))) => Ok(Opened { index, stream, first }),
            Some(Some(Err(error))) => Err((FailureReason::of(&error), error)),
            Some(None) => Err((
                FailureReason::Connection,
                ProviderError::network("tts", "the voice's stream closed before any audio"),
            )),
            None => Err((
                FailureReason::Deadline,
                ProviderError::network("tts", format!("{}: no audio in time", link.key.provider)),
            )),
        };
        guard.disarm();
        match &outcome {
            Ok(_) => self.health.succeeded(&link.key, started.elapsed()),
            Err((reason, _)) => self.health.failed(&link.key, *reason, Instant::now()),
        }
        outcome
    }

    /// Passes on a voice's speech from its first event until `Done`; `said` grows with its audio. A
    /// stream that errs, ends without `Done` or (unless it is the `last`) stays silent past the voice's
    /// deadline is broken.
    async fn relay(&self, opened: Opened, last: bool, said: &mut Duration, tx: &Sender) -> Relayed {
        let Opened { index, mut stream, first } = opened;
        let idle = (!last).then_some(self.links[index].first_response);
        let mut event = Some(first);
        loop {
            let next = match event.take() {
                Some(event) => event,
                None => match next_piece(&mut stream, idle, tx, "tts").await {
                    Ok(event) => event,
                    Err(end) => return end,
                },
            };
            if let TtsEvent::Audio(audio) = &next {
                *said += Duration::from_secs_f64(audio.len() as f64 / SAMPLE_RATE);
            }
            let done = matches!(next, TtsEvent::Done(_));
            if tx.send(Ok(next)).await.is_err() || done {
                return Relayed::Done;
            }
        }
    }
}

impl SpeechSynthesizer for TtsChain {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(TTS_STREAM_CAPACITY);
        tokio::spawn(self.clone().run(text.to_string(), tx));
        rx
    }

    fn take_served(&self) -> Option<ServedBy> {
        self.served.take()
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
