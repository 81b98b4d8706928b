//! The queue in front of one embedded model shared by every call of the process: a thread of its own owns
//! the model and runs its jobs one at a time, first come first served. At most [`QUEUE_CAPACITY`] jobs wait
//! behind the one running; a job that finds the queue full is refused at once (the caller answers its user
//! with an error now rather than seconds late), and a job whose caller went away while it waited (a reply
//! discarded because the user spoke on or barged in) is dropped unstarted instead of spending the model
//! on an answer nobody hears. Every queue of the process adds to one set of [`QueueCounters`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Jobs that may wait behind the running one. A short voice reply takes ~0.3–1 s of the model on two
/// cores, so the last of eight waits several seconds: past that a caller is better told at once.
pub const QUEUE_CAPACITY: usize = 8;

/// What the process's model queues have done, for `/metrics`.
#[derive(Debug, Default)]
pub struct QueueCounters {
    /// Jobs refused because [`QUEUE_CAPACITY`] jobs were already waiting.
    pub refused: AtomicU64,
    /// Jobs dropped unstarted because nobody wanted their result any more.
    pub abandoned: AtomicU64,
    /// Jobs waiting now (queued, not yet started), across the process's queues.
    pub waiting: AtomicU64,
    /// Replies not asked ahead of the user's commit because the model had other work (asked at the commit).
    pub early_deferred: AtomicU64,
}

/// One piece of work for the model.
pub struct Job<M> {
    run: Box<dyn FnOnce(&mut M) + Send>,
    /// Asked when the job's turn comes: false drops it unstarted.
    wanted: Box<dyn Fn() -> bool + Send>,
}

impl<M> Job<M> {
    /// A job that runs when its turn comes if `wanted` still says so.
    pub fn new(run: impl FnOnce(&mut M) + Send + 'static, wanted: impl Fn() -> bool + Send + 'static) -> Job<M> {
        Job { run: Box::new(run), wanted: Box::new(wanted) }
    }
}

/// Why a job was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// [`QUEUE_CAPACITY`] jobs were already waiting.
    Full,
    /// The model's thread has ended (a job panicked).
    Stopped,
}

/// The sending side of one model's queue; the model lives on the queue's thread.
pub struct ModelQueue<M> {
    jobs: SyncSender<Job<M>>,
    counters: &'static QueueCounters,
    /// Jobs waiting for this queue's model (queued, not yet started).
    waiting: Arc<AtomicUsize>,
}

impl<M: Send + 'static> ModelQueue<M> {
    /// Moves `model` onto a thread named `name` that runs the queue's jobs.
    pub fn start(model: M, name: &str, counters: &'static QueueCounters) -> std::io::Result<ModelQueue<M>> {
        let (jobs, queued) = sync_channel(QUEUE_CAPACITY);
        let waiting = Arc::new(AtomicUsize::new(0));
        let served = waiting.clone();
        std::thread::Builder::new().name(name.to_string()).spawn(move || serve(model, queued, counters, &served))?;
        Ok(ModelQueue { jobs, counters, waiting })
    }

    /// No job waits for the model: one queued now runs next (after the one running, if any).
    pub fn none_waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) == 0
    }

    /// Queues `job` behind those waiting, or says why not.
    pub fn push(&self, job: Job<M>) -> Result<(), Refused> {
        // Counted before it is sent: the thread may take it (and count it out) before `try_send` returns.
        self.counters.waiting.fetch_add(1, Ordering::Relaxed);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let refused = match self.jobs.try_send(job) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(_)) => {
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                Refused::Full
            }
            Err(TrySendError::Disconnected(_)) => Refused::Stopped,
        };
        self.counters.waiting.fetch_sub(1, Ordering::Relaxed);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        Err(refused)
    }
}

/// The queue's thread: each job in turn, unless its caller has gone. A job that panics ends the thread
/// (the model may be left half way through a change), and later pushes are refused as `Stopped`.
fn serve<M>(mut model: M, queued: Receiver<Job<M>>, counters: &'static QueueCounters, waiting: &AtomicUsize) {
    for job in queued {
        counters.waiting.fetch_sub(1, Ordering::Relaxed);
        waiting.fetch_sub(1, Ordering::Relaxed);
        if (job.wanted)() {
            (job.run)(&mut model);
        } else {
            counters.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc::channel;

    use super::*;

    /// A job that records its number in the model when it runs, wanted while `wanted` holds.
    fn numbered(number: u32, wanted: &Arc<AtomicBool>) -> Job<Vec<u32>> {
        let wanted = wanted.clone();
        Job::new(move |ran: &mut Vec<u32>| ran.push(number), move || wanted.load(Ordering::SeqCst))
    }

    #[test]
    fn jobs_run_in_order_a_full_queue_refuses_and_abandoned_jobs_never_start() {
        static COUNTERS: QueueCounters = QueueCounters {
            refused: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            early_deferred: AtomicU64::new(0),
        };
        let queue = ModelQueue::start(Vec::new(), "test-model", &COUNTERS).unwrap();
        assert!(queue.none_waiting());
        // The first job holds the model until released, so the others wait.
        let (started_tx, started) = channel();
        let (release, released) = channel::<()>();
        let hold = Job::new(
            move |_: &mut Vec<u32>| {
                started_tx.send(()).unwrap();
                released.recv().unwrap();
            },
            || true,
        );
        queue.push(hold).unwrap();
        started.recv().unwrap();
        assert!(queue.none_waiting(), "the running job waits no more");

        let kept = Arc::new(AtomicBool::new(true));
        let given_up = Arc::new(AtomicBool::new(true));
        for number in 0..QUEUE_CAPACITY as u32 - 1 {
            let wanted = if number % 2 == 0 { &kept } else { &given_up };
            queue.push(numbered(number, wanted)).unwrap();
        }
        assert!(!queue.none_waiting());
        let (report_tx, report) = channel();
        queue.push(Job::new(move |ran: &mut Vec<u32>| report_tx.send(ran.clone()).unwrap(), || true)).unwrap();
        assert_eq!(COUNTERS.waiting.load(Ordering::SeqCst), QUEUE_CAPACITY as u64);
        assert_eq!(queue.push(numbered(99, &kept)).unwrap_err(), Refused::Full, "a full queue refuses at once");
        assert_eq!(COUNTERS.refused.load(Ordering::SeqCst), 1);
        assert_eq!(COUNTERS.waiting.load(Ordering::SeqCst), QUEUE_CAPACITY as u64, "the refused job never waited");

        // The odd-numbered callers go away while their jobs wait; then the model is free again.
        given_up.store(false, Ordering::SeqCst);
        release.send(()).unwrap();
        let ran = report.recv().unwrap();
        assert_eq!(ran, vec![0, 2, 4, 6], "first come first served; the abandoned ones never ran");
        assert_eq!(COUNTERS.abandoned.load(Ordering::SeqCst), 3);
        assert_eq!(COUNTERS.waiting.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_panicking_job_stops_the_queue_and_later_jobs_are_refused() {
        static COUNTERS: QueueCounters = QueueCounters {
            refused: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            early_deferred: AtomicU64::new(0),
        };
        let queue = ModelQueue::start((), "test-model-panics", &COUNTERS).unwrap();
        queue.push(Job::new(|_: &mut ()| panic!("the model broke"), || true)).unwrap();
        // The thread ends with the panic; its receiver goes with it.
        let mut refused = None;
        for _ in 0..1_000 {
            if let Err(Refused::Stopped) = queue.push(Job::new(|_: &mut ()| {}, || false)) {
                refused = Some(Refused::Stopped);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(refused, Some(Refused::Stopped));
    }
}
