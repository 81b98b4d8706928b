//! LiveKit's own clients talk to Confab agents: TruGen's official SDK (`trugen-sdk` 1.1.0 on LiveKit's
//! Python client `livekit` 1.2.0, pinned and installed by `scripts/setup.sh` under `CONFAB_TEST_TOOLS`)
//! follows its README against the real `confab serve`: `create_session` (`POST /v1/auth/conversation`),
//! `connect` (`/rtc`: it tries `/rtc/v1` first and falls back on its 404), the agent's tracks arrive,
//! `upload_audio(question.wav)` publishes a track and speaks the question, the answer is heard and arrives as
//! a final `lk.transcription` stream, `disconnect`. The record then reads ENDED with question and answer,
//! and `call_ended` was delivered signed; a call Confab ends is a `leave` the SDK reports. LiveKit's JS SDK
//! (`livekit-client`, pinned) holds the same conversation in Chromium (its fake microphone; the SDK's
//! defaults) and in Firefox (Web Audio; forced onto `/rtc`). Once on `confab serve` alone, once through a
//! fleet replica (the client's WebSocket) and a media worker (the call). libwebrtc gathers no loopback candidates: the test runs in a
//! network namespace whose other interfaces are a veth pair leading nowhere (`confab_tests::netns`).

use std::path::PathBuf;
use std::time::Duration;

use confab_tests::browser::{Browser, microphone_from_wav};
use confab_tests::fleet::{self, Nats, Worker};
use confab_tests::netns::enter_loopback_only;
use confab_tests::private_postgres::PrivatePostgres;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, geographer, wait_for_preload, wait_for_status};
use confab_tests::{scratch, spoken_wav, spoken_wav_as, words};
use reqwest::Method;
use serde_json::Value;

/// The question, heard word for word and answered "Paris". Its first syllable is where the SDK's new track
/// starts, and with it libwebrtc's bandwidth probes (runs of padding-only packets): decoded as lost
/// packets, they made "What" into "But", "Well", "That" in 7 of 9 calls.
const QUESTION: &str = "What is the capital of France?";

/// espeak-ng voices (and words per minute) the SDK asks in, on the embedded server: the question is heard
/// word for word in each.
const VOICES: [(&str, &str); 3] = [("en-us", "175"), ("en-us+f2", "170"), ("en-us+m5", "160")];

const EVENTS: [&str; 6] = [
    "user.started_speaking",
    "utterance_committed",
    "agent.started_speaking",
    "agent.stopped_speaking",
    "participant_left",
    "call_ended",
];

/// The tests take turns: each starts a server (or a fleet) that loads the models.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_in_namespace(test_name: &str, body: impl std::future::Future<Output = ()>) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if enter_loopback_only(test_name) {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(body);
    }
}

#[test]
fn trugen_sdk_holds_a_spoken_conversation() {
    run_in_namespace("trugen_sdk_holds_a_spoken_conversation", on_the_embedded_server());
}

#[test]
fn trugen_sdk_talks_through_a_fleet_replica_and_worker() {
    run_in_namespace("trugen_sdk_talks_through_a_fleet_replica_and_worker", through_a_fleet());
}

async fn on_the_embedded_server() {
    let dir = scratch("trugen-livekit");
    let spoken = dir.join("js-question.wav");
    spoken_wav(&spoken, QUESTION, 1.0, 5.0);
    let files = Receiver::start(js_client_files(&spoken)).await;
    let data = dir.join("data");
    let key = create_key(&data);
    let server = Server::start(&data, &["--allow-private-webhooks"]).await;
    wait_for_preload(&data).await;
    converse(&dir, &server.base, &key, &files).await;
    asks_in_voices(&dir, &server.base, &key, &files).await;
    ended_by_the_server(&server.base, &key).await;
    js_sdk_in(JsBrowser::Chromium, &dir, &server.base, &key, &files).await;
    js_sdk_in(JsBrowser::Firefox, &dir, &server.base, &key, &files).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The test page, LiveKit's JS client SDK (`livekit-client`, pinned, installed by `scripts/setup.sh`) and
/// the question Firefox's page speaks.
fn js_client_files(question: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let tools =
        std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/confab-tools".into());
    let umd = tools.join("livekit-js/node_modules/livekit-client/dist/livekit-client.umd.js");
    let page = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/livekit_js_page.html");
    vec![
        ("livekit-client.umd.js".into(), std::fs::read(&umd).expect("livekit-client (scripts/setup.sh)")),
        ("lk.html".into(), std::fs::read(page).unwrap()),
        ("question.wav".into(), std::fs::read(question).unwrap()),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum JsBrowser {
    /// Speaks through Chromium's fake microphone (the WAV); the SDK's defaults (it tries `/rtc/v1`, then
    /// falls back to `/rtc` on its 404).
    Chromium,
    /// Speaks through Web Audio once the call is live (`microphone_from_wav`); the SDK forced onto `/rtc`
    /// (`singlePeerConnection: false`). Firefox names remote tracks itself: the SDK finds the agent's
    /// tracks by `mid` (the offer's `mid_to_track_id`).
    Firefox,
}

/// LiveKit's JS SDK in a browser: connects, publishes the microphone, plays the agent's face and voice,
/// receives the words and sees `lk.agent.state` change; then leaves, and the record reads ENDED.
async fn js_sdk_in(which: JsBrowser, dir: &std::path::Path, base: &str, key: &str, files: &Receiver) {
    let client = reqwest::Client::new();
    // Webhooks to a receiver of this agent's own (a receiver checks every delivery against one secret).
    let receiver = Receiver::start(vec![]).await;
    let (agent_id, secret) = geographer(&client, key, base, &receiver.hook_url, &EVENTS, false).await;
    let body = serde_json::json!({ "agentId": agent_id, "userName": "Grace", "userId": "usr_js" });
    let response = client
        .post(format!("{base}/v1/auth/conversation"))
        .header("X-API-Key", key)
        .header("X-Agent-Id", &agent_id)
        .json(&body)
        .send()
        .await
        .unwrap();
    let token = response.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string();
    let grant = jwt_payload(&token);
    let (url, access) = (grant["rtcServerUrl"].as_str().unwrap(), grant["accessToken"].as_str().unwrap());
    let id = grant["conversationId"].as_str().unwrap();

    let page = format!("{}/lk.html", files.files_url);
    let (mut browser, options) = match which {
        JsBrowser::Chromium => {
            let microphone = dir.join("chromium-question.wav");
            spoken_wav(&microphone, QUESTION, 3.0, 40.0);
            (Browser::chromium(&page, &microphone, &dir.join("chromium.log")).await, "{}")
        }
        JsBrowser::Firefox => {
            let mut browser = Browser::firefox(&page, &dir.join("firefox.log")).await;
            let wav_url = format!("{}/question.wav", files.files_url);
            assert_eq!(browser.eval(&microphone_from_wav(&wav_url)).await, serde_json::json!(true));
            (browser, "{ singlePeerConnection: false }")
        }
    };
    browser.wait_for("typeof window.joinRoom", &serde_json::json!("function"), Duration::from_secs(15)).await;
    // As JSON text: both browsers hand a string back alike.
    let joined = browser.eval(&format!("window.joinRoom({url:?}, {access:?}, {options}).then(JSON.stringify)")).await;
    let participants: Value = serde_json::from_str(joined.as_str().unwrap()).unwrap();
    assert_eq!(participants[0]["identity"], format!("agent-{agent_id}"), "{which:?}: {participants}");
    assert_eq!(participants[0]["kind"], 4, "ParticipantKind.AGENT: {participants}");
    assert_eq!(participants[0]["state"], "listening");
    browser
        .wait_for(
            "document.getElementById('agent-video')?.videoWidth",
            &serde_json::json!(512),
            Duration::from_secs(15),
        )
        .await;
    if which == JsBrowser::Firefox {
        // The microphone's silence reached the engine: the question can be asked.
        wait_for_status(&client, key, base, id, "IN_PROGRESS", Duration::from_secs(10)).await;
        assert_eq!(browser.eval("window.speak()").await, serde_json::json!("running"));
    }
    let answered = "lk.words.some((w) => w.final === 'true' && w.who.startsWith('agent-') && w.text.length > 0)";
    browser.wait_for(answered, &serde_json::json!(true), Duration::from_secs(60)).await;
    let seen = browser.eval("JSON.stringify(lk.words)").await;
    let seen: Value = serde_json::from_str(seen.as_str().unwrap()).unwrap();
    let finals = |who: &dyn Fn(&str) -> bool| -> Vec<String> {
        let entries =
            seen.as_array().unwrap().iter().filter(|w| w["final"] == "true" && who(w["who"].as_str().unwrap()));
        entries.map(|w| w["text"].as_str().unwrap().to_string()).collect()
    };
    let (person, agent) = (finals(&|who| who == "usr_js"), finals(&|who| who.starts_with("agent-")));
    let person: Vec<&str> = person.iter().map(String::as_str).collect();
    assert_eq!(words(the_question(&person)), words(QUESTION), "{which:?}: the person's words: {seen}");
    assert!(agent.join(" ").to_lowercase().contains("paris"), "{which:?}: the agent's words: {seen}");
    let states = browser.eval("lk.states").await.to_string();
    assert!(states.contains("thinking") && states.contains("speaking"), "{which:?}: {states}");
    let packets = browser.eval("window.audioPacketsReceived()").await.as_u64().unwrap();
    assert!(packets >= 25, "{which:?}: the page received {packets} audio packets from the agent");
    browser.eval("room.disconnect()").await;
    receiver.wait_for_event(&secret, id, "call_ended", Duration::from_secs(20)).await;
    let detail = api(&client, key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    assert_eq!(detail["status"], "ENDED");
    browser.kill();
}

/// A JWT's payload (no signature check).
fn jwt_payload(token: &str) -> Value {
    use base64::Engine;
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

/// A call Confab ends (the agent's `maxCallDuration`, 4 s): the client hears `leave` (ROOM_CLOSED) and
/// says so, and the record reads ENDED.
async fn ended_by_the_server(base: &str, key: &str) {
    let client = reqwest::Client::new();
    let agent = serde_json::json!({
        "agent_name": "Brief",
        "agent_system_prompt": "Be brief.",
        "avatars": [{ "avatar_key_id": "stock-amara" }],
        "config": { "maxCallDuration": 4 }
    });
    let agent = api(&client, key, Method::POST, format!("{base}/v1/ext/agent"), Some(agent)).await;
    let agent_id = agent["id"].as_str().unwrap();
    let seen = run_script("trugen_ended_by_server.py", &[&format!("{base}/v1"), key, agent_id]).await;
    assert_eq!(seen["reason"], "ROOM_CLOSED", "{seen}");
    let after = seen["after_ms"].as_u64().unwrap();
    assert!((3_000..15_000).contains(&after), "ended {after} ms after connecting: {seen}");
}

/// Runs `tests/fixtures/<script>` with `args` in the trugen-sdk venv; the JSON line it prints.
async fn run_script(script: &str, args: &[&str]) -> Value {
    let tools =
        std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/confab-tools".into());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(script);
    let output = tokio::process::Command::new(tools.join("trugen/bin/python")).arg(script).args(args).output();
    let output = tokio::time::timeout(Duration::from_secs(180), output).await.expect("the SDK's flow ends").unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "the trugen-sdk flow failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON line");
    eprintln!("the client saw: {seen}");
    seen
}

/// The replica holds the client's WebSocket and relays its frames over NATS to the worker that holds the
/// call; the media goes straight to the worker. PostgreSQL and NATS are the namespace's own.
async fn through_a_fleet() {
    let dir = scratch("trugen-fleet");
    let postgres = PrivatePostgres::start(&dir);
    let nats = Nats::start(&dir);
    let key = fleet::create_key(&postgres.url);
    let replica_args = ["--database-url", &postgres.url, "--nats", &nats.url, "--allow-private-urls"];
    let replica = Server::start(&dir.join("replica"), &replica_args).await;
    let worker = Worker::start(&dir, "w1", &nats.url, &postgres.url, &[], &[]).await;
    // A call arriving while the worker still loads its models waits for them (4–6 s here, 20 s seen on a
    // loaded machine): past the client's 15 s for the connection, that is a failed join, not what is tested.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !worker.log_text().contains("local models preloaded") {
        assert!(std::time::Instant::now() < deadline, "the worker did not preload its models:\n{}", worker.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let receiver = Receiver::start(vec![]).await;
    converse(&dir, &replica.base, &key, &receiver).await;
    assert!(worker.log_text().contains("LiveKit call over"), "the worker held the call:\n{}", worker.log_text());
    drop((replica, worker, nats, postgres));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The SDK's README flow against `base`, judged: the participant, the face, the voice, the words, the
/// agent's state, and the record and webhooks after.
async fn converse(dir: &std::path::Path, base: &str, key: &str, receiver: &Receiver) {
    let question = dir.join("question.wav");
    spoken_wav(&question, QUESTION, 0.5, 1.0);
    let client = reqwest::Client::new();
    let (agent_id, secret) = geographer(&client, key, base, &receiver.hook_url, &EVENTS, false).await;

    let question_path = question.to_str().unwrap();
    let seen = run_script("trugen_conversation.py", &[&format!("{base}/v1"), key, &agent_id, question_path]).await;

    // The agent is a participant of kind AGENT named after the agent, listening when the person joins.
    let agent = &seen["participants"][0];
    assert_eq!(seen["participants"].as_array().unwrap().len(), 1);
    assert_eq!(agent["identity"], format!("agent-{agent_id}"));
    assert_eq!(agent["name"], "Geographer");
    assert_eq!(agent["kind"], 4, "ParticipantKind.AGENT");
    assert_eq!(agent["state"], "listening");
    // Its face decodes at 512×512, and its answer is heard.
    assert_eq!(seen["video"], serde_json::json!([512, 512]));
    assert!(seen["peak_of_answer"].as_i64().unwrap() > 1000, "the answer is heard: {seen}");
    // The words arrive as LiveKit carries them: the person's question, the agent's answer (final).
    heard_and_answered("en-us 150", &seen);
    // `lk.agent.state` followed the engine; the speakers too.
    let states: Vec<&str> = seen["agent_states"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    for state in ["thinking", "speaking", "listening"] {
        assert!(states.contains(&state), "{states:?}");
    }
    // The SDK published its microphone again after the upload (a renegotiation): published, still connected.
    assert_eq!(seen["published_after_upload"], serde_json::json!(["mic"]), "{seen}");
    assert_eq!(seen["connected_after_upload"], true, "{seen}");
    let speaking = seen["speaking"].to_string();
    assert!(speaking.contains("user") && speaking.contains("agent"), "{speaking}");

    // The record: ENDED, with the question and the answer; `participant_left` and `call_ended` delivered,
    // signed.
    let id = conversation_of(receiver);
    receiver.wait_for_event(&secret, &id, "call_ended", Duration::from_secs(20)).await;
    let detail = api(&client, key, Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
    assert_eq!(detail["status"], "ENDED");
    let transcript = detail["transcript"].to_string().to_lowercase();
    let answered = detail["transcript"].as_array().unwrap().iter().any(|entry| entry["role"] == "assistant");
    assert!(transcript.contains("capital") && answered, "{transcript}");
    let names = receiver.event_names(&secret, &id);
    assert!(names.contains(&"participant_left".to_string()), "{names:?}");
}

/// The user's final transcript that holds the question (a stray sound before it may be a turn of its own).
fn the_question<'a>(finals: &[&'a str]) -> &'a str {
    finals.iter().find(|text| words(text).contains(&"capital".to_string())).copied().unwrap_or_default()
}

/// The SDK's flow heard `QUESTION` word for word and the agent answered "Paris".
fn heard_and_answered(voice: &str, seen: &Value) {
    let user: Vec<&str> = seen["user_final"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(words(the_question(&user)), words(QUESTION), "{voice}: heard {user:?}: {seen}");
    let answer = seen["agent_final"][0].as_str().unwrap_or_default().to_lowercase();
    assert!(answer.contains("paris"), "{voice}: answered {answer:?}: {seen}");
}

/// The SDK asks the question in each of `VOICES` (0.5 s of silence before it, 1 s after, as a new user's
/// first try): heard word for word, answered "Paris".
async fn asks_in_voices(dir: &std::path::Path, base: &str, key: &str, receiver: &Receiver) {
    let client = reqwest::Client::new();
    let (agent_id, _) = geographer(&client, key, base, &receiver.hook_url, &EVENTS, false).await;
    for voice in VOICES {
        let question = dir.join(format!("question-{}.wav", voice.0));
        spoken_wav_as(&question, voice, QUESTION, 0.5, 1.0);
        let args = [&format!("{base}/v1"), key, agent_id.as_str(), question.to_str().unwrap()];
        let seen = run_script("trugen_conversation.py", &args).await;
        heard_and_answered(&format!("{} {}", voice.0, voice.1), &seen);
    }
}

/// The conversation the SDK started (the only one whose events reached the receiver).
fn conversation_of(receiver: &Receiver) -> String {
    let deliveries = receiver.deliveries();
    let (_, body) = deliveries.first().expect("the conversation's first webhook");
    serde_json::from_str::<Value>(body).unwrap()["conversation_id"].as_str().unwrap().to_string()
}
