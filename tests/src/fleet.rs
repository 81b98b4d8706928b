//! A fleet on loopback for end-to-end tests: its own NATS server (the machine's `nats-server` with
//! JetStream, a temporary store, a free port), a fresh PostgreSQL database, and media workers
//! (`confab worker`) as child processes; replicas are `server::Server`s started with `--nats`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::confab_bin;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A NATS server of our own (isolated from other tests' jobs and workers).
pub struct Nats {
    child: Child,
    pub url: String,
    pub port: u16,
}

impl Nats {
    /// `nats-server -js` on a free loopback port with its store under `dir`; waits until it accepts.
    pub fn start(dir: &Path) -> Nats {
        let port = free_port();
        let store = dir.join("nats");
        std::fs::create_dir_all(&store).unwrap();
        let log = std::fs::File::create(dir.join("nats.log")).unwrap();
        let child = Command::new(nats_server())
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&store)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nats-server is installed (Debian's nats-server; scripts/setup.sh)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start; see {}", dir.join("nats.log").display());
            std::thread::sleep(Duration::from_millis(50));
        }
        Nats { child, url: format!("nats://127.0.0.1:{port}"), port }
    }

    /// Stops the server (its clients' connections drop).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nats_server() -> PathBuf {
    ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from("nats-server"))
}

/// A new, empty PostgreSQL database named `name` (dropped first if it exists); its URL.
pub fn fresh_database(name: &str) -> String {
    let base = std::env::var("CONFAB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    let create = format!("CREATE DATABASE {name}");
    for statement in [drop, create] {
        let output = Command::new("psql").args([base.as_str(), "-q", "-c", &statement]).output().unwrap();
        assert!(output.status.success(), "{statement}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let (server, _) = base.rsplit_once('/').expect("a database URL ends with /<database>");
    format!("{server}/{name}")
}

/// Drops the database at `database_url` (its connections closed by force).
pub fn drop_database(database_url: &str) {
    let (server, name) = database_url.rsplit_once('/').expect("a database URL ends with /<database>");
    let admin = format!("{server}/postgres");
    let _ = Command::new("psql")
        .args([admin.as_str(), "-q", "-c", &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")])
        .output();
}

/// `confab keys create --database-url <url>`: the new key.
pub fn create_key(database_url: &str) -> String {
    let output = Command::new(confab_bin())
        .args(["keys", "create", "--name", "test", "--database-url", database_url])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// A `confab worker` child process.
pub struct Worker {
    pub child: Child,
    pub id: String,
    pub log: PathBuf,
}

impl Worker {
    /// `confab worker --worker-id <id> --nats <nats> --database-url <db> --data <dir>/<id> <extra>` with
    /// `env`; waits until it takes calls. Its log is `<dir>/<id>.log`.
    pub async fn start(
        dir: &Path,
        id: &str,
        nats: &str,
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Worker {
        let log = dir.join(format!("{id}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(confab_bin())
            .args(["worker", "--worker-id", id, "--nats", nats, "--database-url", database_url, "--data"])
            .arg(dir.join(id))
            .args(["--allow-private-urls"])
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info,sqlx=warn,webrtc=warn,rtc=warn")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        let worker = Worker { child, id: id.to_string(), log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !worker.log_text().contains("media worker taking calls") {
            assert!(Instant::now() < deadline, "worker {id} did not start:\n{}", worker.log_text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        worker
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: the worker dies at once, its calls with it.
    pub fn kill(&mut self) {
        crate::server::kill(&mut self.child);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TCP proxy on a free loopback port to `upstream` that can be cut: every connection through it is
/// closed and new ones are refused (a network partition between one process and, say, PostgreSQL).
pub struct CuttableProxy {
    pub port: u16,
    cut: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl CuttableProxy {
    pub async fn start(upstream: std::net::SocketAddr) -> CuttableProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(tokio::sync::watch::Sender::new(false));
        let cutter = cut.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                if *cutter.borrow() {
                    continue; // dropped: refused
                }
                let mut is_cut = cutter.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = is_cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        CuttableProxy { port, cut }
    }

    pub fn cut(&self) {
        self.cut.send_replace(true);
    }
}

/// `database_url` with its host and port replaced by 127.0.0.1:`port`.
pub fn through_port(database_url: &str, port: u16) -> String {
    let mut url = url_parts(database_url);
    url.1 = format!("127.0.0.1:{port}");
    format!("{}{}{}", url.0, url.1, url.2)
}

/// (`scheme://user@`, `host:port`, `/database…`).
fn url_parts(database_url: &str) -> (String, String, String) {
    let (scheme, rest) = database_url.split_once("://").unwrap();
    let (authority, path) = rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, String::new()));
    let (user, host) =
        authority.rsplit_once('@').map(|(u, h)| (format!("{u}@"), h)).unwrap_or((String::new(), authority));
    (format!("{scheme}://{user}"), host.to_string(), path)
}

/// The host:port of `database_url`, resolved.
pub fn database_address(database_url: &str) -> std::net::SocketAddr {
    use std::net::ToSocketAddrs;
    let host = url_parts(database_url).1;
    let host = if host.contains(':') { host } else { format!("{host}:5432") };
    host.to_socket_addrs().unwrap().next().unwrap()
}
