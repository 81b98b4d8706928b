//! A live conversation through the control plane and the engine, without a transport: audio pushed into
//! the session at real-time pace; speech-to-text and the language model from a local OpenAI-compatible
//! server; the espeak-ng voice. The record goes IN_PROGRESS then ENDED, the transcript holds both turns,
//! and the webhook receiver gets the signed events.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use axum::routing::post;
use common::{Arrivals, LiveCall, call, speak, start_live_call};
use confab_engine::runtime::CallRuntime;
use confab_http::webhooks::signing;
use confab_http::{AppConfig, AppState, app};
use confab_store::Db;
use confab_store::api_keys;
use serde_json::{Value, json};
use tower::ServiceExt;

const REPLY: &str = "It opens at nine.";

async fn chat() -> Response {
    let parts = [
        format!("data: {}\n\n", json!({ "choices": [{ "index": 0, "delta": { "content": REPLY } }] })),
        "data: [DONE]\n\n".to_string(),
    ];
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>))))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_conversation_is_recorded_and_reported() {
    // Provider and webhook servers on loopback.
    let hooks: Arc<Arrivals<(String, i64, String, String)>> = Arc::default();
    let seen = hooks.clone();
    let providers = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/audio/transcriptions", post(|| async { axum::Json(json!({ "text": "When does it open?" })) }))
        .route(
            "/hook",
            post(move |headers: axum::http::HeaderMap, body: String| {
                let seen = seen.clone();
                async move {
                    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                    seen.push((
                        h("webhook-id"),
                        h("webhook-timestamp").parse().unwrap_or(0),
                        h("webhook-signature"),
                        body,
                    ));
                    "ok"
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, providers).await.unwrap() });
    let providers = confab_engine::providers::env::ProviderEnv::default()
        .with("CONFAB_LLM_BASE_URL", format!("{base}/v1"))
        .with("CONFAB_STT_BASE_URL", format!("{base}/v1"));

    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("live.db").display())).await.unwrap();
    let state = AppState::new(
        db.clone(),
        AppConfig {
            public_url: "http://confab.test".into(),
            recordings_dir: "recordings".into(),
            models_dir: confab_models::default_models_dir(),
        },
    )
    .await
    .unwrap();
    let (_, key) = api_keys::create_key(&db, "live").await.unwrap();
    let router = app(state);
    let agent = call(
        &router,
        &key,
        "POST",
        "/v1/ext/agent",
        Some(json!({
            "agent_name": "Librarian",
            "agent_system_prompt": "Be brief.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": {
                "llm": { "provider": "custom", "model": "m" },
                "stt": { "provider": "custom", "max_endpointing_delay": 0.8 },
                "tts": { "provider": "local", "model_id": "espeak-ng" }
            } }],
            "callback_url": format!("{base}/hook"),
            "callback_events": ["utterance_committed", "agent.started_speaking", "call_ended"]
        })),
    )
    .await;
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();
    let conversation = call(
        &router,
        &key,
        "POST",
        "/v1/ext/conversation",
        Some(json!({ "agent_id": agent["id"], "user_name": "Ada" })),
    )
    .await;
    let id = conversation["id"].as_str().unwrap().to_string();

    let models = confab_models::default_models_dir();
    let LiveCall { runtime, delivering, mut session } = start_live_call(&db, &id, &models, &providers).await;
    assert_eq!(call(&router, &key, "GET", &format!("/v1/ext/conversation/{id}"), None).await["status"], "STARTED");
    // The transport marks the call IN_PROGRESS when the participant's media flows.
    confab_store::conversation_events::media_started(&db, &id).await.unwrap();
    assert_eq!(call(&router, &key, "GET", &format!("/v1/ext/conversation/{id}"), None).await["status"], "IN_PROGRESS");

    // The user speaks, then stays silent while the agent answers.
    let mut audio = vec![0.0; 8_000];
    audio.extend(speak("When does the library open?", 160));
    audio.extend(vec![0.0; 16_000 * 5]);
    let mut input = session.input;
    let mut output = session.output;
    let feeding = tokio::task::spawn_blocking(move || {
        let mut loud = 0usize;
        common::feed_in_real_time(&audio, &mut input, &mut output, |sample| loud += usize::from(sample.abs() > 0.05));
        loud
    });
    let loud = feeding.await.unwrap();
    assert!(loud > 4_000, "the agent's voice came out ({loud} loud samples)");
    runtime.lock().unwrap().close_session(session.session_id); // hang up
    tokio::time::timeout(Duration::from_secs(10), &mut session.finished).await.expect("the recorder finishes").unwrap();

    let detail = call(&router, &key, "GET", &format!("/v1/ext/conversation/{id}"), None).await;
    assert_eq!(detail["status"], "ENDED");
    let transcript: Vec<(String, String)> = detail["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["role"].as_str().unwrap().to_string(), e["content"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        transcript,
        [("user".to_string(), "When does it open?".to_string()), ("assistant".to_string(), REPLY.to_string())]
    );

    // The turn's stages, stored as the engine reported the turn over: in order, on the call's media clock.
    // (Stored before `finished` resolved.)
    let path = format!("/v1/ext/conversation/{id}/turn-metrics");
    let turns = call(&router, &key, "GET", &path, None).await;
    let data = turns["data"].as_array().unwrap_or_else(|| panic!("{turns}"));
    assert_eq!(data.len(), 1, "{turns}");
    assert_eq!((data[0]["type"].as_str(), data[0]["turn"].as_u64()), (Some("turn_metrics"), Some(1)));
    assert_eq!(data[0]["conversation_id"], id.as_str());
    let stages = &data[0]["media_time"];
    let order =
        ["speech_ended", "committed", "transcript_final", "llm_request", "llm_first_token", "first_audio_played"];
    let times: Vec<f64> =
        order.iter().map(|stage| stages[stage].as_f64().unwrap_or_else(|| panic!("{stage}: {stages}"))).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{stages}");
    for stage in ["stt", "llm_first_token", "commit_to_first_audio"] {
        assert!(data[0]["latency_ms"][stage].as_f64().is_some(), "{stage}: {}", data[0]);
    }
    // The same turn in Prometheus' histogram of stages, by the agent's providers.
    let request = Request::builder().uri("/metrics").header("x-api-key", &key).body(Body::empty()).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let text =
        String::from_utf8(axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap();
    for series in [
        r#"confab_turn_stage_seconds_count{provider="custom",stage="stt"} 1"#,
        r#"confab_turn_stage_seconds_count{provider="custom",stage="llm_first_token"} 1"#,
        r#"confab_turn_stage_seconds_count{provider="local",stage="tts_first_audio"} 1"#,
        r#"confab_turn_stage_seconds_count{provider="pipeline",stage="commit_to_first_audio"} 1"#,
    ] {
        assert!(text.contains(series), "{series} missing: {text}");
    }
    let missing =
        call(&router, &key, "GET", "/v1/ext/conversation/00000000-0000-0000-0000-000000000000/turn-metrics", None)
            .await;
    assert_eq!(missing, json!({ "error": "Conversation not found" }));

    hooks.wait_until(|hooks| hooks.len() >= 3).await;
    delivering.abort();
    let hooks = hooks.all();
    let names: Vec<String> = hooks
        .iter()
        .map(|(_, _, _, body)| {
            serde_json::from_str::<Value>(body).unwrap()["event"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(names, ["utterance_committed", "agent.started_speaking", "call_ended"]);
    let now = chrono::Utc::now().timestamp();
    for (hook_id, timestamp, signature, body) in &hooks {
        assert_eq!(signing::verify(&secret, hook_id, *timestamp, signature, body.as_bytes(), now), Ok(()));
    }
}
