//! A sound server for a browser under test: PulseAudio with one null sink, private to the test (its
//! socket, state and cookie in the test's own directory). A browser with no sound device plays into a
//! mock audio backend whose clock is not the wall clock (Firefox's `media.cubeb.force_mock_context`
//! consumed audio slower than real time on a loaded machine: playout delay 134 → 514 ms over 8 s); a
//! null sink consumes audio at real time, as a sound card would, and gives Web Audio a real-time clock.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const PULSEAUDIO: &str = "/usr/bin/pulseaudio";

pub struct SoundServer {
    child: Child,
    dir: PathBuf,
}

impl SoundServer {
    /// Starts PulseAudio in `dir` (created, and removed when the server is dropped; its log is
    /// `dir/pulseaudio.log`) and waits until it accepts clients.
    pub fn start(dir: &Path) -> SoundServer {
        std::fs::create_dir_all(dir).unwrap();
        let socket = dir.join("native");
        let child = Command::new(PULSEAUDIO)
            .args(["-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--system=no"])
            .args(["--disallow-module-loading", "--log-target=stderr"])
            .arg(format!("--load=module-native-protocol-unix socket={} auth-anonymous=1", socket.display()))
            .arg("--load=module-null-sink sink_name=speakers rate=48000")
            .env("HOME", dir)
            .env("XDG_RUNTIME_DIR", dir)
            .env("XDG_CONFIG_HOME", dir)
            .env("PULSE_RUNTIME_PATH", dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("pulseaudio.log")).unwrap())
            .spawn()
            .expect("pulseaudio is installed (scripts/setup.sh)");
        let mut server = SoundServer { child, dir: dir.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("pulseaudio.log")).unwrap_or_default();
                panic!("pulseaudio exited ({status}): {log}");
            }
            assert!(Instant::now() < deadline, "pulseaudio did not open {} within 15 s", socket.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// How many streams clients are playing into the sink now (`pactl list short sink-inputs`).
    pub fn streams_playing(&self) -> usize {
        let output = Command::new("pactl")
            .args(["list", "short", "sink-inputs"])
            .env("PULSE_SERVER", self.address())
            .output()
            .expect("pactl is installed (scripts/setup.sh)");
        assert!(output.status.success(), "pactl: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).lines().filter(|line| !line.trim().is_empty()).count()
    }

    /// What a client sets `PULSE_SERVER` to.
    pub fn address(&self) -> String {
        format!("unix:{}", self.dir.join("native").display())
    }
}

impl Drop for SoundServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
