//! `confab simulate --agent-id`: an agent stored through the REST API, with a tool attached, answers a
//! spoken question by calling its tool. The language model and speech-to-text are a local
//! OpenAI-compatible server (real SSE `tool_calls`), the tool a local HTTP server, the voice espeak-ng.
//! The run records the conversation (status, transcript with the tool call) in the same database the API
//! reads, and delivers its webhooks, signed, as a live call would.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key};
use confab_tests::{simulate_with, spoken_wav};
use reqwest::Method;
use serde_json::{Value, json};

const QUESTION: &str = "What is the weather in Paris?";
const ANSWER: &str = "It is sunny in Paris.";

#[derive(Default)]
struct Seen {
    chat: Mutex<Vec<Value>>,
    tool: Mutex<Vec<(String, Value)>>,
}

fn sse(chunks: Vec<Value>) -> Response {
    let mut parts: Vec<String> = chunks.into_iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    parts.push("data: [DONE]\n\n".into());
    let stream = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

/// Calls `get_weather` for the question; answers from the tool's result once it is in the history.
async fn chat(State(seen): State<Arc<Seen>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap();
    seen.chat.lock().unwrap().push(request.clone());
    let last = request["messages"].as_array().unwrap().last().unwrap().clone();
    if last["role"] == "tool" {
        return sse(vec![json!({ "choices": [{ "index": 0, "delta": { "content": ANSWER } }] })]);
    }
    sse(vec![
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "id": "call_w", "type": "function",
            "function": { "name": "get_weather", "arguments": "{\"city\":" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0,
            "function": { "arguments": "\"Paris\"}" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }),
    ])
}

async fn weather(State(seen): State<Arc<Seen>>, headers: axum::http::HeaderMap, body: String) -> axum::Json<Value> {
    let key = headers.get("x-api-key").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    seen.tool.lock().unwrap().push((key, serde_json::from_str(&body).unwrap()));
    axum::Json(json!({ "forecast": "sunny" }))
}

/// A scratch directory, its data directory with an API key, and `confab serve` on it.
async fn fresh_server(name: &str) -> (PathBuf, PathBuf, String, Server) {
    let dir = std::env::temp_dir().join(format!("confab-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let server = Server::start(&data, &[]).await;
    (dir, data, key, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_agent_calls_its_tool_and_the_conversation_is_recorded() {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/audio/transcriptions", post(|| async { axum::Json(json!({ "text": QUESTION })) }))
        .route("/weather", post(weather))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let receiver = Receiver::start(vec![]).await;

    let (dir, data, key, mut server) = fresh_server("stored").await;
    let client = reqwest::Client::new();
    let call = |method: Method, path: &str, body: Option<Value>| {
        let (client, key, url) = (client.clone(), key.clone(), format!("{}{path}", server.base));
        async move { api(&client, &key, method, url, body).await }
    };
    let tool = call(
        Method::POST,
        "/v1/ext/tool",
        Some(json!({
            "type": "tool.api",
            "schema": { "type": "function", "name": "get_weather", "description": "Today's weather in a city",
                "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] } },
            "request_config": { "method": "POST", "url": format!("{base}/weather"), "headers": { "x-api-key": "k-9" } },
            "event_messages": { "on_start": { "message": "Let me check." } }
        })),
    )
    .await;
    let agent = call(
        Method::POST,
        "/v1/ext/agent",
        Some(json!({
            "agent_name": "Forecaster",
            "agent_system_prompt": "You tell the weather.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": {
                "llm": { "provider": "custom", "model": "test-model" },
                "stt": { "provider": "custom", "model": "whisper-1", "max_endpointing_delay": 1.0 },
                "tts": { "provider": "local", "model_id": "espeak-ng" } } }],
            "callback_url": receiver.hook_url,
            "callback_events": ["utterance_committed", "tool_call", "call_ended"],
            "tool_ids": [tool["id"]]
        })),
    )
    .await;
    let agent_id = agent["id"].as_str().unwrap().to_string();
    let secret = agent["webhook_secret"].as_str().unwrap().to_string();
    server.terminate();

    let input = dir.join("question.wav");
    spoken_wav(&input, QUESTION, 0.5, 2.0);
    let (lines, stderr) = tokio::task::spawn_blocking({
        let (input, data, agent_id, llm_base) = (input.clone(), data.clone(), agent_id.clone(), format!("{base}/v1"));
        move || {
            let env = [("CONFAB_LLM_BASE_URL", llm_base.as_str()), ("CONFAB_STT_BASE_URL", llm_base.as_str())];
            let args = [
                OsStr::new("--agent-id"),
                OsStr::new(&agent_id),
                OsStr::new("--data"),
                data.as_os_str(),
                OsStr::new("--allow-private-urls"),
            ];
            simulate_with(&args, &input, &env)
        }
    })
    .await
    .unwrap();

    let conversation_id = stderr
        .lines()
        .find_map(|line| line.strip_prefix("conversation "))
        .unwrap_or_else(|| panic!("no conversation id in {stderr}"))
        .trim()
        .to_string();
    let tool_call = lines.iter().find(|l| l["event"]["name"] == "tool_call").expect("a tool_call line");
    assert_eq!(tool_call["conversation_id"], conversation_id.as_str());
    assert_eq!(
        tool_call["event"]["payload"],
        json!({ "tool_name": "get_weather", "parameters": { "city": "Paris" }, "result": { "forecast": "sunny" } })
    );
    let spoken: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"]["name"] == "agent.stopped_speaking")
        .filter_map(|l| l["event"]["payload"]["text"].as_str())
        .collect();
    assert_eq!(spoken, [format!("Let me check. {ANSWER}")]);
    assert_eq!(*seen.tool.lock().unwrap(), [("k-9".to_string(), json!({ "city": "Paris" }))]);
    assert_eq!(seen.chat.lock().unwrap()[0]["messages"][0]["content"], "You tell the weather.");

    // Webhooks were delivered by the run, signed with the agent's secret, in order.
    receiver.wait_for_event(&secret, &conversation_id, "call_ended", Duration::from_secs(30)).await;
    assert_eq!(receiver.event_names(&secret, &conversation_id), ["utterance_committed", "tool_call", "call_ended"]);

    // The record, as the API shows it.
    let mut server = Server::start(&data, &[]).await;
    let url = format!("{}/v1/ext/conversation/{conversation_id}", server.base);
    let record = api(&client, &key, Method::GET, url, None).await;
    assert_eq!(record["status"], "ENDED");
    assert_eq!(record["agent_id"], agent_id.as_str());
    let transcript = record["transcript"].as_array().unwrap();
    let roles: Vec<&str> = transcript.iter().map(|e| e["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "tool", "assistant"]);
    assert_eq!(transcript[0]["content"], QUESTION);
    let call: Value = serde_json::from_str(transcript[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(call["tool_name"], "get_weather");
    assert_eq!(call["result"], json!({ "forecast": "sunny" }));
    assert_eq!(transcript[2]["content"], format!("Let me check. {ANSWER}"));
    let metrics = api(
        &client,
        &key,
        Method::GET,
        format!("{}/v1/ext/conversation/{conversation_id}/turn-metrics", server.base),
        None,
    )
    .await;
    assert!(!metrics["data"].as_array().map(Vec::is_empty).unwrap_or(true), "turn metrics stored: {metrics}");
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Answers every turn the same way; records what it was asked.
async fn plain_chat(State(seen): State<Arc<Seen>>, body: String) -> Response {
    seen.chat.lock().unwrap().push(serde_json::from_str(&body).unwrap());
    sse(vec![json!({ "choices": [{ "index": 0, "delta": { "content": "The garage is on Elm Street." } }] })])
}

/// A spoken question (local speech-to-text, the real embedding model) retrieves the right chunk of the
/// agent's knowledge base: it reaches the language model with the turn, and the conversation records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_agent_answers_from_its_knowledge_base() {
    let seen = Arc::new(Seen::default());
    let app = Router::new().route("/v1/chat/completions", post(plain_chat)).with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let llm_base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let (dir, data, key, mut server) = fresh_server("kb").await;
    let client = reqwest::Client::new();
    let base = server.base.clone();
    let kb =
        api(&client, &key, Method::POST, format!("{base}/v1/ext/kb"), Some(json!({ "name": "Visitor guide" }))).await;
    let kb_id = kb["id"].as_str().unwrap().to_string();
    let documents = json!({ "documents": [
        { "title": "Hours", "content": "The museum opens at ten in the morning and closes at five in the afternoon." },
        { "title": "Parking", "content": "Visitors park their cars in the underground garage on Elm Street, two hours free." },
        { "title": "Tickets", "content": "Tickets cost twelve dollars; children under six enter for free." },
    ] });
    api(&client, &key, Method::POST, format!("{base}/v1/ext/kb/{kb_id}/documents"), Some(documents)).await;
    let agent = json!({
        "agent_name": "Guide",
        "agent_system_prompt": "You help museum visitors.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": {
            "llm": { "provider": "custom", "model": "test-model" },
            "stt": { "provider": "local", "max_endpointing_delay": 1.0 },
            "tts": { "provider": "local", "model_id": "espeak-ng" } } }],
        "knowledge_base_ids": [kb_id],
    });
    let agent = api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent)).await;
    let agent_id = agent["id"].as_str().unwrap().to_string();
    server.terminate();

    let input = dir.join("question.wav");
    spoken_wav(&input, "Where do visitors park their cars?", 0.5, 2.0);
    let (_, stderr) = tokio::task::spawn_blocking({
        let (input, data, agent_id) = (input.clone(), data.clone(), agent_id.clone());
        move || {
            let args = [OsStr::new("--agent-id"), OsStr::new(&agent_id), OsStr::new("--data"), data.as_os_str()];
            simulate_with(&args, &input, &[("CONFAB_LLM_BASE_URL", llm_base.as_str()), ("RUST_LOG", "info")])
        }
    })
    .await
    .unwrap();
    let conversation_id = stderr.lines().find_map(|l| l.strip_prefix("conversation ")).unwrap().trim().to_string();

    let request = seen.chat.lock().unwrap()[0].clone();
    let messages = request["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "system", "user"], "{messages:#?}\n{stderr}");
    let facts = messages[1]["content"].as_str().unwrap();
    assert!(facts.contains("underground garage on Elm Street"), "{facts}");
    assert!(!facts.contains("Tickets cost"), "only chunks that match: {facts}");
    assert!(messages[2]["content"].as_str().unwrap().to_lowercase().contains("park"), "{messages:#?}");

    let mut server = Server::start(&data, &[]).await;
    let url = format!("{}/v1/ext/conversation/{conversation_id}", server.base);
    let list = api(&client, &key, Method::GET, format!("{}/v1/ext/conversation", server.base), None).await;
    let record = api(&client, &key, Method::GET, url, None).await;
    assert_eq!(record["status"], "ENDED");
    let listed = list.as_array().unwrap().iter().find(|c| c["id"] == conversation_id.as_str()).cloned().unwrap();
    let turn = &listed["snippets"]["turns"][0];
    assert_eq!(turn["snippets"][0]["title"], "Parking", "{listed:#}");
    assert_eq!(turn["snippets"][0]["knowledge_base_id"], kb_id.as_str());
    assert!(turn["snippets"][0]["score"].as_f64().unwrap() >= 0.25);
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A test picture from `scripts/fixtures.sh` (public-domain photos of real people: test inputs only).
fn fixture(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("CONFAB_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/confab/fixtures"));
    let path = dir.join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}; run ./scripts/fixtures.sh", path.display()))
}

/// The first video frame of `webm`, as 512×512 RGB (decoded by ffmpeg).
fn first_frame(webm: &std::path::Path) -> Vec<u8> {
    let output = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(webm)
        .args(["-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg (scripts/setup.sh)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.stdout.len(), 512 * 512 * 3);
    output.stdout
}

fn mean_difference(a: &[u8], b: &[u8]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x.abs_diff(*y))).sum::<f64>() / a.len() as f64
}

/// `confab simulate --agent-id` with an agent that wears a custom avatar draws that avatar's own portrait
/// in `avatar.webm` (read from the agent's database), not a stock face; `--agent FILE` naming the same
/// avatar cannot read it and fails before running, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_agent_with_a_custom_avatar_is_drawn_with_its_own_face() {
    use base64::Engine;
    let (dir, data, key, mut server) = fresh_server("custom-face").await;
    let client = reqwest::Client::new();
    let image = base64::engine::general_purpose::STANDARD.encode(fixture("astronaut.png"));
    let url = format!("{}/v2/custom-avatar", server.base);
    let body = json!({ "image": image, "name": "Robin", "gender": "female" });
    let avatar_id = api(&client, &key, Method::POST, url, Some(body)).await["id"].as_str().unwrap().to_string();
    let mut status = Value::Null;
    for _ in 0..300 {
        let url = format!("{}/v2/custom-avatar/{avatar_id}", server.base);
        status = api(&client, &key, Method::GET, url, None).await["status"].clone();
        if status == "COMPLETED" || status == "FAILED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "COMPLETED");
    let config = json!({ "llm": { "provider": "custom", "model": "m" }, "stt": { "provider": "custom" },
        "tts": { "provider": "local", "model_id": "espeak-ng" } });
    let agent = json!({ "agent_name": "Robin", "agent_system_prompt": "Be brief.",
        "avatars": [{ "avatar_key_id": avatar_id, "config": config }] });
    let url = format!("{}/v1/ext/agent", server.base);
    let agent_id = api(&client, &key, Method::POST, url, Some(agent.clone())).await["id"].as_str().unwrap().to_string();
    server.terminate();

    let (input, out) = (dir.join("quiet.wav"), dir.join("out"));
    confab_tests::silent_wav(&input, 1.0);
    let args = [
        OsStr::new("--agent-id"),
        OsStr::new(&agent_id),
        OsStr::new("--data"),
        data.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
    ];
    // Nothing is said: the providers are never asked (the address is loopback's discard port).
    let nowhere = [("CONFAB_LLM_BASE_URL", "http://127.0.0.1:9/v1"), ("CONFAB_STT_BASE_URL", "http://127.0.0.1:9/v1")];
    tokio::task::block_in_place(|| simulate_with(&args, &input, &nowhere));
    let frame = first_frame(&out.join("avatar.webm"));
    let db = confab_store::Db::connect(&confab_store::resolve_url(None, &data).unwrap()).await.unwrap();
    let (portrait, _) = confab_store::avatars::assets::load(&db, &avatar_id).await.unwrap().expect("a stored face");
    let (stock, _) = confab_engine::avatar::stock::stock_face("stock-amara", 512).unwrap();
    let (own, other) = (mean_difference(&frame, &portrait.rgb), mean_difference(&frame, &stock.rgb));
    assert!(own < 8.0 && other > 30.0, "mean difference from its portrait {own:.1}, from the stock face {other:.1}");

    // The same agent as a file: the custom avatar cannot be read from there, and the run says so at once.
    let file = dir.join("agent.json");
    std::fs::write(&file, agent.to_string()).unwrap();
    let output = std::process::Command::new(confab_tests::confab_bin())
        .args([OsStr::new("simulate"), OsStr::new("--agent"), file.as_os_str(), OsStr::new("--input")])
        .arg(&input)
        .arg("--out")
        .arg(dir.join("out-file"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!("cannot write avatar.webm: avatar \"{avatar_id}\" is neither a stock face")),
        "{stderr}"
    );
    assert!(!dir.join("out-file").join("avatar.webm").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
