//! Admission by capacity: the real `confab serve` with its default `--max-calls` (two calls per core of this
//! host, one without VNNI: `confab_worker::media::default_max_calls`) holds that many calls at once, four of them (or all,
//! where fewer fit) asking a spoken question of the default local models and each heard and answered right
//! as a call alone is; the next join is refused with the clear 503 and counted
//! (`confab_calls_refused_total`).

use std::time::{Duration, Instant};

use confab_tests::caller::{Caller, offer, speech_16k, token_of};
use confab_tests::scratch;
use confab_tests::server::{Server, api, create_key, wait_for_preload, wait_for_status};
use confab_worker::media::peer::Offerer;
use reqwest::Method;
use serde_json::{Value, json};

const FULL: &str = r#"{"error":"No free media session; try again later"}"#;

fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find(|line| line.starts_with(&format!("{name} ")))?.rsplit(' ').next()?.parse().ok()
}

/// The conversation's transcript as (role, text) pairs.
async fn transcript(client: &reqwest::Client, key: &str, base: &str, id: &str) -> Vec<(String, String)> {
    let detail = api(client, key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    detail["transcript"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["role"].as_str().unwrap_or_default().to_string(), e["content"].as_str().unwrap_or_default().into()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_up_to_the_default_capacity_are_answered_and_the_next_is_refused() {
    let root = scratch("capacity");
    let data = root.join("data");
    let key = create_key(&data);
    let server = Server::start(&data, &[]).await;
    wait_for_preload(&data).await;
    let (client, base) = (reqwest::Client::new(), server.base.clone());
    let capacity = confab_worker::media::default_max_calls();
    let metrics = || async {
        let url = format!("{base}/metrics");
        client.get(url).header("x-api-key", &key).send().await.unwrap().text().await.unwrap()
    };
    assert_eq!(sample(&metrics().await, "confab_sessions_max"), Some(capacity as f64), "calls_per_core() per core");

    let agent = json!({ "agent_name": "Geographer", "agent_system_prompt": "You are a helpful assistant. Answer in one short sentence.",
        "avatars": [{ "avatar_key_id": "stock-amara" }] });
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent)).await;
    let conversation = || async {
        let body = json!({ "agent_id": agent["id"], "user_name": "Caller", "user_id": "caller" });
        let created: Value = api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await;
        (created["id"].as_str().unwrap().to_string(), token_of(&created))
    };
    let mut question = vec![0.0; 16_000];
    question.extend(speech_16k(&root, "What is the capital of France?"));
    let asking = capacity.min(4);
    let mut calls = Vec::new();
    for index in 0..capacity {
        let (id, token) = conversation().await;
        let microphone = if index < asking { question.clone() } else { Vec::new() };
        let caller = Caller::join(&client, &base, &id, &token, microphone).await;
        calls.push((id, token, caller));
    }

    // Every slot is taken: the next join is refused, and counted.
    let (id, token) = conversation().await;
    let offerer = Offerer::new(&confab_tests::caller::client_config()).await.unwrap();
    let refused = offer(&client, &base, &id, &token, offerer.offer_sdp.clone()).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.text().await.unwrap(), FULL);
    assert_eq!(sample(&metrics().await, "confab_calls_refused_total"), Some(1.0));

    // Each asking call is heard word for word and answered right (they all asked at once: the answers come
    // one after another from the one language model).
    let deadline = Instant::now() + Duration::from_secs(60);
    for (id, _, _) in calls.iter().take(asking) {
        loop {
            let said = transcript(&client, &key, &base, id).await;
            let answered = said.iter().any(|(role, _)| role == "assistant");
            if answered {
                let user: Vec<&str> = said.iter().filter(|(r, _)| r == "user").map(|(_, t)| t.as_str()).collect();
                let heard = user.join(" ").to_lowercase();
                assert!(heard.contains("capital") && heard.contains("france"), "{id} heard {said:?}");
                let answer: String = said.iter().filter(|(r, _)| r == "assistant").map(|(_, t)| t.as_str()).collect();
                assert!(answer.to_lowercase().contains("paris"), "{id} answered {said:?}");
                break;
            }
            assert!(Instant::now() < deadline, "{id} was not answered within 60 s: {said:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    for (id, token, caller) in &calls {
        caller.hang_up(&client, &base, id, token).await;
        wait_for_status(&client, &key, &base, id, "ENDED", Duration::from_secs(30)).await;
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
