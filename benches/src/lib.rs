//! Criterion benchmarks of Confab's hot paths; the benchmarks live in `benches/`. This library holds
//! what several of them share: real speech from espeak-ng and the process's CPU time.

use std::process::Command;

use confab_engine::audio::wav;

/// `text` spoken by espeak-ng (`en-us`, `words_per_minute`), as 16 kHz mono.
pub fn espeak(text: &str, words_per_minute: u32) -> Vec<f32> {
    let path = std::env::temp_dir().join(format!("confab-bench-{}-{words_per_minute}.wav", std::process::id()));
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", &words_per_minute.to_string(), "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng (scripts/setup.sh installs it)");
    assert!(status.success(), "espeak-ng failed");
    let audio = wav::read_mono_16k(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    audio
}

/// CPU time (user + system) this process has used, in seconds.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}
