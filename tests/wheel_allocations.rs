//! Heap allocations of arming and cancelling on a [`HashedWheelTimer`],
//! counted by a counting global allocator (this binary's own), on a fresh
//! wheel whose buckets have never been used: the client arms a request's
//! timeouts this way on every request, so an arm and a cancel must cost no
//! allocation from the start, not only once every bucket has been used
//! once (a revolution: 109 minutes for 2^16 buckets of 100 ms).
//!
//! What the wheel promises, and what these tests state: its entries' storage
//! grows (doubling) only when more entries are armed at once than ever
//! before on the wheel. So the only warm-up a count excludes is having had
//! as many entries armed at once; which buckets they went to does not
//! matter. The wheels run on a manual clock: no worker thread, all of a
//! wheel's work on the test's thread, so the count is that thread's (the
//! harness printing, or another test starting, allocates on others).

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

use std::sync::Arc;
use std::time::Duration;
use tickless::timer::{Clock, HashedWheelTimer, ManualClock, WheelTask, WheelTimeout};

/// Buckets of the wheels here: every arm below lands in one never used.
const BUCKETS: u32 = 1 << 16;
const TICK: Duration = Duration::from_millis(1);

/// A shared task, as the client arms (a boxed closure would allocate its
/// box: that is the caller's allocation, not the wheel's).
struct Ignored;

impl WheelTask for Ignored {
    fn fire(self: Arc<Self>, _: u64) {}
    fn stopped(self: Arc<Self>, _: u64) {}
}

fn fresh_wheel() -> (ManualClock, HashedWheelTimer) {
    let clock = ManualClock::new();
    let wheel = HashedWheelTimer::builder()
        .tick(TICK)
        .wheel_size(BUCKETS as usize)
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    (clock, wheel)
}

/// Arms the entry due `ticks` ticks from now: in bucket `ticks` of a fresh
/// wheel.
fn arm_in_bucket(
    wheel: &HashedWheelTimer,
    clock: &ManualClock,
    task: &Arc<dyn WheelTask>,
    ticks: u32,
) -> WheelTimeout {
    wheel
        .arm_task(clock.now() + TICK * ticks, task.clone(), ticks.into())
        .unwrap()
}

#[test]
fn arm_and_cancel_allocate_nothing_in_buckets_never_used() {
    let (clock, wheel) = fresh_wheel();
    let task: Arc<dyn WheelTask> = Arc::new(Ignored);
    // The warm-up: one entry armed (the storage grows to hold one), in
    // bucket 1, which the count below does not use again.
    assert!(arm_in_bucket(&wheel, &clock, &task, 1).cancel());

    let before = counting_alloc::thread_allocations();
    for ticks in 2..BUCKETS {
        let timeout = arm_in_bucket(&wheel, &clock, &task, ticks);
        assert!(timeout.cancel());
    }
    let allocations = counting_alloc::thread_allocations() - before;
    assert_eq!(
        allocations,
        0,
        "{allocations} allocations arming and cancelling one entry at a time in {} fresh buckets",
        BUCKETS - 2
    );
    assert_eq!(wheel.stats().armed, 0);
}

#[test]
fn arms_allocate_only_past_the_most_entries_ever_armed_at_once() {
    const AT_ONCE: u32 = 1000;
    let (clock, wheel) = fresh_wheel();
    let task: Arc<dyn WheelTask> = Arc::new(Ignored);
    // Room for the last part's entries too: the test's own vector must not
    // grow inside a count.
    let mut armed = Vec::with_capacity(2 * AT_ONCE as usize);
    // The warm-up: AT_ONCE entries armed at once, in buckets 1..=AT_ONCE.
    armed.extend((1..=AT_ONCE).map(|ticks| arm_in_bucket(&wheel, &clock, &task, ticks)));
    armed
        .drain(..)
        .for_each(|timeout| assert!(timeout.cancel()));

    // As many again at once, every round in buckets not used before, and
    // cancelled in another order than armed: every other one, then the rest.
    let before = counting_alloc::thread_allocations();
    for round in 1..(BUCKETS / AT_ONCE) {
        let first = round * AT_ONCE + 1;
        armed.extend(
            (first..first + AT_ONCE).map(|ticks| arm_in_bucket(&wheel, &clock, &task, ticks)),
        );
        for timeout in armed.iter().skip(1).step_by(2) {
            assert!(timeout.cancel());
        }
        for timeout in armed.iter().step_by(2) {
            assert!(timeout.cancel());
        }
        armed.clear();
    }
    let allocations = counting_alloc::thread_allocations() - before;
    assert_eq!(
        allocations, 0,
        "{allocations} allocations with no more than {AT_ONCE} entries armed at once"
    );
    assert_eq!(wheel.stats().armed, 0);

    // Past that high-water mark the storage grows, doubling: a few
    // allocations for twice as many, not one per entry or per bucket.
    let before = counting_alloc::thread_allocations();
    armed.extend((1..=2 * AT_ONCE).map(|ticks| arm_in_bucket(&wheel, &clock, &task, ticks)));
    let allocations = counting_alloc::thread_allocations() - before;
    assert!(
        (1..=4).contains(&allocations),
        "{allocations} allocations growing from {AT_ONCE} entries to {}",
        2 * AT_ONCE
    );
    armed
        .drain(..)
        .for_each(|timeout| assert!(timeout.cancel()));
}
