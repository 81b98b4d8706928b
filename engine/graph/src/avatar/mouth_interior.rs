//! The inside of an open mouth, drawn where the inner lip line has parted (before the lips are warped
//! over its edges). A photo's mouth is its own: the teeth it shows are reused where they are — the upper
//! ones stay with the head, the lower ones drop with the jaw — and the gap between them is the cavity, in
//! the lips' own colour deep in shadow; a photo with closed lips gets upper teeth lit like its skin under
//! the upper lip. A drawing's mouth is painted in its own colours.

use super::image::{Affine, RgbImage, fill_polygon};
use super::rig::{COLUMNS, FaceMesh, FaceRig, Point, column_vertices};

/// Below this opening (pixels) the cavity shows as the lips' shadow rather than the dark of an open mouth.
const SLIT_PIXELS: f32 = 4.0;

/// One frame's open mouth: the rig and its mesh, how far each column's lips moved, and where each frame
/// pixel comes from in the portrait (the head's pose undone).
pub struct OpenMouth<'a> {
    pub rig: &'a FaceRig,
    pub mesh: &'a FaceMesh,
    /// (upper lip up, lower lip down) per column, from `FaceRig::column_moves`.
    pub moves: &'a [(f32, f32); COLUMNS],
    pub source: Affine,
}

/// The mouth at one point across it (portrait pixels): the inner lips at rest and how far they moved.
struct Column {
    upper: f32,
    lower: f32,
    up: f32,
    down: f32,
}

impl OpenMouth<'_> {
    /// The column at portrait `x`, interpolated between the mesh's columns (held at the corners).
    fn column_at(&self, x: f32) -> Column {
        let rest = &self.mesh.rest;
        let at = |column: usize| {
            let (upper, lower) = column_vertices(column);
            let (up, down) = self.moves[column];
            (rest[lower].0, Column { upper: rest[upper].1, lower: rest[lower].1, up, down })
        };
        // Column 0 is the corner at the largest x; x falls towards the last column.
        let (mut previous_x, mut previous) = at(0);
        if x >= previous_x {
            return previous;
        }
        for column in 1..COLUMNS {
            let (next_x, next) = at(column);
            if x >= next_x {
                let t = ((previous_x - x) / (previous_x - next_x).max(1e-3)).clamp(0.0, 1.0);
                let mix = |a: f32, b: f32| a + (b - a) * t;
                return Column {
                    upper: mix(previous.upper, next.upper),
                    lower: mix(previous.lower, next.lower),
                    up: mix(previous.up, next.up),
                    down: mix(previous.down, next.down),
                };
            }
            (previous_x, previous) = (next_x, next);
        }
        previous
    }

    /// The cavity's colour at a point `low` of the way down an opening `gap` pixels high and `side` of the
    /// way to a corner: darkest deep in a wide mouth; a slit between lips that nearly meet is their shadow,
    /// lighter.
    fn cavity(&self, low: f32, side: f32, gap: f32) -> [u8; 3] {
        let low = low.clamp(0.0, 1.0);
        // Darkest just under the upper teeth, the tongue's lighter red towards the lower lip.
        let tongue = 1.0 + 0.9 * low * low;
        let depth = (0.8 + 0.2 * low) * (1.0 - 0.4 * side * side) * tongue;
        let slit = 1.0 + 1.3 * (1.0 - gap / SLIT_PIXELS).clamp(0.0, 1.0);
        self.rig.mouth_interior.map(|c| (f32::from(c) * depth * slit).min(255.0) as u8)
    }

    /// Draws a photo's open mouth inside `inner_lips` (frame pixels).
    pub fn draw_photo(&self, portrait: &RgbImage, frame: &mut RgbImage, inner_lips: &[Point]) {
        let teeth_shown = self.rig.lips.as_ref().is_some_and(|lips| lips.teeth_shown);
        let (cx, half_width) = (self.rig.mouth_center.0, self.rig.mouth_half_width.max(1.0));
        fill_polygon(frame, inner_lips, |x, y| {
            let (px, py) = self.source.apply((x as f32 + 0.5, y as f32 + 0.5));
            let column = self.column_at(px);
            let (top, bottom) = (column.upper - column.up, column.lower + column.down);
            let low = (py - top) / (bottom - top + 1.0);
            let side = ((px - cx) / half_width).clamp(-1.0, 1.0);
            if teeth_shown && column.lower - column.upper >= 1.5 {
                // The photo's own teeth: the upper ones where they were (under a lifted lip, their top
                // row), the lower ones moved with the jaw; between them, the cavity.
                let split = column.upper + (column.lower - column.upper) * 0.55;
                if py < split {
                    return portrait.sample(px - 0.5, py.max(column.upper + 1.0) - 0.5);
                }
                let jaw_y = py - column.down;
                if jaw_y >= split && jaw_y <= column.lower {
                    return portrait.sample(px - 0.5, jaw_y - 0.5);
                }
                return self.cavity(low, side, bottom - top);
            }
            // Upper teeth under the upper lip, following the arch of the jaw, in the lip's shadow at the top.
            let across = ((px - cx) / (half_width * 0.62)).clamp(-1.0, 1.0);
            let height = (bottom - top).min(self.rig.lip_height * 1.6) * 0.45 * (1.0 - 0.45 * across * across);
            if py < top + height && across.abs() < 1.0 {
                let shadow = 0.7 + 0.3 * ((py - top) / height.max(1.0)).clamp(0.0, 1.0);
                let shade = (1.0 - 0.3 * across * across) * shadow;
                return self.rig.teeth.map(|c| (f32::from(c) * shade) as u8);
            }
            self.cavity(low, side, bottom - top)
        });
    }
}

/// Softens the edge of an opened photo mouth (after its lips are drawn over it): each pixel along the
/// inner lip line becomes the mean of its 3×3 neighbourhood, so lips meet the cavity as a photo's would,
/// not with a cut edge.
pub fn soften_edge(frame: &mut RgbImage, inner_lips: &[Point]) {
    let (width, height) = (frame.width as i64, frame.height as i64);
    for (index, &(ax, ay)) in inner_lips.iter().enumerate() {
        let (bx, by) = inner_lips[(index + 1) % inner_lips.len()];
        let steps = ((bx - ax).abs().max((by - ay).abs()) * 1.5).ceil().max(1.0) as usize;
        for step in 0..steps {
            let t = step as f32 / steps as f32;
            let (x, y) = ((ax + (bx - ax) * t) as i64, (ay + (by - ay) * t) as i64);
            if x < 1 || y < 1 || x >= width - 1 || y >= height - 1 {
                continue;
            }
            let mut sum = [0u32; 3];
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let pixel = frame.pixel((x + dx) as usize, (y + dy) as usize);
                    for c in 0..3 {
                        sum[c] += u32::from(pixel[c]);
                    }
                }
            }
            let i = ((y * width + x) * 3) as usize;
            for c in 0..3 {
                frame.rgb[i + c] = ((sum[c] + 4) / 9) as u8;
            }
        }
    }
}

/// Draws a drawing's open mouth inside `inner_lips` (frame pixels): its own cavity colour, darker towards
/// the back and the corners, and its upper teeth along the arch of the jaw; `cx` is the mouth's middle
/// in the frame.
pub fn draw_drawn(rig: &FaceRig, frame: &mut RgbImage, inner_lips: &[Point], cx: f32) {
    let top = inner_lips.iter().map(|p| p.1).fold(f32::MAX, f32::min);
    let bottom = inner_lips.iter().map(|p| p.1).fold(f32::MIN, f32::max);
    let teeth_bottom = top + (bottom - top).min(rig.lip_height * 1.6) * 0.45;
    let teeth_half_width = rig.mouth_half_width * 0.62;
    let (interior, teeth) = (rig.mouth_interior, rig.teeth);
    let mouth_half_width = rig.mouth_half_width;
    fill_polygon(frame, inner_lips, |x, y| {
        let (x, y) = (x as f32 + 0.5, y as f32 + 0.5);
        // The teeth's lower edge follows the arch of the jaw; they darken towards the corners.
        let across = ((x - cx) / teeth_half_width).clamp(-1.0, 1.0);
        let arch = teeth_bottom - (teeth_bottom - top) * 0.45 * across * across;
        if y < arch && across.abs() < 1.0 {
            let shade = 1.0 - 0.3 * across * across;
            teeth.map(|c| (f32::from(c) * shade) as u8)
        } else {
            // Darker towards the back of the mouth (the middle, low) and in the corners' shadow.
            let low = ((y - top) / (bottom - top + 1.0)).clamp(0.0, 1.0);
            let side = ((x - cx) / mouth_half_width).clamp(-1.0, 1.0);
            let depth = (1.0 - 0.35 * low) * (1.0 - 0.4 * side * side);
            interior.map(|c| (f32::from(c) * depth) as u8)
        }
    });
}
