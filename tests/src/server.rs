//! The real `confab serve` as a child process on a free loopback port, and `confab keys create`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::confab_bin;

pub struct Server {
    pub child: Child,
    pub base: String,
    pub port: u16,
}

impl Server {
    /// Starts `confab serve --addr 127.0.0.1:<free port> --data <data> <extra>`; waits until it answers.
    /// Its log goes to `<data>/serve.log`.
    pub async fn start(data: &Path, extra: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Server::start_on(data, port, extra).await
    }

    /// As `start`, on a given port (a restart keeps its URLs).
    pub async fn start_on(data: &Path, port: u16, extra: &[&str]) -> Server {
        Server::start_with_env(data, port, extra, &[]).await
    }

    /// As `start_on`, with more environment variables.
    pub async fn start_with_env(data: &Path, port: u16, extra: &[&str], env: &[(&str, &Path)]) -> Server {
        std::fs::create_dir_all(data).unwrap();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(data.join("serve.log")).unwrap();
        let child = Command::new(confab_bin())
            .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data"])
            .arg(data)
            .args(extra)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "info,confab_engine=debug,sqlx=warn,webrtc=warn,rtc=warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let server = Server { child, base: format!("http://127.0.0.1:{port}"), port };
        let client = reqwest::Client::new();
        for _ in 0..600 {
            if let Ok(response) = client.get(format!("{}/", server.base)).send().await
                && response.status() == 200
            {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("confab serve did not become ready; see {}", data.join("serve.log").display());
    }

    /// SIGTERM, then wait for a graceful exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        terminate(&mut self.child)
    }

    /// SIGKILL: the process dies at once.
    pub fn kill(&mut self) {
        kill(&mut self.child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the server logging to `<data>/serve.log` has preloaded the default local models (it loads
/// them in the background at start, and a call arriving meanwhile waits for them before it is answered);
/// the log line, which says how many failed. Tests that time a call's setup start after it.
pub async fn wait_for_preload(data: &Path) -> String {
    let log = data.join("serve.log");
    for _ in 0..1_200 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains("local models preloaded")) {
            return line.to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no \"local models preloaded\" line within 120 s in {}", log.display());
}

/// SIGTERM to `child`, then wait for it to exit.
pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    child.wait().unwrap()
}

/// SIGKILL to `child`, and reap it.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `confab keys create --data <data>`: the new key.
pub fn create_key(data: &Path) -> String {
    let output = Command::new(confab_bin())
        .args(["keys", "create", "--name", "test", "--data"])
        .arg(data)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// One control-plane request with the API key; asserts success and returns the JSON body.
pub async fn api(
    client: &reqwest::Client,
    key: &str,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> Value {
    let mut request = client.request(method, url).header("x-api-key", key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Waits until the conversation `id` reads `status` (the media worker sets it as media flows); panics
/// after `timeout` with the status it has.
pub async fn wait_for_status(
    client: &reqwest::Client,
    key: &str,
    base: &str,
    id: &str,
    status: &str,
    timeout: Duration,
) {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let detail = api(client, key, reqwest::Method::GET, format!("{base}/v1/ext/conversation/{id}"), None).await;
        if detail["status"] == status {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{id} is {}, not {status}, after {timeout:?}", detail["status"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates the live tests' agent on the local models ("Geographer", one-sentence answers, the stock face)
/// whose `events` go to `hook_url`; returns (agent id, webhook secret).
pub async fn geographer(
    client: &reqwest::Client,
    key: &str,
    base: &str,
    hook_url: &str,
    events: &[&str],
    record: bool,
) -> (String, String) {
    let agent = serde_json::json!({
        "agent_name": "Geographer",
        "agent_system_prompt": "You are a helpful assistant. Answer in one short sentence.",
        "avatars": [{ "avatar_key_id": "stock-amara", "config": {
            "llm": { "provider": "local" },
            "stt": { "provider": "local", "max_endpointing_delay": 1.0 },
            "tts": { "provider": "local" } } }],
        "callback_url": hook_url,
        "callback_events": events,
        "record": record
    });
    let agent = api(client, key, reqwest::Method::POST, format!("{base}/v1/ext/agent"), Some(agent)).await;
    (agent["id"].as_str().unwrap().to_string(), agent["webhook_secret"].as_str().unwrap().to_string())
}
