//! Fixtures shared by the engine's integration tests: speech generated with espeak-ng at the project's
//! fixture rate (TESTING.md), as 16 kHz mono, and the pictures of `scripts/fixtures.sh`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use confab_engine::audio::wav;

pub mod stepped_call;

/// espeak-ng's words per minute for fixtures.
pub const FIXTURE_RATE: &str = "160";

/// `text` spoken by espeak-ng (en-us), resampled to 16 kHz mono.
#[allow(dead_code)] // not every test that shares this module speaks
pub fn speak(text: &str) -> Vec<f32> {
    speak_as("en-us", text)
}

/// `text` spoken by espeak-ng in `voice` (e.g. `en-gb+m3`), resampled to 16 kHz mono.
#[allow(dead_code)] // not every test that shares this module speaks
pub fn speak_as(voice: &str, text: &str) -> Vec<f32> {
    speak_at(voice, FIXTURE_RATE, text)
}

/// `text` spoken by espeak-ng in `voice` at `words_per_minute`, resampled to 16 kHz mono.
#[allow(dead_code)] // not every test that shares this module speaks
pub fn speak_at(voice: &str, words_per_minute: &str, text: &str) -> Vec<f32> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "confab-fixture-{}-{}.wav",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-s", words_per_minute, "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng is installed (scripts/setup.sh)");
    assert!(status.success(), "espeak-ng failed on {text:?}");
    let audio = wav::read_mono_16k(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    audio
}

/// `samples` of steady noise at 16 kHz and `rms`: sox's pink and brown noise summed at equal power (a fan
/// and a street), in sox's repeatable mode (the same noise every run).
#[allow(dead_code)] // for the tests of hearing in noise
pub fn steady_noise(samples: usize, rms: f32) -> Vec<f32> {
    let colours: Vec<Vec<f32>> = ["pinknoise", "brownnoise"]
        .iter()
        .map(|colour| {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "confab-noise-{}-{}-{colour}.wav",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let seconds = format!("{:.3}", samples as f64 / 16_000.0 + 0.1);
            let status = Command::new("sox")
                .args(["-R", "-n", "-r", "16000", "-c", "1", "-b", "16"])
                .arg(&path)
                .args(["synth", &seconds, colour])
                .status()
                .expect("sox is installed (scripts/setup.sh)");
            assert!(status.success(), "sox failed");
            let noise = wav::read_mono_16k(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            let own = (noise.iter().map(|s| s * s).sum::<f32>() / noise.len() as f32).sqrt();
            noise.iter().map(|s| s * rms / own).collect()
        })
        .collect();
    (0..samples).map(|i| (colours[0][i] + colours[1][i]) / 2f32.sqrt()).collect()
}

/// The bytes of a picture fixture (`scripts/fixtures.sh`, in `CONFAB_FIXTURES_DIR` or
/// `~/.cache/confab/fixtures`).
#[allow(dead_code)] // not every test that shares this module reads pictures
pub fn fixture(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("CONFAB_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/confab/fixtures"));
    let path = dir.join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}; run ./scripts/fixtures.sh", path.display()))
}

/// Calls `each` with the sample range of every 20 ms frame of `samples` samples, at the pace a transport
/// feeds a live runtime (frame `i` is due 20·(i+1) ms after the first); stops when `each` returns false.
#[allow(dead_code)] // for the tests that run the runtime in real time
pub fn in_real_time(samples: usize, mut each: impl FnMut(std::ops::Range<usize>) -> bool) {
    let start = std::time::Instant::now();
    for (i, from) in (0..samples).step_by(320).enumerate() {
        if !each(from..(from + 320).min(samples)) {
            return;
        }
        let due = start + std::time::Duration::from_millis(20 * (i as u64 + 1));
        if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}
