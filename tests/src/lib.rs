//! End-to-end tests that run the real `confab` binary (the tests live in `tests/`); this library holds
//! what they share: finding the binary, running `confab simulate`, reading what it wrote.

use std::ffi::OsStr;
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

/// Runs `confab simulate` (asserting success) with extra environment; returns the event lines as JSON
/// (the `turn_metrics` lines left out: `simulate_lines` has them).
pub fn simulate(agent: &Path, input: &Path, out: &Path, env: &[(&str, &str)]) -> Vec<Value> {
    simulate_lines(agent, input, out, env).into_iter().filter(|line| line["type"] == "pipeline").collect()
}

/// Runs `confab simulate` (asserting success) with extra environment; returns every stdout line as JSON.
pub fn simulate_lines(agent: &Path, input: &Path, out: &Path, env: &[(&str, &str)]) -> Vec<Value> {
    let args = [OsStr::new("--agent"), agent.as_os_str(), OsStr::new("--out"), out.as_os_str()];
    simulate_with(&args, input, env).0
}

/// Runs `confab simulate ARGS --input INPUT` (asserting success) with extra environment; returns every
/// stdout line as JSON, and stderr.
pub fn simulate_with(args: &[&OsStr], input: &Path, env: &[(&str, &str)]) -> (Vec<Value>, String) {
    let output = Command::new(confab_bin())
        .arg("simulate")
        .args(args)
        .arg("--input")
        .arg(input)
        .envs(env.iter().copied())
        .output()
        .expect("confab runs");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    let lines = String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    (lines, stderr)
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

pub mod browser;
pub mod caller;
pub mod fake_meeting;
pub mod fleet;
pub mod netns;
pub mod private_postgres;
pub mod receiver;
pub mod server;
pub mod sound;

/// Verifies a Standard Webhooks signature independently of the server's code: `v1,<base64 HMAC-SHA256 of
/// "id.timestamp.body">` keyed with the base64 bytes after `whsec_`.
pub fn webhook_signature_is_valid(secret: &str, id: &str, timestamp: &str, signature: &str, body: &[u8]) -> bool {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let engine = base64::engine::general_purpose::STANDARD;
    let Ok(key) = engine.decode(secret.trim_start_matches("whsec_")) else { return false };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", engine.encode(mac.finalize().into_bytes()));
    signature.split(' ').any(|candidate| candidate == expected)
}

/// Writes `text` spoken by espeak-ng (22,050 Hz mono WAV) between `before` and `after` seconds of
/// silence.
/// `seconds` of silence as a 16 kHz mono WAV.
pub fn silent_wav(path: &Path, seconds: f32) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec).unwrap();
    for _ in 0..(seconds * 16_000.0) as usize {
        writer.write_sample(0i16).unwrap();
    }
    writer.finalize().unwrap();
}

/// The words of `text`, lowercase, punctuation aside (to compare what was heard with what was said).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

pub fn spoken_wav(path: &Path, text: &str, before: f32, after: f32) {
    spoken_wav_as(path, ("en-us", "150"), text, before, after);
}

/// As `spoken_wav`, in an espeak-ng `(voice, words per minute)` (e.g. `("en-us+f2", "170")`).
pub fn spoken_wav_as(path: &Path, (voice, words_per_minute): (&str, &str), text: &str, before: f32, after: f32) {
    let speech = path.with_extension("speech.wav");
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-s", words_per_minute, "-w"])
        .arg(&speech)
        .arg(text)
        .status()
        .expect("espeak-ng is installed (scripts/setup.sh)");
    assert!(status.success());
    let mut reader = hound::WavReader::open(&speech).unwrap();
    let spec = reader.spec();
    let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
    let mut writer = hound::WavWriter::create(path, spec).unwrap();
    let silence = |seconds: f32| (seconds * spec.sample_rate as f32) as usize;
    for _ in 0..silence(before) {
        writer.write_sample(0i16).unwrap();
    }
    for sample in samples {
        writer.write_sample(sample).unwrap();
    }
    for _ in 0..silence(after) {
        writer.write_sample(0i16).unwrap();
    }
    writer.finalize().unwrap();
    let _ = std::fs::remove_file(speech);
}

/// The streams of a media file as ffprobe reads them, with packets counted (`nb_read_packets`).
pub fn ffprobe_streams(path: &Path) -> Vec<Value> {
    let output = Command::new("ffprobe")
        .args(["-v", "error", "-count_packets", "-of", "json", "-show_entries"])
        .arg("stream=codec_name,codec_type,width,height,nb_read_packets")
        .arg(path)
        .output()
        .expect("ffprobe is installed (scripts/setup.sh)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let probed: Value = serde_json::from_slice(&output.stdout).unwrap();
    probed["streams"].as_array().unwrap().clone()
}

/// The loudest sample of a media file's audio, decoded by ffmpeg (16-bit).
pub fn peak_of_audio(path: &Path) -> u16 {
    let output = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-vn", "-f", "s16le", "-ac", "1", "-"])
        .output()
        .expect("ffmpeg is installed (scripts/setup.sh)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    output.stdout.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]]).unsigned_abs()).max().unwrap_or(0)
}

/// A scratch directory for one test, emptied first: `<tmp>/confab-<name>-<pid>`, with a `data` directory in it.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    dir
}
