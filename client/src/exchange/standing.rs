//! [`Standing`]: the one wheel entry an HTTP/1 connection keeps for the
//! exchanges it carries, one after another.
//!
//! Each exchange arms one entry for its nearest deadline (see
//! [`TimerTable`](super::timers::TimerTable)). On a kept-alive connection
//! that meant, for every request, an insert into the wheel when it started
//! and a removal when its answer was in: two trips through the wheel's
//! lock, its slab and its occupancy bits. A connection's standing entry is
//! armed for the first exchange's deadline and then left armed: an
//! exchange whose deadline is no earlier than the entry's *holds* it and
//! arms nothing, and one that ends *lets go* of it without disarming it.
//! Deadlines on a connection only grow (each request's is its start plus
//! the same timeouts), so most requests neither arm nor disarm anything.
//! The same idea as a loop's timerfd ([`tickless_timer::PreciseWait`]):
//! moved earlier when it must be, never later or off.
//!
//! A connection makes one for the first of its exchanges that arms a
//! request or read timeout (the client's, by default, or its own): a
//! connection whose requests arm none keeps none.
//!
//! Wheel mode only. On a loop's heap it does not pay: a loop reads the
//! clock after every event while anything is armed on its heap, and an
//! entry left armed between requests costs it more than the insert and the
//! removal it saves (measured: the performance log, 2026-12-06).
//!
//! # Ground rules
//!
//! * **Never early.** When the entry fires, its holder is fired only if the
//!   clock has reached the holder's deadline; otherwise the entry is armed
//!   again for it (or, if the wheel has stopped, the holder is told so, as
//!   an entry of its own would be).
//! * **Never late on its account.** A hold for a deadline earlier than the
//!   entry's moves the entry first.
//! * **One holder.** An exchange that finds the entry held (the last one
//!   has not let go yet) arms its own entry, as without a standing one.
//! * **Holds are named.** Each hold has a serial; letting go (or moving a
//!   hold) names it, so a late let-go of an old hold never frees a new one.
//! * **Fires are named.** Each arm of the entry has a generation (its tag);
//!   a fire of an entry since replaced is stale and does nothing.
//! * **Closed with its connection.** A closed entry takes no new holder;
//!   one nobody holds is disarmed then, one still held is left to fire for
//!   its holder.
//! * **Not a request's timer while nobody holds it.** The wheel counts it
//!   as armed and its fires as fired; the client's stats take out what it
//!   did while nobody held it ([`IdleStanding`]): an idle connection has no
//!   timeout armed.
//!
//! The lock order is the exchange's, then this entry's, then the wheel's:
//! the wheel runs what fires with its own lock released, and this entry
//! calls its holder only with its own released.

use super::timers::{fire_due_on_manual_clock, reached_on_manual_clock, Target};
use crate::sync::lock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tickless_timer::{HashedWheelTimer, SharedClock, TimerStats, WheelTask, WheelTimeout};

/// Where a client's connections keep their standing entries, and what
/// those did while nobody held them.
pub(crate) struct StandingEnv {
    /// The client's wheel.
    wheel: HashedWheelTimer,
    pub(crate) idle: Arc<IdleStanding>,
}

impl StandingEnv {
    /// What a client whose wheel is `wheel` starts with.
    pub(crate) fn new(wheel: HashedWheelTimer) -> Self {
        StandingEnv {
            wheel,
            idle: Arc::default(),
        }
    }

    /// A new connection's entry, nothing armed yet.
    pub(crate) fn entry(&self, clock: &SharedClock) -> Arc<Standing> {
        Arc::new(Standing {
            wheel: self.wheel.clone(),
            clock: clock.clone(),
            idle: self.idle.clone(),
            state: Mutex::new(State::default()),
        })
    }
}

/// What a client's standing entries did while nobody held them: armed now,
/// fired, disarmed. The client's stats take these out of the wheel's own
/// counts.
#[derive(Debug, Default)]
pub(crate) struct IdleStanding {
    armed: AtomicUsize,
    fired: AtomicU64,
    cancelled: AtomicU64,
}

impl IdleStanding {
    /// `stats` (the wheel's) without what idle standing entries did.
    pub(crate) fn take_out(&self, mut stats: TimerStats) -> TimerStats {
        let armed = self.armed.load(Ordering::Relaxed);
        stats.armed = stats.armed.saturating_sub(armed);
        let fired = self.fired.load(Ordering::Relaxed);
        stats.fired = stats.fired.saturating_sub(fired);
        let cancelled = self.cancelled.load(Ordering::Relaxed);
        stats.cancelled = stats.cancelled.saturating_sub(cancelled);
        stats
    }
}

/// A connection's standing wheel entry. See the [module
/// documentation](self).
pub(crate) struct Standing {
    wheel: HashedWheelTimer,
    /// The client's clock, which the wheel's deadlines are on.
    clock: SharedClock,
    idle: Arc<IdleStanding>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The entry armed now, if any.
    armed: Option<ArmedEntry>,
    holder: Option<Holder>,
    /// Of the entry's last arm.
    generation: u64,
    /// Of the last hold.
    serial: u64,
    closed: bool,
    /// Whether `idle` counts this entry as armed now.
    counted_idle: bool,
}

struct ArmedEntry {
    deadline: Instant,
    generation: u64,
    timeout: WheelTimeout,
}

/// The exchange the entry is armed for, and for when.
struct Holder {
    target: Arc<dyn Target>,
    /// What the holder's entry is to it: its table's generation.
    tag: u64,
    deadline: Instant,
    serial: u64,
}

impl Standing {
    /// Holds the entry for `target`'s entry `tag`, due at `deadline` —
    /// moving hold `replacing` if given (the same table's, for a new
    /// deadline). Returns the hold's serial, or `None` if the entry is held
    /// by another, closed, or the wheel has stopped: the caller arms its
    /// own.
    pub(crate) fn hold(
        self: &Arc<Self>,
        deadline: Instant,
        target: &Arc<dyn Target>,
        tag: u64,
        replacing: Option<u64>,
    ) -> Option<u64> {
        let mut state = lock(&self.state);
        let free = state
            .holder
            .as_ref()
            .is_none_or(|holder| Some(holder.serial) == replacing);
        if state.closed || !free {
            return None;
        }
        if state.armed.as_ref().is_none_or(|a| a.deadline > deadline) {
            let held = state.holder.is_some();
            if let Some(armed) = state.armed.take() {
                self.disarm(armed, held);
            }
            state.generation += 1;
            let Some(timeout) = self.arm(deadline, state.generation) else {
                self.recount(&mut state);
                return None;
            };
            state.armed = Some(ArmedEntry {
                deadline,
                generation: state.generation,
                timeout,
            });
        }
        state.serial += 1;
        let serial = state.serial;
        let replaced = state.holder.replace(Holder {
            target: target.clone(),
            tag,
            deadline,
            serial,
        });
        self.recount(&mut state);
        drop(state);
        drop(replaced);
        Some(serial)
    }

    /// Hold `serial` ends (its exchange ended, or moved its entry
    /// elsewhere); the entry stays armed unless the connection has closed.
    pub(crate) fn let_go(&self, serial: u64) {
        let mut state = lock(&self.state);
        if state.holder.as_ref().is_none_or(|h| h.serial != serial) {
            return;
        }
        let holder = state.holder.take();
        if state.closed {
            if let Some(armed) = state.armed.take() {
                self.disarm(armed, true);
            }
        }
        self.recount(&mut state);
        drop(state);
        // May be the last reference to the exchange: dropped unlocked.
        drop(holder);
    }

    /// The connection has closed: no new holder; the entry is disarmed
    /// unless held.
    pub(crate) fn close(&self) {
        let mut state = lock(&self.state);
        state.closed = true;
        if state.holder.is_none() {
            if let Some(armed) = state.armed.take() {
                self.disarm(armed, false);
            }
        }
        self.recount(&mut state);
    }

    /// The entry of `generation` fired: fires the holder if its deadline
    /// has come, arms the entry again for it if not.
    fn fired(self: &Arc<Self>, generation: u64) {
        let now = self.clock.now();
        let mut state = lock(&self.state);
        let current = state
            .armed
            .as_ref()
            .is_some_and(|armed| armed.generation == generation);
        if current {
            state.armed = None;
        }
        let holder = match state.holder.take() {
            Some(holder) if current => holder,
            // Nobody holds it, or a stale fire (replaced since): a fire no
            // timeout made.
            holder => {
                state.holder = holder;
                self.idle.fired.fetch_add(1, Ordering::Relaxed);
                return self.recount(&mut state);
            }
        };
        // The holder's deadline has come: it fires, a timeout's fire.
        if holder.deadline <= now {
            self.recount(&mut state);
            drop(state);
            return WheelTask::fire(holder.target, holder.tag);
        }
        // Early for the holder (the entry was armed for an earlier one):
        // armed again for it.
        self.idle.fired.fetch_add(1, Ordering::Relaxed);
        state.generation += 1;
        let deadline = holder.deadline;
        if let Some(timeout) = self.arm(deadline, state.generation) {
            state.armed = Some(ArmedEntry {
                deadline,
                generation: state.generation,
                timeout,
            });
            state.holder = Some(holder);
            self.recount(&mut state);
            drop(state);
            // Looked at again now that the entry is in: an advance of a
            // manual clock since the read above fired nothing of it.
            if reached_on_manual_clock(&self.wheel, deadline) {
                fire_due_on_manual_clock(&self.wheel);
            }
            return;
        }
        // The wheel has stopped: the holder is told, as an entry of its
        // own would have been.
        self.recount(&mut state);
        drop(state);
        WheelTask::stopped(holder.target, holder.tag);
    }

    /// The wheel stopped with the entry of `generation` armed: its
    /// holder's timer will never fire.
    fn stopped(&self, generation: u64) {
        let mut state = lock(&self.state);
        if state
            .armed
            .as_ref()
            .is_none_or(|a| a.generation != generation)
        {
            return;
        }
        state.armed = None;
        let holder = state.holder.take();
        self.recount(&mut state);
        drop(state);
        if let Some(holder) = holder {
            WheelTask::stopped(holder.target, holder.tag);
        }
    }

    /// Arms the entry on the wheel; `None` if it has stopped.
    fn arm(self: &Arc<Self>, deadline: Instant, generation: u64) -> Option<WheelTimeout> {
        self.wheel.arm_task(deadline, self.clone(), generation).ok()
    }

    /// Disarms `armed` (`held`: for a holder, a timer's move, not an idle
    /// entry's).
    fn disarm(&self, armed: ArmedEntry, held: bool) {
        if armed.timeout.cancel() && !held {
            self.idle.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Brings `idle`'s armed count in line with the entry.
    fn recount(&self, state: &mut State) {
        let idle = state.armed.is_some() && state.holder.is_none();
        if idle != state.counted_idle {
            state.counted_idle = idle;
            if idle {
                self.idle.armed.fetch_add(1, Ordering::Relaxed);
            } else {
                self.idle.armed.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl WheelTask for Standing {
    fn fire(self: Arc<Self>, tag: u64) {
        self.fired(tag);
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        Standing::stopped(&self, tag);
    }
}
