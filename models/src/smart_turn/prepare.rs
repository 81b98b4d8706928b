//! Makes a cheaper copy of Smart Turn v3.2 at fetch time, checked against the package's own file before
//! it is stored.
//!
//! The exported model writes each GELU as five element-wise operators (`x · (0.5 · (1 + erf(x / √2)))`),
//! in an order ONNX Runtime's GELU fusion does not recognise, so each ran as five passes over its tensor
//! (the two convolutions' 1,600 × 384 outputs, the four layers' 400 × 1,536 ones). The copy has one
//! `com.microsoft` `Gelu` for each (the same formula; ONNX Runtime then also folds each layer's bias into
//! it): ~10% less time per verdict, the same probabilities.
//!
//! Tried and refused: computing attention's softmax in float (dropping the quantize/dequantize pair that
//! ONNX Runtime turns into `QLinearSoftmax`, a quarter of the time) — it changes the model: a cut-off
//! sentence's probability of being finished went from 0.83 to 0.95.
//!
//! The edit is made by `onnx` (pinned, in a private virtual environment); the script refuses a graph
//! where it does not find exactly the expected patterns, so a changed package fails loudly here.

use std::path::Path;
use std::process::Command;

use super::SmartTurn;
use crate::paths::{SMART_TURN, SMART_TURN_PREPARED};
use crate::python_tools::{ONNX_TOOLS, run, with_python};

/// GELUs in Smart Turn v3.2: two convolutions, four encoder layers, the classifier's two.
const GELUS: usize = 8;

/// Largest difference in probability allowed between the prepared model and the original.
pub const TOLERANCE: f32 = 0.01;

const EDIT_GRAPH: &str = r#"import sys, onnx
from onnx import helper, numpy_helper
model = onnx.load(sys.argv[1])
want_gelu = int(sys.argv[3])
graph = model.graph
consumers = {}
for node in graph.node:
    for name in node.input:
        consumers.setdefault(name, []).append(node)
constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
def only(name, op):
    found = consumers.get(name, [])
    return found[0] if len(found) == 1 and found[0].op_type == op else None
def with_constant(node, name, value):
    other = [i for i in node.input if i != name]
    c = constants.get(other[0]) if len(other) == 1 else None
    return c is not None and c.size == 1 and abs(float(c.reshape(-1)[0]) - value) < 1e-6
dropped, added, gelus = set(), [], 0
for node in list(graph.node):
    if node.op_type == "Div":
        erf = only(node.output[0], "Erf")
        plus_one = erf and only(erf.output[0], "Add")
        half = plus_one and only(plus_one.output[0], "Mul")
        times_x = half and only(half.output[0], "Mul")
        x = node.input[0]
        if (times_x and x in times_x.input and with_constant(node, x, 2 ** 0.5)
                and with_constant(plus_one, erf.output[0], 1.0) and with_constant(half, plus_one.output[0], 0.5)):
            fused = helper.make_node("Gelu", [x], [times_x.output[0]], domain="com.microsoft",
                                     name=times_x.output[0] + "/gelu")
            added.append((times_x, fused))
            dropped.update(id(n) for n in (node, erf, plus_one, half, times_x))
            gelus += 1
if gelus != want_gelu:
    sys.exit(f"found {gelus} GELUs, expected {want_gelu}")
kept = []
for node in graph.node:
    kept.extend(fused for replaced, fused in added if replaced is node)
    if id(node) not in dropped:
        kept.append(node)
del graph.node[:]
graph.node.extend(kept)
used = {name for node in graph.node for name in node.input}
unused = [init for init in graph.initializer if init.name not in used]
for init in unused:
    graph.initializer.remove(init)
onnx.checker.check_model(model)
onnx.save(model, sys.argv[2])
"#;

/// The fetch step: edits the graph, checks the copy against the original, stores it.
pub fn prepare(dir: &Path) -> Result<(), String> {
    with_python(dir, "onnx", ONNX_TOOLS, |python, _| prepare_with(dir, python))
}

fn prepare_with(dir: &Path, python: &Path) -> Result<(), String> {
    let partial = format!("{SMART_TURN_PREPARED}.partial");
    run(
        Command::new(python)
            .arg("-c")
            .arg(EDIT_GRAPH)
            .arg(dir.join(SMART_TURN))
            .arg(dir.join(&partial))
            .arg(GELUS.to_string()),
        "the Smart Turn graph edit",
    )?;
    let checked = largest_difference(dir, &partial).and_then(|(worst, pairs)| {
        if worst <= TOLERANCE {
            Ok(())
        } else {
            Err(format!("the prepared Smart Turn differs from the original by {worst} (at most {TOLERANCE}): {pairs}"))
        }
    });
    match checked {
        Ok(()) => std::fs::rename(dir.join(&partial), dir.join(SMART_TURN_PREPARED))
            .map_err(|err| format!("cannot store {SMART_TURN_PREPARED}: {err}")),
        Err(message) => {
            let _ = std::fs::remove_file(dir.join(&partial));
            Err(message)
        }
    }
}

/// Speech-like test signals: `seconds` of a voiced tone with syllable-rate loudness, silence before it.
fn pattern(seconds: f32, pitch: f64) -> Vec<f32> {
    let samples = (seconds * 16_000.0) as usize;
    (0..samples)
        .map(|n| {
            let t = n as f64 / 16_000.0;
            let syllables = (t * 4.0 * std::f64::consts::TAU).sin().abs();
            let voice =
                (t * pitch * std::f64::consts::TAU).sin() + 0.5 * (t * pitch * 2.7 * std::f64::consts::TAU).sin();
            (voice * syllables * 0.2) as f32
        })
        .collect()
}

/// The largest difference in probability between the model stored as `candidate` and the original, over
/// a few fixed signals of different lengths, and the pairs of probabilities.
fn largest_difference(dir: &Path, candidate: &str) -> Result<(f32, String), String> {
    let signals = [pattern(0.8, 140.0), pattern(2.3, 210.0), pattern(5.0, 120.0), pattern(9.0, 180.0)];
    let mut original = SmartTurn::load_file(dir, SMART_TURN, 1).map_err(|e| e.to_string())?;
    let mut prepared = SmartTurn::load_file(dir, candidate, 1).map_err(|e| e.to_string())?;
    let (mut worst, mut pairs) = (0f32, Vec::new());
    for signal in &signals {
        let want = original.predict(signal).map_err(|e| e.to_string())?;
        let got = prepared.predict(signal).map_err(|e| e.to_string())?;
        worst = worst.max((want - got).abs());
        pairs.push(format!("{want:.4} → {got:.4}"));
    }
    Ok((worst, pairs.join(", ")))
}
