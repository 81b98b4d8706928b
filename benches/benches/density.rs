//! Density: N simulated sessions in real time on the media threads (one per core) with the shared,
//! batched inference thread. Each session hears 2 s of speech in every 6 s (offsets staggered) through
//! its input ring, and its output ring is drained like a transport would. A run passes when no media
//! tick missed its 20 ms deadline and no VAD window was refused by a full queue.
//!
//! `cargo bench -p confab-benches --bench density [-- N… --seconds=S]` reports, for each N tried: missed
//! deadlines, the longest tick, CPU per session-second, memory per session, the turn model's verdicts
//! (and how long each waited from question to verdict) and the users' pauses (end of speech → commit);
//! then the largest N that passed. Under `cargo test` (no `--bench` argument) it runs one small smoke case.

use std::time::{Duration, Instant};

use confab_benches::{cpu_seconds, espeak, play_users_tick_observed, rss_bytes, user_offsets};
use confab_engine::conversation::ConversationConfig;
use confab_engine::events::{ConversationEvent, EventKind};
use confab_engine::runtime::{CallRuntime, Runtime, RuntimeConfig, RuntimeCounters};

const PERIOD: usize = 16_000 * 6;
/// The max endpointing delay, and a tick to spare: every turn is committed this long after its speech.
const MAX_PAUSE: Duration = Duration::from_millis(3_100);

/// A whole question (so the turn model can say "done"), 2 s long, then 4 s of silence.
fn speech() -> Vec<f32> {
    let mut clip = espeak("When does the next train leave?", 170);
    clip.truncate(32_000);
    clip.resize(PERIOD, 0.0);
    clip
}

/// Each turn's pause: from the end of the user's speech to the commit of their turn (0.5 s when the turn
/// model said "done" in time, up to the 3 s max endpointing delay when it said "not done" or never answered).
struct Pauses {
    speech_ended: Vec<Option<Duration>>,
    /// (end of speech, pause), both on the session's media clock.
    pauses: Vec<(Duration, Duration)>,
}

impl Pauses {
    fn new(sessions: usize) -> Pauses {
        Pauses { speech_ended: vec![None; sessions], pauses: Vec::new() }
    }

    fn observe(&mut self, session: usize, event: ConversationEvent) {
        match event.kind {
            EventKind::UserStoppedSpeaking => self.speech_ended[session] = Some(event.media_time),
            EventKind::UtteranceCommitted { .. } => {
                if let Some(ended) = self.speech_ended[session].take() {
                    self.pauses.push((ended, event.media_time.saturating_sub(ended)));
                }
            }
            _ => {}
        }
    }

    /// "p50 … s, p95 … s, N of M under 0.6 s" over the speech that ended before `horizon` (media time at
    /// which every such turn has been committed even at the max delay, so slow commits are not left out).
    fn summary(self, horizon: Duration) -> String {
        let mut pauses: Vec<Duration> =
            self.pauses.into_iter().filter(|(ended, _)| *ended <= horizon).map(|(_, pause)| pause).collect();
        if pauses.is_empty() {
            return "none committed".into();
        }
        pauses.sort();
        let at = |q: f64| pauses[((q * pauses.len() as f64).ceil() as usize).clamp(1, pauses.len()) - 1];
        let quick = pauses.iter().filter(|p| **p < Duration::from_millis(600)).count();
        format!(
            "p50 {:.2} s, p95 {:.2} s, {quick} of {} under 0.6 s",
            at(0.5).as_secs_f64(),
            at(0.95).as_secs_f64(),
            pauses.len()
        )
    }
}

fn wait_text(wait: Option<Duration>) -> String {
    match wait {
        None => "-".into(),
        Some(Duration::MAX) => "> 5".into(),
        Some(wait) => format!("{:.2}", wait.as_secs_f64()),
    }
}

struct Outcome {
    passed: bool,
    line: String,
}

fn run(sessions: usize, seconds: u64, clip: &[f32]) -> Outcome {
    let config = RuntimeConfig::new(confab_models::default_models_dir(), sessions);
    let mut runtime = Runtime::start(config).expect("models are fetched (confab models fetch)");
    let rss_before = rss_bytes();
    let mut handles: Vec<_> =
        (0..sessions).map(|_| runtime.open_session(ConversationConfig::default(), None).unwrap()).collect();
    let offsets = user_offsets(sessions, PERIOD);
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let frames = (seconds * 50) as usize;
    let mut pauses = Pauses::new(sessions);
    for f in 0..frames {
        play_users_tick_observed(&mut handles, clip, &offsets, f, |session, event| pauses.observe(session, event));
        let due = start + Duration::from_millis(20 * (f as u64 + 1));
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    // After the run every session's buffers (8 s of audio history included) are full.
    let rss_after = rss_bytes();
    let cpu = cpu_seconds() - cpu_start;
    let c = &runtime.counters;
    let missed = RuntimeCounters::get(&c.missed_deadlines);
    let refused = RuntimeCounters::get(&c.vad_queue_full);
    let windows = RuntimeCounters::get(&c.vad_windows);
    let skipped = RuntimeCounters::get(&c.vad_skipped_silent);
    let batches = RuntimeCounters::get(&c.vad_batches).max(1);
    let turn_dropped = RuntimeCounters::get(&c.turn_queue_full);
    let verdicts = RuntimeCounters::get(&c.turn_verdicts);
    let stale = RuntimeCounters::get(&c.turn_stale);
    let line = format!(
        "sessions {sessions:5}: missed deadlines {missed:4}, longest tick {:6.2} ms, VAD refused {refused:6}, \
         windows {windows:7} ({:.0}% skipped as silence, {:.1} windows per batch), CPU {:.2} ms per session-second, \
         memory {:.0} KiB per session, turn verdicts {verdicts} ({:.1}/s; asked → verdict p50 {} s, p95 {} s), \
         stale {stale}, turn-model requests dropped {turn_dropped}; end of speech → commit {}",
        RuntimeCounters::get(&c.max_tick_micros) as f64 / 1000.0,
        100.0 * skipped as f64 / windows.max(1) as f64,
        (windows - skipped) as f64 / batches as f64,
        1000.0 * cpu / (sessions as f64 * wall),
        (rss_after.saturating_sub(rss_before)) as f64 / 1024.0 / sessions as f64,
        verdicts as f64 / wall,
        wait_text(c.turn_wait.quantile(0.5)),
        wait_text(c.turn_wait.quantile(0.95)),
        pauses.summary(Duration::from_secs(seconds).saturating_sub(MAX_PAUSE)),
    );
    drop(handles);
    Outcome { passed: missed == 0 && refused == 0, line }
}

fn main() {
    let clip = speech();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        let outcome = run(4, 1, &clip);
        println!("density smoke: {}", outcome.line);
        return;
    }
    // `-- 250 500` tries only those N; `--seconds=20` runs each N that long (default 8 s).
    let chosen: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let seconds = args.iter().find_map(|a| a.strip_prefix("--seconds=")).map_or(8, |s| s.parse().expect("--seconds=S"));
    let tried = if chosen.is_empty() { vec![100, 250, 500, 750, 1000, 1500, 2000] } else { chosen };
    let mut best = 0;
    for sessions in tried {
        let outcome = run(sessions, seconds, &clip);
        println!("{} {}", if outcome.passed { "PASS" } else { "FAIL" }, outcome.line);
        if outcome.passed {
            best = sessions;
        } else {
            break;
        }
    }
    println!("largest N with no missed 20 ms deadline: {best}");
}
