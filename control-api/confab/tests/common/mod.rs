//! What the live-call tests share: the API driven without a socket, espeak-ng speech, and a live call
//! on the engine's runtime with a webhook deliverer.

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use confab_engine::providers::env::ProviderEnv;
use confab_engine::runtime::{Runtime, RuntimeConfig};
use confab_http::webhooks::{Deliverer, WebhookConfig};
use confab_store::Db;
use confab_store::call_records::StoreRecords;
use confab_worker::session_binding::{self, LiveConversation};
use serde_json::Value;
use tower::ServiceExt;

/// One API request with the key; the answer's JSON (whatever its status).
pub async fn call(router: &Router, key: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let request =
        Request::builder().method(method).uri(path).header("x-api-key", key).header("content-type", "application/json");
    let request = request.body(body.map(|b| Body::from(b.to_string())).unwrap_or_default()).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    serde_json::from_slice(&axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap()).unwrap()
}

/// `text` spoken by espeak-ng (American English, `words_per_minute`), 16 kHz.
pub fn speak(text: &str, words_per_minute: u32) -> Vec<f32> {
    let path = std::env::temp_dir().join(format!("confab-live-{}-{}.wav", std::process::id(), text.len()));
    let ok = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", &words_per_minute.to_string(), "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .unwrap();
    assert!(ok.success());
    let audio = confab_engine::audio::wav::read_mono_16k(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    audio
}

/// A live call: the engine's runtime (one media thread, this test's I/O runtime), a webhook deliverer
/// allowed to reach loopback, and conversation `id` started on them (tools and callbacks may reach
/// loopback too).
pub struct LiveCall {
    pub runtime: Arc<Mutex<Runtime>>,
    pub delivering: tokio::task::JoinHandle<()>,
    pub session: LiveConversation,
}

pub async fn start_live_call(db: &Db, id: &str, models: &Path, providers: &ProviderEnv) -> LiveCall {
    let mut config = RuntimeConfig::new(models.to_path_buf(), 4);
    config.media_threads = 1;
    config.io = Some(tokio::runtime::Handle::current());
    let runtime = Arc::new(Mutex::new(Runtime::start(config).expect("models are fetched")));
    let deliverer = Deliverer::new(db.clone(), WebhookConfig { allow_private: true, ..WebhookConfig::default() });
    let wake = deliverer.waker();
    let delivering = tokio::spawn(deliverer.run());
    let records: Arc<dyn confab_calls::CallRecords> = StoreRecords::new(db.clone(), Some(wake));
    let session = session_binding::start(&records, &runtime, id, models, providers, true, None).await.unwrap();
    LiveCall { runtime, delivering, session }
}

/// What a test's server received, in order, and a way to wait for it (not for a time).
pub struct Arrivals<T> {
    items: Mutex<Vec<T>>,
    count: tokio::sync::watch::Sender<usize>,
}

impl<T> Default for Arrivals<T> {
    fn default() -> Self {
        Arrivals { items: Mutex::new(Vec::new()), count: tokio::sync::watch::Sender::new(0) }
    }
}

impl<T: Clone> Arrivals<T> {
    pub fn push(&self, item: T) {
        let mut items = self.items.lock().unwrap();
        items.push(item);
        self.count.send_replace(items.len());
    }

    pub fn all(&self) -> Vec<T> {
        self.items.lock().unwrap().clone()
    }

    /// Waits until `done` holds of what arrived, 20 s at most (then returns: the test's assertions say
    /// what is missing).
    pub async fn wait_until(&self, done: impl Fn(&[T]) -> bool) {
        let mut count = self.count.subscribe();
        let waiting = async {
            loop {
                if done(&self.items.lock().unwrap()) {
                    return;
                }
                if count.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(20), waiting).await;
    }
}

/// Feeds `audio` (16 kHz) to a call's input at the pace a transport would, 20 ms a frame, draining its
/// output as it goes; calls `heard` with each sample of the agent's voice. Blocks: run it on a blocking
/// thread.
pub fn feed_in_real_time(
    audio: &[f32],
    input: &mut rtrb::Producer<f32>,
    output: &mut rtrb::Consumer<f32>,
    mut heard: impl FnMut(f32),
) {
    let start = std::time::Instant::now();
    for (i, frame) in audio.chunks(320).enumerate() {
        for &sample in frame {
            let _ = input.push(sample);
        }
        while let Ok(sample) = output.pop() {
            heard(sample);
        }
        let due = start + std::time::Duration::from_millis(20 * (i as u64 + 1));
        if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}
