//! A loopback HTTP receiver for end-to-end calls: it takes the agent's webhooks (each signature checked
//! when read) and serves test files to the page (with CORS, the page being on another origin).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::Value;

use crate::webhook_signature_is_valid;

/// One delivery as received.
#[derive(Clone)]
struct Delivery {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

pub struct Receiver {
    /// Where webhooks go: `http://127.0.0.1:<port>/hook`.
    pub hook_url: String,
    /// Where the files are: `http://127.0.0.1:<port>/files/<name>`.
    pub files_url: String,
    seen: Arc<Mutex<Vec<Delivery>>>,
}

impl Receiver {
    /// Starts the receiver on a free loopback port, serving `files` (name, bytes).
    pub async fn start(files: Vec<(String, Vec<u8>)>) -> Receiver {
        Receiver::start_answering_after(files, Duration::ZERO).await
    }

    /// As `start`, but each webhook is answered `delay` after it arrived (it counts as received at once).
    pub async fn start_answering_after(files: Vec<(String, Vec<u8>)>, delay: Duration) -> Receiver {
        let seen: Arc<Mutex<Vec<Delivery>>> = Arc::default();
        let store = seen.clone();
        let files = Arc::new(files);
        let app = Router::new()
            .route(
                "/hook",
                post(move |headers: HeaderMap, body: String| {
                    let store = store.clone();
                    async move {
                        let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                        let delivery = Delivery {
                            id: h("webhook-id"),
                            timestamp: h("webhook-timestamp"),
                            signature: h("webhook-signature"),
                            body,
                        };
                        store.lock().unwrap().push(delivery);
                        tokio::time::sleep(delay).await;
                        "ok"
                    }
                }),
            )
            .route(
                "/files/{name}",
                get(move |Path(name): Path<String>| {
                    let files = files.clone();
                    async move {
                        match files.iter().find(|(n, _)| *n == name) {
                            Some((_, bytes)) => {
                                let kind = match name.rsplit_once('.').map(|(_, extension)| extension) {
                                    Some("html") => "text/html; charset=utf-8",
                                    Some("js") => "text/javascript",
                                    Some("wav") => "audio/wav",
                                    _ => "application/octet-stream",
                                };
                                let headers =
                                    [(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"), (header::CONTENT_TYPE, kind)];
                                (headers, bytes.clone()).into_response()
                            }
                            None => StatusCode::NOT_FOUND.into_response(),
                        }
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { hook_url: format!("{base}/hook"), files_url: format!("{base}/files"), seen }
    }

    /// Events received for `conversation_id`, in order of arrival; panics on a bad signature.
    pub fn events(&self, secret: &str, conversation_id: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|d| {
                assert!(
                    webhook_signature_is_valid(secret, &d.id, &d.timestamp, &d.signature, d.body.as_bytes()),
                    "bad signature on {}",
                    d.body
                );
                serde_json::from_str::<Value>(&d.body).unwrap()
            })
            .filter(|event| event["conversation_id"] == conversation_id)
            .collect()
    }

    /// Names of the events received for `conversation_id`, in order.
    pub fn event_names(&self, secret: &str, conversation_id: &str) -> Vec<String> {
        let events = self.events(secret, conversation_id);
        events.iter().map(|e| e["event"]["name"].as_str().unwrap_or_default().to_string()).collect()
    }

    /// Waits until an event `name` arrived for `conversation_id`; panics after `timeout`.
    pub async fn wait_for_event(&self, secret: &str, conversation_id: &str, name: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let names = self.event_names(secret, conversation_id);
            if names.iter().any(|n| n == name) {
                return;
            }
            assert!(Instant::now() < deadline, "no {name} webhook within {timeout:?}; got {names:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every delivery as received, in order: (`webhook-id`, body), signatures unchecked.
    pub fn deliveries(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().iter().map(|d| (d.id.clone(), d.body.clone())).collect()
    }

    /// True when every delivery carried its own `webhook-id`.
    pub fn ids_are_distinct(&self) -> bool {
        let seen = self.seen.lock().unwrap();
        seen.iter().map(|d| d.id.as_str()).collect::<HashSet<_>>().len() == seen.len()
    }
}
