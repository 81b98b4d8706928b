//! Fixtures shared by the engine's integration tests: speech generated with espeak-ng at the project's
//! fixture rate (TESTING.md), as 16 kHz mono.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use confab_engine::audio::wav;

/// espeak-ng's words per minute for fixtures.
pub const FIXTURE_RATE: &str = "160";

/// `text` spoken by espeak-ng (en-us), resampled to 16 kHz mono.
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
