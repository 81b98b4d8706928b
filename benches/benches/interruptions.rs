//! Speech over a talking agent on the live runtime (issue 54's benchmark), at the wall clock's pace: ROUNDS
//! times, 300 ms into the agent's long answer the user says "yeah, right" (a backchannel: the agent must
//! talk on), then "wait, tell me more" (it must stop, and answer). Reported: how long after the start of
//! the interrupting speech the agent stopped (p50/p95; the media clock runs with the wall clock here, and
//! the speech is transcribed by Moonshine as it happens), how many backchannels it talked through, and the
//! process's CPU per call-second. The user is
//! espeak-ng; the language model a local OpenAI-compatible server (always the same 56-word answer); the
//! voice espeak-ng.
//!
//! Command: `cargo bench -p confab-benches --bench interruptions` (environment: `CONFAB_BENCH_ROUNDS`,
//! default 20). Under `cargo test` it runs one round.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use confab_benches::answering::{responder, serve_answer};
use confab_benches::{cpu_seconds, espeak};
use confab_engine::conversation::ConversationConfig;
use confab_engine::core::endpoint::EndpointConfig;
use confab_engine::runtime::{CallRuntime, Runtime, RuntimeConfig, RuntimeCounters};
use confab_engine::time::MediaTime;
use confab_engine::{ConversationEvent, EventKind};

const ANSWER: &str = "Vienna is the capital of Austria and lies on the river Danube in the east of the country. \
    It was the seat of the Habsburg emperors for more than six centuries. Today it is known for its coffee \
    houses, its music and its many parks and palaces. Many visitors come for the opera, the museums and the old town.";

/// What one call came to.
struct Outcome {
    /// From the start of each interrupting speech to `agent.interrupted`.
    latencies: Vec<Duration>,
    backchannels_ignored: u64,
    /// Each speech over the agent: its reason and words.
    decisions: Vec<String>,
    call_seconds: f64,
    cpu_seconds: f64,
}

fn call(io: &tokio::runtime::Runtime, base: &str, rounds: usize) -> Outcome {
    let mut config = RuntimeConfig::new(confab_models::default_models_dir(), 2);
    config.io = Some(io.handle().clone());
    let mut runtime = Runtime::start(config).unwrap();
    let conversation = ConversationConfig {
        endpoint: EndpointConfig { min_delay: MediaTime::from_millis(500), max_delay: MediaTime::from_millis(800) },
        ..ConversationConfig::default()
    };
    let mut session = runtime.open_session(conversation, Some(responder(base))).unwrap();
    let (backchannel, interruption) = (espeak("yeah, right", 160), espeak("Wait, tell me more.", 160));
    let silence = |ms: usize| vec![0.0f32; ms * 16];
    let mut script: VecDeque<f32> = silence(500).into_iter().chain(espeak("Tell me about Vienna.", 160)).collect();
    let (mut answers, mut events) = (0, Vec::<ConversationEvent>::new());
    let (started, cpu) = (Instant::now(), cpu_seconds());
    let deadline = started + Duration::from_secs(30 * rounds as u64 + 30);
    for frame in 0u64.. {
        for _ in 0..320 {
            let _ = session.input.push(script.pop_front().unwrap_or(0.0));
        }
        while session.output.pop().is_ok() {}
        for event in session.events.try_iter() {
            if event.kind.name() == "agent.started_speaking" {
                answers += 1;
                if answers <= rounds {
                    script = [silence(300), backchannel.clone(), silence(1_000), interruption.clone()]
                        .into_iter()
                        .flatten()
                        .collect();
                }
            }
            // Once the last interruption is answered, the call is over.
            let done = event.kind.name() == "agent.started_speaking" && answers > rounds;
            events.push(event);
            if done {
                runtime.close_session(session.id);
            }
        }
        if events.last().is_some_and(|e| e.kind.name() == "call_ended") || Instant::now() > deadline {
            break;
        }
        let due = started + Duration::from_millis(20 * (frame + 1));
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    let call_seconds = started.elapsed().as_secs_f64();
    // Each interruption: the user speech that opened the turn it ends, then `agent.interrupted`.
    let decisions: Vec<String> = session
        .turn_metrics
        .try_iter()
        .flat_map(|turn| turn.overlaps.into_iter().map(|o| format!("{} {:?}", o.reason, o.words)))
        .collect();
    let mut latencies = Vec::new();
    let mut speech_started = None;
    for event in &events {
        match event.kind {
            EventKind::UserStartedSpeaking => speech_started = Some(event.media_time),
            EventKind::AgentInterrupted => latencies.extend(speech_started.map(|s| event.media_time - s)),
            _ => {}
        }
    }
    Outcome {
        latencies,
        backchannels_ignored: RuntimeCounters::get(&runtime.counters.backchannels_ignored),
        decisions,
        call_seconds,
        cpu_seconds: cpu_seconds() - cpu,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let rounds =
        if bench { std::env::var("CONFAB_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20) } else { 1 };
    let io = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let base = io.block_on(serve_answer(ANSWER));
    let mut outcome = call(&io, &base, rounds);
    outcome.latencies.sort();
    println!(
        "{rounds} rounds: {} interruptions, backchannels talked through {}/{rounds}; the agent stopped {:.0} ms \
         p50, {:.0} ms p95 after the start of the speech that interrupted it; CPU {:.3} s per call-second",
        outcome.latencies.len(),
        outcome.backchannels_ignored,
        percentile(&outcome.latencies, 0.5),
        percentile(&outcome.latencies, 0.95),
        outcome.cpu_seconds / outcome.call_seconds,
    );
    println!("each speech over the agent, its reason and last transcript: {}", outcome.decisions.join("; "));
}
