//! A loopback server that speaks the OpenAI-compatible wire protocol of all three stages
//! (`/v1/audio/transcriptions`, `/v1/chat/completions` as SSE, `/v1/audio/speech` as raw PCM) with
//! fixed, realistic latencies, and fails on purpose: the request's model names the behaviour, optionally
//! followed by `#` and a tag that makes each sample a distinct provider to the health table (and seeds
//! the slow-tailed behaviour). Used by the `provider_fallbacks` benchmark.
//!
//! | model | transcriptions | chat completions | speech |
//! |---|---|---|---|
//! | `good` | the text after 200 ms | the answer's first words after 300 ms | 2 s of audio after 150 ms |
//! | `fail500` | 500 | 500 | 500 |
//! | `ratelimited` | — | 429 with `Retry-After: 30` | — |
//! | `stall` | accepted, never answered | accepted, never answered | accepted, never answered |
//! | `stall_after_headers` | — | headers, then nothing | — |
//! | `slow` | — | the first token after 8 s | — |
//! | `cut` | — | three words after 300 ms, then the stream ends | 0.5 s of audio, then a reset |
//! | `tail`, `tail2` | — | 250–450 ms, 3 s for one tag in ten (a slow tail; the two draw apart) | — |

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The text the recognizer hears.
pub const HEARD: &str = "When does the museum open?";
/// The answer's pieces, as the language model streams them (its first sentence ends with the second).
pub const ANSWER: [&str; 4] = ["The museum", " opens at ten.", " Tickets are", " five euros."];
/// What `cut` streams before the stream ends.
pub const CUT_AFTER: &str = "The museum";
/// Latencies of the healthy server.
pub const STT_LATENCY: Duration = Duration::from_millis(200);
pub const FIRST_TOKEN_LATENCY: Duration = Duration::from_millis(300);
pub const FIRST_AUDIO_LATENCY: Duration = Duration::from_millis(150);
/// The slow tail: one request in ten of `tail`/`tail2` takes this long to its first token.
pub const TAIL_LATENCY: Duration = Duration::from_secs(3);

/// Requests `tail2` received (the hedges a chain sent), since the process started.
pub static TAIL2_REQUESTS: AtomicUsize = AtomicUsize::new(0);

/// Serves the fake on a loopback port; its base URL (`http://127.0.0.1:PORT/v1`).
pub async fn serve() -> String {
    let app = Router::new()
        .route("/v1/audio/transcriptions", post(transcriptions))
        .route("/v1/chat/completions", post(completions))
        .route("/v1/audio/speech", post(speech));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let base = format!("http://{}/v1", listener.local_addr().expect("its address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// The behaviour (before `#`) and the tag (after it) of a model name.
fn scenario(model: &str) -> (&str, &str) {
    model.split_once('#').unwrap_or((model, ""))
}

/// A response that never comes.
async fn never() -> Response {
    std::future::pending::<()>().await;
    unreachable!()
}

fn status(code: u16, body: &'static str) -> Response {
    (axum::http::StatusCode::from_u16(code).expect("a status"), body).into_response()
}

async fn transcriptions(mut form: axum::extract::Multipart) -> Response {
    let mut model = String::new();
    while let Ok(Some(field)) = form.next_field().await {
        if field.name() == Some("model") {
            model = field.text().await.unwrap_or_default();
        }
    }
    match scenario(&model).0 {
        "fail500" => status(500, "recognizer down"),
        "stall" => never().await,
        _ => {
            tokio::time::sleep(STT_LATENCY).await;
            axum::Json(json!({ "text": HEARD })).into_response()
        }
    }
}

fn chunk(text: &str) -> String {
    let body = json!({ "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": { "content": text }, "finish_reason": null }] });
    format!("data: {body}\n\n")
}

/// An SSE body: each of `parts` after its delay, then `[DONE]` when `finish` (else the stream just ends).
fn sse(parts: Vec<(Duration, String)>, finish: bool) -> Response {
    let stream = futures_util::stream::iter(parts)
        .then(|(delay, part)| async move {
            tokio::time::sleep(delay).await;
            Ok::<_, std::io::Error>(part)
        })
        .chain(futures_util::stream::iter(finish.then(|| Ok("data: [DONE]\n\n".to_string()))));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).expect("a response")
}

/// The answer, its first piece after `first`.
fn answer(first: Duration) -> Response {
    let parts = ANSWER
        .iter()
        .enumerate()
        .map(|(i, piece)| (if i == 0 { first } else { Duration::from_millis(20) }, chunk(piece)));
    sse(parts.collect(), true)
}

/// A deterministic draw in [0, 1) from a tag and a salt (splitmix64).
fn draw(tag: &str, salt: u64) -> f64 {
    let mut x =
        tag.bytes().fold(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15), |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01B3));
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// First-token latency of the slow-tailed servers for `tag` (`salt` tells the two apart).
pub fn tail_latency(tag: &str, salt: u64) -> Duration {
    if draw(tag, salt) < 0.1 { TAIL_LATENCY } else { Duration::from_millis(250 + (draw(tag, salt + 7) * 200.0) as u64) }
}

async fn completions(body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let (behaviour, tag) = scenario(&model);
    match behaviour {
        "fail500" => status(500, "upstream exploded"),
        "ratelimited" => Response::builder()
            .status(429)
            .header("retry-after", "30")
            .body(Body::from(r#"{"error":{"message":"Rate limit reached"}}"#))
            .expect("a response"),
        "stall" => never().await,
        "stall_after_headers" => {
            let stream = futures_util::stream::pending::<Result<String, std::io::Error>>();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .expect("a response")
        }
        "slow" => answer(Duration::from_secs(8)),
        "cut" => sse(vec![(FIRST_TOKEN_LATENCY, chunk(CUT_AFTER))], false),
        "tail" => answer(tail_latency(tag, 1)),
        "tail2" => {
            TAIL2_REQUESTS.fetch_add(1, Ordering::Relaxed);
            answer(tail_latency(tag, 2))
        }
        _ => answer(FIRST_TOKEN_LATENCY),
    }
}

/// `seconds` of a tone as 16-bit PCM at 24 kHz (OpenAI's `pcm`).
fn pcm(seconds: f64) -> Vec<u8> {
    (0..(24_000.0 * seconds) as usize)
        .flat_map(|i| (((i as f32 * 0.05).sin() * 8_000.0) as i16).to_le_bytes())
        .collect()
}

async fn speech(body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    let model = body["model"].as_str().unwrap_or_default().to_string();
    match scenario(&model).0 {
        "fail500" => status(500, "voice down"),
        "stall" => never().await,
        "cut" => {
            tokio::time::sleep(FIRST_AUDIO_LATENCY).await;
            let parts = futures_util::stream::iter([Ok::<_, std::io::Error>(pcm(0.5))]).chain(
                futures_util::stream::once(async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Err(std::io::Error::other("reset"))
                }),
            );
            Response::builder().header("content-type", "audio/pcm").body(Body::from_stream(parts)).expect("a response")
        }
        _ => {
            tokio::time::sleep(FIRST_AUDIO_LATENCY).await;
            Response::builder().header("content-type", "audio/pcm").body(Body::from(pcm(2.0))).expect("a response")
        }
    }
}
