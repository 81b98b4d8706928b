//! The OpenAI-compatible LLM adapter against a local server speaking the real wire protocol: SSE
//! `data:` chunks of `chat.completion.chunk` objects, tool-call deltas, `data: [DONE]`, error bodies,
//! slow streams, mid-stream disconnects.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent, ToolCall, ToolSpec};
use confab_engine::providers::openai_llm::OpenAiCompatible;
use confab_engine::providers::{CallPolicy, ProviderError};
use futures_util::StreamExt;
use serde_json::{Value, json};

#[derive(Default)]
struct Server {
    requests: AtomicUsize,
    /// Sent to when a response body the server still held open is dropped (its client let go).
    disconnected: tokio::sync::watch::Sender<bool>,
    last_body: std::sync::Mutex<Value>,
}

struct SetOnDrop(tokio::sync::watch::Sender<bool>);
impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
    });
    format!("data: {body}\n\n")
}

/// A streaming body: `parts`, then, when `then_hang`, nothing more on a connection held open (a stalled
/// model); `guard` is dropped with the body, when the client lets go.
fn sse(parts: Vec<String>, then_hang: bool, guard: Option<SetOnDrop>) -> Response {
    let sent = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    sse_body(sent, then_hang, guard)
}

/// `parts` one every `every` (a model that writes slowly).
fn slow_sse(parts: Vec<String>, every: Duration, guard: Option<SetOnDrop>) -> Response {
    let ticks = ticks(every);
    let sent = ticks.zip(futures_util::stream::iter(parts)).map(|(_, part)| Ok::<_, std::io::Error>(part));
    sse_body(sent, false, guard)
}

/// A tick at once, then one every `every`.
fn ticks(every: Duration) -> impl futures_util::Stream<Item = ()> {
    futures_util::stream::unfold(tokio::time::interval(every), |mut interval| async move {
        interval.tick().await;
        Some(((), interval))
    })
}

fn sse_body(
    sent: impl futures_util::Stream<Item = Result<String, std::io::Error>> + Send + 'static,
    then_hang: bool,
    guard: Option<SetOnDrop>,
) -> Response {
    let rest = futures_util::stream::once(async move {
        let _held = guard;
        if then_hang {
            std::future::pending::<()>().await;
        }
        None
    })
    .filter_map(std::future::ready);
    let stream = sent.chain(rest);
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

async fn completions(State(server): State<Arc<Server>>, headers: HeaderMap, body: String) -> Response {
    let attempt = server.requests.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_str(&body).unwrap();
    *server.last_body.lock().unwrap() = body.clone();
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer test-key") {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({ "error": { "message": "Incorrect API key provided", "type": "invalid_request_error" } }),
            ),
        )
            .into_response();
    }
    let done = "data: [DONE]\n\n".to_string();
    match body["model"].as_str().unwrap() {
        "text" => sse(
            vec![
                chunk(json!({ "role": "assistant", "content": "" }), None),
                chunk(json!({ "content": "Hello" }), None),
                chunk(json!({ "content": " there!" }), None),
                chunk(json!({}), Some("stop")),
                done,
            ],
            false,
            None,
        ),
        "tools" => sse(
            vec![
                chunk(
                    json!({ "role": "assistant", "content": null, "tool_calls": [{ "index": 0, "id": "call_1", "type": "function", "function": { "name": "get_weather", "arguments": "" } }] }),
                    None,
                ),
                chunk(json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "{\"ci" } }] }), None),
                chunk(json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "ty\": \"Paris\"}" } }] }), None),
                chunk(
                    json!({ "tool_calls": [{ "index": 1, "id": "call_2", "type": "function", "function": { "name": "get_time", "arguments": "{}" } }] }),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
                done,
            ],
            false,
            None,
        ),
        "flaky" if attempt == 0 => (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response(),
        "flaky" => sse(vec![chunk(json!({ "content": "ok" }), None), done], false, None),
        "ratelimited" => {
            (StatusCode::TOO_MANY_REQUESTS, axum::Json(json!({ "error": { "message": "Rate limit reached" } })))
                .into_response()
        }
        "slow" => {
            let parts = (0..100).map(|i| chunk(json!({ "content": format!("word{i} ") }), None)).collect();
            slow_sse(parts, Duration::from_millis(200), Some(SetOnDrop(server.disconnected.clone())))
        }
        "broken" => sse(vec![chunk(json!({ "content": "partial" }), None)], false, None),
        "stalled" => sse(vec![chunk(json!({ "content": "first" }), None)], true, None),
        "error-in-stream" => sse(vec!["data: {\"error\":{\"message\":\"model overloaded\"}}\n\n".into()], false, None),
        other => panic!("unknown scenario {other}"),
    }
}

async fn start() -> (Arc<Server>, String) {
    let server = Arc::new(Server::default());
    let app = Router::new().route("/v1/chat/completions", post(completions)).with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (server, base)
}

fn policy() -> CallPolicy {
    CallPolicy { idle_timeout: Duration::from_millis(400), backoff: Duration::from_millis(10), ..CallPolicy::default() }
}

fn request(model: &str) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        messages: vec![ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather".into(),
            parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
        }],
        max_tokens: 64,
        temperature: 0.2,
        stop: vec!["\nUser:".into()],
    }
}

async fn collect(llm: &OpenAiCompatible, model: &str) -> Vec<Result<LlmEvent, ProviderError>> {
    let mut stream = llm.stream(request(model));
    let mut out = Vec::new();
    while let Some(event) = stream.recv().await {
        out.push(event);
    }
    out
}

#[tokio::test]
async fn streams_text_and_sends_the_right_request() {
    let (server, base) = start().await;
    let llm = OpenAiCompatible::new("openai", base, Some("test-key".into()), policy());
    let events = collect(&llm, "text").await;
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Ok(LlmEvent::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hello", " there!"]);
    match events.last() {
        Some(Ok(LlmEvent::Done { metrics, .. })) => {
            assert!(metrics.time_to_first.is_some() && metrics.attempts == 1);
        }
        other => panic!("{other:?}"),
    }
    let body = server.last_body.lock().unwrap().clone();
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][1], json!({ "role": "user", "content": "Hi" }));
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(body["stop"], json!(["\nUser:"]));
    assert_eq!(body["max_tokens"], 64);
}

#[tokio::test]
async fn assembles_tool_calls_from_deltas() {
    let (_, base) = start().await;
    let llm = OpenAiCompatible::new("openai", base, Some("test-key".into()), policy());
    let calls: Vec<ToolCall> = collect(&llm, "tools")
        .await
        .into_iter()
        .filter_map(|e| match e {
            Ok(LlmEvent::ToolCall(c)) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ToolCall { id: "call_1".into(), name: "get_weather".into(), arguments: "{\"city\": \"Paris\"}".into() },
            ToolCall { id: "call_2".into(), name: "get_time".into(), arguments: "{}".into() },
        ]
    );
}

#[tokio::test]
async fn client_errors_are_not_retried_and_server_errors_are() {
    let (server, base) = start().await;
    let wrong_key = OpenAiCompatible::new("openai", base.clone(), Some("wrong".into()), policy());
    let events = collect(&wrong_key, "text").await;
    let Some(Err(error)) = events.last() else { panic!("{events:?}") };
    assert_eq!((error.status, error.retryable), (Some(401), false));
    assert!(error.message.contains("Incorrect API key"));
    assert_eq!(server.requests.load(Ordering::SeqCst), 1, "4xx is never retried");

    let (server, base) = start().await;
    let llm = OpenAiCompatible::new("groq", base, Some("test-key".into()), policy());
    let events = collect(&llm, "flaky").await;
    assert!(matches!(events.last(), Some(Ok(LlmEvent::Done { metrics, .. })) if metrics.attempts == 2), "{events:?}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 2);

    let (server, base) = start().await;
    let llm = OpenAiCompatible::new("openrouter", base, Some("test-key".into()), policy());
    let events = collect(&llm, "ratelimited").await;
    let Some(Err(error)) = events.last() else { panic!("{events:?}") };
    assert_eq!((error.status, error.retryable), (Some(429), true));
    assert_eq!(server.requests.load(Ordering::SeqCst), 3, "first attempt plus two retries");
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let (server, base) = start().await;
    let llm = OpenAiCompatible::new("custom", base, Some("test-key".into()), policy());
    let mut stream = llm.stream(request("slow"));
    for _ in 0..2 {
        assert!(matches!(stream.recv().await, Some(Ok(LlmEvent::Text(_)))));
    }
    let mut disconnected = server.disconnected.subscribe();
    drop(stream);
    let closed = tokio::time::timeout(Duration::from_secs(10), disconnected.wait_for(|closed| *closed)).await;
    assert!(closed.is_ok(), "the server still streams to a cancelled client");
}

#[tokio::test]
async fn broken_stalled_and_failing_streams_end_in_errors() {
    let (_, base) = start().await;
    let llm = OpenAiCompatible::new("openai", base, Some("test-key".into()), policy());
    for (model, expected) in
        [("broken", "before [DONE]"), ("stalled", "stalled"), ("error-in-stream", "model overloaded")]
    {
        let events = collect(&llm, model).await;
        assert!(
            matches!(events.first(), Some(Ok(LlmEvent::Text(_)))) || model == "error-in-stream",
            "{model}: {events:?}"
        );
        let Some(Err(error)) = events.last() else { panic!("{model}: {events:?}") };
        assert!(error.message.contains(expected), "{model}: {error}");
    }
}

#[tokio::test]
async fn unreachable_servers_are_retryable_network_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let llm = OpenAiCompatible::new("custom", format!("http://127.0.0.1:{port}/v1"), None, policy());
    let events = collect(&llm, "text").await;
    let Some(Err(error)) = events.last() else { panic!("{events:?}") };
    assert!(error.retryable && error.status.is_none(), "{error:?}");
}
