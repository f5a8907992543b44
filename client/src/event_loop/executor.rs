//! Loops driven by an executor's reactor (see "Driven by an executor" on
//! [`EventLoop`]): a task on the executor runs a loop's turns whenever the
//! loop's poll has events, on the executor's workers, and a deadline
//! keeper keeps its deadlines apart ([`DeadlineKeeper`]).
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
//! Deadlines stay where they were exact: on a thread of the group's
//! own, a *deadline keeper*, which sleeps on a precise wait for the
//! nearest deadline of the loops it keeps and expires what is due on each
//! (taking that loop's turn state for the moment), so a worker busy with
//! other tasks never makes a timeout late. A group has a keeper a CPU (no
//! more than it has loops), each keeping every loop whose index is its
//! own modulo their number: more loops than CPUs for an executor's tasks
//! (see `EventLoopGroupBuilder::executor`) add no thread that wakes for a
//! deadline, and a burst of timeouts across them is expired by as many
//! threads as there are CPUs. A loop's own thread sleeps meanwhile, until
//! its keeper lets the loop go (it closed, or the executor stopped
//! driving it) and the thread drives it.

use super::deadline_wait::DeadlineWait;
use super::turn::KeptLeft;
use super::{affinity, Driver, EventLoop};
use crate::sync::lock;
use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

const WAKER: mio::Token = mio::Token(0);
const TIMER: mio::Token = mio::Token(1);

/// Connections a deadline keeper closes on a loop between two looks at
/// the deadlines of the loops it keeps.
const CLOSES_A_LOOK: usize = 4;

thread_local! {
    /// On a deadline keeper's thread: its waker (null elsewhere), which
    /// a deadline armed there need not ring.
    static KEEPING: Cell<*const KeeperWaker> = const { Cell::new(std::ptr::null()) };
}

/// What interrupts a deadline keeper's poll: a nearer deadline on one of
/// its loops, a loop closing or handed back. Each loop it keeps holds it.
pub(super) struct KeeperWaker {
    waker: mio::Waker,
    /// One of its loops may have closed or been handed back since the
    /// keeper last looked: it looks at their inboxes only then.
    look_again: AtomicBool,
}

impl KeeperWaker {
    /// Interrupts the keeper's poll, unless called on the keeper.
    pub(super) fn wake(self: &Arc<Self>) {
        if !self.is_calling_thread() {
            let _ = self.waker.wake();
        }
    }

    /// Whether the calling thread is this keeper's.
    fn is_calling_thread(self: &Arc<Self>) -> bool {
        KEEPING.with(|keeping| std::ptr::eq(keeping.get(), Arc::as_ptr(self)))
    }
}

/// A deadline keeper, before its thread starts: a poll of its own with a
/// precise wait for the nearest deadline of its loops, and its waker.
pub(super) struct DeadlineKeeper {
    poll: mio::Poll,
    events: mio::Events,
    wait: Option<DeadlineWait>,
    waker: Arc<KeeperWaker>,
}

impl DeadlineKeeper {
    pub(super) fn new() -> io::Result<DeadlineKeeper> {
        let poll = mio::Poll::new()?;
        let waker = Arc::new(KeeperWaker {
            waker: mio::Waker::new(poll.registry(), WAKER)?,
            look_again: AtomicBool::new(false),
        });
        let wait = DeadlineWait::new(poll.registry(), TIMER).ok();
        Ok(DeadlineKeeper {
            poll,
            events: mio::Events::with_capacity(4),
            wait,
            waker,
        })
    }

    /// What the loops it keeps wake it with.
    pub(super) fn waker(&self) -> Arc<KeeperWaker> {
        self.waker.clone()
    }

    /// The keeper's thread: keeps the deadlines of `loops` (those of them
    /// an executor still drives when it starts) until it has let every
    /// one go, pinned to `cpu` if the group's plan gave it one.
    pub(super) fn keep(mut self, loops: Vec<Arc<EventLoop>>, cpu: Option<affinity::Cpu>) {
        let _pinned = affinity::LoopThread::pin(cpu);
        KEEPING.with(|keeping| keeping.set(Arc::as_ptr(&self.waker)));
        let Some(manual_clock) = loops.first().map(|l| l.clock.as_manual().is_some()) else {
            return;
        };
        // Each loop kept, and what its last batch left.
        let mut kept: Vec<(Arc<EventLoop>, KeptLeft)> = loops
            .into_iter()
            .filter(|event_loop| event_loop.take_for_keeping())
            .map(|event_loop| (event_loop, KeptLeft::default()))
            .collect();
        let mut look_again = true;
        loop {
            if look_again {
                kept.retain(|(event_loop, _)| !event_loop.let_go_if_handed_back());
                if kept.is_empty() {
                    return;
                }
            }
            look_again = self.waker.look_again.swap(false, Ordering::AcqRel);
            if look_again {
                continue;
            }
            // Every loop's due timeouts first, then a few closes of one
            // loop at a time between two looks: a close costs several
            // expiries, and one loop's closes must not hold back another's
            // timeouts. The clock is read only for a deadline (and after
            // the timers' lock is let go), once a look.
            let mut now = None;
            let mut expired = false;
            let mut nearest: Option<(Instant, usize)> = None;
            for (index, (event_loop, left)) in kept.iter_mut().enumerate() {
                let next = lock(&event_loop.timers).heap.next_deadline();
                let due = next.is_some_and(|deadline| {
                    deadline <= *now.get_or_insert_with(|| event_loop.clock.now())
                });
                if left.due || due {
                    *left = event_loop.keep_deadlines_once(0);
                    expired = true;
                } else if let Some(deadline) = next {
                    if nearest.is_none_or(|(sooner, _)| deadline < sooner) {
                        nearest = Some((deadline, index));
                    }
                }
            }
            if expired {
                continue;
            }
            if let Some((event_loop, left)) = kept.iter_mut().find(|(_, left)| left.closes) {
                *left = event_loop.keep_deadlines_once(CLOSES_A_LOOK);
                continue;
            }
            // Advanced by hand, a manual clock wakes the executor's tasks,
            // whose turns expire what is due: the keeper waits for nothing.
            let timeout = nearest.and_then(|(deadline, index)| {
                let event_loop = &kept[index].0;
                let now = || now.unwrap_or_else(|| event_loop.clock.now());
                event_loop.wait_for_deadline(self.wait.as_mut(), manual_clock, deadline, now)
            });
            if let Err(error) = self.poll.poll(&mut self.events, timeout) {
                if error.kind() != io::ErrorKind::Interrupted {
                    // Nothing would keep the deadlines: the threads drive.
                    for (event_loop, _) in &kept {
                        let _ = event_loop.hand_back_to_thread();
                    }
                }
            }
            for event in self.events.iter() {
                if event.token() == TIMER {
                    if let Some(wait) = self.wait.as_mut() {
                        wait.acknowledge();
                    }
                }
            }
        }
    }
}

impl EventLoop {
    /// A keeper starts keeping this loop's deadlines, unless the executor
    /// no longer drives it (it closed, say, before the keeper started):
    /// its thread does, and keeps them.
    fn take_for_keeping(&self) -> bool {
        let mut inbox = lock(&self.inbox);
        inbox.kept = !inbox.closed && inbox.driver == Driver::Executor;
        inbox.kept
    }

    /// The keeper lets this loop go if it closed or the executor no
    /// longer drives it: its thread, woken, takes it (true).
    fn let_go_if_handed_back(&self) -> bool {
        {
            let mut inbox = lock(&self.inbox);
            if !inbox.closed && inbox.driver == Driver::Executor {
                return false;
            }
            inbox.driver = Driver::Thread;
            inbox.kept = false;
        }
        self.idle_wake.notify_one();
        // A task waiting for the state looks again, and stops.
        self.wake_executor_awaiting_turns();
        true
    }

    /// The loop's thread while an executor drives the loop: sleeps until
    /// its keeper lets the loop go (or none took it), for the thread to
    /// drive it.
    pub(super) fn await_hand_back(&self) {
        let mut inbox = lock(&self.inbox);
        while inbox.kept || (!inbox.closed && inbox.driver == Driver::Executor) {
            inbox = self
                .idle_wake
                .wait(inbox)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        inbox.driver = Driver::Thread;
    }

    /// Whether the calling thread is the deadline keeper that keeps this
    /// loop now (code told there: a listener of another loop it keeps):
    /// the loop's deadlines expire only once that code returns, and its
    /// thread, waiting for the keeper to let the loop go, neither drives
    /// nor ends it until then. A thread-local read on any other thread.
    pub(super) fn kept_here(&self) -> bool {
        self.keeper
            .as_ref()
            .is_some_and(|keeper| keeper.is_calling_thread())
            && lock(&self.inbox).kept
    }

    /// Interrupts the poll of the keeper of the loop's deadlines, if an
    /// executor drives the loop (see the module's documentation), unless
    /// called on that keeper.
    pub(super) fn wake_deadline_keeper(&self) {
        if let Some(keeper) = &self.keeper {
            keeper.wake();
        }
    }

    /// The loop closed, or the executor stopped driving it: its keeper
    /// looks, and lets it go.
    pub(super) fn keeper_looks_again(&self) {
        if let Some(keeper) = &self.keeper {
            keeper.look_again.store(true, Ordering::Release);
            let _ = keeper.waker.wake();
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
    /// executor's other tasks keep every worker busy — while a deadline
    /// keeper keeps its deadlines apart (see "Driven by an executor" on
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
