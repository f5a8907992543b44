use super::*;
use crate::test_util::last_instant;
use crate::{Clock, ManualClock};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;

fn manual_wheel(tick_ms: u64, size: usize) -> (ManualClock, HashedWheelTimer) {
    let clock = ManualClock::new();
    let wheel = wheel_on(&clock, Duration::from_millis(tick_ms), size);
    (clock, wheel)
}

/// A wheel of `size` buckets and `tick` on `clock`, started at its time.
fn wheel_on(clock: &ManualClock, tick: Duration, size: usize) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .tick(tick)
        .wheel_size(size)
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap()
}

fn counter() -> (Arc<AtomicUsize>, impl Fn() -> Box<dyn FnOnce() + Send>) {
    let count = Arc::new(AtomicUsize::new(0));
    let make = {
        let count = count.clone();
        move || -> Box<dyn FnOnce() + Send> {
            let count = count.clone();
            Box::new(move || {
                count.fetch_add(1, Ordering::SeqCst);
            })
        }
    };
    (count, make)
}

#[test]
fn manual_clock_fires_exactly_at_the_deadline_on_the_advancing_thread() {
    let (clock, wheel) = manual_wheel(100, 512);
    assert_eq!(wheel.thread_id(), None);
    let deadline = clock.now() + Duration::from_secs(5);
    let (tx, rx) = mpsc::channel();
    wheel
        .arm(deadline, move || tx.send(thread::current().id()).unwrap())
        .unwrap();
    clock.advance(Duration::from_secs(5) - Duration::from_nanos(1));
    assert!(rx.try_recv().is_err(), "fired before its deadline");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(rx.try_recv(), Ok(thread::current().id()));
    assert_eq!(wheel.stats().armed, 0);
    assert_eq!(wheel.stats().fired, 1);
}

#[test]
fn a_jump_past_several_revolutions_fires_everything_due() {
    let (clock, wheel) = manual_wheel(1, 8);
    let (count, task) = counter();
    for ms in [0, 3, 7, 8, 9, 100, 1000] {
        wheel
            .arm_boxed(clock.now() + Duration::from_millis(ms), task())
            .unwrap();
    }
    clock.advance(Duration::from_millis(999));
    assert_eq!(count.load(Ordering::SeqCst), 6);
    clock.advance(Duration::from_millis(1));
    assert_eq!(count.load(Ordering::SeqCst), 7);
}

#[test]
fn one_long_advance_fires_what_tasks_arm_for_times_it_passed_as_short_ones_do() {
    // A task re-arming itself a period after its deadline: one advance of
    // ten periods must fire it ten times, as ten advances of one do (and
    // as the worker does after a stall of ten periods).
    fn rearm(wheel: HashedWheelTimer, deadline: Instant, fired: Arc<AtomicUsize>) {
        let next = deadline + Duration::from_secs(1);
        let again = wheel.clone();
        wheel
            .arm(next, move || {
                fired.fetch_add(1, Ordering::SeqCst);
                rearm(again, next, fired);
            })
            .unwrap();
    }
    let (clock, wheel) = manual_wheel(100, 8);
    let fired = Arc::new(AtomicUsize::new(0));
    rearm(wheel.clone(), clock.now(), fired.clone());
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        fired.load(Ordering::SeqCst),
        10,
        "fired once per period passed"
    );
    assert_eq!(wheel.stats().armed, 1, "the next period's entry is armed");
    wheel.stop();
}

#[test]
fn cancel_drops_the_task_at_once() {
    let (clock, wheel) = manual_wheel(100, 512);
    let resource = Arc::new(());
    let held = resource.clone();
    let timeout = wheel
        .arm(clock.now() + Duration::from_secs(60), move || drop(held))
        .unwrap();
    assert_eq!(Arc::strong_count(&resource), 2);
    assert!(timeout.cancel());
    assert_eq!(
        Arc::strong_count(&resource),
        1,
        "cancelled task still alive"
    );
    assert!(!timeout.cancel(), "cancelled twice");
    assert_eq!(wheel.stats().armed, 0);
}

#[test]
fn system_clock_never_fires_early_and_runs_on_the_worker() {
    let wheel = HashedWheelTimer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let worker = wheel.thread_id().expect("a system wheel has a worker");
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    for ms in [0u64, 1, 2, 5, 10, 20] {
        let deadline = start + Duration::from_millis(ms);
        let tx = tx.clone();
        wheel
            .arm(deadline, move || {
                tx.send((deadline, Instant::now(), thread::current().id()))
                    .unwrap()
            })
            .unwrap();
    }
    for _ in 0..6 {
        let (deadline, fired, thread) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(fired >= deadline, "fired early");
        assert_eq!(thread, worker);
    }
}

fn system_wheel(tick: Duration) -> HashedWheelTimer {
    HashedWheelTimer::builder().tick(tick).build().unwrap()
}

/// Arms an entry for `deadline` that reports when it fired.
fn arm_reporting(wheel: &HashedWheelTimer, deadline: Instant) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    wheel
        .arm(deadline, move || tx.send(Instant::now()).unwrap())
        .unwrap();
    rx
}

/// Arms an entry `after` from now and asserts it fires, not early, within
/// a ceiling far above any tick these tests use.
fn assert_fires(wheel: &HashedWheelTimer, after: Duration) {
    let deadline = Instant::now() + after;
    let fired = arm_reporting(wheel, deadline)
        .recv_timeout(Duration::from_secs(10))
        .expect("the entry fired");
    assert!(fired >= deadline, "fired early");
}

#[test]
fn an_idle_wheel_does_not_wake_and_a_sparse_one_wakes_for_its_entries_only() {
    let wheel = system_wheel(Duration::from_millis(1));
    thread::sleep(Duration::from_millis(30));
    assert_eq!(wheel.worker_wakeups(), 0, "woke with nothing armed");

    // One entry 100 ticks away: the worker sleeps through the empty ticks.
    assert_fires(&wheel, Duration::from_millis(100));
    let after_firing = wheel.worker_wakeups();
    assert!(
        (1..=3).contains(&after_firing),
        "{after_firing} wake-ups for one entry"
    );

    thread::sleep(Duration::from_millis(30));
    assert_eq!(wheel.worker_wakeups(), after_firing, "woke once idle again");
}

#[test]
fn an_earlier_arm_wakes_a_worker_sleeping_for_a_later_entry() {
    // With 100 ms ticks and 512 buckets a round is 51 s: a worker that
    // missed an arm would sleep far past the ceiling below.
    let wheel = system_wheel(Duration::from_millis(100));
    let _later = arm_reporting(&wheel, Instant::now() + Duration::from_secs(30));
    thread::sleep(Duration::from_millis(20)); // the worker plans, then sleeps
    assert_fires(&wheel, Duration::from_millis(50));
}

/// A task that blocks the worker's thread until a later entry has fired
/// (a listener waiting for a request whose timeout is on this wheel)
/// fires what falls due meanwhile itself, a tick at a time: the later
/// entry fires on that thread, not early — where it would otherwise wait
/// for the task, for ever.
#[test]
fn a_task_that_blocks_the_worker_fires_what_falls_due_meanwhile() {
    let wheel = system_wheel(Duration::from_millis(1));
    let (later_fired, on_later) = mpsc::channel();
    let later = Instant::now() + Duration::from_millis(20);
    wheel
        .arm(later, move || {
            let _ = later_fired.send((Instant::now(), thread::current().id()));
        })
        .unwrap();
    let (done, on_done) = mpsc::channel();
    let blocked = wheel.clone();
    wheel
        .arm(Instant::now() + Duration::from_millis(5), move || {
            let give_up = Instant::now() + Duration::from_secs(10);
            let heard = loop {
                match on_later.recv_timeout(blocked.tick()) {
                    Ok(heard) => break Some(heard),
                    Err(_) if Instant::now() >= give_up => break None,
                    Err(_) => blocked.fire_due(),
                }
            };
            done.send((heard, thread::current().id())).unwrap();
        })
        .unwrap();
    let (heard, blocked_on) = on_done
        .recv_timeout(Duration::from_secs(20))
        .expect("the blocked task ended");
    let (fired, fired_on) = heard.expect("the later entry fired while the task blocked");
    assert!(fired >= later, "fired early");
    assert_eq!(fired_on, blocked_on, "fired by the blocked task's thread");
    assert_eq!(Some(blocked_on), wheel.thread_id(), "the worker's");
}

#[test]
fn an_entry_a_task_arms_for_a_tick_already_passed_fires_without_waiting_a_round() {
    let wheel = system_wheel(Duration::from_millis(100));
    let (tx, rx) = mpsc::channel();
    let inner = wheel.clone();
    wheel
        .arm(Instant::now() + Duration::from_millis(10), move || {
            // On the worker, between collecting and planning: already due.
            let due = Instant::now();
            inner
                .arm(due, move || tx.send((due, Instant::now())).unwrap())
                .unwrap();
        })
        .unwrap();
    let (due, fired) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the entry armed by the task fired");
    assert!(fired >= due, "fired early");
}

#[test]
fn a_deadline_at_the_end_of_time_leaves_the_worker_alive() {
    // With 1 s ticks the entry's tick boundary lies past the last Instant.
    let wheel = system_wheel(Duration::from_secs(1));
    wheel.arm(last_instant(Instant::now()), || {}).unwrap();
    thread::sleep(Duration::from_millis(20)); // the worker reads its plan
    assert_fires(&wheel, Duration::from_millis(10));
}

/// The system clock, moved on by a settable offset.
#[derive(Debug, Default)]
struct OffsetClock(Mutex<Duration>);

impl Clock for OffsetClock {
    fn now(&self) -> Instant {
        Instant::now() + *self.0.lock().unwrap()
    }
}

/// More nanoseconds after the wheel's start than a `u64` holds (584
/// years), a worker given an entry an hour ahead sleeps until it: the
/// ticks there are still each deadline's own, not one saturated tick the
/// clock has passed, where the worker would wake, find nothing due and
/// wake again at once, for the hour.
#[test]
fn six_hundred_years_on_the_worker_sleeps_until_an_entry_an_hour_ahead() {
    let clock = Arc::new(OffsetClock::default());
    let wheel = HashedWheelTimer::builder()
        .tick(Duration::from_millis(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    *clock.0.lock().unwrap() = Duration::from_secs(600 * 365 * 24 * 3600);
    let (fired, task) = counter();
    wheel
        .arm_boxed(clock.now() + Duration::from_secs(3600), task())
        .unwrap();
    thread::sleep(Duration::from_millis(50));
    assert!(
        wheel.worker_wakeups() < 5,
        "the worker woke {} times for nothing due",
        wheel.worker_wakeups()
    );
    assert_eq!(fired.load(Ordering::SeqCst), 0, "fired early");
}

#[test]
fn arming_and_cancelling_from_many_threads() {
    let wheel = HashedWheelTimer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    let (count, task) = counter();
    let task = Arc::new(Mutex::new(task));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (wheel, task) = (wheel.clone(), task.clone());
            thread::spawn(move || {
                let mut kept = Vec::new();
                for i in 0..250 {
                    let make = task.lock().unwrap();
                    let timeout = wheel
                        .arm_boxed(Instant::now() + Duration::from_millis(i % 7), make())
                        .unwrap();
                    drop(make);
                    if i % 2 == 0 {
                        kept.push(timeout);
                    } else {
                        // Cancelled from this thread while the worker fires others.
                        let _ = timeout.cancel();
                    }
                }
                kept.len()
            })
        })
        .collect();
    let kept: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let deadline = Instant::now() + Duration::from_secs(30);
    while wheel.stats().armed > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    let stats = wheel.stats();
    assert_eq!(stats.armed, 0);
    assert_eq!(stats.fired + stats.cancelled, 1000);
    assert_eq!(count.load(Ordering::SeqCst) as u64, stats.fired);
    assert!(stats.fired >= kept as u64);
}

#[test]
fn cancelling_from_another_thread() {
    let (clock, wheel) = manual_wheel(10, 64);
    let (count, task) = counter();
    let timeout = wheel
        .arm_boxed(clock.now() + Duration::from_millis(50), task())
        .unwrap();
    assert!(thread::spawn(move || timeout.cancel()).join().unwrap());
    clock.advance(Duration::from_secs(1));
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[test]
fn stop_returns_the_tasks_that_never_ran_and_rejects_arms() {
    let wheel = HashedWheelTimer::builder().build().unwrap();
    let (count, task) = counter();
    for _ in 0..3 {
        wheel
            .arm_boxed(Instant::now() + Duration::from_secs(3600), task())
            .unwrap();
    }
    let leftovers = wheel.stop();
    assert_eq!(leftovers.len(), 3);
    assert_eq!(wheel.stats().armed, 0);
    assert_eq!(wheel.arm(Instant::now(), || {}).unwrap_err(), TimerStopped);
    for task in leftovers {
        task();
    }
    assert_eq!(count.load(Ordering::SeqCst), 3);
    assert!(wheel.stop().is_empty());
}

#[test]
fn a_panicking_task_does_not_kill_the_worker() {
    let wheel = HashedWheelTimer::builder()
        .tick(Duration::from_millis(1))
        .build()
        .unwrap();
    a_task_after_a_panicking_one_still_fires(&wheel, "the worker died with the panicking task");
}

/// Arms a task that panics, then one 5 ms later, which must still fire.
fn a_task_after_a_panicking_one_still_fires(wheel: &HashedWheelTimer, died: &str) {
    wheel.arm(Instant::now(), || panic!("task panics")).unwrap();
    let (tx, rx) = mpsc::channel();
    wheel
        .arm(Instant::now() + Duration::from_millis(5), move || {
            tx.send(()).unwrap()
        })
        .unwrap();
    rx.recv_timeout(Duration::from_secs(10)).expect(died);
}

/// An executor that runs each task at once, on the thread that hands it
/// over: a task's panic unwinds through it.
fn inline_executor() -> Executor {
    Arc::new(|task: TimerTask| task())
}

#[test]
fn a_task_that_panics_in_an_executor_does_not_kill_the_worker() {
    let wheel = HashedWheelTimer::builder()
        .tick(Duration::from_millis(1))
        .executor(inline_executor())
        .build()
        .unwrap();
    a_task_after_a_panicking_one_still_fires(
        &wheel,
        "the worker died with the task its executor ran",
    );
}

#[test]
fn a_task_that_panics_in_an_executor_leaves_the_others_due_and_the_advance_alone() {
    let (clock, _) = manual_wheel(1, 8);
    let wheel = HashedWheelTimer::builder()
        .clock(Arc::new(clock.clone()))
        .executor(inline_executor())
        .build()
        .unwrap();
    let (count, task) = counter();
    let deadline = clock.now() + Duration::from_millis(1);
    wheel.arm(deadline, || panic!("task panics")).unwrap();
    wheel.arm_boxed(deadline, task()).unwrap();
    let advanced =
        std::panic::catch_unwind(AssertUnwindSafe(|| clock.advance(Duration::from_millis(1))));
    assert!(
        advanced.is_ok(),
        "the task's panic unwound into the advance"
    );
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the entry due with it never fired"
    );
    assert_eq!(wheel.stats().armed, 0);
}

#[test]
fn an_executor_runs_the_tasks() {
    let (clock, _) = manual_wheel(1, 8);
    let ran_on_executor = Arc::new(AtomicUsize::new(0));
    let executor: Executor = {
        let ran = ran_on_executor.clone();
        Arc::new(move |task: TimerTask| {
            ran.fetch_add(1, Ordering::SeqCst);
            task()
        })
    };
    let wheel = HashedWheelTimer::builder()
        .clock(Arc::new(clock.clone()))
        .executor(executor)
        .build()
        .unwrap();
    let (count, task) = counter();
    wheel.arm_boxed(clock.now(), task()).unwrap();
    clock.advance(Duration::from_millis(1));
    assert_eq!(ran_on_executor.load(Ordering::SeqCst), 1);
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

/// A wheel on a manual clock and a model of it: the deadline of each
/// entry armed and neither fired nor cancelled, by id. Cloned into the
/// tasks that arm entries of their own.
#[derive(Clone)]
struct Modelled {
    clock: ManualClock,
    wheel: HashedWheelTimer,
    /// The entries fired since the last check: id, deadline, and the
    /// clock's time when they fired.
    fired: Arc<Mutex<Vec<(usize, Instant, Instant)>>>,
    live: Arc<Mutex<BTreeMap<usize, Instant>>>,
    next_id: Arc<AtomicUsize>,
}

impl Modelled {
    fn new(clock: ManualClock, wheel: HashedWheelTimer) -> Modelled {
        Modelled {
            clock,
            wheel,
            fired: Arc::default(),
            live: Arc::default(),
            next_id: Arc::default(),
        }
    }

    /// Arms an entry for `deadline` whose task, given a `follow_up`, arms
    /// another entry that long after its own deadline (with no follow-up
    /// of its own). The entry's id and handle.
    fn arm(&self, deadline: Instant, follow_up: Option<Duration>) -> (usize, WheelTimeout) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        self.live.lock().unwrap().insert(id, deadline);
        let (clock, fired) = (self.clock.clone(), self.fired.clone());
        // Only a task that arms holds the wheel (and must be dropped by a
        // stop if it never fires).
        let follow_up = follow_up.map(|after| (self.clone(), deadline + after));
        let handle = self
            .wheel
            .arm(deadline, move || {
                fired.lock().unwrap().push((id, deadline, clock.now()));
                if let Some((modelled, next)) = follow_up {
                    modelled.arm(next, None);
                }
            })
            .unwrap();
        (id, handle)
    }

    /// Cancels an entry: the cancel succeeds exactly if the entry is live.
    fn cancel(&self, (id, handle): &(usize, WheelTimeout)) -> Result<(), TestCaseError> {
        let cancelled = handle.cancel();
        let was_live = self.live.lock().unwrap().remove(id).is_some();
        prop_assert_eq!(cancelled, was_live);
        Ok(())
    }

    /// Advances the clock by `by`: what fired was live and due, fired
    /// once, not early, and nothing due is left.
    fn advance(&self, by: Duration) -> Result<(), TestCaseError> {
        self.clock.advance(by);
        let now = self.clock.now();
        let mut live = self.live.lock().unwrap();
        for (id, deadline, at) in self.fired.lock().unwrap().drain(..) {
            prop_assert!(at >= deadline, "fired early");
            prop_assert_eq!(
                live.remove(&id),
                Some(deadline),
                "fired twice or after cancel"
            );
        }
        let overdue: Vec<Duration> = live
            .values()
            .filter(|&&deadline| deadline <= now)
            .map(|&deadline| now - deadline)
            .collect();
        prop_assert!(
            overdue.is_empty(),
            "due entry not fired: {:?} overdue",
            overdue
        );
        Ok(())
    }

    /// The wheel counts as armed the entries the model has live.
    fn check_armed(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.wheel.stats().armed, self.live.lock().unwrap().len());
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Op {
    Arm(u16),
    Cancel(usize),
    Advance(u16),
}

proptest! {
    /// Against a model on a manual clock: nothing fires early, nothing
    /// cancelled fires, everything due fires exactly once.
    #[test]
    fn behaves_like_a_model(ops in proptest::collection::vec(prop_oneof![
        4 => (0u16..2000).prop_map(Op::Arm),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => (0u16..700).prop_map(Op::Advance),
    ], 1..200)) {
        let (clock, wheel) = manual_wheel(10, 16);
        let modelled = Modelled::new(clock, wheel);
        let mut handles = Vec::new();
        for op in ops {
            match op {
                Op::Arm(ms) => {
                    let deadline = modelled.clock.now() + Duration::from_millis(ms.into());
                    handles.push(modelled.arm(deadline, None));
                }
                Op::Cancel(pick) if !handles.is_empty() => {
                    modelled.cancel(&handles[pick % handles.len()])?;
                }
                Op::Cancel(_) => {}
                Op::Advance(ms) => modelled.advance(Duration::from_millis(ms.into()))?,
            }
            modelled.check_armed()?;
        }
    }
}

/// For [`the_model_holds_at_odd_ticks_and_edges`]: times of
/// `ticks * tick / parts + nudge` nanoseconds, so whole ticks, halves or
/// thirds of them, one nanosecond either side.
#[derive(Debug, Clone)]
enum EdgeOp {
    /// An entry that far from now (before it if negative), whose task, if
    /// given a number of ticks, arms another that many ticks (over the
    /// same `parts`) after its own deadline.
    Arm {
        ticks: i64,
        parts: i64,
        nudge: i64,
        follow_up: Option<u32>,
    },
    Cancel(usize),
    /// The clock on by that much (at least zero).
    Advance {
        ticks: u64,
        parts: u64,
        nudge: i64,
    },
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// The model of [`behaves_like_a_model`] on ticks of any number of
    /// nanoseconds and wheels of 1 to 32 buckets, on a clock advanced
    /// before the wheel was built: deadlines before now (and before the
    /// wheel's start) and at tick multiples, halves and thirds one
    /// nanosecond either side, advances as odd, and tasks that arm an
    /// entry from inside their own firing, due in the same advance or
    /// later. 256 cases: a fraction of a second.
    #[test]
    fn the_model_holds_at_odd_ticks_and_edges(
        tick_nanos in prop_oneof![Just(1_000u64), 1_000u64..50_000_000],
        size_log2 in 0u32..6,
        clock_before_the_wheel in 0u64..5_000_000,
        ops in proptest::collection::vec(prop_oneof![
            4 => (-3i64..40, 1i64..=3, -1i64..=1, proptest::option::of(0u32..3))
                .prop_map(|(ticks, parts, nudge, follow_up)| EdgeOp::Arm { ticks, parts, nudge, follow_up }),
            2 => any::<usize>().prop_map(EdgeOp::Cancel),
            3 => (0u64..12, 1u64..=3, -1i64..=1)
                .prop_map(|(ticks, parts, nudge)| EdgeOp::Advance { ticks, parts, nudge }),
        ], 1..150),
    ) {
        let clock = ManualClock::new();
        clock.advance(Duration::from_nanos(clock_before_the_wheel));
        let wheel = wheel_on(&clock, Duration::from_nanos(tick_nanos), 1 << size_log2);
        let modelled = Modelled::new(clock, wheel);
        let tick = tick_nanos as i64;
        let mut handles = Vec::new();
        for op in ops {
            match op {
                EdgeOp::Arm { ticks, parts, nudge, follow_up } => {
                    let offset = ticks * tick / parts + nudge;
                    let now = modelled.clock.now();
                    let deadline = match u64::try_from(offset) {
                        Ok(after) => now + Duration::from_nanos(after),
                        Err(_) => now - Duration::from_nanos(offset.unsigned_abs()),
                    };
                    let follow_up = follow_up
                        .map(|ticks| Duration::from_nanos(u64::from(ticks) * tick_nanos / parts as u64));
                    handles.push(modelled.arm(deadline, follow_up));
                }
                EdgeOp::Cancel(pick) if !handles.is_empty() => {
                    modelled.cancel(&handles[pick % handles.len()])?;
                }
                EdgeOp::Cancel(_) => {}
                EdgeOp::Advance { ticks, parts, nudge } => {
                    let by = (ticks * tick_nanos / parts) as i64 + nudge;
                    modelled.advance(Duration::from_nanos(by.max(0) as u64))?;
                }
            }
            modelled.check_armed()?;
        }
        // Tasks left armed to arm a follow-up hold the wheel: the stop
        // drops them.
        drop(modelled.wheel.stop());
    }
}

#[test]
fn the_tick_is_clamped_and_a_huge_one_still_fires() {
    let tick = |wanted: Duration| system_wheel(wanted).tick();
    assert_eq!(tick(Duration::ZERO), Duration::from_micros(1));
    assert_eq!(tick(Duration::from_millis(5)), Duration::from_millis(5));
    assert_eq!(tick(Duration::MAX), MAX_TICK);
    // A year-long tick would make a 50 ms timeout wait for a year.
    assert_fires(&system_wheel(Duration::MAX), Duration::from_millis(50));
}

#[test]
fn the_wheel_size_is_a_power_of_two_within_bounds() {
    let size = |wanted: usize| {
        let wheel = HashedWheelTimer::builder()
            .clock(Arc::new(ManualClock::new()))
            .wheel_size(wanted);
        wheel.wheel_size
    };
    assert_eq!(size(0), 1);
    assert_eq!(size(3), 4);
    assert_eq!(size(512), 512);
    assert_eq!(size(usize::MAX), MAX_WHEEL_SIZE);
}

/// Records what a shared task is told, entry by entry.
#[derive(Default)]
struct Told(Mutex<Vec<(&'static str, u64)>>);

impl WheelTask for Told {
    fn fire(self: Arc<Self>, tag: u64) {
        self.0.lock().unwrap().push(("fired", tag));
    }
    fn stopped(self: Arc<Self>, tag: u64) {
        self.0.lock().unwrap().push(("stopped", tag));
    }
}

#[test]
fn a_shared_task_is_told_fired_or_stopped_and_a_cancelled_entry_nothing() {
    let (clock, wheel) = manual_wheel(1, 8);
    let told = Arc::new(Told::default());
    let now = clock.now();
    wheel
        .arm_task(now + Duration::from_millis(5), told.clone(), 1)
        .unwrap();
    let cancelled = wheel
        .arm_task(now + Duration::from_millis(5), told.clone(), 2)
        .unwrap();
    wheel
        .arm_task(now + Duration::from_secs(60), told.clone(), 3)
        .unwrap();
    assert!(cancelled.cancel());
    clock.advance(Duration::from_millis(5));
    assert_eq!(*told.0.lock().unwrap(), [("fired", 1)]);
    assert!(wheel.stop().is_empty(), "no boxed task was armed");
    assert_eq!(*told.0.lock().unwrap(), [("fired", 1), ("stopped", 3)]);
    assert_eq!(
        wheel.arm_task(now, told.clone(), 4).unwrap_err(),
        TimerStopped
    );
    assert_eq!(wheel.stats().armed, 0);
    // Only the wheel's own references are gone: the test's is the last.
    assert_eq!(Arc::strong_count(&told), 1);
}

/// The armed count goes up before an entry can fire (and bring it down):
/// read meanwhile, it never wraps below zero. Entries armed at the clock's
/// time while another thread keeps advancing it, so that some fire at once.
#[test]
fn the_armed_count_never_wraps_below_zero() {
    use std::sync::atomic::AtomicBool;
    let (clock, wheel) = manual_wheel(1, 8);
    let stop = Arc::new(AtomicBool::new(false));
    let advancer = {
        let (clock, stop) = (clock.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                clock.advance(Duration::from_nanos(1));
            }
        })
    };
    let watcher = {
        let (wheel, stop) = (wheel.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut most = 0usize;
            while !stop.load(Ordering::Relaxed) {
                most = most.max(wheel.stats().armed);
            }
            most
        })
    };
    let give_up = std::time::Instant::now() + Duration::from_secs(1);
    let mut armed = 0usize;
    while std::time::Instant::now() < give_up {
        if wheel.arm(clock.now(), || {}).is_ok() {
            armed += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    advancer.join().unwrap();
    let most = watcher.join().unwrap();
    assert!(
        most <= armed,
        "armed read {most} after {armed} arms: it wrapped"
    );
}

/// Arms one entry per deadline (in the order given, milliseconds from
/// now), advances the clock past them all at once, and returns the
/// deadlines in the order their tasks ran.
fn firing_order(tick_ms: u64, size: usize, deadlines_ms: &[u64], advance_ms: u64) -> Vec<u64> {
    let (clock, wheel) = manual_wheel(tick_ms, size);
    let order = Arc::new(Mutex::new(Vec::new()));
    let now = clock.now();
    for &ms in deadlines_ms {
        let order = order.clone();
        wheel
            .arm(now + Duration::from_millis(ms), move || {
                order.lock().unwrap().push(ms)
            })
            .unwrap();
    }
    clock.advance(Duration::from_millis(advance_ms));
    let order = order.lock().unwrap().clone();
    order
}

#[test]
fn entries_due_at_once_fire_in_deadline_order() {
    // One tick holds all three, armed latest first.
    assert_eq!(firing_order(100, 512, &[90, 50, 10], 100), [10, 50, 90]);
    // More than a revolution passed at once: bucket 1 holds tick 9, which
    // must not run before bucket 2's tick 2.
    assert_eq!(firing_order(1, 8, &[9, 2, 30, 17], 40), [2, 9, 17, 30]);
    // Equal deadlines keep their arming order, also past a cancel's
    // reshuffling of the bucket.
    let (clock, wheel) = manual_wheel(100, 8);
    let order = Arc::new(Mutex::new(Vec::new()));
    let deadline = clock.now() + Duration::from_millis(50);
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let order = order.clone();
            wheel
                .arm(deadline, move || order.lock().unwrap().push(i))
                .unwrap()
        })
        .collect();
    assert!(handles[1].cancel());
    clock.advance(Duration::from_millis(50));
    assert_eq!(*order.lock().unwrap(), [0, 2, 3, 4]);
}

/// What `next_occupied_tick` answered before the occupancy bits: a walk
/// over the buckets from `from`, at most a revolution.
fn walked_next_occupied_tick(core: &Core, from: u64) -> u64 {
    let size = core.buckets.len() as u64;
    (from..from.saturating_add(size))
        .find(|tick| core.buckets[(tick % size) as usize].first != NIL)
        .unwrap_or(u64::MAX)
}

proptest! {
    /// On wheels of many sizes, after random arms, cancels and advances
    /// (so bits set by arms and cleared by cancels and fires): the
    /// occupancy bits name the bucket a walk finds, from any tick.
    #[test]
    fn the_next_occupied_tick_is_the_one_a_walk_finds(
        size_log2 in 0u32..12,
        ops in proptest::collection::vec(prop_oneof![
            6 => (0u16..20_000).prop_map(Op::Arm),
            3 => any::<usize>().prop_map(Op::Cancel),
            1 => (0u16..3_000).prop_map(Op::Advance),
        ], 0..150),
        froms in proptest::collection::vec(any::<u64>(), 1..20),
    ) {
        let (clock, wheel) = manual_wheel(1, 1 << size_log2);
        let mut handles = Vec::new();
        for op in ops {
            match op {
                Op::Arm(ms) => handles.push(
                    wheel.arm(clock.now() + Duration::from_millis(ms.into()), || {}).unwrap(),
                ),
                Op::Cancel(pick) if !handles.is_empty() => {
                    handles.swap_remove(pick % handles.len()).cancel();
                }
                Op::Cancel(_) => {}
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms.into())),
            }
        }
        let core = wheel.owner.shared.lock_core();
        let near = core.first_open_tick;
        for from in froms.into_iter().chain([0, near, near + 1, u64::MAX - 3]) {
            // Near the wheel's own position as often as anywhere.
            for from in [from, near.wrapping_add(from % 4096)] {
                prop_assert_eq!(
                    core.next_occupied_tick(from),
                    walked_next_occupied_tick(&core, from),
                    "from tick {}", from
                );
            }
        }
    }
}

/// Once a manual clock has passed the last tick a `u64` counts (with 1 ms
/// ticks, some 584 million years on: the tick numbers saturate), an entry
/// armed for a time it has reached still fires at the next advance, and
/// one armed for the last `Instant` fires when the clock gets there.
#[test]
fn entries_fire_at_the_saturated_last_tick() {
    for size in [1, 8] {
        let (clock, wheel) = manual_wheel(1, size);
        let told = Arc::new(Told::default());
        let end = last_instant(clock.now());
        // Far past u64::MAX milliseconds, short of the end of time.
        let near_end = end - Duration::from_secs(3600);
        wheel.arm_task(end, told.clone(), 1).unwrap();
        clock.advance(near_end - clock.now());
        let told_so_far = || told.0.lock().unwrap().clone();
        assert_eq!(told_so_far(), [], "fired early");
        wheel.arm_task(near_end, told.clone(), 2).unwrap();
        clock.advance(Duration::ZERO);
        assert_eq!(told_so_far(), [("fired", 2)], "wheel of {size}");
        clock.advance(end - clock.now());
        assert_eq!(
            told_so_far(),
            [("fired", 2), ("fired", 1)],
            "wheel of {size}"
        );
        wheel.arm_task(end, told.clone(), 3).unwrap();
        clock.advance(Duration::ZERO);
        assert_eq!(told_so_far().last(), Some(&("fired", 3)), "wheel of {size}");
        assert_eq!(wheel.stats().armed, 0);
    }
}

proptest! {
    /// An arm's tick, told by the last arm's span when the deadline falls
    /// in it, is the tick the subtraction gives — at each tick's bounds
    /// (`k * tick`, one nanosecond either side), before the start, and in
    /// any order of deadlines, whatever the tick. The deadlines lie within
    /// a few ticks of each other, so that most arms fall in, or at an edge
    /// of, the last arm's tick: the span's case, not the subtraction's.
    #[test]
    fn an_arms_tick_is_the_one_the_subtraction_gives(
        tick_nanos in prop_oneof![Just(1_000u64), Just(1_000_000), 1_000u64..1_000_000_000],
        // Zero often: the deadlines before the start need it.
        base in prop_oneof![Just(0u64), 0u64..2_000],
        deadlines in proptest::collection::vec((0u64..4, -1i64..=1), 1..60),
    ) {
        let tick = Duration::from_nanos(tick_nanos);
        let wheel = HashedWheelTimer::builder()
            .tick(tick)
            .clock(Arc::new(ManualClock::new()))
            .build()
            .unwrap();
        let mut core = wheel.owner.shared.lock_core();
        for (ticks, nudge) in deadlines {
            let at = u128::from(base + ticks) * u128::from(tick_nanos);
            let deadline = match nudge {
                -1 if at == 0 => core.start - Duration::from_nanos(1),
                -1 => core.start + Duration::from_nanos((at - 1) as u64),
                0 => core.start + Duration::from_nanos(at as u64),
                _ => core.start + Duration::from_nanos((at + 1) as u64),
            };
            let by_subtraction = core.tick_at_or_after(deadline, tick);
            prop_assert_eq!(core.arm_tick(deadline, tick), by_subtraction);
        }
    }
}
