//! Inference threads: the VAD thread runs windows from every media thread in batches; a pool of
//! turn-model threads (one per core by default, each with its own model, on two operator threads) answers
//! end-of-turn questions from one shared queue, newest first (`turn_backlog`); the voice thread voiceprints
//! the calls that tell the user's voice from others (`VoiceWorker`, its model loaded at its first check). They are separate
//! so a slow turn-model call (tens of milliseconds) never delays the VAD windows every session needs every
//! 32 ms, and the turn and voice threads run at a lower priority than the media threads, so a busy model
//! never makes a 20 ms tick late.
//!
//! Per-session model state lives in arrays indexed by session slot; a window from a new tenant of a
//! slot (a newer generation) starts from a fresh state. A panic during inference is contained: the
//! sessions of the failed batch (or turn question) get `InferenceResult::Failed` and their calls end.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use confab_models::silero::{SileroState, SileroVad};
use confab_models::smart_turn::{DONE_THRESHOLD, SmartTurn};
use confab_models::voice_encoder::VoiceEncoder;
use crossbeam_channel::{Receiver, Sender, TryRecvError, select};

use super::contain::contain;
use super::jobs::{InferenceResult, TurnJob, VadJob, VadResult, VoiceJob};
use super::turn_backlog::SharedBacklog;
use super::{MAX_VAD_BATCH, RuntimeConfig, RuntimeCounters, TURN_QUEUE};
use crate::priority::{TURN_NICENESS, lower_priority};

/// Loads the models and starts the VAD thread and `RuntimeConfig::turn_threads` turn-model threads.
pub fn spawn(
    config: &RuntimeConfig,
    vad_jobs: Receiver<VadJob>,
    turn_jobs: Receiver<TurnJob>,
    voice_jobs: Receiver<VoiceJob>,
    results: Vec<Sender<InferenceResult>>,
    shutdown: Receiver<()>,
    counters: Arc<RuntimeCounters>,
) -> Result<Vec<JoinHandle<()>>, confab_models::ModelError> {
    let vad = SileroVad::load(&config.models_dir, MAX_VAD_BATCH, config.inference_intra_threads)?;
    let turn_models = (0..config.turn_threads.max(1))
        .map(|_| SmartTurn::load(&config.models_dir, config.turn_model_threads.max(1)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut worker = VadWorker::new(vad, config.max_sessions, results.clone(), counters.clone());
    let vad_shutdown = shutdown.clone();
    let vad_thread = std::thread::Builder::new()
        .name("confab-vad".into())
        .spawn(move || worker.run(vad_jobs, vad_shutdown))
        .expect("spawning the VAD thread");
    let mut voice = VoiceWorker::new(config, results.clone(), counters.clone());
    let voice_shutdown = shutdown.clone();
    let voice_thread = std::thread::Builder::new()
        .name("confab-voice".into())
        .spawn(move || {
            if let Err(err) = lower_priority(TURN_NICENESS) {
                tracing::warn!(error = %err, "could not lower the voice thread's priority");
            }
            loop {
                select! {
                    recv(voice_jobs) -> job => match job {
                        Ok(job) => voice.run(job),
                        Err(_) => return,
                    },
                    recv(voice_shutdown) -> _ => return,
                }
            }
        })
        .expect("spawning the voice thread");
    let mut threads = vec![vad_thread, voice_thread];
    let backlog = Arc::new(SharedBacklog::new(TURN_QUEUE));
    for (index, mut turn) in turn_models.into_iter().enumerate() {
        let (jobs, results, counters, shutdown, backlog) =
            (turn_jobs.clone(), results.clone(), counters.clone(), shutdown.clone(), backlog.clone());
        let thread = std::thread::Builder::new()
            .name(format!("confab-turn-{index}"))
            .spawn(move || {
                if let Err(err) = lower_priority(TURN_NICENESS) {
                    tracing::warn!(error = %err, "could not lower the turn-model thread's priority");
                }
                loop {
                    match backlog.next(&jobs, &counters) {
                        Some(job) => run_turn(&mut turn, &results, &counters, job),
                        None => select! {
                            recv(jobs) -> job => match job {
                                Ok(job) => backlog.admit(job, &counters),
                                Err(_) => return,
                            },
                            recv(backlog.woken()) -> _ => {}
                            recv(shutdown) -> _ => return,
                        },
                    }
                }
            })
            .expect("spawning a turn-model thread");
        threads.push(thread);
    }
    Ok(threads)
}

fn run_turn(turn: &mut SmartTurn, results: &[Sender<InferenceResult>], counters: &RuntimeCounters, job: TurnJob) {
    let session = job.session;
    let started = std::time::Instant::now();
    let result = match contain(counters, "the turn model", || turn.predict(&job.audio)) {
        Some(prediction) => {
            let user_done = match prediction {
                Ok(probability) => probability > DONE_THRESHOLD,
                Err(err) => {
                    tracing::error!(error = %err, "turn model failed; the user counts as done");
                    true
                }
            };
            InferenceResult::Turn { session, last_speech: job.last_speech, user_done }
        }
        None => InferenceResult::Failed { session },
    };
    tracing::debug!(took_ms = started.elapsed().as_millis() as u64, "turn model verdict");
    counters.turn_verdicts.fetch_add(1, Ordering::Relaxed);
    counters.turn_wait.record(job.asked_at.elapsed());
    let _ = results[job.thread].send(result);
}

/// Voice checks: the voice encoder, loaded at the first check (most calls never ask for one). When it
/// cannot be loaded the checks go unanswered and the level decides alone (said once in the log).
struct VoiceWorker {
    models_dir: std::path::PathBuf,
    encoder: Option<VoiceEncoder>,
    unavailable: bool,
    results: Vec<Sender<InferenceResult>>,
    counters: Arc<RuntimeCounters>,
}

impl VoiceWorker {
    fn new(
        config: &RuntimeConfig,
        results: Vec<Sender<InferenceResult>>,
        counters: Arc<RuntimeCounters>,
    ) -> VoiceWorker {
        VoiceWorker { models_dir: config.models_dir.clone(), encoder: None, unavailable: false, results, counters }
    }

    fn run(&mut self, job: VoiceJob) {
        if self.encoder.is_none() && !self.unavailable {
            match VoiceEncoder::load(&self.models_dir) {
                Ok(encoder) => self.encoder = Some(encoder),
                Err(err) => {
                    tracing::error!(error = %err, "no voice checks: the level alone tells the user from other voices");
                    self.unavailable = true;
                }
            }
        }
        let Some(encoder) = &mut self.encoder else { return };
        let result = match contain(&self.counters, "the voice encoder", || encoder.embed_partial(&job.audio)) {
            Some(print) => InferenceResult::Voice { session: job.session, end: job.end, print },
            None => InferenceResult::Failed { session: job.session },
        };
        let _ = self.results[job.thread].send(result);
    }
}

struct VadWorker {
    vad: SileroVad,
    /// The model's recurrent state per slot.
    states: Vec<SileroState>,
    /// The generation whose state `states[slot]` holds.
    tenants: Vec<u32>,
    results: Vec<Sender<InferenceResult>>,
    counters: Arc<RuntimeCounters>,
    batch: Vec<VadJob>,
    batch_states: Vec<SileroState>,
    probabilities: Vec<f32>,
    /// Slots already in the batch being gathered (a session's windows must run in order).
    in_batch: Vec<bool>,
}

impl VadWorker {
    fn new(
        vad: SileroVad,
        max_sessions: usize,
        results: Vec<Sender<InferenceResult>>,
        counters: Arc<RuntimeCounters>,
    ) -> VadWorker {
        VadWorker {
            vad,
            states: vec![SileroState::default(); max_sessions],
            tenants: vec![0; max_sessions],
            results,
            counters,
            batch: Vec::with_capacity(MAX_VAD_BATCH),
            batch_states: Vec::with_capacity(MAX_VAD_BATCH),
            probabilities: vec![0.0; MAX_VAD_BATCH],
            in_batch: vec![false; max_sessions],
        }
    }

    fn run(&mut self, jobs: Receiver<VadJob>, shutdown: Receiver<()>) {
        let mut held: Option<VadJob> = None;
        loop {
            let first = match held.take() {
                Some(job) => job,
                None => select! {
                    recv(jobs) -> job => match job {
                        Ok(job) => job,
                        Err(_) => return,
                    },
                    recv(shutdown) -> _ => return,
                },
            };
            self.add(first);
            while self.batch.len() < MAX_VAD_BATCH {
                match jobs.try_recv() {
                    Ok(job) if self.in_batch[job.session.slot()] => {
                        held = Some(job); // the session's next window waits for the next batch
                        break;
                    }
                    Ok(job) => self.add(job),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.run_batch();
        }
    }

    fn add(&mut self, job: VadJob) {
        let slot = job.session.slot();
        if self.tenants[slot] != job.session.generation {
            // A new session in this slot: it starts from silence, not from its predecessor's state.
            self.tenants[slot] = job.session.generation;
            self.states[slot] = SileroState::default();
        }
        self.in_batch[slot] = true;
        self.batch_states.push(self.states[slot].clone());
        self.batch.push(job);
    }

    fn run_batch(&mut self) {
        let n = self.batch.len();
        let (vad, batch, batch_states, probabilities) =
            (&mut self.vad, &self.batch, &mut self.batch_states, &mut self.probabilities[..n]);
        let inferred = contain(&self.counters, "VAD inference", || {
            let windows: Vec<&[f32]> = batch.iter().map(|job| &job.window[..]).collect();
            let mut states: Vec<&mut SileroState> = batch_states.iter_mut().collect();
            vad.infer(&windows, &mut states, probabilities)
        });
        self.counters.vad_batches.fetch_add(1, Ordering::Relaxed);
        match inferred {
            Some(Ok(())) => {}
            Some(Err(err)) => {
                tracing::error!(error = %err, "VAD inference failed; the windows count as silence");
                self.probabilities[..n].fill(0.0);
            }
            None => {
                for job in self.batch.drain(..) {
                    let slot = job.session.slot();
                    self.in_batch[slot] = false;
                    self.tenants[slot] = 0; // whatever comes next from this slot starts afresh
                    let _ = self.results[job.thread].send(InferenceResult::Failed { session: job.session });
                }
                self.batch_states.clear();
                return;
            }
        }
        for ((job, state), probability) in
            self.batch.drain(..).zip(self.batch_states.drain(..)).zip(&self.probabilities)
        {
            let slot = job.session.slot();
            self.states[slot] = state;
            self.in_batch[slot] = false;
            let probability = if job.as_silence { 0.0 } else { *probability };
            let result = VadResult { session: job.session, start: job.start, probability, level: job.level };
            let _ = self.results[job.thread].send(InferenceResult::Vad(result));
        }
    }
}

/// The inference threads' work done in line, for a runtime its caller steps (`runtime::stepped`): every
/// waiting VAD window, one at a time in order, then every waiting turn question in the order asked, then
/// every voice check. Their
/// results go to the media thread as the threads' do, and are applied at its next step.
pub struct InlineInference {
    vad: VadWorker,
    turn: SmartTurn,
    voice: VoiceWorker,
    results: Vec<Sender<InferenceResult>>,
    counters: Arc<RuntimeCounters>,
}

impl InlineInference {
    pub fn load(
        config: &RuntimeConfig,
        results: Vec<Sender<InferenceResult>>,
        counters: Arc<RuntimeCounters>,
    ) -> Result<InlineInference, confab_models::ModelError> {
        let vad = SileroVad::load(&config.models_dir, 1, config.inference_intra_threads)?;
        let turn = SmartTurn::load(&config.models_dir, config.turn_model_threads.max(1))?;
        Ok(InlineInference {
            vad: VadWorker::new(vad, config.max_sessions, results.clone(), counters.clone()),
            turn,
            voice: VoiceWorker::new(config, results.clone(), counters.clone()),
            results,
            counters,
        })
    }

    /// Runs every job waiting now: VAD windows, then turn questions, then voice checks.
    pub fn run_waiting(
        &mut self,
        vad_jobs: &Receiver<VadJob>,
        turn_jobs: &Receiver<TurnJob>,
        voice_jobs: &Receiver<VoiceJob>,
    ) {
        for job in vad_jobs.try_iter() {
            self.vad.add(job);
            self.vad.run_batch();
        }
        for job in turn_jobs.try_iter() {
            run_turn(&mut self.turn, &self.results, &self.counters, job);
        }
        for job in voice_jobs.try_iter() {
            self.voice.run(job);
        }
    }
}
