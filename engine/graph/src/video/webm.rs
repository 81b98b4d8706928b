//! WebM files of the agent's face and the call's voices: VP8 video and Opus audio (48 kHz clock, mono),
//! muxed by libwebm (the `webm` crate). Frames must be added in timestamp order across both tracks.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use webm::mux::{AudioCodecId, Segment, SegmentBuilder, VideoCodecId, Writer};
use webm::mux::{AudioTrack, VideoTrack};

#[derive(Debug, thiserror::Error)]
pub enum WebmError {
    #[error("cannot create {path}: {source}")]
    Create { path: String, source: std::io::Error },
    #[error("the WebM muxer refused {what}: {error:?}")]
    Mux { what: &'static str, error: webm::mux::Error },
    #[error("the WebM file could not be finished")]
    Finalize,
}

/// Opus's identification header, the track's CodecPrivate (RFC 7845 §5.1): one channel, `input_rate`
/// as the original rate, `pre_skip` samples at 48 kHz to drop at the start.
pub fn opus_head(input_rate: u32, pre_skip: u16) -> [u8; 19] {
    let mut head = [0u8; 19];
    head[..8].copy_from_slice(b"OpusHead");
    head[8] = 1; // version
    head[9] = 1; // channels
    head[10..12].copy_from_slice(&pre_skip.to_le_bytes());
    head[12..16].copy_from_slice(&input_rate.to_le_bytes());
    // Output gain 0, channel mapping family 0.
    head
}

pub struct WebmWriter {
    segment: Segment<BufWriter<File>>,
    video: Option<VideoTrack>,
    audio: AudioTrack,
}

impl WebmWriter {
    /// A new file at `path` with a VP8 track of `video` = (width, height), if given, and a mono Opus track.
    pub fn create(path: &Path, video: Option<(u32, u32)>, opus_input_rate: u32) -> Result<WebmWriter, WebmError> {
        let file =
            File::create(path).map_err(|source| WebmError::Create { path: path.display().to_string(), source })?;
        let mux = |what| move |error| WebmError::Mux { what, error };
        let builder = SegmentBuilder::new(Writer::new(BufWriter::new(file))).map_err(mux("the segment"))?;
        let builder = builder.set_writing_app("confab").map_err(mux("the writing app"))?;
        let (builder, video) = match video {
            Some((width, height)) => {
                let (builder, track) =
                    builder.add_video_track(width, height, VideoCodecId::VP8, None).map_err(mux("the video track"))?;
                (builder, Some(track))
            }
            None => (builder, None),
        };
        let (builder, audio) =
            builder.add_audio_track(48_000, 1, AudioCodecId::Opus, None).map_err(mux("the audio track"))?;
        let builder =
            builder.set_codec_private(audio, &opus_head(opus_input_rate, 312)).map_err(mux("the Opus header"))?;
        Ok(WebmWriter { segment: builder.build(), video, audio })
    }

    pub fn add_video(&mut self, timestamp_ns: u64, frame: &[u8], keyframe: bool) -> Result<(), WebmError> {
        let video = self.video.ok_or(WebmError::Mux { what: "a video frame", error: webm::mux::Error::BadParam })?;
        self.segment
            .add_frame(video, frame, timestamp_ns, keyframe)
            .map_err(|error| WebmError::Mux { what: "a video frame", error })
    }

    pub fn add_audio(&mut self, timestamp_ns: u64, packet: &[u8]) -> Result<(), WebmError> {
        self.segment
            .add_frame(self.audio, packet, timestamp_ns, true)
            .map_err(|error| WebmError::Mux { what: "an audio packet", error })
    }

    /// Writes the cues and the duration; the file is complete after this.
    pub fn finish(self) -> Result<(), WebmError> {
        self.segment.finalize(None).map(|_| ()).map_err(|_| WebmError::Finalize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opus_head_follows_rfc_7845() {
        let head = opus_head(16_000, 312);
        assert_eq!(&head[..8], b"OpusHead");
        assert_eq!(head[8..12], [1, 1, 0x38, 0x01]);
        assert_eq!(head[12..16], 16_000u32.to_le_bytes());
        assert_eq!(head[16..], [0, 0, 0]);
    }
}
