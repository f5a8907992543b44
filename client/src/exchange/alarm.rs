//! [`Alarm`]: a one-shot signal a timer rings and a caller's future waits
//! for — a retry's backoff, a hedge's delay. It carries no error: ringing
//! only wakes whoever polls it, who then looks at what is due.
//!
//! An alarm is armed like an exchange's timeouts: on the heap of a loop
//! (exact, in event-loop mode) or on the wheel ([`arm`]); a hedge delay is
//! one of its exchange's named timers instead
//! ([`Exchange::arm_hedge`](super::Exchange::arm_hedge)), so that it moves
//! with the exchange onto its connection's loop. A scheduler that stops
//! with the alarm armed rings it: the waiter goes on and finds the client
//! closed, rather than waiting forever.

use super::timers::{fire_due_on_manual_clock, reached_on_manual_clock};
use crate::event_loop::{EventLoop, LoopContext, LoopTimeout, LoopTimerKey};
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use tickless_timer::{HashedWheelTimer, WheelTask, WheelTimeout};

/// A one-shot signal. See the [module documentation](self).
#[derive(Default)]
pub(crate) struct Alarm {
    rung: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Alarm {
    pub(crate) fn new() -> Arc<Alarm> {
        Arc::new(Alarm::default())
    }

    /// Rings it (again is nothing) and wakes the waiter.
    pub(crate) fn ring(&self) {
        if self.rung.swap(true, Ordering::AcqRel) {
            return;
        }
        let waker = lock(&self.waker).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Whether it has rung.
    pub(crate) fn has_rung(&self) -> bool {
        self.rung.load(Ordering::Acquire)
    }

    /// Ready once rung; otherwise `cx`'s waker is woken when it is.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.rung.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let replaced = {
            let mut waker = lock(&self.waker);
            match &*waker {
                Some(waker) if waker.will_wake(cx.waker()) => None,
                _ => waker.replace(cx.waker().clone()),
            }
        };
        // A waker is the caller's: its drop may come back for this lock
        // (the last `Client` in a task it owns rings the alarms it closes),
        // so it goes after the unlock (see `crate::sync`).
        drop(replaced);
        // Rung between the check and the store: the ringer found no waker.
        if self.rung.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl LoopTimeout for Alarm {
    fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {
        self.ring();
    }

    fn stopped(self: Arc<Self>, _tag: u64) {
        self.ring();
    }
}

impl WheelTask for Alarm {
    fn fire(self: Arc<Self>, _tag: u64) {
        self.ring();
    }

    fn stopped(self: Arc<Self>, _tag: u64) {
        self.ring();
    }
}

/// An armed alarm: disarmed when dropped.
pub(crate) enum ArmedAlarm {
    Wheel(WheelTimeout),
    Loop(Arc<EventLoop>, LoopTimerKey),
    /// Nothing could carry it (the loop and the wheel have stopped): it
    /// was rung at once.
    Rung,
}

impl ArmedAlarm {
    /// Takes its entry off the wheel or the loop now, through a shared
    /// reference (a cancel has only that); again, or once fired, it does
    /// nothing: the wheel and the loop know an entry by its sequence too.
    pub(crate) fn disarm(&self) {
        match self {
            ArmedAlarm::Wheel(timeout) => {
                timeout.cancel();
            }
            ArmedAlarm::Loop(event_loop, key) => {
                event_loop.cancel(*key);
            }
            ArmedAlarm::Rung => {}
        }
    }
}

impl Drop for ArmedAlarm {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// Arms `alarm` for `deadline` on `home`'s heap if there is one and it
/// takes it (it is not shutting down), else on the wheel; a deadline that
/// has come already rings it at once.
pub(crate) fn arm(
    alarm: &Arc<Alarm>,
    deadline: Instant,
    home: Option<&Arc<EventLoop>>,
    wheel: &HashedWheelTimer,
) -> ArmedAlarm {
    if deadline <= wheel.clock().now() {
        alarm.ring();
        return ArmedAlarm::Rung;
    }
    if let Some(home) = home {
        if let Ok(key) = home.schedule(deadline, alarm.clone(), 0) {
            return ArmedAlarm::Loop(home.clone(), key);
        }
    }
    match wheel.arm_task(deadline, alarm.clone(), 0) {
        Ok(timeout) => {
            // Looked at again now that the entry is in: an advance since
            // the look above fired nothing of it.
            if reached_on_manual_clock(wheel, deadline) {
                fire_due_on_manual_clock(wheel);
            }
            ArmedAlarm::Wheel(timeout)
        }
        Err(_stopped) => {
            alarm.ring();
            ArmedAlarm::Rung
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;
    use std::time::Duration;
    use tickless_timer::{Clock, ManualClock};

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn manual_wheel() -> (ManualClock, HashedWheelTimer) {
        let clock = ManualClock::new();
        let wheel = HashedWheelTimer::builder()
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap();
        (clock, wheel)
    }

    #[test]
    fn it_rings_at_its_deadline_on_the_wheel_and_wakes_once() {
        let (clock, wheel) = manual_wheel();
        let alarm = Alarm::new();
        let woken = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let armed = arm(&alarm, clock.now() + Duration::from_millis(5), None, &wheel);
        assert!(matches!(armed, ArmedAlarm::Wheel(_)));
        assert!(alarm.poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(4));
        assert!(alarm.poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(1));
        assert!(alarm.poll(&mut cx).is_ready());
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        alarm.ring();
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "rung once");
        wheel.stop();
    }

    #[test]
    fn a_dropped_arm_never_rings() {
        let (clock, wheel) = manual_wheel();
        let alarm = Alarm::new();
        drop(arm(
            &alarm,
            clock.now() + Duration::from_millis(5),
            None,
            &wheel,
        ));
        clock.advance(Duration::from_millis(10));
        assert!(!alarm.rung.load(Ordering::SeqCst));
        assert_eq!(wheel.stats().armed, 0);
        wheel.stop();
    }

    /// A waker whose drop comes back for the alarm: as one that drops the
    /// last reference to a task owning the last `Client`, whose close
    /// rings the alarms still armed.
    struct RingsOnDrop(Arc<Alarm>);

    impl Wake for RingsOnDrop {
        fn wake(self: Arc<Self>) {}
    }

    impl Drop for RingsOnDrop {
        fn drop(&mut self) {
            self.0.ring();
        }
    }

    #[test]
    fn a_replaced_waker_is_dropped_after_the_unlock() {
        let alarm = Alarm::new();
        {
            let first = Waker::from(Arc::new(RingsOnDrop(alarm.clone())));
            assert!(alarm.poll(&mut Context::from_waker(&first)).is_pending());
        }
        // The alarm holds the last clone of `first`: polling with another
        // waker drops it, and its drop rings the alarm.
        let (polled, on_polled) = std::sync::mpsc::channel();
        let poller = alarm.clone();
        std::thread::spawn(move || {
            let second = Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))));
            let ready = poller.poll(&mut Context::from_waker(&second)).is_ready();
            polled.send(ready).unwrap();
        });
        let ready = on_polled
            .recv_timeout(Duration::from_secs(10))
            .expect("the poll deadlocked: the replaced waker was dropped under the lock");
        assert!(ready, "rung by the drop, and the poll saw it");
    }

    /// A manual clock that advances by `by` when next read, as if another
    /// thread advanced it just after: what the read saw has already gone.
    #[derive(Debug)]
    struct AdvancedAfterNextRead {
        clock: ManualClock,
        by: Duration,
        armed: AtomicBool,
    }

    impl Clock for AdvancedAfterNextRead {
        fn now(&self) -> Instant {
            let now = self.clock.now();
            if self.armed.swap(false, Ordering::SeqCst) {
                self.clock.advance(self.by);
            }
            now
        }

        fn as_manual(&self) -> Option<&ManualClock> {
            Some(&self.clock)
        }
    }

    #[test]
    fn a_deadline_the_clock_passes_while_it_is_armed_still_rings() {
        // The clock read says "not yet", and is advanced past the deadline
        // before the entry is on the wheel: that advance fired nothing, and
        // no other may come (a test's last, a caller waiting on it).
        let clock = Arc::new(AdvancedAfterNextRead {
            clock: ManualClock::new(),
            by: Duration::from_millis(10),
            armed: AtomicBool::new(false),
        });
        let wheel = HashedWheelTimer::builder()
            .clock(clock.clone())
            .build()
            .unwrap();
        let alarm = Alarm::new();
        let deadline = clock.clock.now() + Duration::from_millis(5);
        clock.armed.store(true, Ordering::SeqCst);
        let armed = arm(&alarm, deadline, None, &wheel);
        assert!(
            clock.clock.now() > deadline,
            "the clock passed the deadline"
        );
        assert!(alarm.has_rung(), "armed past its deadline, never rung");
        drop(armed);
        wheel.stop();
    }

    #[test]
    fn a_deadline_that_has_come_rings_at_once() {
        let (clock, wheel) = manual_wheel();
        let alarm = Alarm::new();
        let armed = arm(&alarm, clock.now(), None, &wheel);
        assert!(matches!(armed, ArmedAlarm::Rung));
        assert!(alarm.rung.load(Ordering::SeqCst));
        wheel.stop();
    }
}
