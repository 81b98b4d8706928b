//! A PostgreSQL server of the test's own, from Debian's binaries (TESTING.md): for tests in a network
//! namespace, which cannot reach the machine's. `initdb` refuses root, so both it and the server run as the
//! `postgres` user, in a directory handed to it; the server listens on a free loopback port, without fsync.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivatePostgres {
    child: Child,
    /// The server's own process (runuser does not pass SIGINT on).
    pid: String,
    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub url: String,
    data: PathBuf,
    port: u16,
    log: PathBuf,
}

fn bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("Debian's PostgreSQL is installed")
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL version with initdb")
}

impl PrivatePostgres {
    /// Initialises a cluster under `dir/pg` and starts it; waits until it accepts connections.
    pub fn start(dir: &Path) -> PrivatePostgres {
        let data = dir.join("pg");
        std::fs::create_dir_all(&data).unwrap();
        let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&data).status().unwrap();
        assert!(status.success());
        // The parents must let the postgres user reach its directory.
        let mut parent = data.parent();
        while let Some(path) = parent {
            let _ = Command::new("chmod").arg("o+x").arg(path).status();
            parent = path.parent();
        }
        let bin = bin_dir();
        let initdb = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(bin.join("initdb"))
            .args(["-D"])
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"])
            .output()
            .unwrap();
        assert!(initdb.status.success(), "initdb: {}", String::from_utf8_lossy(&initdb.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        let (child, pid) = serve(&data, port, &dir.join("postgres.log"));
        PrivatePostgres { child, pid, url, data, port, log: dir.join("postgres.log") }
    }

    /// Stops the server (a fast shutdown: its clients' connections are cut); `start_again` brings it back.
    pub fn stop(&mut self) {
        if !self.pid.is_empty() {
            let _ = Command::new("kill").args(["-INT", &self.pid]).status();
            self.pid.clear();
        }
        let _ = self.child.wait();
    }

    /// Starts the stopped server again, on the same data and port.
    pub fn start_again(&mut self) {
        let (child, pid) = serve(&self.data, self.port, &self.log);
        (self.child, self.pid) = (child, pid);
    }
}

/// Starts `postgres` on `data` and `port`, appending to `log`; waits until it accepts connections. The
/// child (runuser) and the server's pid.
fn serve(data: &Path, port: u16, log: &Path) -> (Child, String) {
    let log_file = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    let child = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin_dir().join("postgres"))
        .arg("-D")
        .arg(data)
        .args(["-c", "listen_addresses=127.0.0.1", "-c", &format!("port={port}"), "-c"])
        .arg(format!("unix_socket_directories={}", data.display()))
        .args(["-c", "fsync=off"])
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    loop {
        let ready = Command::new("psql").args([url.as_str(), "-q", "-c", "SELECT 1"]).output();
        if ready.is_ok_and(|output| output.status.success()) {
            let pid = std::fs::read_to_string(data.join("postmaster.pid")).unwrap_or_default();
            return (child, pid.lines().next().unwrap_or_default().trim().to_string());
        }
        assert!(Instant::now() < deadline, "PostgreSQL did not start; see {}", log.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        // A fast shutdown.
        if !self.pid.is_empty() {
            let _ = Command::new("kill").args(["-INT", &self.pid]).status();
        }
        let _ = self.child.wait();
    }
}
