//! The inference thread: VAD windows from every media thread, batched; turn-model requests one by one.
//! It owns the models and every session's Silero state.

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
    Turn {
        session: usize,
        last_speech: MediaTime,
        user_done: bool,
    },
}

pub fn spawn(
    config: &RuntimeConfig,
    vad_jobs: Receiver<VadJob>,
    turn_jobs: Receiver<TurnJob>,
    results: Vec<Sender<InferenceResult>>,
    shutdown: Receiver<()>,
    counters: Arc<RuntimeCounters>,
) -> Result<JoinHandle<()>, confab_models::ModelError> {
    let vad = SileroVad::load(
        &config.models_dir,
        MAX_VAD_BATCH,
        config.inference_intra_threads,
    )?;
    let turn = SmartTurn::load(&config.models_dir, config.inference_intra_threads)?;
    let states = vec![SileroState::default(); config.max_sessions];
    let mut worker = Worker {
        vad,
        turn,
        states,
        results,
        counters,
        batch: Vec::with_capacity(MAX_VAD_BATCH),
    };
    Ok(std::thread::Builder::new()
        .name("confab-inference".into())
        .spawn(move || worker.run(vad_jobs, turn_jobs, shutdown))
        .expect("spawning the inference thread"))
}

struct Worker {
    vad: SileroVad,
    turn: SmartTurn,
    states: Vec<SileroState>,
    results: Vec<Sender<InferenceResult>>,
    counters: Arc<RuntimeCounters>,
    batch: Vec<VadJob>,
}

impl Worker {
    fn run(
        &mut self,
        vad_jobs: Receiver<VadJob>,
        turn_jobs: Receiver<TurnJob>,
        shutdown: Receiver<()>,
    ) {
        loop {
            select! {
                recv(vad_jobs) -> job => match job {
                    Ok(job) => {
                        self.batch.push(job);
                        while self.batch.len() < MAX_VAD_BATCH {
                            match vad_jobs.try_recv() {
                                Ok(job) => self.batch.push(job),
                                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                            }
                        }
                        self.run_vad_batch();
                    }
                    Err(_) => return,
                },
                recv(turn_jobs) -> job => match job {
                    Ok(job) => self.run_turn(job),
                    Err(_) => return,
                },
                recv(shutdown) -> _ => return,
            }
        }
    }

    fn run_vad_batch(&mut self) {
        let mut probabilities = [0.0f32; MAX_VAD_BATCH];
        let n = self.batch.len();
        {
            let windows: Vec<&[f32]> = self.batch.iter().map(|job| &job.window[..]).collect();
            // Sessions are distinct within a batch unless one session queued two windows; run those in
            // separate batches so each state advances in order.
            let mut seen = std::collections::HashSet::with_capacity(n);
            let split = self
                .batch
                .iter()
                .position(|job| !seen.insert(job.session))
                .unwrap_or(n);
            let mut states: Vec<SileroState> = self.batch[..split]
                .iter()
                .map(|job| self.states[job.session].clone())
                .collect();
            let mut refs: Vec<&mut SileroState> = states.iter_mut().collect();
            if let Err(err) =
                self.vad
                    .infer(&windows[..split], &mut refs, &mut probabilities[..split])
            {
                tracing::error!(error = %err, "VAD inference failed; windows count as silence");
                probabilities[..split].fill(0.0);
            }
            for (job, state) in self.batch[..split].iter().zip(states) {
                self.states[job.session] = state;
            }
            if split < n {
                let rest: Vec<VadJob> = self.batch.drain(split..).collect();
                self.send_vad_results(&probabilities[..split]);
                self.batch.clear();
                self.batch.extend(rest);
                self.counters.vad_batches.fetch_add(1, Ordering::Relaxed);
                return self.run_vad_batch();
            }
        }
        self.counters.vad_batches.fetch_add(1, Ordering::Relaxed);
        self.send_vad_results(&probabilities[..n]);
        self.batch.clear();
    }

    fn send_vad_results(&self, probabilities: &[f32]) {
        for (job, probability) in self.batch.iter().zip(probabilities) {
            let result = VadResult {
                session: job.session,
                start: job.start,
                probability: *probability,
            };
            let _ = self.results[job.thread].send(InferenceResult::Vad(result));
        }
    }

    fn run_turn(&mut self, job: TurnJob) {
        let user_done = match self.turn.predict(&job.audio) {
            Ok(probability) => probability > DONE_THRESHOLD,
            Err(err) => {
                tracing::error!(error = %err, "turn model failed; the user counts as done");
                true
            }
        };
        let _ = self.results[job.thread].send(InferenceResult::Turn {
            session: job.session,
            last_speech: job.last_speech,
            user_done,
        });
    }
}
