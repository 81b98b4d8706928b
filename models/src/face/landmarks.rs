//! The face landmark model (192×192 input crop around a face): 468 points (x, y in crop pixels and a
//! relative depth) and a score that a face is present. MediaPipe's indices for the points Confab uses
//! are named here.

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;

use super::{sigmoid, to_nchw};
use crate::paths::FACE_LANDMARKS;
use crate::{ModelError, onnx};

/// The side of the model's square input.
pub const INPUT_SIDE: usize = 192;
pub const POINTS: usize = 468;

/// MediaPipe face-mesh indices ("right"/"left" are the person's sides).
pub mod index {
    pub const UPPER_LIP_TOP: usize = 0;
    pub const UPPER_LIP_INNER: usize = 13;
    pub const LOWER_LIP_INNER: usize = 14;
    pub const LOWER_LIP_BOTTOM: usize = 17;
    pub const MOUTH_RIGHT: usize = 61;
    pub const MOUTH_LEFT: usize = 291;
    pub const NOSE_TIP: usize = 1;
    pub const CHIN: usize = 152;
    /// The jaw line at mouth height.
    pub const JAW_RIGHT: usize = 172;
    pub const JAW_LEFT: usize = 397;
    pub const RIGHT_EYE_OUTER: usize = 33;
    pub const RIGHT_EYE_INNER: usize = 133;
    pub const RIGHT_EYE_TOP: usize = 159;
    pub const RIGHT_EYE_BOTTOM: usize = 145;
    pub const LEFT_EYE_INNER: usize = 362;
    pub const LEFT_EYE_OUTER: usize = 263;
    pub const LEFT_EYE_TOP: usize = 386;
    pub const LEFT_EYE_BOTTOM: usize = 374;
}

/// The model's answer for one crop.
#[derive(Debug, Clone)]
pub struct Landmarks {
    /// (x, y) in crop pixels (0…`INPUT_SIDE`), z relative depth.
    pub points: Vec<[f32; 3]>,
    /// How sure the model is that the crop holds a face (0…1).
    pub presence: f32,
}

pub struct FaceLandmarker {
    session: Session,
    input: Vec<f32>,
}

impl FaceLandmarker {
    pub fn load(models_dir: &Path) -> Result<FaceLandmarker, ModelError> {
        Ok(FaceLandmarker {
            session: onnx::load_session(models_dir, FACE_LANDMARKS, 1)?,
            input: vec![0.0; 3 * INPUT_SIDE * INPUT_SIDE],
        })
    }

    /// The landmarks of the face in `rgb` (`INPUT_SIDE`² interleaved RGB).
    pub fn landmarks(&mut self, rgb: &[u8]) -> Result<Landmarks, ModelError> {
        to_nchw(rgb, INPUT_SIDE, 0.0, 1.0, &mut self.input);
        let fail = |e: ort::Error| ModelError::Inference { model: "face-landmarks", message: e.to_string() };
        let input = TensorRef::from_array_view(([1usize, 3, INPUT_SIDE, INPUT_SIDE], &self.input[..])).map_err(fail)?;
        let outputs = self.session.run(ort::inputs!["input_1" => input]).map_err(fail)?;
        let (_, points) = outputs[0].try_extract_tensor::<f32>().map_err(fail)?;
        let (_, presence) = outputs[1].try_extract_tensor::<f32>().map_err(fail)?;
        if points.len() != POINTS * 3 || presence.is_empty() {
            return Err(ModelError::Inference { model: "face-landmarks", message: "unexpected output shape".into() });
        }
        Ok(Landmarks {
            points: points.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect(),
            presence: sigmoid(presence[0]),
        })
    }
}
