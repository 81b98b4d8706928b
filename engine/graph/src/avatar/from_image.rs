//! A custom avatar from one picture: decode it, find the face with MediaPipe's detector, frame a square
//! portrait around it, find the face's landmarks there and build the rig the renderer animates. Photos
//! get a rig from the 468 landmarks; drawings, where the landmark model is unsure, get a fallback rig
//! from the detector's six keypoints. Pictures without a usable face are refused with a reason a user
//! can act on.

use std::path::Path;

use confab_models::ModelError;
use confab_models::face::{Detection, FaceDetector, FaceLandmarker, detector, landmarks};
use image::imageops::{self, FilterType};

use super::image::RgbImage;
use super::lips::{LipContours, MouthLook, mouth_colours, mouth_look};
use super::photo_pose::PhotoPose;
use super::rig::{EyeRig, FaceRig, Point};

/// Largest picture decoded, in pixels (a 48-megapixel phone photo fits). The size is read from the
/// file's header before anything is decoded: a small file that claims a huge picture (a decompression
/// bomb: 8,000 × 8,000 pixels of one colour is a few kilobytes as PNG) is refused without allocating it.
pub const MAX_PICTURE_PIXELS: u64 = 50_000_000;
/// Largest picture side decoded, in pixels.
pub const MAX_PICTURE_SIDE: u32 = 12_000;
/// Memory the decoder may allocate for one picture (RGBA at the largest size, plus its working buffers).
const MAX_DECODE_BYTES: u64 = MAX_PICTURE_PIXELS * 4 + (64 << 20);
/// Faces narrower than this (source pixels) are refused: the mouth would be a few pixels wide.
pub const MIN_FACE_PIXELS: f32 = 48.0;
/// How much of the face box may lie outside the picture before the face counts as cut off.
const MAX_FACE_OUTSIDE: f32 = 0.12;
/// The landmark model's presence score below which the fallback rig is used.
const MIN_LANDMARK_PRESENCE: f32 = 0.5;
/// The portrait's side, in face-box sides (head, hair and shoulders around the face).
const PORTRAIT_FACES: f32 = 2.4;
/// The landmark crop's side, in face-box sides (MediaPipe's 1.5).
const LANDMARK_FACES: f32 = 1.5;
const MOUTH_INTERIOR: [u8; 3] = [72, 24, 30];
const TEETH: [u8; 3] = [232, 228, 218];

#[derive(Debug, thiserror::Error)]
pub enum AvatarImageError {
    #[error("The file is not a readable PNG, JPEG or WebP image ({0})")]
    NotAnImage(String),
    #[error(
        "The image is too large: {width}x{height} pixels (at most {MAX_PICTURE_PIXELS} pixels, {MAX_PICTURE_SIDE} per side)"
    )]
    TooLarge { width: u32, height: u32 },
    #[error("No face found in the image")]
    NoFace,
    #[error("The face is too small: {0} pixels wide (at least {MIN_FACE_PIXELS} needed)")]
    FaceTooSmall(u32),
    #[error("The face is cut off by the edge of the image")]
    FaceCutOff,
    #[error(
        "The face is turned {0}° away from the camera (at most {max}°): use a photo that looks straight at the camera",
        max = super::photo_pose::MAX_TURN_DEGREES
    )]
    FaceTurned(u32),
    #[error("The eyes are closed: use a photo with the eyes open, looking at the camera")]
    EyesClosed,
    #[error("The mouth is covered: use a photo with the lips visible")]
    MouthCovered,
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// A photo's face that cannot be animated well: turned too far from the camera, or its eyes closed.
fn refuse_pose(pose: &PhotoPose) -> Result<(), AvatarImageError> {
    if pose.turned_away() {
        return Err(AvatarImageError::FaceTurned(pose.turn_degrees.abs().round() as u32));
    }
    if pose.eyes_closed() {
        return Err(AvatarImageError::EyesClosed);
    }
    Ok(())
}

/// A photo whose mouth shows nothing of lips (a hand or an object over it): the mouth would move a
/// cover. See `MouthLook::covered`.
fn refuse_covered_mouth(
    points: &[Point],
    contours: &LipContours,
    portrait: &RgbImage,
) -> Result<MouthLook, AvatarImageError> {
    let look = mouth_look(portrait, contours, chin_skin(points, portrait));
    tracing::debug!(?look, "the photo's mouth");
    if look.covered() {
        return Err(AvatarImageError::MouthCovered);
    }
    Ok(look)
}

/// How the rig was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RigSource {
    /// The face landmark model's 468 points (photos).
    Landmarks,
    /// The detector's six keypoints (drawings, where the landmark model is unsure).
    DetectorKeypoints,
}

/// A rigged portrait made from a picture.
#[derive(Debug, Clone)]
pub struct RiggedPortrait {
    /// How a photo's face is held (none for a drawing rigged from the detector's keypoints).
    pub pose: Option<PhotoPose>,
    /// What a photo's mouth region shows (none for a drawing).
    pub mouth: Option<MouthLook>,
    pub portrait: RgbImage,
    pub rig: FaceRig,
    pub source: RigSource,
    /// The detector's score for the face (0…1).
    pub detection_score: f32,
    /// The landmark model's presence score (0…1).
    pub landmark_presence: f32,
}

/// The two face models, loaded once and reused for many pictures.
pub struct AvatarBuilder {
    detector: FaceDetector,
    landmarker: FaceLandmarker,
}

impl AvatarBuilder {
    pub fn load(models_dir: &Path) -> Result<AvatarBuilder, ModelError> {
        Ok(AvatarBuilder { detector: FaceDetector::load(models_dir)?, landmarker: FaceLandmarker::load(models_dir)? })
    }

    /// A `size`×`size` portrait of the face in `bytes` (PNG, JPEG or WebP) and its rig.
    pub fn build(&mut self, bytes: &[u8], size: usize) -> Result<RiggedPortrait, AvatarImageError> {
        let picture = decode_picture(bytes)?;
        let face = self.find_face(&picture)?;
        let (portrait, frame) = frame_portrait(&picture, &face, size);
        // The detection in portrait pixels.
        let to_portrait = |(x, y): Point| ((x - frame.0) * frame.2, (y - frame.1) * frame.2);
        let face = FaceBox {
            center: to_portrait(face.center),
            side: face.side * frame.2,
            keypoints: face.keypoints.map(to_portrait),
            score: face.score,
        };
        let crop = landmark_crop(&portrait, &face);
        let input = imageops::resize(
            &crop.image,
            landmarks::INPUT_SIDE as u32,
            landmarks::INPUT_SIDE as u32,
            FilterType::Triangle,
        );
        let found = self.landmarker.landmarks(input.as_raw())?;
        let scale = crop.side / landmarks::INPUT_SIDE as f32;
        let points: Vec<Point> =
            found.points.iter().map(|p| (crop.left + p[0] * scale, crop.top + p[1] * scale)).collect();
        let portrait = RgbImage { width: size, height: size, rgb: portrait.into_raw() };
        let (rig, source, pose, mouth) = if found.presence >= MIN_LANDMARK_PRESENCE && landmarks_fit(&points, &face) {
            let pose = PhotoPose::of(&found.points);
            tracing::debug!(?pose, "the photo's face");
            refuse_pose(&pose)?;
            let rig = rig_from_landmarks(&points, &portrait);
            let contours = rig.lips.as_ref().expect("a rig from landmarks has the photo's lips");
            let mouth = refuse_covered_mouth(&points, contours, &portrait)?;
            (rig, RigSource::Landmarks, Some(pose), Some(mouth))
        } else {
            (rig_from_keypoints(&face, &portrait), RigSource::DetectorKeypoints, None, None)
        };
        Ok(RiggedPortrait {
            pose,
            mouth,
            portrait,
            rig,
            source,
            detection_score: face.score,
            landmark_presence: found.presence,
        })
    }

    /// The best face in the picture, in its pixels, or why there is none that can be used.
    fn find_face(&mut self, picture: &image::RgbImage) -> Result<FaceBox, AvatarImageError> {
        let (width, height) = (picture.width() as f32, picture.height() as f32);
        let side = width.max(height);
        // Letterboxed into the detector's square, centred.
        let input_side = detector::INPUT_SIDE as u32;
        let fitted = imageops::resize(
            picture,
            ((width / side) * input_side as f32).round().max(1.0) as u32,
            ((height / side) * input_side as f32).round().max(1.0) as u32,
            FilterType::Triangle,
        );
        let mut square = image::RgbImage::new(input_side, input_side);
        let pad = ((input_side - fitted.width()) / 2, (input_side - fitted.height()) / 2);
        imageops::replace(&mut square, &fitted, i64::from(pad.0), i64::from(pad.1));
        let faces = self.detector.detect(square.as_raw(), detector::MIN_SCORE)?;
        let best = faces.first().ok_or(AvatarImageError::NoFace)?;
        // Detector pixels to picture pixels.
        let scale = width / fitted.width() as f32;
        let to_picture = |(x, y): (f32, f32)| {
            ((x * input_side as f32 - pad.0 as f32) * scale, (y * input_side as f32 - pad.1 as f32) * scale)
        };
        let face = FaceBox::from_detection(best, to_picture, input_side as f32 * scale);
        if face.side < MIN_FACE_PIXELS {
            return Err(AvatarImageError::FaceTooSmall(face.side.round() as u32));
        }
        let outside = |low: f32, high: f32, limit: f32| ((-low).max(0.0) + (high - limit).max(0.0)) / face.side;
        let half = face.side / 2.0;
        let (cx, cy) = face.center;
        if outside(cx - half, cx + half, width) > MAX_FACE_OUTSIDE
            || outside(cy - half, cy + half, height) > MAX_FACE_OUTSIDE
        {
            return Err(AvatarImageError::FaceCutOff);
        }
        Ok(face)
    }
}

/// A detected face: a square box and the six keypoints, in some image's pixels.
#[derive(Debug, Clone, Copy)]
struct FaceBox {
    center: Point,
    side: f32,
    /// Right eye, left eye, nose tip, mouth centre, right ear, left ear.
    keypoints: [Point; 6],
    score: f32,
}

impl FaceBox {
    fn from_detection(detection: &Detection, to_picture: impl Fn((f32, f32)) -> Point, input_side: f32) -> FaceBox {
        FaceBox {
            center: to_picture(detection.center),
            side: detection.size.0.max(detection.size.1) * input_side,
            keypoints: detection.keypoints.map(&to_picture),
            score: detection.score,
        }
    }
}

/// The square of `picture` around the face (shifted and shrunk to stay inside the picture), scaled to
/// `size`. Returns it and (left, top, scale) mapping picture pixels to portrait pixels.
fn frame_portrait(picture: &image::RgbImage, face: &FaceBox, size: usize) -> (image::RgbImage, (f32, f32, f32)) {
    let (width, height) = (picture.width() as f32, picture.height() as f32);
    let side = (face.side * PORTRAIT_FACES).min(width).min(height).floor().max(1.0);
    // The face sits a little above the middle: room for the shoulders.
    let centre = (face.center.0, face.center.1 + face.side * 0.12);
    let left = (centre.0 - side / 2.0).clamp(0.0, width - side).floor();
    let top = (centre.1 - side / 2.0).clamp(0.0, height - side).floor();
    let cropped = imageops::crop_imm(picture, left as u32, top as u32, side as u32, side as u32).to_image();
    let portrait = imageops::resize(&cropped, size as u32, size as u32, FilterType::CatmullRom);
    (portrait, (left, top, size as f32 / side))
}

struct Crop {
    image: image::RgbImage,
    left: f32,
    top: f32,
    side: f32,
}

/// The square around the face the landmark model sees, kept inside the portrait.
fn landmark_crop(portrait: &image::RgbImage, face: &FaceBox) -> Crop {
    let limit = portrait.width() as f32;
    let side = (face.side * LANDMARK_FACES).min(limit).floor().max(1.0);
    let left = (face.center.0 - side / 2.0).clamp(0.0, limit - side).floor();
    let top = (face.center.1 - side / 2.0).clamp(0.0, limit - side).floor();
    let image = imageops::crop_imm(portrait, left as u32, top as u32, side as u32, side as u32).to_image();
    Crop { image, left, top, side }
}

/// The landmarks agree with the detector: the mouth and eyes lie inside the face box.
fn landmarks_fit(points: &[Point], face: &FaceBox) -> bool {
    let half = face.side * 0.75;
    [landmarks::index::UPPER_LIP_INNER, landmarks::index::RIGHT_EYE_OUTER, landmarks::index::LEFT_EYE_OUTER].iter().all(
        |&index| {
            let (x, y) = points[index];
            (x - face.center.0).abs() < half && (y - face.center.1).abs() < half
        },
    )
}

fn distance(a: Point, b: Point) -> f32 {
    ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
}

fn midpoint(a: Point, b: Point) -> Point {
    ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0)
}

/// The skin just below an eye (the lid's colour when it closes), averaged over a small box.
fn skin_below(portrait: &RgbImage, (x, y): Point, eye_height: f32) -> [u8; 3] {
    mean_patch(portrait, (x, y + eye_height * 2.6), (eye_height * 0.6).max(1.0))
}

/// The mean colour of the square of `radius` around `centre` (a skin tone if nothing is there).
fn mean_patch(portrait: &RgbImage, (x, y): Point, radius: f32) -> [u8; 3] {
    let (cx, cy, radius) = (x.round() as i64, y.round() as i64, radius as i64);
    let mut sum = [0u64; 3];
    let mut count = 0;
    for sy in cy - radius..=cy + radius {
        for sx in cx - radius..=cx + radius {
            if sx >= 0 && sy >= 0 && (sx as usize) < portrait.width && (sy as usize) < portrait.height {
                let pixel = portrait.pixel(sx as usize, sy as usize);
                for c in 0..3 {
                    sum[c] += u64::from(pixel[c]);
                }
                count += 1;
            }
        }
    }
    if count == 0 {
        return [200, 160, 130];
    }
    sum.map(|total| (total / count) as u8)
}

/// The skin of the chin, half way between the lower lip and the chin's point.
fn chin_skin(points: &[Point], portrait: &RgbImage) -> [u8; 3] {
    use landmarks::index::*;
    let radius = distance(points[MOUTH_RIGHT], points[MOUTH_LEFT]) * 0.08;
    mean_patch(portrait, midpoint(points[LOWER_LIP_BOTTOM], points[CHIN]), radius.max(1.0))
}

/// An eye of the given size whose lid takes the colour of the skin below it.
fn eye_rig(portrait: &RgbImage, center: Point, half_width: f32, half_height: f32) -> EyeRig {
    let lid = skin_below(portrait, center, half_height);
    EyeRig {
        center,
        half_width,
        half_height,
        lid,
        lash: lid.map(|c| (f32::from(c) * 0.3) as u8),
        lid_skin: EyeRig::LID_SKIN,
    }
}

fn eye(portrait: &RgbImage, corners: (Point, Point), lids: (Point, Point)) -> EyeRig {
    let half_width = distance(corners.0, corners.1) / 2.0 * 1.15;
    let half_height = ((lids.1.1 - lids.0.1).abs() / 2.0 * 1.35).max(half_width * 0.3);
    eye_rig(portrait, midpoint(corners.0, corners.1), half_width, half_height)
}

/// The rig from MediaPipe's face mesh points (portrait pixels): the photo's own lip contours and jaw
/// line, and its mouth's colours read from it.
pub fn rig_from_landmarks(points: &[Point], portrait: &RgbImage) -> FaceRig {
    use landmarks::index::*;
    let mut contours = LipContours::from_landmarks(points);
    contours.find_closed_line(portrait);
    let colours = mouth_colours(portrait, &contours, chin_skin(points, portrait));
    contours.teeth_shown = colours.teeth_shown;
    let inner_top = points[UPPER_LIP_INNER];
    let inner_bottom = points[LOWER_LIP_INNER];
    let lips = ((inner_top.1 - points[UPPER_LIP_TOP].1) + (points[LOWER_LIP_BOTTOM].1 - inner_bottom.1)) / 2.0;
    let mouth_half_width = distance(points[MOUTH_RIGHT], points[MOUTH_LEFT]) / 2.0;
    FaceRig {
        mouth_center: midpoint(inner_top, inner_bottom),
        mouth_half_width,
        lip_height: lips.max(mouth_half_width * 0.12),
        chin: points[CHIN],
        jaw_half_width: (distance(points[JAW_RIGHT], points[JAW_LEFT]) / 2.0).max(mouth_half_width * 1.9),
        nose_tip: points[NOSE_TIP],
        eyes: [
            eye(
                portrait,
                (points[RIGHT_EYE_OUTER], points[RIGHT_EYE_INNER]),
                (points[RIGHT_EYE_TOP], points[RIGHT_EYE_BOTTOM]),
            ),
            eye(
                portrait,
                (points[LEFT_EYE_INNER], points[LEFT_EYE_OUTER]),
                (points[LEFT_EYE_TOP], points[LEFT_EYE_BOTTOM]),
            ),
        ],
        mouth_interior: colours.interior,
        teeth: colours.teeth,
        lips: Some(contours),
    }
}

/// A rig from the detector's keypoints alone, in the proportions of a typical face (for drawings).
fn rig_from_keypoints(face: &FaceBox, portrait: &RgbImage) -> FaceRig {
    let [right_eye, left_eye, nose, mouth, _, _] = face.keypoints;
    let eyes = distance(right_eye, left_eye).max(1.0);
    let box_bottom = face.center.1 + face.side / 2.0;
    FaceRig {
        mouth_center: mouth,
        mouth_half_width: eyes * 0.38,
        lip_height: eyes * 0.09,
        chin: (mouth.0, (mouth.1 + eyes * 0.8).min(box_bottom).max(mouth.1 + eyes * 0.3)),
        jaw_half_width: eyes * 0.85,
        nose_tip: (nose.0, nose.1.min(mouth.1 - eyes * 0.2)),
        eyes: [right_eye, left_eye].map(|center| eye_rig(portrait, center, eyes * 0.22, eyes * 0.1)),
        mouth_interior: MOUTH_INTERIOR,
        teeth: TEETH,
        lips: None,
    }
}

/// Decodes a PNG, JPEG or WebP picture to RGB, refusing from its header alone one larger than
/// `MAX_PICTURE_PIXELS` or `MAX_PICTURE_SIDE`.
pub fn decode_picture(bytes: &[u8]) -> Result<image::RgbImage, AvatarImageError> {
    let not_an_image = |err: image::ImageError| AvatarImageError::NotAnImage(err.to_string());
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|err| AvatarImageError::NotAnImage(err.to_string()))?;
    let mut decoder = reader.into_decoder().map_err(not_an_image)?;
    let (width, height) = image::ImageDecoder::dimensions(&decoder);
    if u64::from(width) * u64::from(height) > MAX_PICTURE_PIXELS || width.max(height) > MAX_PICTURE_SIDE {
        return Err(AvatarImageError::TooLarge { width, height });
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_PICTURE_SIDE);
    limits.max_image_height = Some(MAX_PICTURE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    image::ImageDecoder::set_limits(&mut decoder, limits).map_err(not_an_image)?;
    Ok(image::DynamicImage::from_decoder(decoder).map_err(not_an_image)?.to_rgb8())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-bit greyscale PNG of `side`×`side` black pixels: a few kilobytes that decode to `side²` RGB
    /// pixels.
    fn one_bit_png(side: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut bytes, side, side);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::One);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&vec![0u8; side.div_ceil(8) as usize * side as usize]).unwrap();
        writer.finish().unwrap();
        bytes
    }

    #[test]
    fn a_decompression_bomb_is_refused_from_its_header() {
        let bomb = one_bit_png(8_000);
        assert!(bomb.len() < 100_000, "{} bytes on the wire", bomb.len());
        match decode_picture(&bomb) {
            Err(AvatarImageError::TooLarge { width: 8_000, height: 8_000 }) => {}
            other => panic!("64 megapixels must be refused: {:?}", other.map(|p| p.dimensions())),
        }
        assert_eq!(decode_picture(&one_bit_png(64)).unwrap().dimensions(), (64, 64));
        assert!(matches!(decode_picture(b"not a picture"), Err(AvatarImageError::NotAnImage(_))));
    }

    #[test]
    fn the_fallback_rig_keeps_the_mouth_between_the_nose_and_the_chin() {
        let portrait = RgbImage::new(512, 512);
        let face = FaceBox {
            center: (256.0, 260.0),
            side: 200.0,
            keypoints: [(216.0, 220.0), (296.0, 220.0), (256.0, 270.0), (256.0, 310.0), (160.0, 240.0), (350.0, 240.0)],
            score: 0.9,
        };
        let rig = rig_from_keypoints(&face, &portrait);
        assert_eq!(rig.mouth_center, (256.0, 310.0));
        assert!(rig.nose_tip.1 < rig.mouth_center.1 && rig.mouth_center.1 < rig.chin.1);
        assert!(rig.chin.1 <= 360.0, "the chin stays inside the face box");
        assert!((rig.mouth_half_width - 30.4).abs() < 1e-3);
        assert_eq!(rig.eyes[0].center, (216.0, 220.0));
    }
}
