//! The OpenAPI document against the server that serves it (issue 10, defect 10): schemathesis (pinned,
//! installed by `scripts/setup.sh` under `CONFAB_TEST_TOOLS`, default `/var/tmp/confab-tools`) runs every
//! check (`--checks all`) in every phase on every operation, against `confab serve` on SQLite and on
//! PostgreSQL. A finding fails the test with schemathesis' report, which shows the request to replay.
//!
//! The seed is fixed so a run is repeatable; `tests/schemathesis/` holds the settings (the few operations
//! where a valid-looking request may be refused for a reason no schema can state) and the hook that sends
//! `application/sdp` bodies.

use std::path::{Path, PathBuf};
use std::process::Command;

use confab_tests::fleet::{create_key, drop_database, fresh_database};
use confab_tests::server::Server;

/// Examples per operation and phase.
const EXAMPLES: &str = "20";
const SEED: &str = "1";

fn schemathesis() -> PathBuf {
    let tools = std::env::var_os("CONFAB_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/confab-tools"));
    let bin = tools.join("schemathesis/bin/schemathesis");
    assert!(bin.exists(), "{} is missing: run scripts/setup.sh", bin.display());
    bin
}

fn settings_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemathesis")
}

/// Runs schemathesis against `base` with `key`; panics with its report when it finds anything.
fn run_schemathesis(base: &str, key: &str, work: &Path) {
    let output = Command::new(schemathesis())
        .current_dir(work)
        .env("PYTHONPATH", settings_dir())
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .arg("--config-file")
        .arg(settings_dir().join("schemathesis.toml"))
        .args(["run", &format!("{base}/openapi.json"), "--checks", "all", "-H", &format!("x-api-key: {key}")])
        .args(["--max-examples", EXAMPLES, "--seed", SEED, "--workers", "1", "--generation-database", "none"])
        .args(["--no-color", "--request-timeout", "30"])
        .output()
        .unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "schemathesis found problems against {base}:\n{report}");
    assert!(report.contains("Tested:"), "schemathesis tested nothing:\n{report}");
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("confab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_on_sqlite() {
    let dir = scratch("schemathesis-sqlite");
    let data = dir.join("data");
    let output = Command::new(confab_tests::confab_bin())
        .args(["keys", "create", "--name", "schemathesis", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let key = String::from_utf8(output.stdout).unwrap().trim().to_string();
    let server = Server::start(&data, &["--no-preload"]).await;
    let base = server.base.clone();
    let work = dir.clone();
    tokio::task::spawn_blocking(move || run_schemathesis(&base, &key, &work)).await.unwrap();
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_on_postgresql() {
    let dir = scratch("schemathesis-postgres");
    let database_url = fresh_database("confab_schemathesis");
    let key = create_key(&database_url);
    let server = Server::start(&dir.join("data"), &["--no-preload", "--database-url", &database_url]).await;
    let base = server.base.clone();
    let work = dir.clone();
    tokio::task::spawn_blocking(move || run_schemathesis(&base, &key, &work)).await.unwrap();
    drop(server);
    drop_database(&database_url);
    let _ = std::fs::remove_dir_all(&dir);
}
