//! What a failing provider costs a call (issue 55's benchmark). For each fault of one remote stage: the
//! silence before the agent's first audio — from the end of the user's speech through speech-to-text,
//! the language model's first sentence and the voice's first audio — with fallbacks (a second endpoint
//! of the same kind) and without, p50/p95 and what it adds to a turn with no fault; the longest gap
//! inside the first sentence's audio for breaks mid-stream; what the next turns pay while the incident
//! lasts (the health table skips the failed provider); a chain ending in the local model. Then hedging:
//! the first token's p50/p95/p99 against a slow-tailed server (one request in ten takes 3 s), with and
//! without `hedge_after`. Every stage is built from an agent's `config` by `providers::select` (named
//! endpoints, the real adapters); the providers are `confab_benches::fake_providers`, a loopback server
//! speaking the OpenAI-compatible protocols with fixed latencies (recognizer 200 ms, first token 300 ms,
//! first audio 150 ms), so the figures are the chains' own cost, not a network's.
//!
//! Command: `cargo bench -p confab-benches --bench provider_fallbacks` (environment: `CONFAB_BENCH_ROUNDS`,
//! samples per row, default 40; the hedging rows take five times as many). Under `cargo test` it runs
//! each fault once with fallbacks and four hedged requests, concurrently.

use std::time::{Duration, Instant};

use confab_benches::fake_providers::{self, TAIL2_REQUESTS};
use confab_benches::percentile;
use confab_engine::agent_spec::PipelineConfig;
use confab_engine::providers::env::{NamedEndpoint, ProviderEnv};
use confab_engine::providers::llm::{ChatMessage, ChatRequest, LanguageModel, LlmEvent};
use confab_engine::providers::select::{self, Recognizer};
use confab_engine::providers::tts::{SpeechSynthesizer, TtsEvent};
use futures_util::future::join_all;
use serde_json::{Value, json};

/// The faults: stage, what happens, and the primary's behaviour (`fake_providers`).
const FAULTS: &[(&str, &str, &str)] = &[
    ("stt", "500", "fail500"),
    ("stt", "accepted, never answered", "stall"),
    ("llm", "500", "fail500"),
    ("llm", "429, Retry-After 30", "ratelimited"),
    ("llm", "accepted, no headers", "stall"),
    ("llm", "headers, then nothing", "stall_after_headers"),
    ("llm", "first token after 8 s", "slow"),
    ("llm", "stream ends after 2 words", "cut"),
    ("tts", "500", "fail500"),
    ("tts", "accepted, never answered", "stall"),
    ("tts", "reset after 0.5 s of audio", "cut"),
];

/// One turn's three stages.
struct Stages {
    recognizer: Recognizer,
    llm: Box<dyn LanguageModel>,
    model: String,
    voice: Box<dyn SpeechSynthesizer>,
}

/// How one turn went.
#[derive(Debug, Clone)]
enum Turn {
    /// The first audio came this long after the user stopped; the first sentence's audio had this
    /// longest gap between two pieces.
    Answered { first_audio: Duration, longest_gap: Duration },
    /// No answer (or its first sentence cut off): the error, this long after the user stopped.
    Failed { after: Duration, error: String },
}

fn env(base: &str) -> ProviderEnv {
    let mut env = ProviderEnv::default();
    for stage in ["stt", "llm", "tts"] {
        for name in ["primary", "backup"] {
            env = env.with_endpoint(stage, name, NamedEndpoint { url: base.to_string(), api_key: Some("k".into()) });
        }
    }
    env
}

/// A stage's config: the primary on endpoint `primary` as `model`; with `fallback`, a second provider
/// on endpoint `backup`. `field` is where the model goes (`model`, or `model_id` for the voice).
fn stage(field: &str, model: &str, fallback: Option<Value>) -> Value {
    let mut config = json!({ "provider": "custom", "endpoint": "primary" });
    config[field] = json!(model);
    if let Some(fallback) = fallback {
        config["fallbacks"] = json!([fallback]);
    }
    config
}

fn backup(field: &str, model: &str) -> Value {
    let mut config = json!({ "provider": "custom", "endpoint": "backup" });
    config[field] = json!(model);
    config
}

/// The stages of a turn whose `faulty` stage's primary behaves as `behaviour` and the others are
/// healthy; `tag` makes its providers its own to the health table; `llm_fallback` replaces the
/// language model's fallback (the local model).
fn stages(
    env: &ProviderEnv,
    faulty: &str,
    behaviour: &str,
    tag: &str,
    fallbacks: bool,
    llm_fallback: Option<Value>,
) -> Stages {
    let model = |name: &str| if name == faulty { format!("{behaviour}#{tag}") } else { format!("good#{tag}") };
    let fallback = |field: &str| fallbacks.then(|| backup(field, &format!("good#{tag}")));
    let config: PipelineConfig = serde_json::from_value(json!({
        "stt": stage("model", &model("stt"), fallback("model")),
        "llm": stage("model", &model("llm"), llm_fallback.or_else(|| fallback("model"))),
        "tts": stage("model_id", &model("tts"), fallback("model_id")),
    }))
    .expect("a pipeline config");
    let models = confab_models::default_models_dir();
    let (llm, model) = select::language_model(&config.llm, &models, env).expect("a language model");
    Stages {
        recognizer: select::recognizer(&config.stt, &models, env).expect("a recognizer").expect("one"),
        llm,
        model,
        voice: select::synthesizer(&config.tts, &models, env).expect("a voice"),
    }
}

fn request(model: &str, heard: &str) -> ChatRequest {
    ChatRequest {
        model: model.to_string(),
        messages: vec![ChatMessage::new("system", "Be brief."), ChatMessage::new("user", heard)],
        tools: Vec::new(),
        max_tokens: 64,
        temperature: 0.0,
        stop: Vec::new(),
    }
}

/// One turn from the end of the user's speech: transcribed, its answer's first sentence, and that
/// sentence's audio to its end.
async fn turn(stages: &Stages) -> Turn {
    let started = Instant::now();
    let failed = |error: String| Turn::Failed { after: started.elapsed(), error };
    let heard = match stages.recognizer.transcribe(&vec![0.01f32; 16_000]).await {
        Ok(text) => text,
        Err(error) => return failed(format!("speech-to-text: {error}")),
    };
    let mut stream = stages.llm.stream(request(&stages.model, &heard));
    let mut sentence = String::new();
    while let Some(event) = stream.recv().await {
        match event {
            Ok(LlmEvent::Text(text)) => {
                sentence.push_str(&text);
                if sentence.trim_end().ends_with(['.', '!', '?']) {
                    break;
                }
            }
            Ok(LlmEvent::Done { .. }) => break,
            Ok(_) => {}
            Err(error) => return failed(format!("language model: {error}")),
        }
    }
    if !sentence.trim_end().ends_with(['.', '!', '?']) {
        return failed(format!("language model: the answer stopped at {sentence:?}"));
    }
    let mut audio = stages.voice.synthesize(&sentence);
    let (mut first_audio, mut last_piece, mut longest_gap) = (None, None::<Instant>, Duration::ZERO);
    while let Some(event) = audio.recv().await {
        match event {
            Ok(TtsEvent::Audio(_)) => {
                let now = Instant::now();
                first_audio.get_or_insert(now - started);
                if let Some(last) = last_piece {
                    longest_gap = longest_gap.max(now - last);
                }
                last_piece = Some(now);
            }
            Ok(TtsEvent::Done(_)) => break,
            Err(error) => return failed(format!("voice: {error}")),
        }
    }
    match first_audio {
        Some(first_audio) => Turn::Answered { first_audio, longest_gap },
        None => failed("voice: no audio".into()),
    }
}

/// `rounds` turns at once, each with providers of its own.
async fn sample(env: &ProviderEnv, fault: (&str, &str), fallbacks: bool, rounds: usize, row: &str) -> Vec<Turn> {
    let all: Vec<Stages> = (0..rounds)
        .map(|i| stages(env, fault.0, fault.1, &format!("{row}-{fallbacks}-{i}"), fallbacks, None))
        .collect();
    join_all(all.iter().map(turn)).await
}

/// The answered turns' first audio and longest gap, each sorted.
fn answered(turns: &[Turn]) -> (Vec<Duration>, Vec<Duration>) {
    let (mut first, mut gaps): (Vec<Duration>, Vec<Duration>) = turns
        .iter()
        .filter_map(|t| match t {
            Turn::Answered { first_audio, longest_gap } => Some((*first_audio, *longest_gap)),
            Turn::Failed { .. } => None,
        })
        .unzip();
    first.sort();
    gaps.sort();
    (first, gaps)
}

/// "p50 / p95" of the answered turns' first audio (and what it adds to `baseline`), or why none was.
fn describe(turns: &[Turn], baseline: Option<Duration>) -> String {
    let (first, _) = answered(turns);
    let failures: Vec<(Duration, &str)> = turns
        .iter()
        .filter_map(|t| match t {
            Turn::Failed { after, error } => Some((*after, error.as_str())),
            Turn::Answered { .. } => None,
        })
        .collect();
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let mut out = String::new();
    if !first.is_empty() {
        let (p50, p95) = (percentile(&first, 0.5), percentile(&first, 0.95));
        out = format!("{} / {}", secs(p50), secs(p95));
        if let Some(baseline) = baseline {
            out += &format!(" (+{:.2} s)", p50.saturating_sub(baseline).as_secs_f64());
        }
    }
    if let Some((after, error)) = failures.first() {
        let error: String = error.chars().take(90).collect();
        out += &format!(
            "{}no answer in {}/{}: error after {} ({error})",
            if out.is_empty() { "" } else { "; " },
            failures.len(),
            turns.len(),
            secs(*after)
        );
    }
    out
}

/// The median of the answered turns' first audio, and of their longest gap.
fn medians(turns: &[Turn]) -> (Option<Duration>, Option<Duration>) {
    let (first, gaps) = answered(turns);
    let median = |sorted: &[Duration]| (!sorted.is_empty()).then(|| percentile(sorted, 0.5));
    (median(&first), median(&gaps))
}

/// Time to the first token of `rounds` requests to the slow-tailed server, `at_once` at a time, with
/// `hedge_after` or without; sorted.
async fn first_tokens(env: &ProviderEnv, rounds: usize, at_once: usize, hedge_after: Option<f64>) -> Vec<Duration> {
    let mut all = Vec::with_capacity(rounds);
    let models = confab_models::default_models_dir();
    for batch in (0..rounds).collect::<Vec<_>>().chunks(at_once) {
        let chains: Vec<(Box<dyn LanguageModel>, String)> = batch
            .iter()
            .map(|i| {
                let llm = json!({
                    "provider": "custom", "endpoint": "primary", "model": format!("tail#{i}"),
                    "first_response_timeout": 10.0, "hedge_after": hedge_after,
                    "fallbacks": [{ "provider": "custom", "endpoint": "backup", "model": format!("tail2#{i}"), "first_response_timeout": 10.0 }],
                });
                let llm = serde_json::from_value(llm).expect("an llm config");
                select::language_model(&llm, &models, env).expect("a language model")
            })
            .collect();
        let firsts = join_all(chains.iter().map(|(llm, model)| async move {
            let started = Instant::now();
            let mut stream = llm.stream(request(model, fake_providers::HEARD));
            while let Some(event) = stream.recv().await {
                if matches!(event, Ok(LlmEvent::Text(_))) {
                    return started.elapsed();
                }
            }
            panic!("the slow-tailed server always answers")
        }))
        .await;
        all.extend(firsts);
    }
    all.sort();
    all
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let rounds =
        if bench { std::env::var("CONFAB_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(40) } else { 1 };
    let io = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    io.block_on(async {
        let base = fake_providers::serve().await;
        let env = env(&base);
        let baseline = sample(&env, ("none", "good"), true, rounds, "baseline").await;
        let baseline_p50 = medians(&baseline).0;
        println!("provider_fallbacks: {rounds} turns per row, each with providers of its own (the health table starts clean)");
        println!("no fault: first audio {}", describe(&baseline, None));
        println!("| stage | fault | first audio p50 / p95, with a fallback | longest gap in the sentence | without |");
        println!("|---|---|---|---|---|");
        let rows = FAULTS.iter().enumerate().map(|(row, &(stage, fault, behaviour))| {
            let env = &env;
            async move {
                let with = sample(env, (stage, behaviour), true, rounds, &format!("{row}")).await;
                let without = if bench { describe(&sample(env, (stage, behaviour), false, rounds, &format!("{row}")).await, baseline_p50) } else { "(not run under cargo test)".into() };
                let gap = medians(&with).1.map(|g| format!("{:.2} s", g.as_secs_f64())).unwrap_or_default();
                format!("| {stage} | {fault} | {} | {gap} | {without} |", describe(&with, baseline_p50))
            }
        });
        // One row at a time when measuring (the figures of one fault alone); all at once under `cargo test`.
        let lines = if bench {
            let mut lines = Vec::new();
            for row in rows {
                lines.push(row.await);
            }
            lines
        } else {
            join_all(rows).await
        };
        for line in lines {
            println!("{line}");
        }

        // While an incident lasts: the same failing provider for turn after turn.
        let turns = if bench { 6 } else { 2 };
        let mut during = Vec::new();
        for _ in 0..turns {
            during.push(turn(&stages(&env, "llm", "stall", "incident", true, None)).await);
        }
        println!(
            "during an incident (llm accepted, no headers; the same provider turn after turn): turn 1 {}; turns 2–{turns} {}",
            describe(&during[..1], baseline_p50),
            describe(&during[1..], baseline_p50)
        );

        if bench {
            // A chain ending in the local model (Qwen2.5-Coder-0.5B on this CPU), one turn at a time.
            let mut local = Vec::new();
            for i in 0..5 {
                let fallback = Some(json!({ "provider": "local" }));
                local.push(turn(&stages(&env, "llm", "stall", &format!("local-{i}"), true, fallback)).await);
            }
            println!("llm accepted, no headers, falling back to the local model: first audio {}", describe(&local, baseline_p50));
        }

        let (requests, at_once) = if bench { (rounds * 5, 50) } else { (4, 4) };
        let plain = first_tokens(&env, requests, at_once, None).await;
        let hedges_before = TAIL2_REQUESTS.load(std::sync::atomic::Ordering::Relaxed);
        let hedged = first_tokens(&env, requests, at_once, Some(0.6)).await;
        let hedges = TAIL2_REQUESTS.load(std::sync::atomic::Ordering::Relaxed) - hedges_before;
        let ms = |sorted: &[Duration], p: f64| percentile(sorted, p).as_secs_f64() * 1e3;
        for (label, sorted) in [("without hedging", &plain), ("hedge_after 0.6 s", &hedged)] {
            println!(
                "first token, slow-tailed server, {label}: p50 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms ({requests} requests)",
                ms(sorted, 0.5),
                ms(sorted, 0.95),
                ms(sorted, 0.99)
            );
        }
        println!("hedges sent: {hedges} of {requests} requests");
    });
}
