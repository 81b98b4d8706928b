//! The stock faces: illustrated portraits drawn here with anti-aliased vector shapes (tiny-skia), so
//! their rigs are known exactly and no real person's likeness is used. Each is drawn at any size (the
//! drawing is in a 512-unit square, scaled), once per size in a process: later calls get a copy.

use crate::lock::lock;
use std::sync::{Arc, Mutex};

use tiny_skia::{
    Color, FillRule, GradientStop, LineCap, LinearGradient, Paint, PathBuilder, Pixmap, Point as SkPoint,
    RadialGradient, Rect, Shader, SpreadMode, Stroke, Transform,
};

use super::image::RgbImage;
use super::rig::{EyeRig, FaceRig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hair {
    Short,
    Long,
    Bun,
    Curly,
}

/// What distinguishes one stock face from another.
#[derive(Debug, Clone, Copy)]
pub struct FaceStyle {
    pub background: [u8; 3],
    pub skin: [u8; 3],
    pub hair: [u8; 3],
    pub shirt: [u8; 3],
    pub iris: [u8; 3],
    pub hair_style: Hair,
}

/// The stock avatars by `avatar_key_id`.
pub const STOCK: [(&str, FaceStyle); 5] = [
    (
        "stock-amara",
        FaceStyle {
            background: [96, 146, 204],
            skin: [141, 85, 54],
            hair: [28, 22, 20],
            shirt: [222, 120, 60],
            iris: [70, 45, 30],
            hair_style: Hair::Curly,
        },
    ),
    (
        "stock-kenji",
        FaceStyle {
            background: [120, 170, 140],
            skin: [232, 190, 150],
            hair: [20, 20, 24],
            shirt: [60, 80, 140],
            iris: [50, 35, 25],
            hair_style: Hair::Short,
        },
    ),
    (
        "stock-sofia",
        FaceStyle {
            background: [210, 160, 170],
            skin: [224, 172, 135],
            hair: [110, 60, 30],
            shirt: [90, 60, 120],
            iris: [90, 110, 60],
            hair_style: Hair::Long,
        },
    ),
    (
        "stock-malik",
        FaceStyle {
            background: [200, 180, 120],
            skin: [110, 70, 45],
            hair: [15, 12, 12],
            shirt: [40, 110, 120],
            iris: [45, 30, 20],
            hair_style: Hair::Short,
        },
    ),
    (
        "stock-ingrid",
        FaceStyle {
            background: [150, 170, 210],
            skin: [245, 215, 195],
            hair: [225, 200, 140],
            shirt: [170, 50, 60],
            iris: [70, 120, 170],
            hair_style: Hair::Bun,
        },
    ),
];

/// A drawn stock face: its id, its size, the portrait and its rig.
type Drawn = (&'static str, u32, Arc<(RgbImage, FaceRig)>);

/// Stock faces already drawn. Drawing one takes ~2 ms and every call with a stock face asks for one when
/// it is answered; a copy of a drawn one takes a tenth of that. Few sizes are ever asked for, but the
/// size is configurable, so at most `DRAWN_KEPT` are kept.
static DRAWN: Mutex<Vec<Drawn>> = Mutex::new(Vec::new());

const DRAWN_KEPT: usize = 32;

/// The stock face `id` at `size × size` pixels, with its rig; None for an unknown id.
pub fn stock_face(id: &str, size: u32) -> Option<(RgbImage, FaceRig)> {
    let (key, style) = STOCK.iter().find(|(key, _)| *key == id)?;
    let kept = |drawn: &[Drawn]| drawn.iter().find(|(k, s, _)| k == key && *s == size).map(|(_, _, face)| face.clone());
    // Looked up in a statement of its own: the lock is released before a face is drawn and kept.
    let already = kept(&lock(&DRAWN));
    let face = match already {
        Some(face) => face,
        None => {
            // Drawn outside the lock: calls asking for other faces meanwhile do not wait.
            let face = Arc::new(draw(style, size));
            let mut drawn = lock(&DRAWN);
            if drawn.len() < DRAWN_KEPT && kept(&drawn).is_none() {
                drawn.push((key, size, face.clone()));
            }
            face
        }
    };
    Some(face.as_ref().clone())
}

fn color([r, g, b]: [u8; 3]) -> Color {
    Color::from_rgba8(r, g, b, 255)
}

fn shade([r, g, b]: [u8; 3], factor: f32) -> [u8; 3] {
    [r, g, b].map(|c| (f32::from(c) * factor).clamp(0.0, 255.0) as u8)
}

fn mix(a: [u8; 3], b: [u8; 3], t: f32) -> [u8; 3] {
    [0, 1, 2].map(|i| (f32::from(a[i]) * (1.0 - t) + f32::from(b[i]) * t) as u8)
}

fn solid(rgb: [u8; 3]) -> Paint<'static> {
    let mut paint = Paint::default();
    paint.set_color(color(rgb));
    paint.anti_alias = true;
    paint
}

/// A paint from a gradient shader (or `fallback`, should the gradient be degenerate).
fn gradient(shader: Option<Shader<'static>>, fallback: Color) -> Paint<'static> {
    Paint { shader: shader.unwrap_or(Shader::SolidColor(fallback)), anti_alias: true, ..Paint::default() }
}

fn stops(colors: &[(f32, [u8; 3])]) -> Vec<GradientStop> {
    colors.iter().map(|&(at, rgb)| GradientStop::new(at, color(rgb))).collect()
}

fn oval(pixmap: &mut Pixmap, transform: Transform, (cx, cy, rx, ry): (f32, f32, f32, f32), paint: &Paint) {
    if let Some(path) = Rect::from_xywh(cx - rx, cy - ry, 2.0 * rx, 2.0 * ry).and_then(PathBuilder::from_oval) {
        pixmap.fill_path(&path, paint, FillRule::Winding, transform, None);
    }
}

/// Draws one face in a 512-unit square scaled to `size`; returns it and its rig (in pixels).
fn draw(style: &FaceStyle, size: u32) -> (RgbImage, FaceRig) {
    let mut pixmap = Pixmap::new(size, size).expect("a non-empty portrait");
    let scale = size as f32 / 512.0;
    let t = Transform::from_scale(scale, scale);
    let skin = style.skin;

    // Background: a soft vertical gradient.
    let paint = gradient(
        LinearGradient::new(
            SkPoint::from_xy(0.0, 0.0),
            SkPoint::from_xy(0.0, 512.0),
            stops(&[(0.0, shade(style.background, 1.12)), (1.0, shade(style.background, 0.82))]),
            SpreadMode::Pad,
            Transform::identity(),
        ),
        color(style.background),
    );
    pixmap.fill_rect(Rect::from_xywh(0.0, 0.0, 512.0, 512.0).expect("a square"), &paint, t, None);

    // Hair behind the head (long hair, curls, bun).
    let hair = solid(style.hair);
    match style.hair_style {
        Hair::Long => {
            let mut pb = PathBuilder::new();
            pb.move_to(132.0, 250.0);
            pb.cubic_to(120.0, 120.0, 392.0, 120.0, 380.0, 250.0);
            pb.line_to(400.0, 440.0);
            pb.line_to(112.0, 440.0);
            pb.close();
            if let Some(path) = pb.finish() {
                pixmap.fill_path(&path, &hair, FillRule::Winding, t, None);
            }
        }
        Hair::Curly => {
            for (cx, cy, r) in [
                (150.0, 200.0, 52.0),
                (362.0, 200.0, 52.0),
                (170.0, 140.0, 56.0),
                (342.0, 140.0, 56.0),
                (256.0, 115.0, 70.0),
                (140.0, 270.0, 40.0),
                (372.0, 270.0, 40.0),
            ] {
                oval(&mut pixmap, t, (cx, cy, r, r), &hair);
            }
        }
        Hair::Bun => oval(&mut pixmap, t, (256.0, 92.0, 48.0, 40.0), &hair),
        Hair::Short => {}
    }

    // Shoulders and neck.
    let shirt = gradient(
        LinearGradient::new(
            SkPoint::from_xy(0.0, 430.0),
            SkPoint::from_xy(0.0, 512.0),
            stops(&[(0.0, style.shirt), (1.0, shade(style.shirt, 0.75))]),
            SpreadMode::Pad,
            Transform::identity(),
        ),
        color(style.shirt),
    );
    oval(&mut pixmap, t, (256.0, 560.0, 215.0, 145.0), &shirt);
    let neck = solid(shade(skin, 0.86));
    if let Some(rect) = Rect::from_xywh(214.0, 340.0, 84.0, 112.0) {
        pixmap.fill_rect(rect, &neck, t, None);
    }
    oval(&mut pixmap, t, (256.0, 448.0, 42.0, 16.0), &neck);

    // Ears, then the head with light from the upper left.
    let ear = solid(shade(skin, 0.92));
    oval(&mut pixmap, t, (149.0, 272.0, 17.0, 30.0), &ear);
    oval(&mut pixmap, t, (363.0, 272.0, 17.0, 30.0), &ear);
    let head = gradient(
        RadialGradient::new(
            SkPoint::from_xy(236.0, 220.0),
            SkPoint::from_xy(256.0, 250.0),
            170.0,
            stops(&[(0.0, shade(skin, 1.06)), (0.7, skin), (1.0, shade(skin, 0.85))]),
            SpreadMode::Pad,
            Transform::identity(),
        ),
        color(skin),
    );
    oval(&mut pixmap, t, (256.0, 250.0, 106.0, 138.0), &head);

    // Hair on top: a cap over the crown with a fringe line.
    let mut pb = PathBuilder::new();
    pb.move_to(146.0, 250.0);
    pb.cubic_to(124.0, 40.0, 388.0, 40.0, 366.0, 250.0);
    pb.cubic_to(360.0, 200.0, 330.0, 168.0, 300.0, 170.0);
    pb.cubic_to(260.0, 190.0, 200.0, 160.0, 170.0, 185.0);
    pb.cubic_to(155.0, 200.0, 150.0, 225.0, 146.0, 250.0);
    pb.close();
    if let Some(path) = pb.finish() {
        pixmap.fill_path(&path, &hair, FillRule::Winding, t, None);
    }

    // Cheeks.
    for cx in [196.0, 316.0] {
        let rose = mix(skin, [200, 80, 80], 0.35);
        let blush = gradient(
            RadialGradient::new(
                SkPoint::from_xy(cx, 312.0),
                SkPoint::from_xy(cx, 312.0),
                26.0,
                vec![
                    GradientStop::new(0.0, Color::from_rgba8(rose[0], rose[1], rose[2], 110)),
                    GradientStop::new(1.0, Color::from_rgba8(rose[0], rose[1], rose[2], 0)),
                ],
                SpreadMode::Pad,
                Transform::identity(),
            ),
            Color::TRANSPARENT,
        );
        oval(&mut pixmap, t, (cx, 312.0, 26.0, 26.0), &blush);
    }

    // Eyes: whites, iris, pupil, highlight, upper lid line; brows above.
    let dark = shade(style.hair, 0.7);
    let line = |width: f32| Stroke { width, line_cap: LineCap::Round, ..Stroke::default() };
    let eyes = [(210.0f32, 262.0f32), (302.0, 262.0)];
    for &(cx, cy) in &eyes {
        oval(&mut pixmap, t, (cx, cy, 22.0, 11.5), &solid([248, 246, 242]));
        oval(&mut pixmap, t, (cx, cy + 1.0, 10.5, 10.5), &solid(style.iris));
        oval(&mut pixmap, t, (cx, cy + 1.0, 5.0, 5.0), &solid([18, 14, 14]));
        oval(&mut pixmap, t, (cx + 3.5, cy - 3.0, 2.6, 2.6), &solid([255, 255, 255]));
        let mut pb = PathBuilder::new();
        pb.move_to(cx - 23.0, cy + 1.0);
        pb.quad_to(cx, cy - 17.0, cx + 23.0, cy + 1.0);
        if let Some(path) = pb.finish() {
            pixmap.stroke_path(&path, &solid([30, 22, 22]), &line(3.0), t, None);
        }
        let mut pb = PathBuilder::new();
        pb.move_to(cx - 26.0, cy - 22.0);
        pb.quad_to(cx, cy - 36.0, cx + 26.0, cy - 26.0);
        if let Some(path) = pb.finish() {
            pixmap.stroke_path(&path, &solid(dark), &line(6.0), t, None);
        }
    }

    // Nose: a soft side shadow and the nostrils' curve.
    let mut pb = PathBuilder::new();
    pb.move_to(252.0, 268.0);
    pb.quad_to(244.0, 292.0, 248.0, 300.0);
    pb.quad_to(256.0, 306.0, 266.0, 300.0);
    if let Some(path) = pb.finish() {
        pixmap.stroke_path(&path, &solid(shade(skin, 0.72)), &line(3.0), t, None);
    }

    // Lips, closed: upper lip with a cupid's bow, fuller lower lip, the line between them.
    let (mx, my) = (256.0f32, 338.0f32);
    let lip = mix(shade(skin, 0.85), [190, 70, 80], 0.35);
    let mut pb = PathBuilder::new();
    pb.move_to(mx - 31.0, my);
    pb.cubic_to(mx - 20.0, my - 9.0, mx - 9.0, my - 12.0, mx, my - 7.0);
    pb.cubic_to(mx + 9.0, my - 12.0, mx + 20.0, my - 9.0, mx + 31.0, my);
    pb.close();
    if let Some(path) = pb.finish() {
        pixmap.fill_path(&path, &solid(shade(lip, 0.9)), FillRule::Winding, t, None);
    }
    let mut pb = PathBuilder::new();
    pb.move_to(mx - 31.0, my);
    pb.cubic_to(mx - 18.0, my + 15.0, mx + 18.0, my + 15.0, mx + 31.0, my);
    pb.close();
    if let Some(path) = pb.finish() {
        pixmap.fill_path(&path, &solid(lip), FillRule::Winding, t, None);
    }
    let mut pb = PathBuilder::new();
    pb.move_to(mx - 31.0, my);
    pb.quad_to(mx, my + 3.0, mx + 31.0, my);
    if let Some(path) = pb.finish() {
        pixmap.stroke_path(&path, &solid(shade(lip, 0.55)), &line(2.2), t, None);
    }

    let mut image = RgbImage::new(size as usize, size as usize);
    for (rgb, rgba) in image.rgb.chunks_exact_mut(3).zip(pixmap.data().chunks_exact(4)) {
        rgb.copy_from_slice(&rgba[..3]); // opaque everywhere: premultiplied equals straight
    }
    let px = |v: f32| v * scale;
    let eye = |(cx, cy): (f32, f32)| EyeRig {
        center: (px(cx), px(cy)),
        half_width: px(23.0),
        half_height: px(12.5),
        lid: shade(skin, 0.95),
        lash: [30, 22, 22],
        // The brow's stroke starts 1.5 half-heights above the eye's middle: the lid stays under it.
        lid_skin: 0.6,
    };
    let rig = FaceRig {
        mouth_center: (px(mx), px(my + 1.0)),
        mouth_half_width: px(31.0),
        lip_height: px(10.0),
        chin: (px(256.0), px(386.0)),
        jaw_half_width: px(82.0),
        nose_tip: (px(256.0), px(302.0)),
        eyes: [eye(eyes[0]), eye(eyes[1])],
        mouth_interior: [74, 24, 32],
        teeth: [242, 240, 232],
        lips: None,
    };
    (image, rig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stock_face_is_drawn_with_its_rig_inside_the_picture() {
        for (id, _) in STOCK {
            let (image, rig) = stock_face(id, 512).unwrap();
            assert_eq!((image.width, image.height), (512, 512));
            let (x, y) = rig.mouth_center;
            assert!(x > 200.0 && x < 312.0 && y > 300.0 && y < 380.0, "{id}: {rig:?}");
            // The lips are darker than the skin just above them.
            let lips = image.pixel(x as usize, y as usize + 4);
            let cheek = image.pixel(x as usize + 60, y as usize - 20);
            assert!(
                lips.iter().map(|&c| u32::from(c)).sum::<u32>() < cheek.iter().map(|&c| u32::from(c)).sum::<u32>(),
                "{id}"
            );
        }
        assert!(stock_face("stock-nobody", 512).is_none());
    }

    #[test]
    fn a_face_asked_for_again_is_the_one_drawn() {
        let style = &STOCK.iter().find(|(id, _)| *id == "stock-ingrid").unwrap().1;
        let fresh = draw(style, 320);
        for _ in 0..2 {
            let (image, rig) = stock_face("stock-ingrid", 320).unwrap();
            assert_eq!(image, fresh.0);
            assert_eq!(rig, fresh.1);
        }
        let (other, _) = stock_face("stock-ingrid", 256).unwrap();
        assert_eq!(other.width, 256, "each size is its own drawing");
    }

    #[test]
    fn a_smaller_face_has_a_scaled_rig() {
        let (_, big) = stock_face("stock-kenji", 512).unwrap();
        let (image, small) = stock_face("stock-kenji", 256).unwrap();
        assert_eq!(image.width, 256);
        assert!((small.mouth_center.0 * 2.0 - big.mouth_center.0).abs() < 0.01);
    }
}
