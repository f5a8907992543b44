//! [`Outcome`]: how the result of an exchange reaches its caller — a waker
//! for a poll, a condition variable for a blocking wait.

use crate::event_loop::{Asleep, Drove, EventLoop};
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The panic of a future polled again after it returned its outcome.
pub(crate) const POLLED_AFTER_COMPLETION: &str = "ResponseFuture polled after it completed";
/// The panic of `wait` on a future already polled to completion.
pub(crate) const WAITED_AFTER_COMPLETION: &str =
    "ResponseFuture::wait after it completed (a poll already returned its outcome)";

struct Slot<T> {
    result: Option<T>,
    waker: Option<Waker>,
    taken: bool,
    /// A thread is blocked in `wait` (saves a futex wake when none is).
    blocked: bool,
    /// The blocked thread's count on the loop it could not drive (see
    /// `EventLoop::sleep_on`): dropped by whoever delivers, before the
    /// wake-up.
    asleep: Option<Asleep>,
    /// The loop the waiting thread drives (see [`Outcome::drive`]).
    driving: Option<Arc<EventLoop>>,
}

/// A result delivered once, by any thread, to one poller or waiter.
pub(crate) struct Outcome<T> {
    /// Set once the result is stored: what `wait` spins on, and what
    /// "the next poll is ready" means.
    settled: AtomicBool,
    /// A caller is spinning in `wait` for the result.
    spinning: AtomicBool,
    slot: Mutex<Slot<T>>,
    ready: Condvar,
}

impl<T> Default for Outcome<T> {
    fn default() -> Self {
        Outcome {
            settled: AtomicBool::new(false),
            spinning: AtomicBool::new(false),
            slot: Mutex::new(Slot {
                result: None,
                waker: None,
                taken: false,
                blocked: false,
                asleep: None,
                driving: None,
            }),
            ready: Condvar::new(),
        }
    }
}

impl<T> Outcome<T> {
    pub(crate) fn is_settled(&self) -> bool {
        self.settled.load(Ordering::SeqCst)
    }

    /// Whether the result was handed out (a poll or `wait` returned it).
    pub(crate) fn is_taken(&self) -> bool {
        lock(&self.slot).taken
    }

    /// Whether a result is stored, not yet handed out, that `test` holds for.
    pub(crate) fn holds(&self, test: impl FnOnce(&T) -> bool) -> bool {
        lock(&self.slot).result.as_ref().is_some_and(test)
    }

    /// Stores the result and wakes whoever waits for it (outside the lock),
    /// unless a result was stored already: then `result` is handed back.
    pub(crate) fn deliver(&self, result: T) -> Result<(), T> {
        let (waker, blocked, driving, asleep) = {
            let mut slot = lock(&self.slot);
            if slot.result.is_some() || slot.taken {
                return Err(result);
            }
            slot.result = Some(result);
            // Under the lock: a caller that sets `driving` after this sees
            // `settled`; one that set it before is woken below. `settled`
            // then `spinning` here, `spinning` then `settled` in `wait`,
            // all sequentially consistent: one side sees the other's store
            // (a caller spinning is never missed, so the loop leaves itself
            // idle for it).
            self.settled.store(true, Ordering::SeqCst);
            (
                slot.waker.take(),
                slot.blocked,
                slot.driving.clone(),
                slot.asleep.take(),
            )
        };
        drop(asleep);
        if blocked || self.spinning.load(Ordering::SeqCst) {
            crate::event_loop::answered_a_waiting_caller();
        }
        if let Some(event_loop) = driving {
            event_loop.wake_driver();
        }
        if blocked {
            self.ready.notify_all();
        }
        if let Some(waker) = waker {
            crate::event_loop::wake_task(waker);
        }
        Ok(())
    }

    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<T> {
        let replaced = {
            let mut slot = lock(&self.slot);
            if let Some(result) = slot.result.take() {
                slot.taken = true;
                return Poll::Ready(result);
            }
            assert!(!slot.taken, "{POLLED_AFTER_COMPLETION}");
            match &slot.waker {
                Some(waker) if waker.will_wake(cx.waker()) => None,
                _ => slot.waker.replace(cx.waker().clone()),
            }
        };
        // A waker is the caller's: its drop may come back for this lock
        // (the last `Client` in a task it owns), so it goes after the unlock.
        drop(replaced);
        Poll::Pending
    }

    /// Drives `home` until the result is there, yielding for `spin`
    /// before its polls block, if that loop is idle (see
    /// `EventLoop::drive_until`); returns at once if it is not (`None`).
    /// Else how the drive went.
    pub(crate) fn drive(&self, home: &Arc<EventLoop>, spin: Duration) -> Option<Drove> {
        if self.is_settled() {
            return None;
        }
        lock(&self.slot).driving = Some(home.clone());
        let drove = home.drive_until(&mut || self.is_settled(), || spin);
        let driving = lock(&self.slot).driving.take();
        drop(driving);
        drove
    }

    /// Blocks until the result is there, yielding for `spin` first (see
    /// [`Pacing`](super::Pacing)), counted asleep on `home`, the loop it
    /// could not drive (see `EventLoop::sleep_on`) — with none, the result
    /// may come from any of `any_of`, the client's loops. `None` if that
    /// loop is found idle before the result: the caller drives it instead.
    pub(crate) fn wait(
        &self,
        spin: Duration,
        home: Option<&Arc<EventLoop>>,
        any_of: &[Arc<EventLoop>],
    ) -> Option<T> {
        // The clock is read only to spin: not for a result there already.
        if !spin.is_zero() && !self.is_settled() {
            let spin_until = Instant::now() + spin;
            self.spinning.store(true, Ordering::SeqCst);
            while !self.is_settled() && Instant::now() < spin_until {
                std::thread::yield_now();
            }
            self.spinning.store(false, Ordering::Release);
        }
        let mut slot = lock(&self.slot);
        loop {
            if let Some(result) = slot.result.take() {
                slot.taken = true;
                return Some(result);
            }
            // Polled to completion before: nothing will ever come.
            assert!(!slot.taken, "{WAITED_AFTER_COMPLETION}");
            // Counted once per sleep (a spurious wake-up keeps its count).
            if slot.asleep.is_none() {
                if let Some(home) = home {
                    slot.asleep = Some(home.sleep_on()?);
                }
            }
            slot.blocked = true;
            slot = super::timers::wait_for_news(
                &self.slot,
                &self.ready,
                slot,
                home.map(|home| &**home),
                any_of,
            );
        }
    }
}
