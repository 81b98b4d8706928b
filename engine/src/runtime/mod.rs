//! The runtime around the sans-IO core: named media threads that each run many sessions' audio front
//! ends on a 20 ms tick; a VAD thread that runs windows batched across every session with a window
//! ready; and a pool of turn-model threads sharing one queue.
//!
//! Sessions live in reusable slots (`slots`): a `SessionId` is a slot and a generation, per-session
//! tables are arrays indexed by slot. A panic in any session's work or any inference call is contained
//! (`contain`): logged, counted in `RuntimeCounters::panics`, and the affected calls end with `call_ended`.
//!
//! On media threads: no allocation per frame, no locks, no logging per frame. Every queue is bounded;
//! each capacity below says what happens when it is full. tokio is not used here.

pub mod agent;
mod contain;
mod event_outbox;
mod inference;
mod jobs;
mod media;
mod slots;
mod turn_backlog;
mod wait_histogram;

pub use slots::SessionId;
pub use wait_histogram::WaitHistogram;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::conversation::ConversationConfig;
use crate::events::ConversationEvent;
use crate::responder::Responder;
use crate::turn_metrics::TurnMetrics;

/// Per-session input ring, in 16 kHz samples (1 s). Full: the newest samples are dropped and counted.
pub const INPUT_RING_SAMPLES: usize = 16_000;
/// Per-session output ring, in 16 kHz samples (1 s). Full: rendered audio is dropped and counted.
pub const OUTPUT_RING_SAMPLES: usize = 16_000;
/// Per-session event queue. Full: later events wait in the session's outbox (`EventOutbox`, up to
/// `EVENT_BACKLOG` more, then dropped and counted); the media thread never waits for a consumer.
pub const EVENT_QUEUE: usize = 256;
pub use event_outbox::EVENT_BACKLOG;
/// Turn metrics waiting to be read; full: the newest are dropped (they are diagnostics, not records).
pub const TURN_METRICS_QUEUE: usize = 64;
/// VAD windows waiting for inference, across all sessions. Full: the window counts as silence, counted.
pub const VAD_QUEUE: usize = 8_192;
/// Turn-model requests waiting (in the queue from the media threads, and again in the turn threads'
/// backlog). Full: the oldest question gets no verdict, so its conservative max delay stands; counted.
pub const TURN_QUEUE: usize = 256;
/// Commands to a media thread (open or close a session). Full: the caller waits.
pub const COMMAND_QUEUE: usize = 64;
/// Largest VAD batch one inference call runs.
pub const MAX_VAD_BATCH: usize = 256;

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub media_threads: usize,
    /// Sessions the runtime holds at once; a slot is free again when its session's call has ended.
    pub max_sessions: usize,
    pub models_dir: PathBuf,
    /// Threads ONNX Runtime may use inside one inference call.
    pub inference_intra_threads: usize,
    /// Turn-model threads (each with its own copy of the model, ~8 MB), sharing one queue of questions.
    /// One per core: the turn model is the runtime's largest cost per session.
    pub turn_threads: usize,
    /// The tokio runtime that runs the agents' provider calls (network I/O, local LLM/STT/TTS on its
    /// blocking pool); required to open sessions with a `Responder`.
    pub io: Option<tokio::runtime::Handle>,
    /// Each session's event queue (`EVENT_QUEUE`); tests make it short to play a consumer that falls behind.
    pub event_queue: usize,
}

impl RuntimeConfig {
    /// One media thread per core.
    pub fn new(models_dir: PathBuf, max_sessions: usize) -> RuntimeConfig {
        let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
        RuntimeConfig {
            media_threads: cores,
            max_sessions,
            models_dir,
            inference_intra_threads: 1,
            turn_threads: cores,
            io: None,
            event_queue: EVENT_QUEUE,
        }
    }
}

/// Counters the runtime keeps instead of logging on hot paths.
#[derive(Debug, Default)]
pub struct RuntimeCounters {
    pub ticks: AtomicU64,
    /// Ticks whose work took longer than the 20 ms period.
    pub missed_deadlines: AtomicU64,
    /// Times a session's input ran short mid-stream (the user's audio came late): it then refills its
    /// jitter buffer (`media::INPUT_JITTER_BUFFER`) before frames are taken again.
    pub input_underruns: AtomicU64,
    pub input_overflows: AtomicU64,
    pub output_overflows: AtomicU64,
    pub vad_windows: AtomicU64,
    pub vad_skipped_silent: AtomicU64,
    pub vad_queue_full: AtomicU64,
    pub vad_batches: AtomicU64,
    pub turn_queue_full: AtomicU64,
    /// Turn-model questions replaced, unanswered, by the same session's newer question (the user spoke
    /// again, so the earlier verdict would have been ignored).
    pub turn_superseded: AtomicU64,
    /// End-of-turn verdicts given by the turn model.
    pub turn_verdicts: AtomicU64,
    /// Turn-model questions dropped because they waited past their turn's max endpointing delay.
    pub turn_stale: AtomicU64,
    /// From asking the turn model to its verdict (queueing included), for every verdict given.
    pub turn_wait: WaitHistogram,
    /// Events dropped because their session's consumer was `EVENT_BACKLOG` events behind.
    pub events_dropped: AtomicU64,
    /// Jobs for an agent task refused because its queue was full.
    pub agent_jobs_dropped: AtomicU64,
    /// Longest tick, in microseconds.
    pub max_tick_micros: AtomicU64,
    /// Panics caught in the engine's threads (each ended the calls it touched).
    pub panics: AtomicU64,
    /// Sessions refused because an engine thread had died.
    pub sessions_refused_dead_thread: AtomicU64,
}

impl RuntimeCounters {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The caller's side of one session.
pub struct SessionHandle {
    pub id: SessionId,
    /// Push the user's audio here (16 kHz mono).
    pub input: rtrb::Producer<f32>,
    /// The agent's audio comes out here (16 kHz mono), one 20 ms frame per tick.
    pub output: rtrb::Consumer<f32>,
    pub events: Receiver<ConversationEvent>,
    /// One line per turn when the turn is over (`turn_metrics`), up to `TURN_METRICS_QUEUE` unread.
    pub turn_metrics: Receiver<TurnMetrics>,
}

pub struct Runtime {
    commands: Vec<Sender<media::Command>>,
    media: Vec<JoinHandle<()>>,
    inference: Vec<JoinHandle<()>>,
    shutdown: Sender<()>,
    slots: slots::SlotPool,
    io: Option<tokio::runtime::Handle>,
    event_queue: usize,
    pub counters: Arc<RuntimeCounters>,
}

impl Runtime {
    /// Loads the models on the inference thread and starts the media threads.
    pub fn start(config: RuntimeConfig) -> Result<Runtime, confab_models::ModelError> {
        let counters = Arc::new(RuntimeCounters::default());
        let (vad_jobs, vad_rx) = bounded(VAD_QUEUE);
        let (turn_jobs, turn_rx) = bounded(TURN_QUEUE);
        let (shutdown, shutdown_rx) = bounded::<()>(0);
        let mut result_senders = Vec::new();
        let mut commands = Vec::new();
        let mut media = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..config.media_threads {
            let (results_tx, results_rx) = bounded(VAD_QUEUE);
            result_senders.push(results_tx);
            receivers.push(results_rx);
        }
        let inference =
            inference::spawn(&config, vad_rx, turn_rx, result_senders, shutdown_rx.clone(), counters.clone())?;
        for (index, results) in receivers.into_iter().enumerate() {
            let (command_tx, command_rx) = bounded(COMMAND_QUEUE);
            commands.push(command_tx);
            let thread = media::MediaThread::new(
                index,
                command_rx,
                results,
                vad_jobs.clone(),
                turn_jobs.clone(),
                counters.clone(),
                shutdown_rx.clone(),
                config.max_sessions,
            );
            media.push(
                std::thread::Builder::new()
                    .name(format!("confab-media-{index}"))
                    .spawn(move || thread.run())
                    .expect("spawning a media thread"),
            );
        }
        Ok(Runtime {
            commands,
            media,
            inference,
            shutdown,
            slots: slots::SlotPool::new(config.max_sessions),
            io: config.io.clone(),
            event_queue: config.event_queue.max(1),
            counters,
        })
    }

    /// Sessions open now.
    pub fn active_sessions(&self) -> usize {
        self.slots.taken()
    }

    /// Sessions the runtime can hold at once.
    pub fn max_sessions(&self) -> usize {
        self.slots.capacity()
    }

    /// False once an engine thread has died: no new session could hear or speak.
    pub fn is_healthy(&self) -> bool {
        !self.media.iter().chain(&self.inference).any(JoinHandle::is_finished)
    }

    /// Opens a session in a free slot, on the media thread that slot belongs to. None when every slot is
    /// taken, or when an engine thread has died (logged and counted).
    /// `responder`, when given, answers the user (its calls run on `RuntimeConfig::io`).
    pub fn open_session(&mut self, config: ConversationConfig, responder: Option<Responder>) -> Option<SessionHandle> {
        if !self.is_healthy() {
            self.counters.sessions_refused_dead_thread.fetch_add(1, Ordering::Relaxed);
            tracing::error!("an engine thread has died; the session is refused");
            return None;
        }
        let (id, slot) = self.slots.take()?;
        let (input, input_rx) = rtrb::RingBuffer::new(INPUT_RING_SAMPLES);
        let (output_tx, output) = rtrb::RingBuffer::new(OUTPUT_RING_SAMPLES);
        let (events_tx, events) = bounded(self.event_queue);
        let (turn_metrics_tx, turn_metrics) = bounded(TURN_METRICS_QUEUE);
        let thread = self.thread_of(id);
        let agent = match (responder, &self.io) {
            (Some(responder), Some(io)) => Some(agent::spawn(io, responder)),
            _ => None,
        };
        let session =
            media::MediaSession::new(id, config, input_rx, output_tx, (events_tx, turn_metrics_tx), agent, slot);
        self.commands[thread].send(media::Command::Open(Box::new(session))).ok()?;
        Some(SessionHandle { id, input, output, events, turn_metrics })
    }

    /// Hangs up: the call ends cleanly (`call_ended`).
    pub fn close_session(&mut self, id: SessionId) {
        let thread = self.thread_of(id);
        let _ = self.commands[thread].send(media::Command::Close(id));
    }

    /// The participant is gone (transport closed or silent): `participant_left`, then `call_ended`.
    pub fn participant_left(&mut self, id: SessionId, participant: &str) {
        let thread = self.thread_of(id);
        let _ = self.commands[thread].send(media::Command::Leave(id, participant.to_string()));
    }

    /// A slot always lives on the same media thread, so its tenants' windows reach the VAD in order.
    fn thread_of(&self, id: SessionId) -> usize {
        id.slot() % self.commands.len()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        drop(std::mem::replace(&mut self.shutdown, bounded(0).0));
        for thread in self.media.drain(..) {
            let _ = thread.join();
        }
        for thread in self.inference.drain(..) {
            let _ = thread.join();
        }
    }
}
