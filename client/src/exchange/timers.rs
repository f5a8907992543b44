//! [`TimerTable`]: the named timers of one exchange, and the one scheduler
//! entry that stands for the nearest of them.
//!
//! Modelled on quinn-proto's `connection/timer.rs`: each named [`Timer`]
//! holds a deadline or none, and what is armed is the table's `min`. The
//! table arms a single entry at a time — on the home loop's heap in
//! event-loop mode once the exchange runs on a connection, else on the wheel
//! — and moves it whenever the `min` or the home changes.
//!
//! # Ground rules
//!
//! * Deadlines are absolute: the request deadline is fixed at submission,
//!   and moving the entry never restarts a countdown.
//! * Every arm carries a new **generation** (its tag). An expiry whose
//!   generation is not the armed entry's is stale — it was popped by its
//!   scheduler before a cancel could reach it — and does nothing: it can
//!   neither fire nor clear a newer arm.
//! * The table is only changed under its exchange's lock, and arming
//!   records its handle before that lock is released; cancelling a replaced
//!   entry happens after the unlock (the caller does it, from [`Changed`]),
//!   since what it drops may be the last reference to the exchange. Either
//!   an arm sees the table ended, or the end sees the entry: no entry is
//!   left that nobody will cancel.
//! * Nothing is armed before [`start`](TimerTable::start): arming is never
//!   done in a constructor, so an expiry can never find a half-built
//!   exchange. `start` is idempotent.
//! * An exchange on an HTTP/1 connection holds the connection's
//!   [`Standing`] entry instead of arming its own, where it can (not held
//!   by another, and on the table's home: the wheel in wheel mode, the
//!   connection's loop in event-loop mode): see there. A move of a held
//!   entry is a new hold of the same entry, nothing to cancel.
//! * A home loop that is shutting down may still reject the arm; the entry
//!   then falls back to the wheel. A wheel that has stopped refuses: the
//!   caller must end the exchange ([`Changed::refused`]), nothing else would.
//! * An expiry on the wheel's thread may tell a listener that waits on the
//!   client there: such a wait fires the wheel's due entries itself
//!   ([`firing`], [`wait_for_news`]), the awaited exchange's own among
//!   them, rather than leave them for the thread it holds.
//! * On a manual clock the wheel fires only when the clock is advanced: an
//!   entry armed there for a deadline the clock has reached (a retry that
//!   starts past its request deadline) is fired by the caller, after the
//!   unlock ([`Changed::due_on_manual_clock`]), as the system clock's
//!   worker, or a loop, would fire it at once.

use super::standing::Standing;
use crate::event_loop::{block_for_news, EventLoop, LoopTimeout, LoopTimerKey, TimeoutScheduler};
use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;
use tickless_timer::{HashedWheelTimer, WheelTask, WheelTimeout};

/// The named timers of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The whole exchange: fixed at submission.
    Request,
    /// The server's silence: checked at this deadline against the last read.
    Read,
    /// The server taking none of the request: checked at this deadline
    /// against the last time it took some.
    Write,
    /// A hedged request's delay: when due, a copy of the request is sent on
    /// another connection (the exchange itself goes on).
    Hedge,
}

impl Timer {
    const COUNT: usize = 4;
    /// In order of precedence when several are due at once.
    pub(crate) const ALL: [Timer; Timer::COUNT] =
        [Timer::Request, Timer::Read, Timer::Write, Timer::Hedge];

    fn index(self) -> usize {
        self as usize
    }
}

/// Where the table's entry is armed.
pub(crate) enum Armed {
    Wheel(WheelTimeout),
    Loop(Arc<dyn TimeoutScheduler>, LoopTimerKey),
    /// A hold (its serial) of a connection's standing entry.
    Standing(Arc<Standing>, u64),
}

impl Armed {
    /// Disarms it. Whether it was still armed does not matter to the
    /// table: a late expiry is stale by its generation.
    pub(crate) fn cancel(self) {
        match self {
            Armed::Wheel(timeout) => {
                timeout.cancel();
            }
            Armed::Loop(scheduler, key) => {
                scheduler.cancel(key);
            }
            Armed::Standing(standing, serial) => standing.let_go(serial),
        }
    }

    /// Whether it is on the wheel.
    fn on_wheel(&self) -> bool {
        match self {
            Armed::Wheel(_) => true,
            Armed::Loop(..) => false,
            Armed::Standing(standing, _) => !standing.on_loop(),
        }
    }

    /// Whether it is on a loop (not the wheel).
    #[cfg(test)]
    fn on_loop(&self) -> bool {
        !self.on_wheel()
    }
}

struct Entry {
    deadline: Instant,
    generation: u32,
    /// The home it was armed for (it may have fallen back to the wheel).
    home_epoch: u32,
    armed: Armed,
}

/// What a change to the table leaves the caller to do once it has
/// released the exchange's lock.
#[must_use]
#[derive(Default)]
pub(crate) struct Changed {
    /// The entry that was replaced: cancel it.
    pub(crate) cancel: Option<Armed>,
    /// The wheel has stopped and refused the arm: end the exchange, with
    /// nothing armed to end it otherwise.
    pub(crate) refused: bool,
    /// Armed on a wheel whose manual clock has already reached the
    /// deadline: such an entry fires only at that clock's next advance,
    /// which may never come. Advance it by nothing (it fires then, on this
    /// thread), as the system clock's worker fires such an entry at once,
    /// and a loop one due already.
    pub(crate) due_on_manual_clock: bool,
}

/// What an expiry found due.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) request: bool,
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) hedge: bool,
}

/// The timers of one exchange. See the [module documentation](self).
#[derive(Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; Timer::COUNT],
    /// The nearest of `deadlines`, kept by [`set`](Self::set) and
    /// [`end`](Self::end): a table is synced more often than it is set
    /// (each sync with nothing to change asks for it too).
    nearest: Option<Instant>,
    /// Where entries go: the scheduler of the loop that owns the exchange's
    /// connection, or the wheel (`None`).
    home: Option<Arc<dyn TimeoutScheduler>>,
    /// The standing entry of the exchange's HTTP/1 connection: held,
    /// while the home is where it is armed (the wheel, or the
    /// connection's loop), rather than an entry of the table's own where
    /// it can be.
    standing: Option<Arc<Standing>>,
    /// Bumped on every change of `home` or `standing`.
    home_epoch: u32,
    entry: Option<Entry>,
    generation: u32,
    started: bool,
    ended: bool,
}

impl TimerTable {
    /// The deadline of `timer`, if it is set.
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer.index()]
    }

    /// The nearest deadline of the table.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        debug_assert_eq!(self.nearest, self.deadlines.iter().flatten().min().copied());
        self.nearest
    }

    /// Whether an entry is armed, and where.
    #[cfg(test)]
    fn armed(&self) -> Option<&Armed> {
        self.entry.as_ref().map(|entry| &entry.armed)
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.ended
    }

    /// A table whose request timer is set to `request_deadline`; nothing
    /// is armed until [`start`](Self::start).
    pub(crate) fn new(request_deadline: Option<Instant>) -> TimerTable {
        let mut table = TimerTable::default();
        table.set(Timer::Request, request_deadline);
        table
    }

    /// Lets the table arm from the next [`sync`](Self::sync) on (idempotent).
    pub(crate) fn start(&mut self) {
        self.started = true;
    }

    /// Sets or clears `timer` (armed by the next [`sync`](Self::sync)).
    pub(crate) fn set(&mut self, timer: Timer, deadline: Option<Instant>) {
        self.deadlines[timer.index()] = deadline;
        self.nearest = self.deadlines.iter().flatten().min().copied();
    }

    /// Makes `home` (a loop's scheduler, or the wheel) where the entry is
    /// armed from the next [`sync`](Self::sync) on — holding `standing`
    /// there if it can — keeping every deadline.
    pub(crate) fn set_home(
        &mut self,
        home: Option<Arc<dyn TimeoutScheduler>>,
        standing: Option<Arc<Standing>>,
    ) {
        fn same<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
        }
        if !same(&self.home, &home) || !same(&self.standing, &standing) {
            self.home = home;
            self.standing = standing;
            self.home_epoch = self.home_epoch.wrapping_add(1);
        }
    }

    /// Ends the table: nothing is armed any more, ever. Returns the entry to
    /// cancel.
    pub(crate) fn end(&mut self) -> Option<Armed> {
        self.ended = true;
        self.deadlines = [None; Timer::COUNT];
        self.nearest = None;
        self.entry.take().map(|entry| entry.armed)
    }

    /// The entry of `generation` expired at `now`: what is due, or `None`
    /// if the expiry is stale (or the table ended). The entry is gone
    /// either way; the caller handles what is due and then [`sync`](Self::sync)s.
    pub(crate) fn expired(&mut self, generation: u32, now: Instant) -> Option<Due> {
        if self.ended || self.entry.as_ref()?.generation != generation {
            return None;
        }
        self.entry = None;
        let due = |timer: Timer| self.get(timer).is_some_and(|deadline| deadline <= now);
        Some(Due {
            request: due(Timer::Request),
            read: due(Timer::Read),
            write: due(Timer::Write),
            hedge: due(Timer::Hedge),
        })
    }

    /// The scheduler of the entry of `generation` stopped with it armed:
    /// returns whether that was the live entry (the exchange must then
    /// end, nothing else will end it).
    pub(crate) fn stopped(&mut self, generation: u32) -> bool {
        if self.ended
            || self
                .entry
                .as_ref()
                .is_none_or(|e| e.generation != generation)
        {
            return false;
        }
        self.entry = None;
        true
    }

    /// Brings the armed entry in line with the table: one entry, for the
    /// nearest deadline, at the home — replacing the one there is unless it
    /// already is that. Call it after every change, under the same lock.
    pub(crate) fn sync<T: Target>(&mut self, target: &Arc<T>, wheel: &HashedWheelTimer) -> Changed {
        let want = self.next_deadline().filter(|_| self.started && !self.ended);
        let current = self
            .entry
            .as_ref()
            .map(|entry| (entry.deadline, entry.home_epoch));
        if current == want.map(|deadline| (deadline, self.home_epoch)) {
            return Changed::default();
        }
        let mut cancel = self
            .entry
            .take()
            .map(|entry| (entry.armed, entry.home_epoch));
        let Some(deadline) = want else {
            return Changed {
                cancel: cancel.map(|(armed, _)| armed),
                ..Changed::default()
            };
        };
        self.generation = self.generation.wrapping_add(1);
        let tag = u64::from(self.generation);
        // A hold of the standing entry, for the same home: moved by a new
        // hold of the same entry, with nothing left to cancel if it is.
        let replacing = match &cancel {
            Some((Armed::Standing(_, serial), epoch)) if *epoch == self.home_epoch => Some(*serial),
            _ => None,
        };
        let armed = self.arm(deadline, tag, replacing, target, wheel);
        if replacing.is_some() && matches!(armed, Some(Armed::Standing(..))) {
            cancel = None;
        }
        let cancel = cancel.map(|(armed, _)| armed);
        match armed {
            Some(armed) => {
                let due_on_manual_clock =
                    armed.on_wheel() && reached_on_manual_clock(wheel, deadline);
                self.entry = Some(Entry {
                    deadline,
                    generation: self.generation,
                    home_epoch: self.home_epoch,
                    armed,
                });
                Changed {
                    cancel,
                    refused: false,
                    due_on_manual_clock,
                }
            }
            None => Changed {
                cancel,
                refused: true,
                due_on_manual_clock: false,
            },
        }
    }

    /// Arms at the home — holding the standing entry there if it can,
    /// moving hold `replacing` — falling back to the wheel if the home
    /// loop is shutting down; `None` if the wheel has stopped.
    fn arm<T: Target>(
        &self,
        deadline: Instant,
        tag: u64,
        replacing: Option<u64>,
        target: &Arc<T>,
        wheel: &HashedWheelTimer,
    ) -> Option<Armed> {
        // A connection's home and standing entry are set together, from
        // the same connection: a loop's standing entry is on the home loop.
        let standing = self
            .standing
            .as_ref()
            .filter(|standing| standing.on_loop() == self.home.is_some());
        if let Some(standing) = standing {
            #[cfg(debug_assertions)]
            if let Some(home) = &self.home {
                debug_assert!(standing.is_on(home), "a standing entry off its home loop");
            }
            if let Some(serial) = standing.hold(deadline, target, tag, replacing) {
                return Some(Armed::Standing(standing.clone(), serial));
            }
        }
        if let Some(home) = &self.home {
            if !home.is_shutting_down() {
                // Err: shutting down after all, and the wheel carries it.
                if let Ok(key) = home.schedule(deadline, target.clone(), tag) {
                    return Some(Armed::Loop(home.clone(), key));
                }
            }
        }
        wheel
            .arm_task(deadline, target.clone(), tag)
            .ok()
            .map(Armed::Wheel)
    }
}

/// Whether `wheel` runs on a manual clock that reads `deadline` or later.
pub(super) fn reached_on_manual_clock(wheel: &HashedWheelTimer, deadline: Instant) -> bool {
    let clock = wheel.clock();
    clock.as_manual().is_some() && deadline <= clock.now()
}

/// Fires what `wheel`'s manual clock has reached, if it runs on one: on a
/// manual clock an entry fires only at an advance, so one armed after an
/// advance passed its deadline (on another thread, between the look at
/// the clock and the arm) would wait for another that may never come —
/// advanced by nothing here, it fires, as the system clock's worker fires
/// an entry armed late at once. Call with no lock held: the advance runs
/// what is due inline.
pub(super) fn fire_due_on_manual_clock(wheel: &HashedWheelTimer) {
    if let Some(clock) = wheel.clock().as_manual() {
        clock.advance(std::time::Duration::ZERO);
    }
}

thread_local! {
    /// The wheel whose entry this thread fires into an exchange, while it
    /// does (see [`firing`]).
    static FIRING: RefCell<Option<HashedWheelTimer>> = const { RefCell::new(None) };
}

/// Runs `fire`, an entry of `wheel` firing into an exchange on this
/// thread — the wheel's own, unless it runs its tasks elsewhere. The
/// expiry may tell a listener, whose code may wait on the client there: a
/// wait for news of an exchange meanwhile fires the wheel's due entries
/// itself ([`wait_for_news`]), the awaited exchange's own timeouts among
/// them, which would otherwise wait for the wait, for ever.
pub(super) fn firing(wheel: &HashedWheelTimer, fire: impl FnOnce()) {
    /// Puts back the wheel fired before (an entry fired by a wait in
    /// another's expiry), also when `fire` unwinds.
    struct Restore(Option<HashedWheelTimer>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            // Dropped after the borrow: it may be the wheel's last clone.
            let inner = FIRING.with(|firing| firing.replace(outer));
            drop(inner);
        }
    }
    let outer = FIRING.with(|firing| firing.replace(Some(wheel.clone())));
    let _restore = Restore(outer);
    fire();
}

/// Whether this thread fires a wheel's entry into an exchange now (see
/// [`firing`]): a blocking wait here has no loop to drive, and fires that
/// wheel's due entries instead.
pub(super) fn firing_a_wheel() -> bool {
    FIRING.with(|firing| firing.borrow().is_some())
}

/// Waits on `ready` for news of an exchange (`guard` locks `state`) on
/// `home`, or with none on any of `any_of`, as [`block_for_news`] does —
/// but on a thread firing a wheel's entry (see [`firing`]) a tick of that
/// wheel at most, then fires what is due on it, `state` unlocked meanwhile
/// (what fires may bring the news). The caller looks for its news again
/// either way.
pub(super) fn wait_for_news<'a, T>(
    state: &'a Mutex<T>,
    ready: &Condvar,
    guard: MutexGuard<'a, T>,
    home: Option<&EventLoop>,
    any_of: &[Arc<EventLoop>],
) -> MutexGuard<'a, T> {
    let Some(wheel) = FIRING.with(|firing| firing.borrow().clone()) else {
        return block_for_news(home, any_of, || {
            ready.wait(guard).unwrap_or_else(PoisonError::into_inner)
        });
    };
    let (guard, _) = ready
        .wait_timeout(guard, wheel.tick())
        .unwrap_or_else(PoisonError::into_inner);
    drop(guard);
    wheel.fire_due();
    crate::sync::lock(state)
}

/// Parks the calling thread for news of exchanges that may be on any of
/// `loops` (a hedged or retried request's attempts), until it is unparked,
/// as [`block_for_news`] does — but on a thread firing a wheel's
/// entry (see [`firing`]) a tick of that wheel at most, then fires what is
/// due on it: the attempts' timeouts, a hedge delay or a backoff among
/// them. The caller polls again either way.
pub(crate) fn park_for_news(loops: &[Arc<EventLoop>]) {
    let Some(wheel) = FIRING.with(|firing| firing.borrow().clone()) else {
        return block_for_news(None, loops, std::thread::park);
    };
    std::thread::park_timeout(wheel.tick());
    wheel.fire_due();
}

/// What the entries of a table expire into: its exchange (or a test's
/// stand-in), on a loop or on the wheel.
pub(crate) trait Target: LoopTimeout + WheelTask {}

impl<T: LoopTimeout + WheelTask> Target for T {}

/// The generation an entry's tag carries.
pub(crate) fn generation_of(tag: u64) -> u32 {
    tag as u32
}

#[cfg(test)]
mod tests;
