//! Tools and guardrails inside a reply, against real wire protocols: a local OpenAI-compatible server
//! that streams real `tool_calls` (fragmented arguments, `finish_reason: "tool_calls"`), and local HTTP
//! tool and callback servers. The responder runs as a live call's agent task does; the voice is a test
//! synthesizer (silence whose length follows the text), since what is checked is what is said, in what
//! order, and what the model and the tools receive.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use confab_engine::actions::api_tool::ApiTool;
use confab_engine::actions::guardrail::Guardrail;
use confab_engine::actions::moderation::ModerationEndpoint;
use confab_engine::actions::{ActionSettings, Actions};
use confab_engine::core::playout::PlayoutPiece;
use confab_engine::core::{Epoch, TurnId};
use confab_engine::events::EventKind;
use confab_engine::outbound::signing;
use confab_engine::providers::openai_llm::OpenAiCompatible;
use confab_engine::providers::tts::{SpeechSynthesizer, TtsEvent, TtsStream};
use confab_engine::providers::{CallMetrics, CallPolicy};
use confab_engine::responder::{ReplyOutput, Responder};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

const ANSWER: &str = "Here you are.";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Silence, 10 ms per character: what matters here is the text.
struct TextVoice;

impl SpeechSynthesizer for TextVoice {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(4);
        tx.try_send(Ok(TtsEvent::Audio(vec![0.0; 160 * text.len().max(1)]))).unwrap();
        tx.try_send(Ok(TtsEvent::Done(CallMetrics::default()))).unwrap();
        rx
    }
}

/// What the language model does: the calls it makes when the last message is the user's.
#[derive(Default)]
struct Model {
    calls: Vec<(String, String)>,
    requests: Mutex<Vec<Value>>,
}

fn sse(chunks: Vec<Value>) -> Response {
    let mut parts: Vec<String> = chunks.into_iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    parts.push("data: [DONE]\n\n".into());
    let stream = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

fn text_chunk(text: &str) -> Value {
    json!({ "choices": [{ "index": 0, "delta": { "content": text }, "finish_reason": null }] })
}

/// The calls as OpenAI streams them: id and name first, the arguments in two fragments, then
/// `finish_reason: "tool_calls"`.
fn tool_call_chunks(calls: &[(String, String)]) -> Vec<Value> {
    let mut chunks = Vec::new();
    for (index, (name, arguments)) in calls.iter().enumerate() {
        let (first, second) = arguments.split_at(arguments.len() / 2);
        chunks.push(json!({ "choices": [{ "index": 0, "delta": { "role": "assistant", "tool_calls": [
            { "index": index, "id": format!("call_{index}"), "type": "function", "function": { "name": name, "arguments": "" } }
        ] } }] }));
        for fragment in [first, second] {
            chunks.push(json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                { "index": index, "function": { "arguments": fragment } }
            ] } }] }));
        }
    }
    chunks.push(json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }));
    chunks
}

async fn chat(State(model): State<Arc<Model>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap();
    model.requests.lock().unwrap().push(request.clone());
    let messages = request["messages"].as_array().unwrap();
    if messages[0]["content"].as_str().unwrap().starts_with("You check messages") {
        return sse(vec![text_chunk("yes")]); // the guardrail check
    }
    // Tools are called for the conversation's first question only.
    let last = messages.last().unwrap();
    let questions = messages.iter().filter(|m| m["role"] == "user").count();
    if last["role"] == "user" && questions == 1 && !model.calls.is_empty() {
        return sse(tool_call_chunks(&model.calls));
    }
    sse(vec![text_chunk("Here you "), text_chunk("are.")])
}

async fn moderations(body: String) -> impl IntoResponse {
    let request: Value = serde_json::from_str(&body).unwrap();
    let flagged = request["input"].as_str().unwrap().contains("hurt");
    axum::Json(json!({ "id": "modr-1", "model": request["model"], "results": [{
        "flagged": flagged, "categories": { "violence": flagged, "hate": false } }] }))
}

/// One request a tool (or callback) server received.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    uri: String,
    headers: axum::http::HeaderMap,
    body: String,
}

/// Tool and callback routes: `/fast`, `/slow` (answers when released), `/fail` (500), `/hook` (500).
#[derive(Default)]
struct Tools {
    received: Mutex<Vec<Received>>,
    /// How many requests were received, for a test waiting on the next.
    count: tokio::sync::watch::Sender<usize>,
    release: Notify,
}

impl Tools {
    /// Waits (10 s at most) until `n` requests have been received.
    async fn wait_for(&self, n: usize) {
        let mut count = self.count.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(10), count.wait_for(|received| *received >= n)).await;
    }
}

async fn tool(State(tools): State<Arc<Tools>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = String::from_utf8(axum::body::to_bytes(body, 1 << 20).await.unwrap().to_vec()).unwrap();
    let path = parts.uri.path().to_string();
    tools.received.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts.headers,
        body,
    });
    tools.count.send_modify(|count| *count += 1);
    match path.as_str() {
        "/slow" => {
            tools.release.notified().await;
            axum::Json(json!({ "forecast": "rain" })).into_response()
        }
        "/fail" | "/hook" => (StatusCode::INTERNAL_SERVER_ERROR, "broken").into_response(),
        _ => axum::Json(json!({ "forecast": "sunny", "temperature_c": 21 })).into_response(),
    }
}

struct Servers {
    model: Arc<Model>,
    tools: Arc<Tools>,
    llm_base: String,
    tools_base: String,
}

async fn start(calls: &[(&str, &str)]) -> Servers {
    let model = Arc::new(Model {
        calls: calls.iter().map(|(n, a)| (n.to_string(), a.to_string())).collect(),
        ..Model::default()
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/moderations", post(moderations))
        .with_state(model.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let llm_base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let tools = Arc::new(Tools::default());
    let app = Router::new().route("/{*path}", any(tool)).with_state(tools.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tools_base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Servers { model, tools, llm_base, tools_base }
}

/// A record as the Agent resource carries it, typed as the engine reads it.
fn record<T: serde::de::DeserializeOwned>(json: Value) -> T {
    serde_json::from_value(json).expect("a well-formed record")
}

fn api_tool(name: &str, method: &str, url: &str, messages: Value) -> ApiTool {
    ApiTool::from_record(&record(json!({
        "type": "tool.api",
        "schema": { "type": "function", "name": name, "description": format!("The {name} tool"),
            "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] } },
        "request_config": { "method": method, "url": url, "headers": { "x-api-key": "k-123" } },
        "event_messages": messages,
    })))
    .unwrap()
}

fn messages(start: &str, delay: Option<(f64, &str)>, success: &str, error: &str) -> Value {
    let (delay, delay_message) = delay.unwrap_or((0.0, ""));
    json!({
        "on_start": { "message": start },
        "on_delay": { "delay": delay, "message": delay_message },
        "on_success": { "message": success },
        "on_error": { "message": error },
    })
}

fn responder(servers: &Servers, tools: Vec<ApiTool>, guardrails: Vec<Guardrail>, allow_private: bool) -> Responder {
    let llm = OpenAiCompatible::new("custom", servers.llm_base.clone(), None, CallPolicy::default());
    let settings = ActionSettings {
        allow_private_urls: allow_private,
        conversation_id: "conv-1".into(),
        webhook_secret: SECRET.into(),
    };
    Responder::new((Box::new(llm), "m".into()), Box::new(TextVoice), None, "Be brief.".into())
        .with_actions(Actions::new(tools, guardrails, settings))
}

/// The texts of the segments said, and the events, in order.
#[derive(Debug, Default)]
struct Said {
    texts: Vec<String>,
    events: Vec<EventKind>,
    /// Each event's epoch (the reply that began the call it reports).
    epochs: Vec<Epoch>,
}

fn collect(said: &mut Said) -> impl FnMut(ReplyOutput) + Send + '_ {
    move |output| match output {
        ReplyOutput::Audio(PlayoutPiece::Segment(segment)) => said.texts.push(segment.text),
        ReplyOutput::Audio(_) => {}
        ReplyOutput::Event { epoch, kind } => {
            said.events.push(kind);
            said.epochs.push(epoch);
        }
    }
}

async fn answer(responder: &mut Responder, text: &str) -> Said {
    answer_in(responder, Epoch(1), text).await
}

/// A reply of `epoch` (a barge-in makes the next reply's epoch newer).
async fn answer_in(responder: &mut Responder, epoch: Epoch, text: &str) -> Said {
    let mut said = Said::default();
    responder.respond(TurnId(1), epoch, text, &mut collect(&mut said)).await.unwrap();
    said
}

#[tokio::test]
async fn tool_calls_reach_the_tools_and_their_results_reach_the_model() {
    let servers =
        start(&[("get_weather", r#"{"city":"Paris"}"#), ("get_forecast", r#"{"city":"Paris","days":2}"#)]).await;
    let weather = api_tool(
        "get_weather",
        "POST",
        &format!("{}/fast", servers.tools_base),
        messages("Let me check.", None, "Got it.", ""),
    );
    let forecast = api_tool("get_forecast", "GET", &format!("{}/fast?units=metric", servers.tools_base), json!({}));
    let mut responder = responder(&servers, vec![weather, forecast], vec![], true);

    let said = answer(&mut responder, "What is the weather in Paris?").await;

    assert_eq!(said.texts, ["Let me check.", "Got it.", ANSWER]);
    let received = servers.tools.received.lock().unwrap().clone();
    assert_eq!(received.len(), 2);
    assert_eq!((received[0].method.as_str(), received[0].uri.as_str()), ("POST", "/fast"));
    assert_eq!(received[0].headers["x-api-key"], "k-123");
    assert_eq!(received[0].headers["content-type"], "application/json");
    assert_eq!(serde_json::from_str::<Value>(&received[0].body).unwrap(), json!({ "city": "Paris" }));
    assert_eq!(
        (received[1].method.as_str(), received[1].uri.as_str()),
        ("GET", "/fast?units=metric&city=Paris&days=2")
    );
    assert_eq!(received[1].body, "");

    let result = json!({ "forecast": "sunny", "temperature_c": 21 });
    assert_eq!(
        said.events,
        [
            EventKind::ToolCall {
                tool_name: "get_weather".into(),
                parameters: json!({ "city": "Paris" }),
                result: result.clone()
            },
            EventKind::ToolCall {
                tool_name: "get_forecast".into(),
                parameters: json!({ "city": "Paris", "days": 2 }),
                result: result.clone()
            },
        ]
    );

    let requests = servers.model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "asked, then asked again with the results");
    let offered: Vec<&str> =
        requests[0]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(offered, ["get_weather", "get_forecast"]);
    assert_eq!(requests[0]["tools"][0]["type"], "function");
    assert_eq!(requests[0]["tools"][0]["function"]["parameters"]["required"], json!(["city"]));
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages[1], json!({ "role": "user", "content": "What is the weather in Paris?" }));
    assert_eq!(
        messages[2],
        json!({ "role": "assistant", "content": "", "tool_calls": [
            { "id": "call_0", "type": "function", "function": { "name": "get_weather", "arguments": r#"{"city":"Paris"}"# } },
            { "id": "call_1", "type": "function", "function": { "name": "get_forecast", "arguments": r#"{"city":"Paris","days":2}"# } },
        ] })
    );
    for (index, id) in [(3, "call_0"), (4, "call_1")] {
        assert_eq!(messages[index]["role"], "tool");
        assert_eq!(messages[index]["tool_call_id"], id);
        assert_eq!(serde_json::from_str::<Value>(messages[index]["content"].as_str().unwrap()).unwrap(), result);
    }
    assert_eq!(messages.len(), 5);
}

#[tokio::test]
async fn a_slow_tool_says_its_delay_message_and_a_failing_tool_its_error_message() {
    let servers = start(&[("slow_lookup", r#"{"city":"Oslo"}"#), ("broken_lookup", r#"{"city":"Oslo"}"#)]).await;
    let slow = api_tool(
        "slow_lookup",
        "POST",
        &format!("{}/slow", servers.tools_base),
        messages("One moment.", Some((0.2, "Still looking.")), "Found it.", "That did not work."),
    );
    let broken = api_tool(
        "broken_lookup",
        "POST",
        &format!("{}/fail", servers.tools_base),
        messages("", Some((30.0, "Never said.")), "Never said either.", "The second lookup failed."),
    );
    let mut responder = responder(&servers, vec![slow, broken], vec![], true);
    // The slow tool answers once the delay message has been said (it is said 0.2 s into the call).
    let tools = servers.tools.clone();
    let mut said = Said::default();
    {
        let mut out = collect(&mut said);
        let mut release_after_delay_message = |output: ReplyOutput| {
            if matches!(&output, ReplyOutput::Audio(PlayoutPiece::Segment(s)) if s.text == "Still looking.") {
                tools.release.notify_one();
            }
            out(output);
        };
        responder.respond(TurnId(1), Epoch(1), "Weather in Oslo?", &mut release_after_delay_message).await.unwrap();
    }
    assert_eq!(said.texts, ["One moment.", "Still looking.", "Found it.", "The second lookup failed.", ANSWER]);
    let EventKind::ToolCall { result, .. } = &said.events[1] else { panic!("{:?}", said.events) };
    assert_eq!(result, &json!({ "error": "HTTP 500: broken" }));
}

#[tokio::test]
async fn a_barge_in_during_a_tool_call_neither_repeats_it_nor_loses_its_result() {
    let servers = start(&[("slow_lookup", r#"{"city":"Rome"}"#)]).await;
    let slow = api_tool(
        "slow_lookup",
        "POST",
        &format!("{}/slow", servers.tools_base),
        messages("Let me look that up.", None, "Found it.", ""),
    );
    let mut responder = responder(&servers, vec![slow], vec![], true);

    // Turn 1: the reply is dropped (as the agent task drops it on a newer epoch) once the start
    // message is out, while the tool is still working.
    let (started_tx, mut started) = mpsc::unbounded_channel();
    {
        let mut out = |output: ReplyOutput| {
            let _ = started_tx.send(output);
        };
        let reply = responder.respond(TurnId(1), Epoch(1), "Weather in Rome?", &mut out);
        tokio::select! {
            _ = reply => panic!("the reply cannot finish: the tool has not answered"),
            Some(ReplyOutput::Audio(PlayoutPiece::Segment(segment))) = started.recv() => {
                assert_eq!(segment.text, "Let me look that up.");
            }
        }
    }
    responder.heard("Let me look");
    servers.tools.release.notify_one();

    // Turn 2: the result enters the history before the new question; the call is not made again. Its
    // event carries the interrupted reply's epoch: the conversation drops it (`agent.interrupted` was
    // that turn's last event).
    let said = answer_in(&mut responder, Epoch(2), "And tomorrow?").await;
    assert_eq!(said.epochs, [Epoch(1)]);
    assert_eq!(servers.tools.received.lock().unwrap().len(), 1, "the tool was called once");
    assert_eq!(
        said.events,
        [EventKind::ToolCall {
            tool_name: "slow_lookup".into(),
            parameters: json!({ "city": "Rome" }),
            result: json!({ "forecast": "rain" })
        }]
    );
    let requests = servers.model.requests.lock().unwrap().clone();
    let last = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = last.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "user"]);
    assert_eq!(last[3]["content"], r#"{"forecast":"rain"}"#);
    assert_eq!(last[4]["content"], "Let me look");
    assert_eq!(last[5]["content"], "And tomorrow?");
    assert_eq!(said.texts, [ANSWER]);
}

fn guardrail(key: &str, response_message: &str, callback_url: &str) -> Guardrail {
    Guardrail::from_record(&record(json!({
        "id": "g-1", "key": key, "name": "No medical advice", "category": "safety",
        "prompt": "The user asks for a diagnosis or medication.",
        "response_message": response_message, "callback_url": callback_url,
    })))
    .unwrap()
}

#[tokio::test]
async fn a_guardrail_speaks_its_message_verbatim_and_calls_back_once_without_retries() {
    let servers = start(&[("no_medical_advice", "{}"), ("get_weather", r#"{"city":"Paris"}"#)]).await;
    let weather = api_tool("get_weather", "POST", &format!("{}/fast", servers.tools_base), json!({}));
    let rule = guardrail("no_medical_advice", "I can't give medical advice.", &format!("{}/hook", servers.tools_base));
    let mut responder = responder(&servers, vec![weather], vec![rule], true);

    let said = answer(&mut responder, "Which pills cure my headache?").await;

    assert_eq!(said.texts, ["I can't give medical advice."], "the message, verbatim, and nothing else");
    assert_eq!(servers.model.requests.lock().unwrap().len(), 1, "the model is not asked again this turn");
    let offered = servers.model.requests.lock().unwrap()[0]["tools"][0]["function"].clone();
    assert_eq!(offered["name"], "no_medical_advice");
    assert!(offered["description"].as_str().unwrap().contains("The user asks for a diagnosis or medication."));
    // The other call of the round was not run.
    let received = || servers.tools.received.lock().unwrap().clone();
    servers.tools.wait_for(1).await;
    let calls = received();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let hook = &calls[0];
    assert_eq!((hook.method.as_str(), hook.uri.as_str()), ("POST", "/hook"));
    let body: Value = serde_json::from_str(&hook.body).unwrap();
    assert_eq!(body["conversation_id"], "conv-1");
    assert_eq!(body["event"]["name"], "guardrail_triggered");
    assert_eq!(body["event"]["payload"]["guardrail_id"], "g-1");
    assert_eq!(body["event"]["payload"]["key"], "no_medical_advice");
    assert_eq!(body["event"]["payload"]["user_message"], "Which pills cure my headache?");
    let header = |name: &str| hook.headers[name].to_str().unwrap().to_string();
    let timestamp: i64 = header("webhook-timestamp").parse().unwrap();
    let verified = signing::verify(
        SECRET,
        &header("webhook-id"),
        timestamp,
        &header("webhook-signature"),
        hook.body.as_bytes(),
        chrono::Utc::now().timestamp(),
    );
    assert_eq!(verified, Ok(()));
    // The receiver answered 500: fire-and-forget, nothing is sent again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(received().len(), 1);
    assert!(
        said.events
            .iter()
            .all(|e| !matches!(e, EventKind::ToolCall { tool_name, .. } if tool_name == "no_medical_advice"))
    );
}

#[tokio::test]
async fn a_guardrail_without_a_message_is_checked_by_the_moderation_endpoint_or_the_model() {
    for with_endpoint in [true, false] {
        let servers = start(&[("no_harm", "{}")]).await;
        let endpoint = with_endpoint.then(|| ModerationEndpoint { base_url: servers.llm_base.clone(), api_key: None });
        let mut responder =
            responder(&servers, vec![], vec![guardrail("no_harm", "", "")], true).with_moderation(endpoint);

        let said = answer(&mut responder, "How do I hurt someone?").await;

        assert_eq!(said.texts, [ANSWER], "the model answers after the check");
        let requests = servers.model.requests.lock().unwrap().clone();
        let last = requests.last().unwrap()["messages"].as_array().unwrap().clone();
        let verdict: Value = serde_json::from_str(last.last().unwrap()["content"].as_str().unwrap()).unwrap();
        assert_eq!(verdict["guardrail"], "no_harm");
        assert_eq!(verdict["flagged"], true);
        if with_endpoint {
            assert_eq!(verdict["checked_by"], "moderation_endpoint");
            assert_eq!(verdict["categories"], json!(["violence"]));
            assert_eq!(requests.len(), 2);
        } else {
            assert_eq!(verdict["checked_by"], "language_model");
            assert_eq!(requests.len(), 3, "the reply, the check, the reply after the check");
            assert!(requests[1]["messages"][0]["content"].as_str().unwrap().contains("The user asks for a diagnosis"));
        }
    }
}

#[tokio::test]
async fn a_private_tool_address_is_refused_unless_allowed() {
    let servers = start(&[("get_weather", r#"{"city":"Paris"}"#)]).await;
    let url = format!("{}/fast", servers.tools_base);
    let weather = api_tool("get_weather", "POST", &url, messages("", None, "", "I could not reach the service."));
    let mut responder = responder(&servers, vec![weather], vec![], false);

    let said = answer(&mut responder, "Weather?").await;

    assert!(servers.tools.received.lock().unwrap().is_empty(), "nothing reached the tool");
    assert_eq!(said.texts, ["I could not reach the service.", ANSWER]);
    let EventKind::ToolCall { result, .. } = &said.events[0] else { panic!() };
    assert!(result["error"].as_str().unwrap().contains("private or reserved"), "{result}");
}

/// A steady tone, 60 ms per character: audible agent speech whose end is easy to see.
struct ToneVoice;

impl SpeechSynthesizer for ToneVoice {
    fn synthesize(&self, text: &str) -> TtsStream {
        let (tx, rx) = mpsc::channel(4);
        let samples = 960 * text.len().max(1);
        let tone = (0..samples).map(|i| 0.3 * (i as f32 * 0.17).sin()).collect();
        tx.try_send(Ok(TtsEvent::Audio(tone))).unwrap();
        tx.try_send(Ok(TtsEvent::Done(CallMetrics::default()))).unwrap();
        rx
    }
}

/// The whole graph offline (real VAD, turn model and local speech-to-text on espeak-ng speech): the user
/// asks, the agent starts saying the tool's `on_start` message, and the user barges in. On the media
/// clock: the message stops on the very frame of the interruption (`agent.interrupted` and
/// `agent.stopped_speaking` at the same instant, silence from that sample on, the heard text a strict
/// prefix of the message), the tool was called once, and its `tool_call` event was emitted.
#[test]
fn a_barge_in_stops_the_tool_message_on_the_interruption_frame() {
    use confab_engine::conversation::ConversationConfig;
    use confab_engine::core::endpoint::EndpointConfig;
    use confab_engine::simulate::run_audio;
    use confab_engine::time::MediaTime;

    const START: &str = "Let me look up the weather for you, this will only take a moment while I check.";
    let io = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let servers = io.block_on(start(&[("get_weather", r#"{"city":"Paris"}"#)]));
    let models = confab_models::default_models_dir();
    let weather =
        api_tool("get_weather", "POST", &format!("{}/fast", servers.tools_base), messages(START, None, "", ""));
    let llm = OpenAiCompatible::new("custom", servers.llm_base.clone(), None, CallPolicy::default());
    let none = confab_engine::providers::env::ProviderEnv::default();
    let local = confab_engine::agent_spec::SttConfig::default();
    let stt = confab_engine::providers::select::recognizer(&local, &models, &none).unwrap();
    let settings = ActionSettings { allow_private_urls: true, ..ActionSettings::default() };
    let responder = Responder::new((Box::new(llm), "m".into()), Box::new(ToneVoice), stt, "Be brief.".into())
        .with_actions(Actions::new(vec![weather], vec![], settings));

    let mut audio = vec![0.0; 8_000];
    audio.extend(common::speak("What is the weather in Paris?"));
    audio.extend(vec![0.0; 16_000 * 2]);
    audio.extend(common::speak("Stop, stop, never mind that."));
    audio.extend(vec![0.0; 16_000 * 3]);
    let config = ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(300), max_delay: MediaTime::from_millis(800) },
        ..ConversationConfig::default()
    };
    let record = run_audio(&io, &models, &audio, config, Some(responder), false, &mut |_| {}).unwrap();

    let at = |name: &str| -> Vec<(Duration, Value)> {
        record.events.iter().filter(|e| e.kind.name() == name).map(|e| (e.media_time, e.kind.payload())).collect()
    };
    let interrupted = at("agent.interrupted");
    assert_eq!(interrupted.len(), 1, "{:?}", record.events);
    let stopped = at("agent.stopped_speaking");
    assert_eq!(stopped[0].0, interrupted[0].0, "the message stops on the interruption's frame");
    let heard = stopped[0].1["text"].as_str().unwrap().to_string();
    assert!(START.starts_with(&heard) && heard.len() < START.len(), "a strict prefix: {heard:?}");
    let starts = at("agent.started_speaking");
    let sample = |t: Duration| MediaTime::from_duration(t).samples() as usize;
    let (from, to) = (sample(starts[0].0), sample(interrupted[0].0));
    // Until the agent answers the user's second turn.
    let next = starts.get(1).map_or(record.agent_audio.len(), |(t, _)| sample(*t));
    assert!(record.agent_audio[from..to].iter().any(|s| s.abs() > 0.1), "the message was playing");
    assert!(record.agent_audio[to..next].iter().all(|s| *s == 0.0), "silence from the interruption's sample on");
    assert!(next > to + 1_600, "silence for a while");
    assert_eq!(servers.tools.received.lock().unwrap().len(), 1, "the tool was called once");
    assert_eq!(at("tool_call").len(), 1);
}
