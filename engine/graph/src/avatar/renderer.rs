//! The avatar renderer: one frame of the agent's face per 40 ms of the agent's audio, drawn from the
//! portrait by warping the lower-face mesh to the mouth shape that audio calls for (a photo's along its
//! own lips and jaw), opening the inner mouth (`mouth_interior`) where the lips part, closing the eyes in blinks at natural, random
//! intervals, and moving the whole head a little (`head`: idle sway, nod and tilt), all on media time.
//! The head region is redrawn only when its pose steps (every `POSE_FRAMES` frames), into a posed copy
//! of the portrait; every other frame redraws only the mouth's and the eyes' boxes from that copy. The
//! rest of the frame is the portrait, copied once. Nothing allocates per frame.

use super::head::{Head, POSE_FRAMES, Pose};
use super::image::{RgbImage, bounds, warp_polygon, warp_triangle};
use super::mouth::{MouthDriver, MouthShape};
use super::mouth_interior::{OpenMouth, draw_drawn, soften_edge};
use super::rig::{FaceMesh, FaceRig, Point, SEGMENTS};
use super::xorshift;
use crate::time::MediaTime;

/// Video frames per second.
pub const FPS: u64 = 25;
/// One video frame in 16 kHz media time (40 ms).
pub const FRAME_SAMPLES: u64 = 16_000 / FPS;

/// The eye's own upper lash line, just above its top, left out of that skin (eye half-heights).
const LASH_BAND: f32 = 0.4;
/// A blink: closing, closed, opening (media time).
const BLINK_CLOSE: MediaTime = MediaTime::from_millis(70);
const BLINK_HOLD: MediaTime = MediaTime::from_millis(30);
const BLINK_OPEN: MediaTime = MediaTime::from_millis(80);
/// Time between blinks: uniform in this range (people blink every 2–6 s while talking).
const BLINK_GAP_MS: (u64, u64) = (2_000, 6_000);

/// A rectangle of the frame: (left, top, right, bottom), right and bottom exclusive.
pub type Region = (usize, usize, usize, usize);

pub struct AvatarRenderer {
    portrait: RgbImage,
    rig: FaceRig,
    mesh: FaceMesh,
    deformed: Vec<Point>,
    inner_lips: Vec<Point>,
    /// Which mesh vertices the mouth left where they were this frame (their triangles are the posed
    /// portrait already, and are not drawn again).
    unmoved: Vec<bool>,
    head: Head,
    head_deformed: Vec<Point>,
    /// Moves the head when true; a still head is exactly the portrait wherever the mouth is closed.
    idle_motion: bool,
    /// The pose drawn into `posed`, once there is one.
    pose: Option<Pose>,
    /// The portrait with the head in `pose`, mouth closed, eyes open.
    posed: RgbImage,
    frame: RgbImage,
    mouth: MouthDriver,
    /// The box the head mesh can touch (its anchor ring's, which never moves).
    head_box: Region,
    /// The box the mouth mesh can touch in any pose (the mouth's anchor ring's, grown by the head's reach).
    face_box: Region,
    eye_boxes: [Region; 2],
    /// The regions the last `render` changed, the first `changed_count` of them.
    changed: [Region; 3],
    changed_count: usize,
    next_blink: MediaTime,
    random: u64,
}

impl AvatarRenderer {
    /// A renderer for `portrait` animated by `rig`, its head in idle motion; `seed` varies the blink times
    /// and the motion between sessions.
    pub fn new(portrait: RgbImage, rig: FaceRig, seed: u64) -> AvatarRenderer {
        let mesh = rig.mesh();
        let head = Head::new(&rig, seed);
        let (width, height) = (portrait.width, portrait.height);
        let reach = head.reach as f32;
        let grown = |points: &mut dyn Iterator<Item = Point>| {
            let (left, top, right, bottom) = bounds(points, width, height);
            bounds(
                [(left as f32 - reach, top as f32 - reach), (right as f32 + reach, bottom as f32 + reach)],
                width,
                height,
            )
        };
        let face_box = grown(&mut mesh.anchor().iter().copied());
        let eye_boxes = rig.eyes.map(|eye| {
            let (x, y) = eye.center;
            // Above the eye, the lid's skin that slides down over it in a blink.
            let corners = [
                (x - eye.half_width - 2.0, y - eye.half_height * (1.0 + eye.lid_skin) - 2.0),
                (x + eye.half_width + 2.0, y + eye.half_height + 3.0),
            ];
            grown(&mut corners.into_iter())
        });
        let head_box = bounds(head.anchor().iter().copied(), width, height);
        let mut renderer = AvatarRenderer {
            deformed: mesh.rest.clone(),
            inner_lips: Vec::with_capacity(SEGMENTS),
            unmoved: vec![false; mesh.rest.len()],
            head_deformed: head.rest.clone(),
            head,
            idle_motion: true,
            pose: None,
            posed: portrait.clone(),
            frame: portrait.clone(),
            portrait,
            rig,
            mesh,
            mouth: MouthDriver::default(),
            head_box,
            face_box,
            eye_boxes,
            changed: [head_box; 3],
            changed_count: 0,
            next_blink: MediaTime::ZERO,
            random: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        };
        renderer.next_blink = renderer.blink_gap();
        renderer
    }

    /// The same renderer with the head held still (the tests that compare with the portrait itself).
    pub fn without_idle_motion(mut self) -> AvatarRenderer {
        self.idle_motion = false;
        self
    }

    /// The regions the last `render` changed: the head's box when its pose stepped, otherwise the mouth's
    /// and the eyes' boxes. Everything else is as in the frame before.
    pub fn changed_regions(&self) -> &[Region] {
        &self.changed[..self.changed_count]
    }

    /// The last frame rendered (the portrait before the first).
    pub fn frame(&self) -> &RgbImage {
        &self.frame
    }

    pub fn width(&self) -> usize {
        self.frame.width
    }

    pub fn height(&self) -> usize {
        self.frame.height
    }

    /// The frame shown from `at` for 40 ms, whose sound is `audio` (the agent's 16 kHz samples sent with
    /// it). Returns the frame and the mouth shape drawn.
    pub fn render(&mut self, at: MediaTime, audio: &[f32]) -> (&RgbImage, MouthShape) {
        let shape = self.mouth.next(audio, 16_000);
        let pose = self.pose_at(at);
        if self.pose != Some(pose) {
            self.draw_head(pose);
            self.frame.copy_rect(&self.posed, self.head_box);
            (self.changed[0], self.changed_count) = (self.head_box, 1);
        } else {
            self.frame.copy_rect(&self.posed, self.face_box);
            for index in 0..2 {
                self.frame.copy_rect(&self.posed, self.eye_boxes[index]);
            }
            self.changed = [self.face_box, self.eye_boxes[0], self.eye_boxes[1]];
            self.changed_count = 3;
        }
        if !shape.is_closed() {
            self.draw_mouth(shape, pose);
        }
        let closed = self.eyelids(at);
        if closed > 0.0 {
            for index in 0..2 {
                self.draw_eyelid(index, closed, pose);
            }
        }
        (&self.frame, shape)
    }

    /// The head's pose for the frame at `at`: the idle motion's, stepped every `POSE_FRAMES` frames.
    fn pose_at(&self, at: MediaTime) -> Pose {
        if !self.idle_motion {
            return Pose::REST;
        }
        let step = at.0 / (FRAME_SAMPLES * POSE_FRAMES) * (FRAME_SAMPLES * POSE_FRAMES);
        self.head.pose_at(step as f32 / 16_000.0)
    }

    /// Redraws `posed`: the portrait's head region warped to `pose` (the portrait itself at rest).
    fn draw_head(&mut self, pose: Pose) {
        self.pose = Some(pose);
        if pose == Pose::REST {
            self.posed.copy_rect(&self.portrait, self.head_box);
            return;
        }
        self.head.deform(pose, &mut self.head_deformed);
        // Inside the ellipse ring the head moves rigidly: each pixel from where `pose` takes it from.
        let source = self.head.source_map(pose);
        warp_polygon(&self.portrait, source, &mut self.posed, &self.head_deformed[1..=SEGMENTS]);
        for triangle in &self.head.band {
            let [a, b, c] = triangle.map(usize::from);
            let src = [self.head.rest[a], self.head.rest[b], self.head.rest[c]];
            let dst = [self.head_deformed[a], self.head_deformed[b], self.head_deformed[c]];
            warp_triangle(&self.portrait, src, &mut self.posed, dst);
        }
    }

    fn draw_mouth(&mut self, shape: MouthShape, pose: Pose) {
        let moves = self.rig.deform(&self.mesh, shape.open, shape.spread, &mut self.deformed);
        for ((unmoved, rest), deformed) in self.unmoved.iter_mut().zip(&self.mesh.rest).zip(&self.deformed) {
            *unmoved = rest == deformed;
        }
        if pose != Pose::REST {
            for point in &mut self.deformed {
                *point = self.head.place(pose, *point);
            }
        }
        // The inside of the mouth, where the inner lip line has parted; then the lips and the skin around
        // them, warped from the portrait over its edges.
        self.inner_lips.clear();
        self.inner_lips.extend_from_slice(&self.deformed[..SEGMENTS]);
        if self.mesh.photo {
            let open =
                OpenMouth { rig: &self.rig, mesh: &self.mesh, moves: &moves, source: self.head.source_map(pose) };
            open.draw_photo(&self.portrait, &mut self.frame, &self.inner_lips);
        } else {
            let (cx, _) = self.head.place(pose, self.rig.mouth_center);
            draw_drawn(&self.rig, &mut self.frame, &self.inner_lips, cx);
        }
        for triangle in &self.mesh.triangles {
            let [a, b, c] = triangle.map(usize::from);
            if self.unmoved[a] && self.unmoved[b] && self.unmoved[c] {
                continue;
            }
            let src = [self.mesh.rest[a], self.mesh.rest[b], self.mesh.rest[c]];
            let dst = [self.deformed[a], self.deformed[b], self.deformed[c]];
            warp_triangle(&self.portrait, src, &mut self.frame, dst);
        }
        if self.mesh.photo {
            soften_edge(&mut self.frame, &self.inner_lips);
        }
    }

    /// How closed the eyes are at `at` (0 open … 1 shut); schedules the next blink after each one.
    fn eyelids(&mut self, at: MediaTime) -> f32 {
        if at < self.next_blink {
            return 0.0;
        }
        let into = at - self.next_blink;
        let ms = |t: MediaTime| t.as_secs_f64() as f32 * 1_000.0;
        if into < BLINK_CLOSE {
            ms(into) / ms(BLINK_CLOSE)
        } else if into < BLINK_CLOSE + BLINK_HOLD {
            1.0
        } else if into < BLINK_CLOSE + BLINK_HOLD + BLINK_OPEN {
            1.0 - ms(into - BLINK_CLOSE - BLINK_HOLD) / ms(BLINK_OPEN)
        } else {
            self.next_blink = at + self.blink_gap();
            0.0
        }
    }

    /// The eye `index` closed by `closed` (0 … 1): the portrait's own upper lid — the skin between its
    /// lash line and `lid_skin` eye half-heights above the eye — slides down over the eye, stretched from that band to the
    /// lid's edge (an arc sweeping from the top of the eye to its bottom), with a thin lash line along the
    /// edge. Nothing is painted over the eye but its own skin, moved, in the head's pose.
    fn draw_eyelid(&mut self, index: usize, closed: f32, pose: Pose) {
        let eye = self.rig.eyes[index];
        let (cx, cy) = self.head.place(pose, eye.center);
        let (left, top, right, bottom) = self.eye_boxes[index];
        let reach = eye.half_height + 1.0;
        for y in top..bottom {
            for x in left..right {
                let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
                let dx = (px - cx) / (eye.half_width + 1.0);
                if dx.abs() > 1.0 {
                    continue;
                }
                let arc = (1.0 - dx * dx).sqrt();
                let eye_top = cy - reach * arc;
                let crease = eye_top - eye.half_height * eye.lid_skin * arc;
                let edge = eye_top + 2.0 * reach * arc * closed;
                if py < crease || py >= edge + 0.8 {
                    continue;
                }
                let i = (y * self.frame.width + x) * 3;
                if py >= edge - 1.2 && py >= eye_top {
                    self.frame.rgb[i..i + 3].copy_from_slice(&eye.lash);
                    continue;
                }
                // [crease, edge) shows the skin of [crease, lashes), stretched down: the band stops short of
                // the eye's own upper lash line, which would smear across the closed lid.
                let lashes = eye_top - eye.half_height * LASH_BAND * arc;
                let along = (py - crease) / (edge - crease).max(1e-3);
                let source_y = crease + along * (lashes - crease);
                let skin = self.posed.sample(px - 0.5, source_y - 0.5);
                self.frame.rgb[i..i + 3].copy_from_slice(&skin);
            }
        }
    }

    /// The wait until the next blink (xorshift; deterministic for a seed).
    fn blink_gap(&mut self) -> MediaTime {
        let (low, high) = BLINK_GAP_MS;
        MediaTime::from_millis(low + xorshift(&mut self.random) % (high - low))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avatar::rig::EyeRig;

    fn portrait() -> (RgbImage, FaceRig) {
        let mut image = RgbImage::new(128, 128);
        for (i, px) in image.rgb.chunks_mut(3).enumerate() {
            px.copy_from_slice(&[200, 150 + (i % 7) as u8, 120]);
        }
        // Two dark eyes, 16 × 8, in skin.
        for (ex, ey) in [(48, 50), (80, 50)] {
            for y in ey - 3..=ey + 3 {
                for x in ex - 7..=ex + 7 {
                    let i = (y * 128 + x) * 3;
                    image.rgb[i..i + 3].copy_from_slice(&[40, 30, 30]);
                }
            }
        }
        let eye = EyeRig {
            center: (48.0, 50.0),
            half_width: 8.0,
            half_height: 4.0,
            lid: [190, 140, 110],
            lash: [30, 20, 20],
            lid_skin: EyeRig::LID_SKIN,
        };
        let rig = FaceRig {
            mouth_center: (64.0, 90.0),
            mouth_half_width: 12.0,
            lip_height: 3.0,
            chin: (64.0, 112.0),
            jaw_half_width: 34.0,
            nose_tip: (64.0, 72.0),
            eyes: [eye, EyeRig { center: (80.0, 50.0), ..eye }],
            mouth_interior: [70, 20, 30],
            teeth: [245, 245, 240],
            lips: None,
        };
        (image, rig)
    }

    fn voice() -> Vec<f32> {
        (0..640).map(|i| 0.3 * (i as f32 * 0.12).sin()).collect()
    }

    #[test]
    fn silence_shows_the_portrait_and_speech_opens_the_mouth() {
        let (image, rig) = portrait();
        let mut renderer = AvatarRenderer::new(image.clone(), rig, 7).without_idle_motion();
        let (frame, shape) = renderer.render(MediaTime::ZERO, &[0.0; 640]);
        assert!(shape.is_closed());
        assert_eq!(frame, &image, "a closed mouth with open eyes is the portrait itself");
        let (frame, shape) = renderer.render(MediaTime(640), &voice());
        assert!(shape.open > 0.3);
        let inside = frame.pixel(64, 93);
        assert!(inside.iter().map(|&c| u32::from(c)).sum::<u32>() < 130, "dark inside the open mouth: {inside:?}");
        let (frame, _) = renderer.render(MediaTime(1_280), &[0.0; 640]);
        assert_eq!(frame, &image, "closed again on the first silent frame");
    }

    #[test]
    fn the_head_moves_inside_its_region_in_small_steps() {
        let (portrait, rig) = crate::avatar::stock::stock_face("stock-sofia", 512).unwrap();
        let mut renderer = AvatarRenderer::new(portrait.clone(), rig.clone(), 11);
        let (left, top, right, bottom) = renderer.head_box;
        let (mx, my) = (rig.mouth_center.0 as usize, rig.mouth_center.1 as usize);
        let mouth_region = |image: &RgbImage| -> Vec<u8> {
            (my - 36..my + 36)
                .flat_map(|y| image.rgb[(y * 512 + mx - 48) * 3..(y * 512 + mx + 48) * 3].to_vec())
                .collect()
        };
        let mut previous = mouth_region(&portrait);
        let (mut steps, mut largest_step, mut moved) = (0, 0.0f64, false);
        for index in 0..(20 * FPS) {
            renderer.render(MediaTime(index * FRAME_SAMPLES), &[0.0; 640]);
            let frame = renderer.frame();
            for y in (0..512).step_by(3) {
                for x in (0..512).step_by(3) {
                    if !(left..right).contains(&x) || !(top..bottom).contains(&y) {
                        assert_eq!(frame.pixel(x, y), portrait.pixel(x, y), "({x}, {y}) is outside the head");
                    }
                }
            }
            let stepped = renderer.changed_regions() == [(left, top, right, bottom)];
            assert_eq!(stepped, index % POSE_FRAMES == 0, "frame {index}: the pose steps every {POSE_FRAMES} frames");
            let region = mouth_region(frame);
            moved |= region != mouth_region(&portrait);
            // As the browser test measures it: mean change of red and green per pixel.
            let change = region
                .chunks(3)
                .zip(previous.chunks(3))
                .map(|(a, b)| f64::from(a[0].abs_diff(b[0])) + f64::from(a[1].abs_diff(b[1])))
                .sum::<f64>()
                / (96.0 * 72.0);
            if stepped && index > 0 {
                steps += 1;
                largest_step = largest_step.max(change);
            }
            previous = region;
        }
        assert!(moved, "the head moves");
        assert_eq!(steps, 20 * FPS / POSE_FRAMES - 1);
        eprintln!("largest pose step in the mouth region: {largest_step:.2} per pixel");
        assert!(largest_step < 2.0, "a pose step changes the closed mouth's region by {largest_step} per pixel");
    }

    /// A blink covers the eye with the portrait's own skin from above it (its red channel is the skin's
    /// 200 here, never the rig's painted lid colour) or the lash line, and the eye shows again after.
    #[test]
    fn the_eyes_blink_within_six_seconds_and_open_again() {
        let (image, rig) = portrait();
        let mut renderer = AvatarRenderer::new(image, rig, 3).without_idle_motion();
        let (lid, lash) = (renderer.rig.eyes[0].lid, renderer.rig.eyes[0].lash);
        let (mut shut, mut open_after) = (0, false);
        for frame in 0..(7 * FPS) {
            let (image, _) = renderer.render(MediaTime(frame * FRAME_SAMPLES), &[0.0; 640]);
            let centre = image.pixel(48, 50);
            assert_ne!(centre, lid, "frame {frame}: no painted lid");
            if centre[0] == 200 || centre == lash {
                shut += 1;
            } else if shut > 0 {
                assert_eq!(centre, [40, 30, 30], "frame {frame}: the eye itself again");
                open_after = true;
            }
        }
        assert!((1..=8).contains(&shut), "a blink or two, a few frames each: {shut} frames");
        assert!(open_after, "the eye opens again");
    }
}
