//! LiveKit's own clients talk to Confab agents: TruGen's official SDK (`trugen-sdk` 1.1.0 on LiveKit's
//! Python client `livekit` 1.2.0, pinned and installed by `scripts/setup.sh` under `CONFAB_TEST_TOOLS`)
//! follows its README against the real `confab serve`: `create_session` (`POST /v1/auth/conversation`),
//! `connect` (`/rtc`: it tries `/rtc/v1` first and falls back on its 404), the agent's tracks arrive,
//! `upload_audio(question.wav)` publishes a track and speaks the question, the answer is heard and arrives as
//! a final `lk.transcription` stream, `disconnect`. The record then reads ENDED with question and answer,
//! and `call_ended` was delivered signed. libwebrtc gathers no loopback candidates: the test runs in a
//! network namespace whose other interfaces are a veth pair leading nowhere (`confab_tests::netns`).

use std::path::PathBuf;
use std::time::Duration;

use confab_tests::netns::enter_loopback_only;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, geographer, wait_for_preload};
use confab_tests::spoken_wav;
use reqwest::Method;
use serde_json::Value;

const EVENTS: [&str; 6] = [
    "user.started_speaking",
    "utterance_committed",
    "agent.started_speaking",
    "agent.stopped_speaking",
    "participant_left",
    "call_ended",
];

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    dir
}

#[test]
fn trugen_sdk_holds_a_spoken_conversation() {
    if enter_loopback_only("trugen_sdk_holds_a_spoken_conversation") {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(trugen_conversation());
    }
}

async fn trugen_conversation() {
    let dir = scratch("trugen-livekit");
    let question = dir.join("question.wav");
    spoken_wav(&question, "What is the capital of France?", 2.5, 2.0);
    let receiver = Receiver::start(vec![]).await;
    let data = dir.join("data");
    let key = create_key(&data);
    let server = Server::start(&data, &["--allow-private-webhooks"]).await;
    wait_for_preload(&data).await;
    let client = reqwest::Client::new();
    let (agent_id, secret) = geographer(&client, &key, &server.base, &receiver.hook_url, &EVENTS, false).await;

    let tools =
        std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/confab-tools".into());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/trugen_conversation.py");
    let output = tokio::process::Command::new(tools.join("trugen/bin/python"))
        .arg(script)
        .args([&format!("{}/v1", server.base), &key, &agent_id])
        .arg(&question)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), output).await.expect("the SDK's flow ends").unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the trugen-sdk flow failed: {stderr}\nserver log: {}",
        data.join("serve.log").display()
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON line");
    eprintln!("the client saw: {seen}");

    // The agent is a participant of kind AGENT named after the agent, listening when the person joins.
    let agent = &seen["participants"][0];
    assert_eq!(seen["participants"].as_array().unwrap().len(), 1);
    assert_eq!(agent["identity"], format!("agent-{agent_id}"));
    assert_eq!(agent["name"], "Geographer");
    assert_eq!(agent["kind"], 4, "ParticipantKind.AGENT");
    assert_eq!(agent["state"], "listening");
    // Its face decodes at 512×512, and its answer is heard.
    assert_eq!(seen["video"], serde_json::json!([512, 512]));
    assert!(seen["peak_of_answer"].as_i64().unwrap() > 1000, "the answer is heard: {seen}");
    // The words arrive as LiveKit carries them: the person's question, the agent's answer (final).
    let user = seen["user_final"].as_array().unwrap();
    assert!(user.iter().any(|t| t.as_str().unwrap().to_lowercase().contains("capital")), "{seen}");
    let answer = seen["agent_final"][0].as_str().unwrap().to_lowercase();
    assert!(answer.contains("paris"), "{answer}");
    // `lk.agent.state` followed the engine.
    let states: Vec<&str> = seen["agent_states"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    for state in ["thinking", "speaking", "listening"] {
        assert!(states.contains(&state), "{states:?}");
    }

    // The record: ENDED, with the question and the answer; `call_ended` delivered, signed.
    let detail = api(
        &client,
        &key,
        Method::GET,
        format!("{}/v1/ext/conversation/{}", server.base, conversation_of(&receiver, &secret)),
        None,
    )
    .await;
    let id = detail["id"].as_str().unwrap().to_string();
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(20)).await;
    let detail = api(&client, &key, Method::GET, format!("{}/v1/ext/conversation/{id}", server.base), None).await;
    assert_eq!(detail["status"], "ENDED");
    let transcript = detail["transcript"].to_string().to_lowercase();
    assert!(transcript.contains("capital") && transcript.contains("paris"), "{transcript}");
    let names = receiver.event_names(&secret, &id);
    assert!(names.contains(&"participant_left".to_string()), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The conversation the SDK started (the only one whose events reached the receiver).
fn conversation_of(receiver: &Receiver, _secret: &str) -> String {
    let deliveries = receiver.deliveries();
    let (_, body) = deliveries.first().expect("the conversation's first webhook");
    serde_json::from_str::<Value>(body).unwrap()["conversation_id"].as_str().unwrap().to_string()
}
