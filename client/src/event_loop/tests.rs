//! One loop at a time: tasks, expiries, shutdown, and the order of aborts.

use super::*;
use crate::sync::lock;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use AtomicUsize;

/// A group of one loop with an idle grace of `grace`, and that loop. The
/// group is kept (`_group`, not `_`): dropped, it shuts the loop down.
fn one_loop(grace: Duration) -> (EventLoopGroup, Arc<EventLoop>) {
    let group = EventLoopGroup::builder()
        .threads(1)
        .idle_grace(grace)
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    (group, event_loop)
}

/// Tasks posted while the loop works through a long queue (and polls
/// without blocking between batches) must all run: a poll consumes the
/// wake-up of tasks posted meanwhile, so the loop may not leave any in
/// its inbox and then block.
#[test]
fn every_task_posted_during_a_burst_runs() {
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let posters: Vec<_> = (0..2)
        .map(|_| {
            let (event_loop, ran) = (event_loop.clone(), ran.clone());
            thread::spawn(move || {
                for _ in 0..5_000 {
                    let ran = ran.clone();
                    event_loop
                        .execute(move |_| {
                            ran.fetch_add(1, Ordering::Relaxed);
                            // Long enough that the queue builds up.
                            std::hint::black_box((0..200).sum::<u64>());
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for poster in posters {
        poster.join().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while ran.load(Ordering::Relaxed) < 10_000 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        ran.load(Ordering::Relaxed),
        10_000,
        "tasks left in the inbox"
    );
    group.shutdown();
}

/// A burst of tasks (here 100 000, all in the inbox at once) grows the
/// loop's two task queues, the inbox and the turn's, to hold it: about 2 MB
/// each. Once they are empty again they give that room back, down to
/// what steady traffic needs, rather than keep it for the loop's life.
#[test]
fn a_burst_of_tasks_leaves_no_burst_of_room_behind() {
    const BURST: usize = 100_000;
    let (_group, event_loop) = one_loop(Duration::from_secs(60));
    let ran = Arc::new(AtomicUsize::new(0));
    // The loop waits in a task while the burst is posted, so that the
    // whole burst is in its inbox when it takes it.
    let (posted, all_posted) = mpsc::channel::<()>();
    event_loop
        .execute(move |_| {
            let _ = all_posted.recv_timeout(Duration::from_secs(30));
        })
        .unwrap();
    for _ in 0..BURST {
        let ran = ran.clone();
        event_loop
            .execute(move |_| {
                ran.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
    }
    drop(posted);
    let give_up = Instant::now() + Duration::from_secs(30);
    while ran.load(Ordering::Relaxed) < BURST {
        assert!(Instant::now() < give_up, "the burst never ran");
        thread::sleep(Duration::from_millis(1));
    }
    // A task after the burst, then the loop left idle: its turn state is
    // free to look at.
    event_loop.leave_idle();
    let slots = event_loop.task_queue_slots();
    assert!(
        slots
            .iter()
            .all(|&slots| slots <= turn::TASK_SLOTS_KEPT_AT_MOST),
        "{slots:?} slots kept after a burst of {BURST} tasks"
    );
}

#[test]
fn a_loop_expires_on_its_own_thread_never_early() {
    // Sleeping until the deadline, busy-polling the last 10 ms, and
    // busy-polling always (a spin no deadline is further away than).
    for spin in [Duration::ZERO, Duration::from_millis(10), Duration::MAX] {
        expires_on_its_own_thread_never_early(spin);
    }
}

/// The same where the OS timer is missing (not Linux, or a timerfd that
/// could not be made): the poll's own timeout carries the deadline.
#[test]
fn a_loop_without_a_precise_wait_expires_never_early() {
    turn::WITHOUT_PRECISE_WAIT.with(|without| without.set(true));
    for spin in [Duration::ZERO, Duration::from_millis(10), Duration::MAX] {
        expires_on_its_own_thread_never_early(spin);
    }
}

/// Where the OS timer is missing, a caller driving the loop whose spin
/// ends before the nearest deadline waits from the spin's end: the poll's
/// relative timeout is worked out after the spin. Worked out before it,
/// the wait came late by at least the whole spin (200 ms here): the bound,
/// 10 ms under it, leaves a loaded machine all the rest.
#[test]
fn without_a_precise_wait_a_callers_spin_does_not_delay_the_deadline_after_it() {
    struct Fired(Mutex<Option<Instant>>);
    impl LoopTimeout for Fired {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {
            *lock(&self.0) = Some(Instant::now());
        }
    }
    const SPIN: Duration = Duration::from_millis(200);
    turn::WITHOUT_PRECISE_WAIT.with(|without| without.set(true));
    let (_group, event_loop) = one_loop(Duration::from_secs(60));
    event_loop.leave_idle();
    let fired = Arc::new(Fired(Mutex::new(None)));
    let deadline = Instant::now() + Duration::from_millis(300);
    event_loop.schedule(deadline, fired.clone(), 0).unwrap();
    let drove = event_loop.drive_until(&mut || lock(&fired.0).is_some(), || SPIN);
    assert!(drove.is_some(), "the loop was not left to this caller");
    let at = lock(&fired.0).expect("the caller drove until the expiry");
    assert!(at >= deadline, "fired early");
    assert!(
        at < deadline + SPIN - Duration::from_millis(10),
        "fired {:?} after its deadline",
        at - deadline
    );
}

fn expires_on_its_own_thread_never_early(spin: Duration) {
    struct Record(Mutex<Vec<(Instant, ThreadId)>>);
    impl LoopTimeout for Record {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {
            lock(&self.0).push((Instant::now(), thread::current().id()));
        }
    }
    let group = EventLoopGroup::builder()
        .threads(1)
        .spin_before_deadline(spin)
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    let record = Arc::new(Record(Mutex::new(Vec::new())));
    let deadline = Instant::now() + Duration::from_millis(20);
    event_loop.schedule(deadline, record.clone(), 0).unwrap();
    let cancelled = event_loop.schedule(deadline, record.clone(), 1).unwrap();
    assert!(event_loop.cancel(cancelled));
    let give_up = Instant::now() + Duration::from_secs(10);
    while lock(&record.0).is_empty() && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
    let fired = lock(&record.0).clone();
    assert_eq!(fired.len(), 1, "the cancelled entry fired, or none did");
    assert!(fired[0].0 >= deadline, "fired early");
    assert_eq!(fired[0].1, event_loop.thread_id());
    assert_eq!(event_loop.stats().armed, 0);
    group.shutdown();
    assert_eq!(
        event_loop.schedule(deadline, record, 0).unwrap_err(),
        Rejected
    );
}

/// #18, defect 4: a task `execute` accepted runs, however shutdown races it.
#[test]
fn every_task_execute_accepts_runs_even_as_the_loop_shuts_down() {
    for _ in 0..50 {
        let group = EventLoopGroup::builder().threads(1).build().unwrap();
        let event_loop = group.loops()[0].clone();
        let ran = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let posters: Vec<_> = (0..2)
            .map(|_| {
                let (event_loop, ran, accepted) =
                    (event_loop.clone(), ran.clone(), accepted.clone());
                thread::spawn(move || loop {
                    let ran = ran.clone();
                    match event_loop.execute(move |_| {
                        ran.fetch_add(1, Ordering::SeqCst);
                    }) {
                        Ok(()) => accepted.fetch_add(1, Ordering::SeqCst),
                        Err(Rejected) => return,
                    };
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(2));
        group.shutdown();
        for poster in posters {
            poster.join().unwrap();
        }
        // Joined: the loop's thread has exited, after every accepted task.
        assert_eq!(
            ran.load(Ordering::SeqCst),
            accepted.load(Ordering::SeqCst),
            "a task accepted never ran"
        );
    }
}

/// #10, defect 5: what the heap still holds at shutdown is handed back
/// outside the timers lock: a timeout whose `stopped` arms again on the
/// same loop (as an exchange failing back to the wheel does) would
/// otherwise deadlock the loop's thread on its own lock.
#[test]
fn leftover_timeouts_are_told_stopped_outside_the_timers_lock() {
    struct ArmsAgain {
        event_loop: Mutex<Option<Arc<EventLoop>>>,
        told: mpsc::Sender<bool>,
    }
    impl LoopTimeout for ArmsAgain {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {}
        fn stopped(self: Arc<Self>, _tag: u64) {
            let event_loop = lock(&self.event_loop).take().unwrap();
            let rearmed = event_loop.schedule(Instant::now(), self.clone(), 1);
            let _ = self.told.send(rearmed.is_err());
        }
    }
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    let (told, on_told) = mpsc::channel();
    let timeout = Arc::new(ArmsAgain {
        event_loop: Mutex::new(Some(event_loop.clone())),
        told,
    });
    event_loop
        .schedule(Instant::now() + Duration::from_secs(3600), timeout, 0)
        .unwrap();
    let shutter = thread::spawn(move || group.shutdown());
    let rejected = on_told
        .recv_timeout(Duration::from_secs(10))
        .expect("never told it stopped: the loop is stuck on its timers lock");
    assert!(rejected, "a closed loop takes no new timeout");
    shutter.join().unwrap();
    assert_eq!(event_loop.stats().armed, 0);
}

/// A source that records the aborts it is given, with when each came.
struct Recording {
    name: &'static str,
    aborted: Arc<Mutex<Vec<(&'static str, Instant)>>>,
}

impl Source for Recording {
    fn ready(&mut self, _cx: &mut LoopContext<'_>, _readiness: Readiness) {}
    fn timer(&mut self, _cx: &mut LoopContext<'_>, _tag: u64) {}
    fn abort(&mut self, cx: &mut LoopContext<'_>, _exchange_id: u64) {
        lock(&self.aborted).push((self.name, Instant::now()));
        cx.remove_me();
    }
    fn shut_down(&mut self, _cx: &mut LoopContext<'_>) {}
    fn panicked(&mut self, _cx: &mut LoopContext<'_>) {}
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// A source that, aborted, wakes a task twice and notes how many wake-ups
/// the task had seen by the end of its call.
struct WakesTwice {
    waker: std::task::Waker,
    count: Arc<AtomicUsize>,
    seen_within: mpsc::Sender<usize>,
}

impl Source for WakesTwice {
    fn ready(&mut self, _cx: &mut LoopContext<'_>, _readiness: Readiness) {}
    fn timer(&mut self, _cx: &mut LoopContext<'_>, _tag: u64) {}
    fn abort(&mut self, cx: &mut LoopContext<'_>, _exchange_id: u64) {
        super::wake_task(self.waker.clone());
        super::wake_task(self.waker.clone());
        let seen = self.count.load(Ordering::SeqCst);
        self.seen_within.send(seen).unwrap();
        cx.remove_me();
    }
    fn shut_down(&mut self, _cx: &mut LoopContext<'_>) {}
    fn panicked(&mut self, _cx: &mut LoopContext<'_>) {}
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The tasks a source's call wakes (an async caller's head, then its
/// body's end) are woken after the call, each once: the task runs with
/// the whole response in place, woken once rather than twice.
#[test]
fn a_sources_task_wakeups_come_after_its_call_each_once() {
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    let count = Arc::new(AtomicUsize::new(0));
    let waker = std::task::Waker::from(Arc::new(CountingWake(count.clone())));
    let (seen_within, on_seen) = mpsc::channel();
    let source_count = count.clone();
    event_loop
        .execute(move |cx| {
            let source = cx.add_source(move |_| {
                Box::new(WakesTwice {
                    waker,
                    count: source_count,
                    seen_within,
                })
            });
            cx.abort_later(source, 0);
        })
        .unwrap();
    let within = on_seen.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(within, 0, "woken during the source's call");
    let give_up = Instant::now() + Duration::from_secs(10);
    while count.load(Ordering::SeqCst) == 0 && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(1));
    }
    group.shutdown();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

/// #10, defect 7: connections whose exchange a timeout failed close in the
/// order they were failed, oldest first.
#[test]
fn aborts_are_carried_out_oldest_first() {
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    let aborted = Arc::new(Mutex::new(Vec::new()));
    let recorded = aborted.clone();
    event_loop
        .execute(move |cx| {
            let sources: Vec<SourceRef> = ["first", "second", "third"]
                .into_iter()
                .map(|name| {
                    let aborted = recorded.clone();
                    cx.add_source(move |_| Box::new(Recording { name, aborted }))
                })
                .collect();
            for source in sources {
                cx.abort_later(source, 0);
            }
        })
        .unwrap();
    // The aborts run after the turn's tasks: wait for all three.
    let give_up = Instant::now() + Duration::from_secs(10);
    while lock(&aborted).len() < 3 && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(1));
    }
    let names: Vec<_> = lock(&aborted).iter().map(|&(name, _)| name).collect();
    assert_eq!(names, ["first", "second", "third"]);
    group.shutdown();
}

/// Expiries `spacing` apart, `count` of them from 5 ms on; the first
/// queues an abort of a source that notes when it is aborted. Returns when
/// the abort ran and when the last expiry did.
fn abort_during_expiries(spacing: Duration, count: u32) -> (Instant, Instant) {
    struct Series {
        source: Mutex<Option<SourceRef>>,
        expired: Mutex<Vec<Instant>>,
    }
    impl LoopTimeout for Series {
        fn expire(self: Arc<Self>, _tag: u64, cx: &mut LoopContext<'_>) {
            lock(&self.expired).push(Instant::now());
            if let Some(source) = lock(&self.source).take() {
                cx.abort_later(source, 0);
            }
        }
    }
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    let aborted = Arc::new(Mutex::new(Vec::new()));
    let series = Arc::new(Series {
        source: Mutex::new(None),
        expired: Mutex::new(Vec::new()),
    });
    let (added, on_added) = mpsc::channel();
    let stamp = aborted.clone();
    event_loop
        .execute(move |cx| {
            let source = cx.add_source(move |_| {
                Box::new(Recording {
                    name: "aborted",
                    aborted: stamp,
                })
            });
            added.send(source).unwrap();
        })
        .unwrap();
    *lock(&series.source) = Some(on_added.recv().unwrap());
    // Scheduled by a task on the loop, from a time read there: the loop
    // expires nothing while the task runs, so the series is whole before
    // its first expiry however long a thread is stalled (from this one, a
    // stall past the first expiry queued the abort before the rest of the
    // burst was armed).
    let (scheduled, on_scheduled) = mpsc::channel();
    let (scheduler, timeouts) = (event_loop.clone(), series.clone());
    event_loop
        .execute(move |_| {
            let first = Instant::now() + Duration::from_millis(5);
            for i in 0..count {
                scheduler
                    .schedule(first + spacing * i, timeouts.clone(), 0)
                    .unwrap();
            }
            scheduled.send(()).unwrap();
        })
        .unwrap();
    on_scheduled.recv().unwrap();
    let give_up = Instant::now() + Duration::from_secs(10);
    while (lock(&aborted).is_empty() || lock(&series.expired).len() < count as usize)
        && Instant::now() < give_up
    {
        thread::sleep(Duration::from_millis(1));
    }
    group.shutdown();
    let expired = lock(&series.expired).clone();
    let (_, aborted) = *lock(&aborted).first().expect("never aborted");
    assert_eq!(expired.len(), count as usize, "expiries lost");
    (aborted, expired[expired.len() - 1])
}

/// A burst of expiries runs alone: the abort the first one queued waits
/// until the last has run (five, 200 µs apart — closer than the gap an
/// abort waits for, and over long before an abort is overdue).
#[test]
fn an_abort_waits_until_a_burst_of_expiries_is_over() {
    let (aborted, last) = abort_during_expiries(Duration::from_micros(200), 5);
    assert!(
        aborted >= last,
        "aborted {:?} before the last expiry",
        last - aborted
    );
}

/// ... but not for ever: expiries that keep coming 500 µs apart for 60 ms
/// hold it back only until it is overdue.
#[test]
fn an_abort_waits_no_longer_than_its_limit_while_expiries_keep_coming() {
    let (aborted, last) = abort_during_expiries(Duration::from_micros(500), 120);
    assert!(aborted < last, "aborted only once the expiries were over");
}

/// One task at a time, each posted a little after the one before ran (a
/// caller that waits for each answer): none is lost, whether the loop is
/// parked, running or idle when it comes. After a task that answered a
/// blocked caller (with no exchange on the loop) the loop is left idle,
/// so the next request, posted for a driver, costs no wake-up, and the
/// caller runs it on its own thread by driving the loop; after the other
/// tasks the loop parks, and each post wakes it. The grace is a second
/// here, not a millisecond, so that a loaded machine's scheduling cannot
/// decide the count.
#[test]
fn a_loop_that_answered_a_blocked_caller_is_driven_by_that_callers_next_request() {
    let (_group, event_loop) = one_loop(Duration::from_secs(1));
    let wakeups = || lock(&event_loop.inbox).wakeups;
    const ROUNDS: u64 = 400;
    let mut woken = [0; 2];
    let mut driven = 0;
    for (answers, woken) in [false, true].into_iter().zip(&mut woken) {
        let before = wakeups();
        for _ in 0..ROUNDS {
            let ran_on = Arc::new(Mutex::new(None));
            let done = ran_on.clone();
            let task = Box::new(move |_: &mut LoopContext<'_>| {
                if answers {
                    answered_a_waiting_caller();
                }
                *lock(&done) = Some(thread::current().id());
            });
            if answers {
                event_loop.execute_for_driver(task).unwrap();
            } else {
                event_loop.execute_boxed(task).unwrap();
            }
            let ran = || lock(&ran_on).is_some();
            let drove = event_loop
                .drive_until(&mut || ran(), || Duration::ZERO)
                .is_some();
            if *lock(&ran_on) == Some(thread::current().id()) {
                assert!(drove, "a task ran on a caller that did not drive");
                driven += 1;
            }
            let give_up = Instant::now() + Duration::from_secs(10);
            while !ran() {
                assert!(Instant::now() < give_up, "a task posted was never run");
                std::hint::spin_loop();
            }
            // The caller's own work between two requests: long enough for
            // a loop that does not go idle to park.
            thread::sleep(Duration::from_millis(1));
        }
        *woken = wakeups() - before;
    }
    let [parking, idle] = woken;
    assert!(
        parking > ROUNDS * 3 / 4,
        "{parking} wake-ups for {ROUNDS} posts to a loop that parks"
    );
    assert!(
        idle < ROUNDS / 2,
        "{idle} wake-ups for {ROUNDS} posts to a loop left idle"
    );
    assert!(
        driven > ROUNDS / 2,
        "the caller drove the loop for {driven} of {ROUNDS} requests"
    );
}

/// A caller that comes and goes — a short drive every millisecond or so,
/// each ending in a release — keeps its loop: the thread, looking once per
/// grace, sees releases since it last looked and sleeps on, rather than
/// take the loop back in the gap between two requests (the caller's next
/// drive would then find it taken, and wait for the loop's thread). Once
/// the caller stops, the thread takes the loop back no sooner than a
/// grace after the last release, and within two.
#[test]
fn a_caller_that_comes_and_goes_keeps_its_loop_until_a_grace_has_passed_without_it() {
    const GRACE: Duration = Duration::from_millis(200);
    let (_group, event_loop) = one_loop(GRACE);
    // Before the loop is left idle (not after: this thread may stall
    // between the two), so that the thread's first grace starts after it.
    // Nothing has released the loop yet: its grace runs from its going idle.
    let mut released = Instant::now();
    event_loop.leave_idle();
    let until = Instant::now() + 4 * GRACE;
    let mut drives = 0;
    while Instant::now() < until {
        let ran = Arc::new(AtomicBool::new(false));
        let done = ran.clone();
        event_loop
            .execute_for_driver(Box::new(move |_| done.store(true, Ordering::SeqCst)))
            .unwrap();
        // The last release came after this (taken before it).
        let before_last_release = released;
        // Just before the release: the thread takes the loop back a grace
        // after the release at the soonest, later than a grace after this.
        released = Instant::now();
        let drove = event_loop
            .drive_until(&mut || ran.load(Ordering::SeqCst), || Duration::ZERO)
            .is_some();
        if !drove {
            // A caller stalled by the machine for a grace and more (a loaded
            // machine can) was away since its last release, and the thread
            // was right to take the loop back.
            let away = before_last_release.elapsed();
            assert!(
                away >= GRACE,
                "the loop's thread took the loop back after {drives} drives, \
                 {away:?} after the last release"
            );
            return;
        }
        drives += 1;
        thread::sleep(Duration::from_millis(1));
    }
    let give_up = released + 2 * GRACE + Duration::from_secs(5);
    while lock(&event_loop.inbox).driver == Driver::Idle {
        assert!(Instant::now() < give_up, "the loop was never taken back");
        thread::sleep(Duration::from_millis(1));
    }
    let after = released.elapsed();
    assert!(
        after >= GRACE,
        "taken back {after:?} after the last release"
    );
}

/// A request posted for the driver of an idle loop (`execute_for_driver`)
/// waits for that driver even when the loop's thread looks again before
/// its grace has ended — woken for nothing here; on a loaded machine, as
/// it reaches its sleep after leaving the loop idle, the caller having
/// posted its next request meanwhile: the thread sleeps on, rather than
/// take the loop back from the caller about to drive it (who would then
/// wait for the thread, and leave it every head of its window to read).
#[test]
fn a_task_posted_for_the_driver_of_an_idle_loop_is_left_to_the_driver_when_the_thread_looks_again()
{
    let (_group, event_loop) = one_loop(Duration::from_secs(60));
    event_loop.leave_idle();
    let give_up = Instant::now() + Duration::from_secs(10);
    // The thread asleep for its grace, until `asleep_until`.
    let asleep_until = loop {
        if let Some(at) = lock(&event_loop.inbox).thread_wakes_at {
            break at;
        }
        assert!(Instant::now() < give_up, "the thread never slept");
        thread::sleep(Duration::from_millis(1));
    };
    let ran = Arc::new(AtomicBool::new(false));
    let done = ran.clone();
    event_loop
        .execute_for_driver(Box::new(move |_| done.store(true, Ordering::SeqCst)))
        .unwrap();
    event_loop.idle_wake.notify_one();
    // It has looked again once it has taken the loop, or sleeps until
    // another time (a grace from its look).
    loop {
        let inbox = lock(&event_loop.inbox);
        if inbox.driver != Driver::Idle
            || inbox.thread_wakes_at.is_some_and(|at| at != asleep_until)
        {
            break;
        }
        drop(inbox);
        assert!(Instant::now() < give_up, "the thread never looked again");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        lock(&event_loop.inbox).driver,
        Driver::Idle,
        "the thread took the loop for a task posted for its driver"
    );
    assert!(!ran.load(Ordering::SeqCst));
    // The driver comes, and runs it.
    let drove = event_loop.drive_until(&mut || ran.load(Ordering::SeqCst), || Duration::ZERO);
    assert!(drove.is_some(), "the loop was taken from its driver");
    assert!(ran.load(Ordering::SeqCst));
}

/// What nobody drives does not wait for an idle loop's grace (a minute
/// here, so that only the rules below can explain what runs in time):
/// while a caller drives, a task posted from elsewhere interrupts its poll
/// and runs on it; a task posted to an idle loop, or a deadline armed on
/// it, wakes its thread; a caller that stops driving with another
/// exchange on the loop hands it to the thread at once; and a shutdown
/// ends a loop a caller is driving.
#[test]
fn an_idle_loop_or_one_a_caller_drives_leaves_nothing_waiting_for_its_grace() {
    struct Fired(mpsc::Sender<(Instant, ThreadId)>);
    impl LoopTimeout for Fired {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {
            let _ = self.0.send((Instant::now(), thread::current().id()));
        }
    }
    let (_group, event_loop) = one_loop(Duration::from_secs(60));
    let within = Duration::from_secs(10);

    // A task from another thread, while this one drives.
    event_loop.leave_idle();
    let ran_on = Arc::new(Mutex::new(None));
    let poster = {
        let (event_loop, ran_on) = (event_loop.clone(), ran_on.clone());
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            event_loop
                .execute(move |_| *lock(&ran_on) = Some(thread::current().id()))
                .unwrap();
        })
    };
    let ran = &mut || lock(&ran_on).is_some();
    assert!(event_loop.drive_until(ran, || Duration::ZERO).is_some());
    assert_eq!(*lock(&ran_on), Some(thread::current().id()));
    poster.join().unwrap();
    assert_eq!(lock(&event_loop.inbox).driver, Driver::Idle);

    // A task posted to the idle loop: its thread runs it.
    let (ran, told) = mpsc::channel();
    event_loop
        .execute(move |_| {
            let _ = ran.send(thread::current().id());
        })
        .unwrap();
    assert_eq!(told.recv_timeout(within).unwrap(), event_loop.thread_id());

    // A deadline armed on the idle loop: its thread expires it, not early.
    event_loop.leave_idle();
    let (fired, heard) = mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(50);
    event_loop
        .schedule(deadline, Arc::new(Fired(fired)), 0)
        .unwrap();
    let (at, on) = heard.recv_timeout(within).unwrap();
    assert!(at >= deadline);
    assert_eq!(on, event_loop.thread_id());

    // An exchange on the loop that nobody waits on when the caller stops
    // (its own next one): the loop stays idle for it.
    event_loop.leave_idle();
    event_loop.attach_exchange(true, false);
    assert!(event_loop
        .drive_until(&mut || true, || Duration::ZERO)
        .is_some());
    assert_eq!(lock(&event_loop.inbox).driver, Driver::Idle);

    // One that becomes awaited (a task polls it) while the caller drives:
    // the thread takes the loop back at the release...
    event_loop.leave_idle();
    assert!(event_loop
        .drive_until(
            &mut || {
                event_loop.attach_exchange(true, true);
                true
            },
            || Duration::ZERO
        )
        .is_some());
    assert_eq!(lock(&event_loop.inbox).driver, Driver::Thread);
    event_loop.attach_exchange(false, true);
    // ...and at once if the loop is idle.
    event_loop.leave_idle();
    event_loop.attach_exchange(true, false);
    event_loop.await_exchange();
    assert_eq!(lock(&event_loop.inbox).driver, Driver::Thread);
    event_loop.attach_exchange(false, true);

    // A thread asleep on the loop's news when the caller stops (counted
    // here by the caller itself, for want of a second thread): the thread
    // takes the loop back at once; once that count is dropped (the sleeper
    // woken), the loop may be left idle again. Nobody sleeps on an idle
    // loop: they drive it.
    event_loop.leave_idle();
    assert!(event_loop.sleep_on().is_none());
    let mut asleep = None;
    assert!(event_loop
        .drive_until(
            &mut || {
                asleep = event_loop.sleep_on();
                true
            },
            || Duration::ZERO
        )
        .is_some());
    assert!(asleep.is_some());
    assert_eq!(lock(&event_loop.inbox).driver, Driver::Thread);
    drop(asleep);
    event_loop.leave_idle();
    assert!(event_loop
        .drive_until(&mut || true, || Duration::ZERO)
        .is_some());
    assert_eq!(lock(&event_loop.inbox).driver, Driver::Idle);
    event_loop.attach_exchange(false, false);

    // A shutdown while a caller drives: the caller stops, the loop ends.
    event_loop.leave_idle();
    let driver = {
        let event_loop = event_loop.clone();
        thread::spawn(move || {
            event_loop
                .drive_until(&mut || false, || Duration::ZERO)
                .is_some()
        })
    };
    let give_up = Instant::now() + within;
    while lock(&event_loop.inbox).driver != Driver::Caller {
        assert!(Instant::now() < give_up, "the caller never drove");
        thread::sleep(Duration::from_millis(1));
    }
    event_loop.shutdown();
    assert!(driver.join().unwrap());
    assert!(
        lock(&event_loop.thread).is_none(),
        "the loop's thread was not joined"
    );
}

/// A body of known length that ended on its connection before its reader
/// touched it: the connection's first-touch waiter (`Pipe::untouched`, set
/// by `Conn::await_body` for the low-water mark) goes with the body's end,
/// so the reader's first take posts nothing to a loop that has parked — the
/// connection, idle by now, would only have peeked its socket. Without a
/// read timeout (the mark) and with one (no mark, no waiter).
#[test]
fn a_body_that_ended_before_its_first_read_does_not_wake_its_loop_at_that_read() {
    use std::io::{Read, Write};
    for read_timeout in [Duration::from_secs(30), Duration::ZERO] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut scratch = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut scratch) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&scratch[..n]),
                }
            }
            let body = vec![b'x'; 64 * 1024];
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(&body[..1000]).unwrap();
            thread::sleep(Duration::from_millis(100));
            stream.write_all(&body[1000..]).unwrap();
            // Until the client goes.
            while matches!(stream.read(&mut scratch), Ok(n) if n > 0) {}
        });
        let group = Arc::new(EventLoopGroup::builder().threads(1).build().unwrap());
        let event_loop = group.loops()[0].clone();
        let client = crate::Client::builder()
            .event_loop_group(group.clone())
            .read_timeout(read_timeout)
            .request_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut response = client.get(format!("http://{addr}/")).send().wait().unwrap();
        // The rest of the body comes and ends the exchange on the loop; the
        // connection goes idle and the loop parks (or is left idle): a task
        // posted to it from now on would count as a wake-up. Waited for,
        // not slept on: a loop or server late past a fixed sleep would have
        // the read come before the body's end, and wake the loop rightly.
        let give_up = Instant::now() + Duration::from_secs(30);
        while client.stats().idle_connections != 1 || {
            let inbox = lock(&event_loop.inbox);
            !inbox.parked && inbox.driver != Driver::Idle
        } {
            assert!(Instant::now() < give_up, "the body never ended");
            thread::sleep(Duration::from_millis(1));
        }
        let before = lock(&event_loop.inbox).wakeups;
        let first = response.chunk().wait().unwrap().unwrap();
        assert!(!first.is_empty());
        thread::sleep(Duration::from_millis(100));
        let after = lock(&event_loop.inbox).wakeups;
        while response.chunk().wait().unwrap().is_some() {}
        drop(response);
        client.close();
        group.shutdown();
        let _ = server.join();
        assert_eq!(
            after - before,
            0,
            "read timeout {read_timeout:?}: the first read of a body that had ended woke the loop"
        );
    }
}

/// The CPUs the calling thread may run on (`None`: it cannot say).
#[cfg(target_os = "linux")]
fn my_cpus() -> Option<Vec<usize>> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    Some(
        (0..CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .collect(),
    )
}

/// What `probe` returns, run on `event_loop`'s thread.
#[cfg(target_os = "linux")]
fn on_loop<T: Send + 'static>(event_loop: &EventLoop, probe: fn() -> T) -> T {
    let (sent, got) = mpsc::channel();
    event_loop
        .execute(move |_| {
            let _ = sent.send(probe());
        })
        .unwrap();
    got.recv_timeout(Duration::from_secs(10)).unwrap()
}

/// Pinned, each loop of a group runs on one CPU of those the building
/// thread may use, and as many loops as CPUs take every one of them; a
/// thread a pinned loop starts inside `without_pinning` (as the client
/// starts its resolvers and pumps), and a group built there, get them all
/// back, and the group has its default count of loops; the loop is pinned
/// again after. Unpinned, a loop may use them all. With one CPU there is
/// nothing to pin, and every loop keeps it. (Whether a group pins by
/// default depends on the process's other groups, which the other tests
/// build meanwhile: the rule is tested alone, in `affinity`.)
#[cfg(target_os = "linux")]
#[test]
fn pinned_loops_each_take_a_cpu_of_their_own_and_what_they_start_does_not() {
    let Some(allowed) = my_cpus() else {
        return; // more CPUs than a CpuSet holds: nothing is pinned
    };
    let group = EventLoopGroup::builder()
        .threads(allowed.len())
        .pin_to_cpus(true)
        .build()
        .unwrap();
    let mut taken: Vec<usize> = Vec::new();
    for event_loop in group.loops() {
        let cpus = on_loop(event_loop, my_cpus).unwrap();
        if allowed.len() == 1 {
            assert_eq!(cpus, allowed);
        } else {
            assert_eq!(
                cpus.len(),
                1,
                "loop {} may run on {cpus:?}",
                event_loop.index()
            );
            taken.extend(&cpus);
        }
        let (helper, loops, after) = on_loop(event_loop, || {
            let helper = without_pinning(|| thread::spawn(my_cpus)).join().unwrap();
            let built = EventLoopGroup::builder()
                .pin_to_cpus(false)
                .build()
                .unwrap();
            let loops = built.loops().len();
            built.shutdown();
            (helper, loops, my_cpus())
        });
        assert_eq!(
            helper.as_ref(),
            Some(&allowed),
            "a thread started by a pinned loop"
        );
        assert_eq!(loops, allowed.len(), "a group built on a pinned loop");
        assert_eq!(after, Some(cpus), "the loop, after");
    }
    group.shutdown();
    if allowed.len() > 1 {
        taken.sort_unstable();
        assert_eq!(taken, allowed, "one loop per CPU");
    }

    let group = EventLoopGroup::builder()
        .threads(2)
        .pin_to_cpus(false)
        .build()
        .unwrap();
    for event_loop in group.loops() {
        assert_eq!(on_loop(event_loop, my_cpus).as_ref(), Some(&allowed));
    }
    group.shutdown();
}

/// A panic in code run inside `without_pinning` on a pinned loop (a task's
/// code: the loop catches it and goes on) still puts the loop back on its
/// CPU.
#[cfg(target_os = "linux")]
#[test]
fn a_panic_inside_without_pinning_leaves_the_loop_pinned() {
    let Some(allowed) = my_cpus().filter(|cpus| cpus.len() > 1) else {
        return; // nothing to pin
    };
    let group = EventLoopGroup::builder()
        .threads(allowed.len())
        .pin_to_cpus(true)
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    let before = on_loop(&event_loop, my_cpus).unwrap();
    assert_eq!(before.len(), 1);
    event_loop
        .execute(|_| {
            without_pinning(|| panic!("a task's code panics with the pin lifted"));
        })
        .unwrap();
    let after = on_loop(&event_loop, my_cpus).unwrap();
    group.shutdown();
    assert_eq!(after, before, "the loop's CPU after the panic");
}

/// The threads of this process whose names start with `prefix`, but for
/// those exiting. A joined thread can still be listed for a while: the
/// kernel wakes the joiner early in the thread's exit and lists the thread
/// until a few steps later, but marks it `PF_EXITING` (0x4 in its flags,
/// the ninth field of its `stat`) before it wakes anyone.
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    const PF_EXITING: u64 = 0x4;
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| {
            let path = task.ok()?.path();
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let flags: u64 = stat[stat.rfind(')')? + 2..]
                .split_whitespace()
                .nth(6)?
                .parse()
                .ok()?;
            (flags & PF_EXITING == 0).then_some(comm)
        })
        .filter(|comm| comm.starts_with(prefix))
        .count()
}

/// A scheduler factory (a public seam) that panics once the loops have
/// started: the build unwinds, and the loops it started end with it.
#[cfg(target_os = "linux")]
#[test]
fn a_build_that_panics_after_starting_its_loops_shuts_them_down() {
    let factory: SchedulerFactory = Arc::new(|_| panic!("a scheduler factory panics"));
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        EventLoopGroup::builder()
            .threads(2)
            .thread_name("factorypanic")
            .timeout_scheduler(factory)
            .build()
    }));
    assert!(built.is_err());
    // Shut down means joined: the threads are gone when the unwind is over.
    assert_eq!(
        threads_named("factorypanic"),
        0,
        "loop threads left running"
    );
}

/// A spin longer than the time since the clock's start (`Duration::MAX`:
/// busy-poll always) puts the start of every deadline's spin before any
/// instant there is: a deadline armed on an idle loop has its thread take
/// the loop back at once, to poll without blocking as the loop's own poll
/// does — not sleep on until the deadline itself (or the end of its
/// grace), later than with no spin at all.
#[test]
fn with_a_spin_past_every_deadline_an_idle_loop_is_taken_back_at_once() {
    let group = EventLoopGroup::builder()
        .threads(1)
        .idle_grace(Duration::from_secs(60))
        .spin_before_deadline(Duration::MAX)
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    event_loop.leave_idle();
    event_loop
        .schedule(
            Instant::now() + Duration::from_secs(30),
            Arc::new(Nothing),
            0,
        )
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(10);
    while lock(&event_loop.inbox).driver == Driver::Idle {
        assert!(
            Instant::now() < give_up,
            "the idle loop's thread sleeps on until the deadline"
        );
        thread::sleep(Duration::from_millis(1));
    }
    group.shutdown();
}

/// The CPU time of the calling thread, in clock ticks.
#[cfg(target_os = "linux")]
fn thread_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// With a manual clock a deadline within the loop's spin (but not due at
/// the clock's time) does not make it poll without blocking: the clock
/// stands still until advanced, and the loop sleeps meanwhile.
#[cfg(target_os = "linux")]
#[test]
fn a_manual_clock_loop_sleeps_however_near_its_next_deadline() {
    use tickless_timer::{Clock, ManualClock};
    let clock = ManualClock::new();
    let group = EventLoopGroup::builder()
        .threads(1)
        .clock(Arc::new(clock.clone()))
        .spin_before_deadline(Duration::from_millis(10))
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    event_loop
        .schedule(clock.now() + Duration::from_millis(5), Arc::new(Nothing), 0)
        .unwrap();
    let before = on_loop(&event_loop, thread_ticks);
    thread::sleep(Duration::from_millis(500));
    let used = on_loop(&event_loop, thread_ticks) - before;
    group.shutdown();
    // Ticks are 10 ms: a loop polling without blocking takes most of 50.
    assert!(
        used < 20,
        "{used} ticks of the loop's CPU in 500 ms with nothing due"
    );
}

/// Two threads shut a loop down at once: each returns only once the loop's
/// thread has ended (here, after a slow task it had accepted), not the
/// second as soon as the first has taken the thread to join.
#[cfg(target_os = "linux")]
#[test]
fn a_second_shutdown_at_once_returns_once_the_loop_has_ended() {
    let group = EventLoopGroup::builder()
        .threads(1)
        .thread_name("twoshutdowns")
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    let (started, running) = mpsc::channel();
    event_loop
        .execute(move |_| {
            let _ = started.send(());
            thread::sleep(Duration::from_millis(300));
        })
        .unwrap();
    running.recv().unwrap();
    let first = {
        let event_loop = event_loop.clone();
        thread::spawn(move || event_loop.shutdown())
    };
    // The first has taken the thread to join by now, on all but the most
    // stalled machine (then this test passes without testing the race).
    thread::sleep(Duration::from_millis(50));
    event_loop.shutdown();
    let left = threads_named("twoshutdowns");
    first.join().unwrap();
    assert_eq!(
        left, 0,
        "the second shutdown returned with the loop running"
    );
}

/// A thread's new connections go to one loop of a group, the next in turn
/// the first time it asks; another thread takes the next one; a connection
/// that must avoid that loop goes to another; a thread that has polled an
/// exchange goes round robin.
#[test]
fn a_threads_connections_share_a_loop() {
    let group = Arc::new(EventLoopGroup::builder().threads(3).build().unwrap());
    let first = group.next(None).index();
    assert!((0..5).all(|_| group.next(None).index() == first));
    let other = {
        let group = group.clone();
        thread::spawn(move || (group.next(None).index(), group.next(None).index()))
            .join()
            .unwrap()
    };
    assert_eq!(other, ((first + 1) % 3, (first + 1) % 3));
    assert_ne!(group.next(Some(first)).index(), first);
    assert_eq!(group.next(None).index(), first);
    // A thread that polls an exchange (an executor's worker) spreads its
    // connections over the loops.
    let spread = {
        let group = group.clone();
        thread::spawn(move || {
            let seat = group.next(None).index();
            group::polled_here();
            let next: Vec<usize> = (0..3).map(|_| group.next(None).index()).collect();
            (seat, next)
        })
        .join()
        .unwrap()
    };
    assert_eq!(spread.0, (first + 2) % 3);
    let mut next = spread.1;
    next.sort();
    assert_eq!(next, [0, 1, 2]);
    group.shutdown();
}

/// A waker that counts its wake-ups.
struct CountingWake(Arc<AtomicUsize>);

impl std::task::Wake for CountingWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A source on one end of a socket pair that, readable, wakes its own task
/// and notes how often the other source's task had been woken by then.
struct WakesAndLooks {
    stream: mio::net::UnixStream,
    waker: std::task::Waker,
    other: Arc<AtomicUsize>,
    seen: mpsc::Sender<usize>,
}

impl Source for WakesAndLooks {
    fn ready(&mut self, _cx: &mut LoopContext<'_>, _readiness: Readiness) {
        use std::io::Read;
        let mut buf = [0; 16];
        while self.stream.read(&mut buf).is_ok_and(|n| n > 0) {}
        super::wake_task(self.waker.clone());
        let _ = self.seen.send(self.other.load(Ordering::SeqCst));
    }
    fn timer(&mut self, _cx: &mut LoopContext<'_>, _tag: u64) {}
    fn abort(&mut self, _cx: &mut LoopContext<'_>, _exchange_id: u64) {}
    fn shut_down(&mut self, _cx: &mut LoopContext<'_>) {}
    fn panicked(&mut self, _cx: &mut LoopContext<'_>) {}
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Two sources readable in one poll, each waking a task: whichever runs
/// second must not find the first one's task woken yet — with `armed`, a
/// far-off timeout on the loop's heap (every exchange with a request or
/// read timeout arms one), as without.
fn tasks_woken_by_one_polls_sources(armed: bool) -> Vec<usize> {
    struct Never;
    impl LoopTimeout for Never {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {}
    }
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    if armed {
        let far = Instant::now() + Duration::from_secs(3600);
        event_loop.schedule(far, Arc::new(Never), 0).unwrap();
    }
    let counts = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let (seen, on_seen) = mpsc::channel();
    let (a, a_peer) = mio::net::UnixStream::pair().unwrap();
    let (b, b_peer) = mio::net::UnixStream::pair().unwrap();
    let sources = [(a, 0, 1), (b, 1, 0)].map(|(stream, mine, other)| WakesAndLooks {
        stream,
        waker: std::task::Waker::from(Arc::new(CountingWake(counts[mine].clone()))),
        other: counts[other].clone(),
        seen: seen.clone(),
    });
    event_loop
        .execute(move |cx| {
            for mut source in sources {
                cx.add_source(move |cx| {
                    cx.registry
                        .register(&mut source.stream, cx.token(), mio::Interest::READABLE)
                        .unwrap();
                    Box::new(source)
                });
            }
            // Both readable before the loop polls again: one poll's events.
            use std::io::Write;
            (&a_peer).write_all(b"x").unwrap();
            (&b_peer).write_all(b"x").unwrap();
            // The peers stay open until the sources have run.
            std::mem::forget((a_peer, b_peer));
        })
        .unwrap();
    let seen: Vec<usize> = (0..2)
        .map(|_| on_seen.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    // And held, not lost: both tasks are woken once the poll's sources ran.
    let give_up = Instant::now() + Duration::from_secs(10);
    let all_woken = || counts.iter().all(|count| count.load(Ordering::SeqCst) == 1);
    while !all_woken() && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(1));
    }
    assert!(all_woken(), "held wake-ups never made");
    group.shutdown();
    seen
}

#[test]
fn a_polls_task_wakeups_wait_for_all_its_sources_without_a_timer_armed() {
    assert_eq!(tasks_woken_by_one_polls_sources(false), [0, 0]);
}

/// Review of 333aa4e, defect 1: `expire_due`, run after every event, ended
/// the poll's hold whenever anything at all was armed on the loop's heap
/// (an exchange's timeout in event-loop mode, a connection's timer), due or
/// not: the first source's task was woken before the second ran.
#[test]
fn a_polls_task_wakeups_wait_for_all_its_sources_with_a_timer_armed() {
    assert_eq!(
        tasks_woken_by_one_polls_sources(true),
        [0, 0],
        "a task woken before the poll's other sources ran"
    );
}

/// A source that, aborted, wakes a task whose waker says so, then panics.
struct WakesAPanickingTask(Mutex<mpsc::Sender<()>>);

impl Source for WakesAPanickingTask {
    fn ready(&mut self, _cx: &mut LoopContext<'_>, _readiness: Readiness) {}
    fn timer(&mut self, _cx: &mut LoopContext<'_>, _tag: u64) {}
    fn abort(&mut self, cx: &mut LoopContext<'_>, _exchange_id: u64) {
        struct Panics(Mutex<mpsc::Sender<()>>);
        impl std::task::Wake for Panics {
            fn wake(self: Arc<Self>) {
                let _ = lock(&self.0).send(());
                panic!("a task's waker panics");
            }
        }
        let woken = lock(&self.0).clone();
        super::wake_task(std::task::Waker::from(Arc::new(Panics(Mutex::new(woken)))));
        cx.remove_me();
    }
    fn shut_down(&mut self, _cx: &mut LoopContext<'_>) {}
    fn panicked(&mut self, _cx: &mut LoopContext<'_>) {}
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// Review of 333aa4e, defect 2: a waker is the caller's code; one that
/// panics when a source's call wakes it must not end the loop's thread
/// (before 333aa4e the panic came within the source's call, and closed
/// that source alone).
#[test]
fn a_task_waker_that_panics_leaves_the_loop_running() {
    let group = EventLoopGroup::builder().threads(1).build().unwrap();
    let event_loop = group.loops()[0].clone();
    let (woken, on_woken) = mpsc::channel();
    event_loop
        .execute(move |cx| {
            let source = cx.add_source(move |_| Box::new(WakesAPanickingTask(Mutex::new(woken))));
            cx.abort_later(source, 0);
        })
        .unwrap();
    on_woken.recv_timeout(Duration::from_secs(10)).unwrap();
    let (ran, on_ran) = mpsc::channel();
    event_loop
        .execute(move |_| {
            let _ = ran.send(());
        })
        .unwrap();
    let after = on_ran.recv_timeout(Duration::from_secs(10));
    group.shutdown();
    assert!(
        after.is_ok(),
        "the loop's thread died with the waker's panic"
    );
}

/// A timeout that records when each of its tags expired.
struct Expiries(Mutex<Vec<(u64, Instant)>>);

impl LoopTimeout for Expiries {
    fn expire(self: Arc<Self>, tag: u64, _cx: &mut LoopContext<'_>) {
        lock(&self.0).push((tag, Instant::now()));
    }
}

impl Expiries {
    /// Waits (at most 10 s) until `count` tags have expired; returns them.
    fn wait_for(&self, count: usize) -> Vec<(u64, Instant)> {
        let give_up = Instant::now() + Duration::from_secs(10);
        while lock(&self.0).len() < count && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(1));
        }
        lock(&self.0).clone()
    }

    /// Waits for tag `tag`, the `tag + 1`-th to expire, and asserts that it
    /// did, not before `deadline`.
    fn assert_fired(&self, tag: u64, deadline: Instant) {
        let fired = self.wait_for(tag as usize + 1);
        assert_eq!(fired.len(), tag as usize + 1, "timeout {tag} never fired");
        assert!(fired[tag as usize].1 >= deadline, "fired early");
    }
}

/// The precise wait is moved earlier only, and a poll blocks without a
/// look at the clock for a deadline it covers (`DeadlineWait`). Once it
/// has woken, it covers nothing: a later deadline, armed when nothing else
/// will wake the loop, still wakes it.
#[test]
fn after_its_wait_woke_a_loop_still_wakes_for_a_later_deadline() {
    let (_group, event_loop) = one_loop(Duration::from_millis(1));
    let expiries = Arc::new(Expiries(Mutex::new(Vec::new())));
    for tag in 0..3 {
        let deadline = Instant::now() + Duration::from_millis(20);
        event_loop
            .schedule(deadline, expiries.clone(), tag)
            .unwrap();
        expiries.assert_fired(tag, deadline);
    }
}

/// The precise wait goes off while a task runs, its deadline then within
/// the loop's spin but not due: the next poll, which blocks without a look
/// at the clock for a deadline the wait covers (`DeadlineWait`), returns at
/// once on the timer's event, still pending, and the loop spins to the
/// deadline. Each time: nothing consumed that event unacknowledged.
#[test]
fn a_wait_that_went_off_during_a_task_still_ends_the_next_poll() {
    let group = EventLoopGroup::builder()
        .threads(1)
        .spin_before_deadline(Duration::from_millis(30))
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    let expiries = Arc::new(Expiries(Mutex::new(Vec::new())));
    for tag in 0..3 {
        let deadline = Instant::now() + Duration::from_millis(80);
        event_loop
            .schedule(deadline, expiries.clone(), tag)
            .unwrap();
        // Armed by now (the schedule woke the loop): its wait goes off at
        // deadline - 30 ms, during this task. (A loop stalled past this
        // sleep arms after the task: the path is then not taken, and the
        // test still passes.)
        thread::sleep(Duration::from_millis(10));
        event_loop
            .execute(move |_| {
                while Instant::now() < deadline - Duration::from_millis(15) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        expiries.assert_fired(tag, deadline);
    }
    group.shutdown();
}

/// A group's shutdown tells every loop before it joins any: a task on
/// the first loop's thread that waits for what the second's end rings (a
/// timeout armed there, told it was stopped — as a listener on a loop's
/// thread may wait for a request whose backoff is on another loop) ends,
/// and so does the shutdown. Joined one by one, the first loop's join
/// waited on that task, which waited on the second loop's shutdown, which
/// had not been asked for.
#[test]
fn a_group_shutdown_tells_every_loop_before_it_joins_one() {
    struct TellsStopped(Mutex<Option<mpsc::Sender<()>>>);
    impl LoopTimeout for TellsStopped {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {}
        fn stopped(self: Arc<Self>, _tag: u64) {
            if let Some(told) = lock(&self.0).take() {
                let _ = told.send(());
            }
        }
    }
    let group = EventLoopGroup::builder().threads(2).build().unwrap();
    let (first, second) = (group.loops()[0].clone(), group.loops()[1].clone());
    let (told, on_told) = mpsc::channel();
    second
        .schedule(
            Instant::now() + Duration::from_secs(3600),
            Arc::new(TellsStopped(Mutex::new(Some(told)))),
            0,
        )
        .unwrap();
    let (waiting, on_waiting) = mpsc::channel();
    let (ended, on_ended) = mpsc::channel();
    first
        .execute(move |_| {
            waiting.send(()).unwrap();
            // Bounded, so that a failing run ends.
            let _ = ended.send(on_told.recv_timeout(Duration::from_secs(30)).is_ok());
        })
        .unwrap();
    on_waiting.recv_timeout(Duration::from_secs(10)).unwrap();
    let shutter = thread::spawn(move || group.shutdown());
    let told_in_time = on_ended
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or(false);
    assert!(
        told_in_time,
        "the first loop's task was never told: the second loop was not asked to stop"
    );
    shutter.join().unwrap();
}

// Idle standing entries: an HTTP/1 connection's entry left armed between
// its requests, nobody holding it (see `IdleStanding`). Here an entry of
// the tests' own, counted idle by hand as its owner would count it.

/// The system clock, counting its reads.
#[derive(Debug, Default)]
struct CountedClock(AtomicUsize);

impl tickless_timer::Clock for CountedClock {
    fn now(&self) -> Instant {
        self.0.fetch_add(1, Ordering::SeqCst);
        Instant::now()
    }
}

/// A timeout that does nothing when it expires.
struct Nothing;

impl LoopTimeout for Nothing {
    fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {}
}

/// Runs `count` tasks on `event_loop`, one after the other, each waited
/// for.
fn run_tasks_one_by_one(event_loop: &EventLoop, count: usize) {
    for _ in 0..count {
        let (ran, told) = mpsc::channel();
        event_loop
            .execute(move |_| {
                let _ = ran.send(());
            })
            .unwrap();
        told.recv_timeout(Duration::from_secs(10)).unwrap();
    }
}

/// A loop reads the clock after every task while anything is armed on its
/// heap — but not while all that is armed is idle standing entries, whose
/// fire would do nothing: then a turn costs no read of the clock at all
/// (its poll's precise wait covers the entry's deadline already).
#[test]
fn a_loop_with_only_an_idle_standing_entry_reads_no_clock_after_its_tasks() {
    let clock = Arc::new(CountedClock::default());
    let group = EventLoopGroup::builder()
        .threads(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    let reads_over_tasks = |count| {
        let before = clock.0.load(Ordering::SeqCst);
        run_tasks_one_by_one(&event_loop, count);
        clock.0.load(Ordering::SeqCst) - before
    };
    let far = Instant::now() + Duration::from_secs(3600);
    event_loop.schedule(far, Arc::new(Nothing), 0).unwrap();
    // Held (a request's timeout, in effect): a read after each task.
    let live = reads_over_tasks(100);
    assert!(live >= 99, "{live} reads of the clock over 100 tasks");
    event_loop.idle_standing().idle_now(true);
    let idle = reads_over_tasks(100);
    assert!(idle < 10, "{idle} reads of the clock over 100 tasks");
    assert_eq!(event_loop.stats().armed, 0, "an idle entry is no timeout");
    // Held again: read again.
    event_loop.idle_standing().idle_now(false);
    let live = reads_over_tasks(100);
    assert!(live >= 99, "{live} reads of the clock over 100 tasks");
    assert_eq!(event_loop.stats().armed, 1);
    group.shutdown();
}

/// An idle standing entry that falls due is popped all the same — its
/// loop's poll, finding it due, forces the expiry the idle gate would
/// skip — and the loop then sleeps: without it, every poll would find the
/// same deadline due and return at once, for ever. With and without a
/// spin before deadlines, with and without a precise wait.
#[cfg(target_os = "linux")] // its thread's CPU ticks (`thread_ticks`)
#[test]
fn an_idle_standing_entry_that_falls_due_is_popped_and_the_loop_then_sleeps() {
    for spin in [Duration::ZERO, Duration::from_millis(10)] {
        idle_entry_is_popped_and_the_loop_sleeps(spin);
    }
}

#[cfg(target_os = "linux")] // its thread's CPU ticks (`thread_ticks`)
#[test]
fn without_a_precise_wait_an_idle_standing_entry_that_falls_due_is_popped() {
    turn::WITHOUT_PRECISE_WAIT.with(|without| without.set(true));
    for spin in [Duration::ZERO, Duration::from_millis(10)] {
        idle_entry_is_popped_and_the_loop_sleeps(spin);
    }
}

#[cfg(target_os = "linux")] // its thread's CPU ticks (`thread_ticks`)
fn idle_entry_is_popped_and_the_loop_sleeps(spin: Duration) {
    /// Uncounts itself when it expires, as a standing entry's fire does.
    struct IdleEntry(Arc<EventLoop>, mpsc::Sender<Instant>);
    impl LoopTimeout for IdleEntry {
        fn expire(self: Arc<Self>, _tag: u64, _cx: &mut LoopContext<'_>) {
            self.0.idle_standing().idle_now(false);
            let _ = self.1.send(Instant::now());
        }
    }
    let group = EventLoopGroup::builder()
        .threads(1)
        .spin_before_deadline(spin)
        .build()
        .unwrap();
    let event_loop = group.loops()[0].clone();
    let (expired, told) = mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(30);
    // Counted idle before it is armed, so that no expiry sees it live.
    event_loop.idle_standing().idle_now(true);
    event_loop
        .schedule(
            deadline,
            Arc::new(IdleEntry(event_loop.clone(), expired)),
            0,
        )
        .unwrap();
    let at = told
        .recv_timeout(Duration::from_secs(10))
        .expect("the idle entry was never popped");
    assert!(at >= deadline, "popped early");
    assert_eq!(event_loop.stats().armed, 0);
    // Nothing armed now: the loop blocks in its poll.
    let before = on_loop(&event_loop, thread_ticks);
    thread::sleep(Duration::from_millis(500));
    let used = on_loop(&event_loop, thread_ticks) - before;
    group.shutdown();
    // Ticks are 10 ms: a loop polling without blocking takes most of 50.
    assert!(used < 20, "{used} ticks of the loop's CPU in 500 ms");
}
