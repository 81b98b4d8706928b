//! Live calls hear what files hear. Twenty spoken questions (the Piper voice: espeak-ng's robotic voice is
//! misheard by Moonshine so readily that resampling it alone moves the word error by points, see
//! docs/performance.md; `confab-engine`'s `live_ingress` and `livekit_clients` ask in espeak-ng's voices) in
//! one WAV are given to `confab simulate` (the file path) and played as the microphone of a real browser in
//! a call through the join page (the live path), inside a loopback-only network namespace: in Chromium as
//! its capture device (so the page's `getUserMedia` audio processing applies, as for a person's
//! microphone), in Firefox through Web Audio. Each question's live transcript is compared with the file
//! path's: every question has a turn of its own (at least 40 % alike in its letters: `likeness`), every first
//! word the file path heard is heard live too (not cut off, not replaced: "But is the capital…"), at most four
//! questions are heard worse than the file path heard them, and the live path's word error against the
//! questions is at most 5 points above the file path's.
//!
//! Why any room at all: the browsers' capture and Opus coding move Moonshine's word choices now and then,
//! either way ("What is too plus two?", "…the clear sky?" live where the file had them right, and the other
//! way round), and Chromium's fake capture device sends 4.6 % more audio than real time on this kind of
//! machine: in runs with every packet on time, 0 to 4 questions of 20 were heard worse in a Chromium call
//! (3.1 points at most), and as many heard better. In espeak-ng's en-us+f2 (by hand, the WAV's voice
//! swapped) both browsers heard better live than the file path (9.9 % and 10.7 % against 12.2 %), yet three
//! questions each heard worse in Firefox. What this test exists to catch moves many questions or cuts words: made-up audio in a first
//! syllable (padding packets decoded as losses: "What" heard "But", "Well"), holes cut into words (1–4 in most
//! Firefox questions before the input jitter buffer), audio lost to a starved media thread (11.5 % vs 3.1 %),
//! turns split or merged, first words chopped ("What" lost: "Is the capital of France?").

use std::path::Path;
use std::time::Duration;

use confab_engine::audio::wav;
use confab_engine::providers::piper_tts::PiperTts;
use confab_engine::word_error::word_errors;
use confab_tests::browser::{Browser, microphone_from_wav};
use confab_tests::netns::enter_loopback_only;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, wait_for_preload, wait_for_status};
use confab_tests::{scratch, simulate};
use reqwest::Method;
use serde_json::{Value, json};

/// The benchmark's twenty questions (`benches/benches/voice_to_voice.rs`).
const QUESTIONS: [&str; 20] = [
    "What is the capital of France?",
    "How many days are in a week?",
    "What colour is a clear sky?",
    "What is the capital of Japan?",
    "How many legs does a spider have?",
    "What is the largest planet in our solar system?",
    "What is two plus two?",
    "What is the capital of Italy?",
    "How many months are in a year?",
    "What do bees make?",
    "What is the freezing point of water in Celsius?",
    "What colour is fresh grass?",
    "Which animal is called the king of the jungle?",
    "How many hours are in a day?",
    "What is the capital of Germany?",
    "What is the opposite of hot?",
    "How many sides does a triangle have?",
    "What planet do we live on?",
    "What is the capital of Spain?",
    "What is the chemical symbol for water?",
];

/// Silence before the first question: Chromium's capture file starts when the page opens the microphone,
/// before the call connects; and a call's first seconds are where Chromium's capture processing and the
/// connection settle (the first question is the one twice heard garbled in Chromium: "What is the cap of the
/// love France?", "What is the cat of the love-friends?" with 5 s of lead on a loaded CI machine).
const LEAD_SECONDS: f32 = 8.0;
/// Silence after each question: the turn is committed within it (`max_endpointing_delay` 1.0).
const GAP_SECONDS: f32 = 2.2;

const AGENT_CONFIG: &str = r#"{ "llm": { "provider": "custom", "model": "unreachable", "preemptive_generation": false },
    "stt": { "provider": "local", "max_endpointing_delay": 1.0 }, "tts": { "provider": "local" } }"#;

/// The questions in the Piper voice (16 kHz), one after another with `GAP_SECONDS` of silence after each,
/// after `LEAD_SECONDS` of silence, over a microphone's noise floor (−70 dBFS: a microphone is never
/// digitally silent, and Firefox's audio graph chops the first syllables after seconds of exact zeros);
/// returns the WAV's length in seconds.
fn questions_wav(path: &Path) -> f32 {
    const RATE: usize = 16_000;
    let voice = PiperTts::load(&confab_models::default_models_dir()).expect("models are fetched");
    let mut samples = vec![0.0f32; (LEAD_SECONDS * RATE as f32) as usize];
    for question in QUESTIONS {
        samples.extend(voice.render(question).expect("Piper speaks"));
        samples.resize(samples.len() + (GAP_SECONDS * RATE as f32) as usize, 0.0);
    }
    let mut seed: u32 = 0x2545_f491;
    for sample in &mut samples {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *sample += (seed >> 8) as f32 / (1u32 << 24) as f32 * 6.0e-4 - 3.0e-4;
    }
    wav::write_mono_16k(path, &samples).unwrap();
    samples.len() as f32 / RATE as f32
}

/// The file path's transcripts: `confab simulate` on the WAV, one per committed turn.
fn file_transcripts(dir: &Path, wav: &Path) -> Vec<String> {
    let agent = json!({
        "agent_name": "Listener", "agent_system_prompt": "Be brief.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": serde_json::from_str::<Value>(AGENT_CONFIG).unwrap() }],
        "config": { "maxCallDuration": 600 }
    });
    let agent_file = dir.join("agent.json");
    std::fs::write(&agent_file, agent.to_string()).unwrap();
    let lines = simulate(&agent_file, wav, &dir.join("simulated"), &[("CONFAB_LLM_BASE_URL", "http://127.0.0.1:9/v1")]);
    lines
        .iter()
        .filter(|line| line["event"]["name"] == "utterance_committed")
        .map(|line| line["event"]["payload"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The words, lowercase: an apostrophe inside one is kept ("what's"), quotes around it are not (the
/// recognizer sometimes writes a question as a quotation: `"'How many days are in a week?'`).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|word| word.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The first word of `text`, as `words` reads it.
fn first_word(text: &str) -> Option<String> {
    words(text).into_iter().next()
}

/// `text` with numbers written as words ("2 plus 2" is "two plus two": the recognizer writes either).
fn numbers_as_words(text: &str) -> String {
    const WORDS: [&str; 25] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "twenty-one",
        "twenty-two",
        "twenty-three",
        "twenty-four",
    ];
    let word = |w: &str| {
        let digits = w.trim_end_matches(|c: char| !c.is_ascii_digit());
        match digits.parse::<usize>().ok().and_then(|n| WORDS.get(n)) {
            Some(number) if !digits.is_empty() => format!("{number}{}", &w[digits.len()..]),
            _ => w.to_string(),
        }
    };
    // "2+2" is "two plus two" too (the recognizer writes a sum either way).
    text.replace('+', " plus ").split_whitespace().map(word).collect::<Vec<_>>().join(" ")
}

/// Word errors of `transcripts` against the questions (all of them, in order), as a percentage; numbers
/// count as the words they are.
fn word_error_percent(transcripts: &[String]) -> f64 {
    let heard: Vec<String> = transcripts.iter().map(|t| numbers_as_words(t)).collect();
    let (errors, words) = word_errors(&QUESTIONS.join(" "), &heard.join(" "));
    100.0 * errors as f64 / words as f64
}

/// How alike two transcripts sound, 0 to 1: their letters' edit distance (numbers as words, case,
/// spaces and punctuation aside), so "too plust, too" is near "two plus two" where half its words differ.
fn likeness(a: &str, b: &str) -> f64 {
    let letters = |text: &str| -> String {
        numbers_as_words(text).chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
    };
    strsim::normalized_levenshtein(&letters(a), &letters(b))
}

/// Pairs each file-path transcript with the live transcript most like it among the next three not yet
/// taken, if any is at least 40 % alike (a stray burst of sound, committed as a turn of its own, is passed
/// over; two questions merged into one turn are not like either).
fn pair<'a>(file: &'a [String], live: &'a [String]) -> Vec<(&'a str, Option<&'a str>)> {
    let mut next = 0;
    file.iter()
        .map(|heard| {
            let best = (next..live.len().min(next + 3))
                .map(|j| (j, likeness(heard, &live[j])))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .filter(|&(_, alike)| alike >= 0.4);
            match best {
                Some((j, _)) => {
                    next = j + 1;
                    (heard.as_str(), Some(live[j].as_str()))
                }
                None => (heard.as_str(), None),
            }
        })
        .collect()
}

/// Word errors of `heard` against `question`, numbers counting as the words they are.
fn question_errors(question: &str, heard: &str) -> usize {
    word_errors(question, &numbers_as_words(heard)).0
}

/// The live path heard what the file path heard: each question as a turn of its own, every first word the
/// file path heard, at most four questions heard worse, and within 5 points of word error.
fn assert_hears_as_files_do(browser: &str, file: &[String], live: &[String]) {
    let (file_error, live_error) = (word_error_percent(file), word_error_percent(live));
    let pairs = pair(file, live);
    let report: Vec<String> = pairs.iter().map(|(f, l)| format!("  file {f:?}\n  live {l:?}")).collect();
    let report = format!(
        "{browser}: word error {live_error:.1}% live, {file_error:.1}% file\n{}\n(live turns: {live:?})",
        report.join("\n")
    );
    eprintln!("{report}");
    assert_eq!(file.len(), QUESTIONS.len(), "the file path commits one turn per question: {file:?}");
    let mut heard_worse = Vec::new();
    for ((heard, live), question) in pairs.iter().zip(QUESTIONS) {
        let live = live.unwrap_or_else(|| panic!("the live path missed {heard:?}\n{report}"));
        // Where the file path heard the first word, the live path must too: neither cut off ("Is the
        // capital…") nor replaced ("But is the capital…", the first syllable garbled).
        if first_word(heard) == first_word(question) {
            assert_eq!(first_word(live), first_word(question), "a first word was lost or replaced: {live:?}\n{report}");
        }
        if question_errors(question, live) > question_errors(question, heard) {
            heard_worse.push(live);
        }
    }
    assert!(
        heard_worse.len() <= 4,
        "{} questions heard worse than from the file: {heard_worse:?}\n{report}",
        heard_worse.len()
    );
    assert!(live_error <= file_error + 5.0, "{report}");
}

struct Setup {
    server: Server,
    client: reqwest::Client,
    key: String,
    agent_id: String,
}

impl Setup {
    async fn start(data: &Path) -> Setup {
        let key = create_key(data);
        let unreachable = Path::new("http://127.0.0.1:9/v1");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = Server::start_with_env(data, port, &[], &[("CONFAB_LLM_BASE_URL", unreachable)]).await;
        wait_for_preload(data).await;
        let client = reqwest::Client::new();
        let agent = json!({
            "agent_name": "Listener", "agent_system_prompt": "Be brief.",
            "avatars": [{ "avatar_key_id": "stock-amara", "config": serde_json::from_str::<Value>(AGENT_CONFIG).unwrap() }]
        });
        let agent = api(&client, &key, Method::POST, format!("{}/v1/ext/agent", server.base), Some(agent)).await;
        Setup { server, client, key, agent_id: agent["id"].as_str().unwrap().to_string() }
    }

    async fn conversation(&self) -> (String, String) {
        let body = json!({ "agent_id": self.agent_id, "user_name": "Ada", "user_id": "ada" });
        let url = format!("{}/v1/ext/conversation", self.server.base);
        let conversation = api(&self.client, &self.key, Method::POST, url, Some(body)).await;
        (conversation["id"].as_str().unwrap().to_string(), conversation["join_link"].as_str().unwrap().to_string())
    }

    /// The user's turns in the conversation's transcript.
    async fn heard(&self, id: &str) -> Vec<String> {
        let url = format!("{}/v1/ext/conversation/{id}", self.server.base);
        let detail = api(&self.client, &self.key, Method::GET, url, None).await;
        detail["transcript"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|e| e["role"] == "user")
                    .map(|e| e["content"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until the last question is in (a turn like `last`, the file path's last transcript), or
    /// `timeout`; hangs up; returns the user's turns.
    async fn listen(&self, browser: &mut Browser, id: &str, last: &str, timeout: Duration) -> Vec<String> {
        let started = std::time::Instant::now();
        let heard_last =
            |turns: &[String]| turns.iter().any(|turn| word_errors(last, turn).0 * 2 <= word_errors(last, "").1);
        while !heard_last(&self.heard(id).await) && started.elapsed() < timeout {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        browser.eval("document.getElementById('hangup').click()").await;
        browser.wait_for("document.body.dataset.state", &json!("ended"), Duration::from_secs(10)).await;
        wait_for_status(&self.client, &self.key, &self.server.base, id, "ENDED", Duration::from_secs(15)).await;
        self.heard(id).await
    }
}

#[test]
fn numbers_are_judged_as_words() {
    assert_eq!(numbers_as_words("What is 2 plus 2?"), "What is two plus two?");
    assert_eq!(numbers_as_words("There are 24 hours, 7 days."), "There are twenty-four hours, seven days.");
    assert_eq!(numbers_as_words("H2O"), "H2O");
    assert_eq!(numbers_as_words("What is 2+2?"), "What is two plus two?");
}

/// The judgement on transcripts of earlier runs: four questions misheard through a browser's capture and
/// coding (one Chromium call's) pass; a fifth fails, as do a question heard as something else, two
/// questions in one turn, and a first word chopped or replaced.
#[test]
fn coding_noise_passes_and_more_does_not() {
    let file: Vec<String> = QUESTIONS.iter().map(|q| q.replace("colour", "color")).collect();
    let with = |changes: &[(usize, &str)]| {
        let mut live = file.clone();
        for &(index, heard) in changes {
            live[index] = heard.to_string();
        }
        live
    };
    let noisy = [
        (2, "What color is the clear sky?"),
        (6, "What is too plus two?"),
        (8, "How many months are there in a year?"),
        (10, "What is the freezing point of water and salsis?"),
    ];
    assert_hears_as_files_do("noisy", &file, &with(&noisy));
    let judged = |live: Vec<String>| std::panic::catch_unwind(|| assert_hears_as_files_do("worse", &file, &live));
    let fifth = (15, "What is the opposite of hat?");
    assert!(judged(with(&[noisy[0], noisy[1], noisy[2], noisy[3], fifth])).is_err(), "five questions heard worse");
    assert!(judged(with(&[(0, "Yeah.")])).is_err(), "beyond recognition");
    let merged = format!("{} {}", file[1], file[2]);
    assert!(judged(with(&[(1, &merged), (2, "")])).is_err(), "two questions in one turn");
    assert!(judged(with(&[(9, "Do bees make?")])).is_err(), "a chopped first word");
    assert!(judged(with(&[(0, "But is the capital of France?")])).is_err(), "a replaced first word");
}

#[test]
fn live_calls_hear_what_files_hear() {
    if enter_loopback_only("live_calls_hear_what_files_hear") {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(hear_in_both_browsers());
    }
}

async fn hear_in_both_browsers() {
    let dir = scratch("live-hearing");
    let wav = dir.join("questions.wav");
    let seconds = questions_wav(&wav);
    let file = file_transcripts(&dir, &wav);
    let setup = Setup::start(&dir.join("data")).await;
    let listening = Duration::from_secs_f32(seconds + 20.0);

    // Chromium: the WAV is its capture device, played from when the page opens the microphone (the
    // leading silence covers the connection), processed as the join page asks.
    let (id, join_link) = setup.conversation().await;
    let microphone = Path::new(&format!("{}%noloop", wav.display())).to_path_buf();
    let mut browser = Browser::chromium(&join_link, &microphone, &dir.join("chromium.log")).await;
    browser.wait_for("document.body.dataset.state", &json!("ready"), Duration::from_secs(15)).await;
    browser.eval("document.getElementById('join').click()").await;
    browser.wait_for("document.body.dataset.state", &json!("live"), Duration::from_secs(20)).await;
    let live = setup.listen(&mut browser, &id, file.last().expect("heard"), listening).await;
    drop(browser);
    assert_hears_as_files_do("Chromium", &file, &live);

    // Firefox: the WAV through Web Audio, started once the call is live.
    let receiver = Receiver::start(vec![("questions.wav".into(), std::fs::read(&wav).unwrap())]).await;
    let (id, join_link) = setup.conversation().await;
    let mut browser = Browser::firefox(&join_link, &dir.join("firefox.log")).await;
    browser.wait_for("document.body.dataset.state", &json!("ready"), Duration::from_secs(15)).await;
    let wav_url = format!("{}/questions.wav", receiver.files_url);
    assert_eq!(browser.eval(&microphone_from_wav(&wav_url)).await, json!(true));
    browser.eval("document.getElementById('join').click()").await;
    browser.wait_for("document.body.dataset.state", &json!("live"), Duration::from_secs(20)).await;
    wait_for_status(&setup.client, &setup.key, &setup.server.base, &id, "IN_PROGRESS", Duration::from_secs(5)).await;
    assert_eq!(browser.eval("window.speak()").await, json!("running"));
    let live = setup.listen(&mut browser, &id, file.last().expect("heard"), listening).await;
    drop(browser);
    assert_hears_as_files_do("Firefox", &file, &live);

    let mut server = setup.server;
    assert!(server.terminate().success());
    let _ = std::fs::remove_dir_all(&dir);
}
