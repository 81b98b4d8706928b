//! Debian's Chromium, headless, with a WAV file as its microphone (TESTING.md), driven over the Chrome
//! DevTools Protocol: evaluate script in the page and read the answer.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

pub const CHROMIUM: &str = "/usr/bin/chromium";

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct Browser {
    child: Child,
    socket: Socket,
    next_id: u64,
    _profile: tempfile_dir::Dir,
}

mod tempfile_dir {
    /// A directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Browser {
    /// Starts Chromium on `url` with `microphone` as its fake capture device; connects to the page.
    pub async fn launch(url: &str, microphone: &Path, log: &Path) -> Browser {
        let debug_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let profile = std::env::temp_dir().join(format!("confab-chromium-{}-{debug_port}", std::process::id()));
        std::fs::create_dir_all(&profile).unwrap();
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
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--use-file-for-fake-audio-capture={}", microphone.display()))
            .arg(format!("--remote-debugging-port={debug_port}"))
            .arg(url)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("chromium is installed (scripts/setup.sh)");
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let ws_url = loop {
            assert!(Instant::now() < deadline, "chromium's DevTools endpoint did not come up");
            if let Ok(response) = client.get(format!("http://127.0.0.1:{debug_port}/json/list")).send().await
                && let Ok(targets) = response.json::<Vec<Value>>().await
                && let Some(page) = targets.iter().find(|t| t["type"] == "page")
            {
                break page["webSocketDebuggerUrl"].as_str().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let (socket, _) = tokio_tungstenite::connect_async(ws_url.as_str()).await.expect("DevTools websocket");
        Browser { child, socket, next_id: 1, _profile: tempfile_dir::Dir(profile) }
    }

    /// Evaluates `expression` in the page (as a user gesture, awaiting promises); returns its value.
    pub async fn eval(&mut self, expression: &str) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "id": id, "method": "Runtime.evaluate", "params": {
            "expression": expression, "returnByValue": true, "awaitPromise": true, "userGesture": true } });
        self.socket.send(Message::Text(request.to_string().into())).await.expect("DevTools send");
        while let Some(message) = self.socket.next().await {
            let Ok(Message::Text(text)) = message else { continue };
            let reply: Value = serde_json::from_str(&text).unwrap();
            if reply["id"] == id {
                assert!(reply.get("error").is_none(), "DevTools error: {reply}");
                return reply["result"]["result"]["value"].clone();
            }
        }
        panic!("the DevTools connection closed");
    }

    /// Polls `expression` until it equals `expected`; panics with the last value after `timeout`.
    pub async fn wait_for(&mut self, expression: &str, expected: &Value, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.eval(expression).await;
            if &value == expected {
                return;
            }
            assert!(Instant::now() < deadline, "{expression} is {value}, not {expected}, after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Kills the browser at once (a participant whose machine vanished).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}
