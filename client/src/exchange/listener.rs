//! [`Guarded`]: an exchange's listener as the client calls it.

use super::Exchange;
use crate::error::Error;
use crate::events::{for_each_listener_method, EventListener, RequestInfo};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

/// An exchange's listener, guarded: a panic in the caller's code is caught
/// where it is called and ends that exchange with an I/O error saying so
/// (closing its connection, if it has one), instead of unwinding into a
/// loop, the wheel or a resolver thread, where it would leave the exchange
/// with no end. A panic after the exchange has ended changes nothing.
/// The end a panic makes is the last thing told of the exchange: the code
/// that called the listener goes on with what it was doing (a status line
/// is followed by its headers), and would tell of an exchange that has
/// ended.
///
/// It also gives every call the exchange's [`RequestInfo`]: the client
/// calls `exchange.listener.on_…(…)` with the event's own arguments only.
pub(crate) struct Guarded {
    listener: Arc<dyn EventListener>,
    request: RequestInfo,
    exchange: Weak<Exchange>,
    /// A panic of the listener's ended the exchange (and `on_failed` was
    /// told): nothing more is told.
    silenced: AtomicBool,
}

impl Guarded {
    /// Guards `listener` for `exchange` (being built: `Arc::new_cyclic`),
    /// whose request `request` is.
    pub(crate) fn new(
        listener: Arc<dyn EventListener>,
        request: RequestInfo,
        exchange: Weak<Exchange>,
    ) -> Guarded {
        Guarded {
            listener,
            request,
            exchange,
            silenced: AtomicBool::new(false),
        }
    }

    /// The request its events are about.
    pub(crate) fn request(&self) -> &RequestInfo {
        &self.request
    }

    fn call(&self, method: impl FnOnce(&dyn EventListener)) {
        if self.silenced.load(Ordering::Acquire) {
            return;
        }
        if catch_unwind(AssertUnwindSafe(|| method(&*self.listener))).is_err() {
            if let Some(exchange) = self.exchange.upgrade() {
                let error = Error::Io {
                    remote: exchange.remote_name(),
                    source: std::io::Error::other("an event listener panicked"),
                };
                if exchange.fail(error, None) {
                    self.silenced.store(true, Ordering::Release);
                }
            }
        }
    }
}

macro_rules! guarded {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        impl Guarded {
            $(pub(crate) fn $name(&self, $($arg: $ty),*) {
                self.call(|listener| listener.$name(&self.request, $($arg),*));
            })*
        }
    };
}

for_each_listener_method!(guarded);
