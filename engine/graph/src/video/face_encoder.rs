//! The agent's face as a VP8 stream: a stock face (or `DEFAULT_FACE`), its renderer and an encoder,
//! fed 40 ms of the agent's audio per frame. The first picture is converted whole; after that only the
//! regions the renderer changed are converted again, and only their macroblocks are coded. Used by live calls and by `avatar.webm`.

use crate::MediaTime;
use crate::avatar::stock::stock_face;
use crate::avatar::{AvatarRenderer, FRAME_SAMPLES, FaceRig, MouthShape, RgbImage};

use super::vp8::{EncodedFrame, Vp8Config, Vp8Encoder, Vp8Error};

/// The face used when an agent's avatar is neither a stock face nor a given portrait.
pub const DEFAULT_FACE: &str = "stock-amara";

pub struct FaceEncoder {
    renderer: AvatarRenderer,
    encoder: Vp8Encoder,
    frames: u64,
}

impl FaceEncoder {
    /// The face `face_id` (a stock id; any other is drawn as `DEFAULT_FACE`) at `config`'s size;
    /// `seed` varies its blinks.
    pub fn new(face_id: &str, config: Vp8Config, seed: u64) -> Result<FaceEncoder, Vp8Error> {
        let (portrait, rig) = stock_face(face_id, config.width)
            .or_else(|| stock_face(DEFAULT_FACE, config.width))
            .expect("the default face is drawn here");
        FaceEncoder::with_portrait(portrait, rig, config, seed)
    }

    /// A rigged portrait (a custom avatar), scaled to `config`'s size when it is drawn at another.
    pub fn with_portrait(
        portrait: RgbImage,
        rig: FaceRig,
        config: Vp8Config,
        seed: u64,
    ) -> Result<FaceEncoder, Vp8Error> {
        let (portrait, rig) = fit(portrait, rig, config.width as usize);
        let mut encoder = Vp8Encoder::new(config)?;
        encoder.picture().convert(&portrait);
        Ok(FaceEncoder { renderer: AvatarRenderer::new(portrait, rig, seed), encoder, frames: 0 })
    }

    /// Frames encoded so far (the index of the next one).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn request_keyframe(&mut self) {
        self.encoder.request_keyframe();
    }

    /// The next frame, drawn from `audio` (the 40 ms of the agent's 16 kHz audio it goes out with).
    pub fn encode(&mut self, audio: &[f32]) -> Result<(EncodedFrame<'_>, MouthShape), Vp8Error> {
        let (_, shape) = self.renderer.render(MediaTime(self.frames * FRAME_SAMPLES), audio);
        for &region in self.renderer.changed_regions() {
            self.encoder.picture().convert_region(self.renderer.frame(), region);
            self.encoder.mark_changed(region);
        }
        self.frames += 1;
        Ok((self.encoder.encode_changed()?, shape))
    }

    /// The next frame without drawing it: the picture holds still (only the codec's refinement of
    /// earlier changes is coded), for a frame whose audio never reached the face. Keeps the frames on
    /// their 40 ms timeline at a fraction of a drawn frame's cost.
    pub fn encode_still(&mut self) -> Result<EncodedFrame<'_>, Vp8Error> {
        self.frames += 1;
        self.encoder.encode_changed()
    }
}

/// `portrait` (square) and its rig at `side` pixels.
fn fit(portrait: RgbImage, rig: FaceRig, side: usize) -> (RgbImage, FaceRig) {
    if portrait.width == side && portrait.height == side {
        return (portrait, rig);
    }
    let factor = side as f32 / portrait.width as f32;
    let source = image::RgbImage::from_raw(portrait.width as u32, portrait.height as u32, portrait.rgb)
        .expect("an RgbImage holds width × height pixels");
    let scaled = image::imageops::resize(&source, side as u32, side as u32, image::imageops::FilterType::CatmullRom);
    (RgbImage { width: side, height: side, rgb: scaled.into_raw() }, rig.scaled(factor))
}
