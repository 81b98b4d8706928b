//! An avatar's language models as a chain: the primary (`config.llm`) and its `fallbacks`, tried in order
//! for each request. A link fails a request when it errs before answering (a connection error, a 429 —
//! passed on at once —, a 5xx, a protocol error) or sends no first token within its
//! `first_response_timeout`; the next link is then asked. A stream that breaks or goes silent for longer
//! than that deadline after some text continues on the next link from what was already said
//! (`continuation`): nothing already passed on is passed on again. Links that failed recently are
//! skipped (`health`, shared by every call of the process) unless every link is. The last link asked
//! has nowhere to go: it gets no deadline of the chain's and runs on its adapter's own timeouts.
//!
//! With `hedge_after`, when the first link asked has not answered by then, the next one is asked too;
//! the first to answer is used and the other cancelled (its connection closed).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::ProviderError;
pub use super::chain::ServedBy;
use super::chain::{Relayed, ServedLog, next_piece, sleep_until};
use super::continuation::{OverlapFilter, continuation_request};
use super::health::{Admission, FailureReason, ProviderHealth, ProviderKey};
use super::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, LlmStream, ToolSpec};
use super::openai_llm::LLM_STREAM_CAPACITY;

/// One language model of a chain.
pub struct LlmLink {
    pub model: Arc<dyn LanguageModel>,
    /// The model name its requests carry.
    pub model_name: String,
    /// How `/metrics` and the health table name it (`provider:model`).
    pub key: ProviderKey,
    /// `first_response_timeout`.
    pub first_response: Duration,
}

struct Inner {
    links: Vec<LlmLink>,
    health: Arc<ProviderHealth>,
    hedge_after: Option<Duration>,
    last_served: ServedLog,
}

/// The chain: a `LanguageModel` like any other.
#[derive(Clone)]
pub struct LlmChain {
    inner: Arc<Inner>,
}

type Sender = mpsc::Sender<Result<LlmEvent, ProviderError>>;

/// How the wait for a first answer ended.
enum FirstAnswer {
    /// The receiver let go.
    Cancelled,
    /// `link` answered with `event`.
    Answered(LinkStream, LlmEvent),
    /// The link failed; `hedge` is the next link, already asked.
    Failed { reason: FailureReason, error: ProviderError, hedge: Option<LinkStream> },
}

/// One link's stream being read.
struct LinkStream {
    index: usize,
    stream: LlmStream,
    started: Instant,
    admission: Admission,
}

impl LlmChain {
    /// `links` in order (at least one); `health` the table to consult and keep.
    pub fn new(links: Vec<LlmLink>, health: Arc<ProviderHealth>, hedge_after: Option<Duration>) -> LlmChain {
        assert!(!links.is_empty(), "a chain has a primary");
        LlmChain { inner: Arc::new(Inner { links, health, hedge_after, last_served: ServedLog::default() }) }
    }

    /// The links to ask for one request, in order, with their admission (`ProviderHealth::order`).
    fn admitted(&self, now: Instant) -> Vec<(usize, Admission)> {
        self.inner.health.order(self.inner.links.iter().map(|link| &link.key), now)
    }
}

impl LanguageModel for LlmChain {
    fn stream(&self, request: ChatRequest) -> LlmStream {
        let (tx, rx) = mpsc::channel(LLM_STREAM_CAPACITY);
        let chain = self.clone();
        tokio::spawn(async move { chain.run(request, tx).await });
        rx
    }

    fn warm(&self, messages: &[ChatMessage], tools: &[ToolSpec]) {
        for link in &self.inner.links {
            link.model.warm(messages, tools);
        }
    }

    fn free_for_early_request(&self) -> bool {
        self.inner.links[0].model.free_for_early_request()
    }

    fn served(&self) -> Option<ServedBy> {
        self.inner.last_served.last()
    }
}

impl LlmChain {
    async fn run(&self, request: ChatRequest, tx: Sender) {
        let inner = &self.inner;
        let mut queue: VecDeque<(usize, Admission)> = self.admitted(Instant::now()).into();
        let mut said = String::new();
        let mut served = ServedBy::default();
        let mut asked: Option<LinkStream> = None;
        let mut first_request = true;
        let mut last_error = ProviderError::protocol("llm", "no language model to ask");
        while let Some(next) = queue.pop_front() {
            let last = queue.is_empty();
            let link = match asked.take() {
                Some(link) if link.index == next.0 => link,
                _ => self.start(next, &request, &said, !served.fell_back.is_empty()),
            };
            let hedge = inner.hedge_after.filter(|_| first_request && said.is_empty() && !last);
            first_request = false;
            let (link, first) = match self.first_answer(link, last, hedge, &mut queue, &request, &mut served, &tx).await
            {
                FirstAnswer::Cancelled => return,
                FirstAnswer::Answered(link, first) => (link, first),
                FirstAnswer::Failed { reason, error, hedge } => {
                    self.note_failure(&mut served, next.0, reason, "failed before answering");
                    asked = hedge;
                    last_error = error;
                    continue;
                }
            };
            let index = link.index;
            let last = queue.is_empty();
            match self.relay(link, first, last, &mut said, &tx).await {
                Relayed::Done => {
                    served.provider = inner.links[index].key.provider.clone();
                    inner.last_served.replace(served);
                    return;
                }
                Relayed::Broken(error) => {
                    inner.health.failed(&inner.links[index].key, FailureReason::Broken, Instant::now());
                    self.note_failure(&mut served, index, FailureReason::Broken, "broke mid-reply");
                    last_error = error;
                }
            }
        }
        inner.last_served.replace(served);
        let _ = tx.send(Err(last_error)).await;
    }

    fn note_failure(&self, served: &mut ServedBy, index: usize, reason: FailureReason, what: &str) {
        served.failed("llm", &self.inner.links[index].key.provider, reason, what);
    }

    /// Asks link `index` for the reply (continued after `said` when something was).
    fn start(
        &self,
        (index, admission): (usize, Admission),
        request: &ChatRequest,
        said: &str,
        after: bool,
    ) -> LinkStream {
        let link = &self.inner.links[index];
        let mut request = if said.is_empty() { request.clone() } else { continuation_request(request, said) };
        request.model = link.model_name.clone();
        self.inner.health.requested(&link.key, after);
        LinkStream { index, stream: link.model.stream(request), started: Instant::now(), admission }
    }

    /// A link's request was cancelled before it answered (a probe then tells nothing).
    fn abandon(&self, link: LinkStream) {
        if link.admission == Admission::Probe {
            self.inner.health.abandoned(&self.inner.links[link.index].key);
        }
    }

    /// Waits for `link`'s first event, within its deadline unless it is the `last`; with `hedge`, asks the
    /// next link in `queue` too once that long has passed without an answer (the first to answer wins,
    /// the other is dropped, which closes its connection).
    #[allow(clippy::too_many_arguments)]
    async fn first_answer(
        &self,
        link: LinkStream,
        last: bool,
        hedge: Option<Duration>,
        queue: &mut VecDeque<(usize, Admission)>,
        request: &ChatRequest,
        served: &mut ServedBy,
        tx: &Sender,
    ) -> FirstAnswer {
        let health = &self.inner.health;
        let mut link = link;
        let deadline = (!last).then(|| link.started + self.inner.links[link.index].first_response);
        let mut hedge_at = hedge.map(|after| link.started + after);
        let mut hedged: Option<LinkStream> = None;
        loop {
            let wake = [deadline, hedge_at].into_iter().flatten().min();
            let event = tokio::select! {
                _ = tx.closed() => {
                    self.abandon(link);
                    if let Some(other) = hedged { self.abandon(other); }
                    return FirstAnswer::Cancelled;
                }
                event = link.stream.recv() => Some((false, event)),
                event = recv_hedge(&mut hedged) => Some((true, event)),
                _ = sleep_until(wake) => None,
            };
            match event {
                None if hedge_at.is_some_and(|at| Instant::now() >= at) => {
                    hedge_at = None;
                    if let Some(&next) = queue.front() {
                        hedged = Some(self.start(next, request, "", false));
                    }
                }
                None => {
                    let key = &self.inner.links[link.index].key;
                    health.failed(key, FailureReason::Deadline, Instant::now());
                    let error = ProviderError::network("llm", format!("{}: no first token in time", key.provider));
                    return FirstAnswer::Failed { reason: FailureReason::Deadline, error, hedge: hedged };
                }
                Some((false, Some(Ok(event)))) => {
                    health.succeeded(&self.inner.links[link.index].key, link.started.elapsed());
                    if let Some(other) = hedged {
                        self.abandon(other);
                    }
                    return FirstAnswer::Answered(link, event);
                }
                Some((true, Some(Ok(event)))) => {
                    let winner = hedged.take().expect("the hedge answered");
                    health.succeeded(&self.inner.links[winner.index].key, winner.started.elapsed());
                    queue.pop_front();
                    self.abandon(std::mem::replace(&mut link, winner));
                    return FirstAnswer::Answered(link, event);
                }
                Some((from_hedge, failure)) => {
                    let error = match failure {
                        Some(Err(error)) => error,
                        _ => ProviderError::network("llm", "the stream closed before it answered"),
                    };
                    let reason = FailureReason::of(&error);
                    if from_hedge {
                        let failed = hedged.take().expect("the hedge failed");
                        health.failed(&self.inner.links[failed.index].key, reason, Instant::now());
                        self.note_failure(served, failed.index, reason, "failed before answering (hedge)");
                        queue.pop_front();
                        continue;
                    }
                    health.failed(&self.inner.links[link.index].key, reason, Instant::now());
                    return FirstAnswer::Failed { reason, error, hedge: hedged };
                }
            }
        }
    }

    /// Passes on `link`'s reply from its `first` event until it is done; a stream that errs, closes, or
    /// (unless `last`) stays silent past the link's deadline is broken. Text after a break goes through
    /// the overlap filter of what was `said` before.
    async fn relay(
        &self,
        mut link: LinkStream,
        first: LlmEvent,
        last: bool,
        said: &mut String,
        tx: &Sender,
    ) -> Relayed {
        let idle = (!last).then_some(self.inner.links[link.index].first_response);
        let mut filter = (!said.is_empty()).then(|| OverlapFilter::new(said));
        let mut event = Some(first);
        loop {
            let next = match event.take() {
                Some(event) => event,
                None => match next_piece(&mut link.stream, idle, tx, "llm").await {
                    Ok(event) => event,
                    Err(end) => return end,
                },
            };
            let out = match next {
                LlmEvent::Text(text) => {
                    let text = match &mut filter {
                        Some(filter) => filter.push(&text),
                        None => text,
                    };
                    if text.is_empty() {
                        continue;
                    }
                    said.push_str(&text);
                    LlmEvent::Text(text)
                }
                LlmEvent::Done { finish_reason, metrics } => {
                    if let Some(rest) = filter.as_mut().map(OverlapFilter::finish).filter(|rest| !rest.is_empty()) {
                        said.push_str(&rest);
                        if tx.send(Ok(LlmEvent::Text(rest))).await.is_err() {
                            return Relayed::Done;
                        }
                    }
                    let _ = tx.send(Ok(LlmEvent::Done { finish_reason, metrics })).await;
                    return Relayed::Done;
                }
                other => other,
            };
            if tx.send(Ok(out)).await.is_err() {
                return Relayed::Done;
            }
        }
    }
}

/// The hedge's next event; never, while there is none.
async fn recv_hedge(hedged: &mut Option<LinkStream>) -> Option<Result<LlmEvent, ProviderError>> {
    match hedged {
        Some(link) => link.stream.recv().await,
        None => std::future::pending().await,
    }
}
