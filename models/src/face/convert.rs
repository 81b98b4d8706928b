//! Converts the MediaPipe TFLite face models to ONNX at fetch time, with `tflite2onnx` (0.4.1, pinned
//! with its dependencies) in a private Python virtual environment under the models directory, removed
//! afterwards. The converted files are not byte-stable between runs, so they are checked numerically:
//! each is run on a fixed input pattern and its outputs are compared with those of the original TFLite
//! model (recorded once with the LiteRT interpreter). Only checked files are renamed into place.

use std::path::Path;
use std::process::Command;

use ort::value::TensorRef;

use crate::onnx::load_session;
use crate::paths::{FACE_DETECTOR, FACE_DETECTOR_TFLITE, FACE_LANDMARKS, FACE_LANDMARKS_TFLITE};
use crate::python_tools::{run, with_python};

/// The converter and the versions it was checked with.
const CONVERTER: &[&str] = &[
    "tflite2onnx==0.4.1",
    "tflite==2.18.0",
    "onnx==1.23.2",
    "numpy==2.4.6",
    "flatbuffers==25.12.19",
    "protobuf==7.36.2",
    "ml_dtypes==0.6.0",
    "typing_extensions==4.16.0",
];

const SCRIPT: &str = "import sys, tflite2onnx\ntflite2onnx.convert(sys.argv[1], sys.argv[2])\n";

/// What the TFLite model gives for the input pattern: per output, the sum of absolute values and its
/// first three values.
struct Reference {
    input_side: usize,
    outputs: [(f64, [f32; 3]); 2],
}

const DETECTOR_REFERENCE: Reference = Reference {
    input_side: 128,
    outputs: [(183_107.39, [0.1317, -0.545, 28.3554]), (3_775.6658, [-4.6277, -3.9128, -4.0412])],
};
const LANDMARKS_REFERENCE: Reference = Reference {
    input_side: 192,
    outputs: [(92_167.281, [98.5865, 116.8852, -9.944]), (9.8766, [-9.8766, -9.8766, -9.8766])],
};

/// The fetch step: converts both models and stores them once checked.
pub fn convert(dir: &Path) -> Result<(), String> {
    with_python(dir, "tflite2onnx", CONVERTER, |python, _| convert_with(dir, python))
}

fn convert_with(dir: &Path, python: &Path) -> Result<(), String> {
    for (tflite, onnx, reference) in [
        (FACE_DETECTOR_TFLITE, FACE_DETECTOR, DETECTOR_REFERENCE),
        (FACE_LANDMARKS_TFLITE, FACE_LANDMARKS, LANDMARKS_REFERENCE),
    ] {
        let partial = format!("{onnx}.partial");
        run(Command::new(python).arg("-c").arg(SCRIPT).arg(dir.join(tflite)).arg(dir.join(&partial)), "tflite2onnx")?;
        if let Err(message) = check(dir, &partial, &reference) {
            let _ = std::fs::remove_file(dir.join(&partial));
            return Err(format!("{onnx}: the converted model does not match the TFLite model: {message}"));
        }
        std::fs::rename(dir.join(&partial), dir.join(onnx)).map_err(|err| format!("cannot store {onnx}: {err}"))?;
    }
    Ok(())
}

/// The fixed input pattern, laid out as TFLite's NHWC, for a `side`×`side` RGB input.
fn pattern_nhwc(side: usize) -> Vec<f32> {
    (0..side * side * 3).map(|n| ((n as f64 * 0.37).sin() * 0.5 + (n as f64 * 0.011).cos() * 0.4) as f32).collect()
}

fn check(dir: &Path, stored_as: &str, reference: &Reference) -> Result<(), String> {
    let side = reference.input_side;
    let nhwc = pattern_nhwc(side);
    let plane = side * side;
    let mut nchw = vec![0.0f32; nhwc.len()];
    for pixel in 0..plane {
        for channel in 0..3 {
            nchw[channel * plane + pixel] = nhwc[pixel * 3 + channel];
        }
    }
    let mut session = load_session(dir, stored_as, 1).map_err(|err| err.to_string())?;
    let input = TensorRef::from_array_view(([1usize, 3, side, side], &nchw[..])).map_err(|err| err.to_string())?;
    let outputs = session.run(ort::inputs![input]).map_err(|err| err.to_string())?;
    for (index, (sum_abs, first)) in reference.outputs.iter().enumerate() {
        let (_, values) = outputs[index].try_extract_tensor::<f32>().map_err(|err| err.to_string())?;
        let actual: f64 = values.iter().map(|v| f64::from(v.abs())).sum();
        if (actual - sum_abs).abs() > sum_abs * 1e-3 {
            return Err(format!("output {index}: sum of |values| {actual:.3}, expected {sum_abs:.3}"));
        }
        for (got, want) in values.iter().zip(first) {
            if (got - want).abs() > 0.01 + want.abs() * 1e-3 {
                return Err(format!("output {index}: value {got}, expected {want}"));
            }
        }
    }
    Ok(())
}
