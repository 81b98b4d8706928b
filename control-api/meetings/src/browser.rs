//! The meeting bot's Chromium: one process per meeting (its own profile directory, so nothing is shared
//! between meetings), headless, with limits on its memory; killed and its profile removed when dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::{Child, Command};

use super::cdp::{CdpError, Page};

/// How long Chromium gets to open its DevTools endpoint.
const START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The Chromium executable (`--meeting-browser`).
    pub executable: PathBuf,
    /// Extra command-line arguments (`--meeting-browser-arg`, repeatable): a proxy, host rules.
    pub extra_args: Vec<String>,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        BrowserConfig { executable: PathBuf::from("chromium"), extra_args: Vec::new() }
    }
}

pub struct Browser {
    child: Child,
    /// `CONFAB_MEETING_BOT=<random>` in the environment of Chromium and of the crash handlers it starts,
    /// which leave its process group (setsid) and outlive it; its zygote, renderers and utilities stay in
    /// its group (their environment is cleared).
    marker: String,
    profile: tempfile::TempDir,
    scratch: tempfile::TempDir,
    pub page: Page,
}

impl Browser {
    /// Starts Chromium on a blank page and connects to it.
    pub async fn start(config: &BrowserConfig) -> Result<Browser, CdpError> {
        let profile = tempfile::Builder::new()
            .prefix("confab-meeting-")
            .tempdir()
            .map_err(|e| CdpError::Connection(format!("no profile directory: {e}")))?;
        // Chromium's own temporary files (its singleton socket; shared memory, with --disable-dev-shm-usage)
        // go to a directory of their own, removed with the profile. Under /tmp: a unix socket's path must
        // stay under 108 bytes, whatever TMPDIR is.
        let scratch = tempfile::Builder::new()
            .prefix("confab-meeting-")
            .tempdir_in("/tmp")
            .map_err(|e| CdpError::Connection(format!("no scratch directory: {e}")))?;
        let marker = format!("{MARKER_VARIABLE}={}", uuid::Uuid::new_v4().simple());
        let mut command = Command::new(&config.executable);
        // SAFETY: prctl(2) is async-signal-safe; it only asks the kernel to SIGKILL Chromium when this
        // process (the thread that started it: a runtime worker) dies, so a crashed server leaves no
        // browser running.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-features=WebRtcHideLocalIpsWithMdns,Translate",
                "--disable-crash-reporter",
                "--disable-breakpad",
                "--autoplay-policy=no-user-gesture-required",
                "--use-fake-ui-for-media-stream",
                "--allow-loopback-in-peer-connection",
                "--renderer-process-limit=2",
                "--js-flags=--max-old-space-size=512",
                "--window-size=1280,720",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(&config.extra_args)
            .arg("about:blank")
            .env("TMPDIR", scratch.path())
            .env(MARKER_VARIABLE, &marker[MARKER_VARIABLE.len() + 1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(profile.path()))
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .map_err(|e| CdpError::Connection(format!("cannot start {}: {e}", config.executable.display())))?;
        let ws_url = match page_endpoint(profile.path(), &mut child).await {
            Ok(url) => url,
            Err(err) => {
                let _ = child.kill().await;
                let log = std::fs::read_to_string(profile.path().join(LOG)).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                tracing::warn!(log = %tail.into_iter().rev().collect::<Vec<_>>().join(" | "), "chromium did not start");
                return Err(err);
            }
        };
        let mut page = Page::connect(&ws_url).await?;
        page.command("Page.enable", serde_json::json!({}), Duration::from_secs(10)).await?;
        Ok(Browser { child, marker, profile, scratch, page })
    }

    /// Kills Chromium and every process it started, and removes its profile.
    pub async fn close(mut self) {
        self.kill_all();
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
        let _ = std::fs::remove_dir_all(self.profile.path());
        let _ = std::fs::remove_dir_all(self.scratch.path());
    }

    /// SIGKILL to Chromium's process group and to every process carrying its marker.
    fn kill_all(&self) {
        if let Some(pid) = self.child.id().and_then(|pid| i32::try_from(pid).ok()) {
            // SAFETY: kill(2) with a negative pid signals the process group Chromium leads (process_group(0)).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        for pid in processes_marked(&self.marker) {
            // SAFETY: kill(2) on a process whose environment carries this browser's marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The environment variable that marks a bot's browser processes.
pub const MARKER_VARIABLE: &str = "CONFAB_MEETING_BOT";

/// Processes whose environment holds `marker` (`NAME=value`), from /proc.
pub fn processes_marked(marker: &str) -> Vec<i32> {
    processes_where(|var| var == marker.as_bytes())
}

/// Processes whose environment sets `name`, whatever its value.
pub fn processes_with_variable(name: &str) -> Vec<i32> {
    let prefix = format!("{name}=");
    processes_where(|var| var.starts_with(prefix.as_bytes()))
}

fn processes_where(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| env.split(|b| *b == 0).any(&matches))
        })
        .collect()
}
/// Chromium's stderr, inside its profile (removed with it).
const LOG: &str = "chromium.log";

fn log_file(profile: &Path) -> Stdio {
    std::fs::File::create(profile.join(LOG)).map(Stdio::from).unwrap_or_else(|_| Stdio::null())
}

/// Reads the DevTools port Chromium chose (`DevToolsActivePort` in the profile) and finds the page target.
async fn page_endpoint(profile: &Path, child: &mut Child) -> Result<String, CdpError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let client = reqwest::Client::builder().no_proxy().build().map_err(|e| CdpError::Connection(e.to_string()))?;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(CdpError::Connection(format!("chromium exited at start ({status})")));
        }
        if let Ok(port_file) = std::fs::read_to_string(profile.join("DevToolsActivePort"))
            && let Some(port) = port_file.lines().next().and_then(|l| l.trim().parse::<u16>().ok())
            && let Ok(reply) = client.get(format!("http://127.0.0.1:{port}/json/list")).send().await
            && let Ok(targets) = reply.json::<Vec<Value>>().await
            && let Some(url) =
                targets.iter().find(|t| t["type"] == "page").and_then(|t| t["webSocketDebuggerUrl"].as_str())
        {
            return Ok(url.to_string());
        }
        if Instant::now() > deadline {
            return Err(CdpError::Timeout("chromium's start", START_TIMEOUT));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
