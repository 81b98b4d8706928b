//! The two ways into a call, side by side (issue 38's benchmark), against the real `confab serve` (the
//! release binary beside this bench) with the local-model agent, in a network namespace of its own
//! (LiveKit's libwebrtc gathers no loopback candidates: `confab_tests::netns`):
//! - **Join time**, p50/p95 over JOINS joins one after another. LiveKit: `trugen-sdk` 1.1.0 on LiveKit's
//!   Python client (`benches/scripts/livekit_clients.py joins`), `create_session` → connected → first
//!   decoded agent video frame. The join page's path: our `Offerer` doing what the page does (create the
//!   conversation → SDP offer → connected → first agent video packet).
//! - **Calls per core**: CALLS calls held at once for SECONDS, each sending a microphone of quiet noise and
//!   receiving the agent's face and voice; the server process's CPU time (utime + stime, /proc) per
//!   call-second on each path. The clients share the cores and are not counted.
//!
//! Command: `cargo build --release --bin confab && cargo bench -p confab-benches --bench call_paths`
//! (environment: `CONFAB_BENCH_JOINS`, default 20; `CONFAB_BENCH_CALLS`, 4; `CONFAB_BENCH_SECONDS`, 20). Under
//! `cargo test` it runs one join each way and holds one call for 2 s.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use confab_tests::caller::{Caller, token_of};
use confab_tests::netns::enter_loopback_only;
use confab_tests::receiver::Receiver;
use confab_tests::server::{Server, api, create_key, geographer, wait_for_preload};
use rtc::rtp_transceiver::rtp_sender::RtpCodecKind;
use serde_json::{Value, json};
use webrtc::media_stream::track_remote::TrackRemoteEvent;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Set before the bench re-runs itself in its namespace (where `--bench` is no longer among the arguments).
const MODE: &str = "CONFAB_BENCH_CALL_PATHS_MODE";

fn main() {
    if std::env::var_os(MODE).is_none() {
        let mode = if std::env::args().any(|a| a == "--bench") { "bench" } else { "smoke" };
        // SAFETY: no other thread runs yet.
        unsafe { std::env::set_var(MODE, mode) };
    }
    if !enter_loopback_only("call_paths") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if std::env::var(MODE).as_deref() == Ok("smoke") {
        // `cargo test`: one join each way and one call held briefly, to keep the bench working.
        return runtime.block_on(bench(1, 1, 2));
    }
    runtime.block_on(bench(
        setting("CONFAB_BENCH_JOINS", 20),
        setting("CONFAB_BENCH_CALLS", 4),
        setting("CONFAB_BENCH_SECONDS", 20) as u64,
    ));
}

async fn bench(joins: usize, calls: usize, seconds: u64) {
    let dir = std::env::temp_dir().join(format!("confab-call-paths-{}", std::process::id()));
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = create_key(&data);
    let server = Server::start(&data, &["--allow-private-webhooks"]).await;
    wait_for_preload(&data).await;
    let client = reqwest::Client::new();
    let receiver = Receiver::start(vec![]).await;
    let (agent, _) = geographer(&client, &key, &server.base, &receiver.hook_url, &["call_ended"], false).await;
    let base = server.base.clone();

    let livekit = python(&["joins", &format!("{base}/v1"), &key, &agent, &joins.to_string()]).await;
    let numbers =
        |name: &str| -> Vec<f64> { livekit[name].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect() };
    let (mut page_connect, mut page_first) = (vec![], vec![]);
    for _ in 0..joins {
        let (connected, first) = join_page_join(&client, &base, &key, &agent).await;
        page_connect.push(connected);
        page_first.push(first);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("join time over {joins} joins, p50 / p95 (ms):");
    println!("| path | connected | first agent video |");
    println!("|---|---|---|");
    println!(
        "| LiveKit (trugen-sdk) | {} | {} |",
        percentiles(numbers("connect_ms")),
        percentiles(numbers("first_frame_ms"))
    );
    println!("| join page (Offerer) | {} | {} |", percentiles(page_connect), percentiles(page_first));

    let pid = server.child.id();
    let whip = hold_join_page_calls(&client, &base, &key, &agent, calls, seconds, pid).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let livekit = hold_livekit_calls(&base, &key, &agent, calls, seconds, pid).await;
    println!("{calls} calls held {seconds} s: server CPU per call-second, calls per core");
    for (path, cpu) in [("join page (Offerer)", whip), ("LiveKit (trugen-sdk)", livekit)] {
        println!("| {path} | {:.1} ms | {:.0} |", cpu * 1000.0, 1.0 / cpu);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// "p50 / p95" of `values` (ms).
fn percentiles(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() as f64 - 1.0) * q).round() as usize];
    format!("{:.0} / {:.0}", at(0.5), at(0.95))
}

/// One join as the join page makes it; (connected, first agent video packet) in ms from creating the
/// conversation.
async fn join_page_join(client: &reqwest::Client, base: &str, key: &str, agent: &str) -> (f64, f64) {
    let started = Instant::now();
    let mut call = join_page_call(client, base, key, agent).await;
    let connected = started.elapsed().as_secs_f64() * 1000.0;
    loop {
        let track = call.caller.offerer.remote_tracks.recv().await.expect("the agent's tracks");
        if track.kind().await != RtpCodecKind::Video {
            continue;
        }
        while let Some(event) = track.poll().await {
            if let TrackRemoteEvent::OnRtpPacket(_) = event {
                let first = started.elapsed().as_secs_f64() * 1000.0;
                call.hang_up(client, base).await;
                return (connected, first);
            }
        }
    }
}

/// A call joined as the join page joins, and what hangs it up.
struct PageCall {
    caller: Caller,
    id: String,
    token: String,
}

impl PageCall {
    async fn hang_up(&self, client: &reqwest::Client, base: &str) {
        self.caller.hang_up(client, base, &self.id, &self.token).await;
    }
}

async fn join_page_call(client: &reqwest::Client, base: &str, key: &str, agent: &str) -> PageCall {
    let body = json!({ "agent_id": agent, "user_name": "Bench", "user_id": "bench" });
    let conversation = api(client, key, reqwest::Method::POST, format!("{base}/v1/ext/conversation"), Some(body)).await;
    let (id, token) = (conversation["id"].as_str().unwrap().to_string(), token_of(&conversation));
    let caller = Caller::join(client, base, &id, &token, vec![]).await;
    PageCall { caller, id, token }
}

/// The server's CPU seconds so far (utime + stime of `pid`).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Server CPU seconds per call-second with `calls` join-page calls held `seconds`.
async fn hold_join_page_calls(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    agent: &str,
    calls: usize,
    seconds: u64,
    pid: u32,
) -> f64 {
    let mut held = vec![];
    for _ in 0..calls {
        held.push(join_page_call(client, base, key, agent).await);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let spent = cpu_seconds(pid) - before;
    assert!(held.iter().all(|call| call.caller.connected()), "every call stayed up");
    for call in &held {
        call.hang_up(client, base).await;
    }
    spent / (calls as f64 * seconds as f64)
}

/// Server CPU seconds per call-second with `calls` LiveKit calls held `seconds` (the Python client).
async fn hold_livekit_calls(base: &str, key: &str, agent: &str, calls: usize, seconds: u64, pid: u32) -> f64 {
    use tokio::io::AsyncBufReadExt;
    let args = ["hold", &format!("{base}/v1"), key, agent, &calls.to_string(), &seconds.to_string()];
    let mut child = python_command(&args).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let held: Value = serde_json::from_str(&lines.next_line().await.unwrap().expect("held")).unwrap();
    assert_eq!(held["held"], calls);
    let before = cpu_seconds(pid);
    let frames: Value = serde_json::from_str(&lines.next_line().await.unwrap().expect("frames")).unwrap();
    let spent = cpu_seconds(pid) - before;
    eprintln!("video frames each LiveKit call received while held: {}", frames["frames"]);
    assert!(child.wait().await.unwrap().success());
    spent / (calls as f64 * seconds as f64)
}

fn python_command(args: &[&str]) -> tokio::process::Command {
    let tools =
        std::env::var_os("CONFAB_TEST_TOOLS").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/confab-tools".into());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/livekit_clients.py");
    let mut command = tokio::process::Command::new(tools.join("trugen/bin/python"));
    command.arg(script).args(args).kill_on_drop(true);
    command
}

/// Runs the Python client to its end; its JSON line.
async fn python(args: &[&str]) -> Value {
    let output = python_command(args).output().await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}
