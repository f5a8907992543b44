//! Clocks and timers for tickless: no sockets here, and no thread but the wheel's.
//!
//! * [`Clock`]: where every deadline reads the time. [`SystemClock`] is the
//!   OS's monotonic clock; [`ManualClock`] moves only when a test says so,
//!   and the timers below fire on the thread that advances it.
//! * [`DeadlineHeap`]: the deadlines of one thread (an event loop), nearest
//!   first, O(log n) arm and cancel, no allocation once warm;
//!   [`CountedHeap`] keeps [`TimerCounters`] beside it.
//! * [`HashedWheelTimer`]: one thread for a whole client; O(1) arm and cancel
//!   from any thread, at the price of rounding every deadline up to a tick.
//! * [`PreciseWait`]: wakes an event loop at its heap's nearest deadline,
//!   with a timerfd on Linux.
//!
//! # The contract every timer here keeps
//!
//! * **Never early**: nothing fires before the clock reads its deadline.
//! * **Bounded lateness**: the wheel about one tick late at most (plus the
//!   time earlier tasks of the same tick take); the heap only as late as its
//!   owner's wake-up.
//! * **Cancellation is silent**: a cancelled entry never runs, and its task
//!   is dropped at once.
//! * **Testable without sleeping**: on a [`ManualClock`], an entry fires
//!   when the clock passes its deadline, on the advancing thread.
#![deny(missing_docs)]

mod clock;
mod counted;
mod heap;
mod precise;
mod stats;
mod sys;
#[cfg(test)]
mod test_util;
mod wheel;

pub use clock::{AdvanceListener, Clock, ManualClock, SharedClock, SystemClock};
pub use counted::CountedHeap;
pub use heap::{DeadlineHeap, HeapHandle};
pub use precise::PreciseWait;
pub use stats::{LagHistogram, LagSnapshot, TimerCounters, TimerStats, LAG_BUCKETS};
pub use wheel::{
    Executor, HashedWheelTimer, TimerStopped, TimerTask, WheelBuilder, WheelTask, WheelTimeout,
    DEFAULT_TICK, DEFAULT_WHEEL_SIZE, MAX_TICK, MAX_WHEEL_SIZE,
};
