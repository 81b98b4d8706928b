//! `POST /v1/ext/externalmeeting` sends the agent into a meeting on each platform — against local fakes of
//! Google Meet, Zoom and Microsoft Teams (`confab_tests::fake_meeting`), inside a loopback-only network
//! namespace. The bot's own Chromium opens the platform's URL (sent to the fake by host resolver rules),
//! joins with the requested name, and the other participant (a second Chromium on `host.html`) asks a
//! spoken question: it reaches `utterance_committed` with the speaker's name in the transcript, and the
//! agent's spoken answer is heard in the participant's page after the question. A bot left in the lobby
//! ends its conversation with `admission_timeout`; a removed bot, and one left alone, end their calls
//! cleanly.

use std::path::Path;
use std::time::{Duration, Instant};

use confab_tests::browser::Browser;
use confab_tests::fake_meeting::{Admission, FakeMeeting};
use confab_tests::netns::enter_loopback_only;
use confab_tests::receiver::Receiver;
use confab_tests::server::{self, Server, api, create_key, geographer};
use confab_tests::{silent_wav, spoken_wav};
use reqwest::Method;
use serde_json::{Value, json};

const EVENTS: [&str; 5] =
    ["utterance_committed", "agent.started_speaking", "agent.stopped_speaking", "participant_left", "call_ended"];

const MEETING_URLS: [(&str, &str); 3] = [
    ("google_meet", "https://meet.google.com/abc-defg-hij"),
    ("zoom", "https://us02web.zoom.us/j/85212345678?pwd=Zm9vYmFy"),
    ("teams", "https://teams.microsoft.com/l/meetup-join/19%3ameeting_NzY%40thread.v2/0?context=%7b%7d"),
];

struct Setup {
    server: Server,
    client: reqwest::Client,
    key: String,
    agent_id: String,
    secret: String,
    tmp: std::path::PathBuf,
}

impl Setup {
    /// A server whose meeting bots reach `fakes` (and are told to trust their certificate).
    async fn start(data: &Path, receiver: &Receiver, fake: &FakeMeeting, extra: &[&str]) -> Setup {
        let key = create_key(data);
        let tmp = data.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let rule = fake.resolver_rule();
        let mut args = vec![
            "--allow-private-webhooks",
            "--meeting-browser",
            confab_tests::browser::CHROMIUM,
            "--meeting-browser-arg=--ignore-certificate-errors",
        ];
        let rule_arg = format!("--meeting-browser-arg={rule}");
        args.push(&rule_arg);
        args.extend_from_slice(extra);
        // The bots' browser profiles go to the test's own temporary directory (checked empty at the end).
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = Server::start_with_env(data, port, &args, &[("TMPDIR", &tmp)]).await;
        let client = reqwest::Client::new();
        let (agent_id, secret) = geographer(&client, &key, &server.base, &receiver.hook_url, &EVENTS, true).await;
        Setup { server, client, key, agent_id, secret, tmp }
    }

    /// Sends the agent into `meeting_url`; returns the conversation id from `X-Conversation-Id`.
    async fn send_bot(&self, meeting_url: &str, user_name: &str) -> String {
        let body = json!({ "agent_id": self.agent_id, "meeting_url": meeting_url, "user_name": user_name,
            "user_id": "meeting-1", "mode": "addressed" });
        let response = self
            .client
            .post(format!("{}/v1/ext/externalmeeting", self.server.base))
            .header("x-api-key", &self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
        let id = response.headers()["x-conversation-id"].to_str().unwrap().to_string();
        assert_eq!(response.text().await.unwrap(), "Agent request successfully created.");
        id
    }

    async fn detail(&self, id: &str) -> Value {
        api(&self.client, &self.key, Method::GET, format!("{}/v1/ext/conversation/{id}", self.server.base), None).await
    }

    async fn wait_for_status(&self, id: &str, status: &str, timeout: Duration) {
        server::wait_for_status(&self.client, &self.key, &self.server.base, id, status, timeout).await;
    }

    async fn wait_until_ended(&self, id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let detail = self.detail(id).await;
            if detail["status"] == "ENDED" {
                return detail;
            }
            assert!(Instant::now() < deadline, "{id} did not end within {timeout:?}: {detail}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// No bot browser or profile is left behind.
    async fn assert_browsers_cleaned_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left: Vec<_> = std::fs::read_dir(&self.tmp).unwrap().flatten().map(|e| e.file_name()).collect();
            let running = bot_processes();
            if left.is_empty() && running.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "left behind: {left:?}, processes {running:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Processes of any bot's browser (renderers included: they carry the bot's marker in their environment).
fn bot_processes() -> Vec<i32> {
    confab_meetings::browser::processes_with_variable(confab_meetings::browser::MARKER_VARIABLE)
}

async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The two tests that run browsers and servers take turns: together they starve two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_takes_part_in_a_meeting_on_each_platform() {
    let _turn = ONE_AT_A_TIME.lock().await;
    if !enter_loopback_only("the_agent_takes_part_in_a_meeting_on_each_platform") {
        return;
    }
    let dir = tempfile_dir("meetings");
    let question = dir.join("question.wav");
    // The name comes last: on a loaded machine the first word of a turn is the one most often misheard.
    spoken_wav(&question, "What is the capital of France, Geographer?", 0.5, 0.3);
    let silence = dir.join("silence.wav");
    silent_wav(&silence, 1.0);
    for (platform, meeting_url) in MEETING_URLS {
        let receiver = Receiver::start(vec![]).await;
        let fake = FakeMeeting::start(platform, Admission::Admit, std::fs::read(&question).unwrap()).await;
        let setup = Setup::start(&dir.join(platform), &receiver, &fake, &[]).await;
        let mut host = Browser::chromium(&fake.host_url(), &silence, &dir.join(format!("{platform}-host.log"))).await;
        host.wait_for("typeof window.speak", &json!("function"), Duration::from_secs(30)).await;

        let id = setup.send_bot(meeting_url, "Confab Notes").await;
        wait_until(&format!("{platform}: the bot's media reaching the host"), Duration::from_secs(90), || {
            fake.media_connected()
        })
        .await;
        assert_eq!(fake.bot_name().as_deref(), Some("Confab Notes"), "{platform}");
        assert_eq!(fake.bot_state(), "in_call");
        let url = format!("{}/v1/ext/conversation?type=external_meeting", setup.server.base);
        let listed = api(&setup.client, &setup.key, Method::GET, url, None).await;
        let record = listed.as_array().unwrap().iter().find(|c| c["id"] == id.as_str()).expect("listed").clone();
        assert_eq!(record["type"], "external_meeting");
        assert_eq!(record["user_name"], "Confab Notes");
        assert_eq!(record["meta_data"]["meeting"]["platform"], platform);
        assert_eq!(record["meta_data"]["meeting"]["mode"], "addressed");

        // The call is up once the agent's session hears the meeting (IN_PROGRESS as media flows).
        setup.wait_for_status(&id, "IN_PROGRESS", Duration::from_secs(60)).await;
        host.eval("window.speak()").await;
        receiver.wait_for_event(&setup.secret, &id, "utterance_committed", Duration::from_secs(60)).await;
        receiver.wait_for_event(&setup.secret, &id, "agent.started_speaking", Duration::from_secs(60)).await;
        host.wait_for("window.heardAfterQuestion(0.01)", &json!(true), Duration::from_secs(30)).await;
        let frames = host.eval("window.framesFromBot()").await.as_u64().unwrap();
        assert!(frames > 0, "{platform}: the agent's face never reached the meeting");
        receiver.wait_for_event(&setup.secret, &id, "agent.stopped_speaking", Duration::from_secs(60)).await;

        fake.end();
        let ended = setup.wait_until_ended(&id, Duration::from_secs(30)).await;
        assert_eq!(ended["end_reason"], "meeting_ended", "{platform}: {ended}");
        let transcript = ended["transcript"].as_array().unwrap();
        let asked = transcript.iter().find(|t| t["role"] == "user").expect("the question is in the transcript");
        assert!(asked["content"].as_str().unwrap().to_lowercase().contains("france"), "{asked}");
        assert_eq!(asked["speaker"], "Ada Lovelace", "{platform}: {asked}");
        assert!(transcript.iter().any(|t| t["role"] == "assistant"), "{transcript:?}");
        receiver.wait_for_event(&setup.secret, &id, "call_ended", Duration::from_secs(30)).await;
        setup.assert_browsers_cleaned_up().await;
        host.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_kept_in_the_lobby_or_removed_ends_its_conversation() {
    let _turn = ONE_AT_A_TIME.lock().await;
    if !enter_loopback_only("a_bot_kept_in_the_lobby_or_removed_ends_its_conversation") {
        return;
    }
    let dir = tempfile_dir("lobby");
    let receiver = Receiver::start(vec![]).await;

    // Zoom: nobody admits the bot within the lobby timeout.
    let fake = FakeMeeting::start("zoom", Admission::Hold, vec![]).await;
    let setup = Setup::start(&dir.join("lobby"), &receiver, &fake, &["--meeting-lobby-timeout", "4"]).await;
    let id = setup.send_bot("https://zoom.us/wc/join/852123456", "Confab Notes").await;
    let ended = setup.wait_until_ended(&id, Duration::from_secs(120)).await;
    assert_eq!(fake.bot_state(), "lobby");
    assert_eq!(ended["end_reason"], "admission_timeout", "{ended}");
    receiver.wait_for_event(&setup.secret, &id, "call_ended", Duration::from_secs(30)).await;
    let events = receiver.events(&setup.secret, &id);
    let call_ended = events.iter().find(|e| e["event"]["name"] == "call_ended").unwrap();
    assert_eq!(call_ended["event"]["payload"]["reason"], "admission_timeout", "{call_ended}");
    setup.assert_browsers_cleaned_up().await;
    drop(setup);

    // Teams: admitted from the lobby, then removed by the host.
    let receiver = Receiver::start(vec![]).await;
    let fake = FakeMeeting::start("teams", Admission::Hold, vec![]).await;
    let setup = Setup::start(&dir.join("removed"), &receiver, &fake, &[]).await;
    let id = setup.send_bot("https://teams.live.com/meet/9381234567?p=abc", "Confab Notes").await;
    wait_until("the bot in the lobby", Duration::from_secs(60), || fake.bot_state() == "lobby").await;
    fake.admit();
    // Nobody else speaks: the bot's call still carries the meeting's silence.
    setup.wait_for_status(&id, "IN_PROGRESS", Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    fake.remove_bot();
    let ended = setup.wait_until_ended(&id, Duration::from_secs(30)).await;
    assert_eq!(ended["end_reason"], "removed_from_meeting", "{ended}");
    receiver.wait_for_event(&setup.secret, &id, "call_ended", Duration::from_secs(30)).await;
    setup.assert_browsers_cleaned_up().await;
    drop(setup);

    // Google Meet: everyone else leaves; the bot follows after the alone timeout.
    let receiver = Receiver::start(vec![]).await;
    let fake = FakeMeeting::start("google_meet", Admission::Admit, vec![]).await;
    let setup = Setup::start(&dir.join("alone"), &receiver, &fake, &["--meeting-alone-timeout", "3"]).await;
    let id = setup.send_bot("https://meet.google.com/xyz-abcd-efg", "Confab Notes").await;
    setup.wait_for_status(&id, "IN_PROGRESS", Duration::from_secs(60)).await;
    fake.host_leaves();
    let left = Instant::now();
    let ended = setup.wait_until_ended(&id, Duration::from_secs(30)).await;
    assert!(left.elapsed() >= Duration::from_secs(3), "left after {:?}", left.elapsed());
    assert_eq!(ended["end_reason"], "left_alone", "{ended}");
    receiver.wait_for_event(&setup.secret, &id, "call_ended", Duration::from_secs(30)).await;
    setup.assert_browsers_cleaned_up().await;
}

#[tokio::test]
async fn meeting_urls_of_no_supported_platform_are_refused_in_plain_text() {
    let dir = tempfile_dir("refused");
    let key = create_key(&dir);
    let server = Server::start(&dir, &["--meeting-browser", confab_tests::browser::CHROMIUM]).await;
    let client = reqwest::Client::new();
    let agent = json!({ "agent_name": "Geographer", "agent_system_prompt": "Be brief." });
    let agent = api(&client, &key, Method::POST, format!("{}/v1/ext/agent", server.base), Some(agent)).await;
    for url in ["https://meet.example.com/abc", "not a url", "http://meet.google.com/abc-defg-hij", ""] {
        let body = json!({ "agent_id": agent["id"], "meeting_url": url, "user_name": "Notes", "user_id": "u" });
        let response = client
            .post(format!("{}/v1/ext/externalmeeting", server.base))
            .header("x-api-key", &key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{url}");
        assert!(response.headers().get("x-conversation-id").is_none());
        assert_eq!(response.text().await.unwrap(), "Unable to create agent request.", "{url}");
    }
    let all = api(&client, &key, Method::GET, format!("{}/v1/ext/conversation", server.base), None).await;
    assert_eq!(all.as_array().unwrap().len(), 0, "nothing is created for a refused request");
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-test-mtg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
