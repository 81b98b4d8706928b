//! A session's events on their way to its consumer (the call's supervisor, which records them and
//! sends webhooks). The media thread never waits for a consumer, so one that falls behind (a slow
//! database) delays no other session: what the session's queue cannot take waits here, in order, and
//! goes as the queue empties (every tick, and after the session has ended). A consumer `EVENT_BACKLOG`
//! events behind is stuck: later events are dropped and counted rather than kept without bound.

use std::collections::VecDeque;

use crossbeam_channel::{Sender, TrySendError};

use crate::events::ConversationEvent;

/// Events that wait for a slow consumer, per session, beyond those in its queue (`EVENT_QUEUE`).
pub const EVENT_BACKLOG: usize = 4_096;

pub struct EventOutbox {
    queue: Sender<ConversationEvent>,
    waiting: VecDeque<ConversationEvent>,
}

/// What became of an event handed to `EventOutbox::send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// In the consumer's queue, or waiting its turn behind earlier events.
    Queued,
    /// The consumer is `EVENT_BACKLOG` events behind: dropped.
    Dropped,
}

impl EventOutbox {
    pub fn new(queue: Sender<ConversationEvent>) -> EventOutbox {
        EventOutbox { queue, waiting: VecDeque::new() }
    }

    /// Hands `event` on behind those waiting, without blocking. An event for a consumer that is gone
    /// counts as queued (there is no one left to tell).
    pub fn send(&mut self, event: ConversationEvent) -> Sent {
        self.flush();
        let event = if self.waiting.is_empty() {
            match self.queue.try_send(event) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => return Sent::Queued,
                Err(TrySendError::Full(event)) => event,
            }
        } else {
            event
        };
        if self.waiting.len() >= EVENT_BACKLOG {
            return Sent::Dropped;
        }
        self.waiting.push_back(event);
        Sent::Queued
    }

    /// Moves waiting events into the queue while it takes them; true when nothing waits any more.
    pub fn flush(&mut self) -> bool {
        while let Some(event) = self.waiting.pop_front() {
            match self.queue.try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Full(event)) => {
                    self.waiting.push_front(event);
                    return false;
                }
                Err(TrySendError::Disconnected(_)) => self.waiting.clear(),
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventKind;
    use std::time::Duration;

    fn event(ms: u64) -> ConversationEvent {
        ConversationEvent { media_time: Duration::from_millis(ms), kind: EventKind::CallEnded }
    }

    #[test]
    fn a_full_queue_keeps_events_in_order_until_the_consumer_reads() {
        let (queue, consumer) = crossbeam_channel::bounded(1);
        let mut outbox = EventOutbox::new(queue);
        for ms in 0..4 {
            assert_eq!(outbox.send(event(ms)), Sent::Queued);
        }
        assert!(!outbox.flush());
        let mut read = Vec::new();
        while read.len() < 4 {
            read.push(consumer.try_recv().unwrap().media_time.as_millis());
            outbox.flush();
        }
        assert_eq!(read, [0, 1, 2, 3]);
        assert!(outbox.flush());
    }

    #[test]
    fn a_stuck_consumer_costs_a_bounded_backlog() {
        let (queue, _consumer) = crossbeam_channel::bounded(1);
        let mut outbox = EventOutbox::new(queue);
        let sent: Vec<Sent> = (0..EVENT_BACKLOG as u64 + 3).map(|ms| outbox.send(event(ms))).collect();
        assert!(sent[..EVENT_BACKLOG + 1].iter().all(|s| *s == Sent::Queued));
        assert_eq!(&sent[EVENT_BACKLOG + 1..], [Sent::Dropped, Sent::Dropped]);
    }

    #[test]
    fn a_consumer_that_is_gone_leaves_nothing_waiting() {
        let (queue, consumer) = crossbeam_channel::bounded(1);
        let mut outbox = EventOutbox::new(queue);
        outbox.send(event(0));
        outbox.send(event(1));
        drop(consumer);
        assert!(outbox.flush());
        assert_eq!(outbox.send(event(2)), Sent::Queued);
    }
}
