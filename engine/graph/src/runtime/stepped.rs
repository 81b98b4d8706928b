//! A runtime its caller steps: one media thread's `tick`, with the inference threads' work
//! (`InlineInference`) and each session's agent work (`InlineAgent`) run in line on the caller's thread
//! after it. No media or inference thread of its own, no sleep, no clock: media time advances 20 ms per
//! `step`, and what a step asks for (a VAD window, a turn question, a transcript, a reply) is answered before
//! the next step, where it is applied — as the live runtime's threads answer a step later when they keep up.
//! The live runtime (`threads.rs`) runs the same tick paced by the wall clock; tests step this one to check
//! exact media times, and `confab simulate` plays a recording to it (`simulate::feed`).

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::agent::{self, InlineAgent};
use super::handle::{CallRuntime, NewSession, SessionHandle, new_session};
use super::inference::InlineInference;
use super::jobs::{TurnJob, VadJob, VoiceJob};
use super::media::{Command, FRAME, MediaThread, SessionClock, TICK};
use super::{COMMAND_QUEUE, RuntimeConfig, RuntimeCounters, SessionId, TURN_QUEUE, VAD_QUEUE, VOICE_QUEUE, slots};
use crate::conversation::ConversationConfig;
use crate::responder::Responder;
use crate::time::MediaTime;

pub struct SteppedRuntime {
    thread: MediaThread,
    commands: Sender<Command>,
    vad_jobs: Receiver<VadJob>,
    turn_jobs: Receiver<TurnJob>,
    voice_jobs: Receiver<VoiceJob>,
    inference: InlineInference,
    agents: Vec<(SessionId, InlineAgent)>,
    slots: slots::SlotPool,
    /// Where the agents' provider calls run: `RuntimeConfig::io` (a multi-threaded runtime, whose
    /// handle can run a future to its end from this thread), else a runtime of its own (`_own_io`).
    io: tokio::runtime::Handle,
    _own_io: Option<tokio::runtime::Runtime>,
    /// The instant of step zero; step `n` runs at `epoch + n × 20 ms` as far as the turn questions know.
    epoch: Instant,
    steps: u64,
    frame: [f32; FRAME],
    event_queue: usize,
    /// Held so the media thread never sees the runtime shut down.
    _shutdown: Sender<()>,
    pub counters: Arc<RuntimeCounters>,
}

impl SteppedRuntime {
    /// Loads the listening models (`config.models_dir`); `config.max_sessions` slots, one media thread.
    pub fn new(config: &RuntimeConfig) -> Result<SteppedRuntime, confab_models::ModelError> {
        let counters = Arc::new(RuntimeCounters::default());
        let (vad_tx, vad_jobs) = bounded(VAD_QUEUE);
        let (turn_tx, turn_jobs) = bounded(TURN_QUEUE);
        let (voice_tx, voice_jobs) = bounded(VOICE_QUEUE);
        let (results_tx, results) = bounded(VAD_QUEUE);
        let (shutdown, shutdown_rx) = bounded::<()>(0);
        let (commands, commands_rx) = bounded(COMMAND_QUEUE);
        let inference = InlineInference::load(config, vec![results_tx], counters.clone())?;
        let thread = MediaThread::new(
            0,
            commands_rx,
            results,
            vad_tx,
            turn_tx,
            voice_tx,
            counters.clone(),
            shutdown_rx,
            config.max_sessions,
        );
        // The caller's I/O runtime, or one of its own (kept for as long as the stepped runtime).
        let (io, own_io) = match &config.io {
            Some(io) => (io.clone(), None),
            None => {
                let own = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("confab-stepped-io")
                    .enable_all()
                    .build()
                    .expect("an I/O runtime");
                (own.handle().clone(), Some(own))
            }
        };
        Ok(SteppedRuntime {
            thread,
            commands,
            vad_jobs,
            turn_jobs,
            voice_jobs,
            inference,
            agents: Vec::new(),
            slots: slots::SlotPool::new(config.max_sessions),
            io,
            _own_io: own_io,
            epoch: Instant::now(),
            steps: 0,
            frame: [0.0; FRAME],
            event_queue: config.event_queue.max(1),
            _shutdown: shutdown,
            counters,
        })
    }

    /// Sessions open now.
    pub fn active_sessions(&self) -> usize {
        self.slots.taken()
    }

    /// Media time at the start of the next step.
    pub fn now(&self) -> MediaTime {
        MediaTime::from_samples(self.steps * FRAME as u64)
    }

    /// The media thread was starved for `ticks` steps that are not run, as the live thread skips the ticks
    /// of a stall longer than five: the audio pushed meanwhile waits, and the sessions catch it up.
    pub fn fall_behind(&mut self, ticks: u32) {
        self.thread.fell_behind(ticks);
        self.steps += u64::from(ticks);
    }

    /// One 20 ms step: the media thread's tick, then the inference and agent work it asked for.
    pub fn step(&mut self) {
        let wall = self.epoch + TICK * self.steps as u32;
        self.thread.tick(wall, &mut self.frame);
        self.inference.run_waiting(&self.vad_jobs, &self.turn_jobs, &self.voice_jobs);
        for (_, agent) in &mut self.agents {
            agent.run_waiting(&self.io);
        }
        self.finish_agents(|_| false);
        self.steps += 1;
    }

    /// Ends the agents whose sessions are gone (every job they left run), and those `drop` names: each
    /// sends its guardrail callbacks first.
    fn finish_agents(&mut self, drop: impl Fn(SessionId) -> bool) {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.agents)
            .into_iter()
            .partition(|(session, agent)| drop(*session) || agent.is_done());
        self.agents = kept;
        for (_, agent) in gone {
            agent.finish(&self.io);
        }
    }
}

impl CallRuntime for SteppedRuntime {
    /// Opens a session (it joins at the next step); `responder`, when given, answers the user in line.
    fn open_session(&mut self, config: ConversationConfig, responder: Option<Responder>) -> Option<SessionHandle> {
        let (id, slot) = self.slots.take()?;
        let agent = responder.map(|responder| {
            let (link, agent) = agent::inline(responder);
            self.agents.push((id, agent));
            link
        });
        let event_queue = self.event_queue;
        let (session, handle) =
            new_session(NewSession { id, slot, config, agent, event_queue, clock: SessionClock::Stepped });
        self.commands.send(Command::Open(Box::new(session))).ok()?;
        Some(handle)
    }

    /// Hangs up at the next step: the call ends cleanly (`call_ended`).
    fn close_session(&mut self, id: SessionId) {
        let _ = self.commands.send(Command::Close(id));
        self.finish_agents(|session| session == id);
    }

    /// The participant is gone at the next step: `participant_left`, then `call_ended`.
    fn participant_left(&mut self, id: SessionId, participant: &str) {
        let _ = self.commands.send(Command::Leave(id, participant.to_string()));
        self.finish_agents(|session| session == id);
    }

    /// The input is over from the next step on.
    fn input_ended(&mut self, id: SessionId) {
        let _ = self.commands.send(Command::InputEnded(id));
    }
}
