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

/// A value reached only by `&mut` or by value, never through a shared
/// reference: `Sync` whatever it holds (if it is `Send`), as
/// `sync_wrapper::SyncWrapper` is, and without `unsafe`. What the caller
/// gives that need not be `Sync` — a `Read` to upload, an async body — is
/// kept in one, so that what holds it (an [`Upload`](crate::Upload), a
/// [`ResponseFuture`](crate::ResponseFuture)) is `Sync`, as hyper's and
/// reqwest's are. Its mutex is never locked, and so never poisoned:
/// [`get_mut`](Self::get_mut) and [`into_inner`](Self::into_inner) reach
/// the value without a lock.
pub(crate) struct Unshared<T>(Mutex<T>);

impl<T> Unshared<T> {
    pub(crate) fn new(value: T) -> Unshared<T> {
        Unshared(Mutex::new(value))
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn into_inner(self) -> T {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}
