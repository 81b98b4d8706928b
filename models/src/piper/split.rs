//! Splits a Piper voice at fetch time into its encoder (phoneme ids → latent frames) and its decoder
//! (latent frames → audio), so that a sentence's audio can be decoded in pieces (`PiperVoice::speak`).
//!
//! Piper's graph (VITS) ends in the decoder, the nodes named `/dec/…`, which read one tensor from the rest:
//! the latent frames after the flow, masked. The script finds that tensor (refusing a graph where the
//! decoder reads none or several) and extracts both halves with `onnx.utils.extract_model` (pinned, in a
//! private virtual environment). The halves are then checked against the whole: one sentence spoken
//! without noise (noise scales 0: the same every run) by the whole model and by the halves, the latter
//! decoded in pieces exactly as calls speak, must give the same samples.

use std::path::Path;
use std::process::Command;

use ort::value::TensorRef;

use super::PiperVoice;
use crate::onnx;
use crate::paths::{PIPER_JOE, PIPER_JOE_DECODER, PIPER_JOE_ENCODER};
use crate::python_tools::{ONNX_TOOLS, run, with_python};

/// Largest difference allowed between a sample spoken by the halves and by the whole (samples are in ±1).
pub const TOLERANCE: f32 = 1e-3;

/// A sentence long enough for several pieces.
const CHECKED_SENTENCE: &str = "The largest planet in our solar system is Jupiter, the fifth planet from the Sun.";

const SPLIT_GRAPH: &str = r#"import sys, onnx, onnx.utils
whole, encoder, decoder = sys.argv[1:4]
graph = onnx.load(whole).graph
initializers = {init.name for init in graph.initializer}
decoder_nodes = [node for node in graph.node if node.name.startswith("/dec/")]
made_inside = {name for node in decoder_nodes for name in node.output}
read = sorted({name for node in decoder_nodes for name in node.input
               if name and name not in made_inside and name not in initializers})
if len(read) != 1:
    sys.exit(f"the decoder reads {len(read)} tensors from the rest of the graph ({read}), expected one")
inputs = [i.name for i in graph.input]
outputs = [o.name for o in graph.output]
onnx.utils.extract_model(whole, encoder, inputs, read)
onnx.utils.extract_model(whole, decoder, read, outputs)
"#;

/// The fetch step: splits the voice, checks the halves against it, stores them.
pub fn prepare(dir: &Path) -> Result<(), String> {
    with_python(dir, "onnx", ONNX_TOOLS, |python, _| prepare_with(dir, python))
}

fn prepare_with(dir: &Path, python: &Path) -> Result<(), String> {
    let partial = [format!("{PIPER_JOE_ENCODER}.partial"), format!("{PIPER_JOE_DECODER}.partial")];
    let split = run(
        Command::new(python)
            .arg("-c")
            .arg(SPLIT_GRAPH)
            .arg(dir.join(PIPER_JOE))
            .arg(dir.join(&partial[0]))
            .arg(dir.join(&partial[1])),
        "the Piper graph split",
    );
    let checked = split.and_then(|()| largest_difference(dir, [&partial[0], &partial[1]])).and_then(|worst| {
        if worst <= TOLERANCE {
            Ok(())
        } else {
            Err(format!("the split Piper voice differs from the whole by {worst} (at most {TOLERANCE})"))
        }
    });
    let stored = checked.and_then(|()| {
        for (from, to) in partial.iter().zip([PIPER_JOE_ENCODER, PIPER_JOE_DECODER]) {
            std::fs::rename(dir.join(from), dir.join(to)).map_err(|err| format!("cannot store {to}: {err}"))?;
        }
        Ok(())
    });
    if stored.is_err() {
        for file in &partial {
            let _ = std::fs::remove_file(dir.join(file));
        }
    }
    stored
}

/// The largest difference between [`CHECKED_SENTENCE`] spoken without noise by the halves `halves`
/// (decoded in pieces) and by the whole voice.
fn largest_difference(dir: &Path, halves: [&str; 2]) -> Result<f32, String> {
    let mut voice = PiperVoice::load_files(dir, halves, 1).map_err(|e| e.to_string())?;
    voice.scales[0] = 0.0;
    voice.scales[2] = 0.0;
    let ids = voice.phoneme_ids(&voice.phonemize(CHECKED_SENTENCE).map_err(|e| e.to_string())?);
    let mut pieces = 0;
    let mut split = Vec::new();
    voice
        .speak(CHECKED_SENTENCE, &mut |piece| {
            pieces += 1;
            split.extend_from_slice(piece);
            true
        })
        .map_err(|e| e.to_string())?;
    if pieces < 3 {
        return Err(format!("the check sentence was spoken in {pieces} pieces; it should take several"));
    }
    let whole = speak_whole(dir, &ids, voice.scales)?;
    if whole.len() != split.len() {
        return Err(format!("the halves spoke {} samples, the whole voice {}", split.len(), whole.len()));
    }
    Ok(whole.iter().zip(&split).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max))
}

/// `ids` spoken by the whole voice as the package ships it.
fn speak_whole(dir: &Path, ids: &[i64], scales: [f32; 3]) -> Result<Vec<f32>, String> {
    let mut session = onnx::load_session(dir, PIPER_JOE, 1).map_err(|e| e.to_string())?;
    let lengths = [ids.len() as i64];
    let input = TensorRef::from_array_view(([1usize, ids.len()], ids)).map_err(|e| e.to_string())?;
    let input_lengths = TensorRef::from_array_view(([1usize], &lengths[..])).map_err(|e| e.to_string())?;
    let scales = TensorRef::from_array_view(([3usize], &scales[..])).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs!["input" => input, "input_lengths" => input_lengths, "scales" => scales])
        .map_err(|e| e.to_string())?;
    let (_, audio) = outputs[0].try_extract_tensor::<f32>().map_err(|e| e.to_string())?;
    Ok(audio.to_vec())
}
