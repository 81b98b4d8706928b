//! Turns Moonshine's `.ort` files into `.onnx` at fetch time, for speed.
//!
//! The `.ort` files keep their weights as int8 with a scale, and ONNX Runtime does not optimise a model in
//! its own format any further: every decoder step dequantised all the weights again (Cast and Mul were two
//! thirds of a step, 32 ms of it). Saved as ONNX, the dequantisation is folded into the weights when the
//! session is created, and a step takes 6 ms. ONNX Runtime writes the ONNX file itself (loading the `.ort`
//! with an optimised-model path, basic optimisations only); its If node's branch graphs come out without
//! names, which the ONNX checker refuses, so `onnx` (pinned, in a private virtual environment) names them.
//! Each converted model is checked against the `.ort` one on a fixed input before it is stored.

use std::path::Path;
use std::process::Command;

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use super::MoonshineStt;
use crate::onnx::environment;
use crate::paths::{MOONSHINE_DECODER, MOONSHINE_DECODER_ONNX, MOONSHINE_ENCODER, MOONSHINE_ENCODER_ONNX};
use crate::python_tools::{ONNX_TOOLS, run, with_python};

const NAME_SUBGRAPHS: &str = r#"import sys, onnx
model = onnx.load(sys.argv[1])
def name(graph, path):
    if not graph.name:
        graph.name = path
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                name(attribute.g, path + "/" + (node.name or node.op_type) + "/" + attribute.name)
            for i, sub in enumerate(attribute.graphs):
                name(sub, path + "/" + (node.name or node.op_type) + "/" + attribute.name + str(i))
name(model.graph, "main")
onnx.save(model, sys.argv[2])
"#;

/// The fetch step: converts the encoder and the decoder and stores them once checked.
pub fn convert(dir: &Path) -> Result<(), String> {
    with_python(dir, "onnx", ONNX_TOOLS, |python, tools| convert_with(dir, python, tools))
}

fn convert_with(dir: &Path, python: &Path, tools: &Path) -> Result<(), String> {
    let converted = [(MOONSHINE_ENCODER, MOONSHINE_ENCODER_ONNX), (MOONSHINE_DECODER, MOONSHINE_DECODER_ONNX)];
    let partial = |onnx_file: &str| format!("{onnx_file}.partial");
    for (ort_file, onnx_file) in converted {
        let unnamed = tools.join("unnamed.onnx");
        save_as_onnx(dir, ort_file, &unnamed)?;
        let named = dir.join(partial(onnx_file));
        run(Command::new(python).arg("-c").arg(NAME_SUBGRAPHS).arg(&unnamed).arg(&named), "onnx")?;
    }
    let checked = check(dir, &partial(MOONSHINE_ENCODER_ONNX), &partial(MOONSHINE_DECODER_ONNX));
    for (_, onnx_file) in converted {
        if checked.is_ok() {
            std::fs::rename(dir.join(partial(onnx_file)), dir.join(onnx_file))
                .map_err(|err| format!("cannot store {onnx_file}: {err}"))?;
        } else {
            let _ = std::fs::remove_file(dir.join(partial(onnx_file)));
        }
    }
    checked.map_err(|message| format!("the converted Moonshine model does not match the .ort one: {message}"))
}

/// ONNX Runtime loads `ort_file` and writes it out as ONNX to `out`.
fn save_as_onnx(dir: &Path, ort_file: &str, out: &Path) -> Result<(), String> {
    let environment = environment(dir).map_err(|e| e.to_string())?;
    let fail = |e: ort::Error| format!("{ort_file}: {e}");
    Session::builder(environment)
        .map_err(fail)?
        .with_optimization_level(GraphOptimizationLevel::Level1)
        .map_err(|e| fail(e.into()))?
        .with_optimized_model_path(out)
        .map_err(|e| fail(e.into()))?
        .commit_from_file(dir.join(ort_file))
        .map_err(fail)?;
    if out.is_file() { Ok(()) } else { Err(format!("{ort_file}: ONNX Runtime wrote no ONNX file")) }
}

/// One second of a fixed pattern, speech-like in level.
fn pattern() -> Vec<f32> {
    (0..16_000).map(|n| ((n as f64 * 0.037).sin() * 0.3 + (n as f64 * 0.0011).cos() * 0.1) as f32).collect()
}

/// The converted pair gives the `.ort` pair's first-step logits on the pattern (within 0.1% of the
/// largest).
fn check(dir: &Path, encoder: &str, decoder: &str) -> Result<(), String> {
    let audio = pattern();
    let logits = |encoder: &str, decoder: &str| {
        MoonshineStt::load_files(dir, encoder, decoder, 1).and_then(|mut m| m.first_logits(&audio))
    };
    let want = logits(MOONSHINE_ENCODER, MOONSHINE_DECODER).map_err(|e| e.to_string())?;
    let got = logits(encoder, decoder).map_err(|e| e.to_string())?;
    if want.len() != got.len() || want.is_empty() {
        return Err(format!("{} logits, expected {}", got.len(), want.len()));
    }
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    let worst = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    if worst > scale * 1e-3 {
        return Err(format!("logits differ by up to {worst} (largest {scale})"));
    }
    Ok(())
}
