//! RGB to I420 (BT.601, limited range, what browsers assume for VP8 without colour metadata), into a
//! buffer allocated once: the Y plane, then U and V at quarter size.

use crate::avatar::RgbImage;

/// An I420 picture in one contiguous buffer.
pub struct I420 {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

impl I420 {
    /// A picture for `width × height` (both even).
    pub fn new(width: usize, height: usize) -> I420 {
        assert!(width.is_multiple_of(2) && height.is_multiple_of(2), "I420 needs even dimensions");
        I420 { width, height, data: vec![0; width * height * 3 / 2] }
    }

    /// Converts `image` (same size) into this picture.
    pub fn convert(&mut self, image: &RgbImage) {
        self.convert_region(image, (0, 0, self.width, self.height));
    }

    /// Converts only the pixels of `(left, top, right, bottom)` (widened to even bounds): the regions a
    /// renderer redrew, when the rest of the picture is unchanged since the last conversion.
    pub fn convert_region(&mut self, image: &RgbImage, (left, top, right, bottom): (usize, usize, usize, usize)) {
        let (w, h) = (self.width, self.height);
        assert_eq!((image.width, image.height), (w, h));
        let (left, top) = (left & !1, top & !1);
        let (right, bottom) = ((right + 1).min(w) & !1, (bottom + 1).min(h) & !1);
        let (y_plane, chroma) = self.data.split_at_mut(w * h);
        let (u_plane, v_plane) = chroma.split_at_mut(w * h / 4);
        for row in top..bottom {
            let rgb_row = &image.rgb[(row * w + left) * 3..(row * w + right) * 3];
            for (y, px) in y_plane[row * w + left..row * w + right].iter_mut().zip(rgb_row.chunks_exact(3)) {
                let (r, g, b) = (i32::from(px[0]), i32::from(px[1]), i32::from(px[2]));
                *y = (((66 * r + 129 * g + 25 * b + 128) >> 8) + 16) as u8;
            }
        }
        for cy in top / 2..bottom / 2 {
            for cx in left / 2..right / 2 {
                let (mut r, mut g, mut b) = (0, 0, 0);
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let i = ((2 * cy + dy) * w + 2 * cx + dx) * 3;
                    r += i32::from(image.rgb[i]);
                    g += i32::from(image.rgb[i + 1]);
                    b += i32::from(image.rgb[i + 2]);
                }
                let (r, g, b) = (r / 4, g / 4, b / 4);
                u_plane[cy * w / 2 + cx] = (((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128) as u8;
                v_plane[cy * w / 2 + cx] = (((112 * r - 94 * g - 18 * b + 128) >> 8) + 128) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn white_black_and_red_convert_to_their_bt601_values() {
        let mut image = RgbImage::new(4, 2);
        for (i, px) in image.rgb.chunks_exact_mut(3).enumerate() {
            px.copy_from_slice(match i % 4 {
                0 | 1 => &[255, 255, 255],
                _ => &[0, 0, 0],
            });
        }
        let mut picture = I420::new(4, 2);
        picture.convert(&image);
        assert_eq!(&picture.data[..4], &[235, 235, 16, 16]);
        assert_eq!((picture.data[8], picture.data[10]), (128, 128), "white has no chroma");
        let mut red = RgbImage::new(2, 2);
        red.rgb.chunks_exact_mut(3).for_each(|px| px.copy_from_slice(&[255, 0, 0]));
        let mut picture = I420::new(2, 2);
        picture.convert(&red);
        assert_eq!(&picture.data, &[82, 82, 82, 82, 90, 240]);
    }

    #[test]
    fn a_region_conversion_touches_that_region_only_and_matches_a_full_one() {
        let mut image = RgbImage::new(8, 8);
        image.rgb.iter_mut().enumerate().for_each(|(i, v)| *v = (i * 7 % 256) as u8);
        let mut full = I420::new(8, 8);
        full.convert(&image);
        let mut partial = I420::new(8, 8);
        partial.convert_region(&image, (3, 1, 6, 5)); // widened to (2, 0, 6, 6)
        for row in 0..8 {
            for col in 0..8 {
                let inside = (2..6).contains(&col) && (0..6).contains(&row);
                let (got, want) = (partial.data[row * 8 + col], full.data[row * 8 + col]);
                assert!(!inside || got == want, "({col}, {row}) inside the region");
                assert!(inside || got == 0, "({col}, {row}) outside the region");
            }
        }
        assert_eq!(partial.data[64 + 1], full.data[64 + 1], "chroma of the region");
        assert_eq!(partial.data[64], 0, "chroma outside the region");
    }
}
