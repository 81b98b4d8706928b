//! The real `confab serve` delivering 1,000 webhook events is killed with SIGKILL mid-way and restarted:
//! every event arrives, none is lost, and a redelivered event carries the same `webhook-id` and body.
//! The events are written straight into the server's outbox (as the engine's side does), through the
//! control plane's store.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use confab_engine::{ConversationEvent, EventKind};
use confab_http::webhooks;
use confab_store::Db;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key};
use reqwest::Method;
use serde_json::{Value, json};

const EVENTS: u64 = 1000;

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
    let receiver = Receiver::start(vec![]).await;
    let dir = std::env::temp_dir().join(format!("confab-sigkill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let mut server = Server::start(&data, &["--allow-private-webhooks"]).await;
    let client = reqwest::Client::new();
    let agent = json!({ "agent_name": "Hooked", "callback_url": receiver.hook_url,
        "callback_events": ["user.started_speaking"] });
    let agent = api(&client, &key, Method::POST, format!("{}/v1/ext/agent", server.base), Some(agent)).await;
    let body = json!({ "agent_id": agent["id"] });
    let conversation =
        api(&client, &key, Method::POST, format!("{}/v1/ext/conversation", server.base), Some(body)).await;
    let id = conversation["id"].as_str().unwrap().to_string();
    let db = Db::connect(&confab_store::resolve_url(None, &data).unwrap()).await.unwrap();

    // The engine's side stores each event before anything is sent.
    for i in 0..EVENTS {
        let event = ConversationEvent { media_time: Duration::from_millis(i), kind: EventKind::UserStartedSpeaking };
        confab_store::outbox::enqueue(&db, &id, &event).await.unwrap();
    }
    // The running deliverer finds them on its next poll of the outbox.
    wait_until("the first deliveries", || receiver.deliveries().len() >= 100).await;
    server.kill(); // SIGKILL, mid-delivery
    let before_restart = receiver.deliveries().len();
    assert!(before_restart < EVENTS as usize, "killed too late to test anything ({before_restart} delivered)");

    let mut server = Server::start_on(&data, server.port, &["--allow-private-webhooks"]).await;
    wait_until("every event", || {
        let got = receiver.deliveries();
        got.iter().map(|(id, _)| id.as_str()).collect::<HashSet<_>>().len() == EVENTS as usize
    })
    .await;
    let got = receiver.deliveries();
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
    assert!(got.len() <= EVENTS as usize + webhooks::MAX_IN_FLIGHT, "{} deliveries", got.len());
    server.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
