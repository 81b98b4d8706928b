//! Fleet dispatch through NATS JetStream and PostgreSQL: the real `Dispatcher` (replica side) and the real
//! `FleetWorker` (worker side: reserve a slot, take a job, claim the conversation by compare-and-set,
//! answer the offer relayed by request-reply) with simulated media (the SDP answer is immediate, the call
//! ends at once). Its own `nats-server` on a free loopback port; a fresh PostgreSQL database.
//!
//! Measured: signalling request → answer latency (p50/p99) with 1 and 4 workers, one call at a time;
//! calls admitted per second with 32 callers at once; and the scale simulation: thousands of simulated
//! workers (each holding a pull request and heartbeating every 2 s) while calls are dispatched, on one
//! queue or sharded over several (`CONFAB_BENCH_WORKERS`, default 2,000; `CONFAB_BENCH_QUEUES`, default 1).
//! `cargo bench -p confab-benches --bench dispatch` (needs nats-server and PostgreSQL at
//! CONFAB_TEST_POSTGRES_URL); under `cargo test`, a few calls on 1 and 4 workers.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use confab_benches::api_post;
use confab_benches::percentile;
use confab_calls::fleet_protocol::DEFAULT_QUEUE;
use confab_calls::{IceServers, JoinError};
use confab_http::replica::dispatch::Dispatcher;
use confab_store::Db;
use confab_worker::fleet::{CallHost, FleetWorker};
use futures_util::future::BoxFuture;
use serde_json::json;

/// Media that admits every call at once; each call is over when it is admitted, and its conversation is
/// ENDED then, as a real call's is when it ends (a replica counts the calls live workers hold from that).
struct SimulatedMedia {
    max_calls: usize,
    db: Db,
}

#[async_trait::async_trait]
impl CallHost for SimulatedMedia {
    async fn join(&self, _conversation_id: &str, _offer_sdp: String) -> Result<String, JoinError> {
        Ok("v=0\r\n".to_string())
    }
    fn finished(&self, conversation_id: &str) -> BoxFuture<'static, ()> {
        let (db, id) = (self.db.clone(), conversation_id.to_string());
        Box::pin(async move {
            confab_store::workers::end_with_reason(&db, &id, "completed").await.expect("the call's record ends");
        })
    }
    fn hang_up(&self, _conversation_id: &str) -> bool {
        false
    }
    fn active_calls(&self) -> usize {
        0
    }
    fn max_calls(&self) -> usize {
        self.max_calls
    }
    async fn shutdown(&self) {}
}

struct NatsServer(Child);

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_nats(dir: &std::path::Path) -> (NatsServer, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())
        .unwrap_or("nats-server");
    let child = Command::new(binary)
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server is installed");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    (NatsServer(child), format!("nats://127.0.0.1:{port}"))
}

fn admin_url() -> String {
    std::env::var("CONFAB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

fn database_name() -> String {
    format!("confab_bench_dispatch_{}", std::process::id())
}

/// Runs `statement` on the admin database.
fn psql(statement: &str) {
    let output = Command::new("psql").args([admin_url().as_str(), "-q", "-c", statement]).output().unwrap();
    assert!(output.status.success(), "{statement}: {}", String::from_utf8_lossy(&output.stderr));
}

fn fresh_database() -> String {
    let name = database_name();
    psql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    psql(&format!("CREATE DATABASE {name}"));
    format!("{}/{name}", admin_url().rsplit_once('/').unwrap().0)
}

/// `count` new conversations of one agent.
async fn conversations(router: &Router, key: &str, agent_id: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let conversation = api_post(router, key, "/v1/ext/conversation", json!({ "agent_id": agent_id })).await;
        ids.push(conversation["id"].as_str().unwrap().to_string());
    }
    ids
}

/// Starts `count` simulated workers of `queue` sharing `connections` NATS connections; returns their stop
/// signal.
async fn start_workers(
    nats: &str,
    db: &Db,
    prefix: &str,
    count: usize,
    connections: usize,
    queue: &str,
) -> Arc<tokio::sync::Notify> {
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut clients = Vec::new();
    for n in 0..connections.max(1) {
        clients.push(confab_calls::fleet_protocol::connect(nats, &format!("bench-{prefix}-{n}")).await.unwrap());
    }
    for n in 0..count {
        // Room for every caller at once: a replica refuses a join outright when the fleet's slots are all held,
        // and a caller asks again while its last call is still being ended.
        let media: Arc<dyn CallHost> = Arc::new(SimulatedMedia { max_calls: 64, db: db.clone() });
        let client = clients[n % clients.len()].clone();
        let records = confab_store::call_records::StoreRecords::new(db.clone(), None);
        let worker = FleetWorker::join_fleet(client, records, media, format!("{prefix}-{n}"), queue).await.unwrap();
        let stopped = stop.clone();
        tokio::spawn(worker.run(async move { stopped.notified().await }, Duration::ZERO));
    }
    stop
}

/// Joins each conversation with `parallel` callers at once (caller `i` through `dispatchers[i % len]`);
/// latencies and calls per second.
async fn dispatch(dispatchers: &[Arc<Dispatcher>], ids: Vec<String>, parallel: usize) -> (Vec<Duration>, f64) {
    let queue = Arc::new(Mutex::new(ids));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut callers = Vec::new();
    for caller in 0..parallel {
        let dispatcher = dispatchers[caller % dispatchers.len()].clone();
        let (queue, latencies) = (queue.clone(), latencies.clone());
        callers.push(tokio::spawn(async move {
            loop {
                let Some(id) = queue.lock().unwrap().pop() else { return };
                let asked = Instant::now();
                dispatcher.join(&id, "v=0\r\n".into()).await.expect("admitted");
                latencies.lock().unwrap().push(asked.elapsed());
            }
        }));
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    let rate = latencies.len() as f64 / elapsed;
    (latencies, rate)
}

fn report(label: &str, latencies: &[Duration], rate: f64) {
    println!(
        "{label}: {} calls, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, {rate:.0} calls admitted/s",
        latencies.len(),
        percentile(latencies, 0.5).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3,
    );
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let store = tempfile::tempdir().unwrap();
        let (_nats_server, nats) = start_nats(store.path());
        let db = Db::connect(&fresh_database()).await.unwrap();
        let (router, key) = confab_benches::api_router(&db).await;
        let agent = api_post(&router, &key, "/v1/ext/agent", json!({ "agent_name": "B" })).await;
        let agent_id = agent["id"].as_str().unwrap().to_string();
        let connect = |queue: String| {
            let (nats, db) = (nats.clone(), db.clone());
            async move {
                Dispatcher::connect(&nats, db, Duration::from_secs(5), IceServers::default(), &queue).await.unwrap()
            }
        };
        let one = [connect(DEFAULT_QUEUE.to_string()).await];
        let sequential = if bench { 500 } else { 20 };
        let mut stops = Vec::new();

        stops.push(start_workers(&nats, &db, "one", 1, 1, DEFAULT_QUEUE).await);
        let (latencies, rate) = dispatch(&one, conversations(&router, &key, &agent_id, sequential).await, 1).await;
        report("1 worker, 1 caller at a time", &latencies, rate);
        stops.push(start_workers(&nats, &db, "four", 3, 3, DEFAULT_QUEUE).await);
        let (latencies, rate) = dispatch(&one, conversations(&router, &key, &agent_id, sequential).await, 1).await;
        report("4 workers, 1 caller at a time", &latencies, rate);
        let ids = conversations(&router, &key, &agent_id, sequential * 4).await;
        let (latencies, rate) = dispatch(&one, ids, 32).await;
        report("4 workers, 32 callers at once", &latencies, rate);

        if bench {
            // The scale simulation: thousands of idle workers, each holding a pull request and heartbeating,
            // on `CONFAB_BENCH_QUEUES` queues (default 1), with one replica per queue placing calls.
            let env =
                |name: &str, default: usize| std::env::var(name).ok().and_then(|n| n.parse().ok()).unwrap_or(default);
            let (simulated, queues) = (env("CONFAB_BENCH_WORKERS", 2000), env("CONFAB_BENCH_QUEUES", 1).max(1));
            let started = Instant::now();
            let mut replicas = Vec::new();
            for q in 0..queues {
                let queue = if queues == 1 { DEFAULT_QUEUE.to_string() } else { format!("shard-{q}") };
                let share = simulated / queues + usize::from(q < simulated % queues);
                stops.push(start_workers(&nats, &db, &format!("sim{q}"), share, 50 / queues + 1, &queue).await);
                replicas.push(connect(queue).await);
            }
            let joined = started.elapsed().as_secs_f64();
            println!("{simulated} simulated workers on {queues} queue(s) joined in {joined:.1} s");
            tokio::time::sleep(Duration::from_secs(3)).await;
            let ids = conversations(&router, &key, &agent_id, 2000).await;
            let (latencies, rate) = dispatch(&replicas, ids, 32).await;
            report(&format!("{simulated} workers on {queues} queue(s), 32 callers at once"), &latencies, rate);
        }
        for stop in &stops {
            stop.notify_waiters();
        }
    });
    drop(runtime);
    psql(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", database_name()));
}
