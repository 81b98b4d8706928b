//! Inference threads: the VAD thread runs windows from every media thread in batches; the turn-model
//! thread answers end-of-turn questions one by one. They are separate so a slow turn-model call (tens
//! of milliseconds) never delays the VAD windows every session needs every 32 ms.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use confab_models::silero::{SileroState, SileroVad, WINDOW};
use confab_models::smart_turn::{DONE_THRESHOLD, SmartTurn};
use crossbeam_channel::{Receiver, Sender, TryRecvError, select};

use super::{MAX_VAD_BATCH, RuntimeConfig, RuntimeCounters};
use crate::time::MediaTime;

/// One VAD window of one session, carried inline (no allocation).
pub struct VadJob {
    pub thread: usize,
    pub session: usize,
    pub start: MediaTime,
    pub window: [f32; WINDOW],
}

pub struct VadResult {
    pub session: usize,
    pub start: MediaTime,
    pub probability: f32,
}

/// The turn model's question: the user's audio up to the end of their speech.
pub struct TurnJob {
    pub thread: usize,
    pub session: usize,
    pub last_speech: MediaTime,
    pub audio: Vec<f32>,
}

pub enum InferenceResult {
    Vad(VadResult),
    Turn { session: usize, last_speech: MediaTime, user_done: bool },
}

/// Loads the models and starts the VAD thread and the turn-model thread.
pub fn spawn(
    config: &RuntimeConfig,
    vad_jobs: Receiver<VadJob>,
    turn_jobs: Receiver<TurnJob>,
    results: Vec<Sender<InferenceResult>>,
    shutdown: Receiver<()>,
    counters: Arc<RuntimeCounters>,
) -> Result<Vec<JoinHandle<()>>, confab_models::ModelError> {
    let vad = SileroVad::load(&config.models_dir, MAX_VAD_BATCH, config.inference_intra_threads)?;
    let mut turn = SmartTurn::load(&config.models_dir, config.inference_intra_threads)?;
    let mut worker = VadWorker {
        vad,
        states: vec![SileroState::default(); config.max_sessions],
        results: results.clone(),
        counters,
        batch: Vec::with_capacity(MAX_VAD_BATCH),
        batch_states: Vec::with_capacity(MAX_VAD_BATCH),
        probabilities: vec![0.0; MAX_VAD_BATCH],
        in_batch: vec![false; config.max_sessions],
    };
    let vad_shutdown = shutdown.clone();
    let vad_thread = std::thread::Builder::new()
        .name("confab-vad".into())
        .spawn(move || worker.run(vad_jobs, vad_shutdown))
        .expect("spawning the VAD thread");
    let turn_thread = std::thread::Builder::new()
        .name("confab-turn".into())
        .spawn(move || {
            loop {
                select! {
                    recv(turn_jobs) -> job => match job {
                        Ok(job) => run_turn(&mut turn, &results, job),
                        Err(_) => return,
                    },
                    recv(shutdown) -> _ => return,
                }
            }
        })
        .expect("spawning the turn-model thread");
    Ok(vec![vad_thread, turn_thread])
}

fn run_turn(turn: &mut SmartTurn, results: &[Sender<InferenceResult>], job: TurnJob) {
    let user_done = match turn.predict(&job.audio) {
        Ok(probability) => probability > DONE_THRESHOLD,
        Err(err) => {
            tracing::error!(error = %err, "turn model failed; the user counts as done");
            true
        }
    };
    let result = InferenceResult::Turn { session: job.session, last_speech: job.last_speech, user_done };
    let _ = results[job.thread].send(result);
}

struct VadWorker {
    vad: SileroVad,
    states: Vec<SileroState>,
    results: Vec<Sender<InferenceResult>>,
    counters: Arc<RuntimeCounters>,
    batch: Vec<VadJob>,
    batch_states: Vec<SileroState>,
    probabilities: Vec<f32>,
    /// Sessions already in the batch being gathered (a session's windows must run in order).
    in_batch: Vec<bool>,
}

impl VadWorker {
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
                    Ok(job) if self.in_batch[job.session] => {
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
        self.in_batch[job.session] = true;
        self.batch_states.push(self.states[job.session].clone());
        self.batch.push(job);
    }

    fn run_batch(&mut self) {
        let n = self.batch.len();
        let windows: Vec<&[f32]> = self.batch.iter().map(|job| &job.window[..]).collect();
        let mut states: Vec<&mut SileroState> = self.batch_states.iter_mut().collect();
        if let Err(err) = self.vad.infer(&windows, &mut states, &mut self.probabilities[..n]) {
            tracing::error!(error = %err, "VAD inference failed; the windows count as silence");
            self.probabilities[..n].fill(0.0);
        }
        self.counters.vad_batches.fetch_add(1, Ordering::Relaxed);
        for ((job, state), probability) in
            self.batch.drain(..).zip(self.batch_states.drain(..)).zip(&self.probabilities)
        {
            self.states[job.session] = state;
            self.in_batch[job.session] = false;
            let result = VadResult { session: job.session, start: job.start, probability: *probability };
            let _ = self.results[job.thread].send(InferenceResult::Vad(result));
        }
    }
}
