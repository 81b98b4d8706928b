//! The one way Confab takes a mutex: a lock poisoned by a panic elsewhere is taken anyway. Every value
//! kept behind a mutex here is whole between statements (tables of calls, a recorder, a session id, a
//! backlog), and the panic that poisoned it was contained and counted where it happened; refusing the lock
//! would turn one failed call into every later call failing.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `mutex` locked, whether or not a panic poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_with_its_value() {
        let table = std::sync::Arc::new(Mutex::new(vec![1]));
        let poisoner = table.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock().unwrap();
            panic!("a call failed");
        })
        .join();
        assert!(table.is_poisoned());
        lock(&table).push(2);
        assert_eq!(*lock(&table), [1, 2]);
    }
}
