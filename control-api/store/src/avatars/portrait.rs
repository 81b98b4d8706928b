//! The stock avatars' display pictures: the very faces the agents speak with (drawn by the engine,
//! `confab_engine::avatar::stock`), at preview size, as PNG data URIs; PNG in and out of `RgbImage`.

use base64::Engine;
use confab_engine::avatar::RgbImage;
use confab_engine::avatar::stock::stock_face;

/// Width and height of a stock avatar's display picture.
pub const PORTRAIT_SIZE: u32 = 256;

/// The stock face `avatar_key_id` as a `data:image/png;base64,…` URI; None for an id the engine does not draw.
pub fn png_data_uri(avatar_key_id: &str) -> Option<String> {
    let (image, _) = stock_face(avatar_key_id, PORTRAIT_SIZE)?;
    Some(format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(encode_png(&image))))
}

/// `image` as an 8-bit RGB PNG.
pub fn encode_png(image: &RgbImage) -> Vec<u8> {
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, image.width as u32, image.height as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().expect("writing to a Vec cannot fail");
        writer.write_image_data(&image.rgb).expect("pixel buffer matches the declared size");
    }
    png_bytes
}

/// An 8-bit RGB PNG written by `encode_png`.
pub fn decode_png(bytes: &[u8]) -> Result<RgbImage, String> {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().map_err(|err| err.to_string())?;
    let mut rgb = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut rgb).map_err(|err| err.to_string())?;
    if info.color_type != png::ColorType::Rgb || info.bit_depth != png::BitDepth::Eight {
        return Err(format!("expected 8-bit RGB, found {:?} {:?}", info.color_type, info.bit_depth));
    }
    rgb.truncate(info.buffer_size());
    Ok(RgbImage { width: info.width as usize, height: info.height as usize, rgb })
}
