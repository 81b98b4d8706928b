//! A call's recording as its parts share it: the audio tasks push the user's and the agent's audio, the
//! face thread its video, and the call-end hook finishes the file. A recording that fails stops there;
//! the call goes on.

use confab_engine::lock::lock;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::recorder::Recorder;
use confab_calls::CallEndHook;

/// The call's recorder, shared by the audio tasks and the call-end hook that finishes it.
#[derive(Clone, Default)]
pub struct RecordingSlot(Arc<Mutex<Option<Recorder>>>);

impl RecordingSlot {
    /// Starts recording to `path`; `video` = the face's (width, height) when the call sends one.
    pub fn start(&self, path: &Path, video: Option<(u32, u32)>) {
        match Recorder::create(path, video) {
            Ok(recorder) => *self.lock() = Some(recorder),
            Err(err) => tracing::error!(path = %path.display(), error = %err, "cannot record the call"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Recorder>> {
        lock(&self.0)
    }

    pub(super) fn push_user(&self, samples: &[f32]) {
        if let Some(recorder) = self.lock().as_mut() {
            recorder.push_user(samples);
        }
    }

    pub(super) fn push_agent(&self, frame: &[f32]) {
        let mut slot = self.lock();
        if let Some(recorder) = slot.as_mut()
            && let Err(err) = recorder.push_agent(frame)
        {
            tracing::error!(error = %err, "the recording failed; it stops here");
            *slot = None;
        }
    }

    /// Video frame `index` of the face (the face thread calls this as it encodes).
    pub fn push_video(&self, index: u64, frame: &[u8], keyframe: bool) {
        let mut slot = self.lock();
        if let Some(recorder) = slot.as_mut()
            && let Err(err) = recorder.push_video(index, frame, keyframe)
        {
            tracing::error!(error = %err, "the recording failed; it stops here");
            *slot = None;
        }
    }

    /// Finishes the recording when the call ends; the hook answers its URL when there is one.
    pub fn call_end_hook(&self, url: String) -> CallEndHook {
        let slot = self.clone();
        Box::new(move || {
            Box::pin(async move {
                let recorder = slot.lock().take()?;
                match tokio::task::spawn_blocking(move || recorder.finish()).await {
                    Ok(Ok(_)) => Some(url),
                    Ok(Err(err)) => {
                        tracing::error!(error = %err, "cannot finish the recording");
                        None
                    }
                    Err(_) => None,
                }
            })
        })
    }
}
