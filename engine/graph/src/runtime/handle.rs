//! A session as its caller holds it (`SessionHandle`: the ends of its audio rings and queues), how one is
//! made beside its media thread's side (`new_session`, the one place both runtimes build a session), and
//! what a caller does with any runtime (`CallRuntime`): a transport, the fleet's worker or `confab
//! simulate` drive the threaded runtime and the stepped one through the same door.

use crossbeam_channel::{Receiver, bounded};

use super::agent::AgentLink;
use super::media::{MediaSession, SessionClock, SessionEnds};
use super::slots::{SessionId, SlotGuard};
use super::{INPUT_RING_SAMPLES, OUTPUT_RING_SAMPLES, TURN_METRICS_QUEUE};
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

/// What a session is made of: the slot it holds, its conversation, the agent that answers it, its
/// event queue's capacity and the clock its turn metrics are placed on.
pub(super) struct NewSession {
    pub id: SessionId,
    pub slot: SlotGuard,
    pub config: ConversationConfig,
    pub agent: Option<AgentLink>,
    pub event_queue: usize,
    pub clock: SessionClock,
}

/// The media thread's side of a session and the caller's, wired to each other.
pub(super) fn new_session(new: NewSession) -> (MediaSession, SessionHandle) {
    let (input, input_rx) = rtrb::RingBuffer::new(INPUT_RING_SAMPLES);
    let (output_tx, output) = rtrb::RingBuffer::new(OUTPUT_RING_SAMPLES);
    let (events_tx, events) = bounded(new.event_queue.max(1));
    let (turn_metrics_tx, turn_metrics) = bounded(TURN_METRICS_QUEUE);
    let ends = SessionEnds { input: input_rx, output: output_tx, events: events_tx, turn_metrics: turn_metrics_tx };
    let session = MediaSession::new(new.id, new.config, ends, new.agent, new.slot, new.clock);
    (session, SessionHandle { id: new.id, input, output, events, turn_metrics })
}

/// A runtime as its callers use it, whether its media threads run on the wall clock (`Runtime`) or are
/// stepped by the caller (`SteppedRuntime`). Every session ends with `call_ended` on its events.
pub trait CallRuntime {
    /// Opens a session in a free slot; `responder`, when given, answers the user. None when every slot is
    /// taken (or the runtime can no longer hear).
    fn open_session(&mut self, config: ConversationConfig, responder: Option<Responder>) -> Option<SessionHandle>;
    /// Hangs up: the call ends cleanly (`call_ended`).
    fn close_session(&mut self, id: SessionId);
    /// The participant is gone (transport closed or silent): `participant_left`, then `call_ended`.
    fn participant_left(&mut self, id: SessionId, participant: &str);
    /// The user's audio is over (a recording played to its end): what waits in the input is heard, then
    /// silence, and the call ends (`call_ended`) once nothing is left to do — no turn being spoken or
    /// awaiting its commit, transcript or reply, nothing left to play.
    fn input_ended(&mut self, id: SessionId);
}
