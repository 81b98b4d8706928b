//! Piper voices through ONNX Runtime: text → espeak-ng IPA phonemes → the voice's phoneme ids → audio at
//! the voice's rate (22.05 kHz for the medium voices).
//!
//! Phonemes come from the `espeak-ng` program (`--ipa`, one line per clause). Piper's own phonemizer
//! keeps each clause's punctuation; here it is put back from the text, in order, so pauses and
//! intonation marks reach the model.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use ort::session::Session;
use ort::value::TensorRef;
use serde_json::Value;

use crate::busy::Busy;
use crate::paths::{PIPER_JOE, PIPER_JOE_CONFIG};
use crate::{ModelError, onnx, require};

const CLAUSE_PUNCTUATION: &[char] = &[',', '.', ';', ':', '!', '?'];

pub struct PiperVoice {
    session: Session,
    phoneme_ids: HashMap<char, i64>,
    pub sample_rate: u32,
    espeak_voice: String,
    scales: [f32; 3],
    /// The session's operator threads.
    threads: usize,
}

fn fail(message: impl Into<String>) -> ModelError {
    ModelError::Inference { model: "piper", message: message.into() }
}

impl PiperVoice {
    /// The en_US joe voice from the models directory.
    pub fn load_joe(models_dir: &Path, intra_threads: usize) -> Result<PiperVoice, ModelError> {
        let config_path = require(models_dir, PIPER_JOE_CONFIG)?;
        let config: Value =
            serde_json::from_str(&std::fs::read_to_string(&config_path).map_err(|e| fail(e.to_string()))?)
                .map_err(|e| fail(format!("bad voice config: {e}")))?;
        let mut phoneme_ids = HashMap::new();
        for (symbol, ids) in config["phoneme_id_map"].as_object().ok_or_else(|| fail("no phoneme_id_map"))? {
            if let (Some(ch), Some(id)) = (symbol.chars().next(), ids[0].as_i64())
                && symbol.chars().count() == 1
            {
                phoneme_ids.insert(ch, id);
            }
        }
        let inference = &config["inference"];
        Ok(PiperVoice {
            session: onnx::load_session(models_dir, PIPER_JOE, intra_threads)?,
            phoneme_ids,
            sample_rate: config["audio"]["sample_rate"].as_u64().unwrap_or(22_050) as u32,
            espeak_voice: config["espeak"]["voice"].as_str().unwrap_or("en-us").to_string(),
            scales: [
                inference["noise_scale"].as_f64().unwrap_or(0.667) as f32,
                inference["length_scale"].as_f64().unwrap_or(1.0) as f32,
                inference["noise_w"].as_f64().unwrap_or(0.8) as f32,
            ],
            threads: intra_threads,
        })
    }

    /// IPA phonemes of `text`, clause punctuation restored.
    pub fn phonemize(&self, text: &str) -> Result<String, ModelError> {
        let output = Command::new("espeak-ng")
            .args(["-q", "--ipa", "-v", &self.espeak_voice, "--"])
            .arg(text)
            .output()
            .map_err(|e| fail(format!("cannot run espeak-ng ({e}); install it (scripts/setup.sh)")))?;
        if !output.status.success() {
            return Err(fail(String::from_utf8_lossy(&output.stderr).trim().to_string()));
        }
        let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        let mut marks = text.chars().filter(|c| CLAUSE_PUNCTUATION.contains(c));
        let mut phonemes = String::new();
        for line in lines {
            if !phonemes.is_empty() {
                phonemes.push(' ');
            }
            phonemes.push_str(&line);
            if let Some(mark) = marks.next() {
                phonemes.push(mark);
            }
        }
        Ok(phonemes)
    }

    /// Piper's id sequence: `^`, then each known phoneme followed by the pad `_`, then `$`.
    pub fn phoneme_ids(&self, phonemes: &str) -> Vec<i64> {
        let pad = self.phoneme_ids.get(&'_').copied().unwrap_or(0);
        let mut ids = vec![self.phoneme_ids.get(&'^').copied().unwrap_or(1), pad];
        for ch in phonemes.chars() {
            if let Some(id) = self.phoneme_ids.get(&ch) {
                ids.push(*id);
                ids.push(pad);
            }
        }
        ids.push(self.phoneme_ids.get(&'$').copied().unwrap_or(2));
        ids
    }

    /// Speaks `text`; returns mono audio at `sample_rate`.
    pub fn synthesize(&mut self, text: &str) -> Result<Vec<f32>, ModelError> {
        let _busy = Busy::start(self.threads);
        let ids = self.phoneme_ids(&self.phonemize(text)?);
        let lengths = [ids.len() as i64];
        let err = |e: ort::Error| fail(e.to_string());
        let input = TensorRef::from_array_view(([1usize, ids.len()], &ids[..])).map_err(err)?;
        let input_lengths = TensorRef::from_array_view(([1usize], &lengths[..])).map_err(err)?;
        let scales = TensorRef::from_array_view(([3usize], &self.scales[..])).map_err(err)?;
        let outputs = self
            .session
            .run(ort::inputs!["input" => input, "input_lengths" => input_lengths, "scales" => scales])
            .map_err(err)?;
        let (_, audio) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
        Ok(audio.to_vec())
    }
}
