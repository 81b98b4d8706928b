//! The runtime's threads and sessions: `Runtime::start` loads the models on the inference threads and
//! starts the media threads; sessions are opened in free slots on them and ended through them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use crossbeam_channel::{Sender, bounded};

use super::handle::{CallRuntime, NewSession, SessionHandle, new_session};
use super::media::SessionClock;
use super::{
    COMMAND_QUEUE, RuntimeConfig, RuntimeCounters, SessionId, TURN_QUEUE, VAD_QUEUE, VOICE_QUEUE, agent, inference,
    media, slots,
};
use crate::conversation::ConversationConfig;
use crate::responder::Responder;

pub struct Runtime {
    commands: Vec<Sender<media::Command>>,
    media: Vec<JoinHandle<()>>,
    inference: Vec<JoinHandle<()>>,
    shutdown: Sender<()>,
    slots: slots::SlotPool,
    io: Option<tokio::runtime::Handle>,
    /// The sessions' agent tasks (finished ones are dropped as sessions open): `agents_finished`.
    agents: Vec<tokio::task::JoinHandle<()>>,
    event_queue: usize,
    pub counters: Arc<RuntimeCounters>,
}

impl Runtime {
    /// Loads the models on the inference thread and starts the media threads.
    pub fn start(config: RuntimeConfig) -> Result<Runtime, confab_models::ModelError> {
        let counters = Arc::new(RuntimeCounters::default());
        let (vad_jobs, vad_rx) = bounded(VAD_QUEUE);
        let (turn_jobs, turn_rx) = bounded(TURN_QUEUE);
        let (voice_jobs, voice_rx) = bounded(VOICE_QUEUE);
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
        let inference = inference::spawn(
            &config,
            vad_rx,
            turn_rx,
            voice_rx,
            result_senders,
            shutdown_rx.clone(),
            counters.clone(),
        )?;
        for (index, results) in receivers.into_iter().enumerate() {
            let (command_tx, command_rx) = bounded(COMMAND_QUEUE);
            commands.push(command_tx);
            let thread = media::MediaThread::new(
                index,
                command_rx,
                results,
                vad_jobs.clone(),
                turn_jobs.clone(),
                voice_jobs.clone(),
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
            agents: Vec::new(),
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

    /// The agent tasks of the sessions whose calls have ended, once each has finished (its guardrail
    /// callbacks sent): a process that owns its I/O runtime (`confab simulate --realtime`) waits for them
    /// before it drops that runtime.
    pub fn agents_finished(&mut self) -> impl std::future::Future<Output = ()> + use<> {
        let agents = std::mem::take(&mut self.agents);
        async move {
            for agent in agents {
                let _ = agent.await;
            }
        }
    }

    /// A slot always lives on the same media thread, so its tenants' windows reach the VAD in order.
    fn thread_of(&self, id: SessionId) -> usize {
        id.slot() % self.commands.len()
    }
}

impl CallRuntime for Runtime {
    /// Opens a session in a free slot, on the media thread that slot belongs to. None when every slot is
    /// taken, or when an engine thread has died (logged and counted).
    /// `responder`, when given, answers the user (its calls run on `RuntimeConfig::io`).
    fn open_session(&mut self, config: ConversationConfig, responder: Option<Responder>) -> Option<SessionHandle> {
        if !self.is_healthy() {
            self.counters.sessions_refused_dead_thread.fetch_add(1, Ordering::Relaxed);
            tracing::error!("an engine thread has died; the session is refused");
            return None;
        }
        let (id, slot) = self.slots.take()?;
        let thread = self.thread_of(id);
        self.agents.retain(|agent| !agent.is_finished());
        let agent = match (responder, &self.io) {
            (Some(responder), Some(io)) => {
                let (link, task) = agent::spawn(io, responder);
                self.agents.push(task);
                Some(link)
            }
            _ => None,
        };
        let event_queue = self.event_queue;
        let (session, handle) =
            new_session(NewSession { id, slot, config, agent, event_queue, clock: SessionClock::Wall });
        self.commands[thread].send(media::Command::Open(Box::new(session))).ok()?;
        Some(handle)
    }

    fn close_session(&mut self, id: SessionId) {
        let thread = self.thread_of(id);
        let _ = self.commands[thread].send(media::Command::Close(id));
    }

    fn participant_left(&mut self, id: SessionId, participant: &str) {
        let thread = self.thread_of(id);
        let _ = self.commands[thread].send(media::Command::Leave(id, participant.to_string()));
    }

    fn input_ended(&mut self, id: SessionId) {
        let thread = self.thread_of(id);
        let _ = self.commands[thread].send(media::Command::InputEnded(id));
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
