//! [`Standing`]: the one timer entry an HTTP/1 connection keeps for the
//! exchanges it carries, one after another — on the client's wheel, or in
//! event-loop mode on its loop's heap.
//!
//! Each exchange arms one entry for its nearest deadline (see
//! [`TimerTable`](super::timers::TimerTable)). On a kept-alive connection
//! that meant, for every request, an insert into the wheel (or the loop's
//! heap) when it started and a removal when its answer was in: two trips
//! through the scheduler's lock and its slab, and the wheel's occupancy
//! bits or the heap's sifts. A connection's standing entry is armed for
//! the first exchange's deadline and then left armed: an exchange whose
//! deadline is no earlier than the entry's *holds* it and arms nothing,
//! and one that ends *lets go* of it without disarming it. Deadlines on a
//! connection only grow (each request's is its start plus the same
//! timeouts), so most requests neither arm nor disarm anything. The same
//! idea as a loop's timerfd ([`tickless_timer::PreciseWait`]): moved
//! earlier when it must be, never later or off.
//!
//! A connection makes one for the first of its exchanges that arms a
//! request or read timeout (the client's, by default, or its own): a
//! connection whose requests arm none keeps none. An HTTP/2 connection
//! keeps none (its streams run at once, each arms its own), nor one whose
//! group puts a test's scheduler in front of its loops (entries armed
//! through that may not be on the loop's heap).
//!
//! # On a loop's heap
//!
//! In event-loop mode the entry is on the heap of the connection's loop:
//! it fires there as [`LoopTimeout::expire`] (its holder's, too), a re-arm
//! for a later holder goes on the same loop, and a re-arm the loop rejects
//! (it is shutting down) tells the holder its timer was stopped, as a
//! loop does an entry of its own.
//!
//! Until 2026-12-07 it was wheel mode only: a loop reads the clock after
//! every task and every event while anything is armed on its heap, and an
//! entry left armed between requests made every turn pay that — more than
//! the insert and removal it saves (measured: the performance log,
//! 2026-12-06). So the loop now knows how many entries on its heap are idle
//! standing ones ([`IdleStanding`], which this entry keeps up to date) and
//! reads no clock after a task or event while every entry there is idle:
//! their fire does nothing. An idle entry that falls due is still popped,
//! by an expiry the loop's poll forces (see `EventLoop::expire_due` for
//! why that is safe). A request on the loops then pays a hold and a
//! let-go (about 170 instructions) where it paid the heap's insert and
//! cancel (about 300): the performance log, 2026-12-07.
//!
//! # Ground rules
//!
//! * **Never early.** When the entry fires, its holder is fired only if the
//!   clock has reached the holder's deadline; otherwise the entry is armed
//!   again for it (or, if the wheel has stopped or the loop is shutting
//!   down, the holder is told so, as an entry of its own would be).
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
//! * **Not a request's timer while nobody holds it.** Its scheduler counts
//!   it as armed and its fires as fired; the client's stats (and a loop's)
//!   take out what it did while nobody held it ([`IdleStanding`]): an idle
//!   connection has no timeout armed.
//! * **Counted idle only while it is.** The idle count is raised once the
//!   entry is armed with nobody holding it, and lowered *before* an idle
//!   entry is disarmed: a loop trusts it not to run ahead of its heap.
//!
//! The lock order is the exchange's, then this entry's, then the
//! scheduler's: the wheel and the loop run what fires with their own locks
//! released, and this entry calls its holder only with its own released.

use super::timers::{fire_due_on_manual_clock, reached_on_manual_clock, Target};
use crate::event_loop::{EventLoop, IdleStanding, LoopContext, LoopTimeout, LoopTimerKey};
use crate::sync::lock;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tickless_timer::{HashedWheelTimer, SharedClock, WheelTask, WheelTimeout};

/// Where a client's connections keep their standing entries in wheel
/// mode, and what those did while nobody held them.
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

    /// A new connection's entry on the wheel, nothing armed yet.
    pub(crate) fn on_wheel(&self, clock: &SharedClock) -> Arc<Standing> {
        Standing::new(
            Place::Wheel {
                wheel: self.wheel.clone(),
                idle: self.idle.clone(),
            },
            clock,
        )
    }

    /// A new connection's entry on the heap of `event_loop`, its loop,
    /// nothing armed yet (event-loop mode).
    pub(crate) fn on_loop(event_loop: Arc<EventLoop>, clock: &SharedClock) -> Arc<Standing> {
        Standing::new(Place::Loop(event_loop), clock)
    }
}

/// Where a standing entry is armed.
enum Place {
    /// The client's wheel, with what the client's idle entries did there.
    Wheel {
        wheel: HashedWheelTimer,
        idle: Arc<IdleStanding>,
    },
    /// The heap of the connection's loop (which keeps its idle count).
    Loop(Arc<EventLoop>),
}

/// A connection's standing entry. See the [module
/// documentation](self).
pub(crate) struct Standing {
    place: Place,
    /// The client's clock, which the scheduler's deadlines are on.
    clock: SharedClock,
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
    /// Whether the place's idle count counts this entry now.
    counted_idle: bool,
}

struct ArmedEntry {
    deadline: Instant,
    generation: u64,
    key: Key,
}

/// How to disarm an armed entry, by place.
enum Key {
    Wheel(WheelTimeout),
    Loop(LoopTimerKey),
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
    fn new(place: Place, clock: &SharedClock) -> Arc<Standing> {
        Arc::new(Standing {
            place,
            clock: clock.clone(),
            state: Mutex::new(State::default()),
        })
    }

    /// Whether the entry is on a loop's heap (else on the wheel): a table
    /// holds it only while its own entries go to the same place.
    pub(crate) fn on_loop(&self) -> bool {
        matches!(self.place, Place::Loop(_))
    }

    /// Whether the entry is on the heap of the loop `scheduler` is.
    #[cfg(debug_assertions)]
    pub(crate) fn is_on(&self, scheduler: &Arc<dyn crate::event_loop::TimeoutScheduler>) -> bool {
        let scheduler = Arc::as_ptr(scheduler) as *const ();
        matches!(&self.place, Place::Loop(on) if Arc::as_ptr(on) as *const () == scheduler)
    }

    fn idle(&self) -> &IdleStanding {
        match &self.place {
            Place::Wheel { idle, .. } => idle,
            Place::Loop(event_loop) => event_loop.idle_standing(),
        }
    }

    /// Holds the entry for `target`'s entry `tag`, due at `deadline` —
    /// moving hold `replacing` if given (the same table's, for a new
    /// deadline). Returns the hold's serial, or `None` if the entry is held
    /// by another, closed, or its scheduler has stopped (the wheel) or is
    /// shutting down (the loop): the caller arms its own.
    pub(crate) fn hold<T: Target>(
        self: &Arc<Self>,
        deadline: Instant,
        target: &Arc<T>,
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
                // Uncounted before it leaves its scheduler.
                self.recount(&mut state);
                self.disarm(armed, held);
            }
            state.generation += 1;
            let key = self.arm(deadline, state.generation)?;
            state.armed = Some(ArmedEntry {
                deadline,
                generation: state.generation,
                key,
            });
        }
        state.serial += 1;
        let serial = state.serial;
        let replaced = state.holder.replace(Holder {
            // The one clone a hold takes.
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
                // Uncounted before it leaves its scheduler.
                self.recount(&mut state);
                self.disarm(armed, false);
            }
        }
        self.recount(&mut state);
    }

    /// The entry of `generation` fired (on the loop: `cx`): fires the
    /// holder if its deadline has come, arms the entry again for it if
    /// not.
    fn fired(self: &Arc<Self>, generation: u64, cx: Option<&mut LoopContext<'_>>) {
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
                self.idle().fired();
                return self.recount(&mut state);
            }
        };
        // The holder's deadline has come: it fires, a timeout's fire.
        if holder.deadline <= now {
            self.recount(&mut state);
            drop(state);
            return match cx {
                Some(cx) => LoopTimeout::expire(holder.target, holder.tag, cx),
                None => WheelTask::fire(holder.target, holder.tag),
            };
        }
        // Early for the holder (the entry was armed for an earlier one):
        // armed again for it.
        self.idle().fired();
        state.generation += 1;
        let deadline = holder.deadline;
        if let Some(key) = self.arm(deadline, state.generation) {
            state.armed = Some(ArmedEntry {
                deadline,
                generation: state.generation,
                key,
            });
            state.holder = Some(holder);
            self.recount(&mut state);
            drop(state);
            // Looked at again now that the entry is in: an advance of a
            // manual clock since the read above fired nothing of it. (A
            // loop looks at its heap again before its poll blocks.)
            if let Place::Wheel { wheel, .. } = &self.place {
                if reached_on_manual_clock(wheel, deadline) {
                    fire_due_on_manual_clock(wheel);
                }
            }
            return;
        }
        // The wheel has stopped, or the loop is shutting down: the holder
        // is told, as an entry of its own would have been.
        self.recount(&mut state);
        drop(state);
        self.tell_stopped(holder);
    }

    /// The scheduler stopped with the entry of `generation` armed: its
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
            self.tell_stopped(holder);
        }
    }

    /// Tells `holder` its timer will never fire, as its scheduler would.
    fn tell_stopped(&self, holder: Holder) {
        match self.place {
            Place::Wheel { .. } => WheelTask::stopped(holder.target, holder.tag),
            Place::Loop(_) => LoopTimeout::stopped(holder.target, holder.tag),
        }
    }

    /// Arms the entry; `None` if the wheel has stopped or the loop is
    /// shutting down.
    fn arm(self: &Arc<Self>, deadline: Instant, generation: u64) -> Option<Key> {
        match &self.place {
            Place::Wheel { wheel, .. } => wheel
                .arm_task(deadline, self.clone(), generation)
                .ok()
                .map(Key::Wheel),
            Place::Loop(event_loop) => event_loop
                .schedule(deadline, self.clone(), generation)
                .ok()
                .map(Key::Loop),
        }
    }

    /// Disarms `armed` (`held`: for a holder, a timer's move, not an idle
    /// entry's).
    fn disarm(&self, armed: ArmedEntry, held: bool) {
        let cancelled = match (armed.key, &self.place) {
            (Key::Wheel(timeout), _) => timeout.cancel(),
            (Key::Loop(key), Place::Loop(event_loop)) => event_loop.cancel(key),
            (Key::Loop(_), Place::Wheel { .. }) => unreachable!("armed where it is placed"),
        };
        if cancelled && !held {
            self.idle().cancelled();
        }
    }

    /// Brings the idle count in line with the entry.
    fn recount(&self, state: &mut State) {
        let idle = state.armed.is_some() && state.holder.is_none();
        if idle != state.counted_idle {
            state.counted_idle = idle;
            self.idle().idle_now(idle);
        }
    }
}

impl WheelTask for Standing {
    fn fire(self: Arc<Self>, tag: u64) {
        self.fired(tag, None);
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        Standing::stopped(&self, tag);
    }
}

impl LoopTimeout for Standing {
    fn expire(self: Arc<Self>, tag: u64, cx: &mut LoopContext<'_>) {
        self.fired(tag, Some(cx));
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        Standing::stopped(&self, tag);
    }
}
