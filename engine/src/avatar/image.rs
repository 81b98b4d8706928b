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

    /// Bilinear sample at a fractional position (clamped to the image).
    fn sample(&self, x: f32, y: f32) -> [f32; 3] {
        let x = x.clamp(0.0, (self.width - 1) as f32);
        let y = y.clamp(0.0, (self.height - 1) as f32);
        let (x0, y0) = (x as usize, y as usize);
        let (x1, y1) = ((x0 + 1).min(self.width - 1), (y0 + 1).min(self.height - 1));
        let (fx, fy) = (x - x0 as f32, y - y0 as f32);
        let p = |x: usize, y: usize, c: usize| f32::from(self.rgb[(y * self.width + x) * 3 + c]);
        let mut out = [0.0; 3];
        for (c, value) in out.iter_mut().enumerate() {
            let top = p(x0, y0, c) + (p(x1, y0, c) - p(x0, y0, c)) * fx;
            let bottom = p(x0, y1, c) + (p(x1, y1, c) - p(x0, y1, c)) * fx;
            *value = top + (bottom - top) * fy;
        }
        out
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

/// Draws the destination triangle `dst` of `out` with the pixels of the source triangle `src` of
/// `from` (an affine map between them), sampled bilinearly.
pub fn warp_triangle(from: &RgbImage, src: [Point; 3], out: &mut RgbImage, dst: [Point; 3]) {
    let [(ax, ay), (bx, by), (cx, cy)] = dst;
    let det = (bx - ax) * (cy - ay) - (cx - ax) * (by - ay);
    if det.abs() < 1e-6 {
        return; // a degenerate triangle covers no pixel
    }
    let (left, top, right, bottom) = bounds(dst, out.width, out.height);
    const EDGE: f32 = -1e-4;
    for y in top..bottom {
        let py = y as f32 + 0.5;
        for x in left..right {
            let px = x as f32 + 0.5;
            // Barycentric coordinates of the pixel centre in the destination triangle.
            let u = ((px - ax) * (cy - ay) - (cx - ax) * (py - ay)) / det;
            let v = ((bx - ax) * (py - ay) - (px - ax) * (by - ay)) / det;
            let w = 1.0 - u - v;
            if u < EDGE || v < EDGE || w < EDGE {
                continue;
            }
            let sx = w * src[0].0 + u * src[1].0 + v * src[2].0 - 0.5;
            let sy = w * src[0].1 + u * src[1].1 + v * src[2].1 - 0.5;
            let [r, g, b] = from.sample(sx, sy);
            let i = (y * out.width + x) * 3;
            out.rgb[i] = r.round() as u8;
            out.rgb[i + 1] = g.round() as u8;
            out.rgb[i + 2] = b.round() as u8;
        }
    }
}

/// Fills the pixels whose centres are inside `polygon` (even-odd rule) with `shade(x, y)`.
pub fn fill_polygon(out: &mut RgbImage, polygon: &[Point], mut shade: impl FnMut(usize, usize) -> [u8; 3]) {
    let (left, top, right, bottom) = bounds(polygon.iter().copied(), out.width, out.height);
    for y in top..bottom {
        let py = y as f32 + 0.5;
        for x in left..right {
            let px = x as f32 + 0.5;
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
                out.rgb[i..i + 3].copy_from_slice(&shade(x, y));
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

    #[test]
    fn a_polygon_fills_its_inside_only() {
        let mut out = RgbImage::new(32, 32);
        fill_polygon(&mut out, &[(8.0, 8.0), (24.0, 8.0), (24.0, 24.0), (8.0, 24.0)], |_, _| [9, 9, 9]);
        assert_eq!(out.pixel(16, 16), [9, 9, 9]);
        assert_eq!(out.pixel(4, 16), [0, 0, 0]);
        assert_eq!(out.pixel(24, 16), [0, 0, 0], "the pixel whose centre is outside stays");
    }
}
