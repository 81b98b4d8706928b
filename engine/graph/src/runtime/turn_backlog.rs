//! The turn model's backlog: the questions the turn-model threads have taken off the media threads'
//! queue and not yet answered, and which of them to answer next.
//!
//! **Newest first.** A verdict is worth most while its turn is young: "done" lets the turn commit at the
//! min endpointing delay (0.5 s after the speech) instead of the max (3 s). When questions come faster
//! than the model answers, first come, first served would answer only questions that are about to
//! expire, so every user would wait nearly the max delay; answering the newest first gives the verdicts
//! the model can give while they still save the user's time, and lets the oldest expire (they commit at
//! the max delay, as they would have anyway). Under light load the backlog holds at most one question
//! per thread, and the order makes no difference.
//!
//! **One question per session.** A session's newer question replaces its waiting one: the user spoke
//! again, so a verdict on the earlier pause would be ignored.
//!
//! **Bounded.** Expired questions (past their turn's max delay) are dropped unanswered when a thread
//! looks for work; when the backlog is full, the oldest question is dropped to make room.
//!
//! The media threads only ever touch the lock-free queue in front of the backlog; the turn-model threads
//! move its questions in (`SharedBacklog::next`) under a lock only they take.

use crate::lock::lock;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::RuntimeCounters;
use super::jobs::TurnJob;

/// What became of a question admitted to the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    Queued,
    /// It replaced the same session's waiting question.
    Replaced,
    /// The backlog was full: its oldest question was dropped to make room.
    DroppedOldest,
}

pub struct TurnBacklog {
    /// Oldest first.
    jobs: VecDeque<TurnJob>,
    capacity: usize,
}

impl TurnBacklog {
    pub fn new(capacity: usize) -> TurnBacklog {
        TurnBacklog { jobs: VecDeque::with_capacity(capacity), capacity: capacity.max(1) }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn admit(&mut self, job: TurnJob) -> Admitted {
        if let Some(same) = self.jobs.iter().position(|waiting| waiting.session == job.session) {
            self.jobs.remove(same);
            self.jobs.push_back(job);
            return Admitted::Replaced;
        }
        let admitted = if self.jobs.len() >= self.capacity {
            self.jobs.pop_front();
            Admitted::DroppedOldest
        } else {
            Admitted::Queued
        };
        self.jobs.push_back(job);
        admitted
    }

    /// The question to answer at `now`, newest first, and how many expired questions were dropped to
    /// find it.
    pub fn next(&mut self, now: Instant) -> (Option<TurnJob>, usize) {
        let before = self.jobs.len();
        self.jobs.retain(|job| job.answer_by > now);
        let expired = before - self.jobs.len();
        (self.jobs.pop_back(), expired)
    }
}

/// The backlog the turn-model threads share (the media threads only ever touch the queue in front of
/// it), and a token that wakes an idle thread when questions are left waiting.
pub struct SharedBacklog {
    backlog: Mutex<TurnBacklog>,
    wake: (Sender<()>, Receiver<()>),
}

impl SharedBacklog {
    pub fn new(capacity: usize) -> SharedBacklog {
        SharedBacklog { backlog: Mutex::new(TurnBacklog::new(capacity)), wake: bounded(1) }
    }

    /// Ready when a thread left questions waiting that an idle thread could take.
    pub fn woken(&self) -> &Receiver<()> {
        &self.wake.1
    }

    fn lock(&self) -> MutexGuard<'_, TurnBacklog> {
        lock(&self.backlog)
    }

    pub fn admit(&self, job: TurnJob, counters: &RuntimeCounters) {
        count_admitted(self.lock().admit(job), counters);
    }

    /// Moves the queue's questions into the backlog and takes the one to answer now, if any.
    pub fn next(&self, jobs: &Receiver<TurnJob>, counters: &RuntimeCounters) -> Option<TurnJob> {
        let mut backlog = self.lock();
        while let Ok(job) = jobs.try_recv() {
            count_admitted(backlog.admit(job), counters);
        }
        let (job, expired) = backlog.next(Instant::now());
        counters.turn_stale.fetch_add(expired as u64, Ordering::Relaxed);
        if job.is_some() && !backlog.is_empty() {
            let _ = self.wake.0.try_send(()); // another thread may be idle
        }
        job
    }
}

fn count_admitted(admitted: Admitted, counters: &RuntimeCounters) {
    match admitted {
        Admitted::Queued => {}
        Admitted::Replaced => {
            counters.turn_superseded.fetch_add(1, Ordering::Relaxed);
        }
        Admitted::DroppedOldest => {
            counters.turn_queue_full.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::runtime::slots::SessionId;
    use crate::time::MediaTime;

    fn question(slot: usize, asked: Instant, useful_ms: u64) -> TurnJob {
        TurnJob {
            thread: 0,
            session: SessionId { slot: slot as u32, generation: 1 },
            last_speech: MediaTime::from_millis(slot as u64),
            audio: Vec::new(),
            asked_at: asked,
            answer_by: asked + Duration::from_millis(useful_ms),
        }
    }

    fn slots(backlog: &mut TurnBacklog, now: Instant) -> Vec<usize> {
        std::iter::from_fn(|| backlog.next(now).0).map(|job| job.session.slot()).collect()
    }

    #[test]
    fn the_newest_question_is_answered_first() {
        let t0 = Instant::now();
        let mut backlog = TurnBacklog::new(8);
        for slot in 0..4 {
            assert_eq!(backlog.admit(question(slot, t0 + Duration::from_millis(slot as u64), 2_500)), Admitted::Queued);
        }
        assert_eq!(slots(&mut backlog, t0), vec![3, 2, 1, 0]);
    }

    #[test]
    fn a_sessions_newer_question_replaces_its_waiting_one() {
        let t0 = Instant::now();
        let mut backlog = TurnBacklog::new(8);
        backlog.admit(question(1, t0, 2_500));
        backlog.admit(question(2, t0, 2_500));
        let mut newer = question(1, t0 + Duration::from_millis(700), 2_500);
        newer.last_speech = MediaTime::from_millis(5_000);
        assert_eq!(backlog.admit(newer), Admitted::Replaced);
        assert_eq!(backlog.len(), 2);
        let (first, _) = backlog.next(t0);
        let first = first.unwrap();
        assert_eq!((first.session.slot(), first.last_speech), (1, MediaTime::from_millis(5_000)));
        assert_eq!(slots(&mut backlog, t0), vec![2]);
    }

    #[test]
    fn a_new_tenant_of_a_slot_is_another_session() {
        let t0 = Instant::now();
        let mut backlog = TurnBacklog::new(8);
        backlog.admit(question(1, t0, 2_500));
        let mut next_tenant = question(1, t0, 2_500);
        next_tenant.session = SessionId { slot: 1, generation: 2 };
        assert_eq!(backlog.admit(next_tenant), Admitted::Queued);
        assert_eq!(backlog.len(), 2);
    }

    #[test]
    fn expired_questions_are_dropped_unanswered() {
        let t0 = Instant::now();
        let mut backlog = TurnBacklog::new(8);
        backlog.admit(question(0, t0, 1_000));
        backlog.admit(question(1, t0, 3_000));
        backlog.admit(question(2, t0, 1_000));
        let (job, expired) = backlog.next(t0 + Duration::from_millis(1_000));
        assert_eq!((job.map(|j| j.session.slot()), expired), (Some(1), 2));
        assert!(backlog.is_empty());
        assert_eq!(backlog.next(t0).0.map(|j| j.session.slot()), None);
    }

    #[test]
    fn a_full_backlog_drops_its_oldest_question() {
        let t0 = Instant::now();
        let mut backlog = TurnBacklog::new(3);
        for slot in 0..3 {
            assert_eq!(backlog.admit(question(slot, t0, 2_500)), Admitted::Queued);
        }
        assert_eq!(backlog.admit(question(3, t0, 2_500)), Admitted::DroppedOldest);
        assert_eq!(slots(&mut backlog, t0), vec![3, 2, 1]);
    }

    #[test]
    fn a_thread_takes_the_queues_newest_question_and_wakes_another_for_the_rest() {
        let t0 = Instant::now();
        let counters = RuntimeCounters::default();
        let shared = SharedBacklog::new(8);
        let (queue, jobs) = bounded(8);
        queue.send(question(0, t0, 0)).unwrap(); // already past its turn's max delay
        queue.send(question(1, t0, 60_000)).unwrap();
        queue.send(question(2, t0, 60_000)).unwrap();
        assert!(shared.woken().try_recv().is_err());

        let first = shared.next(&jobs, &counters).map(|job| job.session.slot());
        assert_eq!(first, Some(2));
        assert!(shared.woken().try_recv().is_ok(), "question 1 is still waiting");
        assert_eq!(RuntimeCounters::get(&counters.turn_stale), 1);

        assert_eq!(shared.next(&jobs, &counters).map(|job| job.session.slot()), Some(1));
        assert!(shared.woken().try_recv().is_err(), "nothing is left to wake a thread for");
        assert_eq!(shared.next(&jobs, &counters).map(|job| job.session.slot()), None);

        shared.admit(question(3, t0, 60_000), &counters);
        shared.admit(question(3, t0, 60_000), &counters);
        assert_eq!(RuntimeCounters::get(&counters.turn_superseded), 1);
    }
}
