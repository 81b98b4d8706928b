//! Real browsers for end-to-end tests, headless, driven from Rust: Debian's Chromium over the Chrome
//! DevTools Protocol (its microphone a WAV file, TESTING.md), and Firefox ESR over WebDriver BiDi (its
//! microphone Firefox's fake device, a 1 kHz tone the page should replace before it is sent; its sound
//! device a private PulseAudio null sink, `sound`). Both answer the same two questions: evaluate script
//! in the page, and wait until an expression has a value.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::sound::SoundServer;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const FIREFOX: &str = "/usr/bin/firefox-esr";

/// Longest wait for the browser to answer one command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How the page is driven.
enum Protocol {
    /// Chrome DevTools Protocol, connected to the page's target.
    Cdp,
    /// WebDriver BiDi, with the browsing context of the page.
    Bidi { context: String },
}

pub struct Browser {
    child: Child,
    /// `CONFAB_TEST_BROWSER=<random>` in the environment of the browser and of the crash handlers it
    /// starts (they leave its process group); the rest of its processes stay in its process group.
    marker: String,
    socket: Socket,
    protocol: Protocol,
    next_id: u64,
    profile: PathBuf,
    /// Firefox's sound device (Chromium plays into its own fake output).
    sound: Option<SoundServer>,
}

/// Firefox preferences for a test profile: fake, permitted media; sound through PulseAudio (the test's
/// null sink); autoplay; loopback ICE candidates.
const FIREFOX_PREFS: &str = r#"
user_pref("media.navigator.streams.fake", true);
user_pref("media.navigator.permission.disabled", true);
user_pref("media.cubeb.backend", "pulse");
user_pref("media.autoplay.default", 0);
user_pref("media.autoplay.blocking_policy", 0);
user_pref("media.peerconnection.ice.loopback", true);
user_pref("media.peerconnection.ice.obfuscate_host_addresses", false);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("app.update.disabledForTesting", true);
"#;

const MARKER_VARIABLE: &str = "CONFAB_TEST_BROWSER";

fn new_marker() -> String {
    format!("{MARKER_VARIABLE}={}", uuid::Uuid::new_v4().simple())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn profile_dir(browser: &str, port: u16) -> PathBuf {
    let profile = std::env::temp_dir().join(format!("confab-{browser}-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).unwrap();
    profile
}

/// Retries `attempt` every 100 ms for 30 s (a browser takes a moment to open its debugging port).
async fn within_30s<T, F: std::future::Future<Output = Option<T>>>(what: &str, mut attempt: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = attempt().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Browser {
    /// Starts Chromium on `url` with `microphone` as its fake capture device; connects to the page.
    pub async fn chromium(url: &str, microphone: &Path, log: &Path) -> Browser {
        let port = free_port();
        let profile = profile_dir("chromium", port);
        let marker = new_marker();
        let child = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                "--allow-loopback-in-peer-connection",
                "--autoplay-policy=no-user-gesture-required",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--use-file-for-fake-audio-capture={}", microphone.display()))
            .arg(format!("--remote-debugging-port={port}"))
            .arg(url)
            .env(MARKER_VARIABLE, &marker[MARKER_VARIABLE.len() + 1..])
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("chromium is installed (scripts/setup.sh)");
        let client = reqwest::Client::new();
        let ws_url = within_30s("chromium's DevTools endpoint", || async {
            let targets = client.get(format!("http://127.0.0.1:{port}/json/list")).send().await.ok()?;
            let targets = targets.json::<Vec<Value>>().await.ok()?;
            let page = targets.iter().find(|t| t["type"] == "page")?;
            Some(page["webSocketDebuggerUrl"].as_str()?.to_string())
        })
        .await;
        let (socket, _) = tokio_tungstenite::connect_async(ws_url.as_str()).await.expect("DevTools websocket");
        Browser { child, marker, socket, protocol: Protocol::Cdp, next_id: 1, profile, sound: None }
    }

    /// Starts Firefox ESR, its microphone Firefox's fake device (a tone), its speakers a PulseAudio null
    /// sink of its own, and opens `url`.
    pub async fn firefox(url: &str, log: &Path) -> Browser {
        let port = free_port();
        let profile = profile_dir("firefox", port);
        let marker = new_marker();
        std::fs::write(profile.join("user.js"), FIREFOX_PREFS).unwrap();
        let sound = SoundServer::start(&profile.with_extension("sound"));
        let child = Command::new(FIREFOX)
            .args(["--headless", "--no-remote", "--profile"])
            .arg(&profile)
            .arg(format!("--remote-debugging-port={port}"))
            .arg("about:blank")
            .env("MOZ_CRASHREPORTER_DISABLE", "1")
            .env(MARKER_VARIABLE, &marker[MARKER_VARIABLE.len() + 1..])
            .process_group(0)
            .env("PULSE_SERVER", sound.address())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("firefox-esr is installed (scripts/setup.sh)");
        let endpoint = format!("ws://127.0.0.1:{port}/session");
        let socket = within_30s("firefox's WebDriver BiDi endpoint", || async {
            tokio_tungstenite::connect_async(endpoint.as_str()).await.ok().map(|(socket, _)| socket)
        })
        .await;
        let mut browser = Browser {
            child,
            marker,
            socket,
            protocol: Protocol::Bidi { context: String::new() },
            next_id: 1,
            profile,
            sound: Some(sound),
        };
        browser.command("session.new", json!({ "capabilities": {} })).await;
        let tree = browser.command("browsingContext.getTree", json!({})).await;
        let context = tree["contexts"][0]["context"].as_str().expect("a browsing context").to_string();
        browser
            .command("browsingContext.navigate", json!({ "context": context, "url": url, "wait": "complete" }))
            .await;
        browser.protocol = Protocol::Bidi { context };
        browser
    }

    /// Sends one command; returns its result (panics on an error reply).
    async fn command(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "id": id, "method": method, "params": &params });
        self.socket.send(Message::Text(request.to_string().into())).await.expect("browser socket send");
        let reply = async {
            while let Some(message) = self.socket.next().await {
                let Ok(Message::Text(text)) = message else { continue };
                let reply: Value = serde_json::from_str(&text).unwrap();
                if reply["id"] == id {
                    return reply;
                }
            }
            panic!("the browser connection closed");
        };
        let reply = tokio::time::timeout(COMMAND_TIMEOUT, reply)
            .await
            .unwrap_or_else(|_| panic!("{method} got no answer within {COMMAND_TIMEOUT:?}: {params}"));
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    /// Evaluates `expression` in the page (as a user gesture, awaiting promises); returns its value.
    /// Panics when it throws.
    pub async fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression).await.unwrap_or_else(|thrown| panic!("{expression} threw: {thrown}"))
    }

    /// Evaluates `expression` in the page; its value, or what the page answered when it threw.
    pub async fn try_eval(&mut self, expression: &str) -> Result<Value, Value> {
        match &self.protocol {
            Protocol::Cdp => {
                let params = json!({ "expression": expression, "returnByValue": true, "awaitPromise": true,
                    "userGesture": true });
                let result = self.command("Runtime.evaluate", params).await;
                if result.get("exceptionDetails").is_some() {
                    return Err(result);
                }
                Ok(result["result"]["value"].clone())
            }
            Protocol::Bidi { context } => {
                let params = json!({ "expression": expression, "target": { "context": context },
                    "awaitPromise": true, "userActivation": true });
                let result = self.command("script.evaluate", params).await;
                if result["type"] != "success" {
                    return Err(result);
                }
                Ok(from_remote_value(&result["result"]))
            }
        }
    }

    /// Polls `expression` until it equals `expected`; panics with the last value after `timeout`. While
    /// it throws (a page still loading has no `document.body` yet) it is not there yet.
    pub async fn wait_for(&mut self, expression: &str, expected: &Value, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.try_eval(expression).await;
            if value.as_ref() == Ok(expected) {
                return;
            }
            if Instant::now() >= deadline {
                let page = self.try_eval("document.body.innerText.slice(0, 1000)").await;
                panic!("{expression} is {value:?}, not {expected}, after {timeout:?}; the page reads {page:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Saves what the page shows as a PNG at `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        use base64::Engine;
        let data = match &self.protocol {
            Protocol::Cdp => self.command("Page.captureScreenshot", json!({ "format": "png" })).await,
            Protocol::Bidi { context } => {
                let params = json!({ "context": context });
                self.command("browsingContext.captureScreenshot", params).await
            }
        };
        let png = base64::engine::general_purpose::STANDARD.decode(data["data"].as_str().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// The browser's sound device, when it has one of its own (Firefox).
    pub fn sound(&self) -> Option<&SoundServer> {
        self.sound.as_ref()
    }

    /// Kills the browser and every process it started, at once (a participant whose machine vanished).
    pub fn kill(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group the browser leads.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in confab_meetings::browser::processes_marked(&self.marker) {
            // SAFETY: kill(2) on a process whose environment carries this browser's marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// A WebDriver BiDi remote value as plain JSON (primitives, arrays and plain objects with string keys;
/// anything else as sent).
fn from_remote_value(value: &Value) -> Value {
    match value["type"].as_str() {
        Some("string" | "number" | "boolean") => value["value"].clone(),
        Some("null" | "undefined") => Value::Null,
        Some("array") => Value::Array(value["value"].as_array().into_iter().flatten().map(from_remote_value).collect()),
        Some("object") => Value::Object(
            value["value"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|pair| Some((pair[0].as_str()?.to_string(), from_remote_value(&pair[1]))))
                .collect(),
        ),
        _ => value.clone(),
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Makes the page's microphone a spoken WAV, through Web Audio, before the page asks for it: Firefox's
/// own Opus encoder and WebRTC stack still carry it. Until `speak()` starts the WAV (once the call is
/// live) the microphone carries silence from a running source, so the track is live from the first
/// packet and speaking changes only the samples. Firefox's fake device is never used, because it is a
/// 1 kHz tone: its automatic gain control raises the tone within a second or two until the VAD takes it
/// for speech, so a page that sent it first (and swapped in the WAV later) had a "turn" of tone
/// committed before the question whenever the machine was slow to swap.
pub fn microphone_from_wav(wav_url: &str) -> String {
    microphone_from_wav_in("window", wav_url)
}

/// `microphone_from_wav` for the page in another window of the same origin (`target`, an expression such
/// as `document.getElementById('call').contentWindow`); `speak()` is this window's.
pub fn microphone_from_wav_in(target: &str, wav_url: &str) -> String {
    format!(
        "(() => {{ const w = {target}; w.navigator.mediaDevices.getUserMedia = async () => {{ const ctx = new w.AudioContext(); \
         const buffer = await ctx.decodeAudioData(await (await w.fetch('{wav_url}')).arrayBuffer()); \
         const sink = ctx.createMediaStreamDestination(); \
         const silence = ctx.createConstantSource(); silence.offset.value = 0; silence.connect(sink); silence.start(); \
         const source = ctx.createBufferSource(); source.buffer = buffer; source.connect(sink); await ctx.resume(); \
         window.speak = () => {{ source.start(); return ctx.state; }}; return sink.stream; }}; return true; }})()"
    )
}
