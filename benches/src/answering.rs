//! An agent that always gives the same answer, for the benchmarks of hearing and turn-taking: its language
//! model a local OpenAI-compatible server on loopback (the real wire protocol, streamed), its speech-to-text
//! the local one, its voice espeak-ng.

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use confab_engine::responder::Responder;
use serde_json::json;

fn answer_stream(answer: &'static str) -> Response {
    let parts = [
        format!("data: {}\n\n", json!({ "choices": [{ "index": 0, "delta": { "content": answer } }] })),
        "data: [DONE]\n\n".to_string(),
    ];
    let stream = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

/// Serves `answer` to every chat completion, on loopback (spawned on the current Tokio runtime); its base URL.
pub async fn serve_answer(answer: &'static str) -> String {
    let app = Router::new().route("/v1/chat/completions", post(move || async move { answer_stream(answer) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Hears with the local speech-to-text, answers with the server at `base`, speaks with espeak-ng.
pub fn responder(base: &str) -> Responder {
    let providers = confab_engine::providers::env::ProviderEnv::default().with("CONFAB_LLM_BASE_URL", base);
    let pipeline: confab_engine::agent_spec::PipelineConfig = serde_json::from_value(json!({
        "llm": { "provider": "custom", "model": "m" },
        "stt": { "provider": "local" },
        "tts": { "provider": "local", "model_id": "espeak-ng" }
    }))
    .unwrap();
    Responder::from_config(&pipeline, "Be helpful.".into(), &confab_models::default_models_dir(), &providers).unwrap()
}
