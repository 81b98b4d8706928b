//! Density: N simulated sessions in real time on the media threads (one per core) with the shared,
//! batched inference thread. Each session hears 2 s of speech in every 6 s (offsets staggered) through
//! its input ring, and its output ring is drained like a transport would. A run passes when no media
//! tick missed its 20 ms deadline and no VAD window was refused by a full queue.
//!
//! `cargo bench -p confab-benches --bench density` reports, for each N tried: missed deadlines, the
//! longest tick, CPU per session-second and memory per session; then the largest N that passed. Under
//! `cargo test` (no `--bench` argument) it runs one small smoke case.

use std::time::{Duration, Instant};

use confab_benches::{cpu_seconds, espeak, play_users_tick, user_offsets};
use confab_engine::conversation::ConversationConfig;
use confab_engine::runtime::{Runtime, RuntimeConfig, RuntimeCounters};

const PERIOD: usize = 16_000 * 6;

fn speech() -> Vec<f32> {
    let mut clip = espeak("I would like to know when the next train to the airport leaves", 170);
    clip.truncate(32_000);
    clip.resize(PERIOD, 0.0);
    clip
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
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
    for f in 0..frames {
        play_users_tick(&mut handles, clip, &offsets, f);
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
         memory {:.0} KiB per session, turn verdicts {verdicts} ({:.1}/s), stale {stale}, turn-model requests dropped {turn_dropped}",
        RuntimeCounters::get(&c.max_tick_micros) as f64 / 1000.0,
        100.0 * skipped as f64 / windows.max(1) as f64,
        (windows - skipped) as f64 / batches as f64,
        1000.0 * cpu / (sessions as f64 * wall),
        (rss_after.saturating_sub(rss_before)) as f64 / 1024.0 / sessions as f64,
        verdicts as f64 / wall,
    );
    drop(handles);
    Outcome { passed: missed == 0 && refused == 0, line }
}

fn main() {
    let clip = speech();
    let benchmarking = std::env::args().any(|a| a == "--bench");
    if !benchmarking {
        let outcome = run(4, 1, &clip);
        println!("density smoke: {}", outcome.line);
        return;
    }
    let mut best = 0;
    for sessions in [100, 250, 500, 750, 1000, 1500, 2000] {
        let outcome = run(sessions, 8, &clip);
        println!("{} {}", if outcome.passed { "PASS" } else { "FAIL" }, outcome.line);
        if outcome.passed {
            best = sessions;
        } else {
            break;
        }
    }
    println!("largest N with no missed 20 ms deadline: {best}");
}
