//! The hashed wheel against a model, on a manual clock.
//!
//! Small wheels (1 to 64 buckets) with ticks of a few milliseconds, so that
//! deadlines a few hundred revolutions away share buckets with near ones and
//! advances of many revolutions meet rounds interleaved. Random sequences of
//! arms (near, on a tick boundary, many revolutions away, equal to an earlier
//! deadline, already past, bursts of equal deadlines), cancels (of live, fired, cancelled and rejected
//! handles), advances (zero, sub-tick, to a boundary, many revolutions) and
//! stops; some entries, when they fire, cancel another entry or arm a child
//! (possibly due within the same advance), or stop the wheel.
//!
//! The model is a `BTreeMap` of the live entries by (deadline, arming order).
//! After every operation the events the entries logged must be exactly the
//! model's, in its order: on an advance to `now`, every live entry with a
//! deadline `<= now` fires once, in (deadline, arming) order, seeing the
//! clock at `now`; what their tasks arm for a time `now` has reached fires
//! after them, in the same advance; a task's cancel finds an entry already
//! collected with it no longer armed; nothing cancelled, fired or stopped
//! fires; and a stop tells every live shared entry `stopped(tag)` once and
//! hands back every live boxed one, also a stop from a firing task (the
//! entries collected with it still fire, and arm nothing).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickless_timer::{Clock, HashedWheelTimer, ManualClock, TimerStopped, WheelTask, WheelTimeout};

/// When an armed entry is due, relative to the clock (`Near` and `Past` in
/// thousandths of a tick).
#[derive(Debug, Clone)]
enum When {
    Near(u64),
    /// The `k`-th tick boundary after the clock's current tick (0: its own).
    Boundary(u64),
    /// `revolutions` whole revolutions on, plus a fraction of a tick.
    Revolutions(u64, u64),
    /// The deadline of an entry armed earlier (picked modulo their number).
    SameAs(usize),
    Past(u64),
}

/// What an entry does when it fires.
#[derive(Debug, Clone, Copy)]
enum Action {
    Nothing,
    /// Cancels the entry picked (modulo the entries armed so far).
    Cancel(usize),
    /// Arms a child (a shared entry that does nothing) this many
    /// thousandths of a tick after its own deadline.
    ArmChild(u64),
    /// Stops the wheel (and runs the boxed tasks it hands back): the
    /// entries collected with this one still fire, their arms fail.
    Stop,
}

#[derive(Debug, Clone)]
enum Op {
    Arm {
        when: When,
        boxed: bool,
        action: Action,
    },
    /// Shared entries armed one after the other, each half a tick on
    /// times its value modulo 8 from now: many equal deadlines, out of
    /// order, more than a sort stable by accident (insertion sort of a
    /// short slice) keeps in arming order.
    ArmBurst(Vec<u8>),
    Cancel(usize),
    /// Thousandths of a tick.
    Advance(u64),
    /// To the `k`-th tick boundary after the clock's current tick.
    AdvanceToBoundary(u64),
    /// Whole revolutions plus thousandths of a tick.
    AdvanceRevolutions(u64, u64),
    Stop,
}

/// What the entries report, in the order they report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Fired {
        id: usize,
        at: Instant,
    },
    Cancelled {
        by: usize,
        target: usize,
        was_armed: bool,
    },
    ArmedChild {
        by: usize,
        child: usize,
        armed: bool,
    },
    /// A shared entry told the wheel stopped under it.
    Stopped(usize),
    /// A boxed entry handed back by the stop (and run by the test).
    HandedBack(usize),
}

/// One arm, as the test made it.
struct Armed {
    /// `None` if the arm was rejected (the wheel had stopped).
    handle: Option<WheelTimeout>,
    action: Action,
}

#[derive(Default)]
struct Log {
    entries: Vec<Armed>,
    events: Vec<Event>,
}

/// The entries' shared task and the test's record of everything armed.
struct World {
    clock: ManualClock,
    /// Taken out at the end: the entries hold the world, which holds the wheel.
    wheel: Mutex<Option<HashedWheelTimer>>,
    log: Mutex<Log>,
    /// Set while the test runs the boxed tasks a stop handed back.
    handing_back: Mutex<bool>,
}

impl World {
    fn wheel(&self) -> HashedWheelTimer {
        self.wheel.lock().unwrap().clone().unwrap()
    }

    /// Arms entry number `entries.len()`; its id, and whether the wheel took it.
    fn arm(
        self: &Arc<Self>,
        deadline: Instant,
        boxed: bool,
        action: Action,
    ) -> (usize, Result<(), TimerStopped>) {
        let id = self.log.lock().unwrap().entries.len();
        let wheel = self.wheel();
        let armed = if boxed {
            let world = self.clone();
            wheel.arm(deadline, move || world.fired(id as u64))
        } else {
            wheel.arm_task(deadline, self.clone(), id as u64)
        };
        let (handle, result) = match armed {
            Ok(handle) => (Some(handle), Ok(())),
            Err(stopped) => (None, Err(stopped)),
        };
        self.log
            .lock()
            .unwrap()
            .entries
            .push(Armed { handle, action });
        (id, result)
    }

    /// Cancels entry `target`: `None` if its arm was rejected.
    fn cancel(&self, target: usize) -> Option<bool> {
        let handle = self.log.lock().unwrap().entries[target].handle.clone();
        handle.map(|handle| handle.cancel())
    }

    fn fired(self: &Arc<Self>, tag: u64) {
        let id = tag as usize;
        if *self.handing_back.lock().unwrap() {
            self.log.lock().unwrap().events.push(Event::HandedBack(id));
            return;
        }
        let at = self.clock.now();
        let (action, count) = {
            let mut log = self.log.lock().unwrap();
            log.events.push(Event::Fired { id, at });
            (log.entries[id].action, log.entries.len())
        };
        match action {
            Action::Nothing => {}
            Action::Cancel(pick) => {
                let target = pick % count;
                let was_armed = self.cancel(target).unwrap_or(false);
                self.log.lock().unwrap().events.push(Event::Cancelled {
                    by: id,
                    target,
                    was_armed,
                });
            }
            Action::ArmChild(thousandths) => {
                let deadline = self.deadline_of(id) + self.thousandths(thousandths);
                let (child, armed) = self.arm(deadline, false, Action::Nothing);
                self.log.lock().unwrap().events.push(Event::ArmedChild {
                    by: id,
                    child,
                    armed: armed.is_ok(),
                });
            }
            Action::Stop => self.stop(),
        }
    }

    /// Stops the wheel and runs what it hands back; the events of the stop
    /// sorted, as the model has them (the wheel tells them in slab order).
    fn stop(&self) {
        let from = self.log.lock().unwrap().events.len();
        let handed_back = self.wheel().stop();
        *self.handing_back.lock().unwrap() = true;
        for task in handed_back {
            task();
        }
        *self.handing_back.lock().unwrap() = false;
        self.log.lock().unwrap().events[from..].sort();
    }

    fn deadline_of(&self, id: usize) -> Instant {
        let log = self.log.lock().unwrap();
        log.entries[id]
            .handle
            .as_ref()
            .expect("a fired entry was armed")
            .deadline()
    }

    fn thousandths(&self, thousandths: u64) -> Duration {
        self.wheel().tick() * thousandths as u32 / 1000
    }
}

impl WheelTask for World {
    fn fire(self: Arc<Self>, tag: u64) {
        self.fired(tag);
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        self.log
            .lock()
            .unwrap()
            .events
            .push(Event::Stopped(tag as usize));
    }
}

/// The model's view of one entry.
struct Modelled {
    deadline: Instant,
    boxed: bool,
    action: Action,
}

#[derive(Default)]
struct Model {
    /// Every arm, by id (rejected ones too, so ids match the world's).
    entries: Vec<Modelled>,
    /// The live entries, in the order they must fire.
    live: BTreeMap<(Instant, usize), ()>,
    stopped: bool,
}

impl Model {
    fn arm(&mut self, deadline: Instant, boxed: bool, action: Action) -> (usize, bool) {
        let id = self.entries.len();
        self.entries.push(Modelled {
            deadline,
            boxed,
            action,
        });
        if !self.stopped {
            self.live.insert((deadline, id), ());
        }
        (id, !self.stopped)
    }

    fn cancel(&mut self, target: usize) -> bool {
        let deadline = self.entries[target].deadline;
        self.live.remove(&(deadline, target)).is_some()
    }

    /// The events of an advance to `now`.
    fn advance(&mut self, now: Instant, tick: Duration) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            // One collection: all that is due, in (deadline, arming) order.
            let due: Vec<(Instant, usize)> = self
                .live
                .range(..=(now, usize::MAX))
                .map(|(&key, _)| key)
                .collect();
            if due.is_empty() {
                return events;
            }
            for key in &due {
                self.live.remove(key);
            }
            for (deadline, id) in due {
                events.push(Event::Fired { id, at: now });
                match self.entries[id].action {
                    Action::Nothing => {}
                    Action::Cancel(pick) => {
                        let target = pick % self.entries.len();
                        let was_armed = self.cancel(target);
                        events.push(Event::Cancelled {
                            by: id,
                            target,
                            was_armed,
                        });
                    }
                    Action::ArmChild(thousandths) => {
                        let deadline = deadline + tick * thousandths as u32 / 1000;
                        let (child, armed) = self.arm(deadline, false, Action::Nothing);
                        events.push(Event::ArmedChild {
                            by: id,
                            child,
                            armed,
                        });
                    }
                    Action::Stop => events.extend(self.stop()),
                }
            }
        }
    }

    /// The events of a stop, sorted (the wheel tells them in slab order).
    fn stop(&mut self) -> Vec<Event> {
        self.stopped = true;
        let mut events: Vec<Event> = std::mem::take(&mut self.live)
            .into_keys()
            .map(|(_, id)| match self.entries[id].boxed {
                true => Event::HandedBack(id),
                false => Event::Stopped(id),
            })
            .collect();
        events.sort();
        events
    }
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![
        4 => (0u64..3000).prop_map(When::Near),
        2 => (0u64..4).prop_map(When::Boundary),
        3 => ((1u64..300), (0u64..1000)).prop_map(|(r, f)| When::Revolutions(r, f)),
        3 => any::<usize>().prop_map(When::SameAs),
        1 => (0u64..5000).prop_map(When::Past),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        24 => Just(Action::Nothing),
        4 => any::<usize>().prop_map(Action::Cancel),
        4 => (0u64..5000).prop_map(Action::ArmChild),
        1 => Just(Action::Stop),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (when(), any::<bool>(), action())
            .prop_map(|(when, boxed, action)| Op::Arm { when, boxed, action }),
        2 => proptest::collection::vec(any::<u8>(), 20..80).prop_map(Op::ArmBurst),
        15 => any::<usize>().prop_map(Op::Cancel),
        15 => (0u64..3000).prop_map(Op::Advance),
        5 => (0u64..3).prop_map(Op::AdvanceToBoundary),
        5 => ((1u64..40), (0u64..1000)).prop_map(|(r, f)| Op::AdvanceRevolutions(r, f)),
        // Rare, so that most sequences run long before it (the test stops
        // the wheel at the end anyway).
        1 => Just(Op::Stop),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_wheel_fires_as_the_model_says(
        size_log2 in 0u32..7,
        tick_ms in 1u64..6,
        ops in proptest::collection::vec(op(), 1..150),
    ) {
        let clock = ManualClock::new();
        let tick = Duration::from_millis(tick_ms);
        let size = 1u64 << size_log2;
        let wheel = HashedWheelTimer::builder()
            .tick(tick)
            .wheel_size(size as usize)
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap();
        // The wheel counts its ticks from here.
        let origin = clock.now();
        let world = Arc::new(World {
            clock: clock.clone(),
            wheel: Mutex::new(Some(wheel.clone())),
            log: Mutex::new(Log::default()),
            handing_back: Mutex::new(false),
        });
        let mut model = Model::default();
        let thousandths = |n: u64| tick * n as u32 / 1000;
        let revolution = tick * size as u32;
        let boundary = |k: u64| {
            let now = clock.now();
            let ticks = ((now - origin).as_nanos() / tick.as_nanos()) as u32;
            origin + tick * (ticks + k as u32)
        };
        for op in ops {
            let expected = match op.clone() {
                Op::Arm { when, boxed, action } => {
                    let now = clock.now();
                    let deadline = match when {
                        When::Near(n) => now + thousandths(n),
                        When::Boundary(k) => boundary(k),
                        When::Revolutions(r, f) => now + revolution * r as u32 + thousandths(f),
                        When::SameAs(pick) if !model.entries.is_empty() => {
                            model.entries[pick % model.entries.len()].deadline
                        }
                        When::SameAs(_) => now,
                        When::Past(n) => now.checked_sub(thousandths(n)).unwrap().max(origin),
                    };
                    let (id, armed) = world.arm(deadline, boxed, action);
                    let (model_id, model_armed) = model.arm(deadline, boxed, action);
                    prop_assert_eq!(id, model_id);
                    prop_assert_eq!(armed.is_ok(), model_armed, "arm {} accepted", id);
                    Vec::new()
                }
                Op::ArmBurst(halves) => {
                    let now = clock.now();
                    for half in halves {
                        let deadline = now + thousandths(500 * u64::from(half % 8));
                        let (id, armed) = world.arm(deadline, false, Action::Nothing);
                        prop_assert_eq!(armed.is_ok(), model.arm(deadline, false, Action::Nothing).1);
                        prop_assert_eq!(id + 1, model.entries.len());
                    }
                    Vec::new()
                }
                Op::Cancel(pick) => {
                    if !model.entries.is_empty() {
                        let target = pick % model.entries.len();
                        let cancelled = world.cancel(target);
                        let armed = model.cancel(target);
                        // A rejected arm has no handle.
                        prop_assert_eq!(
                            cancelled.unwrap_or(false),
                            armed,
                            "cancel of {}", target
                        );
                    }
                    Vec::new()
                }
                Op::Advance(_) | Op::AdvanceToBoundary(_) | Op::AdvanceRevolutions(..) => {
                    let by = match op.clone() {
                        Op::Advance(n) => thousandths(n),
                        Op::AdvanceToBoundary(k) => boundary(k) - clock.now(),
                        Op::AdvanceRevolutions(r, f) => revolution * r as u32 + thousandths(f),
                        _ => unreachable!(),
                    };
                    clock.advance(by);
                    model.advance(clock.now(), tick)
                }
                Op::Stop => {
                    world.stop();
                    model.stop()
                }
            };
            let events = std::mem::take(&mut world.log.lock().unwrap().events);
            for event in &events {
                if let Event::Fired { id, at } = *event {
                    prop_assert!(at >= model.entries[id].deadline, "entry {} fired early", id);
                }
            }
            prop_assert_eq!(&events, &expected, "after {:?}", op);
            prop_assert_eq!(wheel.stats().armed, model.live.len(), "armed after {:?}", op);
        }
        // Whatever is left is told it stopped, once; a second stop tells nothing.
        world.stop();
        let events = std::mem::take(&mut world.log.lock().unwrap().events);
        prop_assert_eq!(events, model.stop());
        prop_assert!(wheel.stop().is_empty());
        prop_assert!(world.log.lock().unwrap().events.is_empty());
        prop_assert_eq!(wheel.stats().armed, 0);
        world.wheel.lock().unwrap().take();
    }
}
