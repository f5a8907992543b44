//! Locks that a panic elsewhere cannot wedge.
//!
//! Every piece of shared state in the client is left consistent at each
//! unlock, so a lock poisoned by a panic in the caller's code (a listener, a
//! body callback) is still safe to take: [`lock`] takes it regardless.
//!
//! One rule holds for every lock in the crate: **nothing that may run the
//! caller's code is dropped, and no caller's code is called, while a lock is
//! held.** A callback, a listener or the last reference to an exchange or a
//! client can run a `Drop` that comes back for the same lock. What a locked
//! section removes is moved out and dropped after the unlock.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Takes `mutex`, poisoned or not.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
