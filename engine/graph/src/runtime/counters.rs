//! What the runtime counts as it goes (ticks, deadlines missed, queues refused, panics contained): atomics
//! the threads bump and `/metrics` reads.

use std::sync::atomic::{AtomicU64, Ordering};

use super::WaitHistogram;

/// Counters the runtime keeps instead of logging on hot paths.
#[derive(Debug, Default)]
pub struct RuntimeCounters {
    pub ticks: AtomicU64,
    /// Ticks whose work took longer than the 20 ms period.
    pub missed_deadlines: AtomicU64,
    /// Ticks a media thread skipped because it was more than five ticks late (starved of CPU); its
    /// sessions take the audio of those ticks back on later ticks.
    pub ticks_skipped: AtomicU64,
    /// Times a session's input ran short mid-stream (the user's audio came late): it then refills its
    /// jitter buffer (`media::INPUT_JITTER_BUFFER`) before frames are taken again.
    pub input_underruns: AtomicU64,
    /// Frames (20 ms) of user audio heard on top of a tick's own to catch up the ticks a starved media
    /// thread skipped.
    pub input_frames_caught_up: AtomicU64,
    /// Ticks a session held its clock for the user's audio that stopped arriving mid-speech
    /// (`media::MAX_LATE_WAIT_TICKS`): it was late, and was heard when it came instead of silence.
    pub input_late_ticks: AtomicU64,
    /// Packets of the user's audio a transport dropped (in whole or part) because the session's input ring
    /// was full: its media thread had fallen a second behind.
    pub input_overflows: AtomicU64,
    pub output_overflows: AtomicU64,
    /// Frames of an agent's face held still instead of drawn because the face's thread was behind: the
    /// face's frame rate gives way before the voice.
    pub face_frames_held: AtomicU64,
    pub vad_windows: AtomicU64,
    pub vad_skipped_silent: AtomicU64,
    pub vad_queue_full: AtomicU64,
    pub vad_batches: AtomicU64,
    pub turn_queue_full: AtomicU64,
    /// Voice checks asked for (`core::other_voices`), and those dropped because the voice thread was
    /// behind (`VOICE_QUEUE` full: the level decides alone until the next).
    pub voice_checks: AtomicU64,
    pub voice_queue_full: AtomicU64,
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
    /// Speech over an agent that said only backchannels ("mm-hmm", "yeah"): the agent talked on.
    pub backchannels_ignored: AtomicU64,
    /// Speech over an agent that interrupted it.
    pub overlaps_interrupted: AtomicU64,
    /// Calls whose audio the noise suppressor started denoising (steady noise, or `noise_suppression` on).
    pub noise_suppressed_calls: AtomicU64,
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
