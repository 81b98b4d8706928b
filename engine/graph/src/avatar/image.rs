//! RGB images and the two raster operations the renderer needs: an affine triangle warp with bilinear
//! sampling (destination triangle ← source triangle) and a polygon fill. Both touch only the pixels
//! inside their shape's bounding box; nothing allocates.

use super::rig::Point;

/// Packed 8-bit RGB, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct RgbImage {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<u8>,
}

impl RgbImage {
    pub fn new(width: usize, height: usize) -> RgbImage {
        RgbImage { width, height, rgb: vec![0; width * height * 3] }
    }

    pub fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Copies the rows `[top, bottom)`, columns `[left, right)` of `from` (same size) into this image.
    pub fn copy_rect(&mut self, from: &RgbImage, (left, top, right, bottom): (usize, usize, usize, usize)) {
        for y in top..bottom.min(self.height) {
            let start = (y * self.width + left) * 3;
            let end = (y * self.width + right.min(self.width)) * 3;
            self.rgb[start..end].copy_from_slice(&from.rgb[start..end]);
        }
    }

    /// Bilinear sample at a fractional position (clamped to the image): the fractions are rounded to
    /// 1/64 of a pixel and the result to the nearest level. Images are at least 2×2.
    pub(super) fn sample(&self, x: f32, y: f32) -> [u8; 3] {
        self.sample_fixed(to_fixed(x), to_fixed(y))
    }

    /// `sample` at a position in 16.16 fixed point. The three channels are weighed together, each in its
    /// own 21-bit lane of one integer (6-bit weights keep every lane below 2²¹).
    #[inline(always)]
    fn sample_fixed(&self, x: i32, y: i32) -> [u8; 3] {
        let x = x.clamp(0, (self.width as i32 - 1) << 16);
        let y = y.clamp(0, (self.height as i32 - 1) << 16);
        // The 2×2 neighbourhood starts at most one pixel before the last column and row (the fraction is
        // then 1 at the far edge).
        let (x0, y0) = (((x >> 16) as usize).min(self.width - 2), ((y >> 16) as usize).min(self.height - 2));
        let fx = ((x - ((x0 as i32) << 16) + 512) >> 10) as u64;
        let fy = ((y - ((y0 as i32) << 16) + 512) >> 10) as u64;
        let i = (y0 * self.width + x0) * 3;
        let stride = self.width * 3;
        let (upper, lower) = (&self.rgb[i..i + 6], &self.rgb[i + stride..i + stride + 6]);
        let lanes = |p: &[u8]| u64::from(p[0]) | u64::from(p[1]) << 21 | u64::from(p[2]) << 42;
        let top = lanes(upper) * (64 - fx) + lanes(&upper[3..]) * fx;
        let bottom = lanes(lower) * (64 - fx) + lanes(&lower[3..]) * fx;
        const HALF: u64 = 2_048 | 2_048 << 21 | 2_048 << 42;
        let mixed = top * (64 - fy) + bottom * fy + HALF;
        [(mixed >> 12) as u8, (mixed >> 33) as u8, (mixed >> 54) as u8]
    }
}

/// The bounding box of points, in whole pixels clamped to `width × height`: (left, top, right, bottom).
pub fn bounds(points: impl IntoIterator<Item = Point>, width: usize, height: usize) -> (usize, usize, usize, usize) {
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for (x, y) in points {
        (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
    }
    let clamp = |v: f32, max: usize| (v.max(0.0) as usize).min(max);
    (clamp(x0.floor(), width), clamp(y0.floor(), height), clamp(x1.ceil() + 1.0, width), clamp(y1.ceil() + 1.0, height))
}

/// The pixel columns of a row whose centres satisfy `slope * px + offset >= EDGE` (a half-plane), as a
/// closed range of `px` narrowing `(low, high)`.
fn narrow(slope: f32, offset: f32, (low, high): (f32, f32)) -> (f32, f32) {
    const EDGE: f32 = -1e-4;
    if slope > 0.0 {
        (low.max((EDGE - offset) / slope), high)
    } else if slope < 0.0 {
        (low, high.min((EDGE - offset) / slope))
    } else if offset >= EDGE {
        (low, high)
    } else {
        (1.0, 0.0)
    }
}

/// Draws the destination triangle `dst` of `out` with the pixels of the source triangle `src` of
/// `from` (an affine map between them), sampled bilinearly. Each row visits only the span of pixels whose
/// centres are inside the triangle (its barycentric coordinates are linear along the row).
pub fn warp_triangle(from: &RgbImage, src: [Point; 3], out: &mut RgbImage, dst: [Point; 3]) {
    let [(ax, ay), (bx, by), (cx, cy)] = dst;
    let det = (bx - ax) * (cy - ay) - (cx - ax) * (by - ay);
    if det.abs() < 1e-6 {
        return; // a degenerate triangle covers no pixel
    }
    let (left, top, right, bottom) = bounds(dst, out.width, out.height);
    // Barycentric coordinates of a point (px, py): u = u_x·px + u_y·py + u_0, v likewise, w = 1 − u − v.
    let (u_x, u_y) = ((cy - ay) / det, -(cx - ax) / det);
    let u_0 = -(ax * u_x + ay * u_y);
    let (v_x, v_y) = (-(by - ay) / det, (bx - ax) / det);
    let v_0 = -(ax * v_x + ay * v_y);
    for y in top..bottom {
        let py = y as f32 + 0.5;
        let (u_row, v_row) = (u_y * py + u_0, v_y * py + v_0);
        let span = (left as f32 + 0.5, right as f32 - 0.5);
        let span = narrow(u_x, u_row, span);
        let span = narrow(v_x, v_row, span);
        let (low, high) = narrow(-u_x - v_x, 1.0 - u_row - v_row, span);
        if low > high {
            continue;
        }
        let first = ((low - 0.5).ceil().max(left as f32)) as usize;
        let last = ((high - 0.5).floor().min(right as f32 - 1.0)) as usize;
        // The source position is affine along the row: stepped in 16.16 fixed point from the span's first
        // pixel (off by at most a few 1/65,536 of a pixel at the row's end).
        let px = first as f32 + 0.5;
        let (u, v) = (u_x * px + u_row, v_x * px + v_row);
        let w = 1.0 - u - v;
        let start =
            (w * src[0].0 + u * src[1].0 + v * src[2].0 - 0.5, w * src[0].1 + u * src[1].1 + v * src[2].1 - 0.5);
        let step = (
            u_x * (src[1].0 - src[0].0) + v_x * (src[2].0 - src[0].0),
            u_x * (src[1].1 - src[0].1) + v_x * (src[2].1 - src[0].1),
        );
        let row = &mut out.rgb[(y * out.width + first) * 3..(y * out.width + last + 1) * 3];
        sample_along(from, row, start, step);
    }
}

/// Fills `row` (packed RGB) with samples of `from` from `start`, moving by `step` per pixel (source
/// positions, pixel centres at .0), stepped in 16.16 fixed point.
#[inline]
fn sample_along(from: &RgbImage, row: &mut [u8], start: Point, step: Point) {
    let (mut x, mut y) = (to_fixed(start.0), to_fixed(start.1));
    let (step_x, step_y) = (to_fixed(step.0), to_fixed(step.1));
    for pixel in row.chunks_exact_mut(3) {
        pixel.copy_from_slice(&from.sample_fixed(x, y));
        x += step_x;
        y += step_y;
    }
}

/// A position in 16.16 fixed point.
#[inline]
fn to_fixed(value: f32) -> i32 {
    (value * 65_536.0).round() as i32
}

/// Most vertices a polygon given to `fill_polygon` may have (the mouth's inner lip line has 24).
const MAX_POLYGON: usize = 64;

/// Fills the pixels whose centres are inside `polygon` (even-odd rule) with `shade(x, y)`: per row, the
/// crossings of its edges with the row's centre line, sorted, filled in pairs.
pub fn fill_polygon(out: &mut RgbImage, polygon: &[Point], mut shade: impl FnMut(usize, usize) -> [u8; 3]) {
    let width = out.width;
    for_each_span(polygon, out.width, out.height, |y, first, end| {
        for x in first..end {
            let i = (y * width + x) * 3;
            out.rgb[i..i + 3].copy_from_slice(&shade(x, y));
        }
    });
}

/// An affine map of points: (x, y) → (xx·x + xy·y + x0, yx·x + yy·y + y0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    pub xx: f32,
    pub xy: f32,
    pub x0: f32,
    pub yx: f32,
    pub yy: f32,
    pub y0: f32,
}

impl Affine {
    #[inline]
    pub fn apply(&self, (x, y): Point) -> Point {
        (self.xx * x + self.xy * y + self.x0, self.yx * x + self.yy * y + self.y0)
    }
}

/// Fills the pixels of `polygon` (as `fill_polygon`) from `from` where `source` maps them, sampled
/// bilinearly: a rigid or affine move of a whole region, stepped in fixed point along each row.
pub fn warp_polygon(from: &RgbImage, source: Affine, out: &mut RgbImage, polygon: &[Point]) {
    let width = out.width;
    for_each_span(polygon, out.width, out.height, |y, first, end| {
        let (sx, sy) = source.apply((first as f32 + 0.5, y as f32 + 0.5));
        let row = &mut out.rgb[(y * width + first) * 3..(y * width + end) * 3];
        sample_along(from, row, (sx - 0.5, sy - 0.5), (source.xx, source.yx));
    });
}

/// Calls `span(y, first, end)` for each run of pixels `[first, end)` of row `y` whose centres are inside
/// `polygon` (even-odd rule, within `width × height`): per row, the crossings of its edges with the row's
/// centre line, sorted, in pairs.
fn for_each_span(polygon: &[Point], width: usize, height: usize, mut span: impl FnMut(usize, usize, usize)) {
    assert!(polygon.len() <= MAX_POLYGON, "a polygon of {} vertices", polygon.len());
    let (left, top, right, bottom) = bounds(polygon.iter().copied(), width, height);
    let mut crossings = [0.0f32; MAX_POLYGON];
    for y in top..bottom {
        let py = y as f32 + 0.5;
        let mut count = 0;
        let mut j = polygon.len() - 1;
        for i in 0..polygon.len() {
            let ((xi, yi), (xj, yj)) = (polygon[i], polygon[j]);
            if (yi > py) != (yj > py) {
                crossings[count] = (xj - xi) * (py - yi) / (yj - yi) + xi;
                count += 1;
            }
            j = i;
        }
        let crossings = &mut crossings[..count];
        crossings.sort_unstable_by(f32::total_cmp);
        for pair in crossings.chunks_exact(2) {
            // Centres strictly left of the right crossing, and not left of the left one.
            let first = ((pair[0] - 0.5).ceil().max(left as f32)) as usize;
            let end = ((pair[1] - 0.5).ceil().min(right as f32)).max(0.0) as usize;
            if first < end {
                span(y, first, end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(size: usize) -> RgbImage {
        let mut image = RgbImage::new(size, size);
        for y in 0..size {
            for x in 0..size {
                let i = (y * size + x) * 3;
                image.rgb[i..i + 3].copy_from_slice(&[x as u8, y as u8, 100]);
            }
        }
        image
    }

    #[test]
    fn an_identity_warp_leaves_the_image_unchanged() {
        let from = gradient(64);
        let mut out = from.clone();
        let triangle = [(4.0, 4.0), (60.0, 10.0), (20.0, 58.0)];
        warp_triangle(&from, triangle, &mut out, triangle);
        assert_eq!(out, from);
    }

    #[test]
    fn a_shifted_warp_moves_the_pixels() {
        let from = gradient(64);
        let mut out = RgbImage::new(64, 64);
        let src = [(10.0, 10.0), (40.0, 10.0), (10.0, 40.0)];
        let dst = [(15.0, 10.0), (45.0, 10.0), (15.0, 40.0)]; // five pixels to the right
        warp_triangle(&from, src, &mut out, dst);
        assert_eq!(out.pixel(20, 20), from.pixel(15, 20));
    }

    /// The per-pixel definitions the rasterizers implement: every pixel of the bounding box tested.
    fn reference_warp(from: &RgbImage, src: [Point; 3], out: &mut RgbImage, dst: [Point; 3]) {
        let [(ax, ay), (bx, by), (cx, cy)] = dst;
        let det = (bx - ax) * (cy - ay) - (cx - ax) * (by - ay);
        let (left, top, right, bottom) = bounds(dst, out.width, out.height);
        for y in top..bottom {
            for x in left..right {
                let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
                let u = ((px - ax) * (cy - ay) - (cx - ax) * (py - ay)) / det;
                let v = ((bx - ax) * (py - ay) - (px - ax) * (by - ay)) / det;
                let w = 1.0 - u - v;
                if u < -1e-4 || v < -1e-4 || w < -1e-4 {
                    continue;
                }
                let sx = w * src[0].0 + u * src[1].0 + v * src[2].0 - 0.5;
                let sy = w * src[0].1 + u * src[1].1 + v * src[2].1 - 0.5;
                let i = (y * out.width + x) * 3;
                out.rgb[i..i + 3].copy_from_slice(&from.sample(sx, sy));
            }
        }
    }

    fn reference_fill(out: &mut RgbImage, polygon: &[Point], colour: [u8; 3]) {
        let (left, top, right, bottom) = bounds(polygon.iter().copied(), out.width, out.height);
        for y in top..bottom {
            for x in left..right {
                let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
                let mut inside = false;
                let mut j = polygon.len() - 1;
                for i in 0..polygon.len() {
                    let ((xi, yi), (xj, yj)) = (polygon[i], polygon[j]);
                    if (yi > py) != (yj > py) && px < (xj - xi) * (py - yi) / (yj - yi) + xi {
                        inside = !inside;
                    }
                    j = i;
                }
                if inside {
                    let i = (y * out.width + x) * 3;
                    out.rgb[i..i + 3].copy_from_slice(&colour);
                }
            }
        }
    }

    /// Points in [0, 64) from a fixed xorshift sequence.
    fn points(seed: u64, n: usize) -> Vec<Point> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || (crate::avatar::xorshift(&mut state) % 64_000) as f32 / 1_000.0;
        (0..n).map(|_| (next(), next())).collect()
    }

    #[test]
    fn the_span_rasterizers_draw_exactly_the_pixels_of_their_definitions() {
        let from = gradient(64);
        for seed in 1..200 {
            let p = points(seed, 6);
            let (src, dst) = ([p[0], p[1], p[2]], [p[3], p[4], p[5]]);
            let (mut fast, mut slow) = (RgbImage::new(64, 64), RgbImage::new(64, 64));
            warp_triangle(&from, src, &mut fast, dst);
            reference_warp(&from, src, &mut slow, dst);
            // The same pixels, sampled where the definition says to within the fixed-point stepping
            // (at most one level apart).
            let apart = fast.rgb.iter().zip(&slow.rgb).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
            let covered = |image: &RgbImage| image.rgb.chunks(3).map(|p| p != [0, 0, 0]).collect::<Vec<_>>();
            assert!(apart <= 1, "triangle {dst:?}: {apart} levels apart");
            assert_eq!(covered(&fast), covered(&slow), "triangle {dst:?}");
            let polygon = points(seed, 3 + (seed as usize % 20));
            let (mut fast, mut slow) = (RgbImage::new(64, 64), RgbImage::new(64, 64));
            fill_polygon(&mut fast, &polygon, |_, _| [1, 2, 3]);
            reference_fill(&mut slow, &polygon, [1, 2, 3]);
            assert_eq!(fast, slow, "polygon {polygon:?}");
        }
    }

    #[test]
    fn a_polygon_warp_samples_where_its_map_says() {
        let from = gradient(64);
        let shift = Affine { xx: 1.0, xy: 0.0, x0: 3.25, yx: 0.0, yy: 1.0, y0: -2.5 };
        let square = [(8.0, 8.0), (40.0, 8.0), (40.0, 40.0), (8.0, 40.0)];
        let mut out = RgbImage::new(64, 64);
        warp_polygon(&from, shift, &mut out, &square);
        let mut filled = RgbImage::new(64, 64);
        fill_polygon(&mut filled, &square, |x, y| from.sample(x as f32 + 3.25, y as f32 - 2.5));
        assert_eq!(out, filled);
        assert_eq!(out.pixel(20, 20), [23, 18, 100], "the gradient, moved");
        assert_eq!(out.pixel(4, 4), [0, 0, 0], "outside the polygon");
    }

    #[test]
    fn a_polygon_fills_its_inside_only() {
        let mut out = RgbImage::new(32, 32);
        fill_polygon(&mut out, &[(8.0, 8.0), (24.0, 8.0), (24.0, 24.0), (8.0, 24.0)], |_, _| [9, 9, 9]);
        assert_eq!(out.pixel(16, 16), [9, 9, 9]);
        assert_eq!(out.pixel(4, 16), [0, 0, 0]);
        assert_eq!(out.pixel(24, 16), [0, 0, 0], "the pixel whose centre is outside stays");
    }
}
