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
    let session = session_binding::start(db, &runtime, id, models, providers, true, Some(wake), None).await.unwrap();
    LiveCall { runtime, delivering, session }
}
