//! Avatar streams per core with the audio pipeline running: N live calls in real time, each with what a
//! call runs on a media worker. The engine runtime holds N sessions (media threads, the batched VAD
//! thread, the turn model) hearing the user's speech through their input rings; per call, a thread
//! plays the voice sender and the face thread together: every 20 ms it Opus-encodes the agent's voice
//! (the agent speaks all the time: the worst case for the face) and every 40 ms renders the face from that
//! audio, converts the redrawn regions to I420 and encodes VP8 (`FaceEncoder`, 512×512, as in calls).
//!
//! A frame is due when its audio is sent; it is late when it is not encoded before the next one is due
//! (40 ms later: the face falls a frame behind its voice until it catches up). A run passes when at most
//! one frame in a thousand is late (the OS scheduling 20–50 threads on two cores), none by more than
//! 80 ms, and no media tick missed its 20 ms deadline. A frame's lateness is judged less the time the
//! whole machine stalled meanwhile (`stall_watch`: a real-time watchdog held off means the host did not run
//! this virtual machine); the raw figures, the stalls and the host's steal time are printed beside it.
//!
//! `cargo bench -p confab-benches --bench avatar_density [-- N…] [--custom=PICTURE]` (`--custom`: every call
//! wears a custom avatar rigged from that picture instead of the stock faces) reports, for each N: late frames, frame
//! latency (due → encoded) p50/p99/max, CPU per stream-second, then the largest N that passed. Under
//! `cargo test` (no `--bench` argument) it runs one small smoke case.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use confab_benches::stall_watch::{StallWatch, stalled_during};
use confab_benches::{cpu_seconds, espeak, play_users_tick, steal_seconds, user_offsets};
use confab_engine::audio::opus_egress::{FRAME_16K, OpusEgress};
use confab_engine::avatar::from_image::AvatarBuilder;
use confab_engine::avatar::stock::STOCK;
use confab_engine::avatar::{FRAME_SAMPLES, FaceRig, RgbImage};
use confab_engine::conversation::ConversationConfig;
use confab_engine::runtime::{CallRuntime, Runtime, RuntimeConfig, RuntimeCounters, SessionHandle};
use confab_engine::video::face_encoder::FaceEncoder;
use confab_engine::video::vp8::Vp8Config;

const TICK: Duration = Duration::from_millis(20);

/// The custom avatar every call wears (`--custom=PICTURE`), rigged once; none: the stock faces in turn.
static CUSTOM: std::sync::OnceLock<Option<(RgbImage, FaceRig)>> = std::sync::OnceLock::new();

/// One call's voice sender and face: the call joins at `start` (its face is set up), then Opus every 20 ms
/// and a face frame every 40 ms, for `frames` frames. Returns each frame's latency (due → encoded).
fn call(face_id: &str, voice: &[f32], offset: usize, start: Instant, frames: usize) -> Vec<(Instant, Duration)> {
    // The call joins at `start`: its face is set up then, while the calls that joined before it stream.
    if let Some(wait) = start.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    let mut face = match CUSTOM.get().and_then(Option::as_ref) {
        Some((portrait, rig)) => {
            FaceEncoder::with_portrait(portrait.clone(), rig.clone(), Vp8Config::default(), offset as u64).unwrap()
        }
        None => FaceEncoder::new(face_id, Vp8Config::default(), offset as u64).unwrap(),
    };
    let mut opus = OpusEgress::new().unwrap();
    let mut audio = vec![0.0f32; FRAME_SAMPLES as usize];
    let mut latencies = Vec::with_capacity(frames);
    let mut position = offset % voice.len();
    for frame in 0..frames {
        for half in 0..2 {
            let due = start + TICK * (2 * frame + half) as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let part = &mut audio[half * FRAME_16K..(half + 1) * FRAME_16K];
            for sample in part.iter_mut() {
                *sample = voice[position];
                position = (position + 1) % voice.len();
            }
            std::hint::black_box(opus.encode(part).unwrap().len());
        }
        let due = start + TICK * (2 * frame + 1) as u32;
        let (encoded, _) = face.encode(&audio).unwrap();
        std::hint::black_box(encoded.data.len());
        latencies.push((due, Instant::now().saturating_duration_since(due)));
    }
    latencies
}

/// The users' side, every 20 ms until `stop`.
fn feed(mut handles: Vec<SessionHandle>, speech: Vec<f32>, stop: Arc<AtomicBool>) {
    let start = Instant::now();
    let offsets = user_offsets(handles.len(), speech.len());
    let mut tick = 0usize;
    while !stop.load(Ordering::Relaxed) {
        play_users_tick(&mut handles, &speech, &offsets, tick);
        tick += 1;
        if let Some(wait) = (start + TICK * tick as u32).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

/// The late frames of a run (at most ten): which call, which of its frames, when in the run, how late.
fn print_late_frames(per_call: &[Vec<(Instant, Duration)>], run_start: Instant) {
    let late = per_call.iter().enumerate().flat_map(|(call, frames)| {
        frames
            .iter()
            .enumerate()
            .filter(|(_, (_, latency))| *latency > Duration::from_millis(40))
            .map(move |(frame, (due, latency))| (call, frame, due.saturating_duration_since(run_start), *latency))
    });
    for (call, frame, at, latency) in late.take(10) {
        println!(
            "  late: call {call} frame {frame} (due {:.3} s into the run) {:.1} ms",
            at.as_secs_f64(),
            latency.as_secs_f64() * 1_000.0
        );
    }
}

struct Outcome {
    passed: bool,
    line: String,
}

fn run(streams: usize, seconds: u64, voice: &Arc<Vec<f32>>, user: &[f32]) -> Outcome {
    let config = RuntimeConfig::new(confab_models::default_models_dir(), streams);
    let mut runtime = Runtime::start(config).expect("models are fetched (confab models fetch)");
    let handles: Vec<_> =
        (0..streams).map(|_| runtime.open_session(ConversationConfig::default(), None).unwrap()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (speech, stop) = (user.to_vec(), stop.clone());
        std::thread::spawn(move || feed(handles, speech, stop))
    };
    let frames = (seconds * 25) as usize;
    // Calls join one after another over the first two seconds (not all on one frame: each starts with a
    // whole keyframe), and each sets its face up when it joins, as a call does, while the earlier ones stream.
    let ready = Arc::new(Barrier::new(streams + 1));
    let calls: Vec<_> = (0..streams)
        .map(|i| {
            let (voice, ready) = (voice.clone(), ready.clone());
            let face_id = STOCK[i % STOCK.len()].0;
            std::thread::Builder::new()
                .name("confab-face".into())
                .spawn(move || {
                    confab_engine::priority::lower_for_video().unwrap();
                    ready.wait();
                    let start = Instant::now() + Duration::from_micros(i as u64 * 2_000_000 / streams as u64);
                    call(face_id, &voice, i * 16_411, start, frames)
                })
                .unwrap()
        })
        .collect();
    let watch = StallWatch::start();
    ready.wait();
    let cpu_start = cpu_seconds();
    let steal_start = steal_seconds();
    let wall_start = Instant::now();
    let per_call: Vec<Vec<(Instant, Duration)>> = calls.into_iter().map(|c| c.join().unwrap()).collect();
    print_late_frames(&per_call, wall_start);
    let frames: Vec<(Instant, Duration)> = per_call.into_iter().flatten().collect();
    let wall = wall_start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let (real_time, stalls) = watch.finish();
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    // The watchdog outranks every thread here: when it was held off, so was everything, and a frame is
    // judged by the time it lost to the load, its lateness less the machine's stalls in the meantime.
    let stalls = if real_time { stalls } else { Vec::new() };
    let longest_stall = stalls.iter().map(|s| s.length).max().unwrap_or_default();
    let own: Vec<Duration> =
        frames.iter().map(|(due, latency)| latency.saturating_sub(stalled_during(&stalls, *due, *latency))).collect();
    let late_own = own.iter().filter(|l| **l > Duration::from_millis(40)).count();
    let worst_own = own.iter().max().copied().unwrap_or_default().as_secs_f64() * 1_000.0;
    let mut latencies: Vec<Duration> = frames.iter().map(|(_, latency)| *latency).collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1_000.0;
    let late = latencies.iter().filter(|l| **l > Duration::from_millis(40)).count();
    let missed = RuntimeCounters::get(&runtime.counters.missed_deadlines);
    let refused = RuntimeCounters::get(&runtime.counters.vad_queue_full);
    let verdicts = RuntimeCounters::get(&runtime.counters.turn_verdicts);
    let stale = RuntimeCounters::get(&runtime.counters.turn_stale);
    let line = format!(
        "streams {streams:3}: late frames {late:5} of {:6}, frame latency p50 {:5.2} / p99 {:6.2} / max {:6.2} ms, \
         media ticks over 20 ms {missed:3}, VAD refused {refused}, turn verdicts {verdicts} (stale {stale}), CPU {:.2} ms per stream-second ({:.1} streams per core); \
         machine stalls{} {}, longest {:.1} ms, host steal {:.0} ms; less the stalls: late frames {late_own}, max {worst_own:.2} ms",
        latencies.len(),
        at(0.5),
        at(0.99),
        at(1.0),
        1_000.0 * cpu / (streams as f64 * wall),
        1.0 / (cpu / (streams as f64 * wall)),
        if real_time { "" } else { " (watchdog not real-time)" },
        stalls.len(),
        longest_stall.as_secs_f64() * 1_000.0,
        (steal_seconds() - steal_start) * 1_000.0,
    );
    let on_time = late_own * 1_000 <= latencies.len() && worst_own <= 80.0;
    Outcome { passed: on_time && missed == 0 && refused == 0, line }
}

fn main() {
    let voice = Arc::new(espeak(
        "Hello there, I can help you book a table for dinner tonight at seven. Would you like a window seat, \
         or somewhere quieter near the back of the room?",
        165,
    ));
    let mut user = espeak("I would like to know when the next train to the airport leaves", 170);
    user.truncate(32_000);
    user.resize(16_000 * 6, 0.0);
    let benchmarking = std::env::args().any(|a| a == "--bench");
    if !benchmarking {
        println!("avatar density smoke: {}", run(2, 1, &voice, &user).line);
        return;
    }
    let custom = std::env::args().find_map(|a| a.strip_prefix("--custom=").map(str::to_string)).map(|picture| {
        let mut builder = AvatarBuilder::load(&confab_models::default_models_dir()).expect("run `confab models fetch`");
        let rigged = builder.build(&std::fs::read(&picture).expect("the picture"), 512).expect("a usable face");
        println!("every call wears {picture} (rigged from {:?})", rigged.source);
        (rigged.portrait, rigged.rig)
    });
    CUSTOM.set(custom).expect("set once");
    let asked: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let tries = if asked.is_empty() { vec![10, 20, 26, 30, 34, 38, 42, 46, 50] } else { asked };
    let mut best = 0;
    for streams in tries {
        let outcome = run(streams, 20, &voice, &user);
        println!("{} {}", if outcome.passed { "PASS" } else { "FAIL" }, outcome.line);
        if !outcome.passed {
            break;
        }
        best = streams;
    }
    let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
    println!("largest N with frames on time: {best} on {cores} cores ({:.1} per core)", best as f64 / cores as f64);
}
