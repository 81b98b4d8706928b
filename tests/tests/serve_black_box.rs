//! Starts the real `confab serve` on a free loopback port, creates a key with `confab keys create`, and
//! walks create → list (with `X-Total-Count`) → TruGen's SDK starting a session → delete over HTTP; then
//! stops it with SIGTERM.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use confab_tests::confab_bin;
use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn database_args(data: &std::path::Path, database_url: Option<&str>) -> Vec<String> {
    match database_url {
        Some(url) => vec!["--database-url".into(), url.into()],
        None => vec!["--data".into(), data.display().to_string()],
    }
}

async fn start(data: &std::path::Path, database_url: Option<&str>) -> Server {
    let port = free_port();
    let child = Command::new(confab_bin())
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .args(database_args(data, database_url))
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, base: format!("http://127.0.0.1:{port}") };
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if let Ok(response) = client.get(format!("{}/", server.base)).send().await
            && response.status() == 200
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("confab serve did not become ready");
}

fn create_key(data: &std::path::Path, database_url: Option<&str>) -> String {
    let output = Command::new(confab_bin())
        .args(["keys", "create", "--name", "black-box"])
        .args(database_args(data, database_url))
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "keys create prints exactly one line: {stdout:?}");
    assert!(stdout.ends_with('\n'));
    lines[0].to_string()
}

async fn walk(database_url: Option<&str>) {
    let data = tempfile_dir();
    let key = create_key(&data, database_url);
    let mut server = start(&data, database_url).await;
    let client = reqwest::Client::new();

    let unauthorized = client.get(format!("{}/v1/ext/agent", server.base)).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(
        unauthorized.json::<Value>().await.unwrap(),
        json!({ "error": "Unauthorized: not a valid authorization api key" })
    );

    let created: Value = client
        .post(format!("{}/v1/ext/agent", server.base))
        .header("X-API-Key", &key)
        .json(&json!({ "agent_name": "Black Box", "agent_system_prompt": "Hello." }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_string();

    let listed = client
        .get(format!("{}/v1/ext/agent?search=black", server.base))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    assert_eq!(listed.headers()["x-total-count"], "1");
    assert_eq!(listed.json::<Value>().await.unwrap()[0]["id"], id);

    trugen_sdk_starts_a_session(&server.base, &key, &id, &client).await;

    let deleted =
        client.delete(format!("{}/v1/ext/agent/{id}", server.base)).header("x-api-key", &key).send().await.unwrap();
    assert_eq!(deleted.json::<Value>().await.unwrap(), json!({ "id": id, "message": "Agent deleted successfully" }));
    let empty = client.get(format!("{}/v1/ext/agent", server.base)).header("x-api-key", &key).send().await.unwrap();
    assert_eq!(empty.headers()["x-total-count"], "0");

    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = server.child.wait().unwrap();
    assert!(status.success(), "graceful shutdown exits 0: {status}");
    let _ = std::fs::remove_dir_all(&data);
}

/// TruGen's official Python SDK (`trugen-sdk` 1.1.0, installed by `scripts/setup.sh` under
/// `CONFAB_TEST_TOOLS`) starts a session with `base_url` pointed at the server: it gets the LiveKit URL and an
/// access token for the conversation it started.
async fn trugen_sdk_starts_a_session(base: &str, key: &str, agent_id: &str, client: &reqwest::Client) {
    let tools =
        std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/confab-tools".into());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/trugen_create_session.py");
    let output = tokio::process::Command::new(tools.join("trugen/bin/python"))
        .arg(script)
        .args([&format!("{base}/v1"), key, agent_id])
        .output()
        .await
        .expect("the trugen-sdk venv (scripts/setup.sh)");
    assert!(output.status.success(), "create_session failed: {}", String::from_utf8_lossy(&output.stderr));
    let got: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON line");
    assert_eq!(got["rtc_server_url"], base.replacen("http://", "ws://", 1));
    let access = got["access_token"].as_str().unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "usr_black_box");
    let room = claims["video"]["room"].as_str().unwrap();
    let record: Value = client
        .get(format!("{base}/v1/ext/conversation/{room}"))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["status"], "STARTED");
    assert_eq!(record["agent_id"], agent_id);
    assert_eq!(record["user_name"], "Ada");
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-bb-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn serve_on_sqlite() {
    walk(None).await;
}

#[tokio::test]
async fn serve_on_postgres() {
    let admin = std::env::var("CONFAB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let name = format!("confab_bb_{}_{}", std::process::id(), free_port());
    let psql = |sql: String| {
        let status = Command::new("psql").args([admin.as_str(), "-q", "-c", &sql]).status().expect("psql is installed");
        assert!(status.success(), "PostgreSQL must be reachable at {admin}: {sql}");
    };
    psql(format!("CREATE DATABASE {name}"));
    let (base, _) = admin.rsplit_once('/').unwrap();
    walk(Some(&format!("{base}/{name}"))).await;
    psql(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
}
