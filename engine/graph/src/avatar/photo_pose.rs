//! Whether a photo's face can be animated well, read from its 468 landmarks (x, y and relative depth, in
//! the same units): how far the head is turned from the camera, and whether the eyes are open. A face
//! turned far shows one cheek and hides the other (the mouth's far corner and the far eye are guesses), and
//! closed eyes cannot blink open; both are refused with a reason the user can act on. Drawings are rigged
//! from the detector's keypoints instead and are not judged here.

use confab_models::face::landmarks::index::*;

/// The most a photo's face may be turned from the camera, left or right, in degrees.
pub const MAX_TURN_DEGREES: f32 = 30.0;
/// An eye whose lid opening is less than this share of its width is closed (open eyes: ~0.25–0.35).
pub const MIN_EYE_OPENING: f32 = 0.12;

/// How the face in a photo is held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhotoPose {
    /// Rotation about the vertical axis, degrees (0: facing the camera); the sign says which way.
    pub turn_degrees: f32,
    /// Each eye's lid opening as a share of its width (the person's right eye, then left).
    pub eye_openings: [f32; 2],
}

impl PhotoPose {
    /// The pose of the face whose landmarks are `points` ([x, y, depth], MediaPipe's face mesh).
    pub fn of(points: &[[f32; 3]]) -> PhotoPose {
        // The line between the outer eye corners: facing the camera it lies in the picture's plane; a
        // turned head tilts it in depth by the turn.
        let (right, left) = (points[RIGHT_EYE_OUTER], points[LEFT_EYE_OUTER]);
        let turn_degrees = (left[2] - right[2]).atan2(left[0] - right[0]).to_degrees();
        let opening = |corners: (usize, usize), lids: (usize, usize)| {
            let width = planar_distance(points[corners.0], points[corners.1]).max(1e-6);
            planar_distance(points[lids.0], points[lids.1]) / width
        };
        PhotoPose {
            turn_degrees,
            eye_openings: [
                opening((RIGHT_EYE_OUTER, RIGHT_EYE_INNER), (RIGHT_EYE_TOP, RIGHT_EYE_BOTTOM)),
                opening((LEFT_EYE_INNER, LEFT_EYE_OUTER), (LEFT_EYE_TOP, LEFT_EYE_BOTTOM)),
            ],
        }
    }

    /// Turned more than `MAX_TURN_DEGREES` either way.
    pub fn turned_away(&self) -> bool {
        self.turn_degrees.abs() > MAX_TURN_DEGREES
    }

    /// Both eyes closed (one closed eye is a wink the blink can still follow).
    pub fn eyes_closed(&self) -> bool {
        self.eye_openings.iter().all(|&opening| opening < MIN_EYE_OPENING)
    }
}

fn planar_distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A face looking at the camera: the eye corners, lids and a nose tip of a face 100 units wide, the
    /// other points at its centre.
    fn facing() -> Vec<[f32; 3]> {
        let mut points = vec![[100.0, 100.0, 0.0]; confab_models::face::landmarks::POINTS];
        let place = |points: &mut Vec<[f32; 3]>, index: usize, point: [f32; 3]| points[index] = point;
        place(&mut points, RIGHT_EYE_OUTER, [60.0, 90.0, 4.0]);
        place(&mut points, RIGHT_EYE_INNER, [88.0, 90.0, 2.0]);
        place(&mut points, RIGHT_EYE_TOP, [74.0, 86.0, 0.0]);
        place(&mut points, RIGHT_EYE_BOTTOM, [74.0, 94.0, 0.0]);
        place(&mut points, LEFT_EYE_INNER, [112.0, 90.0, 2.0]);
        place(&mut points, LEFT_EYE_OUTER, [140.0, 90.0, 4.0]);
        place(&mut points, LEFT_EYE_TOP, [126.0, 86.0, 0.0]);
        place(&mut points, LEFT_EYE_BOTTOM, [126.0, 94.0, 0.0]);
        points
    }

    /// `points` turned by `degrees` about the vertical axis through (100, ·, 30), as a head turns.
    fn turned(points: &[[f32; 3]], degrees: f32) -> Vec<[f32; 3]> {
        let (sin, cos) = degrees.to_radians().sin_cos();
        points
            .iter()
            .map(|&[x, y, z]| {
                let (dx, dz) = (x - 100.0, z - 30.0);
                [100.0 + dx * cos - dz * sin, y, 30.0 + dx * sin + dz * cos]
            })
            .collect()
    }

    #[test]
    fn a_face_turned_is_measured_by_its_turn() {
        let ahead = PhotoPose::of(&facing());
        assert!(ahead.turn_degrees.abs() < 0.5, "{ahead:?}");
        assert!(!ahead.turned_away() && !ahead.eyes_closed());
        for degrees in [-45.0, -20.0, 20.0, 45.0] {
            let pose = PhotoPose::of(&turned(&facing(), degrees));
            assert!((pose.turn_degrees - degrees).abs() < 0.5, "{degrees}: {pose:?}");
            assert_eq!(pose.turned_away(), degrees.abs() > MAX_TURN_DEGREES, "{degrees}: {pose:?}");
        }
    }

    #[test]
    fn closed_eyes_are_both_lids_together() {
        let mut points = facing();
        assert!((PhotoPose::of(&points).eye_openings[0] - 8.0 / 28.0).abs() < 1e-6);
        points[RIGHT_EYE_TOP][1] = 93.0;
        assert!(!PhotoPose::of(&points).eyes_closed(), "one closed eye is a wink");
        points[LEFT_EYE_TOP][1] = 93.5;
        let pose = PhotoPose::of(&points);
        assert!(pose.eyes_closed(), "{pose:?}");
    }
}
