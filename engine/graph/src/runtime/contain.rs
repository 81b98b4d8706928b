//! Panic containment for the runtime's threads: a panic in one session's work (or in one inference
//! batch) is caught where it happens, logged, counted in `RuntimeCounters::panics`, and the caller
//! ends the affected calls cleanly; the thread goes on serving every other session.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use super::RuntimeCounters;

/// Runs `work`; on a panic returns None after logging `what` and counting it.
///
/// `AssertUnwindSafe` is sound here because every caller throws away the state the panic may have left
/// half-updated: the session is ended and dropped, or the batch's sessions are ended.
pub fn contain<T>(counters: &RuntimeCounters, what: &str, work: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(value) => Some(value),
        Err(payload) => {
            counters.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(panic = panic_message(payload.as_ref()), "{what} panicked; its calls are ended");
            None
        }
    }
}

/// The message a panic carried, when it carried text.
pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "(no message)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_counted_and_the_caller_goes_on() {
        let counters = RuntimeCounters::default();
        assert_eq!(contain(&counters, "adding", || 2 + 2), Some(4));
        let index = 9;
        let caught = contain(&counters, "indexing", || [0u8; 8][std::hint::black_box(index)]);
        assert_eq!(caught, None);
        let caught = contain(&counters, "failing", || -> u8 { panic!("failed on {index}") });
        assert_eq!(caught, None);
        assert_eq!(RuntimeCounters::get(&counters.panics), 2);
    }

    #[test]
    fn panic_messages_are_read_from_both_payload_kinds() {
        let text = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_message(text.as_ref()), "plain");
        let formatted = catch_unwind(|| panic!("formatted {}", 7)).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "formatted 7");
    }
}
