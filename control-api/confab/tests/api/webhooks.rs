//! Webhook delivery from the durable outbox to a receiver started by the test: signatures, the exact
//! envelope, subscriptions, order, retries (500 then 200, 429 with Retry-After, timeouts), no retry on
//! 410, a crash of the deliverer in the middle of 1,000 events, and the SSRF guard.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use confab_engine::{ConversationEvent, EventKind};
use confab_http::webhooks::{Deliverer, WebhookConfig, signing};
use confab_store::conversation_events;
use serde_json::{Value, json};

use crate::on_both_databases;
use crate::support::TestApp;

on_both_databases!(
    signed_envelopes_arrive_in_order_for_subscribed_events_only,
    failures_are_retried_or_not_as_the_status_says,
    a_hanging_receiver_delays_only_its_own_conversation,
    a_short_retry_after_never_shortens_the_retry_window,
    a_crashed_deliverer_loses_nothing,
    the_ssrf_guard_refuses_private_targets,
);

#[derive(Clone, Debug)]
struct Delivery {
    id: String,
    timestamp: i64,
    signature: String,
    body: String,
}

#[derive(Default)]
struct Receiver {
    deliveries: Mutex<Vec<(String, Delivery)>>,
    calls: Mutex<HashMap<String, usize>>,
    /// When each request arrived, by path.
    arrivals: Mutex<Vec<(String, std::time::Instant)>>,
    /// Releases the requests to `hang`.
    release: tokio::sync::Notify,
    /// Bumped whenever a request arrives or a delivery is kept, for a test waiting on either.
    changed: tokio::sync::watch::Sender<u64>,
}

async fn receive(
    State(receiver): State<Arc<Receiver>>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    receiver.arrivals.lock().unwrap().push((path.clone(), std::time::Instant::now()));
    let call = {
        let mut calls = receiver.calls.lock().unwrap();
        let n = calls.entry(path.clone()).or_default();
        *n += 1;
        *n
    };
    receiver.changed.send_modify(|n| *n += 1);
    let delivery = Delivery {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp").parse().unwrap_or(0),
        signature: header("webhook-signature"),
        body,
    };
    let answer = match (path.as_str(), call) {
        ("flaky", 1) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        ("limited", 1) => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "0")]).into_response(),
        // Never answers: the deliverer's request times out.
        ("slow", 1) => std::future::pending().await,
        ("gone", _) => StatusCode::GONE.into_response(),
        ("busy", _) => (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")]).into_response(),
        ("hang", _) => {
            receiver.release.notified().await;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::OK.into_response(),
    };
    if answer.status().is_success() {
        receiver.deliveries.lock().unwrap().push((path, delivery));
        receiver.changed.send_modify(|n| *n += 1);
    }
    answer
}

async fn start_receiver() -> (Arc<Receiver>, String) {
    let receiver = Arc::new(Receiver::default());
    let app = Router::new().route("/hooks/{path}", post(receive)).with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/hooks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (receiver, base)
}

fn config(allow_private: bool) -> WebhookConfig {
    WebhookConfig {
        allow_private,
        // Generous: the whole suite runs in parallel on two cores; only "slow" must time out.
        request_timeout: Duration::from_millis(1500),
        retry_unit: Duration::from_millis(20),
        retry_window: Duration::from_secs(60),
        lease_margin: Duration::from_millis(200),
        poll_interval: Duration::from_millis(20),
    }
}

/// An agent posting `events` to `url`, and a conversation with it; answers (conversation id, secret).
async fn conversation(app: &TestApp, url: &str, events: &[&str]) -> (String, String) {
    let created = app
        .post("/v1/ext/agent", json!({ "agent_name": "Hooked", "callback_url": url, "callback_events": events }))
        .await
        .json();
    let secret = created["webhook_secret"].as_str().unwrap().to_string();
    let conversation = app.create("/v1/ext/conversation", json!({ "agent_id": created["id"] })).await;
    (conversation, secret)
}

fn event(ms: u64, kind: EventKind) -> ConversationEvent {
    ConversationEvent { media_time: Duration::from_millis(ms), kind }
}

/// Waits until `done` holds of what `receiver` got (a minute at most), looking again at each request
/// and delivery.
async fn wait_for(receiver: &Receiver, what: &str, mut done: impl FnMut() -> bool) {
    let mut changed = receiver.changed.subscribe();
    let waiting = async {
        while !done() {
            changed.changed().await.expect("the receiver lives as long as the test");
        }
    };
    if tokio::time::timeout(Duration::from_secs(60), waiting).await.is_err() {
        panic!("timed out waiting for {what}");
    }
}

/// The outbox's counts by status once `failed` events have failed (or after about 15 s).
async fn wait_for_failed(app: &TestApp, failed: i64) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for _ in 0..750 {
        counts = confab_store::outbox::status_counts(&app.db).await.unwrap();
        if counts.get("failed") == Some(&failed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    counts
}

async fn signed_envelopes_arrive_in_order_for_subscribed_events_only(app: TestApp) {
    let (receiver, base) = start_receiver().await;
    let (id, secret) =
        conversation(&app, &format!("{base}/ok"), &["user.started_speaking", "utterance_committed", "call_ended"])
            .await;
    let deliverer = Deliverer::new(app.db.clone(), config(true));
    let wake = deliverer.waker();
    let task = tokio::spawn(deliverer.run());
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let consumer = tokio::spawn(conversation_events::consume(app.db.clone(), id.clone(), rx, Some(wake), None));
    for e in [
        event(100, EventKind::UserStartedSpeaking),
        event(900, EventKind::UserStoppedSpeaking),
        event(1400, EventKind::UtteranceCommitted { text: "hello there".into() }),
        event(2000, EventKind::AgentStartedSpeaking { text: "Hi!".into() }),
        event(3000, EventKind::CallEnded),
    ] {
        tx.send(e).await.unwrap();
    }
    drop(tx);
    consumer.await.unwrap();
    wait_for(&receiver, "three deliveries", || receiver.deliveries.lock().unwrap().len() == 3).await;
    task.abort();
    let deliveries = receiver.deliveries.lock().unwrap().clone();
    let names: Vec<String> = deliveries
        .iter()
        .map(|(_, d)| serde_json::from_str::<Value>(&d.body).unwrap()["event"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["user.started_speaking", "utterance_committed", "call_ended"]);
    let now = chrono::Utc::now().timestamp();
    for (_, d) in &deliveries {
        assert!(d.id.starts_with("msg_"));
        assert_eq!(signing::verify(&secret, &d.id, d.timestamp, &d.signature, d.body.as_bytes(), now), Ok(()), "{d:?}");
        let body: Value = serde_json::from_str(&d.body).unwrap();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["conversation_id", "event", "timestamp", "type"]);
        assert_eq!(body["type"], "pipeline");
        assert_eq!(body["conversation_id"], id.as_str());
        assert!(body["timestamp"].as_f64().unwrap() > 1.6e9);
    }
    let committed: Value = serde_json::from_str(&deliveries[1].1.body).unwrap();
    assert_eq!(committed["event"], json!({ "name": "utterance_committed", "payload": { "text": "hello there" } }));
    let ended: Value = serde_json::from_str(&deliveries[2].1.body).unwrap();
    assert_eq!(ended["event"]["payload"], json!({}));
}

async fn failures_are_retried_or_not_as_the_status_says(app: TestApp) {
    let (receiver, base) = start_receiver().await;
    let mut conversations = Vec::new();
    for path in ["flaky", "limited", "slow", "gone"] {
        let (id, _) = conversation(&app, &format!("{base}/{path}"), &["call_ended", "user.started_speaking"]).await;
        confab_store::outbox::enqueue(&app.db, &id, &event(0, EventKind::UserStartedSpeaking)).await.unwrap();
        confab_store::outbox::enqueue(&app.db, &id, &event(10, EventKind::CallEnded)).await.unwrap();
        conversations.push((path, id));
    }
    let task = tokio::spawn(Deliverer::new(app.db.clone(), config(true)).run());
    wait_for(&receiver, "the retried receivers to get both events", || {
        let d = receiver.deliveries.lock().unwrap();
        ["flaky", "limited", "slow"].iter().all(|p| d.iter().filter(|(path, _)| path == p).count() >= 2)
    })
    .await;
    let counts = wait_for_failed(&app, 2).await;
    task.abort();
    // 410 is final: both events to "gone" failed after one attempt each, and never blocked the others.
    assert_eq!(counts.get("failed"), Some(&2), "{counts:?}");
    assert_eq!(receiver.calls.lock().unwrap()["gone"], 2);
    let deliveries = receiver.deliveries.lock().unwrap().clone();
    for path in ["flaky", "limited", "slow"] {
        let names: Vec<String> = deliveries
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, d)| {
                serde_json::from_str::<Value>(&d.body).unwrap()["event"]["name"].as_str().unwrap().to_string()
            })
            .collect();
        // The timed-out first attempt may have reached the receiver too: order holds either way.
        assert_eq!(names.last().map(String::as_str), Some("call_ended"), "{path}: {names:?}");
        assert_eq!(names.iter().filter(|n| *n == "call_ended").count(), 1, "{path}: {names:?}");
    }
}

/// Issue 10, defect 2: a receiver that does not answer holds up its own conversation's events, and no
/// other conversation's.
async fn a_hanging_receiver_delays_only_its_own_conversation(app: TestApp) {
    let (receiver, base) = start_receiver().await;
    let events = ["user.started_speaking", "call_ended"];
    let (hanging, _) = conversation(&app, &format!("{base}/hang"), &events).await;
    let (quick, _) = conversation(&app, &format!("{base}/quick"), &events).await;
    for id in [&hanging, &quick] {
        confab_store::outbox::enqueue(&app.db, id, &event(0, EventKind::UserStartedSpeaking)).await.unwrap();
        confab_store::outbox::enqueue(&app.db, id, &event(10, EventKind::CallEnded)).await.unwrap();
    }
    // The hanging request is never timed out during the test.
    let config = WebhookConfig { request_timeout: Duration::from_secs(120), ..config(true) };
    let task = tokio::spawn(Deliverer::new(app.db.clone(), config).run());
    wait_for(&receiver, "the quick conversation's two events while the other hangs", || {
        receiver.deliveries.lock().unwrap().iter().filter(|(p, _)| p == "quick").count() == 2
    })
    .await;
    assert_eq!(receiver.calls.lock().unwrap()["hang"], 1, "its first event is still being sent");
    assert!(receiver.deliveries.lock().unwrap().iter().all(|(p, _)| p != "hang"));
    receiver.release.notify_one();
    wait_for(&receiver, "the released conversation's events, in order", || {
        let hang = receiver.calls.lock().unwrap().get("hang").copied().unwrap_or(0);
        if hang == 2 {
            receiver.release.notify_one();
        }
        receiver.deliveries.lock().unwrap().iter().filter(|(p, _)| p == "hang").count() == 2
    })
    .await;
    task.abort();
    let names: Vec<String> = receiver
        .deliveries
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == "hang")
        .map(|(_, d)| serde_json::from_str::<Value>(&d.body).unwrap()["event"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["user.started_speaking", "call_ended"]);
}

/// Issue 10, defect 3: `503` with `Retry-After: 1` on every attempt. The retries keep at least a second
/// apart (the schedule would be faster here), and the event fails only once its window has closed.
async fn a_short_retry_after_never_shortens_the_retry_window(app: TestApp) {
    let (receiver, base) = start_receiver().await;
    let (id, _) = conversation(&app, &format!("{base}/busy"), &["call_ended"]).await;
    let stored = std::time::Instant::now();
    confab_store::outbox::enqueue(&app.db, &id, &event(0, EventKind::CallEnded)).await.unwrap();
    let window = Duration::from_secs(3);
    let config = WebhookConfig { retry_window: window, ..config(true) };
    let task = tokio::spawn(Deliverer::new(app.db.clone(), config).run());
    let counts = wait_for_failed(&app, 1).await;
    task.abort();
    assert_eq!(counts.get("failed"), Some(&1), "{counts:?}");
    let arrivals: Vec<std::time::Instant> = receiver.arrivals.lock().unwrap().iter().map(|(_, at)| *at).collect();
    assert!(arrivals.len() >= 3, "{} attempts", arrivals.len());
    for pair in arrivals.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(990),
            "Retry-After is a lower bound: {:?}",
            pair[1] - pair[0]
        );
    }
    assert!(*arrivals.last().unwrap() - stored >= window - Duration::from_millis(50), "tried until the window closed");
}

async fn a_crashed_deliverer_loses_nothing(app: TestApp) {
    let (receiver, base) = start_receiver().await;
    let (id, _) = conversation(&app, &format!("{base}/ok"), &["user.started_speaking"]).await;
    for i in 0..1000u64 {
        confab_store::outbox::enqueue(&app.db, &id, &event(i, EventKind::UserStartedSpeaking)).await.unwrap();
    }
    let first = tokio::spawn(Deliverer::new(app.db.clone(), config(true)).run());
    wait_for(&receiver, "some deliveries", || receiver.deliveries.lock().unwrap().len() >= 100).await;
    first.abort(); // the process dies here, mid-delivery
    let _ = first.await;
    let second = tokio::spawn(Deliverer::new(app.db.clone(), config(true)).run());
    wait_for(&receiver, "all events", || {
        let d = receiver.deliveries.lock().unwrap();
        d.iter().map(|(_, d)| d.id.clone()).collect::<std::collections::HashSet<_>>().len() == 1000
    })
    .await;
    second.abort();
    let deliveries = receiver.deliveries.lock().unwrap().clone();
    // Redeliveries keep their id and carry the same body; first arrivals follow the event order.
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut order = Vec::new();
    for (_, d) in &deliveries {
        match seen.get(&d.id) {
            Some(body) => assert_eq!(body, &d.body, "a duplicate carries the same event"),
            None => {
                seen.insert(d.id.clone(), d.body.clone());
                let body: Value = serde_json::from_str(&d.body).unwrap();
                order.push(body["timestamp"].as_f64().unwrap());
            }
        }
    }
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "per-conversation order kept");
    assert!(deliveries.len() <= 1001 + 64, "at most the batch in flight is delivered twice: {}", deliveries.len());
}

async fn the_ssrf_guard_refuses_private_targets(app: TestApp) {
    let (receiver, base) = start_receiver().await;
    let (literal, _) = conversation(&app, &format!("{base}/ok"), &["call_ended"]).await;
    let named = base.replace("127.0.0.1", "localhost");
    let (by_name, _) = conversation(&app, &format!("{named}/ok"), &["call_ended"]).await;
    for id in [&literal, &by_name] {
        confab_store::outbox::enqueue(&app.db, id, &event(0, EventKind::CallEnded)).await.unwrap();
    }
    let task = tokio::spawn(Deliverer::new(app.db.clone(), config(false)).run());
    let counts = wait_for_failed(&app, 2).await;
    task.abort();
    assert_eq!(counts.get("failed"), Some(&2), "{counts:?}");
    assert!(receiver.deliveries.lock().unwrap().is_empty());
}
