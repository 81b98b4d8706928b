//! The inference this process runs now beside its language model — speech-to-text, the turn model, the
//! voice, the knowledge base's embedder: how many threads it holds at this moment, and the CPU time it has
//! taken so far (each run's calling thread's CPU time × its threads: its operator threads work alongside
//! the caller; wall time would count the time a loaded host kept them waiting). The language model reads both before every batch
//! (`chat_lm::threads`): it leaves those cores to them at once, rather than spinning its threads against
//! them, and does not count their past CPU as other work once they are done.
//!
//! Each inference holds a [`Busy`] while it runs.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Threads the process's inference (the language model aside) runs on now.
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// CPU nanoseconds that inference has taken (its calling thread's × its threads), counted when each run ends.
static CPU_NANOS: AtomicU64 = AtomicU64::new(0);

/// One inference running on `threads` threads, from its start until it is dropped.
#[must_use = "the inference is counted only while this is held"]
pub struct Busy {
    /// Its threads, counted in [`threads_now`] until it is dropped.
    held: Reserved,
    /// The calling thread's CPU seconds at the start.
    cpu_then: f64,
}

impl Busy {
    /// An inference starts on `threads` threads.
    pub fn start(threads: usize) -> Busy {
        Busy { held: Reserved::new(threads), cpu_then: thread_cpu_seconds() }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let nanos = ((thread_cpu_seconds() - self.cpu_then).max(0.0) * 1e9) as u64 * self.held.threads as u64;
        CPU_NANOS.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Threads an inference about to start holds already: from when it is asked for (on another thread,
/// queued for the blocking pool) until it runs and holds a [`Busy`]; counted in [`threads_now`], so that
/// the language model does not start a batch in the gap, but not in CPU time.
#[must_use = "the threads are held only while this is"]
pub struct Reserved {
    threads: usize,
}

impl Reserved {
    pub fn new(threads: usize) -> Reserved {
        THREADS.fetch_add(threads, Ordering::Relaxed);
        Reserved { threads }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        THREADS.fetch_sub(self.threads, Ordering::Relaxed);
    }
}

/// Threads the process's inference (the language model aside) holds now.
pub fn threads_now() -> usize {
    THREADS.load(Ordering::Relaxed)
}

/// CPU seconds the process's finished inference runs (the language model aside) have taken.
pub fn cpu_seconds() -> f64 {
    CPU_NANOS.load(Ordering::Relaxed) as f64 * 1e-9
}

/// CPU seconds the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if read != 0 {
        return 0.0;
    }
    now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inference_is_counted_while_it_runs_and_its_time_after() {
        // Other tests of this crate may run inference at the same time: compare with what they add.
        let before = cpu_seconds();
        let running = Busy::start(1000);
        assert!(threads_now() >= 1000);
        let cpu = thread_cpu_seconds();
        while thread_cpu_seconds() - cpu < 10e-6 {}
        drop(running);
        assert!(threads_now() < 1000);
        assert!(cpu_seconds() - before >= 1000.0 * 10e-6);
    }
}
