//! Voice to voice on the embedded models: 20 short spoken factual questions (espeak-ng, 160 words per
//! minute), each a whole `confab simulate --realtime` conversation in this process with every provider
//! `local`; each turn's `turn_metrics` line gives the stages. Reports p50/p95 per stage (end of speech →
//! first audio among them: from the question's last audible sample, and from the VAD's end of speech), how
//! often the reply was asked for and voiced before the commit, and the answers,
//! judged by keywords (an answer is right when it contains one of its question's keywords), and the
//! questions heard right (every keyword of the question in the transcript).
//!
//! `cargo bench -p confab-benches --bench voice_to_voice [-- N] [--stt=MODEL] [--llm=MODEL] [--voice=piper]
//! [--remote] [--remote-stt=deepgram] [--remote-tts=elevenlabs|cartesia] [--no-preemptive] [--live]`
//! (the first N questions, all by default; `--stt` a local speech-to-text model, `moonshine-base` by default,
//! or `whisper-tiny.en`; `--llm` a local language model, `qwen2.5-coder-0.5b-instruct` by default, or
//! `smollm2-135m-instruct`; the questions spoken by espeak-ng, or by the Piper voice). The transcripts' word error
//! against the questions is reported too. With `--remote` every provider is `custom`, served by local
//! servers speaking the providers' wire protocols with fixed delays (`remote.rs`), and each stage is also
//! reported less the delay the server put in it: what the engine adds; `--remote-stt=deepgram` and
//! `--remote-tts=elevenlabs|cartesia` (each implies `--remote`) put the WebSocket providers in place of the
//! OpenAI-compatible ones for that kind (`remote_ws.rs`, same delays). `--no-preemptive` turns preemptive
//! generation off (the reply is asked for only at the commit). `--live` asks the questions in one live call
//! to `confab serve` instead (`live.rs`; build it first: `cargo build --release --bin confab`): the stages are
//! the call's stored `turn_metrics`, on the server's media clock (end of speech from the question's last
//! audible sample is not known there).
//! Under `cargo test` (no `--bench`) one question, offline, to check the harness.

#[path = "voice_to_voice/live.rs"]
mod live;
#[path = "voice_to_voice/remote.rs"]
mod remote;
#[path = "voice_to_voice/remote_ws.rs"]
mod remote_ws;

use std::path::Path;

use confab_benches::{espeak, word_errors};
use confab_engine::audio::wav;
use confab_engine::providers::env::ProviderEnv;
use confab_engine::providers::piper_tts::PiperTts;
use confab_engine::simulate::{SimulateOptions, run};
use serde_json::Value;

/// (question, words the transcript must hold, an answer is right when it holds any of these).
const QUESTIONS: &[(&str, &[&str], &[&str])] = &[
    ("What is the capital of France?", &["capital", "france"], &["paris"]),
    ("How many days are in a week?", &["days", "week"], &["seven", "7"]),
    ("What colour is a clear sky?", &["clear", "sky"], &["blue"]),
    ("What is the capital of Japan?", &["capital", "japan"], &["tokyo"]),
    ("How many legs does a spider have?", &["legs", "spider"], &["eight", "8"]),
    ("What is the largest planet in our solar system?", &["largest", "planet"], &["jupiter"]),
    ("What is two plus two?", &["two", "plus"], &["four", "4"]),
    ("What is the capital of Italy?", &["capital", "italy"], &["rome"]),
    ("How many months are in a year?", &["months", "year"], &["twelve", "12"]),
    ("What do bees make?", &["bees", "make"], &["honey"]),
    ("What is the freezing point of water in Celsius?", &["freezing", "water"], &["zero", "0 degrees", "0°", "0 °c"]),
    ("What colour is fresh grass?", &["grass"], &["green"]),
    ("Which animal is called the king of the jungle?", &["king", "jungle"], &["lion"]),
    ("How many hours are in a day?", &["hours", "day"], &["twenty-four", "twenty four", "24"]),
    ("What is the capital of Germany?", &["capital", "germany"], &["berlin"]),
    ("What is the opposite of hot?", &["opposite", "hot"], &["cold"]),
    ("How many sides does a triangle have?", &["sides", "triangle"], &["three", "3"]),
    ("What planet do we live on?", &["planet", "live"], &["earth"]),
    ("What is the capital of Spain?", &["capital", "spain"], &["madrid"]),
    ("What is the chemical symbol for water?", &["symbol", "water"], &["h2o", "h 2 o", "h two o"]),
];

/// Whether `text` holds `word` as a whole word: "0°" is not in "-10°c", "seven" not in "seventeen", "4"
/// not in "4.5" (the edges of `word` that are letters or digits must not run on into the text).
fn holds_word(text: &str, word: &str) -> bool {
    let starts_in_a_word = word.chars().next().is_some_and(char::is_alphanumeric);
    let ends_in_a_word = word.chars().next_back().is_some_and(char::is_alphanumeric);
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + word.len()..].chars();
        let (next, then) = (after.next(), after.next());
        let runs_on_before = starts_in_a_word && before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '.');
        let runs_on_after = ends_in_a_word
            && (next.is_some_and(char::is_alphanumeric)
                || (next == Some('.') && then.is_some_and(|c| c.is_ascii_digit())));
        !runs_on_before && !runs_on_after
    })
}

/// The judge's own check, run with the smoke case too.
fn check_the_judge() {
    assert!(holds_word("the freezing point of water is 0°c.", "0°"));
    assert!(!holds_word("the freezing point of water is -10°c.", "0°"));
    assert!(!holds_word("there are seventeen", "seven"));
    assert!(holds_word("a week is 7 days.", "7"));
    assert!(!holds_word("about 7.5 days", "7"));
    assert!(holds_word("it is h2o.", "h2o"));
}

/// Which remote provider speaks for each kind, with `--remote`: `custom` (the OpenAI-compatible protocols)
/// unless `--remote-stt=deepgram` or `--remote-tts=elevenlabs|cartesia` (the WebSocket ones) says otherwise.
struct RemoteProviders {
    stt: String,
    tts: String,
}

impl RemoteProviders {
    /// From the command line; None without `--remote` (which either of the other two implies).
    fn from_args() -> Option<RemoteProviders> {
        let value = |flag: &str| std::env::args().find_map(|a| a.strip_prefix(flag).map(str::to_string));
        let (stt, tts) = (value("--remote-stt="), value("--remote-tts="));
        if !std::env::args().any(|a| a == "--remote") && stt.is_none() && tts.is_none() {
            return None;
        }
        let stt = stt.unwrap_or_else(|| "custom".into());
        let tts = tts.unwrap_or_else(|| "custom".into());
        assert!(["custom", "deepgram"].contains(&stt.as_str()), "--remote-stt is deepgram (or custom)");
        assert!(["custom", "elevenlabs", "cartesia"].contains(&tts.as_str()), "--remote-tts is elevenlabs or cartesia");
        Some(RemoteProviders { stt, tts })
    }

    /// Provider settings that point the adapters at `servers` (base URLs and keys, as the binary reads
    /// them from its environment in production).
    fn point_at(&self, servers: &remote::ProtocolServers) -> ProviderEnv {
        let settings = [
            ("CONFAB_STT_BASE_URL", servers.base_url.clone()),
            ("CONFAB_LLM_BASE_URL", servers.base_url.clone()),
            ("CONFAB_TTS_BASE_URL", servers.base_url.clone()),
            ("CONFAB_DEEPGRAM_URL", format!("{}/v1/listen", servers.ws_url)),
            ("CONFAB_ELEVENLABS_URL", servers.ws_url.clone()),
            ("CONFAB_CARTESIA_URL", servers.ws_url.clone()),
            ("DEEPGRAM_API_KEY", "bench".into()),
            ("ELEVENLABS_API_KEY", "bench".into()),
            ("CARTESIA_API_KEY", "bench".into()),
        ];
        settings.into_iter().fold(ProviderEnv::default(), |env, (name, value)| env.with(name, value))
    }
}

/// The agent: every provider `local`, the speech-to-text model `stt_model` (empty: the default); or, with
/// `remote`, the language model `custom` and speech as `remote` says.
fn agent(stt_model: &str, remote: Option<&RemoteProviders>) -> String {
    if let Some(remote) = remote {
        return serde_json::json!({
            "agent_name": "Remote",
            "agent_system_prompt": "You are a helpful assistant. Answer in one short sentence.",
            "avatars": [{
                "avatar_key_id": "stock-amara",
                "config": {
                    "llm": { "provider": "custom", "model": "bench" },
                    "stt": { "provider": remote.stt, "model": "bench", "max_endpointing_delay": 1.0 },
                    "tts": { "provider": remote.tts, "model_id": "bench", "voice_id": "bench" }
                }
            }]
        })
        .to_string();
    }
    serde_json::json!({
        "agent_name": "Local",
        "agent_system_prompt": "You are a helpful assistant. Answer in one short sentence.",
        "avatars": [{
            "avatar_key_id": "stock-amara",
            "config": {
                "llm": { "provider": "local" },
                "stt": { "provider": "local", "model": stt_model, "max_endpointing_delay": 1.0 },
                "tts": { "provider": "local" }
            }
        }]
    })
    .to_string()
}

#[derive(Default)]
struct Outcome {
    heard: String,
    answer: String,
    metrics: Option<Value>,
    /// The question's last audible sample, in seconds of the input (its true end of speech); not known on a
    /// live call's media clock.
    speech_end: Option<f64>,
}

/// `question` spoken by the Piper voice, or by espeak-ng (160 words per minute), as 16 kHz mono.
fn spoken(question: &str, piper: Option<&PiperTts>) -> Vec<f32> {
    match piper {
        Some(piper) => piper.render(question).unwrap(),
        None => espeak(question, 160),
    }
}

/// The turns of one live call, one per question in order: what was heard, the answer, the stages.
fn live_outcomes(call: live::LiveCall) -> Vec<Outcome> {
    let mut turns = call.turns.into_iter();
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (role, text) in call.transcript {
        if role == "user" {
            outcomes.push(Outcome { heard: text, answer: String::new(), metrics: turns.next(), speech_end: None });
        } else if let Some(last) = outcomes.last_mut().filter(|_| role == "assistant") {
            last.answer = format!("{} {text}", last.answer).trim().to_string();
        }
    }
    outcomes
}

/// Where speech ends in `audio` (16 kHz): after its last sample louder than -40 dBFS.
fn last_audible(audio: &[f32]) -> f64 {
    audio.iter().rposition(|s| s.abs() > 0.01).map_or(0.0, |i| (i + 1) as f64 / 16_000.0)
}

/// One conversation: the question, then silence while the agent answers.
fn ask(
    dir: &Path,
    index: usize,
    question: &str,
    realtime: bool,
    piper: Option<&PiperTts>,
    providers: &ProviderEnv,
) -> Outcome {
    let mut audio = vec![0.0; 8_000];
    audio.extend(spoken(question, piper));
    let speech_end = Some(last_audible(&audio));
    let input = dir.join(format!("question-{index}.wav"));
    wav::write_mono_16k(&input, &audio).unwrap();
    let options = SimulateOptions {
        agent: dir.join("agent.json"),
        input,
        out_dir: None,
        realtime,
        models_dir: confab_models::default_models_dir(),
        allow_private_urls: false,
        providers: providers.clone(),
        custom_face: None,
    };
    let mut out = Vec::new();
    run(&options, &mut out).expect("models are fetched (confab models fetch)");
    let lines: Vec<Value> =
        String::from_utf8(out).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let text_of = |name: &str| {
        lines
            .iter()
            .filter(|l| l["event"]["name"] == name)
            .filter_map(|l| l["event"]["payload"]["text"].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    Outcome {
        heard: text_of("utterance_committed"),
        answer: text_of("agent.stopped_speaking"),
        metrics: lines.iter().find(|l| l["type"] == "turn_metrics").cloned(),
        speech_end,
    }
}

fn percentile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    check_the_judge();
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let asked = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(QUESTIONS.len());
    let count = if benchmarking { asked.clamp(1, QUESTIONS.len()) } else { 1 };
    let dir = tempfile::tempdir().unwrap();
    let stt_model = std::env::args().find_map(|a| a.strip_prefix("--stt=").map(str::to_string)).unwrap_or_default();
    let remote_providers = RemoteProviders::from_args();
    let servers = remote_providers.as_ref().map(|_| remote::ProtocolServers::start());
    let provider_env = match (&remote_providers, &servers) {
        (Some(remote), Some(servers)) => remote.point_at(servers),
        _ => ProviderEnv::default(),
    };
    let mut agent: Value = serde_json::from_str(&agent(&stt_model, remote_providers.as_ref())).unwrap();
    if let Some(model) = std::env::args().find_map(|a| a.strip_prefix("--llm=").map(str::to_string)) {
        agent["avatars"][0]["config"]["llm"]["model"] = Value::String(model);
    }
    if std::env::args().any(|a| a == "--no-preemptive") {
        agent["avatars"][0]["config"]["llm"]["preemptive_generation"] = Value::Bool(false);
    }
    std::fs::write(dir.path().join("agent.json"), agent.to_string()).unwrap();
    // (stage, from, to) on the media clock, in seconds, and the delay the remote servers put in it.
    let first_clause_words = remote::reply("x").split(',').next().unwrap().split(' ').count();
    let clause = remote::LLM_WORD.as_secs_f64() * (first_clause_words - 1) as f64;
    let (llm, tts) = (remote::LLM_FIRST_TOKEN.as_secs_f64(), remote::TTS_FIRST_AUDIO.as_secs_f64());
    let spans = [
        ("end of speech (VAD) → commit", "speech_ended", "committed", 0.0),
        ("end of speech (VAD) → played", "speech_ended", "first_audio_played", llm + clause + tts),
        ("commit → transcript", "committed", "transcript_final", 0.0),
        ("commit → LLM request", "committed", "llm_request", 0.0),
        ("LLM request → first token", "llm_request", "llm_first_token", llm),
        ("LLM first token → first clause", "llm_first_token", "first_clause", clause),
        ("first clause → TTS first audio", "first_clause", "tts_first_audio", tts),
        ("TTS first audio → played", "tts_first_audio", "first_audio_played", 0.0),
        ("commit → first audio played", "committed", "first_audio_played", llm + clause + tts),
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); spans.len()];
    let piper = std::env::args()
        .any(|a| a == "--voice=piper")
        .then(|| PiperTts::load(&confab_models::default_models_dir()).expect("models are fetched"));
    let (mut heard_right, mut answered_right, mut errors, mut words) = (0, 0, 0, 0);
    // From the question's last audible sample to the first audio played; and how often the reply was
    // asked for, and voiced, before the commit, and how many early replies were dropped.
    let mut end_to_audio: Vec<f64> = Vec::new();
    let (mut llm_early, mut speech_early, mut dropped) = (0, 0, 0);
    // Live: every question in one call, asked before any is judged.
    let mut live_turns = (benchmarking && std::env::args().any(|a| a == "--live")).then(|| {
        let asked: Vec<Vec<f32>> = QUESTIONS.iter().take(count).map(|(q, ..)| spoken(q, piper.as_ref())).collect();
        live_outcomes(live::ask_in_one_call(&agent, &asked)).into_iter()
    });
    for (index, (question, question_words, answer_words)) in QUESTIONS.iter().take(count).enumerate() {
        if let Some(servers) = &servers {
            servers.script(question, answer_words[0]);
        }
        let outcome = match live_turns.as_mut() {
            Some(turns) => turns.next().unwrap_or_default(),
            None => ask(dir.path(), index, question, benchmarking, piper.as_ref(), &provider_env),
        };
        let (wrong, of) = word_errors(question, &outcome.heard);
        (errors, words) = (errors + wrong, words + of);
        let heard = outcome.heard.to_lowercase();
        let answer = outcome.answer.to_lowercase();
        let heard_ok = question_words.iter().all(|w| holds_word(&heard, w));
        let answer_ok = answer_words.iter().any(|w| holds_word(&answer, w));
        heard_right += usize::from(heard_ok);
        answered_right += usize::from(answer_ok);
        let stages = outcome.metrics.as_ref().map(|m| m["media_time"].clone()).unwrap_or_default();
        let at = |stage: &str| stages[stage].as_f64();
        for ((_, from, to, _), values) in spans.iter().zip(&mut samples) {
            if let (Some(from), Some(to)) = (at(from), at(to)) {
                values.push(to - from);
            }
        }
        end_to_audio.extend(at("first_audio_played").zip(outcome.speech_end).map(|(played, end)| played - end));
        let metrics = outcome.metrics.clone().unwrap_or_default();
        llm_early += usize::from(metrics["llm_started_early"] == true);
        speech_early += usize::from(metrics["speech_started_early"] == true);
        dropped += metrics["early_replies_dropped"].as_u64().unwrap_or(0);
        let total = at("first_audio_played").zip(at("committed")).map(|(p, c)| p - c);
        let waited = at("committed").zip(at("speech_ended")).map(|(c, e)| c - e);
        let seconds = |span: Option<f64>| span.map_or("none".to_string(), |t| format!("{t:.2} s"));
        println!(
            "{:2}. {question:50} heard {:5} {:?} → {:5} {:?} (end → commit {}, commit → audio {})",
            index + 1,
            if heard_ok { "right" } else { "WRONG" },
            outcome.heard,
            if answer_ok { "right" } else { "WRONG" },
            outcome.answer,
            seconds(waited),
            seconds(total),
        );
        if !benchmarking {
            assert!(outcome.metrics.is_some(), "a turn_metrics line: the harness reads its stages");
        }
    }
    println!(
        "\n{count} questions: heard right {heard_right}, answered right {answered_right}; transcript word error {:.1}% ({errors} of {words} words)",
        100.0 * errors as f64 / words.max(1) as f64
    );
    println!(
        "preemptive generation: reply asked for before the commit in {llm_early} of {count} turns, its first \
         sentence voiced before the commit in {speech_early}; {dropped} early replies dropped (the user went on)"
    );
    if !end_to_audio.is_empty() {
        let n = end_to_audio.len();
        let (p50, p95) = (percentile(&mut end_to_audio, 0.5), percentile(&mut end_to_audio, 0.95));
        println!("{:32} p50 {p50:6.3} s   p95 {p95:6.3} s   (n = {n})", "end of speech (audio) → played");
    }
    for ((name, _, _, injected), values) in spans.iter().zip(&mut samples) {
        if values.is_empty() {
            continue;
        }
        let n = values.len();
        let (p50, p95) = (percentile(values, 0.5), percentile(values, 0.95));
        let added = if servers.is_some() {
            format!("   less the servers' {injected:.3} s: p50 {:6.3} s p95 {:6.3} s", p50 - injected, p95 - injected)
        } else {
            String::new()
        };
        println!("{name:32} p50 {p50:6.3} s   p95 {p95:6.3} s   (n = {n}){added}");
    }
}
