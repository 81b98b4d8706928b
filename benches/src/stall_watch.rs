//! Tells the machine's stalls from the load's: a thread at real-time priority (when the process may have
//! it) sleeps 1 ms at a time and records every wake-up that came more than `STALL` late. Such a thread
//! outranks every thread of the benchmark, so when it is held off, the whole virtual machine was (the host
//! did not run it, or the kernel was busy); frames late in those moments say nothing about the load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A wake-up this much later than asked counts as a stall.
pub const STALL: Duration = Duration::from_millis(5);

/// A moment the watchdog was held off: from when it should have woken, for how long.
#[derive(Clone, Copy, Debug)]
pub struct Stall {
    pub from: Instant,
    pub length: Duration,
}

pub struct StallWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(bool, Vec<Stall>)>,
}

impl StallWatch {
    pub fn start() -> StallWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("stall-watch".into())
                .spawn(move || {
                    let param = libc::sched_param { sched_priority: 50 };
                    // SAFETY: sets this thread's own policy; the parameter outlives the call.
                    let real_time = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
                    let mut stalls = Vec::new();
                    let mut last = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(1));
                        let now = Instant::now();
                        let late = now.saturating_duration_since(last + Duration::from_millis(1));
                        if late > STALL {
                            stalls.push(Stall { from: now - late, length: late });
                        }
                        last = now;
                    }
                    (real_time, stalls)
                })
                .expect("spawn the stall watch")
        };
        StallWatch { stop, thread }
    }

    /// The stalls seen, and whether the watchdog ran at real-time priority (else they prove little).
    pub fn finish(self) -> (bool, Vec<Stall>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the stall watch panicked")
    }
}

/// Whether a frame due at `due` and done `latency` later overlapped one of `stalls`.
pub fn during_a_stall(stalls: &[Stall], due: Instant, latency: Duration) -> bool {
    stalls.iter().any(|s| s.from < due + latency && due < s.from + s.length)
}
