//! The agent's face: a portrait with its rig (`rig`), animated by the agent's outgoing audio
//! (`mouth`), its head in idle motion (`head`), drawn on the CPU one frame per 40 ms of audio (`renderer`, over the raster operations of
//! `image`). The stock faces are drawn here too (`stock`): illustrated, never the likeness of a real
//! person. No HTTP, no SQL, no codec: encoding is `crate::video`, transport sits above both.

pub mod from_image;
pub mod head;
pub mod image;
pub mod lips;
pub mod mouth;
pub mod mouth_interior;
pub mod photo_pose;
pub mod renderer;
pub mod rig;
pub mod stock;

pub use image::RgbImage;
pub use mouth::{MouthDriver, MouthShape};
pub use renderer::{AvatarRenderer, FPS, FRAME_SAMPLES};
pub use rig::{EyeRig, FaceRig};

/// The next number of a xorshift64 sequence (`state` never 0): blink times and head motion phases,
/// deterministic for a session's seed.
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
