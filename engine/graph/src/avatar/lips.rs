//! A photo's own mouth, read from its landmarks when it is rigged: the inner and outer lip contours and
//! the jaw line (MediaPipe face-mesh indices), whether the photo shows its teeth between its lips, and the
//! colours of the mouth's inside, taken from the photo. The mesh the renderer warps is built along these
//! contours (`rings`), so the lips part along their real line, keep their thickness, and the chin drops
//! with the jaw; the skin around follows by less, and an anchor ring under the chin never moves.

use super::image::RgbImage;
use super::rig::{FaceRig, Point, RingFollow, SEGMENTS};

/// A photo's widest opening between the inner lips, as a share of the distance from the lips to the chin.
pub const GAP_OF_CHIN: f32 = 0.30;
/// A photo that shows its teeth opens wider than its own gap for a vowel, by this factor at least.
pub const WIDER_THAN_SMILE: f32 = 1.7;
/// How much of an opening wider than the photo's own the jaw carries (the rest: the upper lip lifts).
pub const JAW_SHARE: f32 = 0.82;
/// How each ring of a photo's mesh follows the mouth: the inner lip line and the outer lip edge move
/// together (the lips keep their thickness), the skin between the lips and the jaw line follows the jaw
/// fully below the mouth and the lip's lift by half above it, the jaw ring (just under the jaw line)
/// carries the chin down with the jaw, and the anchor ring (under the chin, beside the cheeks, under the nose) never moves.
pub const PHOTO_FOLLOW: [RingFollow; 5] = [
    RingFollow { up: 1.0, down: 1.0, spread: 1.0 },
    RingFollow { up: 1.0, down: 1.0, spread: 1.0 },
    RingFollow { up: 0.45, down: 1.0, spread: 0.5 },
    RingFollow { up: 0.0, down: 1.0, spread: 0.0 },
    RingFollow { up: 0.0, down: 0.0, spread: 0.0 },
];

/// Lips whose landmarks are less than this far apart (pixels, or a twentieth of the mouth's width) are
/// closed: the line where they meet is read from the photo.
const CLOSED_GAP: f32 = 3.5;
/// A tooth's colour under white light.
const IVORY: [f32; 3] = [238.0, 228.0, 208.0];
/// How far under the landmarks' jaw line the moving jaw ring passes (a share of the lips-to-chin distance
/// at the chin, less towards the jaw's angles).
const JAW_LINE_BELOW: f32 = 0.15;
/// MediaPipe face-mesh indices, each line from the person's right mouth corner to the left.
const INNER_UPPER: [usize; 11] = [78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308];
const INNER_LOWER: [usize; 11] = [78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308];
const OUTER_UPPER: [usize; 11] = [61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291];
const OUTER_LOWER: [usize; 11] = [61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291];
/// The jaw line below the mouth, from the person's right jaw angle through the chin to the left.
const JAW: [usize; 13] = [172, 136, 150, 149, 176, 148, 152, 377, 400, 378, 379, 365, 397];

/// A photo's lips and jaw line in portrait pixels, each a polyline across the face.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LipContours {
    pub inner_upper: Vec<Point>,
    pub inner_lower: Vec<Point>,
    pub outer_upper: Vec<Point>,
    pub outer_lower: Vec<Point>,
    pub jaw: Vec<Point>,
    /// The photo shows its teeth between the lips: opening the mouth reuses them (the upper ones stay
    /// with the head, the lower ones drop with the jaw) instead of drawing teeth.
    pub teeth_shown: bool,
}

/// The colours of a photo's open mouth, from the photo itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MouthColours {
    /// The cavity behind the lips: the lips' own colour in deep shadow.
    pub interior: [u8; 3],
    /// Teeth: the photo's own where it shows them, otherwise a tooth colour lit like the photo's skin.
    pub teeth: [u8; 3],
    pub teeth_shown: bool,
}

impl LipContours {
    /// The contours from the face mesh's points (portrait pixels).
    pub fn from_landmarks(points: &[Point]) -> LipContours {
        let line = |indices: &[usize]| indices.iter().map(|&index| points[index]).collect::<Vec<_>>();
        LipContours {
            inner_upper: line(&INNER_UPPER),
            inner_lower: line(&INNER_LOWER),
            outer_upper: line(&OUTER_UPPER),
            outer_lower: line(&OUTER_LOWER),
            jaw: line(&JAW),
            teeth_shown: false,
        }
    }

    pub fn scaled(&self, factor: f32) -> LipContours {
        let scale = |line: &[Point]| line.iter().map(|&(x, y)| (x * factor, y * factor)).collect();
        LipContours {
            inner_upper: scale(&self.inner_upper),
            inner_lower: scale(&self.inner_lower),
            outer_upper: scale(&self.outer_upper),
            outer_lower: scale(&self.outer_lower),
            jaw: scale(&self.jaw),
            teeth_shown: self.teeth_shown,
        }
    }

    /// Closed lips meet where the photo is darkest between them: the landmarks' inner lip line (a smooth
    /// guess on thin lips, often a few pixels off) is moved to it. For each point between the corners the
    /// darkest row (averaged over 5 pixels across) within the middle half of each lip's thickness around
    /// it is found; the line keeps its landmark shape and moves by the median of those offsets (half as
    /// far next to the corners, which stay). A photo whose lips are apart keeps its lines.
    pub fn find_closed_line(&mut self, portrait: &RgbImage) {
        let (left, right) = x_range(&self.inner_upper);
        if self.middle_gap() >= CLOSED_GAP.max((right - left) * 0.05) {
            return;
        }
        let last = self.inner_upper.len() - 1;
        let mut offsets: Vec<f32> = (1..last)
            .filter_map(|index| {
                let (x, y) = self.inner_upper[index];
                let above = (y - y_at(&self.outer_upper, x)).max(1.0) * 0.5;
                let below = (y_at(&self.outer_lower, x) - y).max(1.0) * 0.5;
                let darkness = |row: i64| {
                    let py = row.clamp(0, portrait.height as i64 - 1) as usize;
                    (-2..=2)
                        .map(|dx| {
                            let px = (x.round() as i64 + dx).clamp(0, portrait.width as i64 - 1) as usize;
                            luma(portrait.pixel(px, py).map(f32::from))
                        })
                        .sum::<f32>()
                };
                let rows = (y - above).round() as i64..=(y + below).round() as i64;
                rows.min_by(|&a, &b| darkness(a).total_cmp(&darkness(b))).map(|row| row as f32 + 0.5 - y)
            })
            .collect();
        if offsets.is_empty() {
            return;
        }
        offsets.sort_by(f32::total_cmp);
        let offset = offsets[offsets.len() / 2];
        for index in 1..last {
            let share = if index == 1 || index == last - 1 { 0.5 } else { 1.0 };
            for line in [&mut self.inner_upper, &mut self.inner_lower] {
                if let Some(point) = line.get_mut(index) {
                    point.1 += offset * share;
                }
            }
        }
    }

    /// The gap between the inner lips at the middle of the mouth.
    fn middle_gap(&self) -> f32 {
        let (left, right) = x_range(&self.inner_upper);
        let middle = (left + right) / 2.0;
        (y_at(&self.inner_lower, middle) - y_at(&self.inner_upper, middle)).max(0.0)
    }

    /// The mesh's five rings at rest (`SEGMENTS` vertices each): the inner lip line, the outer lip edge,
    /// the skin half way to the jaw line, the jaw line (the upper half an arc under the nose), the anchor.
    /// Vertex `s` of a ring lies at `x = centre + half-width · cos(s/SEGMENTS · 2π)` across the mouth, on
    /// the ring's upper line where that angle's sine is negative and on its lower line where positive.
    pub fn rings(&self, rig: &FaceRig) -> Vec<Point> {
        let cy = rig.mouth_center.1;
        let chin = (rig.chin.1 - cy).max(1.0);
        let nose = (cy - rig.nose_tip.1).max(1.0);
        let lip_top = cy - self.outer_upper.iter().map(|p| p.1).fold(f32::MAX, f32::min);
        let inner = ring_along(&self.inner_upper, &self.inner_lower);
        let outer = ring_along(&self.outer_upper, &self.outer_lower);
        let (jaw_left, jaw_right) = x_range(&self.jaw);
        let (jaw_centre, jaw_half) = ((jaw_left + jaw_right) / 2.0, ((jaw_right - jaw_left) / 2.0).max(1.0));
        let under_nose = (nose * 0.6).max(lip_top * 1.3);
        let mut jaw_ring = Vec::with_capacity(SEGMENTS);
        let mut anchor = Vec::with_capacity(SEGMENTS);
        for segment in 0..SEGMENTS {
            let (sin, cos) = angle(segment);
            let x = jaw_centre + jaw_half * cos;
            // Below the mouth: the jaw line, a little under it so the chin's own edge moves with the jaw.
            let y = if sin > 0.0 {
                (y_at(&self.jaw, x) + chin * JAW_LINE_BELOW * sin).max(cy + chin * 0.3 * sin)
            } else {
                cy + under_nose * sin
            };
            jaw_ring.push((x, y));
            let reach = if sin > 0.0 { chin * 1.5 } else { under_nose * 1.35 };
            anchor.push((jaw_centre + jaw_half * 1.1 * cos, cy + reach * sin));
        }
        let between = outer.iter().zip(&jaw_ring).map(|(&(ox, oy), &(jx, jy))| ((ox + jx) / 2.0, (oy + jy) / 2.0));
        let between: Vec<Point> = between.collect();
        [inner, outer, between, jaw_ring, anchor].concat()
    }
}

/// The (sine, cosine) of vertex `segment`'s angle.
fn angle(segment: usize) -> (f32, f32) {
    (segment as f32 / SEGMENTS as f32 * std::f32::consts::TAU).sin_cos()
}

/// One ring between an upper and a lower line that share their end points (the mouth's corners).
fn ring_along(upper: &[Point], lower: &[Point]) -> Vec<Point> {
    let (left, right) = x_range(upper);
    let (centre, half) = ((left + right) / 2.0, (right - left) / 2.0);
    (0..SEGMENTS)
        .map(|segment| {
            let (sin, cos) = angle(segment);
            let x = centre + half * cos;
            let y = if sin > 1e-3 {
                y_at(lower, x)
            } else if sin < -1e-3 {
                y_at(upper, x)
            } else {
                (y_at(lower, x) + y_at(upper, x)) / 2.0
            };
            (x, y)
        })
        .collect()
}

fn x_range(line: &[Point]) -> (f32, f32) {
    line.iter().fold((f32::MAX, f32::MIN), |(low, high), p| (low.min(p.0), high.max(p.0)))
}

/// The height of a polyline at `x`: linear between the two points around it (by x), held at its ends.
pub fn y_at(line: &[Point], x: f32) -> f32 {
    let mut below: Option<Point> = None;
    let mut above: Option<Point> = None;
    for &point in line {
        if point.0 <= x && below.is_none_or(|b| point.0 > b.0) {
            below = Some(point);
        }
        if point.0 >= x && above.is_none_or(|a| point.0 < a.0) {
            above = Some(point);
        }
    }
    match (below, above) {
        (Some((x0, y0)), Some((x1, y1))) if x1 > x0 => y0 + (y1 - y0) * (x - x0) / (x1 - x0),
        (Some((_, y)), _) | (None, Some((_, y))) => y,
        (None, None) => 0.0,
    }
}

/// Rec. 601 luma of a colour.
fn luma(colour: [f32; 3]) -> f32 {
    0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
}

/// The pixels of `portrait` in the middle half of the mouth's width between `top(x)` and `bottom(x)`,
/// shrunk by `inset` of that height at each side.
fn pixels_between(
    portrait: &RgbImage,
    lips: &LipContours,
    top: &[Point],
    bottom: &[Point],
    inset: f32,
) -> Vec<[f32; 3]> {
    let (left, right) = x_range(&lips.inner_upper);
    let quarter = (right - left) / 4.0;
    let mut pixels = Vec::new();
    for x in (left + quarter).round() as i64..=(right - quarter).round() as i64 {
        let (upper, lower) = (y_at(top, x as f32), y_at(bottom, x as f32));
        let margin = (lower - upper) * inset;
        for y in (upper + margin).ceil() as i64..=(lower - margin).floor() as i64 {
            if x >= 0 && y >= 0 && (x as usize) < portrait.width && (y as usize) < portrait.height {
                pixels.push(portrait.pixel(x as usize, y as usize).map(f32::from));
            }
        }
    }
    pixels
}

fn mean(pixels: &[[f32; 3]]) -> Option<[f32; 3]> {
    if pixels.is_empty() {
        return None;
    }
    let mut sum = [0.0f32; 3];
    for pixel in pixels {
        for c in 0..3 {
            sum[c] += pixel[c];
        }
    }
    Some(sum.map(|total| total / pixels.len() as f32))
}

fn to_colour(colour: [f32; 3]) -> [u8; 3] {
    colour.map(|c| c.round().clamp(0.0, 255.0) as u8)
}

/// The colours of the photo's open mouth, and whether it shows its teeth: a gap between the inner lips
/// of at least a tenth of the mouth's width whose brighter half is clearly brighter than the lips.
pub fn mouth_colours(portrait: &RgbImage, lips: &LipContours, skin: [u8; 3]) -> MouthColours {
    let lip = mean(&pixels_between(portrait, lips, &lips.outer_upper, &lips.inner_upper, 0.25))
        .or_else(|| mean(&pixels_between(portrait, lips, &lips.inner_lower, &lips.outer_lower, 0.25)))
        .unwrap_or([150.0, 80.0, 80.0]);
    let interior = to_colour([lip[0] * 0.34, lip[1] * 0.22, lip[2] * 0.24]);
    let (left, right) = x_range(&lips.inner_upper);
    // The teeth, where the photo shows them: the brighter half of the gap's pixels (the rest is the
    // shadow at the corners and along the lips).
    let mut gap = pixels_between(portrait, lips, &lips.inner_upper, &lips.inner_lower, 0.1);
    gap.sort_by(|a, b| luma(*b).total_cmp(&luma(*a)));
    let teeth = mean(&gap[..gap.len().div_ceil(2)]);
    let bright = teeth.is_some_and(|colour| luma(colour) > luma(lip) * 1.25);
    if let Some(teeth) = teeth.filter(|_| bright && lips.middle_gap() >= ((right - left) * 0.1).max(2.0)) {
        return MouthColours { interior, teeth: to_colour(teeth), teeth_shown: true };
    }
    // Ivory, warmed by the photo's own light: part the skin's colour brought to a tooth's brightness.
    let skin = skin.map(f32::from);
    let light = (luma(skin) / 150.0).clamp(0.85, 1.0);
    let lit_skin = skin.map(|c| c * 205.0 / luma(skin).max(1.0));
    let teeth = [0, 1, 2].map(|c| (0.55 * IVORY[c] + 0.45 * lit_skin[c]) * light);
    MouthColours { interior, teeth: to_colour(teeth), teeth_shown: false }
}

/// What the mouth region of a photo shows, against the skin below it (to tell lips from a hand or an
/// object over them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MouthLook {
    /// How much redder the lips are than the skin ((R − G) / (R + G + B)).
    pub redder_than_skin: f32,
    /// The darkest tenth of the mouth region (where closed lips meet, or an open mouth's inside), in the
    /// skin's luma.
    pub darkest: f32,
    /// The brightest tenth (teeth), in the skin's luma.
    pub brightest: f32,
}

impl MouthLook {
    /// The mouth region shows nothing of lips: no redder than the skin and nearly one flat tone (no dark
    /// line where lips meet, no inside, no teeth, whatever its colour: a hand, a microphone).
    pub fn covered(&self) -> bool {
        self.redder_than_skin < 0.015 && self.brightest < self.darkest * 1.25
    }
}

fn redness(colour: [f32; 3]) -> f32 {
    (colour[0] - colour[1]) / (colour[0] + colour[1] + colour[2] + 1.0)
}

/// How the photo's mouth region (between the outer lip edges, the middle half of its width) looks
/// against `skin`.
pub fn mouth_look(portrait: &RgbImage, lips: &LipContours, skin: [u8; 3]) -> MouthLook {
    let skin = skin.map(f32::from);
    let mut pixels = pixels_between(portrait, lips, &lips.outer_upper, &lips.outer_lower, 0.0);
    if pixels.is_empty() {
        return MouthLook { redder_than_skin: 1.0, darkest: 0.0, brightest: 2.0 };
    }
    let lips_colour = mean(&pixels).unwrap_or(skin);
    pixels.sort_by(|a, b| luma(*a).total_cmp(&luma(*b)));
    let tenth = (pixels.len() / 10).max(1);
    let skin_luma = luma(skin).max(1.0);
    MouthLook {
        redder_than_skin: redness(lips_colour) - redness(skin),
        darkest: mean(&pixels[..tenth]).map_or(0.0, luma) / skin_luma,
        brightest: mean(&pixels[pixels.len() - tenth..]).map_or(0.0, luma) / skin_luma,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_polyline_is_read_between_its_points_and_held_at_its_ends() {
        let line = [(10.0, 5.0), (20.0, 15.0), (30.0, 5.0)];
        assert_eq!(y_at(&line, 15.0), 10.0);
        assert_eq!(y_at(&line, 20.0), 15.0);
        assert_eq!(y_at(&line, 0.0), 5.0);
        assert_eq!(y_at(&line, 99.0), 5.0);
        // The order of the points does not matter.
        assert_eq!(y_at(&[(30.0, 5.0), (10.0, 5.0), (20.0, 15.0)], 25.0), 10.0);
    }
}
