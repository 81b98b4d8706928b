//! The stock avatars' display pictures: the very faces the agents speak with (drawn by the engine,
//! `confab_engine::avatar::stock`), at preview size, as PNG data URIs.

use base64::Engine;
use confab_engine::avatar::stock::stock_face;

/// Width and height of a stock avatar's display picture.
pub const PORTRAIT_SIZE: u32 = 256;

/// The stock face `avatar_key_id` as a `data:image/png;base64,…` URI; None for an id the engine does not draw.
pub fn png_data_uri(avatar_key_id: &str) -> Option<String> {
    let (image, _) = stock_face(avatar_key_id, PORTRAIT_SIZE)?;
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, PORTRAIT_SIZE, PORTRAIT_SIZE);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().expect("writing to a Vec cannot fail");
        writer.write_image_data(&image.rgb).expect("pixel buffer matches the declared size");
    }
    Some(format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png_bytes)))
}
