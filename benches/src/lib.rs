//! Criterion benchmarks of Confab's hot paths; the benchmarks live in `benches/`. This library holds
//! what several of them share: real speech from espeak-ng, the process's CPU time, the users' side of
//! engine sessions, and the control plane's router on a database.

use std::process::Command;

use confab_engine::audio::opus_egress::FRAME_16K;
use confab_engine::audio::wav;
use confab_engine::events::ConversationEvent;
use confab_engine::runtime::SessionHandle;
pub use confab_engine::word_error::word_errors;

pub mod answering;
pub mod fake_providers;
pub mod stall_watch;

/// `text` spoken by espeak-ng (`en-us`, `words_per_minute`), as 16 kHz mono.
pub fn espeak(text: &str, words_per_minute: u32) -> Vec<f32> {
    espeak_as("en-us", text, words_per_minute)
}

/// `text` spoken by espeak-ng in `voice` (e.g. `en-gb+f3`), as 16 kHz mono.
pub fn espeak_as(voice: &str, text: &str, words_per_minute: u32) -> Vec<f32> {
    let path = std::env::temp_dir().join(format!("confab-bench-{}-{words_per_minute}.wav", std::process::id()));
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-s", &words_per_minute.to_string(), "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng (scripts/setup.sh installs it)");
    assert!(status.success(), "espeak-ng failed");
    let audio = wav::read_mono_16k(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    audio
}

/// `samples` of steady noise at 16 kHz, unit RMS: sox's pink and brown noise summed at equal power (a fan
/// and a street), in sox's repeatable mode (the same noise every run).
pub fn steady_noise(samples: usize) -> Vec<f32> {
    let seconds = format!("{:.3}", samples as f64 / 16_000.0 + 0.1);
    let colours: Vec<Vec<f32>> = ["pinknoise", "brownnoise"]
        .iter()
        .map(|colour| {
            let path = std::env::temp_dir().join(format!("confab-bench-{}-{colour}.wav", std::process::id()));
            let status = Command::new("sox")
                .args(["-R", "-n", "-r", "16000", "-c", "1", "-b", "16"])
                .arg(&path)
                .args(["synth", &seconds, colour])
                .status()
                .expect("sox (scripts/setup.sh installs it)");
            assert!(status.success(), "sox failed");
            let noise = wav::read_mono_16k(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            let rms = (noise.iter().map(|s| s * s).sum::<f32>() / noise.len() as f32).sqrt();
            noise.iter().map(|s| s / rms).collect()
        })
        .collect();
    (0..samples).map(|i| (colours[0][i] + colours[1][i]) / 2f32.sqrt()).collect()
}

/// This process's resident memory, in bytes.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// CPU time (user + system) this process has used, in seconds.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// CPU time the host took from this virtual machine so far (the `steal` column of /proc/stat), in seconds;
/// 0 where the kernel does not report it.
pub fn steal_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().find(|line| line.starts_with("cpu ")).unwrap_or_default();
    cpu.split_whitespace().nth(8).and_then(|ticks| ticks.parse::<f64>().ok()).unwrap_or(0.0) / 100.0
}

/// Where each of `sessions` users starts in a looped `speech` clip of `len` samples (staggered so they
/// do not all speak at once).
pub fn user_offsets(sessions: usize, len: usize) -> Vec<usize> {
    (0..sessions).map(|i| (i * 7919 * 320) % len).collect()
}

/// The users' side of one 20 ms tick, as a transport would play it: each session hears its next 20 ms of
/// `speech` (looped, from its offset in `offsets`) through its input ring, and the agent's output and
/// events are drained.
pub fn play_users_tick(handles: &mut [SessionHandle], speech: &[f32], offsets: &[usize], tick: usize) {
    play_users_tick_observed(handles, speech, offsets, tick, |_, _| {});
}

/// `play_users_tick`, handing each session's events (by index in `handles`) to `observe`.
pub fn play_users_tick_observed(
    handles: &mut [SessionHandle],
    speech: &[f32],
    offsets: &[usize],
    tick: usize,
    mut observe: impl FnMut(usize, ConversationEvent),
) {
    let mut drain = [0.0f32; FRAME_16K];
    for (index, (handle, offset)) in handles.iter_mut().zip(offsets).enumerate() {
        let at = (offset + tick * FRAME_16K) % speech.len();
        if let Ok(mut chunk) = handle.input.write_chunk_uninit(FRAME_16K) {
            let (a, b) = chunk.as_mut_slices();
            for (i, slot) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                slot.write(speech[(at + i) % speech.len()]);
            }
            // SAFETY: every slot of the chunk was written just above.
            unsafe { chunk.commit_all() };
        }
        while let Ok(chunk) = handle.output.read_chunk(handle.output.slots().min(FRAME_16K)) {
            if chunk.is_empty() {
                break;
            }
            let (a, _) = chunk.as_slices();
            drain[..a.len()].copy_from_slice(a);
            chunk.commit_all();
        }
        while let Ok(event) = handle.events.try_recv() {
            observe(index, event);
        }
    }
    std::hint::black_box(&drain);
}

/// The control plane's router on `db` (driven without a socket) and a new API key.
pub async fn api_router(db: &confab_store::Db) -> (axum::Router, String) {
    let (router, key, _) = api_router_with_state(db).await;
    (router, key)
}

/// As `api_router`, with the server state (to reach its caches).
pub async fn api_router_with_state(db: &confab_store::Db) -> (axum::Router, String, confab_http::AppState) {
    let config = confab_http::AppConfig {
        public_url: "http://bench".into(),
        recordings_dir: "recordings".into(),
        models_dir: confab_models::default_models_dir(),
    };
    let state = confab_http::AppState::new(db.clone(), config).await.expect("the bench database opens");
    let (_, key) = confab_store::api_keys::create_key(db, "bench").await.expect("a key is created");
    (confab_http::app(state.clone()), key, state)
}

/// POSTs `body` as JSON to `path` on `router` with the API key; the answer's JSON.
pub async fn api_post(router: &axum::Router, key: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    use tower::ServiceExt;
    let request = axum::http::Request::post(path)
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .expect("a valid request");
    let response = router.clone().oneshot(request).await.expect("the router answers");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("a whole body");
    serde_json::from_slice(&bytes).expect("a JSON answer")
}

/// The `p` quantile (0–1) of `sorted` durations, nearest rank.
pub fn percentile(sorted: &[std::time::Duration], p: f64) -> std::time::Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
