//! A whole conversation through `confab simulate`: the real VAD and turn model, speech-to-text and the
//! language model from a local OpenAI-compatible server (the real wire protocol: multipart upload, SSE
//! stream), and the local espeak-ng voice. The agent answers; the events, transcript and agent.wav show it.
//! And the same with a language model that accepts the request and never answers, behind a named endpoint,
//! with a fallback on another: the agent answers through the fallback and `turn_metrics` says so.

use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use confab_tests::{agent_audio, rms_between, simulate, simulate_with};
use serde_json::{Value, json};

const REPLY: &str = "The library opens at nine in the morning. See you there!";

async fn chat(State(seen): State<Arc<Mutex<Vec<Value>>>>, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap();
    seen.lock().unwrap().push(body.clone());
    if body["model"] == "stalled" {
        // Accepted, never answered (not even the headers).
        std::future::pending::<()>().await;
    }
    let mut parts: Vec<String> = REPLY
        .split_inclusive(' ')
        .map(|word| {
            format!(
                "data: {}\n\n",
                json!({ "choices": [{ "index": 0, "delta": { "content": word }, "finish_reason": null }] })
            )
        })
        .collect();
    parts.push("data: [DONE]\n\n".into());
    let stream = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

async fn transcribe() -> Response {
    axum::Json(json!({ "text": "When does the library open?" })).into_response()
}

/// Serves the fake chat completions and transcriptions on a loopback port: its base URL, and the chat
/// requests it saw.
fn serve(runtime: &tokio::runtime::Runtime) -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = runtime.block_on(async {
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/audio/transcriptions", post(transcribe))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        base
    });
    (base, seen)
}

/// A fresh directory for one test, with the spoken question in it (`question.wav`).
fn workdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        Command::new("espeak-ng")
            .args(["-v", "en-us", "-s", "160", "-w"])
            .arg(dir.join("question.wav"))
            .arg("When does the library open?")
            .status()
            .unwrap()
            .success()
    );
    dir
}

/// The librarian agent in `dir` (`agent.json`) with `llm` as its language model, speech-to-text from the
/// fake, and the espeak-ng voice.
fn write_agent(dir: &std::path::Path, llm: Value) -> std::path::PathBuf {
    let agent = dir.join("agent.json");
    let spec = json!({
        "agent_name": "Librarian",
        "agent_system_prompt": "You are the library's receptionist.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": {
            "llm": llm,
            "stt": { "provider": "custom", "model": "whisper-1", "max_endpointing_delay": 1.0 },
            "tts": { "provider": "local", "model_id": "espeak-ng" }
        } }],
        "config": { "maxCallDuration": 300, "conversationalContext": "Opening hours: 9 to 17." }
    });
    std::fs::write(&agent, spec.to_string()).unwrap();
    agent
}

#[test]
fn the_agent_answers_a_spoken_question() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (base, seen) = serve(&runtime);
    let dir = workdir("providers");
    let input = dir.join("question.wav");
    let agent = write_agent(&dir, json!({ "provider": "custom", "model": "test-model" }));
    let out = dir.join("out");
    let events = simulate(&agent, &input, &out, &[("CONFAB_LLM_BASE_URL", &base), ("CONFAB_STT_BASE_URL", &base)]);
    let find = |name: &str| {
        events.iter().find(|e| e["event"]["name"] == name).unwrap_or_else(|| panic!("no {name} in {events:#?}"))
    };
    assert_eq!(find("utterance_committed")["event"]["payload"]["text"], "When does the library open?");
    assert_eq!(find("agent.started_speaking")["event"]["payload"]["text"], REPLY);
    assert_eq!(find("agent.stopped_speaking")["event"]["payload"]["text"], REPLY);
    let committed_at = find("utterance_committed")["media_time"].as_f64().unwrap();
    let speaking_at = find("agent.started_speaking")["media_time"].as_f64().unwrap();
    let stopped_at = find("agent.stopped_speaking")["media_time"].as_f64().unwrap();
    assert!(committed_at <= speaking_at && speaking_at < stopped_at);
    assert_eq!(events.last().unwrap()["event"]["name"], "call_ended");

    // The language model saw the prompt with its context, and the user's words.
    let request = seen.lock().unwrap()[0].clone();
    assert_eq!(request["model"], "test-model");
    assert_eq!(request["stream"], true);
    assert_eq!(request["messages"][0]["content"], "You are the library's receptionist.\n\nOpening hours: 9 to 17.");
    assert_eq!(request["messages"][1], json!({ "role": "user", "content": "When does the library open?" }));

    // The agent's voice is in agent.wav where the events say it is.
    let samples = agent_audio(&out);
    let rms = rms_between(&samples, speaking_at, stopped_at);
    assert!(rms > 0.02, "agent audio RMS {rms}");
    let before = &samples[..(speaking_at * 16_000.0) as usize];
    assert!(before.iter().all(|s| *s == 0.0), "silence before the agent speaks");

    let transcript: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("transcript.json")).unwrap()).unwrap();
    let roles: Vec<&str> = transcript.as_array().unwrap().iter().map(|e| e["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    assert_eq!(transcript[1]["content"], REPLY);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_language_model_that_never_answers_is_replaced_by_its_fallback_and_turn_metrics_say_so() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (base, seen) = serve(&runtime);
    let dir = workdir("fallbacks");
    let llm = json!({
        "provider": "custom", "model": "stalled", "endpoint": "primary", "first_response_timeout": 0.5,
        "preemptive_generation": false,
        "fallbacks": [{ "provider": "custom", "model": "test-model", "endpoint": "backup" }]
    });
    let agent = write_agent(&dir, llm);
    let out = dir.join("out");
    let (primary, backup) = (format!("primary={base}"), format!("backup={base}"));
    let flags = [
        "--agent",
        agent.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--llm-endpoint",
        &primary,
        "--llm-endpoint",
        &backup,
        "--allow-private-urls",
    ];
    let args: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
    let (lines, stderr) = simulate_with(&args, &dir.join("question.wav"), &[("CONFAB_STT_BASE_URL", &base)]);
    let spoken = lines.iter().find(|l| l["event"]["name"] == "agent.started_speaking");
    assert_eq!(spoken.map(|l| &l["event"]["payload"]["text"]), Some(&json!(REPLY)), "{stderr}");
    let models: Vec<Value> = seen.lock().unwrap().iter().map(|request| request["model"].clone()).collect();
    assert_eq!(models, ["stalled", "test-model"], "asked once each: no retry of the stalled one");
    let metrics = lines.iter().find(|l| l["type"] == "turn_metrics").expect("a turn_metrics line");
    assert_eq!(
        metrics["providers"],
        json!({ "stt": "custom:whisper-1", "llm": "custom@backup:test-model", "tts": "local:espeak-ng" })
    );
    assert_eq!(
        metrics["fallbacks"],
        json!([{ "stage": "llm", "provider": "custom@primary:stalled", "reason": "deadline" }])
    );
    let _ = std::fs::remove_dir_all(&dir);
}
