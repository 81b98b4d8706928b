//! Procedural portraits for the stock avatars: a few filled shapes (shoulders, head, hair, eyes, mouth)
//! rasterised with 4×4 supersampling and encoded as PNG. No external image is used.

use base64::Engine;

pub const PORTRAIT_SIZE: u32 = 128;

#[derive(Debug, Clone, Copy)]
pub enum HairStyle {
    Short,
    Long,
    Bun,
    Curly,
}

/// What distinguishes one portrait from another.
#[derive(Debug, Clone, Copy)]
pub struct PortraitStyle {
    pub background: [u8; 3],
    pub skin: [u8; 3],
    pub hair: [u8; 3],
    pub shirt: [u8; 3],
    pub hair_style: HairStyle,
    pub glasses: bool,
}

/// A shape as a point-inclusion test in unit coordinates (0..1 both ways, y down).
type Shape = Box<dyn Fn(f32, f32) -> bool>;

fn ellipse(cx: f32, cy: f32, rx: f32, ry: f32) -> Shape {
    Box::new(move |x, y| ((x - cx) / rx).powi(2) + ((y - cy) / ry).powi(2) <= 1.0)
}

fn ring(cx: f32, cy: f32, r_outer: f32, r_inner: f32) -> Shape {
    Box::new(move |x, y| {
        let d = ((x - cx).powi(2) + (y - cy).powi(2)).sqrt();
        d <= r_outer && d >= r_inner
    })
}

fn rect(x0: f32, y0: f32, x1: f32, y1: f32) -> Shape {
    Box::new(move |x, y| x >= x0 && x <= x1 && y >= y0 && y <= y1)
}

fn layers(style: &PortraitStyle) -> Vec<(Shape, [u8; 3])> {
    let darker = |c: [u8; 3]| c.map(|v| (f32::from(v) * 0.8) as u8);
    let mut layers: Vec<(Shape, [u8; 3])> = Vec::new();
    match style.hair_style {
        HairStyle::Long => layers.push((rect(0.27, 0.30, 0.73, 0.78), style.hair)),
        HairStyle::Bun => layers.push((ellipse(0.5, 0.12, 0.12, 0.10), style.hair)),
        HairStyle::Curly => {
            for (cx, cy) in
                [(0.30, 0.30), (0.70, 0.30), (0.36, 0.18), (0.64, 0.18), (0.5, 0.13), (0.27, 0.44), (0.73, 0.44)]
            {
                layers.push((ellipse(cx, cy, 0.11, 0.11), style.hair));
            }
        }
        HairStyle::Short => {}
    }
    layers.push((ellipse(0.5, 1.02, 0.42, 0.26), style.shirt));
    layers.push((rect(0.43, 0.58, 0.57, 0.80), darker(style.skin)));
    layers.push((ellipse(0.5, 0.44, 0.20, 0.25), style.skin));
    layers.push((
        Box::new(|x, y| ((x - 0.5) / 0.215).powi(2) + ((y - 0.36) / 0.19).powi(2) <= 1.0 && y < 0.32),
        style.hair,
    ));
    for cx in [0.42, 0.58] {
        layers.push((ellipse(cx, 0.44, 0.025, 0.03), [34, 30, 38]));
        if style.glasses {
            layers.push((ring(cx, 0.44, 0.065, 0.05), [40, 40, 48]));
        }
    }
    layers.push((
        Box::new(|x, y| ((x - 0.5) / 0.07).powi(2) + ((y - 0.53) / 0.035).powi(2) <= 1.0 && y > 0.53),
        [150, 60, 70],
    ));
    layers
}

/// The portrait's RGB pixels, row by row.
pub fn render(style: &PortraitStyle) -> Vec<u8> {
    const SUB: u32 = 4;
    let layers = layers(style);
    let size = PORTRAIT_SIZE;
    let mut pixels = Vec::with_capacity((size * size * 3) as usize);
    for py in 0..size {
        for px in 0..size {
            let mut sum = [0u32; 3];
            for sy in 0..SUB {
                for sx in 0..SUB {
                    let x = (px as f32 + (sx as f32 + 0.5) / SUB as f32) / size as f32;
                    let y = (py as f32 + (sy as f32 + 0.5) / SUB as f32) / size as f32;
                    let shade = 1.0 - 0.25 * y;
                    let mut color = style.background.map(|v| (f32::from(v) * shade) as u8);
                    for (inside, fill) in &layers {
                        if inside(x, y) {
                            color = *fill;
                        }
                    }
                    for channel in 0..3 {
                        sum[channel] += u32::from(color[channel]);
                    }
                }
            }
            pixels.extend(sum.map(|total| (total / (SUB * SUB)) as u8));
        }
    }
    pixels
}

/// The portrait as a `data:image/png;base64,…` URI.
pub fn png_data_uri(style: &PortraitStyle) -> String {
    let pixels = render(style);
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, PORTRAIT_SIZE, PORTRAIT_SIZE);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().expect("writing to a Vec cannot fail");
        writer.write_image_data(&pixels).expect("pixel buffer matches the declared size");
    }
    format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png_bytes))
}
