//! [`InFlight`]: the exchanges of a client that have not ended, so that
//! closing the client can end them all.

use super::Exchange;
use crate::sync::lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Exchanges submitted and not yet ended. An exchange registers when it is
/// submitted and unregisters itself when it ends; a slot is checked by
/// exchange id, so an exchange that ended after [`drain`](Self::drain) took
/// it never removes the one that took its slot. The count changes under the
/// slots' lock, with them: a concurrent `drain` cannot take it below zero.
#[derive(Default)]
pub(crate) struct InFlight {
    slots: Mutex<slab::Slab<Arc<Exchange>>>,
    count: AtomicUsize,
}

/// No slot: not registered (yet, or any more).
pub(crate) const UNREGISTERED: usize = usize::MAX;

impl InFlight {
    /// Registers `exchange`; returns its slot.
    pub(crate) fn insert(&self, exchange: Arc<Exchange>) -> usize {
        let mut slots = lock(&self.slots);
        self.count.fetch_add(1, Ordering::Relaxed);
        slots.insert(exchange)
    }

    /// Unregisters the exchange `id` from `key`, if it is still there.
    pub(crate) fn remove(&self, key: usize, id: u64) {
        if key == UNREGISTERED {
            return;
        }
        let removed = {
            let mut slots = lock(&self.slots);
            match slots.get(key) {
                Some(exchange) if exchange.id == id => {
                    self.count.fetch_sub(1, Ordering::Relaxed);
                    Some(slots.remove(key))
                }
                _ => None,
            }
        };
        // Dropped after the unlock.
        drop(removed);
    }

    /// Unregisters every exchange and returns them.
    pub(crate) fn drain(&self) -> Vec<Arc<Exchange>> {
        let mut slots = lock(&self.slots);
        self.count.fetch_sub(slots.len(), Ordering::Relaxed);
        slots.drain().collect()
    }

    /// How many are registered.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}
