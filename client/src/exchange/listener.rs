//! [`Guarded`]: an exchange's listener as the client calls it.
//!
//! # Nothing after the end
//!
//! An exchange's *progress* events (resolution, connect, TLS, request sent,
//! status, headers, body parts, …) are told by the code that runs it, on
//! its loop or a resolver thread; its end may be decided on another thread
//! at the same time (the wheel's request timeout, a caller's cancel). So
//! that no progress event is told after `on_completed` or `on_failed`, the
//! two meet on one atomic word, [`Guarded::state`]: an `ENDED` bit, and how
//! many progress events are being told right now.
//!
//! * A progress event is told only if `ENDED` is not set, and counted while
//!   it is: one compare-and-swap in, one subtraction out, on a word only
//!   the exchange's own thread touches until it ends (no lock, no
//!   allocation, no wait).
//! * The end sets `ENDED`. If no event is being told, the ender tells the
//!   end at once. If one is, the ender waits for nothing: it puts the end
//!   aside ([`Guarded::deferred`]) and the teller that finishes last tells
//!   it, on its own thread, once its event returns.
//!
//! Blocking the ender instead would hold the wheel, or a caller, on a
//! listener's code (and deadlock a listener that cancels its own request
//! from `on_status`); telling the end at once whatever is being told lets
//! `on_headers` follow `on_failed`.

use super::{Ending, Exchange};
use crate::error::Error;
use crate::events::{self, for_each_listener_method, EventListener, RequestInfo};
use crate::sync::lock;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// [`Guarded::state`]: the exchange has ended; no progress event is told
/// from now on.
const ENDED: u32 = 1 << 31;
/// [`Guarded::state`]: a panic of the listener's ended the exchange (and
/// `on_failed` was told): nothing more at all is told.
const SILENCED: u32 = 1 << 30;
/// [`Guarded::state`]: the rest counts the progress events being told.
const TELLING: u32 = SILENCED - 1;

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
/// Its end is told after every progress event, whatever thread ends it
/// (see the [module documentation](self)).
///
/// It also gives every call the exchange's [`RequestInfo`]: the client
/// calls `exchange.listener.on_…(…)` with the event's own arguments only.
pub(crate) struct Guarded {
    listener: Arc<dyn EventListener>,
    /// Whether `listener` is anyone's (see [`events::listens`]).
    listens: bool,
    request: RequestInfo,
    exchange: Weak<Exchange>,
    /// [`ENDED`], [`SILENCED`], and the progress events being told
    /// ([`TELLING`]).
    state: AtomicU32,
    /// The end of an exchange that ended while a progress event was being
    /// told: for the last teller to tell. Locked (and boxed, to keep every
    /// exchange small) only for such an end.
    deferred: Mutex<Option<Box<Ending>>>,
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
            listens: events::listens(&listener),
            listener,
            request,
            exchange,
            state: AtomicU32::new(0),
            deferred: Mutex::new(None),
        }
    }

    /// The request its events are about.
    pub(crate) fn request(&self) -> &RequestInfo {
        &self.request
    }

    /// Whether anyone listens: false for a client given no listener, and
    /// a request given none either (see [`events::listens`]). Events told
    /// to nobody cost the caller this test alone; one that costs something
    /// to build asks it first.
    pub(crate) fn listens(&self) -> bool {
        self.listens
    }

    /// The exchange ends with `ending`: no progress event is told from now
    /// on. Returns `ending` for the caller to tell now, or `None` if a
    /// progress event is being told (on another thread, or further up this
    /// one's stack): the last teller tells the end once its event returns.
    pub(super) fn end(&self, ending: Ending) -> Option<Ending> {
        // Counted as one more teller while `ending` is put aside, so that
        // the teller that finishes last finds it there.
        let was = self.state.fetch_add(ENDED + 1, Ordering::AcqRel);
        debug_assert_eq!(was & ENDED, 0, "an exchange ends once");
        if was & TELLING == 0 {
            self.state.fetch_sub(1, Ordering::Release);
            return Some(ending);
        }
        *lock(&self.deferred) = Some(Box::new(ending));
        if self.finish_telling() {
            // Every teller finished meanwhile.
            return lock(&self.deferred).take().map(|ending| *ending);
        }
        None
    }

    /// Counts a progress event in, unless the exchange has ended.
    fn begin_telling(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & ENDED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Counts a progress event (or the ender's hold) out. Returns whether
    /// it was the last of an exchange that has ended: then the end put
    /// aside is this caller's to tell.
    fn finish_telling(&self) -> bool {
        self.state.fetch_sub(1, Ordering::AcqRel) & !SILENCED == ENDED | 1
    }

    /// Tells a progress event, unless the exchange has ended; its end, if
    /// it came meanwhile, is told just after.
    fn tell(&self, method: impl FnOnce(&dyn EventListener)) {
        // Told to nobody: no count, no catch, no end to defer.
        if !self.listens || !self.begin_telling() {
            return;
        }
        let panicked = catch_unwind(AssertUnwindSafe(|| method(&*self.listener))).is_err();
        if self.finish_telling() {
            let ending = lock(&self.deferred).take();
            // The caller of a progress event holds the exchange.
            if let (Some(ending), Some(exchange)) = (ending, self.exchange.upgrade()) {
                exchange.tell_end(*ending);
            }
        }
        if panicked {
            self.fail_for_panic();
        }
    }

    /// Tells an event of the exchange's end or of its request's policy
    /// (`on_redirect`, `on_retry`: after the end), unless a panic
    /// silenced it.
    fn call(&self, method: impl FnOnce(&dyn EventListener)) {
        if !self.listens || self.state.load(Ordering::Acquire) & SILENCED != 0 {
            return;
        }
        if catch_unwind(AssertUnwindSafe(|| method(&*self.listener))).is_err() {
            self.fail_for_panic();
        }
    }

    /// The listener panicked: the exchange fails, if it has not ended.
    fn fail_for_panic(&self) {
        if let Some(exchange) = self.exchange.upgrade() {
            let error = Error::Io {
                remote: exchange.remote_name(),
                source: std::io::Error::other("an event listener panicked"),
            };
            if exchange.fail(error, None) {
                self.state.fetch_or(SILENCED, Ordering::Release);
            }
        }
    }
}

macro_rules! guarded {
    (
        progress { $($progress:ident($($parg:ident: $pty:ty),*);)* }
        ending { $($ending:ident($($earg:ident: $ety:ty),*);)* }
    ) => {
        impl Guarded {
            $(pub(crate) fn $progress(&self, $($parg: $pty),*) {
                self.tell(|listener| listener.$progress(&self.request, $($parg),*));
            })*
            $(pub(crate) fn $ending(&self, $($earg: $ety),*) {
                self.call(|listener| listener.$ending(&self.request, $($earg),*));
            })*
        }
    };
}

for_each_listener_method!(guarded);
