//! [`TimeoutsHolder`]: an exchange's request and read deadlines, and where
//! they are armed.
//!
//! # Where a timeout is armed
//!
//! On the client's [`HashedWheelTimer`] by default. With
//! [`use_event_loop_timeouts`](crate::ClientBuilder::use_event_loop_timeouts)
//! (which explains the trade-off), on the heap of the loop that owns the
//! exchange's connection, and nowhere else:
//!
//! * pooled path: the connection is in hand, so it is attached first and
//!   [`start`](TimeoutsHolder::start) arms on its loop;
//! * connect path: there is no connection yet, so `start` arms on the wheel
//!   (the deadline also bounds the pool wait, resolution and connect), and
//!   [`rehome`](TimeoutsHolder::rehome), called on the new connection's loop
//!   right after it is attached, moves the timeout there, keeping its
//!   absolute deadline; a read timeout armed later goes to that loop too.
//!
//! A loop can reject a schedule after saying it was not shutting down; a
//! rejected arm falls back to the wheel, so no exchange is left with nothing
//! to end it.
//!
//! # Ground rules
//!
//! * Deadlines are absolute: the request deadline is fixed at submission,
//!   and moving a timeout never restarts its countdown.
//! * Arming is never done in a constructor: the exchange is published (and
//!   its connection attached, on the pooled path) before `start` runs, so an
//!   expiry can never find a half-built exchange. `start` is idempotent.
//! * Arming and cancelling hold the holder's lock across the whole
//!   operation, including recording the handle: either the arm sees
//!   `cancelled` and arms nothing, or the cancel sees the handle and disarms
//!   it. No entry is ever left that nobody will cancel.
//! * Whether the exchange ends by expiry or by completion is decided once,
//!   by the exchange's single `done` flag; the loser does nothing.
//! * A read timeout measures silence between reads. When it fires with
//!   activity since it was armed, it re-arms for the remaining slice only,
//!   and never past the request deadline.

use crate::error::{Error, TimeoutKind};
use crate::event_loop::{LoopContext, LoopTimerKey, TimeoutScheduler};
use crate::exchange::Exchange;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tickless_timer::{HashedWheelTimer, WheelTimeout};

pub(crate) const REQUEST_TAG: u32 = 0;
pub(crate) const READ_TAG: u32 = 1;

/// Where one timeout is armed.
enum Armed {
    None,
    Wheel(WheelTimeout),
    Loop(Arc<dyn TimeoutScheduler>, LoopTimerKey),
    /// The wheel had stopped: nothing will end the exchange on time (see
    /// `TimeoutsHolder::fail_if_refused`).
    Refused,
}

impl Armed {
    /// Disarms; returns whether it was still armed.
    fn cancel(self) -> bool {
        match self {
            Armed::None | Armed::Refused => false,
            Armed::Wheel(timeout) => timeout.cancel(),
            Armed::Loop(scheduler, key) => scheduler.cancel(key),
        }
    }

    fn is_armed(&self) -> bool {
        matches!(self, Armed::Wheel(_) | Armed::Loop(..))
    }

    /// Whether it was refused; forgets it if so.
    fn take_refused(&mut self) -> bool {
        let refused = matches!(self, Armed::Refused);
        if refused {
            *self = Armed::None;
        }
        refused
    }
}

struct State {
    started: bool,
    cancelled: bool,
    /// The scheduler of the loop that owns the exchange's connection, once
    /// there is one.
    home: Option<Arc<dyn TimeoutScheduler>>,
    request: Armed,
    read: Armed,
}

/// The instant `timeout` after `start`; `None` past the end of time, which
/// is no deadline at all (a caller's `Duration::MAX` means "never").
pub(crate) fn deadline_after(start: Instant, timeout: Duration) -> Option<Instant> {
    start.checked_add(timeout)
}

/// The timeouts of one exchange. See the [module documentation](self).
pub(crate) struct TimeoutsHolder {
    /// The configured request timeout, for the error message.
    pub(crate) request_timeout: Option<Duration>,
    /// Fixed at submission.
    pub(crate) request_deadline: Option<Instant>,
    pub(crate) read_timeout: Option<Duration>,
    on_event_loop: bool,
    wheel: HashedWheelTimer,
    state: Mutex<State>,
}

impl TimeoutsHolder {
    pub(crate) fn new(
        submitted: Instant,
        request_timeout: Option<Duration>,
        read_timeout: Option<Duration>,
        on_event_loop: bool,
        wheel: HashedWheelTimer,
    ) -> Self {
        TimeoutsHolder {
            request_timeout,
            request_deadline: request_timeout.and_then(|t| deadline_after(submitted, t)),
            read_timeout,
            on_event_loop,
            wheel,
            state: Mutex::new(State {
                started: false,
                cancelled: false,
                home: None,
                request: Armed::None,
                read: Armed::None,
            }),
        }
    }

    /// Arms the request timeout: on the home loop if there is one and the
    /// mode says so, else on the wheel. Idempotent.
    pub(crate) fn start(&self, exchange: &Arc<Exchange>) {
        let mut state = crate::event_loop::lock(&self.state);
        if state.started || state.cancelled {
            return;
        }
        state.started = true;
        if let Some(deadline) = self.request_deadline {
            state.request = self.arm(&state, exchange, deadline, TimeoutKind::Request);
        }
        self.fail_if_refused(state, exchange);
    }

    /// Records the loop that now owns the exchange's connection and, in
    /// event-loop mode, moves an armed request timeout onto it, keeping its
    /// deadline. Called right after the connection is attached (on the
    /// connect path, on that loop). A read timeout of an earlier connection
    /// is disarmed: the next one is armed when the request is written.
    pub(crate) fn rehome(&self, exchange: &Arc<Exchange>, home: Arc<dyn TimeoutScheduler>) {
        let mut state = crate::event_loop::lock(&self.state);
        let moved = state
            .home
            .as_ref()
            .is_none_or(|old| !Arc::ptr_eq(old, &home));
        state.home = Some(home);
        if state.cancelled {
            return;
        }
        std::mem::replace(&mut state.read, Armed::None).cancel();
        let misplaced = match &state.request {
            Armed::None | Armed::Refused => false,
            Armed::Wheel(_) => self.on_event_loop,
            Armed::Loop(..) => moved,
        };
        if misplaced {
            let old = std::mem::replace(&mut state.request, Armed::None);
            // If it fired meanwhile, the expiry owns the outcome.
            if old.cancel() {
                if let Some(deadline) = self.request_deadline {
                    state.request = self.arm(&state, exchange, deadline, TimeoutKind::Request);
                }
            }
        }
        self.fail_if_refused(state, exchange);
    }

    /// Arms the read timeout for a full period from `now` (the request was
    /// just written), unless the request deadline comes first.
    pub(crate) fn start_read(&self, exchange: &Arc<Exchange>, now: Instant) {
        let Some(read_timeout) = self.read_timeout else {
            return;
        };
        let mut state = crate::event_loop::lock(&self.state);
        if state.cancelled || state.read.is_armed() {
            return;
        }
        let Some(deadline) = deadline_after(now, read_timeout) else {
            return;
        };
        if self
            .request_deadline
            .is_none_or(|request| deadline < request)
        {
            state.read = self.arm(&state, exchange, deadline, TimeoutKind::Read);
        }
        self.fail_if_refused(state, exchange);
    }

    /// The read timeout fired. Returns true if the connection was silent
    /// for the whole period (the exchange fails); otherwise re-arms for what
    /// is left of the period since `last_read` and returns false.
    pub(crate) fn read_expired(
        &self,
        exchange: &Arc<Exchange>,
        now: Instant,
        last_read: Instant,
    ) -> bool {
        let Some(read_timeout) = self.read_timeout else {
            return false;
        };
        let mut state = crate::event_loop::lock(&self.state);
        state.read = Armed::None;
        if state.cancelled {
            return false;
        }
        let Some(silent_until) = deadline_after(last_read, read_timeout) else {
            return false;
        };
        if now >= silent_until {
            return true;
        }
        if self
            .request_deadline
            .is_none_or(|request| silent_until < request)
        {
            state.read = self.arm(&state, exchange, silent_until, TimeoutKind::Read);
        }
        self.fail_if_refused(state, exchange);
        false
    }

    /// After arming under `state`: a timeout the stopped wheel refused would
    /// never end its exchange, so the exchange ends now, once the lock is
    /// released (ending it cancels the timeouts, which takes the lock), with
    /// [`Error::ClientClosed`]: the wheel stops when its client closes, or
    /// when a caller-given timer was stopped elsewhere.
    fn fail_if_refused(&self, mut state: MutexGuard<'_, State>, exchange: &Arc<Exchange>) {
        let refused = state.request.take_refused() | state.read.take_refused();
        drop(state);
        if refused {
            exchange.fail_and_abort(Error::ClientClosed, None);
        }
    }

    /// The request timeout fired: forget its handle.
    pub(crate) fn request_expired(&self) {
        crate::event_loop::lock(&self.state).request = Armed::None;
    }

    /// Disarms both timeouts; later arms do nothing. A cancel that reaches a
    /// closed loop reports "not cancelled" and never fails the caller.
    pub(crate) fn cancel(&self) {
        let (request, read) = {
            let mut state = crate::event_loop::lock(&self.state);
            state.cancelled = true;
            (
                std::mem::replace(&mut state.request, Armed::None),
                std::mem::replace(&mut state.read, Armed::None),
            )
        };
        request.cancel();
        read.cancel();
    }

    /// Arms one timeout where it belongs (called with the lock held, so a
    /// concurrent cancel waits until the handle is recorded).
    fn arm(
        &self,
        state: &State,
        exchange: &Arc<Exchange>,
        deadline: Instant,
        kind: TimeoutKind,
    ) -> Armed {
        let tag = match kind {
            TimeoutKind::Read => READ_TAG,
            _ => REQUEST_TAG,
        };
        if self.on_event_loop {
            if let Some(home) = &state.home {
                if !home.is_shutting_down() {
                    // Err: shutting down after all, and the wheel carries it.
                    if let Ok(key) = home.schedule(deadline, exchange.clone(), tag) {
                        return Armed::Loop(home.clone(), key);
                    }
                }
            }
        }
        let expiry = WheelExpiry {
            exchange: Some(exchange.clone()),
            tag,
        };
        match self.wheel.arm(deadline, move || expiry.fire()) {
            Ok(timeout) => Armed::Wheel(timeout),
            Err(tickless_timer::TimerStopped) => Armed::Refused,
        }
    }
}

/// A timeout's task on the wheel. Dropped without firing it was cancelled,
/// unless the wheel stopped under it (a caller's timer stopped while the
/// client was in use): then nothing else would end its exchange, so the drop
/// does, with [`Error::ClientClosed`]. It leaves the exchange alone while
/// the holder's lock is taken: whoever holds it is ending the exchange,
/// moving its timeouts to a loop, or arming on the stopped wheel (which
/// fails it), and a drop under that lock on this thread (a re-home
/// cancelling) must not take it again.
struct WheelExpiry {
    exchange: Option<Arc<Exchange>>,
    tag: u32,
}

impl WheelExpiry {
    fn fire(mut self) {
        if let Some(exchange) = self.exchange.take() {
            exchange.timeout_fired(self.tag, None);
        }
    }
}

impl Drop for WheelExpiry {
    fn drop(&mut self) {
        let Some(exchange) = self.exchange.take() else {
            return;
        };
        let abandoned = !exchange.is_done()
            && exchange.timeouts.wheel.is_stopped()
            && exchange.timeouts.state.try_lock().is_ok();
        if abandoned {
            exchange.fail_and_abort(Error::ClientClosed, None);
        }
    }
}

impl crate::event_loop::LoopTimeout for Exchange {
    fn expire(self: Arc<Self>, tag: u32, cx: &mut LoopContext<'_>) {
        self.timeout_fired(tag, Some(cx));
    }
}
