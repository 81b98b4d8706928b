//! A recording played to a runtime as a call's user: its audio goes into one session's input at the pace
//! of the session's media clock, the agent's audio, events and turn metrics come out, and the call ends
//! once the recording is over and nothing is left to do (`CallRuntime::input_ended`), or `MAX_TAIL`
//! after it. Offline the runtime is the stepped one (`SteppedRuntime`: media time runs as fast as the
//! machine does, each step's work answered before the next); `realtime` plays it to the threaded runtime
//! that live calls run on, at the wall clock's pace. Either way the session is a live call's: one frame
//! loop, one turn model path, one way to run a reply.

use std::path::Path;
use std::time::Instant;

use crate::conversation::ConversationConfig;
use crate::events::{ConversationEvent, EventKind};
use crate::responder::Responder;
use crate::runtime::{
    CallRuntime, FRAME, INPUT_JITTER_BUFFER, Runtime, RuntimeConfig, SessionHandle, SteppedRuntime, TICK,
};
use crate::time::MediaTime;
use crate::turn_metrics::TurnMetrics;

use super::{SimulateError, SimulationRecord};

/// After the input ends, the conversation runs at most this long for the agent to finish.
pub const MAX_TAIL: MediaTime = MediaTime::from_millis(60_000);
/// Steps run after a hang-up for its `call_ended` to come out, at most (it takes one).
const HANG_UP_STEPS: u64 = 50;

/// What a run shows as it goes.
pub enum Observed<'a> {
    Event(&'a ConversationEvent),
    TurnMetrics(&'a TurnMetrics),
}

/// Plays `audio` (16 kHz mono) as the user of one call with `config`, answered by `responder` (its provider
/// calls on `io`), calling `observe` for each event and turn's metrics as they come out. The listening
/// models come from `models_dir`.
pub fn run_audio(
    io: &tokio::runtime::Runtime,
    models_dir: &Path,
    audio: &[f32],
    config: ConversationConfig,
    responder: Option<Responder>,
    realtime: bool,
    observe: &mut dyn FnMut(Observed<'_>),
) -> Result<SimulationRecord, SimulateError> {
    let runtime_config = RuntimeConfig {
        media_threads: 1,
        turn_threads: 1,
        io: Some(io.handle().clone()),
        ..RuntimeConfig::new(models_dir.to_path_buf(), 1)
    };
    let mut player = Player::new(audio, observe);
    if realtime {
        let mut runtime = Runtime::start(runtime_config)?;
        let session = runtime.open_session(config, responder).ok_or(SimulateError::Refused)?;
        let started = Instant::now();
        player.play(&mut runtime, session, |_, step| {
            let due = started + TICK * u32::try_from(step).unwrap_or(u32::MAX);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        });
        // The runtime's threads stop first (a session still open goes with them), then its agents finish.
        let agents = runtime.agents_finished();
        drop(runtime);
        io.block_on(agents);
    } else {
        let mut runtime = SteppedRuntime::new(&runtime_config)?;
        let session = runtime.open_session(config, responder).ok_or(SimulateError::Refused)?;
        player.play(&mut runtime, session, |runtime, _| runtime.step());
    }
    Ok(player.record)
}

/// The recording's side of the call.
struct Player<'a> {
    /// The recording.
    audio: &'a [f32],
    /// Its length in whole frames (its last one is filled out with silence).
    padded_len: usize,
    /// Samples of it pushed into the session's input.
    pushed: usize,
    /// The runtime has been told the recording is over.
    input_ended: bool,
    record: SimulationRecord,
    observe: &'a mut dyn FnMut(Observed<'_>),
    call_ended: bool,
}

impl<'a> Player<'a> {
    fn new(audio: &'a [f32], observe: &'a mut dyn FnMut(Observed<'_>)) -> Player<'a> {
        let padded_len = audio.len().div_ceil(FRAME) * FRAME;
        let record = SimulationRecord { agent_audio: Vec::with_capacity(padded_len + FRAME), ..Default::default() };
        Player { audio, padded_len, pushed: 0, input_ended: false, record, observe, call_ended: false }
    }

    /// Plays the recording to `session` on `runtime` until its call ends: before each step the input is
    /// topped up to the jitter buffer's worth ahead of the step (so step `n` hears the recording's frame `n`:
    /// media time is the recording's time), `advance` runs or waits for the step, then what came out is taken.
    fn play<R: CallRuntime>(
        &mut self,
        runtime: &mut R,
        mut session: SessionHandle,
        mut advance: impl FnMut(&mut R, u64),
    ) {
        let input_frames = (self.padded_len / FRAME) as u64;
        let hang_up_at = input_frames + MAX_TAIL.samples() / FRAME as u64;
        let mut step = 0u64;
        while !self.call_ended && step <= hang_up_at + HANG_UP_STEPS {
            self.feed(runtime, &mut session, step as usize * FRAME + INPUT_JITTER_BUFFER);
            if step == hang_up_at {
                runtime.close_session(session.id);
            }
            advance(runtime, step);
            self.take(&mut session);
            step += 1;
        }
    }

    /// Pushes the recording up to sample `due`; once all of it is in, says the input has ended.
    fn feed(&mut self, runtime: &mut impl CallRuntime, session: &mut SessionHandle, due: usize) {
        let due = due.min(self.padded_len);
        if self.pushed < due
            && let Ok(chunk) = session.input.write_chunk_uninit(due - self.pushed)
        {
            let recorded = self.audio.get(self.pushed..due.min(self.audio.len())).unwrap_or_default();
            let silence = std::iter::repeat_n(0.0, due - self.pushed - recorded.len());
            self.pushed += chunk.fill_from_iter(recorded.iter().copied().chain(silence));
        }
        if self.pushed == self.padded_len && !self.input_ended {
            self.input_ended = true;
            runtime.input_ended(session.id);
        }
    }

    /// What the session put out: the agent's audio, its events, the turns' metrics. A turn still open at
    /// the call's end has its metrics written before `call_ended`, as a live call stores them.
    fn take(&mut self, session: &mut SessionHandle) {
        if let Ok(chunk) = session.output.read_chunk(session.output.slots()) {
            let (first, second) = chunk.as_slices();
            self.record.agent_audio.extend_from_slice(first);
            self.record.agent_audio.extend_from_slice(second);
            chunk.commit_all();
        }
        while let Ok(event) = session.events.try_recv() {
            if matches!(event.kind, EventKind::CallEnded) {
                self.take_turn_metrics(session);
                self.call_ended = true;
            }
            (self.observe)(Observed::Event(&event));
            self.record.events.push(event);
        }
        self.take_turn_metrics(session);
    }

    fn take_turn_metrics(&mut self, session: &SessionHandle) {
        while let Ok(metrics) = session.turn_metrics.try_recv() {
            (self.observe)(Observed::TurnMetrics(&metrics));
            self.record.turn_metrics.push(metrics);
        }
    }
}
