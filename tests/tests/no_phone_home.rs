//! Issue 10, defect 14: an offline, self-hosted server makes no connection it was not asked to make.
//! `confab serve` (with its media worker, so ONNX Runtime and every local model are loaded) runs under
//! `strace`, which records every `connect`/`sendto`/`sendmsg` of every thread; it is used through the API
//! and left running for 15 s (ONNX Runtime's telemetry was seen about 9 s after start). It runs on a
//! fresh PostgreSQL database, so the record holds its connections to 127.0.0.1:5432 (the tracing is
//! seen to work). Every network destination in the record must be loopback: no telemetry, no DNS lookup.

use std::process::{Command, Stdio};
use std::time::Duration;

use confab_tests::confab_bin;
use confab_tests::server::api;
use reqwest::Method;
use serde_json::json;

/// Network destinations (`sin_addr`/`sin6_addr`) in an strace record.
fn destinations(record: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in record.lines() {
        for marker in ["inet_addr(\"", "inet_pton(AF_INET6, \""] {
            if let Some(start) = line.find(marker) {
                let rest = &line[start + marker.len()..];
                found.push(rest[..rest.find('"').unwrap_or(rest.len())].to_string());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_connects_nowhere_it_was_not_asked_to() {
    let dir = std::env::temp_dir().join(format!("confab-no-phone-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let admin = std::env::var("CONFAB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let name = format!("confab_quiet_{}", std::process::id());
    let psql = |sql: String| {
        let status = Command::new("psql").args([admin.as_str(), "-q", "-c", &sql]).status().expect("psql is installed");
        assert!(status.success(), "PostgreSQL must be reachable at {admin}: {sql}");
    };
    psql(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    psql(format!("CREATE DATABASE {name}"));
    let database_url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    let created =
        Command::new(confab_bin()).args(["keys", "create", "--database-url", &database_url]).output().unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let key = String::from_utf8(created.stdout).unwrap().trim().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let record = dir.join("strace.log");
    let mut server = Command::new("strace")
        .args(["--seccomp-bpf", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o"])
        .arg(&record)
        .arg(confab_bin())
        .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data"])
        .arg(&data)
        .args(["--database-url", &database_url])
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        // The binary must turn ONNX Runtime's telemetry off by itself (cargo sets it for tests).
        .env_remove("ORT_DISABLE_TELEMETRY")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
        .spawn()
        .expect("strace runs (scripts/setup.sh installs it)");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut ready = false;
    for _ in 0..600 {
        if client.get(format!("{base}/")).send().await.is_ok_and(|r| r.status() == 200) {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "confab serve did not start under strace; see {}", dir.join("serve.log").display());
    // Use it: an agent, a conversation, the stock avatars.
    let agent =
        api(&client, &key, Method::POST, format!("{base}/v1/ext/agent"), Some(json!({ "agent_name": "Quiet" }))).await;
    api(&client, &key, Method::POST, format!("{base}/v1/ext/conversation"), Some(json!({ "agent_id": agent["id"] })))
        .await;
    api(&client, &key, Method::GET, format!("{base}/v1/ext/avatars"), None).await;
    // The observation window (not a timing assertion: anything sent in it is recorded).
    tokio::time::sleep(Duration::from_secs(15)).await;
    // SIGTERM to `confab` itself (strace's child), then strace ends with it.
    let _ = Command::new("pkill").args(["-TERM", "-P", &server.id().to_string()]).status();
    let _ = server.wait();
    let text = std::fs::read_to_string(&record).unwrap();
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    assert!(log.contains("media worker ready"), "the media worker (ONNX Runtime, the models) was loaded: {log}");
    let destinations = destinations(&text);
    assert!(destinations.iter().any(|d| d == "127.0.0.1"), "the record holds the database connections: {text}");
    let elsewhere: Vec<&String> = destinations.iter().filter(|d| !matches!(d.as_str(), "127.0.0.1" | "::1")).collect();
    assert!(elsewhere.is_empty(), "connections beyond loopback: {elsewhere:?}\n{text}");
    psql(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    let _ = std::fs::remove_dir_all(&dir);
}
