//! Webhook deliveries per second from the outbox (SQLite) to a loopback receiver: 2,000 events over 20
//! conversations (order is kept per conversation, so conversations go in parallel).
//! `cargo bench -p confab-benches --bench webhooks`; under `cargo test`, 100 events.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use confab_benches::api_post;
use confab_engine::{ConversationEvent, EventKind};
use confab_http::webhooks::{Deliverer, WebhookConfig};
use confab_store::Db;
use serde_json::json;

fn main() {
    let events = if std::env::args().any(|a| a == "--bench") { 2000 } else { 100 };
    let conversations = 20;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let received = Arc::new(AtomicUsize::new(0));
        let counter = received.clone();
        let receiver = Router::new().route(
            "/hook",
            post(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                async { "ok" }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });

        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display())).await.unwrap();
        let (router, key) = confab_benches::api_router(&db).await;
        let agent = api_post(
            &router,
            &key,
            "/v1/ext/agent",
            json!({ "agent_name": "B", "callback_url": url, "callback_events": ["user.started_speaking"] }),
        )
        .await;
        let mut ids = Vec::new();
        for _ in 0..conversations {
            ids.push(
                api_post(&router, &key, "/v1/ext/conversation", json!({ "agent_id": agent["id"] })).await["id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        for i in 0..events {
            let event =
                ConversationEvent { media_time: Duration::from_millis(i as u64), kind: EventKind::UserStartedSpeaking };
            confab_store::outbox::enqueue(&db, &ids[i % conversations], &event).await.unwrap();
        }
        let config =
            WebhookConfig { allow_private: true, poll_interval: Duration::from_millis(5), ..WebhookConfig::default() };
        let started = Instant::now();
        let deliverer = tokio::spawn(Deliverer::new(db.clone(), config).run());
        while received.load(Ordering::Relaxed) < events {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        deliverer.abort();
        println!(
            "webhooks: {events} deliveries over {conversations} conversations in {seconds:.2} s = {:.0} per second",
            events as f64 / seconds
        );
    });
}
