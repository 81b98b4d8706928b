//! Session slots: the runtime holds at most `max_sessions` sessions, each in a slot whose index is
//! reused once its call has ended. A `SessionId` names the slot and the generation of its tenant, so a
//! late result for an ended session is never taken for the new tenant of the same slot, and every
//! per-session table (VAD state, a media thread's index) is an array indexed by slot: O(1), bounded.

use std::fmt;

use crossbeam_channel::{Receiver, Sender, bounded};

/// One session: its slot and which tenant of that slot it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId {
    pub slot: u32,
    pub generation: u32,
}

impl SessionId {
    pub fn slot(self) -> usize {
        self.slot as usize
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.slot, self.generation)
    }
}

/// The free slots and each slot's last generation. Taking is done by the runtime (one caller);
/// releasing happens wherever a session is dropped, through its `SlotGuard`.
pub struct SlotPool {
    free: Receiver<u32>,
    release: Sender<u32>,
    generations: Vec<u32>,
}

impl SlotPool {
    pub fn new(max_sessions: usize) -> SlotPool {
        let (release, free) = bounded(max_sessions.max(1));
        for slot in 0..max_sessions {
            release.send(slot as u32).expect("the pool holds every slot");
        }
        SlotPool { free, release, generations: vec![0; max_sessions] }
    }

    pub fn capacity(&self) -> usize {
        self.generations.len()
    }

    /// Slots taken now.
    pub fn taken(&self) -> usize {
        self.capacity() - self.free.len()
    }

    /// A free slot with a new generation; None when every slot is taken.
    pub fn take(&mut self) -> Option<(SessionId, SlotGuard)> {
        let slot = self.free.try_recv().ok()?;
        let generation = &mut self.generations[slot as usize];
        // Generations start at 1 and skip 0 when they wrap: 0 means "no tenant" in per-slot tables.
        *generation = generation.checked_add(1).unwrap_or(1);
        let id = SessionId { slot, generation: *generation };
        Some((id, SlotGuard { slot, release: self.release.clone() }))
    }
}

/// One taken slot; free again when the guard is dropped (the session's call is over).
pub struct SlotGuard {
    slot: u32,
    release: Sender<u32>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        // Never full: the pool holds each slot once, and this slot is not in it.
        let _ = self.release.try_send(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_with_a_new_generation() {
        let mut pool = SlotPool::new(2);
        let (a, guard_a) = pool.take().unwrap();
        let (b, _guard_b) = pool.take().unwrap();
        assert_eq!((a.slot, a.generation, b.slot, b.generation), (0, 1, 1, 1));
        assert!(pool.take().is_none(), "two slots, both taken");
        assert_eq!(pool.taken(), 2);
        drop(guard_a);
        assert_eq!(pool.taken(), 1);
        let (c, _guard_c) = pool.take().unwrap();
        assert_eq!(c, SessionId { slot: 0, generation: 2 });
        assert_ne!(a, c);
        assert_eq!(c.to_string(), "0.2");
    }

    #[test]
    fn a_thousand_sessions_through_three_slots() {
        let mut pool = SlotPool::new(3);
        for round in 0..1_000u32 {
            let (id, guard) = pool.take().unwrap();
            assert!(id.slot() < 3);
            assert_eq!(id.generation, round / 3 + 1);
            drop(guard);
        }
        assert_eq!(pool.taken(), 0);
    }
}
