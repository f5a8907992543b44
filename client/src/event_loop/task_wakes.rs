//! Task wake-ups a loop's driver makes while its sources run, held until
//! they have run.
//!
//! One read can bring a whole response — head, body and end — and each
//! part wakes the task awaiting it: the head the task awaiting the
//! `ResponseFuture`, the end the same task, now reading the body, if it
//! polled in between. Woken at once, a task on another thread (a tokio
//! worker) runs while the loop is still reading, finds the head, polls the
//! body, parks — and is woken again for the end: two cross-thread wake-ups
//! for one response, and the woken thread often takes the loop's CPU
//! meanwhile. So a driver holds the wake-ups its sources make until they
//! have run — all the sources a poll's events reach, or the one it runs
//! otherwise (a task, a timer) — and then wakes each waker once
//! ([`Waker::will_wake`]): the tasks run with their whole responses in
//! place, as tokio's own tasks run after its driver has handed out a
//! poll's events. A poll whose sources read a lot releases what it has
//! held for a while (`MAX_HOLD`, between two events: see
//! [`PollHold`]), so that a task answered first does not wait for
//! all the reads. A timeout's expiry is never held (see [`unheld`]): its
//! waiter learns of it as soon as it is due.
//!
//! Whether its sources woke tasks is also what tells a loop's thread that
//! their next requests may be close (see `EventLoop::poll`).
//!
//! Only a loop's driver runs sources, so holding is per thread; a wake-up
//! made anywhere else (the wheel, a canceller) is made at once.

use std::cell::RefCell;
use std::task::Waker;
use std::time::{Duration, Instant};

struct Held {
    /// Holds under way on this thread (a source's call within a poll's).
    depth: u32,
    /// Wakers to wake when the outermost hold ends, each once.
    wakers: Vec<Waker>,
    /// What `wakers` are aged from: set by the first check that finds
    /// them held ([`PollHold`]), not per wake-up — and never for a hold
    /// that ends before a check.
    since: Option<Instant>,
    /// A task was woken from a hold since the loop last asked
    /// ([`take_woke_tasks`]).
    woke: bool,
}

impl Held {
    /// The wakers held so far, to wake.
    fn take(&mut self) -> Vec<Waker> {
        self.since = None;
        std::mem::take(&mut self.wakers)
    }
}

/// How many of the last held wakers a new one is compared with.
const RECENT: usize = 4;

/// A kept list of wakers longer than this is let go after its hold.
const KEPT_WAKERS: usize = 1024;

thread_local! {
    static HELD: RefCell<Held> = const {
        RefCell::new(Held {
            depth: 0,
            wakers: Vec::new(),
            since: None,
            woke: false,
        })
    };
}

/// Wakes `waker`, a task's that awaits an exchange's news: when the hold
/// under way on this thread ends, if there is one, else now — also on a
/// thread whose hold state has gone (a thread-local's destructor, as the
/// thread exits, delivering the news: the last `Client` kept in one
/// closing), where no hold can be under way.
pub(crate) fn wake_task(waker: Waker) {
    let mut now = Some(waker);
    // A waker held already, dropped after the borrow.
    let mut again = None;
    // An error: this thread's hold state has gone with its exit, and
    // nothing can be held.
    let _ = HELD.try_with(|held| {
        let mut held = held.borrow_mut();
        if held.depth == 0 {
            return;
        }
        held.woke = true;
        let waker = now.take().expect("taken once");
        // A task woken twice in a hold is woken twice in a row (a head,
        // then its body's end): looking at the last few keeps a hold of
        // thousands of tasks (an HTTP/2 read ending as many streams)
        // linear.
        if held
            .wakers
            .iter()
            .rev()
            .take(RECENT)
            .any(|w| w.will_wake(&waker))
        {
            again = Some(waker);
        } else {
            held.wakers.push(waker);
        }
    });
    drop(again);
    if let Some(waker) = now {
        waker.wake();
    }
}

/// Runs `f`, holding the task wake-ups made meanwhile until it returns —
/// or unwinds.
pub(super) fn holding<R>(f: impl FnOnce() -> R) -> R {
    /// Ends a hold: the outermost wakes what was held.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            let wakers = HELD.with(|held| {
                let mut held = held.borrow_mut();
                held.depth -= 1;
                let flush = held.depth == 0 && !held.wakers.is_empty();
                flush.then(|| held.take())
            });
            if let Some(wakers) = wakers {
                wake_all(wakers);
            }
        }
    }
    HELD.with(|held| held.borrow_mut().depth += 1);
    let _release = Release;
    f()
}

/// Runs `f` with no hold: its wake-ups are made at once, and so are those
/// held so far (they would otherwise be woken after `f`'s, and later).
pub(super) fn unheld<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the hold back.
    struct Rehold(u32);
    impl Drop for Rehold {
        fn drop(&mut self) {
            HELD.with(|held| held.borrow_mut().depth = self.0);
        }
    }
    let (depth, wakers) = HELD.with(|held| {
        let mut held = held.borrow_mut();
        let depth = std::mem::take(&mut held.depth);
        (depth, held.take())
    });
    let _rehold = Rehold(depth);
    if !wakers.is_empty() {
        wake_all(wakers);
    }
    f()
}

/// Wakes `wakers` with no borrow of [`HELD`] (a waker may run its task
/// here, which may wake others), then keeps the emptied list for the
/// next hold.
///
/// A waker is its executor's code, and may panic: that panic stays here,
/// as one in a source's call or a timeout's expiry does. Let through, it
/// would leave the tasks after it unwoken and, out of a poll's hold, end
/// the loop's thread.
fn wake_all(mut wakers: Vec<Waker>) {
    for waker in wakers.drain(..) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| waker.wake()));
    }
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.wakers.capacity() == 0 && wakers.capacity() <= KEPT_WAKERS {
            held.wakers = wakers;
        }
    });
}

/// The checks of one poll's hold ([`release_held_for`]), made by the
/// dispatch of its events: after each event but the last — after which the
/// hold ends and wakes everything anyway — or after every event when the
/// hold is nested in another on this thread (a listener blocked on an
/// exchange of another loop, driving it), which the dispatch's end does
/// not end.
///
/// What is held is aged from a reading taken before the poll's first
/// source call, and only if a check is to come: a poll of one event, in a
/// hold of its own, reads no clock for it.
pub(super) struct PollHold {
    /// When the dispatch began, if it checks at all.
    started: Option<Instant>,
    /// Whether it checks after its last event too (a nested hold).
    after_last: bool,
    max: Duration,
}

impl PollHold {
    /// The checks of a dispatch of `events` events, within the hold under
    /// way on this thread, releasing what has been held for `max`;
    /// `polled_at`: the clock as the turn read it just after its poll, if
    /// it did (the dispatch's start then, with no read of its own).
    pub(super) fn new(events: usize, max: Duration, polled_at: Option<Instant>) -> PollHold {
        let after_last = HELD.with(|held| held.borrow().depth > 1);
        let checks = after_last || events > 1;
        PollHold {
            started: checks.then(|| polled_at.unwrap_or_else(Instant::now)),
            after_last,
            max,
        }
    }

    /// An event's source call has returned; `last`: it was the poll's
    /// last event.
    pub(super) fn after_event(&self, last: bool) {
        if let Some(started) = self.started.filter(|_| !last || self.after_last) {
            release_held_for(self.max, started);
        }
    }
}

/// Within a hold, wakes what it has held for `max` or longer — a poll
/// whose sources read a lot (a budget each) would otherwise keep the
/// first task it answered waiting for all of them. What is held is aged
/// from the first check that found it held, as of `started` (a reading
/// taken before the source calls that may have held it); the clock is
/// read only while something is held.
fn release_held_for(max: Duration, started: Instant) {
    let wakers = HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.wakers.is_empty() {
            return None;
        }
        let since = *held.since.get_or_insert(started);
        (since.elapsed() >= max).then(|| held.take())
    });
    if let Some(wakers) = wakers {
        wake_all(wakers);
    }
}

/// Whether tasks were woken from holds on this thread since it last asked.
pub(super) fn take_woke_tasks() -> bool {
    HELD.with(|held| std::mem::take(&mut held.borrow_mut().woke))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::task::Wake;
    use std::time::Duration;

    /// A waker that counts its wake-ups.
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Counting>, Waker) {
        let count = Arc::new(Counting(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    fn woken(count: &Counting) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    #[test]
    fn a_hold_wakes_each_task_once_when_it_ends_and_none_before() {
        let (a, waker_a) = counting();
        let (b, waker_b) = counting();
        holding(|| {
            wake_task(waker_a.clone());
            holding(|| wake_task(waker_b.clone()));
            // The inner hold ended within the outer: nothing yet.
            wake_task(waker_a.clone());
            assert_eq!((woken(&a), woken(&b)), (0, 0));
        });
        assert_eq!((woken(&a), woken(&b)), (1, 1));
        assert!(take_woke_tasks());
        assert!(!take_woke_tasks());
    }

    #[test]
    fn outside_a_hold_and_within_unheld_a_task_is_woken_at_once() {
        let (a, waker_a) = counting();
        let (b, waker_b) = counting();
        wake_task(waker_a.clone());
        assert_eq!(woken(&a), 1);
        assert!(!take_woke_tasks());
        holding(|| {
            wake_task(waker_a.clone());
            unheld(|| {
                // What was held goes first, then the expiry's at once.
                assert_eq!(woken(&a), 2);
                wake_task(waker_b.clone());
                assert_eq!(woken(&b), 1);
            });
            // The hold is back.
            wake_task(waker_b.clone());
            assert_eq!(woken(&b), 1);
        });
        assert_eq!((woken(&a), woken(&b)), (2, 2));
    }

    /// Review of 333aa4e, defect 2: a waker that panics neither ends the
    /// hold's caller (a loop's turn) nor keeps the tasks after it from
    /// waking.
    #[test]
    fn a_waker_that_panics_leaves_the_others_woken_and_the_hold_returning() {
        struct Panics;
        impl Wake for Panics {
            fn wake(self: Arc<Self>) {
                panic!("a task's waker panics");
            }
        }
        let (b, waker_b) = counting();
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            holding(|| {
                wake_task(Waker::from(Arc::new(Panics)));
                wake_task(waker_b.clone());
            })
        }));
        assert!(ended.is_ok(), "the waker's panic came out of the hold");
        assert_eq!(
            woken(&b),
            1,
            "a task after the panicking one was never woken"
        );
    }

    /// Review of 333aa4e, defect 3: a thread-local's destructor that
    /// delivers news (the last `Client` kept in one, closing) on a thread
    /// that has held wake-ups before, whose hold state its exit has dropped
    /// already: the task is woken, and nothing panics (a panic in a
    /// thread-local's destructor aborts the process).
    #[test]
    fn a_task_is_woken_from_a_thread_locals_destructor_after_the_holds_went() {
        struct WakesOnDrop(Option<(Waker, mpsc::Sender<bool>)>);
        impl Drop for WakesOnDrop {
            fn drop(&mut self) {
                if let Some((waker, panicked)) = self.0.take() {
                    let woke = std::panic::catch_unwind(|| wake_task(waker));
                    let _ = panicked.send(woke.is_err());
                }
            }
        }
        thread_local! {
            static LAST: RefCell<WakesOnDrop> = const { RefCell::new(WakesOnDrop(None)) };
        }
        let (a, waker_a) = counting();
        let (panicked, on_panicked) = mpsc::channel();
        std::thread::spawn(move || {
            // Made before the hold state, so dropped after it.
            LAST.with(|last| last.borrow_mut().0 = Some((waker_a, panicked)));
            holding(|| ());
        })
        .join()
        .unwrap();
        let panicked = on_panicked.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            !panicked,
            "waking a task panicked in a thread-local's destructor"
        );
        assert_eq!(woken(&a), 1);
    }

    #[test]
    fn a_hold_releases_what_it_has_held_for_long_enough_and_keeps_holding() {
        let (a, waker_a) = counting();
        let (b, waker_b) = counting();
        holding(|| {
            wake_task(waker_a.clone());
            PollHold::new(3, Duration::from_secs(3600), None).after_event(false);
            assert_eq!(woken(&a), 0, "released before its time");
            PollHold::new(3, Duration::ZERO, None).after_event(false);
            assert_eq!(woken(&a), 1);
            // Still a hold: what comes next waits for its end.
            wake_task(waker_b.clone());
            PollHold::new(3, Duration::from_secs(3600), None).after_event(false);
            assert_eq!(woken(&b), 0);
        });
        assert_eq!((woken(&a), woken(&b)), (1, 1));
    }

    #[test]
    fn a_poll_in_a_hold_of_its_own_does_not_check_after_its_last_event() {
        let (a, waker_a) = counting();
        holding(|| {
            let hold = PollHold::new(1, Duration::ZERO, None);
            wake_task(waker_a.clone());
            hold.after_event(true);
            // The hold's end wakes it.
            assert_eq!(woken(&a), 0);
        });
        assert_eq!(woken(&a), 1);
    }

    #[test]
    fn a_poll_in_a_nested_hold_checks_after_its_last_event_too() {
        // A listener blocked on another loop's exchange drives that loop
        // inside the hold of the source that called it: the inner poll's
        // end is not the hold's, which may last as long as the wait.
        let (a, waker_a) = counting();
        holding(|| {
            holding(|| {
                let hold = PollHold::new(1, Duration::ZERO, None);
                wake_task(waker_a.clone());
                hold.after_event(true);
                assert_eq!(woken(&a), 1, "held past the inner poll");
            });
        });
        assert_eq!(woken(&a), 1);
    }

    #[test]
    fn a_hold_of_thousands_wakes_each_and_keeps_no_long_list() {
        let tasks: Vec<_> = (0..3 * KEPT_WAKERS).map(|_| counting()).collect();
        holding(|| {
            for (_, waker) in &tasks {
                wake_task(waker.clone());
                wake_task(waker.clone());
            }
        });
        assert!(tasks.iter().all(|(count, _)| woken(count) == 1));
        HELD.with(|held| assert!(held.borrow().wakers.capacity() <= KEPT_WAKERS));
    }

    #[test]
    fn a_hold_that_unwinds_still_wakes() {
        let (a, waker_a) = counting();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            holding(|| {
                wake_task(waker_a.clone());
                panic!("a source panics");
            })
        }));
        assert!(unwound.is_err());
        assert_eq!(woken(&a), 1);
        // The next hold starts from nothing held.
        holding(|| assert_eq!(woken(&a), 1));
    }
}
