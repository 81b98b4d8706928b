//! Counters the engine keeps as atomics (its runtime's, the embedded language models' queues), mirrored
//! as Prometheus counters when the page is scraped.

use std::sync::atomic::{AtomicU64, Ordering};

use confab_engine::providers::model_queue::QueueCounters;
use confab_engine::runtime::RuntimeCounters;
use prometheus::{IntCounter, Registry};

/// A counter kept by the engine as an atomic, mirrored as a Prometheus counter: (name, help, field of `T`).
pub(super) type MirroredCounter<T> = (&'static str, &'static str, fn(&T) -> &AtomicU64);
/// The registered Prometheus counters of a table of mirrored ones, each with its field.
pub(super) type Mirrors<T> = Vec<(IntCounter, fn(&T) -> &AtomicU64)>;

pub(super) const ENGINE_COUNTERS: &[MirroredCounter<RuntimeCounters>] = &[
    ("confab_media_ticks_total", "Media ticks (20 ms of every call) run by the engine.", |c| &c.ticks),
    ("confab_media_tick_overruns_total", "Media ticks whose work took longer than 20 ms.", |c| &c.missed_deadlines),
    (
        "confab_media_ticks_skipped_total",
        "Media ticks skipped because a media thread was more than 100 ms late (the host is short of CPU); the calls' incoming audio of those ticks is heard on later ticks.",
        |c| &c.ticks_skipped,
    ),
    (
        "confab_media_input_underruns_total",
        "Times a call's incoming audio ran short mid-stream (came late); the engine then waits for 60 ms of it.",
        |c| &c.input_underruns,
    ),
    (
        "confab_media_input_frames_caught_up_total",
        "20 ms frames of a call's incoming audio heard on top of a tick's own, to catch up the ticks a starved media thread skipped: nothing is dropped.",
        |c| &c.input_frames_caught_up,
    ),
    (
        "confab_media_input_late_ticks_total",
        "Media ticks (20 ms) a call waited for incoming audio that stopped arriving while the user was speaking and the agent silent (up to 500 ms at a time): the late audio is heard when it comes, rather than silence in the middle of a word.",
        |c| &c.input_late_ticks,
    ),
    (
        "confab_media_input_overflows_total",
        "Packets of a call's incoming audio dropped, in whole or part, because the engine's input ring (1 s) was full: the call's media thread fell behind.",
        |c| &c.input_overflows,
    ),
    (
        "confab_face_frames_held_total",
        "Frames of an agent's face held still instead of drawn because the face's thread was behind (the host is short of CPU): the face's frame rate gives way before the voice.",
        |c| &c.face_frames_held,
    ),
    ("confab_vad_windows_refused_total", "VAD windows dropped because the VAD queue was full.", |c| &c.vad_queue_full),
    (
        "confab_turn_requests_dropped_total",
        "End-of-turn questions dropped because the turn-model queue was full.",
        |c| &c.turn_queue_full,
    ),
    (
        "confab_turn_requests_stale_total",
        "End-of-turn questions dropped unanswered because they waited past their turn's max endpointing delay.",
        |c| &c.turn_stale,
    ),
    (
        "confab_turn_requests_superseded_total",
        "End-of-turn questions replaced unanswered by the same call's newer question (the user spoke again).",
        |c| &c.turn_superseded,
    ),
    ("confab_turn_verdicts_total", "End-of-turn verdicts given by the turn model.", |c| &c.turn_verdicts),
    (
        "confab_backchannels_ignored_total",
        "Speech over a talking agent that said only backchannels (\"mm-hmm\", \"yeah\", \"okay\"): the agent talked on.",
        |c| &c.backchannels_ignored,
    ),
    (
        "confab_interruptions_total",
        "Speech over a talking agent that interrupted it (its words, its length, or the overlap rule).",
        |c| &c.overlaps_interrupted,
    ),
    (
        "confab_noise_suppressed_calls_total",
        "Calls whose audio the noise suppressor started denoising (steady noise heard, or stt.noise_suppression on).",
        |c| &c.noise_suppressed_calls,
    ),
    (
        "confab_voice_checks_total",
        "Voice checks asked for: 1.6 s of a call's audio voiceprinted every 640 ms of sound, to tell the user's voice from others (stt.other_voices ignore).",
        |c| &c.voice_checks,
    ),
    (
        "confab_voice_checks_dropped_total",
        "Voice checks dropped because the voice thread was behind (256 waiting): the level alone decided until the next.",
        |c| &c.voice_queue_full,
    ),
    (
        "confab_agent_jobs_dropped_total",
        "Speech-to-text or reply jobs dropped because a call's agent queue was full.",
        |c| &c.agent_jobs_dropped,
    ),
    ("confab_engine_panics_total", "Panics caught in the engine's threads (each ended the calls it touched).", |c| {
        &c.panics
    }),
];

/// The embedded language models' queues (`confab_engine::providers::model_queue`), process-wide.
pub(super) const LLM_QUEUE_COUNTERS: &[MirroredCounter<QueueCounters>] = &[
    (
        "confab_llm_requests_refused_total",
        "Requests to an embedded language model refused at once because its queue was full.",
        |c| &c.refused,
    ),
    (
        "confab_llm_early_replies_deferred_total",
        "Replies not asked of an embedded language model ahead of the user's commit because other requests were waiting for it (asked at the commit instead): under load, committed replies come first.",
        |c| &c.early_deferred,
    ),
    (
        "confab_llm_requests_abandoned_total",
        "Requests to an embedded language model dropped unstarted: their reply was discarded while they waited.",
        |c| &c.abandoned,
    ),
];

pub(super) fn register<C: prometheus::core::Collector + Clone + 'static>(registry: &Registry, collector: C) -> C {
    registry.register(Box::new(collector.clone())).expect("each metric is registered once");
    collector
}

/// Registers a Prometheus counter for each of `table`'s.
pub(super) fn register_mirrors<T>(registry: &Registry, table: &[MirroredCounter<T>]) -> Mirrors<T> {
    table
        .iter()
        .map(|(name, help, field)| (register(registry, IntCounter::new(*name, *help).expect("valid metric")), *field))
        .collect()
}

/// Brings each mirror up to its atomic's total in `source` (the atomics only grow).
pub(super) fn mirror<T>(mirrors: &Mirrors<T>, source: &T) {
    for (counter, field) in mirrors {
        let total = field(source).load(Ordering::Relaxed);
        counter.inc_by(total.saturating_sub(counter.get()));
    }
}
