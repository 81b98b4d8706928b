//! Piper voices through ONNX Runtime: text → espeak-ng IPA phonemes → the voice's phoneme ids → audio at
//! the voice's rate (22.05 kHz for the medium voices).
//!
//! Phonemes come from the `espeak-ng` program (`--ipa`, one line per clause). Piper's own phonemizer
//! keeps each clause's punctuation; here it is put back from the text, in order, so pauses and
//! intonation marks reach the model.
//!
//! The voice runs as the two halves `split` makes of it at fetch time: the encoder (text encoder,
//! durations, flow: a fixed cost per sentence) gives the sentence's latent frames at once, and the decoder
//! (three quarters of the time, growing with the audio) turns them into audio in pieces — a short first
//! one, so the first audio is out after a fraction of the whole sentence's time. Each piece is decoded
//! with [`CONTEXT_FRAMES`] of the frames around it and cut back to its own: the same samples as
//! decoding the sentence whole (the decoder's reach is under that; checked at fetch).

pub mod split;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use ort::session::Session;
use ort::value::TensorRef;
use serde_json::Value;

use crate::busy::Busy;
use crate::paths::{PIPER_JOE_CONFIG, PIPER_JOE_DECODER, PIPER_JOE_ENCODER};
use crate::{ModelError, onnx, require};

const CLAUSE_PUNCTUATION: &[char] = &[',', '.', ';', ':', '!', '?'];

/// Latent frames in the first piece of audio: 16 (0.19 s at 22.05 kHz, 256 samples a frame) — out
/// ~0.1 s sooner than the whole of a short sentence on two cores.
pub const FIRST_FRAMES: usize = 16;
/// Latent frames in each later piece (1.5 s): few pieces, little context decoded twice.
pub const LATER_FRAMES: usize = 128;
/// Frames decoded on each side of a piece and cut off: the decoder's reach (chunks with 8 differ by up to
/// 2e-3, with 12 by 1e-6, from the sentence decoded whole).
pub const CONTEXT_FRAMES: usize = 12;

pub struct PiperVoice {
    encoder: Session,
    decoder: Session,
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
        PiperVoice::load_files(models_dir, [PIPER_JOE_ENCODER, PIPER_JOE_DECODER], intra_threads)
    }

    /// The en_US joe voice whose encoder and decoder are `halves` (paths under the models directory).
    fn load_files(models_dir: &Path, halves: [&str; 2], intra_threads: usize) -> Result<PiperVoice, ModelError> {
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
            encoder: onnx::load_session(models_dir, halves[0], intra_threads)?,
            decoder: onnx::load_session(models_dir, halves[1], intra_threads)?,
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
        let mut audio = Vec::new();
        self.speak(text, &mut |piece| {
            audio.extend_from_slice(piece);
            true
        })?;
        Ok(audio)
    }

    /// Speaks `text`, handing `on_audio` each piece of audio (mono, at `sample_rate`) as it is decoded:
    /// [`FIRST_FRAMES`] first, then [`LATER_FRAMES`] at a time. Stops early when `on_audio` returns false.
    pub fn speak(&mut self, text: &str, on_audio: &mut dyn FnMut(&[f32]) -> bool) -> Result<(), ModelError> {
        let _busy = Busy::start(self.threads);
        let ids = self.phoneme_ids(&self.phonemize(text)?);
        let (frames, channels, latent) = self.encode(&ids)?;
        let mut start = 0;
        let mut size = FIRST_FRAMES;
        while start < frames {
            let end = (start + size).min(frames);
            let audio = self.decode(&latent, channels, frames, start..end)?;
            if !on_audio(&audio) {
                return Ok(());
            }
            (start, size) = (end, LATER_FRAMES);
        }
        Ok(())
    }

    /// The sentence's latent frames: (frames, channels, the values in [channel][frame] order).
    fn encode(&mut self, ids: &[i64]) -> Result<(usize, usize, Vec<f32>), ModelError> {
        let lengths = [ids.len() as i64];
        let err = |e: ort::Error| fail(e.to_string());
        let input = TensorRef::from_array_view(([1usize, ids.len()], ids)).map_err(err)?;
        let input_lengths = TensorRef::from_array_view(([1usize], &lengths[..])).map_err(err)?;
        let scales = TensorRef::from_array_view(([3usize], &self.scales[..])).map_err(err)?;
        let outputs = self
            .encoder
            .run(ort::inputs!["input" => input, "input_lengths" => input_lengths, "scales" => scales])
            .map_err(err)?;
        let (shape, latent) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
        let [1, channels, frames] = shape[..] else {
            return Err(fail(format!("the encoder gave latent frames shaped {shape:?}")));
        };
        Ok((frames as usize, channels as usize, latent.to_vec()))
    }

    /// The audio of latent frames `piece`, decoded with up to [`CONTEXT_FRAMES`] on each side.
    fn decode(
        &mut self,
        latent: &[f32],
        channels: usize,
        frames: usize,
        piece: std::ops::Range<usize>,
    ) -> Result<Vec<f32>, ModelError> {
        let from = piece.start.saturating_sub(CONTEXT_FRAMES);
        let to = (piece.end + CONTEXT_FRAMES).min(frames);
        let width = to - from;
        let mut window = Vec::with_capacity(channels * width);
        for channel in latent.chunks_exact(frames).take(channels) {
            window.extend_from_slice(&channel[from..to]);
        }
        let err = |e: ort::Error| fail(e.to_string());
        let input = TensorRef::from_array_view(([1usize, channels, width], &window[..])).map_err(err)?;
        let outputs = self.decoder.run(ort::inputs![input]).map_err(err)?;
        let (_, audio) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
        if audio.len() % width != 0 {
            return Err(fail(format!("the decoder gave {} samples for {width} frames", audio.len())));
        }
        let per_frame = audio.len() / width;
        Ok(audio[(piece.start - from) * per_frame..(piece.end - from) * per_frame].to_vec())
    }
}
