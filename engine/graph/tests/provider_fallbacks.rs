//! Provider chains (`config.*.fallbacks`) against local servers that speak each provider's real wire
//! protocol (OpenAI-compatible chat completions as SSE, `/audio/speech` as raw PCM,
//! `/audio/transcriptions` as JSON), made to fail on purpose: 500, 429 with Retry-After, a request
//! accepted and never answered, a stream cut mid-reply, a slow first token; a chain ending in the local
//! model; the health window and its recovery; a hedge that picks the faster and closes the other; a
//! call's three stages built from an agent's config failing over together, and what `turn_metrics` says.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use confab_engine::agent_spec::{LlmConfig, PipelineConfig, SttConfig};
use confab_engine::core::playout::PlayoutPiece;
use confab_engine::core::{Epoch, TurnId};
use confab_engine::providers::CallPolicy;
use confab_engine::providers::continuation::CONTINUE_INSTRUCTION;
use confab_engine::providers::env::{NamedEndpoint, ProviderEnv};
use confab_engine::providers::health::{ProviderHealth, ProviderKey};
use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use confab_engine::providers::llm_chain::{LlmChain, LlmLink, ServedBy};
use confab_engine::providers::openai_audio::OpenAiAudio;
use confab_engine::providers::openai_llm::OpenAiCompatible;
use confab_engine::providers::select::{self, Recognizer};
use confab_engine::providers::stt_chain::{SttChain, SttLink};
use confab_engine::providers::tts::{SpeechSynthesizer, TtsEvent};
use confab_engine::providers::tts_chain::{TtsChain, TtsLink, words_after};
use confab_engine::responder::{ReplyOutput, Responder};
use confab_engine::time::MediaTime;
use confab_engine::turn_metrics::TurnMetricsLog;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// One fake server: what it was asked, and whether a response it held open was let go of.
#[derive(Default)]
struct Fake {
    requests: AtomicUsize,
    bodies: std::sync::Mutex<Vec<Value>>,
    disconnected: AtomicBool,
    /// Once set, a failing scenario answers as `good` does (the incident is over).
    recovered: AtomicBool,
}

struct FlagOnDrop(Arc<Fake>);
impl Drop for FlagOnDrop {
    fn drop(&mut self) {
        self.0.disconnected.store(true, Ordering::SeqCst);
    }
}

fn chunk(text: &str) -> String {
    let body = json!({ "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": { "content": text }, "finish_reason": null }] });
    format!("data: {body}\n\n")
}

/// An SSE body: each of `parts` after its delay; then `[DONE]` when `finish`, else the stream just ends.
fn sse(parts: Vec<(u64, String)>, finish: bool, guard: Option<FlagOnDrop>) -> Response {
    let stream = futures_util::stream::iter(parts)
        .then(|(delay, part)| async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok::<_, std::io::Error>(part)
        })
        .chain(futures_util::stream::iter(finish.then(|| Ok("data: [DONE]\n\n".to_string()))))
        .chain(futures_util::stream::once(async move {
            drop(guard);
            Ok(String::new())
        }));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

async fn completions(State(fake): State<Arc<Fake>>, body: String) -> Response {
    fake.requests.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_str(&body).unwrap();
    fake.bodies.lock().unwrap().push(body.clone());
    let continuing = body["messages"].as_array().unwrap().last().unwrap()["content"] == CONTINUE_INSTRUCTION;
    let model = body["model"].as_str().unwrap();
    let model = if fake.recovered.load(Ordering::SeqCst) { "good" } else { model };
    let guard = FlagOnDrop(fake.clone());
    match model {
        "good" => sse(vec![(0, chunk("Hello")), (0, chunk(" there!"))], true, None),
        "backup" if continuing => sse(vec![(0, chunk("Paris is the")), (0, chunk(" capital of France."))], true, None),
        "backup" => sse(vec![(0, chunk("Backup answer."))], true, None),
        "fail500" => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response(),
        "ratelimited" => Response::builder()
            .status(429)
            .header("retry-after", "30")
            .body(Body::from(r#"{"error":{"message":"Rate limit reached"}}"#))
            .unwrap(),
        "stall" => {
            // Accepted, never answered: not even the headers.
            let _held = guard;
            std::future::pending::<()>().await;
            unreachable!()
        }
        "cut" => sse(vec![(0, chunk("Paris is")), (0, chunk(" the"))], false, None),
        "slow" => sse(vec![(2_000, chunk("Slow answer."))], true, Some(guard)),
        other => panic!("unknown scenario {other}"),
    }
}

/// 16-bit PCM at 24 kHz (OpenAI's `pcm`): `seconds` of a tone; cut short (no more bytes, connection
/// closed) when the scenario says so.
async fn speech(State(fake): State<Arc<Fake>>, body: String) -> Response {
    fake.requests.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_str(&body).unwrap();
    fake.bodies.lock().unwrap().push(body.clone());
    let pcm = |seconds: f64| -> Vec<u8> {
        (0..(24_000.0 * seconds) as usize)
            .flat_map(|i| (((i as f32 * 0.05).sin() * 8_000.0) as i16).to_le_bytes())
            .collect()
    };
    match body["model"].as_str().unwrap() {
        "fail500" => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "voice down").into_response(),
        "slow" => {
            let _held = FlagOnDrop(fake.clone());
            tokio::time::sleep(Duration::from_secs(2)).await;
            Response::builder().header("content-type", "audio/pcm").body(Body::from(pcm(0.5))).unwrap()
        }
        "cut" => {
            // 1.3 s of audio, then the connection breaks (an error, not a clean end).
            let audio = pcm(1.3);
            let parts =
                futures_util::stream::iter([Ok::<_, std::io::Error>(audio)]).chain(futures_util::stream::once(async {
                    // Long enough for the client to read what was sent before the reset discards it.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Err(std::io::Error::other("reset"))
                }));
            Response::builder().header("content-type", "audio/pcm").body(Body::from_stream(parts)).unwrap()
        }
        _ => Response::builder().header("content-type", "audio/pcm").body(Body::from(pcm(0.5))).unwrap(),
    }
}

/// `/audio/transcriptions`: the multipart form's `model` says the scenario.
async fn transcriptions(State(fake): State<Arc<Fake>>, mut form: axum::extract::Multipart) -> Response {
    fake.requests.fetch_add(1, Ordering::SeqCst);
    let mut model = String::new();
    while let Some(field) = form.next_field().await.unwrap() {
        if field.name() == Some("model") {
            model = field.text().await.unwrap();
        }
    }
    match model.as_str() {
        "fail500" => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "recognizer down").into_response(),
        "stall" => {
            let _held = FlagOnDrop(fake.clone());
            std::future::pending::<()>().await;
            unreachable!()
        }
        "slow" => {
            let _held = FlagOnDrop(fake.clone());
            tokio::time::sleep(Duration::from_secs(2)).await;
            axum::Json(json!({ "text": "Too late." })).into_response()
        }
        _ => axum::Json(json!({ "text": "What is the capital of France?" })).into_response(),
    }
}

async fn start() -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/audio/speech", post(speech))
        .route("/v1/audio/transcriptions", post(transcriptions))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, base)
}

const DEADLINE: Duration = Duration::from_millis(600);

fn link(base: &str, name: &str, model: &str, has_next: bool) -> LlmLink {
    let policy = CallPolicy { backoff: Duration::from_millis(50), ..CallPolicy::in_chain(DEADLINE, has_next) };
    LlmLink {
        model: Arc::new(OpenAiCompatible::new("custom", base, Some("k".into()), policy)),
        model_name: model.into(),
        key: ProviderKey { stage: "llm", provider: name.into() },
        first_response: DEADLINE,
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages: vec![ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Capital of France?")],
        tools: Vec::new(),
        max_tokens: 64,
        temperature: 0.0,
        stop: Vec::new(),
    }
}

/// The reply's text, and whether it ended with `Done`.
async fn reply(chain: &LlmChain) -> (String, bool) {
    let mut stream = chain.stream(request());
    let (mut text, mut done) = (String::new(), false);
    while let Some(event) = stream.recv().await {
        match event {
            Ok(LlmEvent::Text(piece)) => text.push_str(&piece),
            Ok(LlmEvent::Done { .. }) => done = true,
            Ok(LlmEvent::ToolCall(_)) => {}
            Err(err) => panic!("the chain failed: {err}"),
        }
    }
    (text, done)
}

fn served(provider: &str, fell_back: &[(&str, &'static str)]) -> Option<ServedBy> {
    Some(ServedBy {
        provider: provider.into(),
        fell_back: fell_back.iter().map(|(p, r)| (p.to_string(), *r)).collect(),
    })
}

/// A two-link chain: the primary's scenario on one server, `backup` on another.
async fn two_servers(primary: &str) -> (Arc<Fake>, Arc<Fake>, LlmChain) {
    let ((a, a_base), (b, b_base)) = (start().await, start().await);
    let health = Arc::new(ProviderHealth::new(Duration::from_millis(300)));
    let chain =
        LlmChain::new(vec![link(&a_base, "a", primary, true), link(&b_base, "b", "backup", false)], health, None);
    (a, b, chain)
}

#[tokio::test]
async fn a_server_error_falls_over_to_the_next() {
    let (_a, b, chain) = two_servers("fail500").await;
    assert_eq!(reply(&chain).await, ("Backup answer.".to_string(), true));
    assert_eq!(chain.served(), served("b", &[("a", "server_error")]));
    assert_eq!(b.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_429_falls_over_at_once_whatever_its_retry_after() {
    let (a, _b, chain) = two_servers("ratelimited").await;
    assert_eq!(reply(&chain).await.0, "Backup answer.");
    assert_eq!(a.requests.load(Ordering::SeqCst), 1, "not retried");
    assert_eq!(chain.served(), served("b", &[("a", "rate_limited")]));
}

#[tokio::test]
async fn a_request_accepted_and_never_answered_falls_over_at_its_deadline_and_is_closed() {
    let (a, _b, chain) = two_servers("stall").await;
    assert_eq!(reply(&chain).await.0, "Backup answer.");
    assert_eq!(chain.served(), served("b", &[("a", "deadline")]));
    assert!(let_go(&a).await, "the stalled request's connection was closed");
}

#[tokio::test]
async fn a_stream_cut_mid_reply_continues_on_the_next_without_repeating_a_word() {
    let (_a, b, chain) = two_servers("cut").await;
    assert_eq!(reply(&chain).await, ("Paris is the capital of France.".to_string(), true));
    assert_eq!(chain.served(), served("b", &[("a", "broken")]));
    let asked = b.bodies.lock().unwrap()[0].clone();
    let messages = asked["messages"].as_array().unwrap();
    assert_eq!(messages[messages.len() - 2], json!({ "role": "assistant", "content": "Paris is the" }));
    assert_eq!(messages[messages.len() - 1]["role"], "system");
}

#[tokio::test]
async fn a_failed_provider_is_skipped_until_its_backoff_passes_then_probed_and_used_again() {
    let (a, _b, chain) = two_servers("fail500").await;
    reply(&chain).await;
    let asked = a.requests.load(Ordering::SeqCst);
    // Within the backoff the primary is not asked at all.
    assert_eq!(reply(&chain).await.0, "Backup answer.");
    assert_eq!(a.requests.load(Ordering::SeqCst), asked);
    assert_eq!(chain.served(), served("b", &[]));
    // The incident ends; after the backoff one request probes the primary and finds it well.
    a.recovered.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(reply(&chain).await.0, "Hello there!");
    assert_eq!(chain.served(), served("a", &[]));
    assert_eq!(reply(&chain).await.0, "Hello there!");
}

#[tokio::test]
async fn a_hedge_takes_the_faster_and_closes_the_slower() {
    let ((a, a_base), (_b, b_base)) = (start().await, start().await);
    let health = Arc::new(ProviderHealth::new(Duration::from_secs(5)));
    let links = vec![
        LlmLink { first_response: Duration::from_secs(5), ..link(&a_base, "a", "slow", true) },
        link(&b_base, "b", "backup", false),
    ];
    let chain = LlmChain::new(links, health, Some(Duration::from_millis(200)));
    assert_eq!(reply(&chain).await.0, "Backup answer.");
    assert_eq!(chain.served(), served("b", &[]));
    assert!(let_go(&a).await, "the slower request's connection was closed");
}

#[tokio::test]
async fn a_chain_ending_in_the_local_model_answers_when_the_remote_one_fails() {
    let (_a, a_base) = start().await;
    let local = confab_engine::providers::local_llm::LocalLlm::load(&confab_models::default_models_dir(), "")
        .expect("models are fetched (confab models fetch)");
    let local_name = local.name().to_string();
    let links = vec![
        link(&a_base, "a", "fail500", true),
        LlmLink {
            model: Arc::new(local),
            model_name: local_name,
            key: ProviderKey { stage: "llm", provider: "local".into() },
            first_response: Duration::from_secs(30),
        },
    ];
    let chain = LlmChain::new(links, Arc::new(ProviderHealth::new(Duration::from_secs(5))), None);
    let (text, done) = reply(&chain).await;
    assert!(done && text.to_lowercase().contains("paris"), "{text:?}");
    assert_eq!(chain.served(), served("local", &[("a", "server_error")]));
}

fn voice(base: &str, name: &str, model: &str, has_next: bool) -> TtsLink {
    TtsLink {
        voice: Arc::new(OpenAiAudio::new(
            base,
            Some("k".into()),
            model,
            "alloy",
            CallPolicy::in_chain(DEADLINE, has_next),
        )),
        key: ProviderKey { stage: "tts", provider: name.into() },
        first_response: DEADLINE,
    }
}

/// Seconds of audio the chain produced for `text`, and whether it ended with `Done`.
async fn spoken(chain: &TtsChain, text: &str) -> (f64, bool) {
    let mut stream = chain.synthesize(text);
    let (mut samples, mut done) = (0usize, false);
    while let Some(event) = stream.recv().await {
        match event.expect("the chain spoke") {
            TtsEvent::Audio(audio) => samples += audio.len(),
            TtsEvent::Done(_) => done = true,
        }
    }
    (samples as f64 / 16_000.0, done)
}

#[tokio::test]
async fn a_voice_that_fails_is_replaced_and_one_cut_mid_sentence_resumes_with_the_words_left() {
    let ((_a, a_base), (b, b_base)) = (start().await, start().await);
    let health = Arc::new(ProviderHealth::new(Duration::from_secs(5)));
    let text = "The museum opens at ten on Sunday mornings.";
    let chain = TtsChain::new(
        vec![voice(&a_base, "a", "fail500", true), voice(&b_base, "b", "good", false)],
        health.clone(),
        None,
    );
    let (seconds, done) = spoken(&chain, text).await;
    assert!(done && seconds > 0.4, "{seconds}");
    assert_eq!(b.bodies.lock().unwrap()[0]["input"], text);
    assert_eq!(chain.take_served(), served("b", &[("a", "server_error")]));

    let ((_c, c_base), (d, d_base)) = (start().await, start().await);
    let chain = TtsChain::new(vec![voice(&c_base, "c", "cut", true), voice(&d_base, "d", "good", false)], health, None);
    let (seconds, done) = spoken(&chain, text).await;
    assert!(done && seconds > 1.5, "the cut voice's 1.3 s and the rest: {seconds}");
    // 1.2–1.3 s said at 2.5 words a second: three words said, the rest resumed.
    let resumed = d.bodies.lock().unwrap()[0]["input"].as_str().unwrap().to_string();
    assert_eq!(resumed, words_after(text, Duration::from_millis(1_250)));
    assert_eq!(resumed, "at ten on Sunday mornings.");
    assert_eq!(chain.take_served(), served("d", &[("c", "broken")]));
}

fn recognizer(base: &str, name: &str, model: &str, has_next: bool) -> SttLink {
    let policy = CallPolicy::in_chain(DEADLINE, has_next);
    SttLink {
        recognizer: Recognizer::OpenAi(OpenAiAudio::new(base, Some("k".into()), model, "", policy)),
        key: ProviderKey { stage: "stt", provider: name.into() },
        first_response: DEADLINE,
    }
}

#[tokio::test]
async fn a_recognizer_that_errs_or_stalls_is_replaced_for_the_same_audio() {
    let ((a, a_base), (b, b_base)) = (start().await, start().await);
    let health = Arc::new(ProviderHealth::new(Duration::from_secs(5)));
    let audio = vec![0.01f32; 16_000];
    for (scenario, reason) in [("fail500", "server_error"), ("stall", "deadline")] {
        let chain = SttChain {
            links: vec![recognizer(&a_base, scenario, scenario, true), recognizer(&b_base, "b", "good", false)],
            health: health.clone(),
            hedge_after: None,
        };
        let (text, served) = chain.transcribe(&audio).await;
        assert_eq!(text.unwrap(), "What is the capital of France?");
        assert_eq!(Some(served), self::served("b", &[(scenario, reason)]));
    }
    assert_eq!(b.requests.load(Ordering::SeqCst), 2);
    assert!(let_go(&a).await, "the stalled upload's connection was closed");
}

/// Whether `fake` saw a request it held open let go of (within a second).
async fn let_go(fake: &Fake) -> bool {
    for _ in 0..100 {
        if fake.disconnected.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn a_hedged_recognizer_and_a_hedged_voice_take_the_faster_and_close_the_slower() {
    let ((a, a_base), (_b, b_base)) = (start().await, start().await);
    let health = Arc::new(ProviderHealth::new(Duration::from_secs(5)));
    let patient = |link: SttLink| SttLink { first_response: Duration::from_secs(5), ..link };
    let chain = SttChain {
        links: vec![patient(recognizer(&a_base, "a", "slow", true)), recognizer(&b_base, "b", "good", false)],
        health: health.clone(),
        hedge_after: Some(Duration::from_millis(200)),
    };
    let (text, served) = chain.transcribe(&vec![0.01f32; 16_000]).await;
    assert_eq!(text.unwrap(), "What is the capital of France?");
    assert_eq!(Some(served), self::served("b", &[]), "a hedge that wins is no fallback");
    assert!(let_go(&a).await, "the slower upload's connection was closed");

    let ((c, c_base), (_d, d_base)) = (start().await, start().await);
    let links = vec![
        TtsLink { first_response: Duration::from_secs(5), ..voice(&c_base, "c", "slow", true) },
        voice(&d_base, "d", "good", false),
    ];
    let chain = TtsChain::new(links, health, Some(Duration::from_millis(200)));
    let (seconds, done) = spoken(&chain, "The museum opens at ten.").await;
    assert!(done && seconds > 0.4, "{seconds}");
    assert_eq!(chain.take_served(), self::served("d", &[]));
    assert!(let_go(&c).await, "the slower voice's connection was closed");
}

/// An agent's `config` whose three remote stages fail on endpoint `a` (speech-to-text answers 500, the
/// language model accepts and never answers, the voice answers 500), each with a fallback on endpoint
/// `b`: the call's turn is heard, answered and spoken all the same, and `turn_metrics` names who served
/// each stage and who failed it.
#[tokio::test]
async fn a_call_whose_remote_stages_fail_is_heard_answered_and_spoken_by_their_fallbacks() {
    let ((_a, a_base), (_b, b_base)) = (start().await, start().await);
    let mut env = ProviderEnv::default();
    for stage in ["stt", "llm", "tts"] {
        for (name, url) in [("a", &a_base), ("b", &b_base)] {
            env = env.with_endpoint(stage, name, NamedEndpoint { url: url.clone(), api_key: Some("k".into()) });
        }
    }
    let config: PipelineConfig = serde_json::from_value(json!({
        "stt": {
            "provider": "custom", "model": "fail500", "endpoint": "a", "first_response_timeout": 0.6,
            "fallbacks": [{ "provider": "custom", "model": "good", "endpoint": "b" }],
        },
        "llm": {
            "provider": "custom", "model": "stall", "endpoint": "a", "first_response_timeout": 0.6,
            "preemptive_generation": false,
            "fallbacks": [{ "provider": "custom", "model": "backup", "endpoint": "b" }],
        },
        "tts": {
            "provider": "custom", "model_id": "fail500", "endpoint": "a", "first_response_timeout": 0.6,
            "fallbacks": [{ "provider": "custom", "model_id": "good", "endpoint": "b" }],
        },
    }))
    .unwrap();
    let models = confab_models::default_models_dir();
    let mut responder = Responder::from_config(&config, "Be brief.".into(), &models, &env).unwrap();
    let (from, to) = (MediaTime::ZERO, MediaTime::from_millis(1_000));
    let text = responder.transcript_for(from, to, &vec![0.01f32; 16_000]).await.unwrap();
    assert_eq!(text, "What is the capital of France?");
    let mut audio_seconds = 0.0;
    let mut out = |output: ReplyOutput| {
        let samples = match output {
            ReplyOutput::Audio(PlayoutPiece::Segment(segment)) => segment.audio.len(),
            ReplyOutput::Audio(PlayoutPiece::More { audio, .. }) => audio.len(),
            ReplyOutput::Event { .. } => 0,
        };
        audio_seconds += samples as f64 / 16_000.0;
    };
    responder.respond(TurnId(1), Epoch(1), &text, &mut out).await.unwrap();
    assert!(audio_seconds >= 0.5, "the fallback voice said the answer: {audio_seconds} s");

    let mut log = TurnMetricsLog::new(true);
    log.committed(TurnId(1), to);
    log.transcript(TurnId(1), to, responder.last_transcript());
    log.llm_request(TurnId(1), to);
    log.reply(TurnId(1), responder.last_reply());
    log.started_speaking(MediaTime::from_millis(2_000));
    let line = log.stopped_speaking().expect("the turn").to_json();
    assert_eq!(line["providers"], json!({ "stt": "custom@b:good", "llm": "custom@b:backup", "tts": "custom@b:good" }));
    assert_eq!(
        line["fallbacks"],
        json!([
            { "stage": "stt", "provider": "custom@a:fail500", "reason": "server_error" },
            { "stage": "llm", "provider": "custom@a:stall", "reason": "deadline" },
            { "stage": "tts", "provider": "custom@a:fail500", "reason": "server_error" },
        ])
    );
}

/// A provider the process cannot use (its key not set, its endpoint not named at start) is left out of
/// the chain when another can be used; alone, it fails the call's start with the reason.
#[tokio::test]
async fn a_provider_that_cannot_be_used_is_left_out_when_another_can_be() {
    let (_b, b_base) = start().await;
    let env = ProviderEnv::default().with_endpoint("stt", "b", NamedEndpoint { url: b_base, api_key: None });
    let models = confab_models::default_models_dir();
    let stt: SttConfig = serde_json::from_value(json!({
        "provider": "deepgram",
        "fallbacks": [{ "provider": "custom", "model": "good", "endpoint": "b" }],
    }))
    .unwrap();
    let recognizer = select::recognizer(&stt, &models, &env).unwrap().expect("a recognizer");
    let (text, served) = recognizer.transcribe_served(&vec![0.01f32; 16_000]).await;
    assert_eq!(text.unwrap(), "What is the capital of France?");
    assert_eq!(served, self::served("custom@b:good", &[]));

    let llm: LlmConfig =
        serde_json::from_value(json!({ "provider": "custom", "model": "m", "endpoint": "nowhere" })).unwrap();
    let error = select::language_model(&llm, &models, &env).err().expect("no language model to use");
    assert_eq!(error.message, "no llm endpoint \"nowhere\" (start the server with --llm-endpoint nowhere=URL)");
}
