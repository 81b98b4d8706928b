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

/// How much of the time from `due` to `due + latency` the machine was stalled: what a frame lost to the
/// machine rather than to the load.
pub fn stalled_during(stalls: &[Stall], due: Instant, latency: Duration) -> Duration {
    let end = due + latency;
    stalls
        .iter()
        .map(|s| {
            let from = s.from.max(due);
            let to = (s.from + s.length).min(end);
            to.saturating_duration_since(from)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_overlap_of_a_stall_is_counted() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let stalls = [Stall { from: t + ms(10), length: ms(30) }, Stall { from: t + ms(100), length: ms(8) }];
        assert_eq!(stalled_during(&stalls, t, ms(5)), ms(0));
        assert_eq!(stalled_during(&stalls, t, ms(20)), ms(10));
        assert_eq!(stalled_during(&stalls, t + ms(20), ms(200)), ms(28));
        assert_eq!(stalled_during(&stalls, t + ms(45), ms(50)), ms(0));
    }
}
