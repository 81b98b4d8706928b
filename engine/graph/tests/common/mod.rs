//! Fixtures shared by the engine's integration tests: speech generated with espeak-ng at the project's
//! fixture rate (TESTING.md), as 16 kHz mono, and the pictures of `scripts/fixtures.sh`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use confab_engine::audio::wav;

/// espeak-ng's words per minute for fixtures.
pub const FIXTURE_RATE: &str = "160";

/// `text` spoken by espeak-ng (en-us), resampled to 16 kHz mono.
#[allow(dead_code)] // not every test that shares this module speaks
pub fn speak(text: &str) -> Vec<f32> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "confab-fixture-{}-{}.wav",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", FIXTURE_RATE, "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng is installed (scripts/setup.sh)");
    assert!(status.success(), "espeak-ng failed on {text:?}");
    let audio = wav::read_mono_16k(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    audio
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
