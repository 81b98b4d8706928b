//! The short-range face detector (BlazeFace, 128×128 input): 896 anchors, each with a score, a box and
//! six keypoints (the person's right eye, left eye, nose tip, mouth centre, right ear, left ear), all
//! normalised to the input square. Decoding and suppression follow MediaPipe's graph for this model.

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;

use super::{sigmoid, to_nchw};
use crate::paths::FACE_DETECTOR;
use crate::{ModelError, onnx};

/// The side of the detector's square input.
pub const INPUT_SIDE: usize = 128;
const ANCHORS: usize = 896;
/// MediaPipe's default minimum score for this model.
pub const MIN_SCORE: f32 = 0.5;
/// Detections overlapping more than this are one face.
const NMS_IOU: f32 = 0.3;

/// One face, in coordinates normalised to the detector's input (0…1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    pub score: f32,
    pub center: (f32, f32),
    pub size: (f32, f32),
    /// Right eye, left eye, nose tip, mouth centre, right ear, left ear (the person's sides).
    pub keypoints: [(f32, f32); 6],
}

impl Detection {
    fn iou(&self, other: &Detection) -> f32 {
        let overlap = |a: f32, a_size: f32, b: f32, b_size: f32| {
            ((a + a_size / 2.0).min(b + b_size / 2.0) - (a - a_size / 2.0).max(b - b_size / 2.0)).max(0.0)
        };
        let inter = overlap(self.center.0, self.size.0, other.center.0, other.size.0)
            * overlap(self.center.1, self.size.1, other.center.1, other.size.1);
        let union = self.size.0 * self.size.1 + other.size.0 * other.size.1 - inter;
        if union > 0.0 { inter / union } else { 0.0 }
    }
}

/// The anchor centres: a 16×16 grid (stride 8) with 2 anchors per cell, then an 8×8 grid (stride 16)
/// with 6 per cell; anchors have a fixed unit size.
fn anchors() -> Vec<(f32, f32)> {
    let mut out = Vec::with_capacity(ANCHORS);
    for (stride, per_cell) in [(8, 2), (16, 6)] {
        let grid = INPUT_SIDE / stride;
        for y in 0..grid {
            for x in 0..grid {
                let center = ((x as f32 + 0.5) / grid as f32, (y as f32 + 0.5) / grid as f32);
                out.extend(std::iter::repeat_n(center, per_cell));
            }
        }
    }
    out
}

pub struct FaceDetector {
    session: Session,
    anchors: Vec<(f32, f32)>,
    input: Vec<f32>,
}

impl FaceDetector {
    pub fn load(models_dir: &Path) -> Result<FaceDetector, ModelError> {
        Ok(FaceDetector {
            session: onnx::load_session(models_dir, FACE_DETECTOR, 1)?,
            anchors: anchors(),
            input: vec![0.0; 3 * INPUT_SIDE * INPUT_SIDE],
        })
    }

    /// The faces in `rgb` (`INPUT_SIDE`² interleaved RGB) scoring at least `min_score`, best first,
    /// overlapping detections suppressed.
    pub fn detect(&mut self, rgb: &[u8], min_score: f32) -> Result<Vec<Detection>, ModelError> {
        to_nchw(rgb, INPUT_SIDE, -1.0, 1.0, &mut self.input);
        let fail = |e: ort::Error| ModelError::Inference { model: "face-detector", message: e.to_string() };
        let input = TensorRef::from_array_view(([1usize, 3, INPUT_SIDE, INPUT_SIDE], &self.input[..])).map_err(fail)?;
        let outputs = self.session.run(ort::inputs!["input" => input]).map_err(fail)?;
        let (_, boxes) = outputs["regressors"].try_extract_tensor::<f32>().map_err(fail)?;
        let (_, scores) = outputs["classificators"].try_extract_tensor::<f32>().map_err(fail)?;
        Ok(decode(boxes, scores, &self.anchors, min_score))
    }
}

/// Decodes raw regressors (16 per anchor, in input pixels relative to the anchor) and logits.
fn decode(boxes: &[f32], scores: &[f32], anchors: &[(f32, f32)], min_score: f32) -> Vec<Detection> {
    let side = INPUT_SIDE as f32;
    let mut candidates: Vec<Detection> = anchors
        .iter()
        .enumerate()
        .filter_map(|(index, &(ax, ay))| {
            let score = sigmoid(scores[index]);
            if score < min_score {
                return None;
            }
            let raw = &boxes[index * 16..(index + 1) * 16];
            let point = |k: usize| (raw[k] / side + ax, raw[k + 1] / side + ay);
            Some(Detection {
                score,
                center: point(0),
                size: (raw[2] / side, raw[3] / side),
                keypoints: std::array::from_fn(|k| point(4 + 2 * k)),
            })
        })
        .collect();
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = Vec::new();
    for candidate in candidates {
        if kept.iter().all(|face| face.iou(&candidate) <= NMS_IOU) {
            kept.push(candidate);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_896_anchors_on_two_grids() {
        let anchors = anchors();
        assert_eq!(anchors.len(), ANCHORS);
        assert_eq!(anchors[0], (0.5 / 16.0, 0.5 / 16.0));
        assert_eq!(anchors[1], anchors[0]);
        assert_eq!(anchors[512], (0.5 / 8.0, 0.5 / 8.0));
        assert_eq!(anchors[895], (7.5 / 8.0, 7.5 / 8.0));
    }

    #[test]
    fn decoding_offsets_from_the_anchor_and_suppresses_overlaps() {
        let anchors = anchors();
        let mut boxes = vec![0.0f32; ANCHORS * 16];
        let mut scores = vec![-10.0f32; ANCHORS];
        // Two anchors of the same face (the second a little weaker) and a separate, weaker face.
        for (index, score, dx) in [(600, 3.0, 4.0), (601, 2.0, 5.0), (100, 1.0, 0.0)] {
            scores[index] = score;
            boxes[index * 16] = dx;
            boxes[index * 16 + 2] = 32.0;
            boxes[index * 16 + 3] = 32.0;
            boxes[index * 16 + 4] = -8.0; // right eye
        }
        let faces = decode(&boxes, &scores, &anchors, MIN_SCORE);
        assert_eq!(faces.len(), 2, "{faces:?}");
        assert!((faces[0].score - sigmoid(3.0)).abs() < 1e-6);
        assert_eq!(faces[0].center, (anchors[600].0 + 4.0 / 128.0, anchors[600].1));
        assert_eq!(faces[0].size, (0.25, 0.25));
        assert_eq!(faces[0].keypoints[0], (anchors[600].0 - 8.0 / 128.0, anchors[600].1));
        assert_eq!(faces[1].center, anchors[100]);
        assert!(decode(&boxes, &scores, &anchors, 0.99).is_empty());
    }
}
