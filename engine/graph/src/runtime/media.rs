//! A media thread: every 20 ms it takes one frame of each session's input, renders one frame of the
//! agent's audio, and moves VAD windows and turn-model requests to the inference thread and their
//! results back into the sessions' conversations.
//!
//! Sessions are found by slot in O(1). Each session's work runs contained: a panic ends that call
//! (`call_ended`), is logged and counted, and the thread goes on with the others. If the inference
//! threads are gone, every call on the thread is ended rather than left deaf.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use confab_models::mel::SAMPLES as TURN_MODEL_SAMPLES;
use confab_models::silero::WINDOW;
use confab_models::voice_encoder::PARTIAL_SAMPLES;
use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::RuntimeCounters;
use super::agent::{AgentJob, AgentLink};
use super::contain::contain;
use super::event_outbox::{EventOutbox, Sent};
use super::jobs::{InferenceResult, TurnJob, VadJob, VoiceJob};
use super::slots::{SessionId, SlotGuard};
use crate::audio::denoise::{NoiseSuppressor, Suppressed};
use crate::audio::level::{SilenceGate, VadDecision, mean_square};
use crate::conversation::{Conversation, ConversationConfig, OverlapDecision, turn_model_end};
use crate::core::other_voices::level_db;
use crate::core::{Epoch, TurnId};
use crate::events::{ConversationEvent, EventKind};
use crate::session_driver::{AgentResult, DrivenSession, SessionHost, SessionInput};
use crate::time::MediaTime;
use crate::turn_metrics::{TurnMetrics, TurnMetricsLog};

/// Samples per 20 ms tick at 16 kHz.
pub const FRAME: usize = 320;
/// One tick of the media clock: live on the wall clock, stepped by `SteppedRuntime` and `confab simulate`.
pub const TICK: Duration = Duration::from_millis(20);
/// User audio kept for the turn model and speech-to-text (20 s).
const HISTORY: usize = 16_000 * 20;
/// The user's audio is taken once this much of it is waiting (60 ms), and again after it ran short: a
/// packet a little late then finds the media thread still busy with earlier audio, rather than leaving
/// a hole of silence in the middle of a word (which speech-to-text and the turn model then hear).
/// WebRTC's own receivers keep 40–100 ms for the same reason. It delays what the engine hears by that much.
pub const INPUT_JITTER_BUFFER: usize = 3 * FRAME;
/// Ticks a session waits, at most, for user audio that stopped arriving mid-speech (500 ms: longer than a
/// loaded browser's or server's hiccups, short enough that a user who really went quiet is not kept
/// waiting for): `MediaThread::waits_for_late_input`.
pub const MAX_LATE_WAIT_TICKS: u32 = 25;
/// A thread this many ticks late skips them rather than running them in a burst (`MediaThread::run`).
const FAR_BEHIND_TICKS: u32 = 5;
/// Skipped ticks a session owes its input, at most: what the input ring holds (`INPUT_RING_SAMPLES`).
const MAX_OWED_TICKS: u32 = (super::INPUT_RING_SAMPLES / FRAME) as u32;

pub enum Command {
    Open(Box<MediaSession>),
    /// A hang-up: the call ends cleanly.
    Close(SessionId),
    /// The participant is gone: `participant_left` (with their id), then the call ends.
    Leave(SessionId, String),
    /// The user's audio is over (`CallRuntime::input_ended`): the call ends once nothing is left to do.
    InputEnded(SessionId),
}

/// What a session's media time runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionClock {
    /// The wall clock (the threaded runtime): provider stages are placed on the media clock as they happen.
    Wall,
    /// The caller's steps (`SteppedRuntime`): work between two steps takes no media time.
    Stepped,
}

/// No session in this slot on this thread.
const VACANT: u32 = u32::MAX;
/// A call that tells the user's voice from others asks for a voice check every this many windows of
/// sound (640 ms).
const VOICE_CHECK_WINDOWS: u32 = 20;

pub struct MediaSession {
    id: SessionId,
    /// The conversation and its turns' stage times (a turn goes to `turn_metrics` when it is over).
    session: DrivenSession,
    input: rtrb::Consumer<f32>,
    output: rtrb::Producer<f32>,
    events: EventOutbox,
    turn_metrics: Sender<TurnMetrics>,
    now: MediaTime,
    window: [f32; WINDOW],
    filled: usize,
    gate: SilenceGate,
    /// Takes steady noise out of the user's audio before it is heard (`stt.noise_suppression`).
    suppressor: NoiseSuppressor,
    /// `INPUT_JITTER_BUFFER` has been filled since the input last ran short: frames are being taken.
    input_flowing: bool,
    /// Ticks its thread skipped while this session's audio kept arriving (`MediaThread::fell_behind`):
    /// that much more of the user's audio waits than before. Each later tick takes one extra frame of it
    /// while owed, down to `catch_up_floor`, so a starved call hears every word a little late rather than
    /// losing the newest ones when the input ring fills.
    owed_ticks: u32,
    /// User audio waiting after the last tick (samples).
    waiting: usize,
    /// What waited before the thread fell behind (at least `INPUT_JITTER_BUFFER`): a catch-up never takes
    /// the input below it, so the slack a browser's late bursts built up is kept.
    catch_up_floor: usize,
    /// The log has said that this call's media fell behind.
    said_behind: bool,
    /// Ticks this session has held its clock for late user audio in the current gap.
    late_ticks: u32,
    /// The log has said that this call's audio came late mid-speech.
    said_late: bool,
    /// The last `HISTORY` samples of user audio, as 16-bit to halve the memory.
    history: VecDeque<i16>,
    /// The agent's providers, when the session has them.
    agent: Option<AgentLink>,
    /// The user's audio is over (`Command::InputEnded`): what waits is taken without a jitter buffer, late
    /// audio is not waited for, and the call ends once the conversation is idle (`end_if_done`).
    input_ended: bool,
    /// VAD windows sent for inference whose results have not been applied yet.
    vad_in_flight: u32,
    /// Windows of sound (not skipped as silence) heard since the last voice check.
    since_voice_check: u32,
    /// The turn ends this long after the end of speech whatever the turn model says: a verdict later than
    /// that is not worth computing.
    max_endpointing_delay: MediaTime,
    _slot: SlotGuard,
}

/// The media thread's ends of a session's audio rings and queues.
pub struct SessionEnds {
    pub input: rtrb::Consumer<f32>,
    pub output: rtrb::Producer<f32>,
    pub events: Sender<ConversationEvent>,
    pub turn_metrics: Sender<TurnMetrics>,
}

impl MediaSession {
    pub fn new(
        id: SessionId,
        config: ConversationConfig,
        ends: SessionEnds,
        agent: Option<AgentLink>,
        slot: SlotGuard,
        clock: SessionClock,
    ) -> MediaSession {
        let SessionEnds { input, output, events, turn_metrics } = ends;
        let on_wall_clock = clock == SessionClock::Wall;
        MediaSession {
            id,
            max_endpointing_delay: config.endpoint.max_delay,
            session: DrivenSession::new(Conversation::new(config), TurnMetricsLog::new(on_wall_clock)),
            input,
            output,
            events: EventOutbox::new(events),
            turn_metrics,
            now: MediaTime::ZERO,
            window: [0.0; WINDOW],
            filled: 0,
            gate: SilenceGate::default(),
            suppressor: NoiseSuppressor::new(config.noise_suppression),
            input_flowing: false,
            owed_ticks: 0,
            waiting: 0,
            catch_up_floor: INPUT_JITTER_BUFFER,
            said_behind: false,
            late_ticks: 0,
            said_late: false,
            history: VecDeque::with_capacity(HISTORY),
            agent,
            input_ended: false,
            vad_in_flight: 0,
            since_voice_check: 0,
            _slot: slot,
        }
    }
}

/// How many of the `waiting` input samples a tick takes: a whole frame while the input flows, none
/// while it refills (`INPUT_JITTER_BUFFER`) after running short. `flowing` carries the state between ticks.
/// Once the input has `ended`, nothing more will arrive to wait for: every whole frame is taken.
fn take_input(waiting: usize, flowing: &mut bool, ended: bool) -> usize {
    if !*flowing && (waiting >= INPUT_JITTER_BUFFER || (ended && waiting >= FRAME)) {
        *flowing = true;
    }
    if *flowing && waiting < FRAME {
        *flowing = false;
    }
    if *flowing { FRAME } else { 0 }
}

pub struct MediaThread {
    index: usize,
    commands: Receiver<Command>,
    results: Receiver<InferenceResult>,
    vad_jobs: Sender<VadJob>,
    turn_jobs: Sender<TurnJob>,
    voice_jobs: Sender<VoiceJob>,
    counters: Arc<RuntimeCounters>,
    shutdown: Receiver<()>,
    sessions: Vec<MediaSession>,
    /// Index in `sessions` of the session in each slot, or `VACANT`.
    positions: Vec<u32>,
    /// Set when the inference threads are gone: no session here can hear any more.
    inference_lost: bool,
    /// Events of ended sessions still waiting for their consumers.
    draining: Vec<EventOutbox>,
    /// When the current step runs (`tick`).
    wall: Instant,
}

impl MediaThread {
    #[allow(clippy::too_many_arguments)] // one per queue the thread is wired to
    pub fn new(
        index: usize,
        commands: Receiver<Command>,
        results: Receiver<InferenceResult>,
        vad_jobs: Sender<VadJob>,
        turn_jobs: Sender<TurnJob>,
        voice_jobs: Sender<VoiceJob>,
        counters: Arc<RuntimeCounters>,
        shutdown: Receiver<()>,
        max_sessions: usize,
    ) -> MediaThread {
        MediaThread {
            index,
            commands,
            results,
            vad_jobs,
            turn_jobs,
            voice_jobs,
            counters,
            shutdown,
            sessions: Vec::with_capacity(max_sessions),
            positions: vec![VACANT; max_sessions],
            inference_lost: false,
            draining: Vec::new(),
            wall: Instant::now(),
        }
    }

    /// Paces `tick` on the wall clock: one step every 20 ms until the runtime shuts down; a step that
    /// overran counts as a missed deadline, and a thread far behind skips the ticks it missed
    /// (`fell_behind`) rather than running them in a burst.
    pub fn run(mut self) {
        let mut next_tick = Instant::now();
        let mut frame = [0.0f32; FRAME];
        loop {
            if !matches!(self.shutdown.try_recv(), Err(crossbeam_channel::TryRecvError::Empty)) {
                return;
            }
            let started = Instant::now();
            if started > next_tick + TICK * FAR_BEHIND_TICKS {
                // Far behind: the missed ticks are not run in a burst (the agents' voices would burst);
                // the sessions catch their input up instead.
                let missed = ((started - next_tick).as_micros() / TICK.as_micros()) as u32;
                self.fell_behind(missed);
                next_tick = started;
            }
            self.tick(started, &mut frame);
            let took = started.elapsed();
            self.counters.max_tick_micros.fetch_max(took.as_micros() as u64, Ordering::Relaxed);
            if took > TICK {
                self.counters.missed_deadlines.fetch_add(1, Ordering::Relaxed);
            }
            next_tick += TICK;
            let now = Instant::now();
            if next_tick > now {
                std::thread::sleep(next_tick - now);
            }
        }
    }

    /// One 20 ms step of the thread on media time: commands (open, close), the inference results that
    /// have arrived, then each session's agent results and its tick (one frame in, one frame out). It
    /// reads no clock and never waits: `wall` is when the step runs, which a turn question carries so the
    /// turn threads know how long its verdict is worth computing (`run` passes the wall clock; a stepped
    /// runtime passes its own count of steps).
    pub fn tick(&mut self, wall: Instant, frame: &mut [f32; FRAME]) {
        // One handle for the step: containment borrows it while a session borrows `self`.
        let counters = Arc::clone(&self.counters);
        self.wall = wall;
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Open(session) => self.open(*session, &counters),
                Command::Close(id) => self.end_session(id, None, &counters),
                Command::Leave(id, participant) => self.end_session(id, Some(participant), &counters),
                Command::InputEnded(id) => {
                    if let Some(index) = self.find(id) {
                        self.sessions[index].input_ended = true;
                    }
                }
            }
        }
        loop {
            match self.results.try_recv() {
                Ok(result) => self.apply(result, &counters),
                Err(crossbeam_channel::TryRecvError::Empty) => break,
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    self.inference_lost = true;
                    break;
                }
            }
        }
        if self.inference_lost && !self.sessions.is_empty() {
            tracing::error!(
                thread = self.index,
                calls = self.sessions.len(),
                "the inference threads are gone; ending every call on this media thread"
            );
            while !self.sessions.is_empty() {
                self.fail_session(0, &counters);
            }
        }
        self.draining.retain_mut(|events| !events.flush());
        let mut index = 0;
        while index < self.sessions.len() {
            self.sessions[index].events.flush();
            let ticked = contain(&counters, "a session's media tick", || {
                self.take_agent_results(index);
                self.tick_session(index, frame);
            });
            if ticked.is_none() {
                self.fail_session(index, &counters);
            } else if self.sessions[index].session.conversation.is_ended() {
                self.remove(index);
            } else {
                index += 1;
            }
        }
        self.counters.ticks.fetch_add(1, Ordering::Relaxed);
    }

    /// The thread skipped `ticks` ticks (it was starved of CPU): every session's user audio of those ticks
    /// is waiting in its input, and each session takes it back a frame per tick on top of its own
    /// (`MediaSession::owed_ticks`), its media time with it; the agent's voice is not rendered for those
    /// extra frames (it carries on where it was, at the wall clock's pace, instead of bursting).
    pub fn fell_behind(&mut self, ticks: u32) {
        self.counters.ticks_skipped.fetch_add(u64::from(ticks), Ordering::Relaxed);
        for s in &mut self.sessions {
            if s.owed_ticks == 0 {
                s.catch_up_floor = s.waiting.max(INPUT_JITTER_BUFFER);
            }
            s.owed_ticks = (s.owed_ticks + ticks).min(MAX_OWED_TICKS);
            if !s.said_behind {
                s.said_behind = true;
                tracing::warn!(
                    session = %s.id,
                    thread = self.index,
                    behind_ms = u64::from(ticks) * TICK.as_millis() as u64,
                    "this call's media thread fell behind (the host is short of CPU): the user's audio is caught up, the agent's voice paused"
                );
            }
        }
    }

    fn open(&mut self, session: MediaSession, counters: &RuntimeCounters) {
        let slot = session.id.slot();
        if self.positions[slot] != VACANT {
            // The runtime hands a slot out only once its session is dropped; never reached.
            tracing::error!(session = %session.id, "a session slot was taken twice; the older call is ended");
            let index = self.positions[slot] as usize;
            self.fail_session(index, counters);
        }
        self.positions[slot] = self.sessions.len() as u32;
        self.sessions.push(session);
    }

    /// The index in `sessions` of this session, if it is still here.
    fn find(&self, id: SessionId) -> Option<usize> {
        let index = *self.positions.get(id.slot())?;
        (index != VACANT && self.sessions[index as usize].id == id).then_some(index as usize)
    }

    /// Drops the session at `index` (its slot is freed with it).
    fn remove(&mut self, index: usize) {
        let mut removed = self.sessions.swap_remove(index);
        self.positions[removed.id.slot()] = VACANT;
        if let Some(moved) = self.sessions.get(index) {
            self.positions[moved.id.slot()] = index as u32;
        }
        if !removed.events.flush() {
            self.draining.push(removed.events);
        }
    }

    /// A session whose work panicked: its call ends (`call_ended`) as cleanly as its state allows, and it
    /// is dropped.
    fn fail_session(&mut self, index: usize, counters: &RuntimeCounters) {
        let ended = contain(counters, "ending a failed session", || {
            let s = &mut self.sessions[index];
            let now = s.now;
            s.session.conversation.end_call(now);
            self.handle_outputs(index);
        });
        let s = &mut self.sessions[index];
        if ended.is_none() {
            // The conversation itself is broken: say the call ended without it.
            let event = ConversationEvent { media_time: s.now.as_duration(), kind: EventKind::CallEnded };
            if s.events.send(event) == Sent::Dropped {
                counters.events_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        tracing::warn!(session = %s.id, "call ended after a failure in the engine");
        self.remove(index);
    }

    /// Ends a session's call now (`call_ended`, after `participant_left` when the participant left) and
    /// drops the session.
    fn end_session(&mut self, id: SessionId, participant_left: Option<String>, counters: &RuntimeCounters) {
        let Some(index) = self.find(id) else { return };
        let ended = contain(counters, "ending a session", || {
            let s = &mut self.sessions[index];
            let now = s.now;
            match participant_left {
                Some(participant) => s.session.conversation.participant_left(now, participant),
                None => s.session.conversation.end_call(now),
            }
            self.handle_outputs(index);
        });
        match ended {
            Some(()) => self.remove(index),
            None => self.fail_session(index, counters),
        }
    }

    fn apply(&mut self, result: InferenceResult, counters: &RuntimeCounters) {
        let Some(index) = self.find(result.session()) else {
            return; // the session has ended (a late result for an earlier tenant of the slot)
        };
        let applied = contain(counters, "a session's inference result", || {
            let s = &mut self.sessions[index];
            match result {
                InferenceResult::Vad(r) => {
                    s.vad_in_flight = s.vad_in_flight.saturating_sub(1);
                    let end = r.start + MediaTime(WINDOW as u64);
                    let (probability, level) = (r.probability, Some(r.level));
                    let window = SessionInput::VadWindow { start: r.start, end, probability, level };
                    s.session.handle_input(window, s.now);
                }
                InferenceResult::Voice { end, print, .. } => {
                    s.session.handle_input(SessionInput::Voiceprint { end, print }, s.now);
                }
                InferenceResult::Turn { last_speech, user_done, .. } => {
                    s.session.handle_input(SessionInput::TurnVerdict { last_speech, user_done }, s.now);
                }
                InferenceResult::Failed { .. } => return false,
            }
            self.handle_outputs(index);
            true
        });
        if applied != Some(true) {
            self.fail_session(index, counters);
        }
    }

    fn tick_session(&mut self, index: usize, frame: &mut [f32; FRAME]) {
        if self.waits_for_late_input(index) {
            self.handle_outputs(index);
            return;
        }
        self.hear_frame(index, frame);
        let s = &mut self.sessions[index];
        let now = s.now;
        // The agent's audio for this tick.
        s.session.conversation.handle_timeout(now);
        s.session.conversation.render(now, frame);
        let pushed = match s.output.write_chunk_uninit(FRAME) {
            Ok(chunk) => chunk.fill_from_iter(frame.iter().copied()),
            Err(_) => 0,
        };
        if pushed < FRAME {
            self.counters.output_overflows.fetch_add(1, Ordering::Relaxed);
        }
        s.now = now + MediaTime(FRAME as u64);
        self.catch_up(index, frame);
        self.handle_outputs(index);
        self.end_if_done(index);
    }

    /// A session whose input has ended hangs up once everything it heard has been judged and answered:
    /// no VAD window in flight, no whole frame of input left, the conversation idle (`is_busy`).
    fn end_if_done(&mut self, index: usize) {
        let s = &mut self.sessions[index];
        let done =
            s.input_ended && s.vad_in_flight == 0 && s.input.slots() < FRAME && !s.session.conversation.is_busy();
        if done {
            let now = s.now;
            s.session.conversation.end_call(now);
            self.handle_outputs(index);
        }
    }

    /// The user's audio stopped arriving mid-speech (`Conversation::would_wait_for_user_audio`: the user
    /// is speaking, the agent silent): the session holds its clock this tick (nothing heard, nothing
    /// rendered, its media time stands) rather than hear silence in the middle of a word — speech-to-text
    /// then hears "capital" as "cat of the". At most `MAX_LATE_WAIT_TICKS` ticks a gap; after that the input
    /// runs short as before (silence until the jitter buffer refills). The wait costs no more latency than
    /// the silence would have: either way the late audio, when it comes, waits that much longer.
    fn waits_for_late_input(&mut self, index: usize) -> bool {
        let s = &mut self.sessions[index];
        let late = s.input_flowing && !s.input_ended && s.input.slots() < FRAME;
        if !late || s.late_ticks >= MAX_LATE_WAIT_TICKS || !s.session.conversation.would_wait_for_user_audio() {
            if s.late_ticks > 0 {
                let waited_ms = u64::from(s.late_ticks) * TICK.as_millis() as u64;
                tracing::debug!(session = %s.id, at_s = s.now.as_secs_f64(), waited_ms, arrived = !late, "waited for late user audio");
                s.late_ticks = 0;
            }
            return false;
        }
        s.late_ticks += 1;
        self.counters.input_late_ticks.fetch_add(1, Ordering::Relaxed);
        if !s.said_late {
            s.said_late = true;
            tracing::info!(
                session = %s.id,
                "this call's audio arrived late while the user spoke: the call waits for it (up to {} ms at a time) rather than hear silence in its place",
                u64::from(MAX_LATE_WAIT_TICKS) * TICK.as_millis() as u64
            );
        }
        true
    }

    /// Takes the session's next frame of user audio (or silence, when its input runs short) at its media
    /// time: into its history and its VAD windows.
    fn hear_frame(&mut self, index: usize, frame: &mut [f32; FRAME]) {
        let s = &mut self.sessions[index];
        let now = s.now;
        // The user's audio for this tick: a whole frame or silence, never a frame cut short.
        let was_flowing = s.input_flowing;
        let available = take_input(s.input.slots(), &mut s.input_flowing, s.input_ended);
        if was_flowing && !s.input_flowing {
            self.counters.input_underruns.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(session = %s.id, at_s = now.as_secs_f64(), "the user's audio ran short: silence until 60 ms of it waits");
        }
        let mut taken = 0;
        if let Ok(chunk) = s.input.read_chunk(available) {
            let (first, second) = chunk.as_slices();
            frame[..first.len()].copy_from_slice(first);
            frame[first.len()..first.len() + second.len()].copy_from_slice(second);
            taken = first.len() + second.len();
            chunk.commit_all();
        }
        s.waiting = s.input.slots();
        frame[taken..].fill(0.0);
        // Speech-to-text and the turn model hear the audio as it came (from the history): RNNoise's output
        // costs Moonshine words in noise (`docs/performance.md`, Hearing in noise); the VAD hears it denoised.
        for &sample in frame.iter() {
            if s.history.len() == HISTORY {
                s.history.pop_front();
            }
            s.history.push_back(crate::audio::pcm::to_i16(sample));
        }
        if s.suppressor.process(frame) == Suppressed::Started {
            self.counters.noise_suppressed_calls.fetch_add(1, Ordering::Relaxed);
            let delay_ms = s.suppressor.delay().map_or(0, |delay| delay.samples() / 16);
            tracing::info!(session = %s.id, at_s = now.as_secs_f64(), delay_ms, "the VAD hears the user's audio denoised from here on (steady noise, or stt.noise_suppression on)");
        }
        // VAD windows (512 samples) complete every 1.6 ticks.
        let mut consumed = 0;
        while consumed < FRAME {
            let n = (WINDOW - s.filled).min(FRAME - consumed);
            s.window[s.filled..s.filled + n].copy_from_slice(&frame[consumed..consumed + n]);
            s.filled += n;
            consumed += n;
            if s.filled == WINDOW {
                s.filled = 0;
                let end = now + MediaTime(consumed as u64);
                let start = end - MediaTime(WINDOW as u64);
                let level = level_db(mean_square(&s.window));
                self.counters.vad_windows.fetch_add(1, Ordering::Relaxed);
                match s.gate.decide(&s.window) {
                    VadDecision::Skip => {
                        self.counters.vad_skipped_silent.fetch_add(1, Ordering::Relaxed);
                        let silence = SessionInput::VadWindow { start, end, probability: 0.0, level: Some(level) };
                        s.session.handle_input(silence, now);
                    }
                    VadDecision::InferAsSilence => {
                        // The model's state follows the audio, but this window is silence: its result (0)
                        // comes back in order with the windows before it, whose results may still be on
                        // their way (applied now, a silent window would overtake the speech before it).
                        let (thread, session, window) = (self.index, s.id, s.window);
                        let job = VadJob { thread, session, start, window, as_silence: true, level };
                        match self.vad_jobs.try_send(job) {
                            Ok(()) => s.vad_in_flight += 1,
                            Err(TrySendError::Full(_)) => {
                                let silence =
                                    SessionInput::VadWindow { start, end, probability: 0.0, level: Some(level) };
                                s.session.handle_input(silence, now);
                            }
                            Err(TrySendError::Disconnected(_)) => self.inference_lost = true,
                        }
                    }
                    VadDecision::Infer => {
                        s.since_voice_check += 1;
                        if s.since_voice_check >= VOICE_CHECK_WINDOWS && s.session.conversation.wants_voiceprints() {
                            s.since_voice_check = 0;
                            self.counters.voice_checks.fetch_add(1, Ordering::Relaxed);
                            // The history already holds the rest of this frame, after the window.
                            let audio = recent_audio(&s.history, FRAME - consumed, PARTIAL_SAMPLES);
                            let job = VoiceJob { thread: self.index, session: s.id, end, audio };
                            match self.voice_jobs.try_send(job) {
                                Ok(()) => {}
                                Err(TrySendError::Full(_)) => {
                                    self.counters.voice_queue_full.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(TrySendError::Disconnected(_)) => self.inference_lost = true,
                            }
                        }
                        let (thread, session, window) = (self.index, s.id, s.window);
                        let job = VadJob { thread, session, start, window, as_silence: false, level };
                        match self.vad_jobs.try_send(job) {
                            Ok(()) => s.vad_in_flight += 1,
                            Err(TrySendError::Full(_)) => {
                                self.counters.vad_queue_full.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(TrySendError::Disconnected(_)) => self.inference_lost = true,
                        }
                    }
                }
            }
        }
    }

    /// One owed frame of the user's audio (`MediaSession::owed_ticks`), heard on top of the tick's own
    /// while more than `catch_up_floor` waits; the agent's voice holds for it (nothing rendered).
    fn catch_up(&mut self, index: usize, frame: &mut [f32; FRAME]) {
        let s = &mut self.sessions[index];
        if s.owed_ticks == 0 || !s.input_flowing || s.input.slots() < s.catch_up_floor + FRAME {
            return;
        }
        s.owed_ticks -= 1;
        self.counters.input_frames_caught_up.fetch_add(1, Ordering::Relaxed);
        self.hear_frame(index, frame);
        let s = &mut self.sessions[index];
        s.session.conversation.handle_timeout(s.now);
        s.now = s.now + MediaTime(FRAME as u64);
    }

    /// What the session's agent task has finished: transcripts, sentences of audio, ends of replies.
    fn take_agent_results(&mut self, index: usize) {
        let s = &mut self.sessions[index];
        let Some(agent) = &s.agent else { return };
        while let Ok(result) = agent.results.try_recv() {
            s.session.handle_input(SessionInput::Agent(result), s.now);
        }
        self.handle_outputs(index);
    }

    fn handle_outputs(&mut self, index: usize) {
        let s = &mut self.sessions[index];
        let mut host = LiveHost {
            thread: self.index,
            id: s.id,
            now: s.now,
            wall: self.wall,
            history: &s.history,
            agent: s.agent.as_ref(),
            events: &mut s.events,
            turn_metrics: &s.turn_metrics,
            max_endpointing_delay: s.max_endpointing_delay,
            turn_jobs: &self.turn_jobs,
            counters: &self.counters,
        };
        s.session.drive(&mut host);
    }
}

/// The `samples` of the history before its last `after` (fewer at the start of a call), as floats.
fn recent_audio(history: &VecDeque<i16>, after: usize, samples: usize) -> Vec<f32> {
    let end = history.len().saturating_sub(after);
    history.range(end.saturating_sub(samples)..end).map(|&v| f32::from(v) / 32_768.0).collect()
}

/// The live runtime as a session's host (`SessionHost`): speech-to-text and replies go to the session's
/// agent task, the turn model to the inference threads; their results come back through
/// `take_agent_results` and `apply`.
struct LiveHost<'a> {
    thread: usize,
    id: SessionId,
    now: MediaTime,
    /// When the step runs (`MediaThread::tick`).
    wall: Instant,
    history: &'a VecDeque<i16>,
    agent: Option<&'a AgentLink>,
    events: &'a mut EventOutbox,
    turn_metrics: &'a Sender<TurnMetrics>,
    max_endpointing_delay: MediaTime,
    turn_jobs: &'a Sender<TurnJob>,
    counters: &'a RuntimeCounters,
}

impl LiveHost<'_> {
    /// The user's audio `[from, to)` from the history (what is older than the history is gone).
    fn user_audio(&self, from: MediaTime, to: MediaTime) -> Vec<f32> {
        let oldest = self.now.samples().saturating_sub(self.history.len() as u64);
        let start = from.samples().saturating_sub(oldest) as usize;
        let end = (to.samples().saturating_sub(oldest) as usize).min(self.history.len());
        self.history.range(start.min(end)..end).map(|&v| f32::from(v) / 32_768.0).collect()
    }
}

impl SessionHost for LiveHost<'_> {
    fn now(&self) -> MediaTime {
        self.now
    }

    fn event(&mut self, event: ConversationEvent) {
        if self.events.send(event) == Sent::Dropped {
            self.counters.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn turns_over(&mut self, turns: Vec<TurnMetrics>) {
        for metrics in turns {
            // Diagnostics, not records: a full queue drops the line rather than wait.
            let _ = self.turn_metrics.try_send(metrics);
        }
    }

    fn heard(&mut self, text: &str) {
        if let Some(agent) = self.agent {
            agent.offer(AgentJob::Heard(text.to_string()));
        }
    }

    fn prepare_transcript(&mut self, session: &mut DrivenSession, from: MediaTime, to: MediaTime) {
        if let Some(agent) = self.agent {
            let audio = self.user_audio(session.conversation.transcription_start(from), to);
            agent.offer(AgentJob::Prepare { from, to, audio });
        }
    }

    fn predict_turn(&mut self, _: &mut DrivenSession, last_speech: MediaTime) {
        // The model looks at the last 8 s up to the end of speech and its tail; older audio is not sent.
        let to = turn_model_end(last_speech);
        let from = MediaTime::from_samples(to.samples().saturating_sub(TURN_MODEL_SAMPLES as u64));
        let audio = self.user_audio(from, to);
        // Live, media time runs with the wall clock: the verdict is useful until the max delay.
        let since_speech = self.now.samples().saturating_sub(last_speech.samples());
        let useful = self.max_endpointing_delay.samples().saturating_sub(since_speech);
        let asked_at = self.wall;
        let answer_by = asked_at + MediaTime::from_samples(useful).as_duration();
        let job = TurnJob { thread: self.thread, session: self.id, last_speech, audio, asked_at, answer_by };
        if self.turn_jobs.try_send(job).is_err() {
            self.counters.turn_queue_full.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn transcribe(&mut self, session: &mut DrivenSession, turn: TurnId, from: MediaTime, to: MediaTime, at: MediaTime) {
        let offered = self.agent.is_some_and(|agent| {
            let audio = self.user_audio(session.conversation.transcription_start(from), to);
            let offered = agent.offer(AgentJob::Transcribe { turn, from, to, audio });
            if !offered {
                self.counters.agent_jobs_dropped.fetch_add(1, Ordering::Relaxed);
            }
            offered
        });
        if !offered {
            let nothing = AgentResult::Transcript { turn, text: String::new(), timing: None };
            session.handle_input(SessionInput::Agent(nothing), at);
        }
    }

    fn respond(&mut self, session: &mut DrivenSession, turn: TurnId, epoch: Epoch, user_text: String) {
        let offered = self.agent.is_some_and(|agent| agent.offer(AgentJob::Respond { turn, epoch, user_text }));
        if !offered {
            let silent = AgentResult::ReplyEnd { turn, timings: Default::default() };
            session.handle_input(SessionInput::Agent(silent), self.now);
        }
    }

    fn cancel_reply(&mut self, epoch: Epoch) {
        if let Some(agent) = self.agent {
            agent.offer(AgentJob::Cancel { epoch });
        }
    }

    fn judge_overlap(&mut self, session: &mut DrivenSession, from: MediaTime, to: MediaTime) {
        let offered = self.agent.is_some_and(|agent| {
            let audio = self.user_audio(session.conversation.transcription_start(from), to);
            let offered = agent.offer(AgentJob::JudgeOverlap { to, audio });
            if !offered {
                self.counters.agent_jobs_dropped.fetch_add(1, Ordering::Relaxed);
            }
            offered
        });
        if !offered {
            session.handle_input(SessionInput::Agent(AgentResult::OverlapWords { to, text: None }), self.now);
        }
    }

    fn overlap_decided(&mut self, decision: &OverlapDecision) {
        let counter = if decision.interrupted {
            &self.counters.overlaps_interrupted
        } else {
            &self.counters.backchannels_ignored
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            session = %self.id,
            started = decision.since.as_secs_f64(),
            decided = decision.at.as_secs_f64(),
            interrupted = decision.interrupted,
            reason = decision.reason,
            words = %decision.words,
            "speech over the agent decided"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_taken_in_whole_frames_once_its_jitter_buffer_is_full() {
        // Samples waiting at each tick (before it takes any), as a late-arriving stream leaves them.
        let waiting = [320, 640, 960, 960, 640, 320, 100, 700, 960, 1280, 0];
        let mut flowing = false;
        let taken: Vec<usize> = waiting.iter().map(|&w| take_input(w, &mut flowing, false)).collect();
        // Nothing until 60 ms wait; then 20 ms a tick until the input runs short (100 left is kept
        // for later, not padded with silence); then nothing until 60 ms wait again.
        assert_eq!(taken, [0, 0, 320, 320, 320, 320, 0, 0, 320, 320, 0]);
        assert!(!flowing);
    }

    #[test]
    fn an_ended_input_is_taken_to_its_last_whole_frame() {
        let waiting = [640, 320, 100];
        let mut flowing = false;
        let taken: Vec<usize> = waiting.iter().map(|&w| take_input(w, &mut flowing, true)).collect();
        assert_eq!(taken, [320, 320, 0]);
    }
}
