//! Video out: the avatar's RGB frames as I420 (`yuv`), encoded to VP8 with libvpx in real-time mode
//! (`vp8`), and written with the agent's Opus voice into a WebM file (`webm`). The renderer that draws
//! the frames is `crate::avatar`; transport (RTP) sits above this module.

pub mod face_encoder;
pub mod recording;
pub mod vp8;
pub mod webm;
pub mod yuv;
