//! The agent's side of a live session: a task on the I/O (tokio) runtime that owns the session's
//! `Responder` — speech-to-text of committed turns, the language model and speech synthesis — and talks
//! to the media thread through two queues. A newer epoch cancels the reply in flight by dropping it,
//! which closes the provider streams. The speech over the agent is transcribed beside the reply (a task of
//! its own), since it is judged while the reply is still being made.

use std::collections::VecDeque;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::mpsc;

use crate::core::{Epoch, TurnId};
use crate::providers::select::Recognizer;
use crate::responder::{ReplyOutput, Responder};
pub use crate::session_driver::AgentResult;
use crate::time::MediaTime;

/// Jobs waiting for the agent task. Full: the media thread drops the job and counts it.
pub const AGENT_JOBS: usize = 64;
/// Results waiting for the media thread (sentences of audio among them). Full: the agent task waits.
pub const AGENT_RESULTS: usize = 256;

pub enum AgentJob {
    /// Transcribe `[from, to)` ahead of the commit.
    Prepare {
        from: MediaTime,
        to: MediaTime,
        audio: Vec<f32>,
    },
    /// The committed turn `[from, to)`; the prepared transcript is used when it covers the same audio.
    Transcribe {
        turn: TurnId,
        from: MediaTime,
        to: MediaTime,
        audio: Vec<f32>,
    },
    Respond {
        turn: TurnId,
        epoch: Epoch,
        user_text: String,
    },
    Cancel {
        epoch: Epoch,
    },
    /// What the user heard of the last reply (enters the history).
    Heard(String),
    /// Transcribe the user's speech over the agent, audio up to `to` (`AgentResult::OverlapWords`).
    JudgeOverlap {
        to: MediaTime,
        audio: Vec<f32>,
    },
}

/// The media thread's ends of the queues.
pub struct AgentLink {
    pub jobs: mpsc::Sender<AgentJob>,
    pub results: Receiver<AgentResult>,
}

impl AgentLink {
    /// Sends without waiting; false when the queue is full or the task is gone.
    pub fn offer(&self, job: AgentJob) -> bool {
        self.jobs.try_send(job).is_ok()
    }
}

/// Starts the agent task for one session. The task ends when its session is gone, once the guardrail
/// callbacks it started are sent (`Responder::finish_callbacks`).
pub fn spawn(io: &tokio::runtime::Handle, mut responder: Responder) -> (AgentLink, tokio::task::JoinHandle<()>) {
    let (jobs, jobs_rx) = mpsc::channel(AGENT_JOBS);
    let (results_tx, results) = crossbeam_channel::bounded(AGENT_RESULTS);
    let task = io.spawn(async move {
        run(&mut responder, jobs_rx, results_tx).await;
        responder.finish_callbacks().await;
    });
    (AgentLink { jobs, results }, task)
}

async fn deliver(results: &Sender<AgentResult>, mut result: AgentResult) -> bool {
    loop {
        match results.try_send(result) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => {
                result = back;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    }
}

/// The largest magnitude in `audio` (diagnostics).
fn peak(audio: &[f32]) -> f32 {
    audio.iter().fold(0.0, |max, sample| max.max(sample.abs()))
}

/// The transcript of speech over the agent (`None` when there is no recognizer or it failed).
async fn overlap_words(stt: Option<Recognizer>, to: MediaTime, audio: Vec<f32>) -> AgentResult {
    let text = match stt {
        Some(stt) => stt
            .transcribe(&audio)
            .await
            .map_err(|err| tracing::warn!(error = %err, "speech over the agent could not be transcribed"))
            .ok(),
        None => None,
    };
    tracing::debug!(to = ?to, samples = audio.len(), text = text.as_deref().unwrap_or("-"), "speech over the agent transcribed");
    AgentResult::OverlapWords { to, text }
}

/// Transcribes speech over the agent in a task of its own, so that a reply being made does not hold it up.
fn judge_beside(stt: Option<Recognizer>, to: MediaTime, audio: Vec<f32>, results: &Sender<AgentResult>) {
    let results = results.clone();
    tokio::spawn(async move {
        deliver(&results, overlap_words(stt, to, audio).await).await;
    });
}

fn agent_result(output: ReplyOutput) -> AgentResult {
    match output {
        ReplyOutput::Audio(piece) => AgentResult::Segment(piece),
        ReplyOutput::Event { epoch, kind } => AgentResult::Event { epoch, kind },
    }
}

async fn run(responder: &mut Responder, mut jobs: mpsc::Receiver<AgentJob>, results: Sender<AgentResult>) {
    let mut waiting: VecDeque<AgentJob> = VecDeque::new();
    loop {
        let job = match waiting.pop_front() {
            Some(job) => job,
            None => match jobs.recv().await {
                Some(job) => job,
                None => return,
            },
        };
        match job {
            AgentJob::Respond { turn, epoch, user_text } => {
                // Unbounded, but never more than one reply: the callback cannot wait (it runs inside the
                // reply's future), and this loop stops polling that future while it waits to deliver, so
                // what queues here is what the reply produced since the last delivery (its audio pieces,
                // a few seconds of speech at most for a sentence).
                let (segments_tx, mut segments_rx) = mpsc::unbounded_channel();
                let mut on_segment = |segment| {
                    let _ = segments_tx.send(segment);
                };
                let stt = responder.recognizer();
                let finished = {
                    let reply = responder.respond(turn, epoch, &user_text, &mut on_segment);
                    tokio::pin!(reply);
                    loop {
                        tokio::select! {
                            outcome = &mut reply => {
                                if let Err(err) = outcome {
                                    tracing::warn!(error = %err, "the agent's reply failed");
                                }
                                break true;
                            }
                            Some(output) = segments_rx.recv() => {
                                if !deliver(&results, agent_result(output)).await {
                                    return;
                                }
                            }
                            job = jobs.recv() => match job {
                                Some(AgentJob::Cancel { epoch: newer }) if newer > epoch => break false,
                                Some(AgentJob::JudgeOverlap { to, audio }) => judge_beside(stt.clone(), to, audio, &results),
                                Some(other) => waiting.push_back(other),
                                None => return,
                            },
                        }
                    }
                }; // the reply future is dropped here: a cancelled reply closes its provider streams
                if finished {
                    while let Ok(output) = segments_rx.try_recv() {
                        if !deliver(&results, agent_result(output)).await {
                            return;
                        }
                    }
                    let timings = responder.last_reply();
                    if !deliver(&results, AgentResult::ReplyEnd { turn, timings }).await {
                        return;
                    }
                }
            }
            AgentJob::JudgeOverlap { to, audio } => judge_beside(responder.recognizer(), to, audio, &results),
            other => {
                if !run_job(responder, other, &results).await {
                    return;
                }
            }
        }
    }
}

/// Runs one job other than a reply; false when the media thread is gone.
async fn run_job(responder: &mut Responder, job: AgentJob, results: &Sender<AgentResult>) -> bool {
    match job {
        AgentJob::Prepare { from, to, audio } => {
            tracing::debug!(from = ?from, to = ?to, samples = audio.len(), peak = peak(&audio), "transcribing ahead");
            responder.prepare_transcript(from, to, &audio).await
        }
        AgentJob::Transcribe { turn, from, to, audio } => {
            let text = responder.transcript_for(from, to, &audio).await.unwrap_or_else(|err| {
                tracing::warn!(error = %err, "speech-to-text failed; the turn's text is empty");
                String::new()
            });
            let timing = responder.last_transcript();
            tracing::debug!(?turn, from = ?from, to = ?to, samples = audio.len(), peak = peak(&audio),
                prepared = timing.as_ref().is_some_and(|t| t.prepared_ahead), %text, "committed turn transcribed");
            return deliver(results, AgentResult::Transcript { turn, text, timing }).await;
        }
        AgentJob::Heard(text) => responder.heard(&text),
        AgentJob::Cancel { .. } => {}
        AgentJob::JudgeOverlap { to, audio } => {
            return deliver(results, overlap_words(responder.recognizer(), to, audio).await).await;
        }
        // Replies are run by the caller: cancellable live (`run`), to their end in line (`InlineAgent`).
        AgentJob::Respond { .. } => {}
    }
    true
}

/// A reply's pieces waiting for a stepped runtime's media thread (`InlineAgent`): a whole reply arrives at
/// once. Full: the later pieces of the reply are dropped (a reply of over a minute of speech).
pub const INLINE_AGENT_RESULTS: usize = 4_096;

/// A session's agent work done in line, for a runtime its caller steps (`runtime::stepped`): each waiting
/// job runs to its end on the caller's I/O runtime before the step returns, so a reply's pieces are all
/// there at the next step (as in `confab simulate` offline), and no reply is cancelled half-way.
pub struct InlineAgent {
    responder: Responder,
    jobs: mpsc::Receiver<AgentJob>,
    results: Sender<AgentResult>,
}

/// The link a stepped session is given, and the inline agent that answers it.
pub fn inline(responder: Responder) -> (AgentLink, InlineAgent) {
    let (jobs, jobs_rx) = mpsc::channel(AGENT_JOBS);
    let (results_tx, results) = crossbeam_channel::bounded(INLINE_AGENT_RESULTS);
    (AgentLink { jobs, results }, InlineAgent { responder, jobs: jobs_rx, results: results_tx })
}

impl InlineAgent {
    /// Whether its session is gone and every job it left has run.
    pub fn is_done(&self) -> bool {
        self.jobs.is_closed() && self.jobs.is_empty()
    }

    /// Sends the guardrail callbacks still going out (`Responder::finish_callbacks`), on `io`.
    pub fn finish(mut self, io: &tokio::runtime::Handle) {
        io.block_on(self.responder.finish_callbacks());
    }

    /// Runs every job waiting now, on `io`.
    pub fn run_waiting(&mut self, io: &tokio::runtime::Handle) {
        while let Ok(job) = self.jobs.try_recv() {
            match job {
                AgentJob::Respond { turn, epoch, user_text } => {
                    let mut outputs = Vec::new();
                    let outcome = {
                        let mut collect = |output| outputs.push(output);
                        io.block_on(self.responder.respond(turn, epoch, &user_text, &mut collect))
                    };
                    if let Err(err) = outcome {
                        tracing::warn!(error = %err, "the agent's reply failed");
                    }
                    let timings = self.responder.last_reply();
                    let results =
                        outputs.into_iter().map(agent_result).chain([AgentResult::ReplyEnd { turn, timings }]);
                    for result in results {
                        let _ = self.results.try_send(result);
                    }
                }
                other => {
                    io.block_on(run_job(&mut self.responder, other, &self.results));
                }
            }
        }
    }
}
