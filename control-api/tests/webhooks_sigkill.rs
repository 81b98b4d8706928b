//! The real `confab serve` delivering 1,000 webhook events is killed with SIGKILL mid-way and restarted:
//! every event arrives, none is lost, and a redelivered event carries the same `webhook-id` and body.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use confab_api::store::Db;
use confab_api::webhooks;
use confab_engine::{ConversationEvent, EventKind};
use serde_json::{Value, json};

const EVENTS: u64 = 1000;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn serve(data: &Path, port: u16) -> Killed {
    let child = Command::new(env!("CARGO_BIN_EXE_confab"))
        .args(["serve", "--allow-private-webhooks", "--addr", &format!("127.0.0.1:{port}"), "--data"])
        .arg(data)
        // No models: the control plane and the deliverer run without the media worker.
        .env("CONFAB_MODELS_DIR", data.join("no-models"))
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Killed(child);
    for _ in 0..400 {
        if reqwest::get(format!("http://127.0.0.1:{port}/")).await.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("confab serve did not start");
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_delivery_loses_no_event() {
    // The receiver: (webhook-id, body) of every delivery, in arrival order.
    let received: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let store = received.clone();
    let receiver = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: String| {
            let store = store.clone();
            async move {
                let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                store.lock().unwrap().push((id, body));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = Db::connect(&confab_api::store::resolve_url(None, &data).unwrap()).await.unwrap();
    let (_, key) = confab_api::auth::create_key(&db, "sigkill").await.unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = serve(&data, port).await;
    let client = reqwest::Client::new();
    let agent: Value = client
        .post(format!("http://127.0.0.1:{port}/v1/ext/agent"))
        .header("x-api-key", &key)
        .json(&json!({ "agent_name": "Hooked", "callback_url": hook, "callback_events": ["user.started_speaking"] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conversation: Value = client
        .post(format!("http://127.0.0.1:{port}/v1/ext/conversation"))
        .header("x-api-key", &key)
        .json(&json!({ "agent_id": agent["id"] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = conversation["id"].as_str().unwrap().to_string();

    // The engine's side stores each event before anything is sent.
    for i in 0..EVENTS {
        let event = ConversationEvent { media_time: Duration::from_millis(i), kind: EventKind::UserStartedSpeaking };
        webhooks::enqueue(&db, &id, &event).await.unwrap();
    }
    // The running deliverer finds them on its next poll of the outbox.
    wait_until("the first deliveries", || received.lock().unwrap().len() >= 100).await;
    drop(server); // SIGKILL, mid-delivery
    let before_restart = received.lock().unwrap().len();
    assert!(before_restart < EVENTS as usize, "killed too late to test anything ({before_restart} delivered)");

    let _server = serve(&data, port).await;
    wait_until("every event", || {
        let got = received.lock().unwrap();
        got.iter().map(|(id, _)| id.as_str()).collect::<std::collections::HashSet<_>>().len() == EVENTS as usize
    })
    .await;
    let got = received.lock().unwrap().clone();
    let mut bodies: HashMap<&str, &str> = HashMap::new();
    let mut first_arrivals = Vec::new();
    for (webhook_id, body) in &got {
        match bodies.get(webhook_id.as_str()) {
            Some(earlier) => assert_eq!(earlier, body, "a redelivery carries the same event under the same id"),
            None => {
                bodies.insert(webhook_id, body);
                let envelope: Value = serde_json::from_str(body).unwrap();
                first_arrivals.push(envelope["timestamp"].as_f64().unwrap());
            }
        }
    }
    assert!(first_arrivals.windows(2).all(|w| w[0] <= w[1]), "delivery order kept across the crash");
    assert!(got.len() <= EVENTS as usize + webhooks::BATCH as usize, "{} deliveries", got.len());
}
