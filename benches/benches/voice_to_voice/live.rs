//! `--live`: the questions asked in one live call to `confab serve` (the release binary beside this bench),
//! as the join page calls: our WebRTC offerer (`confab_tests::caller::Caller`) sends the questions as its
//! microphone, Opus over loopback UDP, each question followed by silence while the agent answers. The stages
//! are the call's stored `turn_metrics` (`GET /v1/ext/conversation/{id}/turn-metrics`), on the server's media
//! clock: the live path's answer to the same question the file path answers.

use std::time::Duration;

use confab_tests::caller::{Caller, token_of};
use confab_tests::server::{Server, api, create_key, wait_for_preload, wait_for_status};
use reqwest::Method;
use serde_json::{Value, json};

/// Silence after each question, for the agent's one-sentence answer to be over before the next question.
const ANSWER_ROOM_SECONDS: usize = 7;
/// Silence before the first question, while the call settles.
const LEAD_SECONDS: usize = 2;

/// What one live call made of the questions.
pub struct LiveCall {
    /// One `turn_metrics` line per user turn, in turn order.
    pub turns: Vec<Value>,
    /// The transcript: (role, text) in order.
    pub transcript: Vec<(String, String)>,
}

/// Asks `questions` (16 kHz mono each) one after another in one call to an agent made from `agent`.
pub fn ask_in_one_call(agent: &Value, questions: &[Vec<f32>]) -> LiveCall {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(call(agent, questions))
}

async fn call(agent: &Value, questions: &[Vec<f32>]) -> LiveCall {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let server = Server::start(&data, &[]).await;
    wait_for_preload(&data).await;
    let (client, base) = (reqwest::Client::new(), server.base.clone());
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent.clone())).await;
    let body = json!({ "agent_id": agent["id"], "user_name": "Bench", "user_id": "bench" });
    let conversation = api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await;
    let (id, token) = (conversation["id"].as_str().unwrap().to_string(), token_of(&conversation));

    let mut microphone = vec![0.0; LEAD_SECONDS * 16_000];
    for question in questions {
        microphone.extend(question);
        microphone.extend(std::iter::repeat_n(0.0, ANSWER_ROOM_SECONDS * 16_000));
    }
    let seconds = microphone.len() as f64 / 16_000.0;
    let caller = Caller::join(&client, &base, &id, &token, microphone).await;
    tokio::time::sleep(Duration::from_secs_f64(seconds + 1.0)).await;
    caller.hang_up(&client, &base, &id, &token).await;
    wait_for_status(&client, &key, &base, &id, "ENDED", Duration::from_secs(30)).await;

    let url = format!("{base}/v1/ext/conversation/{id}/turn-metrics");
    let turns = api(&client, &key, Method::GET, url, None).await["data"].as_array().cloned().unwrap_or_default();
    let detail = api(&client, &key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    let transcript = detail["transcript"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["role"].as_str().unwrap_or_default().to_string(), e["content"].as_str().unwrap_or_default().into()))
        .collect();
    LiveCall { turns, transcript }
}
