//! Clocks: where every deadline in tickless reads the time.
//!
//! Nothing in tickless calls `Instant::now()` directly; it asks a [`Clock`].
//! [`SystemClock`] is the monotonic clock of the OS. [`ManualClock`] only moves
//! when a test calls [`ManualClock::advance`], and it tells the timers built on
//! it, so a timeout of five seconds can be tested in microseconds: the timer
//! fires on the thread that advances the clock, exactly when the clock passes
//! the deadline, with no tick of slack.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// A source of monotonic time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Instant;

    /// This clock as a [`ManualClock`], if it is one.
    ///
    /// Timers use it to be told of advances instead of sleeping in real time.
    fn as_manual(&self) -> Option<&ManualClock> {
        None
    }
}

/// A clock shared by the timers and loops of one client.
pub type SharedClock = Arc<dyn Clock>;

/// The operating system's monotonic clock (`CLOCK_MONOTONIC` on Linux).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A listener told of every advance of a [`ManualClock`], with the new time.
pub type AdvanceListener = dyn Fn(Instant) + Send + Sync;

/// A clock that moves only when told to.
///
/// It starts at the real instant of its creation and stays there until
/// [`advance`](ManualClock::advance). Clones share the same time.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tickless_timer::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now() - start, Duration::from_secs(5));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Inner>,
}

struct Inner {
    start: Instant,
    state: Mutex<State>,
    advanced: Condvar,
}

struct State {
    elapsed: Duration,
    listeners: Vec<Weak<AdvanceListener>>,
}

impl ManualClock {
    /// A clock standing still at the current real instant.
    pub fn new() -> Self {
        ManualClock {
            inner: Arc::new(Inner {
                start: Instant::now(),
                state: Mutex::new(State {
                    elapsed: Duration::ZERO,
                    listeners: Vec::new(),
                }),
                advanced: Condvar::new(),
            }),
        }
    }

    /// Whether `other` is this clock (a clone of it), not merely one that
    /// reads the same.
    pub fn is(&self, other: &ManualClock) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Moves the clock forward by `by`, then, on this thread, tells every
    /// listener (the timers built on this clock fire what is now due) and wakes
    /// every [`sleep`](ManualClock::sleep) that is over.
    ///
    /// # Panics
    ///
    /// If the clock would pass the last `Instant` there is; it is left as it
    /// was, so the threads reading it go on.
    pub fn advance(&self, by: Duration) {
        let (now, listeners) = {
            let mut state = self.lock();
            let elapsed = (state.elapsed.checked_add(by))
                .filter(|&elapsed| self.inner.start.checked_add(elapsed).is_some())
                .expect("ManualClock advanced past the last Instant");
            state.elapsed = elapsed;
            state.listeners.retain(|l| l.strong_count() > 0);
            let listeners: Vec<_> = state.listeners.iter().filter_map(Weak::upgrade).collect();
            (self.inner.start + state.elapsed, listeners)
        };
        self.inner.advanced.notify_all();
        for listener in listeners {
            listener(now);
        }
    }

    /// Blocks the calling thread until the clock has been advanced by at
    /// least `duration` from now: a slow dependency, written against the
    /// test's clock. A `duration` that reaches past the last `Instant`
    /// there is (`Duration::MAX`: a dependency that never answers) lasts
    /// until the clock reads that last `Instant`, which it can reach but
    /// not pass.
    pub fn sleep(&self, duration: Duration) {
        let now = self.now();
        self.sleep_until(
            now.checked_add(duration)
                .unwrap_or_else(|| last_instant(now)),
        );
    }

    /// Blocks the calling thread until the clock reads `deadline` or later.
    pub fn sleep_until(&self, deadline: Instant) {
        let mut state = self.lock();
        while self.inner.start + state.elapsed < deadline {
            state = self
                .inner
                .advanced
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Registers a listener called after each advance, on the advancing
    /// thread, with the new time. It is dropped once `listener` has no strong
    /// reference left, so a timer that goes away needs no unsubscribe.
    pub fn on_advance(&self, listener: Weak<AdvanceListener>) {
        self.lock().listeners.push(listener);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A listener that panicked must not make the clock unusable.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.inner.start + self.lock().elapsed
    }

    fn as_manual(&self) -> Option<&ManualClock> {
        Some(self)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &self.lock().elapsed)
            .finish()
    }
}

/// The latest `Instant` there is (from `base` on: the platform does not
/// say, so it is searched for, some hundred `checked_add`s).
pub(crate) fn last_instant(base: Instant) -> Instant {
    /// The largest `n` (up to `max`) for which `fits(n)`, given `fits(0)`.
    fn largest(max: u64, fits: impl Fn(u64) -> bool) -> u64 {
        let (mut low, mut high) = (0, max);
        while low < high {
            let mid = low + (high - low).div_ceil(2);
            if fits(mid) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        low
    }
    let secs = largest(u64::MAX, |s| {
        base.checked_add(Duration::from_secs(s)).is_some()
    });
    let base = base + Duration::from_secs(secs);
    let nanos = largest(999_999_999, |ns| {
        base.checked_add(Duration::from_nanos(ns)).is_some()
    });
    base + Duration::from_nanos(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn advancing_past_the_end_of_time_panics_and_leaves_the_clock_as_it_was() {
        let clock = ManualClock::new();
        let before = clock.now();
        let advanced = std::panic::catch_unwind(|| clock.advance(Duration::MAX));
        assert!(advanced.is_err(), "advanced past the last Instant");
        assert_eq!(clock.now(), before);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), before + Duration::from_secs(1));
    }

    #[test]
    fn sleep_returns_once_advanced_past() {
        let clock = ManualClock::new();
        let woke = Arc::new(AtomicUsize::new(0));
        let deadline = clock.now() + Duration::from_secs(5);
        let sleeper = {
            let (clock, woke) = (clock.clone(), woke.clone());
            std::thread::spawn(move || {
                clock.sleep_until(deadline);
                woke.fetch_add(1, Ordering::SeqCst);
            })
        };
        clock.advance(Duration::from_secs(4));
        // Give a wrongly woken sleeper time to show itself; a correct one stays put.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(woke.load(Ordering::SeqCst), 0, "woke before its deadline");
        clock.advance(Duration::from_secs(1));
        sleeper.join().unwrap();
        assert_eq!(woke.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_sleep_past_the_end_of_time_lasts_until_the_clock_reaches_it() {
        // A dependency that never answers, written against the test's
        // clock: no overflow panic, and still woken by the last advance
        // the clock can make.
        let clock = ManualClock::new();
        let (started, on_start) = std::sync::mpsc::channel();
        let sleeper = {
            let clock = clock.clone();
            std::thread::spawn(move || {
                started.send(()).unwrap();
                clock.sleep(Duration::MAX)
            })
        };
        // Its sleep reads the clock before or after this advance: either
        // way it lasts until the end of time, not one advance (had both
        // advances come before it read the clock, it would end at once,
        // and this would not show the last advance waking it).
        on_start.recv().unwrap();
        clock.advance(Duration::from_secs(3600));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!sleeper.is_finished(), "woke before the end of time");
        let end = last_instant(clock.now());
        clock.advance(end - clock.now());
        sleeper.join().expect("the sleep panicked");
    }

    #[test]
    fn listeners_are_told_and_dropped_with_their_owner() {
        let clock = ManualClock::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let listener: Arc<AdvanceListener> = {
            let calls = calls.clone();
            Arc::new(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
            })
        };
        clock.on_advance(Arc::downgrade(&listener));
        clock.advance(Duration::from_millis(1));
        drop(listener);
        clock.advance(Duration::from_millis(1));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
