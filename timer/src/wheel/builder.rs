//! [`WheelBuilder`]: a wheel's tick, size, clock, executor and thread.

use super::occupancy::Occupancy;
use super::{
    Bucket, Core, Executor, HashedWheelTimer, Owner, Shared, DEFAULT_TICK, DEFAULT_WHEEL_SIZE,
    MAX_TICK, MAX_WHEEL_SIZE,
};
use crate::clock::{AdvanceListener, SharedClock, SystemClock};
use crate::stats::TimerCounters;
use slab::Slab;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

/// Builds a [`HashedWheelTimer`].
pub struct WheelBuilder {
    tick: Duration,
    pub(super) wheel_size: usize,
    clock: SharedClock,
    executor: Option<Executor>,
    thread_name: String,
}

impl WheelBuilder {
    /// The defaults: 100 ms ticks, 512 buckets, the system clock.
    pub(super) fn new() -> Self {
        WheelBuilder {
            tick: DEFAULT_TICK,
            wheel_size: DEFAULT_WHEEL_SIZE,
            clock: Arc::new(SystemClock),
            executor: None,
            thread_name: "tickless-wheel".to_owned(),
        }
    }

    /// Length of one tick (default [`DEFAULT_TICK`]), from 1 µs to
    /// [`MAX_TICK`]; a value outside is clamped.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick.clamp(Duration::from_micros(1), MAX_TICK);
        self
    }

    /// Number of buckets (default [`DEFAULT_WHEEL_SIZE`]), rounded up to a
    /// power of two, at most [`MAX_WHEEL_SIZE`].
    pub fn wheel_size(mut self, size: usize) -> Self {
        self.wheel_size = size.clamp(1, MAX_WHEEL_SIZE).next_power_of_two();
        self
    }

    /// The clock (default [`SystemClock`]). With a [`ManualClock`] no thread
    /// is started and entries fire on the thread that advances the clock.
    ///
    /// [`ManualClock`]: crate::ManualClock
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Runs fired tasks on `executor` instead of inline on the wheel's
    /// thread. A panic out of it (the executor's own, or a task's it ran
    /// inline) is caught there, as a task's is without one: the wheel and
    /// the other entries due go on.
    pub fn executor(mut self, executor: Executor) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Name of the worker thread (default `tickless-wheel`).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Starts the timer.
    pub fn build(self) -> io::Result<HashedWheelTimer> {
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                start: self.clock.now(),
                slots: Slab::new(),
                buckets: vec![Bucket::EMPTY; self.wheel_size].into_boxed_slice(),
                occupancy: Occupancy::new(self.wheel_size),
                first_open_tick: 0,
                next_sequence: 0,
                stopped: false,
                worker_wakes_at: u64::MAX,
                last_arm: None,
            }),
            tick: self.tick,
            clock: self.clock,
            executor: self.executor,
            counters: TimerCounters::default(),
            worker: Mutex::new(None),
            worker_thread: OnceLock::new(),
            worker_wakeups: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            advance_listener: OnceLock::new(),
        });
        if let Some(manual) = shared.clock.as_manual() {
            let weak = Arc::downgrade(&shared);
            let listener: Arc<AdvanceListener> = Arc::new(move |now| {
                if let Some(shared) = weak.upgrade() {
                    shared.expire(now);
                }
            });
            manual.on_advance(Arc::downgrade(&listener));
            let _ = shared.advance_listener.set(listener);
        } else {
            let worker_shared = shared.clone();
            let handle = thread::Builder::new()
                .name(self.thread_name)
                .spawn(move || worker_shared.run_worker())?;
            let _ = shared.worker_thread.set(handle.thread().clone());
            *shared.lock_worker() = Some(handle);
        }
        Ok(HashedWheelTimer {
            owner: Arc::new(Owner { shared }),
        })
    }
}
