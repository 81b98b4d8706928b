//! The head's idle motion: a slow, small sway, nod and tilt of the whole head, drawn by warping only the
//! head region (an ellipse around the face) of the portrait. Inside the ellipse the head moves rigidly
//! (one rotation and translation, the pose: `source_map` maps it whole); a band around it blends to the untouched portrait at its
//! outer ring, which never moves, so there are no seams and nothing outside the band is ever redrawn.
//! The pose is a sum of slow sinusoids with per-session phases, and a breath's rise and fall at a
//! per-session rate, sampled on media time every
//! `POSE_FRAMES` video frames: deterministic for a seed, and cheap (the head is redrawn 6 times a
//! second, the mouth and eyes every frame).

use super::image::Affine;
use super::rig::{FaceRig, Point, SEGMENTS};
use super::xorshift;

/// Video frames between two poses (160 ms at 25 fps): steps of a few tenths of a pixel.
pub const POSE_FRAMES: u64 = 4;
/// Largest sideways and vertical shift, as a fraction of the eye-to-chin distance.
const SHIFT: (f32, f32) = (0.010, 0.007);
/// Largest tilt (radians; 0.9°).
const TILT: f32 = 0.9 * std::f32::consts::PI / 180.0;
/// Periods of the sinusoids (seconds), two per motion, none a multiple of another.
const PERIODS: [(f32, f32); 3] = [(9.7, 5.3), (5.9, 3.7), (7.3, 4.1)];
/// Breathing: the head rises and falls by this fraction of the eye-to-chin distance, once a breath.
const BREATH: f32 = 0.005;
/// A breath's length (seconds), drawn per session in this range (12–20 breaths a minute).
const BREATH_SECONDS: (f32, f32) = (3.0, 5.0);
/// The band where the head blends into the portrait: from the ellipse (moves fully) to this scale of
/// it (never moves).
const ANCHOR_SCALE: f32 = 1.15;

/// A rigid motion of the head: rotation by `tilt` about `pivot`, then a shift.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pose {
    pub tilt: f32,
    pub shift: Point,
}

impl Pose {
    pub const REST: Pose = Pose { tilt: 0.0, shift: (0.0, 0.0) };
}

/// The head region of one portrait and its motion.
#[derive(Debug, Clone)]
pub struct Head {
    /// Centre vertex, the ellipse ring (moves fully), the anchor ring (fixed).
    pub rest: Vec<Point>,
    /// The band's triangles, between the ellipse ring and the anchor ring (inside the ring the head
    /// moves rigidly: `source_map` maps it whole).
    pub band: Vec<[u16; 3]>,
    /// The neck, which the head tilts about.
    pivot: Point,
    /// Largest shift (x, y) in pixels.
    amplitude: Point,
    phases: [f32; 7],
    /// Seconds per breath (per session).
    breath_seconds: f32,
    /// Breathing's rise and fall in pixels.
    breath: f32,
    /// How far any point inside the ellipse can move, in whole pixels (for the regions around it).
    pub reach: usize,
}

impl Head {
    /// The head of `rig`, containing its mouth mesh and eyes; `seed` sets the motion's phases.
    pub fn new(rig: &FaceRig, seed: u64) -> Head {
        let eyes_y = (rig.eyes[0].center.1 + rig.eyes[1].center.1) / 2.0;
        let center_x = (rig.eyes[0].center.0 + rig.eyes[1].center.0) / 2.0;
        let eye_to_chin = (rig.chin.1 - eyes_y).max(1.0);
        let center = (center_x, eyes_y + 0.35 * eye_to_chin);
        // The ellipse holds the forehead to below the chin; widened until it holds the mouth mesh (with
        // a margin) and both eyes, whatever the face's proportions.
        let mut radii = (rig.jaw_half_width * 1.3, eye_to_chin * 0.9);
        let mouth_mesh = rig.mesh();
        let must_hold = mouth_mesh.anchor().iter().copied().chain(rig.eyes.iter().flat_map(|eye| {
            let (x, y) = eye.center;
            [(x - eye.half_width * 1.5, y), (x + eye.half_width * 1.5, y), (x, y - eye.half_height * 3.0)]
        }));
        for (x, y) in must_hold {
            let (dx, dy) = ((x - center.0) / radii.0, (y - center.1) / radii.1);
            let reach = (dx * dx + dy * dy).sqrt();
            if reach > 0.9 {
                radii = (radii.0 * reach / 0.9, radii.1 * reach / 0.9);
            }
        }
        let mut rest = Vec::with_capacity(1 + 2 * SEGMENTS);
        rest.push(center);
        for scale in [1.0, ANCHOR_SCALE] {
            for segment in 0..SEGMENTS {
                let angle = segment as f32 / SEGMENTS as f32 * std::f32::consts::TAU;
                let (sin, cos) = angle.sin_cos();
                rest.push((center.0 + radii.0 * scale * cos, center.1 + radii.1 * scale * sin));
            }
        }
        let mut band = Vec::with_capacity(2 * SEGMENTS);
        for segment in 0..SEGMENTS {
            let next = (segment + 1) % SEGMENTS;
            let (a, b) = (1 + segment, 1 + next);
            let (c, d) = (1 + SEGMENTS + segment, 1 + SEGMENTS + next);
            band.push([a as u16, b as u16, c as u16]);
            band.push([b as u16, d as u16, c as u16]);
        }
        let pivot = (center_x, rig.chin.1 + 0.35 * eye_to_chin);
        let amplitude = (SHIFT.0 * eye_to_chin, SHIFT.1 * eye_to_chin);
        let breath = BREATH * eye_to_chin;
        // The farthest a point of the ellipse is from the pivot, turned by the largest tilt.
        let farthest = radii.0.hypot(pivot.1 - (center.1 - radii.1));
        let reach = (amplitude.0.hypot(amplitude.1 + breath) + farthest * TILT).ceil() as usize + 1;
        let mut random = seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1;
        let phases =
            std::array::from_fn(|_| (xorshift(&mut random) % 10_000) as f32 / 10_000.0 * std::f32::consts::TAU);
        let (shortest, longest) = BREATH_SECONDS;
        let breath_seconds = shortest + (xorshift(&mut random) % 1_000) as f32 / 1_000.0 * (longest - shortest);
        Head { rest, band, pivot, amplitude, phases, breath_seconds, breath, reach }
    }

    /// The head's pose at `seconds` of media time.
    pub fn pose_at(&self, seconds: f32) -> Pose {
        let wave = |index: usize| {
            let (slow, fast) = PERIODS[index];
            let tau = std::f32::consts::TAU;
            0.75 * (tau * seconds / slow + self.phases[2 * index]).sin()
                + 0.25 * (tau * seconds / fast + self.phases[2 * index + 1]).sin()
        };
        let breathing = self.breath * (std::f32::consts::TAU * seconds / self.breath_seconds + self.phases[6]).sin();
        Pose { shift: (self.amplitude.0 * wave(0), self.amplitude.1 * wave(1) + breathing), tilt: TILT * wave(2) }
    }

    /// Where `point` (inside the ellipse) goes in `pose`.
    #[inline]
    pub fn place(&self, pose: Pose, (x, y): Point) -> Point {
        let (sin, cos) = pose.tilt.sin_cos();
        let (px, py) = self.pivot;
        let (dx, dy) = (x - px, y - py);
        (px + dx * cos - dy * sin + pose.shift.0, py + dx * sin + dy * cos + pose.shift.1)
    }

    /// The inverse of `place` as an affine map: the point of the portrait that `pose` moves to a point.
    pub fn source_map(&self, pose: Pose) -> Affine {
        let (sin, cos) = pose.tilt.sin_cos();
        let (px, py) = self.pivot;
        // source = pivot + R(−tilt)·(point − shift − pivot)
        let (tx, ty) = (-pose.shift.0 - px, -pose.shift.1 - py);
        Affine { xx: cos, xy: sin, x0: px + cos * tx + sin * ty, yx: -sin, yy: cos, y0: py - sin * tx + cos * ty }
    }

    /// The head mesh's vertices in `pose`, into `out`: the centre and ellipse placed, the anchor fixed.
    pub fn deform(&self, pose: Pose, out: &mut [Point]) {
        for (index, (&point, out)) in self.rest.iter().zip(out.iter_mut()).enumerate() {
            *out = if index <= SEGMENTS { self.place(pose, point) } else { point };
        }
    }

    /// The anchor ring: nothing outside it moves.
    pub fn anchor(&self) -> &[Point] {
        &self.rest[1 + SEGMENTS..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avatar::stock::{STOCK, stock_face};

    #[test]
    fn the_head_holds_the_face_and_moves_a_little_smoothly() {
        for (face_id, _) in STOCK {
            let (_, rig) = stock_face(face_id, 512).unwrap();
            let head = Head::new(&rig, 5);
            let (center, ring) = (head.rest[0], &head.rest[1..=SEGMENTS]);
            let radii = (ring[0].0 - center.0, ring[SEGMENTS / 4].1 - center.1);
            let inside = |(x, y): Point| ((x - center.0) / radii.0).powi(2) + ((y - center.1) / radii.1).powi(2) <= 1.0;
            assert!(rig.mesh().rest.iter().all(|&p| inside(p)), "{face_id}: the mouth mesh moves with the head");
            assert!(rig.eyes.iter().all(|eye| inside(eye.center)), "{face_id}: so do the eyes");
            let mut previous = head.place(head.pose_at(0.0), rig.mouth_center);
            let mut largest = 0.0f32;
            for step in 1..(60 * 25 / POSE_FRAMES) {
                let seconds = (step * POSE_FRAMES) as f32 / 25.0;
                let mouth = head.place(head.pose_at(seconds), rig.mouth_center);
                let moved = (mouth.0 - previous.0).hypot(mouth.1 - previous.1);
                assert!(moved < 1.0, "{face_id}: the mouth steps {moved} px at {seconds} s");
                let from_rest = (mouth.0 - rig.mouth_center.0).hypot(mouth.1 - rig.mouth_center.1);
                assert!(from_rest <= head.reach as f32, "{face_id}: {from_rest} px from rest");
                largest = largest.max(from_rest);
                previous = mouth;
            }
            assert!(largest > 1.5, "{face_id}: the head visibly moves ({largest} px at most)");
        }
    }

    #[test]
    fn two_sessions_breathe_at_their_own_pace() {
        let (_, rig) = stock_face("stock-amara", 512).unwrap();
        let (one, two) = (Head::new(&rig, 1), Head::new(&rig, 2));
        for head in [&one, &two] {
            assert!((BREATH_SECONDS.0..=BREATH_SECONDS.1).contains(&head.breath_seconds), "{}", head.breath_seconds);
            assert!(head.breath > 0.5, "a visible rise and fall: {} px", head.breath);
        }
        assert_ne!(one.breath_seconds, two.breath_seconds, "not in step");
    }

    #[test]
    fn the_rest_pose_moves_nothing_and_the_anchor_never_moves() {
        let (_, rig) = stock_face("stock-amara", 512).unwrap();
        let head = Head::new(&rig, 1);
        let mut out = vec![(0.0, 0.0); head.rest.len()];
        head.deform(Pose::REST, &mut out);
        assert_eq!(out, head.rest);
        let pose = head.pose_at(1.7);
        let moved = head.place(pose, (250.0, 300.0));
        let back = head.source_map(pose).apply(moved);
        assert!((back.0 - 250.0).abs() < 1e-3 && (back.1 - 300.0).abs() < 1e-3, "{back:?}");
        head.deform(head.pose_at(3.3), &mut out);
        assert_eq!(&out[1 + SEGMENTS..], head.anchor());
        assert_ne!(out[0], head.rest[0]);
    }
}
