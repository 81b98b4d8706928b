//! An agent that acts, in a live call (the engine's runtime and the control plane, audio pushed at
//! real-time pace, no transport): it has a `tool.api` tool, an MCP server (the official Python SDK's,
//! over HTTP+SSE), a guardrail and a knowledge base. Turn 1 asks about the weather and an order: the model
//! (a local OpenAI-compatible server streaming `tool_calls`) calls the tool and the MCP tool, and the
//! knowledge base gives the turn its chunk. Turn 2 asks for medicine: the guardrail answers verbatim and
//! calls back. The records, transcript, snippets and signed webhooks show all of it. Speech-to-text is
//! the local Moonshine model on espeak-ng speech.

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use common::{Arrivals, LiveCall, call, speak, start_live_call};
use confab_engine::runtime::CallRuntime;
use confab_http::webhooks::signing;
use confab_http::{AppConfig, AppState, app};
use confab_store::Db;
use confab_store::api_keys;
use serde_json::{Value, json};

const REFUSAL: &str = "I cannot give medical advice.";

#[derive(Default)]
struct Seen {
    chat: Mutex<Vec<Value>>,
    weather: Mutex<Vec<Value>>,
    /// (path, headers, body) of webhooks and guardrail callbacks.
    hooks: Arrivals<(String, HeaderMap, String)>,
}

fn sse(chunks: Vec<Value>) -> Response {
    let mut parts: Vec<String> = chunks.into_iter().map(|c| format!("data: {c}\n\n")).collect();
    parts.push("data: [DONE]\n\n".into());
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>))))
        .unwrap()
}

fn call_chunk(index: usize, id: &str, name: &str, arguments: &str) -> Value {
    json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": index, "id": id, "type": "function",
        "function": { "name": name, "arguments": arguments } }] } }] })
}

/// Weather questions call the tool and the MCP tool; other questions fire the guardrail; after tool
/// results, an answer.
async fn chat(State(seen): State<Arc<Seen>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap();
    seen.chat.lock().unwrap().push(request.clone());
    let messages = request["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    if last["role"] == "tool" {
        return sse(vec![
            json!({ "choices": [{ "index": 0, "delta": { "content": "Sunny, and your order ships tomorrow." } }] }),
        ]);
    }
    if last["content"].as_str().unwrap_or_default().to_lowercase().contains("weather") {
        return sse(vec![
            call_chunk(0, "call_w", "get_weather", r#"{"city":"Paris"}"#),
            call_chunk(1, "call_o", "lookup_order", r#"{"order_id":"A-17"}"#),
            json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }),
        ]);
    }
    sse(vec![call_chunk(0, "call_g", "no_medical_advice", "{}")])
}

/// The Python SDK's MCP server over HTTP+SSE on 127.0.0.1 (killed when dropped).
struct PythonMcp {
    _process: tokio::process::Child,
    port: u16,
}

/// Starts the Python SDK's MCP server and waits until it says it is listening (uvicorn's "running on"
/// line on its standard error).
async fn python_mcp() -> PythonMcp {
    use tokio::io::AsyncBufReadExt;
    let tools = std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or("/var/tmp/confab-tools".into());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mcp_server.py");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = tokio::process::Command::new(tools.join("mcp-python/bin/python"))
        .arg(script)
        .args(["sse", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Python MCP SDK is installed (scripts/setup.sh)");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let listening = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Uvicorn running on") {
                return true;
            }
        }
        false
    };
    let started = tokio::time::timeout(Duration::from_secs(30), listening).await;
    assert!(matches!(started, Ok(true)), "the MCP server did not start");
    // Its later log lines go nowhere (a pipe nobody reads would fill and stall it).
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    PythonMcp { _process: child, port }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_call_uses_tools_mcp_guardrails_and_knowledge() {
    let seen = Arc::new(Seen::default());
    let hook = |seen: Arc<Seen>, path: &'static str| {
        post(move |headers: HeaderMap, body: String| async move {
            seen.hooks.push((path.to_string(), headers, body));
            "ok"
        })
    };
    let servers = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route(
            "/weather",
            post(|State(seen): State<Arc<Seen>>, body: String| async move {
                seen.weather.lock().unwrap().push(serde_json::from_str(&body).unwrap());
                axum::Json(json!({ "forecast": "sunny" }))
            }),
        )
        .route("/hook", hook(seen.clone(), "/hook"))
        .route("/guardrail", hook(seen.clone(), "/guardrail"))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, servers).await.unwrap() });
    let mcp = python_mcp().await;
    let providers =
        confab_engine::providers::env::ProviderEnv::default().with("CONFAB_LLM_BASE_URL", format!("{base}/v1"));

    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("live.db").display())).await.unwrap();
    let models = confab_models::default_models_dir();
    let config = AppConfig {
        public_url: "http://confab.test".into(),
        recordings_dir: "recordings".into(),
        models_dir: models.clone(),
    };
    let state = AppState::new(db.clone(), config).await.unwrap();
    let (_, key) = api_keys::create_key(&db, "live").await.unwrap();
    let router = app(state);
    let tool = call(&router, &key, "POST", "/v1/ext/tool", Some(json!({
        "type": "tool.api",
        "schema": { "type": "function", "name": "get_weather", "description": "Weather in a city",
            "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] } },
        "request_config": { "method": "POST", "url": format!("{base}/weather"), "headers": {} },
        "event_messages": { "on_start": { "message": "Let me check." } }
    }))).await;
    let mcp_server = call(
        &router,
        &key,
        "POST",
        "/v1/ext/mcp",
        Some(json!({
            "name": "orders", "description": "Order lookups", "type": "shttp/sse",
            "request_config": { "url": format!("http://127.0.0.1:{}/sse", mcp.port), "headers": {} }
        })),
    )
    .await;
    let mcp_id = mcp_server["id"].clone();
    let guardrail = call(
        &router,
        &key,
        "POST",
        "/v1/ext/guardrail",
        Some(json!({
            "name": "No medical advice", "prompt": "The user asks about medicine.", "response_message": REFUSAL,
            "callback_url": format!("{base}/guardrail")
        })),
    )
    .await;
    let kb = call(&router, &key, "POST", "/v1/ext/kb", Some(json!({ "name": "Guide" }))).await;
    let kb_id = kb["id"].as_str().unwrap().to_string();
    let documents = json!({ "documents": [
        { "title": "Forecasts", "content": "Weather forecasts come from the national weather service every hour." },
        { "title": "Returns", "content": "Returned items are refunded within five business days." },
    ] });
    call(&router, &key, "POST", &format!("/v1/ext/kb/{kb_id}/documents"), Some(documents)).await;
    let agent = call(&router, &key, "POST", "/v1/ext/agent", Some(json!({
        "agent_name": "Helper",
        "agent_system_prompt": "Be brief.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": {
            "llm": { "provider": "custom", "model": "m", "preemptive_generation": false },
            "stt": { "provider": "local", "max_endpointing_delay": 0.8 },
            "tts": { "provider": "local", "model_id": "espeak-ng" } } }],
        "callback_url": format!("{base}/hook"),
        "callback_events": ["tool_call", "call_ended"],
        "tool_ids": [tool["id"]], "mcp_ids": [mcp_id], "guardrail_ids": [guardrail["id"]], "knowledge_base_ids": [kb_id],
    }))).await;
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();
    let conversation =
        call(&router, &key, "POST", "/v1/ext/conversation", Some(json!({ "agent_id": agent["id"] }))).await;
    let id = conversation["id"].as_str().unwrap().to_string();

    let LiveCall { runtime, delivering, mut session } = start_live_call(&db, &id, &models, &providers).await;

    let mut audio = vec![0.0; 8_000];
    audio.extend(speak("What is the weather in Paris?", 150));
    audio.extend(vec![0.0; 16_000 * 7]);
    audio.extend(speak("Which medicine should I take?", 150));
    audio.extend(vec![0.0; 16_000 * 5]);
    let (mut input, mut output) = (session.input, session.output);
    tokio::task::spawn_blocking(move || common::feed_in_real_time(&audio, &mut input, &mut output, |_| {}))
        .await
        .unwrap();
    runtime.lock().unwrap().close_session(session.session_id);
    tokio::time::timeout(Duration::from_secs(10), &mut session.finished).await.expect("the recorder finishes").unwrap();

    // Turn 1: both calls made, once each; their results went back to the model with the turn's chunk.
    assert_eq!(*seen.weather.lock().unwrap(), [json!({ "city": "Paris" })]);
    let requests = seen.chat.lock().unwrap().clone();
    let after_tools =
        requests.iter().find(|r| r["messages"].as_array().unwrap().last().unwrap()["role"] == "tool").unwrap();
    let text = after_tools["messages"].to_string();
    assert!(text.contains("Order A-17 ships tomorrow."), "the MCP result reached the model: {text}");
    assert!(text.contains("national weather service"), "the knowledge chunk came with the turn: {text}");

    let detail = call(&router, &key, "GET", &format!("/v1/ext/conversation/{id}"), None).await;
    let entries: Vec<(String, String)> = detail["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["role"].as_str().unwrap().to_string(), e["content"].as_str().unwrap().to_string()))
        .collect();
    let roles: Vec<&str> = entries.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "tool", "tool", "assistant", "user", "assistant"], "{entries:#?}");
    assert_eq!(entries[3].1, "Let me check. Sunny, and your order ships tomorrow.");
    assert_eq!(entries[5].1, REFUSAL, "the guardrail's message, verbatim");
    let listed = call(&router, &key, "GET", "/v1/ext/conversation", None).await;
    let snippets = &listed.as_array().unwrap().iter().find(|c| c["id"] == id.as_str()).unwrap()["snippets"];
    assert_eq!(snippets["turns"][0]["snippets"][0]["title"], "Forecasts", "{snippets}");

    // Webhooks (signed, in order) and the guardrail's callback (once).
    seen.hooks.wait_until(|hooks| hooks.iter().filter(|(p, _, _)| p == "/hook").count() >= 3).await;
    delivering.abort();
    let hooks = seen.hooks.all();
    let now = chrono::Utc::now().timestamp();
    let mut names = Vec::new();
    for (path, headers, body) in &hooks {
        let h = |n: &str| headers[n].to_str().unwrap().to_string();
        let verified = signing::verify(
            &secret,
            &h("webhook-id"),
            h("webhook-timestamp").parse().unwrap(),
            &h("webhook-signature"),
            body.as_bytes(),
            now,
        );
        assert_eq!(verified, Ok(()), "{path}");
        let body: Value = serde_json::from_str(body).unwrap();
        names.push((
            path.clone(),
            body["event"]["name"].as_str().unwrap().to_string(),
            body["event"]["payload"]["tool_name"].clone(),
        ));
    }
    let guardrail_calls: Vec<_> = names.iter().filter(|(p, _, _)| p == "/guardrail").collect();
    assert_eq!(guardrail_calls.len(), 1, "{names:?}");
    assert_eq!(guardrail_calls[0].1, "guardrail_triggered");
    let webhooks: Vec<(String, Value)> =
        names.into_iter().filter(|(p, _, _)| p == "/hook").map(|(_, n, t)| (n, t)).collect();
    assert_eq!(
        webhooks,
        [
            ("tool_call".to_string(), json!("get_weather")),
            ("tool_call".to_string(), json!("lookup_order")),
            ("call_ended".to_string(), Value::Null),
        ]
    );
}
