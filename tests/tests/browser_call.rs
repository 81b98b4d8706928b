//! A person talks to an agent through `join_link` in a real browser: Debian's Chromium, headless, its
//! microphone a spoken WAV, inside a loopback-only network namespace. The agent runs on the local models;
//! a webhook receiver started here checks every signed event; the record ends ENDED with its transcript
//! and recording. A second call loses its browser (killed): `participant_left`, then `call_ended`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use confab_tests::browser::Browser;
use confab_tests::netns::enter_loopback_only;
use confab_tests::server::{Server, create_key};
use confab_tests::{spoken_wav, webhook_signature_is_valid};
use serde_json::{Value, json};

/// One delivery: (webhook-id, webhook-timestamp, webhook-signature, body).
type Delivery = (String, String, String, String);

async fn webhook_receiver() -> (String, Arc<Mutex<Vec<Delivery>>>) {
    let seen: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let store = seen.clone();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: String| {
            let store = store.clone();
            async move {
                let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                store.lock().unwrap().push((h("webhook-id"), h("webhook-timestamp"), h("webhook-signature"), body));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// Events received for `conversation_id`, in order of arrival, each signature checked.
fn events(seen: &Mutex<Vec<Delivery>>, secret: &str, conversation_id: &str) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(id, timestamp, signature, body)| {
            assert!(webhook_signature_is_valid(secret, id, timestamp, signature, body.as_bytes()), "bad signature");
            serde_json::from_str::<Value>(body).unwrap()
        })
        .filter(|event| event["conversation_id"] == conversation_id)
        .collect()
}

async fn wait_for_event(seen: &Mutex<Vec<Delivery>>, secret: &str, conversation_id: &str, name: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let got = events(seen, secret, conversation_id);
        if got.iter().any(|e| e["event"]["name"] == name) {
            return;
        }
        let names: Vec<_> = got.iter().map(|e| e["event"]["name"].clone()).collect();
        assert!(Instant::now() < deadline, "no {name} webhook within {timeout:?}; got {names:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn api(client: &reqwest::Client, key: &str, method: reqwest::Method, url: String, body: Option<Value>) -> Value {
    let mut request = client.request(method, url).header("x-api-key", key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap()
}

const EVENTS: [&str; 7] = [
    "user.started_speaking",
    "utterance_committed",
    "agent.started_speaking",
    "agent.stopped_speaking",
    "participant_left",
    "call_ended",
    "user.stopped_speaking",
];

#[test]
fn a_person_talks_to_the_agent_in_chromium() {
    if !enter_loopback_only("a_person_talks_to_the_agent_in_chromium") {
        return;
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(talk());
}

async fn talk() {
    let dir = std::env::temp_dir().join(format!("confab-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let (hook_url, seen) = webhook_receiver().await;
    let mut server = Server::start(&data, &["--allow-private-webhooks", "--no-media-timeout", "4"]).await;
    let client = reqwest::Client::new();
    let base = server.base.clone();

    let agent = api(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{base}/v1/ext/agent"),
        Some(json!({
            "agent_name": "Geographer",
            "agent_system_prompt": "You are a helpful assistant. Answer in one short sentence.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": {
                "llm": { "provider": "local" },
                "stt": { "provider": "local", "max_endpointing_delay": 1.0 },
                "tts": { "provider": "local" } } }],
            "callback_url": hook_url,
            "callback_events": EVENTS,
            "record": true
        })),
    )
    .await;
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();
    let agent_id = agent["id"].as_str().unwrap().to_string();
    let conversation = api(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{base}/v1/ext/conversation"),
        Some(json!({ "agent_id": agent_id, "user_name": "Ada", "user_id": "ada-1" })),
    )
    .await;
    let id = conversation["id"].as_str().unwrap().to_string();
    let join_link = conversation["join_link"].as_str().unwrap().to_string();
    assert!(join_link.starts_with(&format!("{base}/join/{id}#token=")), "{join_link}");

    // One question, then silence long enough for the answer (the fake microphone loops the file).
    let microphone = dir.join("question.wav");
    spoken_wav(&microphone, "What is the capital of France?", 1.0, 25.0);
    let mut browser = Browser::launch(&join_link, &microphone, &dir.join("chromium.log")).await;
    browser.wait_for("document.body.dataset.state", &json!("ready"), Duration::from_secs(15)).await;
    assert_eq!(browser.eval("document.getElementById('title').textContent").await, json!("Geographer"));
    browser.eval("document.getElementById('join').click()").await;
    browser.wait_for("document.body.dataset.state", &json!("live"), Duration::from_secs(20)).await;
    let detail = api(&client, &key, reqwest::Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    assert_eq!(detail["status"], "IN_PROGRESS");

    // Listening, transcribing, answering and speaking, all on the local models.
    wait_for_event(&seen, &secret, &id, "agent.stopped_speaking", Duration::from_secs(90)).await;
    // The page shows the live transcript.
    browser
        .wait_for("document.querySelectorAll('#transcript li.assistant').length > 0", &json!(true), Duration::from_secs(10))
        .await;
    browser.eval("document.getElementById('hangup').click()").await;
    browser.wait_for("document.body.dataset.state", &json!("ended"), Duration::from_secs(10)).await;
    wait_for_event(&seen, &secret, &id, "call_ended", Duration::from_secs(15)).await;

    let got = events(&seen, &secret, &id);
    let names: Vec<&str> = got.iter().map(|e| e["event"]["name"].as_str().unwrap()).collect();
    for name in ["user.started_speaking", "utterance_committed", "agent.started_speaking", "agent.stopped_speaking"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert_eq!(names.last(), Some(&"call_ended"), "{names:?}");
    assert!(!names.contains(&"participant_left"), "a hang-up is not a participant leaving: {names:?}");
    for event in &got {
        assert_eq!(event["type"], "pipeline");
        assert!(event["timestamp"].as_f64().unwrap() > 1.7e9);
    }
    let committed = got.iter().find(|e| e["event"]["name"] == "utterance_committed").unwrap();
    let words = committed["event"]["payload"]["text"].as_str().unwrap_or_default().to_lowercase();
    assert!(words.contains("capital") && words.contains("france"), "heard {words:?}");

    let detail = api(&client, &key, reqwest::Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    assert_eq!(detail["status"], "ENDED");
    let roles: Vec<&str> = detail["transcript"].as_array().unwrap().iter().map(|e| e["role"].as_str().unwrap()).collect();
    assert!(roles.starts_with(&["user", "assistant"]), "{roles:?}");
    assert_eq!(detail["is_recorded"], true);
    let recording_url = detail["recording_url"].as_str().unwrap().to_string();
    assert_eq!(recording_url, format!("{base}/v1/ext/conversation/{id}/recording"));
    assert_eq!(client.get(&recording_url).send().await.unwrap().status(), 401, "API-key holders only");
    let wav = client.get(&recording_url).header("x-api-key", &key).send().await.unwrap();
    assert_eq!(wav.status(), 200);
    let bytes = wav.bytes().await.unwrap();
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let seconds = reader.duration() as f32 / reader.spec().sample_rate as f32;
    assert!(seconds > 3.0, "the recording holds {seconds} s");
    let loudest = reader.into_samples::<i16>().map(|s| s.unwrap().unsigned_abs()).max().unwrap();
    assert!(loudest > 3_000, "the recording is silent (peak {loudest})");

    // A second call whose browser vanishes: the participant left, the call ended.
    let second = api(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{base}/v1/ext/conversation"),
        Some(json!({ "agent_id": agent_id, "user_name": "Bo", "user_id": "bo-2" })),
    )
    .await;
    let second_id = second["id"].as_str().unwrap().to_string();
    drop(browser);
    let mut browser = Browser::launch(second["join_link"].as_str().unwrap(), &microphone, &dir.join("chromium2.log")).await;
    browser.wait_for("document.body.dataset.state", &json!("ready"), Duration::from_secs(15)).await;
    browser.eval("document.getElementById('join').click()").await;
    browser.wait_for("document.body.dataset.state", &json!("live"), Duration::from_secs(20)).await;
    browser.kill();
    wait_for_event(&seen, &secret, &second_id, "call_ended", Duration::from_secs(30)).await;
    let got = events(&seen, &secret, &second_id);
    let left: Vec<&Value> = got.iter().filter(|e| e["event"]["name"] == "participant_left").collect();
    assert_eq!(left.len(), 1, "{got:?}");
    assert_eq!(left[0]["event"]["payload"]["id"], "bo-2");
    assert_eq!(got.last().unwrap()["event"]["name"], "call_ended");
    let detail = api(&client, &key, reqwest::Method::GET, format!("{base}/v1/ext/conversation/{second_id}"), None).await;
    assert_eq!(detail["status"], "ENDED");

    // Every delivery carried a distinct id.
    let ids: HashMap<String, usize> = seen.lock().unwrap().iter().map(|d| (d.0.clone(), 1)).collect();
    assert_eq!(ids.len(), seen.lock().unwrap().len());
    assert!(server.terminate().success());
    let _ = std::fs::remove_dir_all(&dir);
}
