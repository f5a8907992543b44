//! Loops driven by an executor's reactor (see "Driven by an executor" on
//! [`EventLoop`]): a task on the executor runs a loop's turns whenever the
//! loop's poll has events, on the executor's workers, and the loop's
//! thread keeps its deadlines alone ([`DeadlineKeeper`]).
//!
//! Why: an async caller's tasks run on the executor's workers, the loop's
//! I/O on the loop's thread, so every answer crosses from one to the other
//! and every next request back — a wake-up and often a sleep each way,
//! and on a machine with as many workers as cores the woken worker takes
//! the loop's core. Run on the workers, the loop hands each answer to a
//! task on the same thread (the executor's local queue), and the requests
//! the tasks post wait for the loop's next turn there, as hyper's
//! connections are driven by tokio's own reactor.
//!
//! Deadlines stay where they were exact: on the loop's thread, which
//! sleeps on a precise wait of its own for the nearest one and expires it
//! (taking the loop's turn state for that moment), so a worker busy with
//! other tasks never makes a timeout late.

use super::deadline_wait::DeadlineWait;
use super::{Driver, EventLoop};
use crate::sync::lock;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

const WAKER: mio::Token = mio::Token(0);
const TIMER: mio::Token = mio::Token(1);

/// The loop's thread while an executor drives the loop: a poll of its own
/// with a precise wait for the loop's nearest deadline and a waker.
pub(super) struct DeadlineKeeper {
    poll: mio::Poll,
    events: mio::Events,
    wait: Option<DeadlineWait>,
}

impl DeadlineKeeper {
    /// The keeper, and the waker that interrupts its poll (a new nearest
    /// deadline, the loop closing or handed back).
    pub(super) fn new() -> io::Result<(DeadlineKeeper, mio::Waker)> {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let wait = DeadlineWait::new(poll.registry(), TIMER).ok();
        let keeper = DeadlineKeeper {
            poll,
            events: mio::Events::with_capacity(4),
            wait,
        };
        Ok((keeper, waker))
    }
}

impl EventLoop {
    /// The loop's thread while an executor drives the loop: waits for the
    /// nearest deadline, as precisely as its own turns would, expires what
    /// is due and closes the connections that failed; returns once the executor no longer drives the loop
    /// (it is closing, or the executor's task ended), for the thread to
    /// drive it.
    pub(super) fn keep_deadlines(self: &Arc<Self>, mut keeper: DeadlineKeeper) {
        let manual_clock = self.clock.as_manual().is_some();
        // A batch of expiries or closes is left.
        let mut left = false;
        loop {
            {
                let mut inbox = lock(&self.inbox);
                if inbox.closed || inbox.driver != Driver::Executor {
                    inbox.driver = Driver::Thread;
                    drop(inbox);
                    // The thread takes the state for good: a task waiting
                    // for it looks again, and stops.
                    self.wake_executor_awaiting_turns();
                    return;
                }
            }
            // The clock is read only for a deadline (and after the timers'
            // lock is let go).
            let nearest = lock(&self.timers).heap.next_deadline();
            let nearest = nearest.map(|deadline| (deadline, self.clock.now()));
            if left || nearest.is_some_and(|(deadline, now)| deadline <= now) {
                left = self.keep_deadlines_once();
                continue;
            }
            // Advanced by hand, a manual clock wakes the executor's task,
            // whose turn expires what is due: the keeper waits for nothing.
            let timeout = nearest.and_then(|(deadline, now)| {
                self.wait_for_deadline(keeper.wait.as_mut(), manual_clock, deadline, || now)
            });
            if let Err(error) = keeper.poll.poll(&mut keeper.events, timeout) {
                if error.kind() != io::ErrorKind::Interrupted {
                    // Nothing would keep the deadlines: the thread drives.
                    let _ = self.hand_back_to_thread();
                }
            }
            for event in keeper.events.iter() {
                if event.token() == TIMER {
                    if let Some(wait) = keeper.wait.as_mut() {
                        wait.acknowledge();
                    }
                }
            }
        }
    }

    /// Interrupts the deadline keeper's poll, if the loop has one (see
    /// [`keep_deadlines`](Self::keep_deadlines)), unless called on it.
    ///
    /// Also before the loop's thread has its id: a manual clock's advance
    /// reaches a loop as soon as it is built (see `EventLoop::start`), and
    /// no thread is the keeper yet.
    pub(super) fn wake_deadline_keeper(&self) {
        if let Some(waker) = &self.keeper_waker {
            if self.thread_id.get() != Some(&std::thread::current().id()) {
                let _ = waker.wake();
            }
        }
    }
}

/// Runs `wait`, the calling thread's blocking wait for news of an
/// exchange on `home`, a loop it could not drive — or, with none, of
/// exchanges that may be on any of `any_of`, the client's loops (one with
/// no connection yet, a hedged or retried request's attempts). On a
/// worker of the tokio runtime whose task drives that loop (or one of
/// those), inside tokio's `block_in_place`: that task may be one of this
/// worker's own — most often in its next-task slot, where the post of the
/// very request waited for put it, and which no other worker takes — and
/// would otherwise wait with it for news only it can bring (until a
/// timeout, if any). `block_in_place` hands the worker's tasks to another
/// thread for the while. Loops of their own threads, and the threads of
/// other runtimes, need none of it: a wait there blocks as it is (tokio
/// refuses `block_in_place` in a task spawned on a `LocalSet`).
pub(crate) fn block_for_news<R>(
    home: Option<&EventLoop>,
    any_of: &[Arc<EventLoop>],
    wait: impl FnOnce() -> R,
) -> R {
    #[cfg(feature = "tokio")]
    {
        let driving = match home {
            Some(home) => home.driving_executor(),
            None => any_of
                .iter()
                .find_map(|event_loop| event_loop.driving_executor()),
        };
        if driving.is_some_and(|executor| on_tokio::on_a_worker_of(&executor.runtime)) {
            return tokio::task::block_in_place(wait);
        }
    }
    #[cfg(not(feature = "tokio"))]
    let _ = (home, any_of);
    wait()
}

impl EventLoop {
    /// Whether an executor may drive the loop: its turns, and the tasks
    /// posted to it, then wait for a free worker — for as long as the
    /// executor's other tasks keep every worker busy — while its thread
    /// keeps its deadlines apart (see "Driven by an executor" on
    /// [`EventLoop`]). A deadline must then be armed before the task for
    /// its request is posted, not by that task. Fixed when the loop is
    /// built: still so once its thread has taken it back.
    pub(crate) fn keeps_deadlines_apart(&self) -> bool {
        self.executor.is_some()
    }

    /// The executor whose task drives the loop now, if one does.
    #[cfg(feature = "tokio")]
    fn driving_executor(&self) -> Option<&Executor> {
        let driven = lock(&self.inbox).driver == Driver::Executor;
        self.executor.as_ref().filter(|_| driven)
    }
}

/// A duplicate of a loop's poll's descriptor, for an executor's reactor to
/// watch: a cloned `Registry` is one, closed when dropped, so the reactor's
/// registration never names a descriptor closed or reused meanwhile.
pub(super) struct PollFd(mio::Registry);

impl PollFd {
    pub(super) fn of(poll: &mio::Poll) -> io::Result<PollFd> {
        poll.registry().try_clone().map(PollFd)
    }
}

impl AsRawFd for PollFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The executor whose reactor drives a group's loops (see
/// [`EventLoopGroupBuilder::executor`](super::EventLoopGroupBuilder::executor)
/// and "Driven by an executor" on [`EventLoop`]). Only tokio's, with the
/// cargo feature `tokio`; without it none can be made.
#[derive(Clone, Debug)]
pub struct Executor {
    #[cfg(feature = "tokio")]
    runtime: tokio::runtime::Handle,
    /// Without an executor to name, none can be made.
    #[cfg(not(feature = "tokio"))]
    never: std::convert::Infallible,
}

impl Executor {
    /// Tokio's runtime `runtime`, whose workers then run the loops'
    /// turns — if it is a multi-threaded one. A current-thread runtime
    /// leaves the loops to their own threads, as if no executor were
    /// named: it runs tasks only while its one thread is in its
    /// `block_on`, so a blocking wait (`wait()`) from that thread, or
    /// while nobody is in `block_on`, would get its answer only by a
    /// timeout. A runtime built without I/O (no `enable_io`) cannot
    /// either: tokio has no way to ask, so each loop's task panics inside
    /// tokio on its first poll (its message says to enable I/O) and the
    /// loops' threads take the loops back. A blocking wait in one of the
    /// runtime's tasks goes through `block_in_place`, which tokio refuses
    /// (a panic) in a task spawned on a `LocalSet` (`spawn_local`): await
    /// there instead.
    #[cfg(feature = "tokio")]
    pub fn tokio(runtime: tokio::runtime::Handle) -> Executor {
        Executor { runtime }
    }

    /// Whether this executor can drive loops (see `Executor::tokio`).
    pub(super) fn drives_loops(&self) -> bool {
        #[cfg(feature = "tokio")]
        {
            self.runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        }
        #[cfg(not(feature = "tokio"))]
        match self.never {}
    }

    /// Spawns the task that drives `event_loop`, watching `poll_fd`.
    pub(super) fn spawn_driver(&self, event_loop: Arc<EventLoop>, poll_fd: PollFd) {
        #[cfg(feature = "tokio")]
        on_tokio::spawn_driver(event_loop, poll_fd, &self.runtime);
        #[cfg(not(feature = "tokio"))]
        {
            drop((event_loop, poll_fd));
            match self.never {}
        }
    }
}

#[cfg(feature = "tokio")]
mod on_tokio {
    // One call needs it: tokio's `AsyncFd::register_with_interest`.
    #![allow(unsafe_code)]

    use super::super::turn::ExecutorTurns;
    use super::super::EventLoop;
    use super::PollFd;
    use std::sync::Arc;
    use std::task::Poll;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    /// Turns a wake-up of the driver runs before it lets the executor's
    /// other tasks run.
    const TURNS_PER_WAKE: usize = 1;

    /// Whether the calling thread is, as far as tokio lets us tell, a
    /// worker of `runtime` (the multi-threaded runtime that drives a loop)
    /// running one of its tasks: where the loop's task may wait in this
    /// worker's slots, and `block_in_place` hands them to another thread.
    /// A thread of another runtime is not: the loop's task is never in
    /// its slots (and `block_in_place` panics in a current-thread
    /// runtime's task, or one spawned on a `LocalSet`); a thread of no
    /// runtime, or of a runtime's blocking pool, need not be.
    ///
    /// The current handle alone does not tell: it is `runtime`'s in that
    /// runtime's `block_on`, also while it polls a `LocalSet`
    /// (`run_until`), and inside a current-thread runtime's `block_on`
    /// with that handle entered (`Handle::enter`) — where
    /// `block_in_place` panics, and which is no worker anyway. Only a
    /// task runs on a worker, and a `block_on`'s own future is no task:
    /// so a task is asked for too. (A task spawned on a `LocalSet` that
    /// `runtime` runs, or on a current-thread runtime with `runtime`'s
    /// handle entered, still passes, and `block_in_place` panics there:
    /// tokio tells a worker from those by nothing public.)
    pub(crate) fn on_a_worker_of(runtime: &tokio::runtime::Handle) -> bool {
        let current = tokio::runtime::Handle::try_current();
        current.is_ok_and(|current| current.id() == runtime.id()) && tokio::task::try_id().is_some()
    }

    /// Spawns the task that drives `event_loop` on `runtime`.
    pub(super) fn spawn_driver(
        event_loop: Arc<EventLoop>,
        poll_fd: PollFd,
        runtime: &tokio::runtime::Handle,
    ) {
        // Dropped unpolled (a runtime shutting down), the future hands the
        // loop back to its thread.
        drop(runtime.spawn(drive(HandBack(event_loop), poll_fd)));
    }

    /// Hands the loop back to its thread when the driver ends, however.
    struct HandBack(Arc<EventLoop>);

    impl Drop for HandBack {
        fn drop(&mut self) {
            let _ = self.0.hand_back_to_thread();
        }
    }

    async fn drive(event_loop: HandBack, poll_fd: PollFd) {
        // SAFETY: `poll_fd` owns its descriptor (a duplicate: see
        // `PollFd`), which stays open, the same, while the `AsyncFd` owns
        // it.
        let registered = unsafe { AsyncFd::register_with_interest(poll_fd, Interest::READABLE) };
        let Ok(poll_fd) = registered else {
            return;
        };
        // Whether the loop's poll may have events: at first, it may.
        let mut readable = true;
        loop {
            match event_loop.0.executor_turns(TURNS_PER_WAKE, readable) {
                ExecutorTurns::Parked => {
                    let woken = std::future::poll_fn(|cx| {
                        match poll_fd.poll_read_ready(cx) {
                            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
                            Poll::Ready(Ok(mut ready)) => {
                                // Before the next turn's poll: what comes
                                // after it makes the descriptor readable
                                // again.
                                ready.clear_ready();
                                Poll::Ready(Ok(true))
                            }
                            // A task posted since the turns parked.
                            Poll::Pending if !event_loop.0.executor_waits(cx.waker()) => {
                                Poll::Ready(Ok(false))
                            }
                            Poll::Pending => Poll::Pending,
                        }
                    })
                    .await;
                    match woken {
                        Ok(events) => readable = events,
                        Err(_) => return,
                    }
                }
                ExecutorTurns::Again { poll } => {
                    readable = poll;
                    tokio::task::yield_now().await;
                }
                ExecutorTurns::Taken { poll } => {
                    readable = poll;
                    std::future::poll_fn(|cx| {
                        match event_loop.0.executor_awaits_turns(cx.waker()) {
                            true => Poll::Pending,
                            false => Poll::Ready(()),
                        }
                    })
                    .await;
                }
                ExecutorTurns::Stopped => return,
            }
        }
    }
}
