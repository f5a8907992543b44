//! [`InFlight`]: the exchanges of a client that have not ended, so that
//! closing the client can end them all.

use super::Exchange;
use crate::sync::lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Exchanges submitted and not yet ended. An exchange registers when it is
/// submitted and unregisters itself when it ends; a slot is checked by
/// exchange id, so an exchange that ended after [`drain`](Self::drain) took
/// it never removes the one that took its slot.
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
        let key = lock(&self.slots).insert(exchange);
        self.count.fetch_add(1, Ordering::Relaxed);
        key
    }

    /// Unregisters the exchange `id` from `key`, if it is still there.
    pub(crate) fn remove(&self, key: usize, id: u64) {
        if key == UNREGISTERED {
            return;
        }
        let removed = {
            let mut slots = lock(&self.slots);
            match slots.get(key) {
                Some(exchange) if exchange.id == id => Some(slots.remove(key)),
                _ => None,
            }
        };
        if removed.is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        // `removed` drops here, after the unlock.
    }

    /// Unregisters every exchange and returns them.
    pub(crate) fn drain(&self) -> Vec<Arc<Exchange>> {
        let drained: Vec<_> = lock(&self.slots).drain().collect();
        self.count.fetch_sub(drained.len(), Ordering::Relaxed);
        drained
    }

    /// How many are registered.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}
