//! Calls at once, added one level at a time, until quality drops: live calls to the release `confab serve`
//! (or a two-worker fleet with `--fleet`), each our WebRTC offerer (`confab_tests::caller::Caller`, Opus
//! over loopback, as the join page calls) asking the same spoken questions at the same moments, every
//! provider local, the default face. Per level: the words heard (word error of the transcript against the
//! questions), the answers right, end of speech (VAD) → first audio played (the calls' stored
//! `turn_metrics`), the calls left speaking without an end, the calls that said in the log how they degraded
//! (user audio dropped, media thread fell behind, face frames held, early replies deferred), ticks that overran, input underruns, and the server's CPU
//! (the fleet: the workers'). The knee is the first level where a call hears or answers worse than one call
//! alone.
//!
//! `cargo build --release --bin confab && cargo bench -p confab-benches --bench call_load [-- MAX] [--from=MIN]
//! [--fleet] [--replicas=R] [--browsers] [--repeat=K] [--questions=N] [--other-voices=hear] [--verbose]`
//! (levels MIN..=MAX calls, 1 and 6 by default; N questions a call, 3 by default; each level K times, once by
//! default; `--other-voices=hear`: the agent hears every voice as the user's, without voice checks (the
//! default is `ignore`); `--verbose`: each call's transcript on stderr). `--fleet` needs PostgreSQL (`CONFAB_TEST_POSTGRES_URL`) and `nats-server`: two
//! `confab worker --max-calls` (half the level each, rounded up) behind R `confab serve --nats` replicas (1 by
//! default; calls take turns among them). `--browsers`: each caller is a headless Debian Chromium on the
//! conversation's `join_link` (the join page, its microphone the spoken questions through Web Audio, its own
//! Opus encoder, jitter buffer and VP8 decoder: the CPU a real browser beside the server costs) instead of our
//! offerer. Under `cargo test` (no `--bench`) nothing runs.

use std::path::Path;
use std::time::{Duration, Instant};

use confab_benches::{espeak, word_errors};
use confab_tests::browser::{Browser, microphone_from_wav};
use confab_tests::caller::{Caller, token_of};
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, wait_for_preload, wait_for_status};
use reqwest::Method;
use serde_json::json;

/// (question, an answer is right when it holds any of these).
const QUESTIONS: &[(&str, &[&str])] = &[
    ("What is the capital of France?", &["paris"]),
    ("How many days are in a week?", &["seven", "7"]),
    ("What is the capital of Japan?", &["tokyo"]),
    ("How many legs does a spider have?", &["eight", "8"]),
    ("What do bees make?", &["honey"]),
];
/// Silence after each question, for the answers of every call to be over before the next question.
const ANSWER_ROOM_SECONDS: usize = 9;
const LEAD_SECONDS: usize = 2;

/// What one call made of the questions.
struct CallOutcome {
    words_wrong: usize,
    words: usize,
    answers_right: usize,
    /// End of speech (VAD) → first audio played, per answered turn, in seconds.
    end_to_audio: Vec<f64>,
    /// `agent.started_speaking` without its `agent.stopped_speaking` by the end of the call.
    left_speaking: bool,
}

/// The server-side counters read from `/metrics`.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// What calls say once in the servers' `logs` when they degrade: (the line's words, the table's name).
const DEGRADED: [(&str, &str); 4] = [
    ("user audio dropped", "dropped input"),
    ("this call's media thread fell behind", "media fell behind"),
    ("the face fell behind its voice", "face held"),
    ("replies are asked at the commit", "early reply deferred"),
];

/// How many times each of `DEGRADED`'s lines is in `logs` so far.
fn degraded_so_far(logs: &[std::path::PathBuf]) -> [usize; DEGRADED.len()] {
    let texts: Vec<String> = logs.iter().map(|log| std::fs::read_to_string(log).unwrap_or_default()).collect();
    DEGRADED.map(|(line, _)| texts.iter().map(|text| text.matches(line).count()).sum())
}

/// CPU seconds (user + system) of the processes `pids`.
fn cpu_of(pids: &[u32]) -> f64 {
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|stat| {
            let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
            let field = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
            (field(11) + field(12)) / ticks
        })
        .sum()
}

struct Deployment {
    /// The replicas' addresses (one where there is one server); calls take turns among them.
    bases: Vec<String>,
    key: String,
    /// Processes whose CPU is the calls' (the server, or the workers).
    pids: Vec<u32>,
    /// Their logs (a call that fell behind says so there once).
    logs: Vec<std::path::PathBuf>,
    _servers: Vec<Server>,
    _workers: Vec<confab_tests::fleet::Worker>,
    _nats: Option<confab_tests::fleet::Nats>,
    database_url: Option<String>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        if let Some(url) = &self.database_url {
            confab_tests::fleet::drop_database(url);
        }
    }
}

async fn deploy(dir: &Path, fleet: bool, replicas: usize, max_calls: usize) -> Deployment {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let max = max_calls.to_string();
    if !fleet {
        let key = create_key(&data);
        let server = Server::start(&data, &["--max-calls", &max]).await;
        wait_for_preload(&data).await;
        let pids = vec![server.child.id()];
        return Deployment {
            bases: vec![server.base.clone()],
            key,
            pids,
            logs: vec![data.join("serve.log")],
            _servers: vec![server],
            _workers: Vec::new(),
            _nats: None,
            database_url: None,
        };
    }
    let nats = confab_tests::fleet::Nats::start(dir);
    let database_url = confab_tests::fleet::fresh_database("call_load");
    let key = confab_tests::fleet::create_key(&database_url);
    let per_worker = max_calls.div_ceil(2).to_string();
    let mut workers = Vec::new();
    for index in 0..2 {
        let id = format!("load-{index}");
        let extra = ["--max-calls", per_worker.as_str()];
        workers.push(confab_tests::fleet::Worker::start(dir, &id, &nats.url, &database_url, &extra, &[]).await);
    }
    // Calls are timed from here, not the workers' start-up loading of the models.
    for worker in &workers {
        let started = Instant::now();
        while !worker.log_text().contains("local models preloaded") {
            assert!(started.elapsed() < Duration::from_secs(180), "worker {} did not preload its models", worker.id);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut servers = Vec::new();
    for index in 0..replicas.max(1) {
        let data = dir.join(format!("replica-{index}"));
        let args = ["--nats", &nats.url, "--database-url", &database_url, "--no-media"];
        servers.push(Server::start(&data, &args).await);
    }
    let pids = workers.iter().map(|w| w.child.id()).collect();
    let logs = workers.iter().map(|w| w.log.clone()).collect();
    Deployment {
        bases: servers.iter().map(|s| s.base.clone()).collect(),
        key,
        pids,
        logs,
        _servers: servers,
        _workers: workers,
        _nats: Some(nats),
        database_url: Some(database_url),
    }
}

/// Who places the calls.
#[derive(Clone)]
enum Callers {
    /// Our WebRTC offerer, in this process.
    Offerer,
    /// A headless Chromium on the join page each; its microphone, through Web Audio, the questions at
    /// `wav_url`, started once the call is live; `silence` its fake capture device (never sent).
    Chromium { wav_url: String, silence: std::path::PathBuf, logs: std::path::PathBuf },
}

/// Speaks `microphone` (16 kHz mono, `seconds` long) into conversation `id` through `callers`, then hangs up.
async fn talk(callers: &Callers, base: &str, conversation: &serde_json::Value, microphone: Vec<f32>, seconds: f64) {
    let client = reqwest::Client::new();
    let (id, token) = (conversation["id"].as_str().unwrap(), token_of(conversation));
    match callers {
        Callers::Offerer => {
            let caller = Caller::join(&client, base, id, &token, microphone).await;
            tokio::time::sleep(Duration::from_secs_f64(seconds + 1.0)).await;
            caller.hang_up(&client, base, id, &token).await;
        }
        Callers::Chromium { wav_url, silence, logs } => {
            let join_link = conversation["join_link"].as_str().unwrap();
            let mut browser = Browser::chromium(join_link, silence, &logs.join(format!("chromium-{id}.log"))).await;
            let state = "document.body.dataset.state";
            browser.wait_for(state, &json!("ready"), Duration::from_secs(30)).await;
            assert_eq!(browser.eval(&microphone_from_wav(wav_url)).await, json!(true));
            browser.eval("document.getElementById('join').click()").await;
            browser.wait_for(state, &json!("live"), Duration::from_secs(60)).await;
            assert_eq!(browser.eval("window.speak()").await, json!("running"));
            tokio::time::sleep(Duration::from_secs_f64(seconds + 1.0)).await;
            browser.eval("document.getElementById('hangup').click()").await;
            browser.wait_for(state, &json!("ended"), Duration::from_secs(30)).await;
        }
    }
}

/// One call asking `questions`; its outcome, read from the stored conversation once it has ended.
async fn one_call(
    base: String,
    key: String,
    agent_id: String,
    callers: Callers,
    microphone: Vec<f32>,
    questions: usize,
) -> CallOutcome {
    let client = reqwest::Client::new();
    let body = json!({ "agent_id": agent_id, "user_name": "Load", "user_id": "load" });
    let conversation = api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await;
    let id = conversation["id"].as_str().unwrap().to_string();
    let seconds = microphone.len() as f64 / 16_000.0;
    talk(&callers, &base, &conversation, microphone, seconds).await;
    wait_for_status(&client, &key, &base, &id, "ENDED", Duration::from_secs(60)).await;
    let detail = api(&client, &key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    let url = format!("{base}/v1/ext/conversation/{id}/turn-metrics");
    let turns = api(&client, &key, Method::GET, url, None).await["data"].as_array().cloned().unwrap_or_default();
    let entries = detail["transcript"].as_array().cloned().unwrap_or_default();
    let said = |role: &str| {
        entries
            .iter()
            .filter(|e| e["role"] == role)
            .filter_map(|e| e["content"].as_str())
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    if std::env::args().any(|a| a == "--verbose") {
        let lines: Vec<String> = entries.iter().map(|e| format!("  {}: {}", e["role"], e["content"])).collect();
        eprintln!("call {id}:\n{}", lines.join("\n"));
    }
    let asked: Vec<&str> = QUESTIONS.iter().take(questions).map(|(q, _)| *q).collect();
    let (words_wrong, words) = word_errors(&asked.join(" "), &said("user"));
    let answers = said("assistant");
    let answers_right =
        QUESTIONS.iter().take(questions).filter(|(_, right)| right.iter().any(|w| answers.contains(w))).count();
    let end_to_audio = turns
        .iter()
        .filter_map(|t| {
            Some(t["media_time"]["first_audio_played"].as_f64()? - t["media_time"]["speech_ended"].as_f64()?)
        })
        .collect();
    // Every start has its stop: the events are in the webhook log too, but the transcript says it plainly:
    // an agent that started and never stopped leaves no assistant entry for its last turn.
    let started = turns.iter().filter(|t| t["media_time"]["first_audio_played"].is_number()).count();
    let stopped = entries.iter().filter(|e| e["role"] == "assistant").count();
    CallOutcome { words_wrong, words, answers_right, end_to_audio, left_speaking: stopped < started }
}

fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// How a run is set up (the command line).
struct Options {
    levels: std::ops::RangeInclusive<usize>,
    fleet: bool,
    replicas: usize,
    browsers: bool,
    repeat: usize,
    questions: usize,
    /// The agent's `stt.other_voices`: `ignore` (the default: voice checks run) or `hear`.
    other_voices: String,
}

async fn run(options: Options) {
    let Options { levels, fleet, replicas, browsers, repeat, questions, other_voices } = options;
    let max_level = *levels.end();
    let dir = tempfile::tempdir().unwrap();
    let deployment = deploy(dir.path(), fleet, replicas, max_level).await;
    let client = reqwest::Client::new();
    let agent = json!({ "agent_name": "Load", "agent_system_prompt": "You are a helpful assistant. Answer in one short sentence.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": { "stt": { "other_voices": other_voices } } }] });
    let agent =
        api(&client, &deployment.key, Method::POST, format!("{}/v1/ext/agent", deployment.bases[0]), Some(agent)).await;
    let agent_id = agent["id"].as_str().unwrap().to_string();
    let mut microphone = vec![0.0; LEAD_SECONDS * 16_000];
    for (question, _) in QUESTIONS.iter().take(questions) {
        microphone.extend(espeak(question, 160));
        microphone.extend(std::iter::repeat_n(0.0, ANSWER_ROOM_SECONDS * 16_000));
    }
    // The browsers fetch the questions from a file server of their own (the join page's origin is the API's).
    let mut _files = None;
    let callers = if browsers {
        let (wav, silence) = (dir.path().join("questions.wav"), dir.path().join("silence.wav"));
        confab_engine::audio::wav::write_mono_16k(&wav, &microphone).unwrap();
        confab_tests::silent_wav(&silence, 5.0);
        let receiver = Receiver::start(vec![("questions.wav".into(), std::fs::read(&wav).unwrap())]).await;
        let wav_url = format!("{}/questions.wav", receiver.files_url);
        _files = Some(receiver);
        Callers::Chromium { wav_url, silence, logs: dir.path().to_path_buf() }
    } else {
        Callers::Offerer
    };
    let degraded: Vec<String> = DEGRADED.iter().map(|(_, name)| format!("calls: {name}")).collect();
    println!(
        "| calls | word error (per call) | answers right | end of speech → first audio p50 / max | left speaking | {} | tick overruns | input underruns | server CPU (cores busy, of {}) |",
        degraded.join(" | "),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("|---|---|---|---|---|{}---|---|---|", "---|".repeat(DEGRADED.len()));
    let metrics_of = || async {
        let url = format!("{}/metrics", deployment.bases[0]);
        client.get(url).header("x-api-key", &deployment.key).send().await.unwrap().text().await.unwrap()
    };
    for level in levels.flat_map(|level| std::iter::repeat_n(level, repeat.max(1))) {
        let before = metrics_of().await;
        let degraded_before = degraded_so_far(&deployment.logs);
        let (cpu_before, started) = (cpu_of(&deployment.pids), Instant::now());
        let calls: Vec<_> = (0..level)
            .map(|index| {
                tokio::spawn(one_call(
                    deployment.bases[index % deployment.bases.len()].clone(),
                    deployment.key.clone(),
                    agent_id.clone(),
                    callers.clone(),
                    microphone.clone(),
                    questions,
                ))
            })
            .collect();
        let mut outcomes = Vec::new();
        for call in calls {
            outcomes.push(call.await.unwrap());
        }
        let cpu = (cpu_of(&deployment.pids) - cpu_before) / started.elapsed().as_secs_f64();
        let after = metrics_of().await;
        let delta = |name: &str| counter(&after, name) - counter(&before, name);
        let (wrong, words) = outcomes.iter().fold((0, 0), |(w, n), o| (w + o.words_wrong, n + o.words));
        let right: usize = outcomes.iter().map(|o| o.answers_right).sum();
        let mut latencies: Vec<f64> = outcomes.iter().flat_map(|o| o.end_to_audio.clone()).collect();
        let left = outcomes.iter().filter(|o| o.left_speaking).count();
        let degraded_after = degraded_so_far(&deployment.logs);
        let degraded: Vec<String> =
            degraded_after.iter().zip(degraded_before).map(|(after, before)| (after - before).to_string()).collect();
        let engine = |name: &str| if fleet { "–".to_string() } else { delta(name).to_string() };
        let per_call: Vec<String> = outcomes.iter().map(|o| format!("{}/{}", o.words_wrong, o.words)).collect();
        println!(
            "| {level} | {:.1} % ({}) | {right} of {} | {:.2} / {:.2} s | {left} | {} | {} | {} | {:.2} |",
            100.0 * wrong as f64 / words.max(1) as f64,
            per_call.join(", "),
            level * questions,
            percentile(&mut latencies, 0.5),
            percentile(&mut latencies, 1.0),
            degraded.join(" | "),
            engine("confab_media_tick_overruns_total"),
            engine("confab_media_input_underruns_total"),
            cpu,
        );
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // a load benchmark: nothing to check under `cargo test`
    }
    let max_level = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(6);
    let fleet = std::env::args().any(|a| a == "--fleet");
    let number = |flag: &str, default: usize| {
        std::env::args().find_map(|a| a.strip_prefix(flag).and_then(|n| n.parse().ok())).unwrap_or(default)
    };
    let questions = number("--questions=", 3).clamp(1, QUESTIONS.len());
    let from: usize = number("--from=", 1);
    let options = Options {
        levels: from.clamp(1, max_level)..=max_level,
        fleet,
        replicas: number("--replicas=", 1),
        browsers: std::env::args().any(|a| a == "--browsers"),
        repeat: number("--repeat=", 1),
        questions,
        other_voices: std::env::args()
            .find_map(|a| a.strip_prefix("--other-voices=").map(str::to_string))
            .unwrap_or_else(|| "ignore".into()),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run(options));
}
