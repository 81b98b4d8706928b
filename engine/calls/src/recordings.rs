//! Where a conversation's recording lives on disk: the media worker's recorder writes it, the
//! conversations route serves it, a restart after a crash finds what was recorded.

use std::path::PathBuf;

/// `<dir>/<conversation id>.webm` (recordings made before the face existed are `.wav`: see
/// `recorded_file`).
pub fn recording_path(dir: &std::path::Path, conversation_id: &str) -> PathBuf {
    dir.join(format!("{conversation_id}.webm"))
}

/// The recording of `conversation_id` on disk and its media type: the WebM, or an older WAV.
pub fn recorded_file(dir: &std::path::Path, conversation_id: &str) -> Option<(PathBuf, &'static str)> {
    let webm = recording_path(dir, conversation_id);
    let wav = dir.join(format!("{conversation_id}.wav"));
    [(webm, "video/webm"), (wav, "audio/wav")].into_iter().find(|(path, _)| path.exists())
}
