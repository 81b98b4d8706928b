//! What a viewer sees: the face's VP8 stream decoded by libvpx and compared with the pictures it was
//! encoded from, for a stock face speaking real speech (espeak-ng) and falling silent. Coding only the
//! macroblocks that changed (the active map) must look as good as searching every macroblock.

mod common;

use std::mem::MaybeUninit;
use std::ptr;

use common::speak;
use confab_engine::MediaTime;
use confab_engine::avatar::stock::stock_face;
use confab_engine::avatar::{AvatarRenderer, FRAME_SAMPLES};
use confab_engine::video::vp8::{Vp8Config, Vp8Encoder};
use vpx_sys::{
    VPX_DECODER_ABI_VERSION, vpx_codec_ctx_t, vpx_codec_dec_init_ver, vpx_codec_decode, vpx_codec_destroy,
    vpx_codec_err_t, vpx_codec_get_frame, vpx_codec_vp8_dx,
};

/// libvpx's VP8 decoder: the luma plane of each frame.
struct Decoder {
    context: Box<MaybeUninit<vpx_codec_ctx_t>>,
}

impl Decoder {
    fn new() -> Decoder {
        let mut context = Box::new(MaybeUninit::<vpx_codec_ctx_t>::zeroed());
        let code = unsafe {
            vpx_codec_dec_init_ver(
                context.as_mut_ptr(),
                vpx_codec_vp8_dx(),
                ptr::null(),
                0,
                VPX_DECODER_ABI_VERSION as i32,
            )
        };
        assert_eq!(code, vpx_codec_err_t::VPX_CODEC_OK);
        Decoder { context }
    }

    fn decode_luma(&mut self, frame: &[u8], width: usize, height: usize) -> Vec<u8> {
        let code = unsafe {
            vpx_codec_decode(self.context.as_mut_ptr(), frame.as_ptr(), frame.len() as u32, ptr::null_mut(), 0)
        };
        assert_eq!(code, vpx_codec_err_t::VPX_CODEC_OK);
        let mut iter = ptr::null();
        let image = unsafe { vpx_codec_get_frame(self.context.as_mut_ptr(), &mut iter) };
        assert!(!image.is_null(), "every frame decodes to a picture");
        let image = unsafe { &*image };
        assert_eq!((image.d_w as usize, image.d_h as usize), (width, height));
        let stride = image.stride[0] as usize;
        let plane = unsafe { std::slice::from_raw_parts(image.planes[0], stride * height) };
        plane.chunks(stride).flat_map(|row| &row[..width]).copied().collect()
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        unsafe {
            vpx_codec_destroy(self.context.as_mut_ptr());
        }
    }
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let squared: f64 = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum();
    let mse = squared / a.len() as f64;
    if mse == 0.0 { 99.0 } else { 10.0 * (255.0 * 255.0 / mse).log10() }
}

/// Luma PSNR (dB) of every decoded frame against its source picture, the face `face_id` speaking
/// `audio`; `changed_only` codes only the macroblocks the renderer changed.
fn luma_psnr(face_id: &str, audio: &[f32], changed_only: bool) -> Vec<f64> {
    let config = Vp8Config::default();
    let (width, height) = (config.width as usize, config.height as usize);
    let (portrait, rig) = stock_face(face_id, config.width).unwrap();
    let mut renderer = AvatarRenderer::new(portrait.clone(), rig, 7);
    let mut encoder = Vp8Encoder::new(config).unwrap();
    encoder.picture().convert(&portrait);
    let mut decoder = Decoder::new();
    audio
        .chunks(FRAME_SAMPLES as usize)
        .enumerate()
        .map(|(index, samples)| {
            renderer.render(MediaTime(index as u64 * FRAME_SAMPLES), samples);
            for &region in renderer.changed_regions() {
                encoder.picture().convert_region(renderer.frame(), region);
                encoder.mark_changed(region);
            }
            let source = encoder.picture().data[..width * height].to_vec();
            let frame = if changed_only { encoder.encode_changed() } else { encoder.encode() }.unwrap();
            let data = frame.data.to_vec();
            psnr(&decoder.decode_luma(&data, width, height), &source)
        })
        .collect()
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn coding_only_the_changed_macroblocks_looks_as_good_as_coding_them_all() {
    let mut audio = speak("The weather today is sunny with a light breeze from the west.");
    audio.extend(vec![0.0; 16_000 * 2]);
    audio.extend(speak("Would you like to hear tomorrow's forecast as well?"));
    audio.extend(vec![0.0; 16_000]);
    for face_id in ["stock-sofia", "stock-amara"] {
        let all = luma_psnr(face_id, &audio, false);
        let changed = luma_psnr(face_id, &audio, true);
        let worst = changed.iter().copied().fold(f64::INFINITY, f64::min);
        eprintln!(
            "{face_id}: {} frames, luma PSNR mean {:.2} dB (every macroblock {:.2} dB), worst frame {worst:.2} dB",
            changed.len(),
            mean(&changed),
            mean(&all)
        );
        assert!(mean(&changed) >= mean(&all) - 0.5, "{face_id}: {:.2} vs {:.2} dB", mean(&changed), mean(&all));
        assert!(worst >= 32.0, "{face_id}: a frame decoded at {worst:.2} dB");
    }
}
