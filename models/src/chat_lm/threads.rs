//! How many threads the language model computes on: the cores the rest of the host leaves it.
//!
//! llama.cpp's CPU threads meet at a barrier after every operation of a batch, and wait there spinning
//! (ggml's own thread pool, no OpenMP, no yield). When other work holds a core — a second worker process's
//! model, a browser, this process's own media threads — the thread that waits for a preempted peer spins
//! away its time slice, hundreds of times a token: on 2 cores, two `confab worker`s beside four browsers
//! answered 4–5 questions of 12 within 9 s on two threads each (and their spinning starved the hearing),
//! 12 of 12 on one. On an idle host two threads are ~1.8× faster than one, so the count is chosen as the
//! host's load changes: before a batch, at most every [`WINDOW`], from the CPU time the whole host spent
//! (`/proc/stat`) less what the model itself spent (its calling thread's CPU time × its threads) and less
//! what this process's other inference spent ([`crate::busy`]), the cores other work held; the model takes
//! the rest, at least one. Only where `/proc/stat` describes exactly the cores this process may run on
//! (not in a container whose quota or CPU set is a part of the host's, nor off Linux): elsewhere that share
//! is every core the process may use.
//!
//! The process's own inference — the speech-to-text of the turn being answered, the turn model, the voice
//! of the reply's first sentence — is what the user waits for, and it comes in bursts of a tenth of a
//! second: before every batch the model also leaves the threads that inference holds at that moment, so
//! that its threads do not spin against them (issue 52's trace in docs/performance.md: it does not make
//! the voice as fast beside the model as alone).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::busy;

/// How long the host's load is watched before the thread count is chosen again.
pub const WINDOW: Duration = Duration::from_millis(250);

/// The longest a batch waits for the process's other inference to leave it a core.
pub const LONGEST_WAIT: Duration = Duration::from_millis(250);

/// How often a waiting batch looks again.
const POLL: Duration = Duration::from_millis(1);

/// Threads the process's language model computed its last batch on (0 before any): `/metrics`.
static THREADS_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Threads the process's language model computed its last batch on (0 before any).
pub fn threads_in_use() -> usize {
    THREADS_IN_USE.load(Ordering::Relaxed)
}

/// The threads to compute on when other work holds `others` cores (averaged over the last window) of
/// `cores`: what is left, rounded, at least one.
pub fn share(cores: usize, others: f64) -> usize {
    let left = (cores as f64 - others.max(0.0)).round();
    (left.max(1.0) as usize).min(cores.max(1))
}

/// Whether the next batch waits: the process's other inference holds `inference` threads, every one of
/// the `cores`.
pub fn waits_for(cores: usize, inference: usize) -> bool {
    inference >= cores
}

/// The threads to compute on, of `share`, while the process's other inference holds `inference` threads of
/// `cores`: what it leaves, at least one.
pub fn beside_inference(share: usize, cores: usize, inference: usize) -> usize {
    share.min(cores.saturating_sub(inference)).max(1)
}

/// One model's choice of threads, window by window.
pub struct ThreadShare {
    cores: usize,
    /// Whether `/proc/stat` counts exactly the cores this process may run on.
    adaptive: bool,
    /// Its threads can be changed between batches.
    settable: bool,
    /// When the window began, the host's busy CPU seconds then, and this process's other inference's.
    window: Option<(Instant, f64, f64)>,
    /// CPU seconds the model spent in this window (its calling thread's × its threads).
    own: f64,
    threads: usize,
    said: bool,
}

impl ThreadShare {
    /// A model that may run on `cores` cores; `settable`: its threads can be changed between batches (else
    /// it keeps every core).
    pub fn new(cores: usize, settable: bool) -> ThreadShare {
        let adaptive = settable && cores > 1 && host_cores() == Some(cores);
        ThreadShare { cores, adaptive, settable, window: None, own: 0.0, threads: cores, said: false }
    }

    /// The cores the model may run on.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// The threads the next batch runs on: the window's share, less the threads the process's other
    /// inference holds now (at least one). While that inference holds every core, the batch first waits
    /// for it (at most [`LONGEST_WAIT`]).
    pub fn threads(&mut self) -> usize {
        let waited = Instant::now();
        while waits_for(self.cores, busy::threads_now()) && waited.elapsed() < LONGEST_WAIT {
            std::thread::sleep(POLL);
        }
        if !self.settable {
            return self.cores;
        }
        let share = if self.adaptive { self.window_share() } else { self.cores };
        beside_inference(share, self.cores, busy::threads_now())
    }

    /// The threads other work has left the model over the last window (chosen again once it has passed).
    fn window_share(&mut self) -> usize {
        let now = Instant::now();
        if self.window.is_some_and(|(start, _, _)| now.duration_since(start) < WINDOW) {
            return self.threads;
        }
        let Some(busy) = host_busy_seconds() else { return self.threads };
        let inference = busy::cpu_seconds();
        if let Some((start, busy_then, inference_then)) = self.window {
            let seconds = now.duration_since(start).as_secs_f64();
            let others = (busy - busy_then - self.own - (inference - inference_then)) / seconds;
            let threads = share(self.cores, others);
            if threads != self.threads {
                tracing::debug!(
                    threads,
                    cores = self.cores,
                    others = format!("{others:.2}"),
                    "the language model's threads"
                );
                if threads < self.cores && !self.said {
                    self.said = true;
                    tracing::info!(
                        threads,
                        cores = self.cores,
                        "the language model computes on fewer threads while other work holds cores (its threads would spin waiting for each other)"
                    );
                }
            }
            self.threads = threads;
        }
        self.window = Some((now, busy, inference));
        self.own = 0.0;
        self.threads
    }

    /// A batch ran on `threads` threads, its calling thread spending `thread_cpu` seconds of CPU.
    pub fn ran(&mut self, threads: usize, thread_cpu: f64) {
        self.own += thread_cpu * threads as f64;
        THREADS_IN_USE.store(threads, Ordering::Relaxed);
    }
}

/// The host's CPUs `/proc/stat` counts (its `cpuN` lines).
fn host_cores() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    Some(parse_cores(&stat))
}

/// CPU seconds every core of the host has spent busy (not idle, not waiting for I/O) since boot.
fn host_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: sysconf only reads a constant.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks_per_second <= 0 {
        return None;
    }
    Some(parse_busy_ticks(&stat)? as f64 / ticks_per_second as f64)
}

fn parse_cores(stat: &str) -> usize {
    stat.lines()
        .filter(|line| line.starts_with("cpu") && line.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count()
}

/// The `cpu` line's ticks less idle and iowait (guest time is counted in user time already).
fn parse_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).take(8).map(|t| t.parse().ok()).collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, steal] = ticks[..] else { return None };
    Some(user + nice + system + irq + softirq + steal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_takes_the_cores_other_work_leaves() {
        let cases =
            [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.5, 1), (8, 3.2, 5), (8, -0.3, 8), (1, 0.0, 1)];
        for (cores, others, threads) in cases {
            assert_eq!(share(cores, others), threads, "{cores} cores, {others} held by others");
        }
    }

    #[test]
    fn the_model_leaves_the_threads_other_inference_holds_now() {
        let cases = [(2, 2, 0, 2), (2, 2, 1, 1), (2, 2, 2, 1), (1, 2, 0, 1), (8, 8, 3, 5), (4, 8, 2, 4), (3, 4, 9, 1)];
        for (share, cores, inference, threads) in cases {
            assert_eq!(beside_inference(share, cores, inference), threads, "{share} of {cores}, {inference} held");
        }
    }

    #[test]
    fn the_model_waits_while_other_inference_holds_every_core() {
        let cases = [(2, 2, true), (2, 3, true), (2, 1, false), (2, 0, false), (8, 3, false), (1, 1, true)];
        for (cores, inference, waits) in cases {
            assert_eq!(waits_for(cores, inference), waits, "{inference} of {cores} held");
        }
    }

    #[test]
    fn proc_stat_is_read() {
        let stat =
            "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\ncpu1 50 3 25 500 10 2 1 4 0 0\nintr 1 2\n";
        assert_eq!(parse_cores(stat), 2);
        assert_eq!(parse_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 7));
        assert_eq!(parse_busy_ticks("cpu  1 2\n"), None);
    }

    #[test]
    fn a_model_whose_threads_cannot_be_set_keeps_every_core() {
        let mut fixed = ThreadShare::new(4, false);
        assert_eq!(fixed.threads(), 4);
        fixed.ran(4, 1.0);
        assert_eq!(fixed.threads(), 4);
    }
}
