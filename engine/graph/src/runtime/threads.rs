//! The runtime's threads and sessions: `Runtime::start` loads the models on the inference threads and
//! starts the media threads; sessions are opened in free slots on them and ended through them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::{
    COMMAND_QUEUE, INPUT_RING_SAMPLES, OUTPUT_RING_SAMPLES, RuntimeConfig, RuntimeCounters, SessionId,
    TURN_METRICS_QUEUE, TURN_QUEUE, VAD_QUEUE, agent, inference, media, slots,
};
use crate::conversation::ConversationConfig;
use crate::events::ConversationEvent;
use crate::responder::Responder;
use crate::turn_metrics::TurnMetrics;

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
