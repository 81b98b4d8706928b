//! A runtime its caller steps: one media thread's `tick`, with the inference threads' work
//! (`InlineInference`) and each session's agent work (`InlineAgent`) run in line on the caller's thread
//! after it. No thread of its own, no sleep, no clock: media time advances 20 ms per `step`, and what a step
//! asks for (a VAD window, a turn question, a transcript, a reply) is answered before the next step, where
//! it is applied — as the live runtime's threads answer a step later when they keep up. The live runtime
//! (`threads.rs`) runs the same tick paced by the wall clock; tests step this one to check exact media times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};

use super::agent::{self, InlineAgent};
use super::inference::InlineInference;
use super::jobs::{TurnJob, VadJob};
use super::media::{Command, FRAME, MediaSession, MediaThread};
use super::{
    COMMAND_QUEUE, INPUT_RING_SAMPLES, OUTPUT_RING_SAMPLES, RuntimeConfig, RuntimeCounters, SessionHandle, SessionId,
    TURN_METRICS_QUEUE, TURN_QUEUE, VAD_QUEUE, slots,
};
use crate::conversation::ConversationConfig;
use crate::responder::Responder;
use crate::time::MediaTime;

/// One step: 20 ms of media time.
const STEP: Duration = Duration::from_millis(20);

pub struct SteppedRuntime {
    thread: MediaThread,
    commands: Sender<Command>,
    vad_jobs: Receiver<VadJob>,
    turn_jobs: Receiver<TurnJob>,
    inference: InlineInference,
    agents: Vec<(SessionId, InlineAgent)>,
    slots: slots::SlotPool,
    /// Where the agents' provider calls run.
    io: tokio::runtime::Runtime,
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
            counters.clone(),
            shutdown_rx,
            config.max_sessions,
        );
        let io = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("an I/O runtime");
        Ok(SteppedRuntime {
            thread,
            commands,
            vad_jobs,
            turn_jobs,
            inference,
            agents: Vec::new(),
            slots: slots::SlotPool::new(config.max_sessions),
            io,
            epoch: Instant::now(),
            steps: 0,
            frame: [0.0; FRAME],
            event_queue: config.event_queue.max(1),
            _shutdown: shutdown,
            counters,
        })
    }

    /// Opens a session (it joins at the next step); `responder`, when given, answers the user in line.
    pub fn open_session(&mut self, config: ConversationConfig, responder: Option<Responder>) -> Option<SessionHandle> {
        let (id, slot) = self.slots.take()?;
        let (input, input_rx) = rtrb::RingBuffer::new(INPUT_RING_SAMPLES);
        let (output_tx, output) = rtrb::RingBuffer::new(OUTPUT_RING_SAMPLES);
        let (events_tx, events) = bounded(self.event_queue);
        let (turn_metrics_tx, turn_metrics) = bounded(TURN_METRICS_QUEUE);
        let agent = responder.map(|responder| {
            let (link, agent) = agent::inline(responder);
            self.agents.push((id, agent));
            link
        });
        let session = MediaSession::new(id, config, input_rx, output_tx, (events_tx, turn_metrics_tx), agent, slot);
        self.commands.send(Command::Open(Box::new(session))).ok()?;
        Some(SessionHandle { id, input, output, events, turn_metrics })
    }

    /// Hangs up at the next step: the call ends cleanly (`call_ended`).
    pub fn close_session(&mut self, id: SessionId) {
        let _ = self.commands.send(Command::Close(id));
        self.agents.retain(|(session, _)| *session != id);
    }

    /// The participant is gone at the next step: `participant_left`, then `call_ended`.
    pub fn participant_left(&mut self, id: SessionId, participant: &str) {
        let _ = self.commands.send(Command::Leave(id, participant.to_string()));
        self.agents.retain(|(session, _)| *session != id);
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
        let wall = self.epoch + STEP * self.steps as u32;
        self.thread.tick(wall, &mut self.frame);
        self.inference.run_waiting(&self.vad_jobs, &self.turn_jobs);
        for (_, agent) in &mut self.agents {
            agent.run_waiting(&self.io);
        }
        self.steps += 1;
    }
}
