//! Speech over a talking agent, on the stepped runtime (media time, exact): what listeners say to show
//! they are listening ("yeah, right", "okay, okay", "I see") leaves the agent talking, with no user turn
//! and no word lost; "wait, stop" interrupts it when its first transcript is heard; thirty interruptions
//! (each after a backchannel) in one call leave it answering. The user is espeak-ng, heard by the local
//! models (Silero, Smart Turn, Moonshine); the language model is a local OpenAI-compatible server (its
//! real wire protocol) that always gives the same long answer; the voice is espeak-ng. (espeak-ng's
//! "mm hmm" is no hum: it says letters, which Moonshine hears as "M. M. V." now and then.)

mod common;

use std::collections::VecDeque;
use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use common::speak;
use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::responder::Responder;
use confab_engine::runtime::{CallRuntime, RuntimeConfig, SessionHandle, SteppedRuntime};
use confab_engine::time::MediaTime;
use confab_engine::turn_metrics::TurnMetrics;
use confab_engine::{ConversationEvent, EventKind};
use serde_json::json;

/// The agent's answer to every question: 56 words, about 19 s of speech.
const LONG_ANSWER: [&str; 4] = [
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

/// The agent's default turn-taking (backchannels ignored), its turns committed 500 ms after speech whatever
/// the turn model says (its verdicts near its threshold differ between CPUs).
fn turn_taking() -> ConversationConfig {
    ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(500) },
        ..ConversationConfig::default()
    }
}

fn silence(ms: usize) -> Vec<f32> {
    vec![0.0; ms * 16]
}

/// A call on the stepped runtime: the user's audio is taken from `script`, which `react` may replace on
/// each event (it is told how many times the agent has started speaking). Runs until `call_ended` or
/// `max_steps`; the events, the turn metrics, and the agent's audio.
struct Call {
    runtime: SteppedRuntime,
    session: SessionHandle,
    _io: tokio::runtime::Runtime,
}

struct Heard {
    events: Vec<ConversationEvent>,
    turns: Vec<TurnMetrics>,
    agent_audio: Vec<f32>,
}

impl Call {
    fn start() -> Call {
        let io = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let base = io.block_on(serve_llm());
        let models = confab_models::default_models_dir();
        let mut runtime = SteppedRuntime::new(&RuntimeConfig::new(models.clone(), 2)).unwrap();
        let session = runtime.open_session(turn_taking(), Some(responder(&base, &models))).unwrap();
        Call { runtime, session, _io: io }
    }

    fn run(
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

fn count(events: &[ConversationEvent], name: &str) -> usize {
    events.iter().filter(|e| e.kind.name() == name).count()
}

fn said(events: &[ConversationEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AgentStoppedSpeaking { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn the_whole_answer() -> String {
    LONG_ANSWER.iter().map(|s| s.trim()).collect::<Vec<_>>().join(" ")
}

/// The question, then — 1.5 s into the answer, and 2 s apart — "yeah, right", "okay, okay" and "I see":
/// the agent says its whole answer, the question is the only user turn, and the answer's turn metrics
/// name three backchannels.
#[test]
fn backchannels_over_a_long_answer_leave_the_agent_talking() {
    let mut call = Call::start();
    let question: VecDeque<f32> = silence(500).into_iter().chain(speak("Tell me about Vienna.")).collect();
    let heard = call.run(question, 3_000, |event, script| {
        match event.kind.name() {
            "agent.started_speaking" => {
                *script = [silence(1_500), speak("yeah, right"), silence(2_000), speak("okay, okay")]
                    .into_iter()
                    .chain([silence(2_000), speak("I see.")])
                    .flatten()
                    .collect();
            }
            "agent.stopped_speaking" => return false,
            _ => {}
        }
        true
    });
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    assert_eq!(count(&heard.events, "agent.interrupted"), 0, "{timeline:?} {:?}", heard.turns);
    assert_eq!(count(&heard.events, "user.started_speaking"), 1, "{timeline:?}");
    assert_eq!(count(&heard.events, "utterance_committed"), 1, "{timeline:?}");
    assert_eq!(said(&heard.events), [the_whole_answer()]);
    let overlaps: Vec<(&str, bool)> =
        heard.turns.iter().flat_map(|t| t.overlaps.iter().map(|o| (o.reason, o.interrupted))).collect();
    assert_eq!(overlaps, [("backchannel", false); 3], "{:?}", heard.turns);
}

/// "Wait, stop." 1 s into the answer: the agent is interrupted when the first transcript of it (500 ms
/// in) is heard, the answer is cut to what was played, and the words are the user's next turn.
#[test]
fn a_real_interruption_still_interrupts() {
    let mut call = Call::start();
    let question: VecDeque<f32> = silence(500).into_iter().chain(speak("Tell me about Vienna.")).collect();
    let mut interrupted = false;
    let heard = call.run(question, 3_000, |event, script| {
        match event.kind.name() {
            "agent.started_speaking" if !interrupted => {
                interrupted = true;
                *script = silence(1_000).into_iter().chain(speak("Wait, stop. What time is it?")).collect();
            }
            "utterance_committed" if interrupted => return false,
            _ => {}
        }
        true
    });
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    let at = |name: &str, nth: usize| {
        heard.events.iter().filter(|e| e.kind.name() == name).nth(nth).map(|e| e.media_time.as_millis()).unwrap()
    };
    let started = at("user.started_speaking", 1);
    assert!(
        (500..=560).contains(&(at("agent.interrupted", 0) - started)),
        "interrupted when the first transcript was heard: {timeline:?}"
    );
    let cut = &said(&heard.events)[0];
    assert!(the_whole_answer().starts_with(cut.as_str()) && cut.len() < 40, "{cut}");
    let overlaps: Vec<_> = heard.turns.iter().flat_map(|t| t.overlaps.iter()).collect();
    assert_eq!(overlaps.len(), 1, "{:?}", heard.turns);
    assert_eq!((overlaps[0].reason, overlaps[0].interrupted), ("words", true));
    let committed = heard.events.iter().rev().find_map(|e| match &e.kind {
        EventKind::UtteranceCommitted { text } => Some(text.to_lowercase()),
        _ => None,
    });
    assert!(committed.as_deref().is_some_and(|text| text.contains("stop")), "{committed:?}");
}

/// Thirty times in one call: 300 ms into each answer "yeah, right", then "wait, tell me more": the agent
/// talks on through the first and is interrupted by the second, which it answers. After the thirtieth,
/// the answer plays to its end: every interruption was one, every turn was answered in order, and the
/// voice still speaks.
#[test]
fn thirty_interruptions_leave_the_call_healthy() {
    const TIMES: usize = 30;
    let mut call = Call::start();
    let question: VecDeque<f32> = silence(500).into_iter().chain(speak("Tell me about Vienna.")).collect();
    let (backchannel, interruption) = (speak("yeah, right"), speak("Wait, tell me more."));
    let mut answers = 0;
    let heard = call.run(question, 60_000, |event, script| {
        match event.kind.name() {
            "agent.started_speaking" => {
                answers += 1;
                if answers <= TIMES {
                    *script = [silence(300), backchannel.clone(), silence(1_000), interruption.clone()]
                        .into_iter()
                        .flatten()
                        .collect();
                }
            }
            "agent.stopped_speaking" if answers > TIMES => return false,
            _ => {}
        }
        true
    });
    let timeline: Vec<(u128, &str)> = heard.events.iter().map(|e| (e.media_time.as_millis(), e.kind.name())).collect();
    assert_eq!(count(&heard.events, "agent.interrupted"), TIMES, "{timeline:?}");
    assert_eq!(count(&heard.events, "utterance_committed"), TIMES + 1);
    assert_eq!(count(&heard.events, "agent.started_speaking"), TIMES + 1);
    assert_eq!(said(&heard.events).last(), Some(&the_whole_answer()));
    // Each answer's stages come out once, in turn order; each names its backchannel and its interruption.
    let turns: Vec<u64> = heard.turns.iter().map(|t| t.turn.0).collect();
    assert_eq!(turns, (1..=TIMES as u64 + 1).collect::<Vec<_>>());
    for turn in &heard.turns[..TIMES] {
        let reasons: Vec<&str> = turn.overlaps.iter().map(|o| o.reason).collect();
        assert_eq!(reasons, ["backchannel", "words"], "turn {}", turn.turn.0);
    }
    // The transcript is in order: each answer follows its question, and stops before the next is asked.
    let transcript: Vec<&str> = heard
        .events
        .iter()
        .map(|e| e.kind.name())
        .filter(|name| ["utterance_committed", "agent.started_speaking", "agent.stopped_speaking"].contains(name))
        .collect();
    let one_turn = ["utterance_committed", "agent.started_speaking", "agent.stopped_speaking"];
    assert_eq!(transcript, one_turn.repeat(TIMES + 1), "{timeline:?}");
    // `/metrics` counts them (`confab_backchannels_ignored_total`, `confab_interruptions_total`).
    let counted = |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    let counters = &call.runtime.counters;
    assert_eq!(
        (counted(&counters.backchannels_ignored), counted(&counters.overlaps_interrupted)),
        (TIMES as u64, TIMES as u64)
    );
    // The last answer was heard: its voice is not silence.
    let last_second = &heard.agent_audio[heard.agent_audio.len().saturating_sub(48_000)..];
    assert!(last_second.iter().any(|s| s.abs() > 0.05), "the last answer is heard");
}
