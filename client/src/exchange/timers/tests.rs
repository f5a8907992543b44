//! The timer table in virtual time: a manual clock, the real wheel on it,
//! and a double for a loop's scheduler that the test pops by hand — so the
//! races of a loop (an expiry popped before a cancel reaches it, a loop that
//! rejects after saying it would not) happen exactly when the test says.

use super::*;
use crate::event_loop::{LoopContext, Rejected};
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Duration;
use tickless_timer::{Clock, DeadlineHeap, ManualClock};

/// What an expiry found, as the probe recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Due(Due),
    Stale,
    Stopped { live: bool },
}

/// Stands for an exchange: owns a table, and handles its expiries the way
/// an exchange does (what is due is recorded, the rest re-armed).
struct Probe {
    table: Mutex<TimerTable>,
    wheel: HashedWheelTimer,
    clock: ManualClock,
    seen: Mutex<Vec<Seen>>,
}

impl Probe {
    fn change(self: &Arc<Self>, f: impl FnOnce(&mut TimerTable)) {
        let changed = {
            let mut table = lock(&self.table);
            f(&mut table);
            table.sync(self, &self.wheel)
        };
        assert!(!changed.refused, "the wheel refused");
        if let Some(armed) = changed.cancel {
            armed.cancel();
        }
    }

    fn on_expiry(self: &Arc<Self>, tag: u64) {
        let now = self.clock.now();
        let mut seen = Seen::Stale;
        self.change(|table| {
            if let Some(due) = table.expired(generation_of(tag), now) {
                seen = Seen::Due(due);
                // Handled: what was due is cleared.
                if due.request {
                    table.set(Timer::Request, None);
                }
                if due.read {
                    table.set(Timer::Read, None);
                }
                if due.write {
                    table.set(Timer::Write, None);
                }
            }
        });
        lock(&self.seen).push(seen);
    }

    fn on_stopped(self: &Arc<Self>, tag: u64) {
        let live = lock(&self.table).stopped(generation_of(tag));
        lock(&self.seen).push(Seen::Stopped { live });
    }

    fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }

    /// Whether the entry is on a loop (`Some(true)`), the wheel, or nowhere.
    fn placed(&self) -> Option<bool> {
        lock(&self.table).armed().map(Armed::on_loop)
    }
}

impl LoopTimeout for Probe {
    fn expire(self: Arc<Self>, tag: u64, _cx: &mut LoopContext<'_>) {
        self.on_expiry(tag);
    }
    fn stopped(self: Arc<Self>, tag: u64) {
        self.on_stopped(tag);
    }
}

impl WheelTask for Probe {
    fn fire(self: Arc<Self>, tag: u64) {
        self.on_expiry(tag);
    }
    fn stopped(self: Arc<Self>, tag: u64) {
        self.on_stopped(tag);
    }
}

/// A loop's scheduler that never runs anything by itself.
#[derive(Default)]
struct LoopDouble {
    heap: Mutex<DeadlineHeap<u64>>,
    shutting_down: AtomicBool,
    /// Says "not shutting down", then rejects every schedule.
    rejects: AtomicBool,
}

impl LoopDouble {
    /// Pops what is due at `now` as the loop would, returning the tags.
    fn pop_due(&self, now: Instant) -> Vec<u64> {
        let mut heap = lock(&self.heap);
        std::iter::from_fn(|| heap.pop_due(now).map(|(_, tag)| tag)).collect()
    }

    fn armed(&self) -> usize {
        lock(&self.heap).len()
    }
}

impl TimeoutScheduler for LoopDouble {
    fn thread_id(&self) -> ThreadId {
        std::thread::current().id()
    }
    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
    fn schedule(
        &self,
        deadline: Instant,
        _timeout: Arc<dyn LoopTimeout>,
        tag: u64,
    ) -> Result<LoopTimerKey, Rejected> {
        if self.rejects.load(Ordering::SeqCst) {
            return Err(Rejected);
        }
        Ok(LoopTimerKey(lock(&self.heap).insert(deadline, tag)))
    }
    fn cancel(&self, key: LoopTimerKey) -> bool {
        lock(&self.heap).cancel(key.0).is_some()
    }
}

const SECOND: Duration = Duration::from_secs(1);

/// A probe whose request deadline is 5 s from now, not started.
fn probe() -> Arc<Probe> {
    let (clock, wheel) = manual_wheel();
    probe_on(&clock, &wheel, 5 * SECOND)
}

/// A manual clock and a wheel on it.
fn manual_wheel() -> (ManualClock, HashedWheelTimer) {
    let clock = ManualClock::new();
    let wheel = HashedWheelTimer::builder()
        .tick(Duration::from_millis(1))
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    (clock, wheel)
}

/// A probe on `wheel` whose request deadline is `timeout` from now, not
/// started.
fn probe_on(clock: &ManualClock, wheel: &HashedWheelTimer, timeout: Duration) -> Arc<Probe> {
    Arc::new(Probe {
        table: Mutex::new(TimerTable::new(Some(clock.now() + timeout))),
        wheel: wheel.clone(),
        clock: clock.clone(),
        seen: Mutex::new(Vec::new()),
    })
}

fn due(request: bool, read: bool) -> Seen {
    Seen::Due(Due {
        request,
        read,
        write: false,
        hedge: false,
    })
}

#[test]
fn nothing_is_armed_before_start_and_the_request_fires_at_its_deadline_not_before() {
    let p = probe();
    p.change(|_| {});
    assert_eq!(p.placed(), None, "armed before start");
    p.change(TimerTable::start);
    assert_eq!(p.placed(), Some(false), "on the wheel");
    p.clock.advance(5 * SECOND - Duration::from_nanos(1));
    assert_eq!(p.seen(), []);
    p.clock.advance(Duration::from_nanos(1));
    assert_eq!(p.seen(), [due(true, false)]);
    assert_eq!(p.wheel.stats().armed, 0);
    // Starting again arms nothing more (idempotent, nothing left to arm).
    p.change(TimerTable::start);
    assert_eq!(p.placed(), None);
}

#[test]
fn the_entry_follows_the_nearest_timer_and_never_leaves_an_old_one_armed() {
    let p = probe();
    p.change(TimerTable::start);
    let now = p.clock.now();
    p.change(|t| t.set(Timer::Read, Some(now + SECOND)));
    assert_eq!(p.wheel.stats().armed, 1, "one entry, for the nearest");
    p.clock.advance(SECOND);
    assert_eq!(p.seen(), [due(false, true)]);
    // The request timer is armed again after the read expiry.
    assert_eq!(p.wheel.stats().armed, 1);
    // A read deadline after the request's changes nothing armed.
    let now = p.clock.now();
    p.change(|t| t.set(Timer::Read, Some(now + 10 * SECOND)));
    p.clock.advance(4 * SECOND);
    assert_eq!(p.seen(), [due(false, true), due(true, false)]);
    assert_eq!(p.wheel.stats().armed, 1, "the read timer is left");
    p.change(|t| t.set(Timer::Read, None));
    assert_eq!(p.wheel.stats().armed, 0);
}

#[test]
fn read_and_write_stalls_are_due_apart_each_at_its_own_deadline() {
    let p = probe();
    p.change(TimerTable::start);
    let now = p.clock.now();
    p.change(|t| {
        t.set(Timer::Write, Some(now + SECOND));
        t.set(Timer::Read, Some(now + 2 * SECOND));
    });
    assert_eq!(p.wheel.stats().armed, 1, "one entry, for the nearest");
    p.clock.advance(SECOND - Duration::from_nanos(1));
    assert_eq!(p.seen(), [], "never early");
    p.clock.advance(Duration::from_nanos(1));
    let write_due = || {
        Seen::Due(Due {
            write: true,
            ..Due::default()
        })
    };
    assert_eq!(p.seen(), [write_due()]);
    p.clock.advance(SECOND);
    assert_eq!(p.seen(), [write_due(), due(false, true)]);
}

#[test]
fn a_rehome_moves_the_entry_to_the_loop_keeping_its_deadline() {
    let p = probe();
    let home = Arc::new(LoopDouble::default());
    p.change(TimerTable::start);
    p.change(|t| t.set_home(Some(home.clone()), None));
    assert_eq!(p.placed(), Some(true));
    assert_eq!((p.wheel.stats().armed, home.armed()), (0, 1));
    p.clock.advance(5 * SECOND - Duration::from_nanos(1));
    assert!(
        home.pop_due(p.clock.now()).is_empty(),
        "moved to a later deadline"
    );
    p.clock.advance(Duration::from_nanos(1));
    let tags = home.pop_due(p.clock.now());
    assert_eq!(tags.len(), 1, "the absolute deadline was kept");
    p.on_expiry(tags[0]);
    assert_eq!(p.seen(), [due(true, false)]);
}

/// #10, defect 2: the loop popped the read expiry before the re-home's
/// cancel could reach it. The late expiry is stale and does nothing: it
/// neither fires nor drops the entry armed on the new home.
#[test]
fn an_expiry_popped_before_a_rehome_is_stale_and_leaves_the_new_entry_alone() {
    let p = probe();
    let (old, new) = (
        Arc::new(LoopDouble::default()),
        Arc::new(LoopDouble::default()),
    );
    p.change(TimerTable::start);
    p.change(|t| t.set_home(Some(old.clone()), None));
    let now = p.clock.now();
    p.change(|t| t.set(Timer::Read, Some(now + SECOND)));
    p.clock.advance(SECOND);
    // Popped by the old loop, not yet run...
    let popped = old.pop_due(p.clock.now());
    assert_eq!(popped.len(), 1);
    // ...when the exchange moves to a new connection (a retry): its read
    // timer goes, the request timer moves to the new loop.
    p.change(|t| {
        t.set(Timer::Read, None);
        t.set_home(Some(new.clone()), None);
    });
    assert_eq!(new.armed(), 1);
    p.on_expiry(popped[0]);
    assert_eq!(p.seen(), [Seen::Stale]);
    assert_eq!(new.armed(), 1, "the new entry is still armed");
    assert_eq!(p.placed(), Some(true));
    // And it is the one that fires, at the request deadline.
    p.clock.advance(4 * SECOND);
    let tags = new.pop_due(p.clock.now());
    p.on_expiry(tags[0]);
    assert_eq!(p.seen(), [Seen::Stale, due(true, false)]);
}

/// #10, defects 1 and 3: a detach (the connection failed under a request
/// that is retried) takes the read timer with it and puts the request
/// timer back on the wheel — not on the loop it left.
#[test]
fn a_detach_stops_the_read_timer_and_moves_the_request_timer_to_the_wheel() {
    let p = probe();
    let home = Arc::new(LoopDouble::default());
    p.change(TimerTable::start);
    p.change(|t| t.set_home(Some(home.clone()), None));
    let now = p.clock.now();
    p.change(|t| t.set(Timer::Read, Some(now + SECOND)));
    p.change(|t| {
        t.set(Timer::Read, None);
        t.set_home(None, None);
    });
    assert_eq!(home.armed(), 0, "nothing left on the loop it left");
    assert_eq!(p.placed(), Some(false));
    // Waiting in the queue past the read timeout is no read timeout.
    p.clock.advance(2 * SECOND);
    assert_eq!(p.seen(), []);
    p.clock.advance(3 * SECOND);
    assert_eq!(p.seen(), [due(true, false)]);
}

#[test]
fn a_loop_that_rejects_after_saying_it_would_not_falls_back_to_the_wheel() {
    let p = probe();
    let home = Arc::new(LoopDouble::default());
    home.rejects.store(true, Ordering::SeqCst);
    p.change(TimerTable::start);
    p.change(|t| t.set_home(Some(home.clone()), None));
    assert_eq!(p.placed(), Some(false));
    // A loop that says it is shutting down is not even asked.
    let closing = Arc::new(LoopDouble::default());
    closing.shutting_down.store(true, Ordering::SeqCst);
    p.change(|t| t.set_home(Some(closing.clone()), None));
    assert_eq!((p.placed(), closing.armed()), (Some(false), 0));
    p.clock.advance(5 * SECOND);
    assert_eq!(p.seen(), [due(true, false)]);
}

/// #10, defect 4: a wheel that stops tells the live entry so, explicitly;
/// an entry already replaced is told nothing it would act on.
#[test]
fn a_stopped_wheel_tells_the_live_entry() {
    let p = probe();
    p.change(TimerTable::start);
    let now = p.clock.now();
    p.change(|t| t.set(Timer::Read, Some(now + SECOND)));
    drop(p.wheel.stop());
    assert_eq!(p.seen(), [Seen::Stopped { live: true }]);
    assert_eq!(p.placed(), None);
    // Arming again is refused: the caller ends the exchange.
    let changed = {
        let mut table = lock(&p.table);
        table.set(Timer::Read, Some(now + 2 * SECOND));
        table.sync(&p, &p.wheel)
    };
    assert!(changed.refused);
}

#[test]
fn an_ended_table_arms_nothing_and_every_late_expiry_is_stale() {
    let p = probe();
    let home = Arc::new(LoopDouble::default());
    p.change(TimerTable::start);
    p.change(|t| t.set_home(Some(home.clone()), None));
    p.clock.advance(5 * SECOND);
    let popped = home.pop_due(p.clock.now());
    let armed = lock(&p.table).end();
    assert!(armed.is_some());
    armed.unwrap().cancel();
    p.on_expiry(popped[0]);
    p.change(|t| t.set(Timer::Read, Some(p.clock.now() + SECOND)));
    assert_eq!(p.seen(), [Seen::Stale]);
    assert_eq!(
        (p.placed(), home.armed(), p.wheel.stats().armed),
        (None, 0, 0)
    );
}

// Standing entries: the exchanges of one connection, one after another,
// on the real wheel of a manual clock.

use super::super::standing::StandingEnv;
use crate::event_loop::IdleStanding;

/// Exchanges on one HTTP/1 connection whose standing entry is on the
/// wheel.
struct Connection {
    clock: ManualClock,
    wheel: HashedWheelTimer,
    env: StandingEnv,
    standing: Arc<Standing>,
}

impl Connection {
    fn new() -> Connection {
        let (clock, wheel) = manual_wheel();
        let env = StandingEnv::new(wheel.clone());
        let shared: tickless_timer::SharedClock = Arc::new(clock.clone());
        let standing = env.on_wheel(&shared);
        Connection {
            clock,
            wheel,
            env,
            standing,
        }
    }

    /// An exchange on it, started, whose request deadline is `timeout`
    /// from now.
    fn exchange(&self, timeout: Duration) -> Arc<Probe> {
        let p = probe_on(&self.clock, &self.wheel, timeout);
        p.change(|t| {
            t.set_home(None, Some(self.standing.clone()));
            t.start();
        });
        p
    }

    /// The wheel's entries, as the wheel counts them and as the client's
    /// stats do (without an idle standing entry).
    fn armed(&self) -> (usize, usize) {
        let raw = self.wheel.stats();
        (raw.armed, self.idle().take_out(raw).armed)
    }

    fn idle(&self) -> &IdleStanding {
        &self.env.idle
    }
}

/// Ends a probe's table, as an exchange's end does.
fn end(p: &Probe) {
    if let Some(armed) = lock(&p.table).end() {
        armed.cancel();
    }
}

#[test]
fn a_kept_alive_exchange_holds_the_standing_entry_and_arms_nothing() {
    let c = Connection::new();
    let first = c.exchange(5 * SECOND);
    assert_eq!(c.armed(), (1, 1));
    end(&first);
    // Left armed, but a request's timer no more.
    assert_eq!(c.armed(), (1, 0));
    c.clock.advance(SECOND);
    let second = c.exchange(5 * SECOND);
    let raw = c.wheel.stats();
    assert_eq!((raw.armed, raw.cancelled), (1, 0), "armed nothing");
    assert_eq!(c.armed(), (1, 1));
    // The entry comes at the first deadline, early for the second: armed
    // again for it, and nothing fires.
    c.clock.advance(4 * SECOND);
    assert_eq!(second.seen(), []);
    assert_eq!(c.armed(), (1, 1));
    assert_eq!(c.idle().take_out(c.wheel.stats()).fired, 0);
    // Never early; at its deadline exactly.
    c.clock.advance(SECOND - Duration::from_nanos(1));
    assert_eq!(second.seen(), []);
    c.clock.advance(Duration::from_nanos(1));
    assert_eq!(second.seen(), [due(true, false)]);
    let stats = c.idle().take_out(c.wheel.stats());
    assert_eq!((stats.armed, stats.fired), (0, 1), "{stats:?}");
    assert_eq!(first.seen(), []);
}

#[test]
fn an_earlier_deadline_moves_the_standing_entry_first() {
    let c = Connection::new();
    end(&c.exchange(5 * SECOND));
    let hurried = c.exchange(SECOND);
    c.clock.advance(SECOND - Duration::from_nanos(1));
    assert_eq!(hurried.seen(), []);
    c.clock.advance(Duration::from_nanos(1));
    assert_eq!(hurried.seen(), [due(true, false)], "not at the 5 s entry");
    assert_eq!(c.armed(), (0, 0));
}

#[test]
fn a_second_exchange_while_the_first_holds_arms_its_own() {
    let c = Connection::new();
    let first = c.exchange(5 * SECOND);
    let second = c.exchange(2 * SECOND);
    assert_eq!(c.armed(), (2, 2));
    c.clock.advance(2 * SECOND);
    assert_eq!(
        (first.seen(), second.seen()),
        (vec![], vec![due(true, false)])
    );
    c.clock.advance(3 * SECOND);
    assert_eq!(first.seen(), [due(true, false)]);
}

#[test]
fn a_hold_moves_with_its_tables_nearest_deadline() {
    let c = Connection::new();
    let p = c.exchange(5 * SECOND);
    let now = c.clock.now();
    // Earlier: the entry moves to it. Then cleared: the hold moves back to
    // the request deadline, the entry staying where it is.
    p.change(|t| t.set(Timer::Read, Some(now + SECOND)));
    assert_eq!(c.armed(), (1, 1));
    c.clock.advance(SECOND);
    assert_eq!(p.seen(), [due(false, true)]);
    assert_eq!(c.armed(), (1, 1), "the request deadline is held again");
    c.clock.advance(4 * SECOND);
    assert_eq!(p.seen(), [due(false, true), due(true, false)]);
    assert_eq!(c.armed(), (0, 0));
}

#[test]
fn letting_go_of_an_old_hold_frees_nothing_held_since() {
    let c = Connection::new();
    let p = c.exchange(SECOND);
    end(&p);
    let deadline = c.clock.now() + SECOND;
    let first = c.standing.hold(deadline, &p, 1, None).expect("free");
    c.standing.let_go(first);
    assert!(c.standing.hold(deadline, &p, 2, None).is_some());
    c.standing.let_go(first);
    assert_eq!(c.armed(), (1, 1), "still held");
    assert!(
        c.standing.hold(deadline, &p, 3, None).is_none(),
        "held by the second"
    );
}

#[test]
fn a_closed_connection_disarms_its_idle_entry_and_leaves_a_held_one() {
    let c = Connection::new();
    let p = c.exchange(5 * SECOND);
    c.standing.close();
    assert_eq!(c.armed(), (1, 1), "held: left to fire");
    c.clock.advance(5 * SECOND);
    assert_eq!(p.seen(), [due(true, false)]);
    // Closed: a new exchange arms its own; ended, it leaves nothing.
    let next = c.exchange(SECOND);
    assert_eq!(c.armed(), (1, 1));
    end(&next);
    assert_eq!(c.armed(), (0, 0));

    let idle = Connection::new();
    end(&idle.exchange(5 * SECOND));
    assert_eq!(idle.armed(), (1, 0));
    idle.standing.close();
    assert_eq!(idle.armed(), (0, 0));
    let stats = idle.idle().take_out(idle.wheel.stats());
    assert_eq!(stats.cancelled, 0, "an idle entry's disarm is no timer's");
}

#[test]
fn a_wheel_that_stops_tells_the_holder() {
    let c = Connection::new();
    let p = c.exchange(5 * SECOND);
    drop(c.wheel.stop());
    assert_eq!(p.seen(), [Seen::Stopped { live: true }]);
}

/// A manual clock read through a stand-in that, at the read it is set
/// for, lets `by` pass just after it: another thread's advance landing
/// between a read of the clock and what is done with it.
#[derive(Debug)]
struct AdvancedAfterRead {
    clock: ManualClock,
    by: Mutex<Option<Duration>>,
}

impl Clock for AdvancedAfterRead {
    fn now(&self) -> Instant {
        let now = self.clock.now();
        let by = lock(&self.by).take();
        if let Some(by) = by {
            self.clock.advance(by);
        }
        now
    }
}

/// The standing entry fires early for its holder, and another advance
/// passes the holder's deadline just as it is armed again: on a manual
/// clock that entry would wait for an advance that may never come, so it
/// fires at once (as `TimerTable::sync` has an entry of its own fired:
/// `Changed::due_on_manual_clock`).
#[test]
fn a_standing_entry_armed_again_for_a_deadline_an_advance_has_just_passed_fires() {
    let (clock, wheel) = manual_wheel();
    let env = StandingEnv::new(wheel.clone());
    let racing = Arc::new(AdvancedAfterRead {
        clock: clock.clone(),
        by: Mutex::new(None),
    });
    let shared: tickless_timer::SharedClock = racing.clone();
    let c = Connection {
        standing: env.on_wheel(&shared),
        clock,
        wheel,
        env,
    };
    let start = c.clock.now();
    end(&c.exchange(SECOND));
    let held = c.exchange(2 * SECOND);
    assert_eq!(c.armed(), (1, 1), "held, nothing armed of its own");
    // The entry fires at 1 s, early for the holder; as it reads the clock,
    // another advance takes it to 2.5 s, past the holder's deadline.
    *lock(&racing.by) = Some(SECOND + SECOND / 2);
    c.clock.advance(SECOND);
    assert_eq!(c.clock.now() - start, 2 * SECOND + SECOND / 2);
    assert_eq!(held.seen(), [due(true, false)], "its deadline has passed");
    assert_eq!(c.armed(), (0, 0));
}

// Standing entries on a loop's heap (event-loop mode): a real loop on a
// manual clock, its expiries run on its thread.

use crate::event_loop::EventLoopGroup;

/// Exchanges on one HTTP/1 connection whose standing entry is on the heap
/// of a real loop, on a manual clock.
struct LoopConnection {
    clock: ManualClock,
    wheel: HashedWheelTimer,
    group: EventLoopGroup,
    event_loop: Arc<EventLoop>,
    standing: Arc<Standing>,
}

impl LoopConnection {
    fn new() -> LoopConnection {
        let (clock, wheel) = manual_wheel();
        let shared: tickless_timer::SharedClock = Arc::new(clock.clone());
        let group = EventLoopGroup::builder()
            .threads(1)
            .clock(shared.clone())
            .build()
            .unwrap();
        let event_loop = group.loops()[0].clone();
        let standing = StandingEnv::on_loop(event_loop.clone(), &shared);
        LoopConnection {
            clock,
            wheel,
            group,
            event_loop,
            standing,
        }
    }

    /// An exchange on it, started, whose request deadline is `timeout`
    /// from now.
    fn exchange(&self, timeout: Duration) -> Arc<Probe> {
        let p = probe_on(&self.clock, &self.wheel, timeout);
        let home: Arc<dyn TimeoutScheduler> = self.event_loop.clone();
        p.change(|t| {
            t.set_home(Some(home), Some(self.standing.clone()));
            t.start();
        });
        p
    }

    /// The loop's heap entries, as it holds them and as its stats count
    /// them (without an idle standing entry).
    fn armed(&self) -> (usize, usize) {
        let stats = self.event_loop.stats().armed;
        (stats + self.event_loop.idle_standing().armed(), stats)
    }

    /// Advances the clock by `by` and returns once the loop has expired
    /// what that made due: a task posted after the advance has run, and so
    /// has the expiry that follows it.
    fn advance(&self, by: Duration) {
        self.clock.advance(by);
        for _ in 0..2 {
            let (ran, told) = std::sync::mpsc::channel();
            self.event_loop
                .execute(move |_| {
                    let _ = ran.send(());
                })
                .unwrap();
            told.recv_timeout(Duration::from_secs(10)).unwrap();
        }
    }
}

#[test]
fn on_a_loop_a_kept_alive_exchange_holds_the_standing_entry_and_fires_at_its_deadline() {
    let c = LoopConnection::new();
    let first = c.exchange(5 * SECOND);
    assert_eq!(first.placed(), Some(true), "on the loop");
    assert_eq!(c.armed(), (1, 1));
    end(&first);
    // Left armed on the heap, but a request's timer no more.
    assert_eq!(c.armed(), (1, 0));
    c.advance(SECOND);
    let second = c.exchange(5 * SECOND);
    assert_eq!(c.armed(), (1, 1), "held, nothing armed of its own");
    assert_eq!(c.event_loop.stats().cancelled, 0, "nothing disarmed");
    // The entry comes at the first deadline, early for the second: armed
    // again for it, on the loop, and nothing fires.
    c.advance(4 * SECOND);
    assert_eq!(second.seen(), []);
    assert_eq!(c.armed(), (1, 1));
    assert_eq!(c.event_loop.stats().fired, 0);
    // Never early; at its deadline exactly.
    c.advance(SECOND - Duration::from_nanos(1));
    assert_eq!(second.seen(), []);
    c.advance(Duration::from_nanos(1));
    assert_eq!(second.seen(), [due(true, false)]);
    let stats = c.event_loop.stats();
    assert_eq!((stats.armed, stats.fired), (0, 1), "{stats:?}");
    assert_eq!(c.armed(), (0, 0));
    assert_eq!(first.seen(), []);
    c.group.shutdown();
}

#[test]
fn on_a_loop_an_idle_standing_entry_that_falls_due_fires_nothing_and_counts_nothing() {
    let c = LoopConnection::new();
    end(&c.exchange(SECOND));
    assert_eq!(c.armed(), (1, 0));
    c.advance(SECOND);
    assert_eq!(c.armed(), (0, 0), "popped");
    let stats = c.event_loop.stats();
    assert_eq!((stats.fired, stats.cancelled), (0, 0), "{stats:?}");
    // The next exchange arms it again.
    let next = c.exchange(SECOND);
    assert_eq!(c.armed(), (1, 1));
    c.advance(SECOND);
    assert_eq!(next.seen(), [due(true, false)]);
    c.group.shutdown();
}

#[test]
fn on_a_loop_an_earlier_deadline_moves_the_standing_entry_first() {
    let c = LoopConnection::new();
    end(&c.exchange(5 * SECOND));
    let hurried = c.exchange(SECOND);
    assert_eq!(c.armed(), (1, 1), "moved, not a second entry");
    c.advance(SECOND - Duration::from_nanos(1));
    assert_eq!(hurried.seen(), []);
    c.advance(Duration::from_nanos(1));
    assert_eq!(hurried.seen(), [due(true, false)], "not at the 5 s entry");
    assert_eq!(c.armed(), (0, 0));
    assert_eq!(
        c.event_loop.stats().cancelled,
        0,
        "an idle entry's move is no timer's"
    );
    c.group.shutdown();
}

#[test]
fn on_a_loop_a_closed_connection_disarms_its_idle_entry_and_a_stopped_loop_tells_the_holder() {
    let c = LoopConnection::new();
    end(&c.exchange(5 * SECOND));
    c.standing.close();
    assert_eq!(c.armed(), (0, 0));
    assert_eq!(c.event_loop.stats().cancelled, 0);
    // Closed: an exchange arms its own, on the loop.
    let own = c.exchange(SECOND);
    assert_eq!((own.placed(), c.armed()), (Some(true), (1, 1)));
    end(&own);
    assert_eq!(c.armed(), (0, 0));

    let held = LoopConnection::new();
    let p = held.exchange(5 * SECOND);
    held.group.shutdown();
    assert_eq!(p.seen(), [Seen::Stopped { live: true }]);
}

/// A loop's standing entry is held only by a table whose home is that
/// loop: one whose entries go to the wheel (a connection detached, say)
/// arms its own there.
#[test]
fn a_table_homed_on_the_wheel_does_not_hold_a_loops_standing_entry() {
    let c = LoopConnection::new();
    let p = probe_on(&c.clock, &c.wheel, SECOND);
    p.change(|t| {
        t.set_home(None, Some(c.standing.clone()));
        t.start();
    });
    assert_eq!(p.placed(), Some(false), "on the wheel");
    assert_eq!(c.armed(), (0, 0));
    c.group.shutdown();
}
