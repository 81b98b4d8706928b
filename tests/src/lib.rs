//! End-to-end tests that run the real `confab` binary (the tests live in `tests/`); this library holds
//! what they share: finding the binary, running `confab simulate`, reading what it wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The `confab` binary next to the test executable (cargo builds it for the workspace's tests), or
/// `CONFAB_BIN`.
pub fn confab_bin() -> PathBuf {
    if let Ok(path) = std::env::var("CONFAB_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable has a path");
    let path = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps").join("confab");
    assert!(path.exists(), "{} is missing: run `cargo build --bin confab` or `cargo test --workspace`", path.display());
    path
}

/// Runs `confab simulate` (asserting success) with extra environment; returns the event lines as JSON.
pub fn simulate(agent: &Path, input: &Path, out: &Path, env: &[(&str, &str)]) -> Vec<Value> {
    let output = Command::new(confab_bin())
        .args(["simulate", "--agent"])
        .arg(agent)
        .arg("--input")
        .arg(input)
        .arg("--out")
        .arg(out)
        .envs(env.iter().copied())
        .output()
        .expect("confab runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

/// `agent.wav` as floats.
pub fn agent_audio(out: &Path) -> Vec<f32> {
    let mut reader = hound::WavReader::open(out.join("agent.wav")).expect("agent.wav is a WAV file");
    reader.samples::<i16>().map(|s| f32::from(s.expect("a sample")) / 32_768.0).collect()
}

/// Root-mean-square level of `audio` between two media times (seconds, 16 kHz).
pub fn rms_between(audio: &[f32], from: f64, to: f64) -> f32 {
    let span = &audio[(from * 16_000.0) as usize..((to * 16_000.0) as usize).min(audio.len())];
    (span.iter().map(|s| s * s).sum::<f32>() / span.len().max(1) as f32).sqrt()
}
