//! A call on the stepped runtime (media time, exact) with the local hearing models, for the engine's
//! tests of speech in a call: the language model is a local OpenAI-compatible server (its real wire
//! protocol) that always gives the same long answer; the voice is espeak-ng.
#![allow(dead_code)] // each test uses its part

use std::collections::VecDeque;
use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use confab_engine::conversation::ConversationConfig;
use confab_engine::responder::Responder;
use confab_engine::runtime::{CallRuntime, RuntimeConfig, SessionHandle, SteppedRuntime};
use confab_engine::turn_metrics::TurnMetrics;
use confab_engine::{ConversationEvent, EventKind};
use serde_json::json;

/// The agent's answer to every question: 56 words, about 19 s of speech.
pub const LONG_ANSWER: [&str; 4] = [
    "Vienna is the capital of Austria and lies on the river Danube in the east of the country. ",
    "It was the seat of the Habsburg emperors for more than six centuries. ",
    "Today it is known for its coffee houses, its music and its many parks and palaces. ",
    "Many visitors come for the opera, the museums and the old town.",
];

async fn chat() -> Response {
    let parts: Vec<String> = LONG_ANSWER
        .iter()
        .map(|piece| format!("data: {}\n\n", json!({ "choices": [{ "index": 0, "delta": { "content": piece } }] })))
        .chain(["data: [DONE]\n\n".to_string()])
        .collect();
    let stream = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

/// The language model on loopback; its base URL.
async fn serve_llm() -> String {
    let app = Router::new().route("/v1/chat/completions", post(chat));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Hears with the local speech-to-text, answers with the server at `base`, speaks with espeak-ng.
fn responder(base: &str, models: &Path) -> Responder {
    let providers = confab_engine::providers::env::ProviderEnv::default().with("CONFAB_LLM_BASE_URL", base);
    let pipeline: confab_engine::agent_spec::PipelineConfig = serde_json::from_value(json!({
        "llm": { "provider": "custom", "model": "m" },
        "stt": { "provider": "local" },
        "tts": { "provider": "local", "model_id": "espeak-ng" }
    }))
    .unwrap();
    Responder::from_config(&pipeline, "Be helpful.".into(), models, &providers).unwrap()
}

pub fn silence(ms: usize) -> Vec<f32> {
    vec![0.0; ms * 16]
}

/// A call on the stepped runtime: the user's audio is taken from `script`, which `react` may replace on
/// each event (it is told how many times the agent has started speaking). Runs until `call_ended` or
/// `max_steps`; the events, the turn metrics, and the agent's audio.
pub struct Call {
    pub runtime: SteppedRuntime,
    pub session: SessionHandle,
    _io: tokio::runtime::Runtime,
}

pub struct Heard {
    pub events: Vec<ConversationEvent>,
    pub turns: Vec<TurnMetrics>,
    pub agent_audio: Vec<f32>,
}

impl Call {
    /// A call with `turn_taking`, the agent answering every question with `LONG_ANSWER`.
    pub fn start(turn_taking: ConversationConfig) -> Call {
        let io = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let base = io.block_on(serve_llm());
        let models = confab_models::default_models_dir();
        let mut runtime = SteppedRuntime::new(&RuntimeConfig::new(models.clone(), 2)).unwrap();
        let session = runtime.open_session(turn_taking, Some(responder(&base, &models))).unwrap();
        Call { runtime, session, _io: io }
    }

    pub fn run(
        &mut self,
        mut script: VecDeque<f32>,
        max_steps: usize,
        mut react: impl FnMut(&ConversationEvent, &mut VecDeque<f32>) -> bool,
    ) -> Heard {
        let mut heard = Heard { events: Vec::new(), turns: Vec::new(), agent_audio: Vec::new() };
        for _ in 0..max_steps {
            for _ in 0..320 {
                self.session.input.push(script.pop_front().unwrap_or(0.0)).unwrap();
            }
            self.runtime.step();
            while let Ok(sample) = self.session.output.pop() {
                heard.agent_audio.push(sample);
            }
            heard.turns.extend(self.session.turn_metrics.try_iter());
            for event in self.session.events.try_iter() {
                if !react(&event, &mut script) {
                    self.runtime.close_session(self.session.id);
                }
                heard.events.push(event);
            }
            if heard.events.last().is_some_and(|e| e.kind.name() == "call_ended") {
                break;
            }
        }
        heard
    }
}

pub fn count(events: &[ConversationEvent], name: &str) -> usize {
    events.iter().filter(|e| e.kind.name() == name).count()
}

pub fn said(events: &[ConversationEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AgentStoppedSpeaking { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

pub fn the_whole_answer() -> String {
    LONG_ANSWER.iter().map(|s| s.trim()).collect::<Vec<_>>().join(" ")
}
