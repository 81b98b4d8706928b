//! A VP8 encoder over libvpx (Debian's libvpx through `env-libvpx-sys`): real-time deadline, a negative
//! speed (`cpu-used`, −6: fast, quality adapted to the time left), constant bitrate, no frame lag, and
//! keyframes on request (a new viewer, a PLI/FIR from the browser) and every `keyframe_interval` frames
//! as a safety net; unchanged macroblocks are skipped early (`STATIC_THRESHOLD`). A caller that knows
//! which parts of the picture it changed says so (`mark_changed`, then `encode_changed`): the other
//! macroblocks are left out of the search altogether (libvpx's active map), coded as "same as the last
//! frame". One encoder per stream; its picture, map and output buffers are allocated once.

use std::mem::MaybeUninit;
use std::ptr;

use vpx_sys::{
    VPX_DL_REALTIME, VPX_EFLAG_FORCE_KF, VPX_ENCODER_ABI_VERSION, VPX_ERROR_RESILIENT_DEFAULT, VPX_FRAME_IS_KEY,
    vp8e_enc_control_id, vpx_active_map_t, vpx_codec_control_, vpx_codec_ctx_t, vpx_codec_cx_pkt_kind,
    vpx_codec_destroy, vpx_codec_enc_cfg_t, vpx_codec_enc_config_default, vpx_codec_enc_init_ver, vpx_codec_encode,
    vpx_codec_err_t, vpx_codec_get_cx_data, vpx_codec_vp8_cx, vpx_image_t, vpx_img_fmt, vpx_img_wrap, vpx_kf_mode,
    vpx_rc_mode,
};

use super::yuv::I420;

/// libvpx's encode breakout (`static-thresh`): a macroblock whose best prediction differs from the
/// picture by less than this sum of squared errors is skipped without coding a residual. 300 over a
/// 16×16 block is about one level per pixel (RMS): blocks that did not change (most of a talking face) are
/// skipped, and a still face is no longer refined by a level at a time after each keyframe. Measured:
/// render + I420 + VP8 1.41 ms (none) → 0.94 ms (100) → 0.83 ms (300) per frame (`docs/performance.md`).
const STATIC_THRESHOLD: i32 = 300;

/// Macroblock side in pixels.
const MACROBLOCK: usize = 16;

/// A macroblock stays in the active map this many frames after its pixels last changed: the frames
/// after a change refine what the first coded coarsely (CBR spends few bits on a frame), until the
/// encode breakout finds nothing left to add.
const REFINE_FRAMES: u8 = 4;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vp8Config {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub bitrate_kbps: u32,
    /// libvpx `cpu-used`: −16 … 16; negative is real-time adaptive, larger magnitude is faster.
    pub speed: i32,
    /// A keyframe at least this often (frames).
    pub keyframe_interval: u32,
}

impl Default for Vp8Config {
    fn default() -> Self {
        Vp8Config { width: 512, height: 512, fps: 25, bitrate_kbps: 500, speed: -6, keyframe_interval: 75 }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("libvpx: {call} failed ({code:?})")]
pub struct Vp8Error {
    call: &'static str,
    code: vpx_codec_err_t,
}

fn check(call: &'static str, code: vpx_codec_err_t) -> Result<(), Vp8Error> {
    if code == vpx_codec_err_t::VPX_CODEC_OK { Ok(()) } else { Err(Vp8Error { call, code }) }
}

/// One encoded frame.
#[derive(Debug, Clone, Copy)]
pub struct EncodedFrame<'a> {
    pub data: &'a [u8],
    pub keyframe: bool,
}

pub struct Vp8Encoder {
    // Boxed so their addresses stay put: libvpx keeps pointers into both.
    context: Box<MaybeUninit<vpx_codec_ctx_t>>,
    image: Box<MaybeUninit<vpx_image_t>>,
    picture: I420,
    output: Vec<u8>,
    config: Vp8Config,
    frame_index: i64,
    force_keyframe: bool,
    /// Per macroblock (row-major): frames since its pixels last changed, saturating at `REFINE_FRAMES`.
    unchanged_for: Vec<u8>,
    /// Per macroblock: 1 when the next `encode_changed` codes it (libvpx's active map).
    active: Vec<u8>,
    mb_cols: usize,
    mb_rows: usize,
}

// The encoder is used by one thread at a time; libvpx's context holds no thread affinity.
unsafe impl Send for Vp8Encoder {}

impl Vp8Encoder {
    pub fn new(config: Vp8Config) -> Result<Vp8Encoder, Vp8Error> {
        let mut cfg = MaybeUninit::<vpx_codec_enc_cfg_t>::uninit();
        check("config_default", unsafe { vpx_codec_enc_config_default(vpx_codec_vp8_cx(), cfg.as_mut_ptr(), 0) })?;
        // SAFETY: libvpx filled in the whole configuration.
        let mut cfg = unsafe { cfg.assume_init() };
        cfg.g_w = config.width;
        cfg.g_h = config.height;
        cfg.g_timebase.num = 1;
        cfg.g_timebase.den = config.fps as i32;
        cfg.g_threads = 1;
        cfg.g_lag_in_frames = 0;
        cfg.g_error_resilient = VPX_ERROR_RESILIENT_DEFAULT;
        cfg.rc_target_bitrate = config.bitrate_kbps;
        cfg.rc_end_usage = vpx_rc_mode::VPX_CBR;
        cfg.rc_min_quantizer = 4;
        cfg.rc_max_quantizer = 56;
        cfg.rc_dropframe_thresh = 0; // every frame is sent: the face never freezes to save bits
        cfg.kf_mode = vpx_kf_mode::VPX_KF_AUTO;
        cfg.kf_max_dist = config.keyframe_interval;
        // libvpx initialises the context and the image wrapper itself; they start zeroed, as in C.
        let mut context = Box::new(MaybeUninit::<vpx_codec_ctx_t>::zeroed());
        check("enc_init", unsafe {
            vpx_codec_enc_init_ver(context.as_mut_ptr(), vpx_codec_vp8_cx(), &cfg, 0, VPX_ENCODER_ABI_VERSION as i32)
        })?;
        let mb_cols = (config.width as usize).div_ceil(MACROBLOCK);
        let mb_rows = (config.height as usize).div_ceil(MACROBLOCK);
        let mut encoder = Vp8Encoder {
            context,
            image: Box::new(MaybeUninit::zeroed()),
            picture: I420::new(config.width as usize, config.height as usize),
            output: Vec::with_capacity((config.width * config.height) as usize),
            config,
            frame_index: 0,
            force_keyframe: true,
            unchanged_for: vec![0; mb_cols * mb_rows],
            active: vec![1; mb_cols * mb_rows],
            mb_cols,
            mb_rows,
        };
        check("set cpu-used", unsafe {
            vpx_codec_control_(encoder.context.as_mut_ptr(), vp8e_enc_control_id::VP8E_SET_CPUUSED as i32, config.speed)
        })?;
        check("set static threshold", unsafe {
            let control = vp8e_enc_control_id::VP8E_SET_STATIC_THRESHOLD as i32;
            vpx_codec_control_(encoder.context.as_mut_ptr(), control, STATIC_THRESHOLD)
        })?;
        Ok(encoder)
    }

    pub fn config(&self) -> Vp8Config {
        self.config
    }

    /// The picture the next `encode` reads; fill it (e.g. `I420::convert`) first.
    pub fn picture(&mut self) -> &mut I420 {
        &mut self.picture
    }

    /// The next frame is a keyframe (a new viewer, or a keyframe request from one).
    pub fn request_keyframe(&mut self) {
        self.force_keyframe = true;
    }

    /// The picture's pixels in `(left, top, right, bottom)` (right and bottom exclusive) changed since the
    /// last frame: `encode_changed` codes their macroblocks (and refines them for a few frames after).
    pub fn mark_changed(&mut self, (left, top, right, bottom): (usize, usize, usize, usize)) {
        let (right, bottom) = (right.min(self.config.width as usize), bottom.min(self.config.height as usize));
        if left >= right || top >= bottom {
            return;
        }
        let columns = left / MACROBLOCK..right.div_ceil(MACROBLOCK);
        for row in top / MACROBLOCK..bottom.div_ceil(MACROBLOCK) {
            self.unchanged_for[row * self.mb_cols..][columns.clone()].fill(0);
        }
    }

    /// Encodes the current picture as the next frame, searching only the macroblocks that changed (as
    /// `mark_changed` said) in the last `REFINE_FRAMES` frames; the rest repeat the last frame. Keyframes
    /// are coded whole.
    pub fn encode_changed(&mut self) -> Result<EncodedFrame<'_>, Vp8Error> {
        for (active, unchanged_for) in self.active.iter_mut().zip(&mut self.unchanged_for) {
            *active = u8::from(*unchanged_for < REFINE_FRAMES);
            *unchanged_for = (*unchanged_for + 1).min(REFINE_FRAMES);
        }
        self.set_active_map(true)?;
        let keyframe = self.encode_picture()?;
        if keyframe {
            // A keyframe is coded whole and coarsely: refine all of it over the next frames.
            self.unchanged_for.fill(0);
        }
        Ok(EncodedFrame { data: &self.output, keyframe })
    }

    /// Encodes the current picture as the next frame (one `1/fps` step after the previous one), every
    /// macroblock searched.
    pub fn encode(&mut self) -> Result<EncodedFrame<'_>, Vp8Error> {
        self.set_active_map(false)?;
        let keyframe = self.encode_picture()?;
        Ok(EncodedFrame { data: &self.output, keyframe })
    }

    /// Turns libvpx's active map on (with `self.active`) or off (every macroblock active).
    fn set_active_map(&mut self, enabled: bool) -> Result<(), Vp8Error> {
        let mut map = vpx_active_map_t {
            active_map: if enabled { self.active.as_mut_ptr() } else { ptr::null_mut() },
            rows: self.mb_rows as u32,
            cols: self.mb_cols as u32,
        };
        // SAFETY: libvpx copies the map during the call; the struct and the buffer outlive it.
        check("set active map", unsafe {
            vpx_codec_control_(
                self.context.as_mut_ptr(),
                vp8e_enc_control_id::VP8E_SET_ACTIVEMAP as i32,
                &mut map as *mut vpx_active_map_t,
            )
        })
    }

    /// Encodes the current picture into `self.output`; true when it became a keyframe.
    fn encode_picture(&mut self) -> Result<bool, Vp8Error> {
        let (w, h) = (self.config.width, self.config.height);
        // SAFETY: the picture's buffer outlives the call and holds w×h×1.5 bytes of I420.
        let wrapped = unsafe {
            vpx_img_wrap(
                self.image.as_mut_ptr(),
                vpx_img_fmt::VPX_IMG_FMT_I420,
                w,
                h,
                1,
                self.picture.data.as_mut_ptr(),
            )
        };
        if wrapped.is_null() {
            return Err(Vp8Error { call: "img_wrap", code: vpx_codec_err_t::VPX_CODEC_INVALID_PARAM });
        }
        let flags = if std::mem::take(&mut self.force_keyframe) { VPX_EFLAG_FORCE_KF as i64 } else { 0 };
        check("encode", unsafe {
            vpx_codec_encode(
                self.context.as_mut_ptr(),
                self.image.as_ptr(),
                self.frame_index,
                1,
                flags,
                VPX_DL_REALTIME.into(),
            )
        })?;
        self.frame_index += 1;
        self.output.clear();
        let mut keyframe = false;
        let mut iter = ptr::null();
        loop {
            // SAFETY: libvpx returns packets valid until the next encode call; copied out at once.
            let packet = unsafe { vpx_codec_get_cx_data(self.context.as_mut_ptr(), &mut iter) };
            if packet.is_null() {
                break;
            }
            let packet = unsafe { &*packet };
            if packet.kind == vpx_codec_cx_pkt_kind::VPX_CODEC_CX_FRAME_PKT {
                let frame = unsafe { packet.data.frame };
                let bytes = unsafe { std::slice::from_raw_parts(frame.buf as *const u8, frame.sz as usize) };
                self.output.extend_from_slice(bytes);
                keyframe |= frame.flags & VPX_FRAME_IS_KEY != 0;
            }
        }
        Ok(keyframe)
    }
}

impl Drop for Vp8Encoder {
    fn drop(&mut self) {
        unsafe {
            vpx_codec_destroy(self.context.as_mut_ptr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avatar::RgbImage;

    fn config() -> Vp8Config {
        Vp8Config { width: 64, height: 64, keyframe_interval: 10, ..Vp8Config::default() }
    }

    #[test]
    fn the_first_frame_is_a_keyframe_and_requests_and_the_interval_force_more() {
        let mut encoder = Vp8Encoder::new(config()).unwrap();
        let mut image = RgbImage::new(64, 64);
        let mut keyframes = Vec::new();
        for index in 0..25 {
            image.rgb.iter_mut().enumerate().for_each(|(i, v)| *v = ((i + index * 3) % 251) as u8);
            encoder.picture().convert(&image);
            if index == 4 {
                encoder.request_keyframe();
            }
            let frame = encoder.encode().unwrap();
            assert!(!frame.data.is_empty(), "frame {index} is never dropped");
            if frame.keyframe {
                keyframes.push(index);
            }
        }
        assert_eq!(keyframes[..2], [0, 4], "{keyframes:?}");
        assert!(keyframes.iter().any(|&k| k > 4 && k <= 15), "the interval forces one: {keyframes:?}");
        // A VP8 keyframe starts with the frame tag (bit 0 clear) and the start code 9d 01 2a.
        let mut encoder = Vp8Encoder::new(config()).unwrap();
        let frame = encoder.encode().unwrap();
        assert_eq!(frame.data[0] & 1, 0);
        assert_eq!(&frame.data[3..6], &[0x9d, 0x01, 0x2a]);
    }
}
