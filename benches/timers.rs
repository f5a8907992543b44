//! Criterion benchmarks of arming timeouts, and how much each arm allocates.
//!
//! Groups:
//!
//! * `heap/arm_cancel`: insert then cancel on a [`DeadlineHeap`] already
//!   holding 1000 entries spread over the next 1000 s, as a loop's heap of
//!   request timeouts would;
//! * `heap/arm_fire`: insert at a deadline already reached, then `pop_due`,
//!   on the same pre-warmed heap;
//! * `wheel/arm_cancel`: arm (deadline +60 s) then cancel on a system-clock
//!   [`HashedWheelTimer`] with the default tick;
//! * `wheel/arm_fire`: on a [`ManualClock`] wheel, arm at now and advance the
//!   clock one tick so the task fires inline.
//!
//! Before those, timed by hand (no criterion: each case is a one-off walk
//! over a fresh wheel, not a steady state to sample), on sparse wheels of
//! [`MAX_WHEEL_SIZE`] buckets holding one entry about a revolution away (so
//! planning the worker's next wake-up has to find it past nearly every
//! bucket):
//!
//! * `sparse_wheel/arm_task_cancel`: ns per `arm_task` + `cancel` (1 ms
//!   ticks), each arm in a bucket not used before, with the allocations per
//!   op;
//! * `sparse_wheel/wake_fire_plan`: µs per round (1 µs ticks) of arming an
//!   entry due now, the worker waking, firing it and planning its next
//!   wake-up (one `next_occupied_tick`); the round ends when the entry has
//!   fired, and the next round's arms wait for the lock until the plan is
//!   done, so a round takes the wake-up and the plan;
//!
//! `cargo bench --bench timers -- sparse_wheel` runs those (and skips the
//! criterion cases).
//!
//! A counting global allocator tallies every allocation. After criterion has
//! measured a case, the case runs 10 000 more warm iterations outside
//! criterion and prints `allocations per op: X`. The wheel boxes a closure
//! task, so `arm` allocates about once; `arm_task` (a shared task and a
//! tag, as the client arms) and the heap should not allocate at all.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickless_timer::{
    Clock, DeadlineHeap, HashedWheelTimer, ManualClock, WheelTask, DEFAULT_TICK, MAX_WHEEL_SIZE,
};

#[path = "../tests/support/counting_alloc.rs"]
mod counting_alloc;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

/// Warm iterations run outside criterion to count allocations.
const ALLOC_ITERATIONS: u64 = 10_000;

/// Runs `op` [`ALLOC_ITERATIONS`] times and prints the allocations per op.
fn report_allocations(name: &str, mut op: impl FnMut()) {
    // One more round first, so any growth is out of the way.
    for _ in 0..ALLOC_ITERATIONS {
        op();
    }
    let before = counting_alloc::allocations();
    for _ in 0..ALLOC_ITERATIONS {
        op();
    }
    let allocations = counting_alloc::allocations() - before;
    println!(
        "{name}: allocations per op: {:.2}",
        allocations as f64 / ALLOC_ITERATIONS as f64
    );
}

/// Entries already in the heap when a heap case starts.
const PREWARM: u64 = 1000;

/// A heap holding [`PREWARM`] entries one second apart after `base + 1 s`.
fn prewarmed_heap(base: Instant) -> DeadlineHeap<u64> {
    let mut heap = DeadlineHeap::with_capacity(PREWARM as usize + 1);
    for i in 0..PREWARM {
        heap.insert(base + Duration::from_secs(1 + i), i);
    }
    heap
}

/// Spreads successive arms over the pre-warmed range (a cheap LCG), so the
/// new entry lands at varied depths instead of always at the bottom.
fn next_offset(state: &mut u64) -> Duration {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    Duration::from_millis((*state >> 33) % (PREWARM * 1000))
}

fn heap(c: &mut Criterion) {
    let mut group = c.benchmark_group("heap");
    let base = Instant::now();

    let mut heap = prewarmed_heap(base);
    let mut state = 1;
    let mut arm_cancel = move || {
        let deadline = base + Duration::from_secs(1) + next_offset(&mut state);
        let handle = heap.insert(black_box(deadline), black_box(7));
        black_box(heap.cancel(handle));
    };
    group.bench_function("arm_cancel", |b| b.iter(&mut arm_cancel));
    report_allocations("heap/arm_cancel", &mut arm_cancel);

    // Everything pre-warmed is due after `base`; the new entry is due at it.
    let mut heap = prewarmed_heap(base);
    let mut arm_fire = move || {
        heap.insert(black_box(base), black_box(7));
        black_box(heap.pop_due(base));
    };
    group.bench_function("arm_fire", |b| b.iter(&mut arm_fire));
    report_allocations("heap/arm_fire", &mut arm_fire);

    group.finish();
}

/// A shared wheel task that does nothing with what it is told.
struct Tagged;

impl WheelTask for Tagged {
    fn fire(self: Arc<Self>, tag: u64) {
        black_box(tag);
    }
    fn stopped(self: Arc<Self>, tag: u64) {
        black_box(tag);
    }
}

fn wheel(c: &mut Criterion) {
    let mut group = c.benchmark_group("wheel");

    let timer = HashedWheelTimer::builder()
        .build()
        .expect("start the wheel's worker");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sequence = 0u64;
    let mut arm_cancel = || {
        // A task capturing some state, as a client's would; a task that
        // captures nothing is zero-sized and its box would not allocate.
        sequence = sequence.wrapping_add(1);
        let captured = sequence;
        let timeout = timer
            .arm(black_box(deadline), move || {
                black_box(captured);
            })
            .expect("the wheel is running");
        black_box(timeout.cancel());
    };
    group.bench_function("arm_cancel", |b| b.iter(&mut arm_cancel));
    report_allocations("wheel/arm_cancel", &mut arm_cancel);

    // The client's way: one shared task per exchange, its entries told
    // apart by a tag, so an arm allocates nothing.
    let task: Arc<dyn WheelTask> = Arc::new(Tagged);
    let mut tag = 0u64;
    let mut arm_task_cancel = || {
        tag = tag.wrapping_add(1);
        let timeout = timer
            .arm_task(black_box(deadline), task.clone(), tag)
            .expect("the wheel is running");
        black_box(timeout.cancel());
    };
    group.bench_function("arm_task_cancel", |b| b.iter(&mut arm_task_cancel));
    report_allocations("wheel/arm_task_cancel", &mut arm_task_cancel);
    drop(timer.stop());

    let clock = ManualClock::new();
    let timer = HashedWheelTimer::builder()
        .clock(Arc::new(clock.clone()))
        .build()
        .expect("build the manual wheel");
    let fired = Arc::new(AtomicU64::new(0));
    let mut arm_fire = || {
        let fired = fired.clone();
        timer
            .arm(clock.now(), move || {
                fired.fetch_add(1, Ordering::Relaxed);
            })
            .expect("the wheel is running");
        clock.advance(DEFAULT_TICK);
    };
    group.bench_function("arm_fire", |b| b.iter(&mut arm_fire));
    report_allocations("wheel/arm_fire", &mut arm_fire);
    assert_eq!(timer.stats().armed, 0, "every armed task fired");
    assert!(fired.load(Ordering::Relaxed) >= 2 * ALLOC_ITERATIONS);

    group.finish();
}

/// The sparse-wheel cases described in the file's notes, timed by hand.
fn sparse_wheel(_: &mut Criterion) {
    const TICK: Duration = Duration::from_millis(1);
    const ARM_CANCELS: u32 = 200_000;
    const ROUNDS: u32 = 300;
    let timer = HashedWheelTimer::builder()
        .tick(TICK)
        .wheel_size(MAX_WHEEL_SIZE)
        .build()
        .expect("start the wheel's worker");
    let task: Arc<dyn WheelTask> = Arc::new(Tagged);
    let start = timer.clock().now();
    // Two ticks short of a revolution: in the bucket just behind the
    // worker's, the last one a scan from the worker's position meets.
    let far = timer
        .arm_task(start + TICK * (MAX_WHEEL_SIZE as u32 - 2), task.clone(), 0)
        .expect("the wheel is running");

    // Each arm a tick after the last, from a second on: a fresh bucket each.
    let allocations_before = counting_alloc::allocations();
    let began = Instant::now();
    for step in 0..ARM_CANCELS {
        let deadline = start + Duration::from_secs(1) + TICK * step;
        let timeout = timer
            .arm_task(black_box(deadline), task.clone(), u64::from(step))
            .expect("the wheel is running");
        black_box(timeout.cancel());
    }
    let elapsed = began.elapsed();
    let allocations = counting_alloc::allocations() - allocations_before;
    println!(
        "sparse_wheel/arm_task_cancel: {:.1} ns per op, {:.3} allocations per op ({ARM_CANCELS} ops, each in a new bucket)",
        elapsed.as_nanos() as f64 / f64::from(ARM_CANCELS),
        allocations as f64 / f64::from(ARM_CANCELS),
    );

    black_box(far.cancel());
    drop(timer.stop());

    // The shortest tick, so that an entry due now waits next to nothing for
    // its tick boundary and a round is the wake-up, the fire and the plan.
    let timer = HashedWheelTimer::builder()
        .tick(Duration::from_micros(1))
        .wheel_size(MAX_WHEEL_SIZE)
        .build()
        .expect("start the wheel's worker");
    let fired = Arc::new(AtomicU64::new(0));
    let mut far = None::<tickless_timer::WheelTimeout>;
    let began = Instant::now();
    for round in 0..ROUNDS {
        // Re-armed each round a revolution (less two ticks) on, so it stays
        // in the bucket just behind the worker's as the clock moves.
        if let Some(far) = far.take() {
            black_box(far.cancel());
        }
        let now = timer.clock().now();
        far = Some(
            timer
                .arm_task(
                    now + Duration::from_micros(MAX_WHEEL_SIZE as u64 - 2),
                    task.clone(),
                    0,
                )
                .expect("the wheel is running"),
        );
        let fired_now = fired.clone();
        timer
            .arm(now, move || {
                fired_now.fetch_add(1, Ordering::Release);
            })
            .expect("the wheel is running");
        while fired.load(Ordering::Acquire) <= u64::from(round) {
            std::thread::yield_now();
        }
    }
    // The last round's plan: a cancel takes the lock after it.
    black_box(far.map(|far| far.cancel()));
    let elapsed = began.elapsed();
    println!(
        "sparse_wheel/wake_fire_plan: {:.1} µs per round ({ROUNDS} rounds)",
        elapsed.as_nanos() as f64 / 1000.0 / f64::from(ROUNDS),
    );
    drop(timer.stop());
}

criterion_group!(benches, sparse_wheel, heap, wheel);
criterion_main!(benches);
