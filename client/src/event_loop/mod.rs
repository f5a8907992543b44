//! The I/O threads: [`EventLoop`] and [`EventLoopGroup`].
//!
//! A loop is one thread with a mio `Poll`, an inbox of tasks, a deadline
//! heap with a precise wait, and the connections registered on it. It
//! knows nothing of HTTP or exchanges: a connection is a `Source` it hands
//! readiness, timers and aborts to (see [`LoopContext`]); a timeout is a
//! [`LoopTimeout`] it expires. How one turn goes, and the contract with the
//! threads that talk to a loop, are documented on [`EventLoop`].

mod affinity;
mod deadline_wait;
mod executor;
mod group;
mod idle_standing;
mod scheduler;
mod source;
mod task_wakes;
mod turn;
pub use affinity::without_pinning;
pub(crate) use executor::block_for_news;
pub use executor::Executor;
pub(crate) use idle_standing::IdleStanding;
pub(crate) use turn::answered_a_waiting_caller;
#[cfg(test)]
pub(crate) use turn::take_answered_a_waiting_caller;
pub(crate) use turn::Drove;
use turn::TurnState;
mod waker;

pub(crate) use group::{polled_here, Queued};
pub use group::{EventLoopGroup, EventLoopGroupBuilder, MAX_EVENT_LOOPS};
pub use scheduler::{LoopTimeout, LoopTimerKey, Rejected, SchedulerFactory, TimeoutScheduler};
pub use source::LoopContext;
pub(crate) use source::{Readiness, Source, SourceRef};
pub(crate) use task_wakes::wake_task;
pub(crate) use waker::SourceWaker;

use crate::sync::lock;
use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};
use tickless_timer::{AdvanceListener, CountedHeap, SharedClock, TimerCounters, TimerStats};

const WAKER: mio::Token = mio::Token(usize::MAX);
const TIMER: mio::Token = mio::Token(usize::MAX - 1);

/// A task run on a loop's thread.
pub type LoopTask = Box<dyn FnOnce(&mut LoopContext<'_>) + Send + 'static>;

/// What the heap of a loop holds.
enum Entry {
    /// A timeout armed through [`EventLoop::schedule`] (an exchange's, a probe's).
    Timeout(Arc<dyn LoopTimeout>, u64),
    /// A timer of a source on the loop (a connect or handshake timeout).
    Source(SourceRef, u64),
}

/// Who runs a loop's turns now (see "Who drives a loop" on [`EventLoop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// The loop's own thread.
    Thread,
    /// A caller blocked on an exchange of the loop, on its own thread.
    Caller,
    /// Nobody: the loop's thread sleeps, for at most two idle graces, until
    /// a caller drives the loop or work comes that nobody would run.
    Idle,
    /// An executor's task, whenever the loop's poll has events; a
    /// deadline keeper keeps its deadlines (see "Driven by an executor" on
    /// [`EventLoop`]).
    Executor,
}

struct Inbox {
    tasks: Vec<LoopTask>,
    /// A task in `tasks` was posted for whoever drives, the loop's thread
    /// if nobody does: not for a driver ([`EventLoop::execute_for_driver`]).
    /// Tasks posted for the driver of an idle loop alone never make its
    /// thread take the loop back before its grace ends, even when it looks
    /// again sooner (woken for another reason, or reaching its sleep after
    /// they came). Cleared as the tasks are taken.
    for_the_thread: bool,
    closed: bool,
    /// The driver is in, or about to enter, a poll that blocks: the next
    /// task posted wakes it. While false the driver looks at the inbox
    /// before it blocks again, so posting costs no wake-up.
    parked: bool,
    driver: Driver,
    /// When the loop's thread, asleep while the loop is idle or a caller
    /// drives it, looks again unless woken sooner (the end of its grace,
    /// or its nearest deadline); `None` when it is not in a timed sleep.
    thread_wakes_at: Option<Instant>,
    /// The loop's thread sleeps until the driving caller releases the
    /// loop (it found that caller still driving after a grace with no
    /// release meanwhile: a long wait): the release wakes it.
    thread_awaits_release: bool,
    /// Times a driving caller has released the loop (wrapping): how the
    /// thread, looking again after a grace, tells a caller that comes and
    /// goes (request after request: no need to wake the thread at each
    /// release) from one that stayed, or a loop left idle for the whole
    /// grace.
    releases: u64,
    /// The executor's task that drives the loop (see "Driven by an
    /// executor" on [`EventLoop`]), set while it waits: a task posted to
    /// the parked loop wakes it, rather than the loop's poll (whose
    /// readiness the executor's reactor would see only when it next
    /// polls).
    executor_task: Option<std::task::Waker>,
    /// The executor's task found the turn state held by the loop's thread
    /// keeping the deadlines, and waits for it: the keeper, letting go,
    /// wakes that task (`executor_task`) rather than have it yield and
    /// look again for as long as the keeper's burst lasts.
    executor_awaits_turns: bool,
    /// A deadline keeper keeps the loop's deadlines (see "Driven by an
    /// executor" on [`EventLoop`]): until it lets the loop go, the loop's
    /// thread does not drive it.
    kept: bool,
    /// Wake-ups posted for tasks.
    #[cfg(test)]
    wakeups: u64,
}

impl Inbox {
    /// `task` is the executor's task to wake from now on (a clone only
    /// when it is another task than the one kept).
    fn set_executor_task(&mut self, task: &std::task::Waker) {
        if !self
            .executor_task
            .as_ref()
            .is_some_and(|set| set.will_wake(task))
        {
            self.executor_task = Some(task.clone());
        }
    }
}

struct Timers {
    heap: CountedHeap<Entry>,
    closed: bool,
    /// The next expiry looks at the clock even if every entry on the heap
    /// is an idle standing one (see [`EventLoop::expire_due`]): the
    /// driver's poll found the nearest deadline due, or within its spin,
    /// or its precise wait went off. Cleared by the expiry that honours it.
    forced_expiry: bool,
}

impl Timers {
    /// Whether every entry on the heap is an idle standing one (`idle`:
    /// the loop's count of them), whose fire does nothing — or the heap
    /// is empty. See [`EventLoop::expire_due`].
    fn all_idle(&self, idle: &IdleStanding) -> bool {
        self.heap.len() <= idle.armed()
    }
}

/// One I/O thread, and what it owns.
///
/// # What a loop owns
///
/// One thread, one mio `Poll`, and:
///
/// * the connections registered on it: only the loop's driver (this
///   thread, or a caller driving the loop: below) touches their sockets
///   and codec state, one turn at a time, for the whole life of each
///   connection;
/// * an inbox of tasks that other threads post ([`EventLoop::execute`]),
///   with a mio `Waker` to interrupt the poll;
/// * a deadline heap of timeouts and a precise wait armed for its nearest
///   deadline, so a timeout fires when it is due rather than at the next
///   tick of a shared wheel.
///
/// # One turn of the loop
///
/// 1. Run the tasks in the inbox (at most 64, then poll without blocking).
/// 2. Arm the precise wait for the nearest deadline (unless it is armed
///    in time for it already) and poll. A poll that would block first
///    marks the loop *parked* (under the inbox's lock,
///    with the inbox empty): only a task posted to a parked loop wakes it —
///    one posted while it runs is taken before it parks. A turn of the
///    loop's thread that answered a blocked caller (a head, the end of a
///    body) while nobody else waits on the loop leaves the loop *idle*
///    instead of polling (below); one that woke tasks for their answers
///    polls without blocking for a few tens of microseconds first, for
///    their next requests.
/// 3. Hand socket readiness to the connections. A connection reads at most
///    a budget per event, then asks to run again after the rest. The tasks
///    the connections wake (async callers awaiting their answers) are
///    woken once every event has been handed out (or, between two events,
///    once the first has waited 1 ms), each once.
/// 4. Pop every timeout due *now* and expire it on this thread — and do
///    the same after every task and every event of steps 1 and 3, so a
///    burst of work never holds a due timeout back. (Not while all that is
///    armed is idle connections' standing entries, whose fire does
///    nothing: see `IdleStanding`; the poll of step 2 still has them
///    popped when they fall due.)
/// 5. Run again the connections that spent their budget, then close the
///    connections whose exchange a timeout failed, oldest first, while no
///    timeout is about to fall due.
///
/// # Who drives a loop
///
/// A blocking caller would otherwise cross threads twice per request —
/// posting to the loop, woken by it — each a sleep and a wake-up when the
/// answer takes longer than a spin. So a loop is driven, one turn at a
/// time, by whoever holds its turn state (`turns`):
///
/// * **its thread**, by default;
/// * **idle**: after answering a blocked caller, while *nobody waits* on
///   the loop (below), the thread sleeps (a condition variable) rather
///   than polling, for at most its *grace* (1 ms) or until its nearest
///   deadline (less its spin and 200 µs, the poll's precise wait doing
///   the rest): the caller's next request, or its next wait, is likely
///   within microseconds;
/// * **a caller**: a thread blocked on an exchange of an idle loop — for
///   a head, a chunk of body or the whole body — runs the loop's turns
///   itself, blocking in the loop's own poll, until what it waits for
///   has come (`drive_until`); then it leaves the loop idle
///   again, or hands it to the thread at once (woken) if anything would
///   otherwise wait for the grace: tasks, sources to run again, aborts,
///   someone waiting on the loop, a deadline due before the thread would
///   wake, the loop closing. Meanwhile the thread looks once
///   per grace: while the caller comes and goes (a release since it last
///   looked) it sleeps on, so a release wakes nobody and the loop is taken
///   back a grace to two after the last one; once it finds a caller
///   still driving after a grace with no release meanwhile, it sleeps
///   until the next release, which wakes it.
///
/// **Nobody waits** on a loop when no exchange on it is *awaited* — polled
/// by a task, which waits for its waker, or waited on by a thread that had
/// no loop to drive, or come from a loop its caller may sleep on
/// (`EventLoop::await_exchange`) — no thread sleeps on a condition
/// variable for news of one of its exchanges, having found the loop
/// driven by someone else (`EventLoop::sleep_on`: counted under the
/// inbox lock, as the loop is left idle under it, and uncounted by whoever
/// wakes it), and no request of the group waits in a pool's queue for a
/// connection that one of its busy exchanges may free
/// (`EventLoopGroup::queued`). Exchanges nobody waits on may be on an idle
/// loop: a thread waiting in turn on a window of its own exchanges then
/// reads them all on its own thread, driving the loop for each wait,
/// while the loop's thread sleeps (with a blocking thread's connections
/// on one loop: see `EventLoopGroup`). What the others have waits for the
/// next driver, or for the thread, at most two graces after the last
/// release.
///
/// A request posted for an idle connection of an idle loop, or for a
/// stream of a shared HTTP/2 connection there, does not wake it
/// (`execute_for_driver`): its caller will drive, or a
/// poll of its future wakes the thread (`wake_if_idle`), or
/// the grace ends. Any other task, a deadline that comes before the
/// thread's wake-up, or a shutdown wakes an idle loop's thread at once.
/// A result delivered off the driver's thread to a driving caller (by
/// the wheel, another loop, a canceller) interrupts its poll
/// (`wake_driver`). So nothing waits on an idle loop but
/// news nobody is blocked on (an idle connection's close, a response
/// nobody polls or waits on yet), for at most two graces after the last
/// release; deadlines stay exact, since
/// whoever drives arms the precise wait, and the thread wakes for the
/// nearest one while the loop is idle. Only the thread ends the loop.
///
/// # Driven by an executor
///
/// A group built with an [`Executor`]
/// ([`EventLoopGroupBuilder::executor`]) is driven by that executor's
/// reactor: its async callers' tasks run on the executor's workers, and a
/// loop driven by its own thread would hand every answer across to a
/// worker, and every next request back, a wake-up each way
/// (`docs/performance-log.md` has the figures). So each loop has a task on the executor that runs
/// its turns on a worker whenever the executor's reactor reports the
/// loop's poll readable, or a task is posted to the parked loop (the
/// post wakes that task, not the poll), never blocking: each turn polls
/// without waiting, first, then runs the tasks posted, and the task waits
/// again once a turn leaves nothing to do (`executor_turns`). The answers
/// reach their tasks on the worker that read them, and their next
/// requests are written by the next turn there.
///
/// A deadline keeper keeps the deadlines meanwhile — a thread of the
/// group's, one a CPU, each keeping several loops (see the `executor`
/// module): it waits, on a precise wait of its own, for the nearest
/// deadline of its loops (woken when a nearer one is armed), expires what
/// is due and closes the connections that failed, taking a loop's turn
/// state for a batch at a time — so a timeout is as exact as on a loop
/// its thread drives, however busy the workers are, and its closes do not
/// hold back the tasks it woke (`DeadlineKeeper::keep`). An executor's
/// turn that finds the state taken waits for the keeper to let go of it
/// (`executor_awaits_turns`), woken then. The loop's thread sleeps until
/// it takes the loop back (the driver becomes its thread again), once
/// the keeper lets the loop go: when the loop closes, or when the
/// executor's task ends (its runtime shut down, or the registration with
/// its reactor failed). Code told on a keeper (a listener of a timeout)
/// stalls every loop that keeper keeps, as code told on a loop's thread
/// stalls that loop (`stalls_here`): a request it sends goes on a loop
/// another keeper keeps, and a wait for one on those it keeps fails with
/// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) rather than wait
/// past a timeout that would never fire. A blocking caller never drives
/// such a loop: it waits, as it would on a loop its thread drives — on a
/// worker of a multi-threaded runtime, inside tokio's `block_in_place`
/// (`block_for_news`), since the task that drives the loop may be that
/// worker's own. A current-thread runtime never drives the loops (they
/// keep their threads): it runs its tasks only while its thread is in its
/// `block_on`, so a blocking wait there, or one while nobody runs it,
/// would get its answer by a timeout only.
///
/// # The timers lock
///
/// The heap sits behind a mutex that only this loop and arming threads take,
/// and never across I/O or an expiry: arming or cancelling from another
/// thread is a lock and an O(log n) heap operation, plus a wake-up only when
/// the new entry becomes the nearest. A posted task would cost an allocation
/// and a wake-up every time. Nothing is dropped under it: what a cancel or a
/// shutdown takes out is dropped after the unlock.
///
/// # Shutting down
///
/// [`EventLoop::shutdown`] first says so ([`EventLoop::is_shutting_down`]),
/// then closes the inbox and the heap: from then on `execute` and `schedule`
/// return [`Rejected`]. Between the two a caller can see "not shutting down"
/// and still be rejected; every caller handles that (timeouts fall back to
/// the wheel). A task `execute` accepted always runs: the loop decides that
/// it may exit — the inbox closed *and* empty — under the inbox's lock, the
/// lock `execute` takes to accept. The thread then closes its connections,
/// failing what they carried, tells the timeouts left on its heap that they
/// will never expire ([`LoopTimeout::stopped`]), and exits.
pub struct EventLoop {
    index: usize,
    clock: SharedClock,
    /// How long before its nearest deadline the loop stops sleeping and
    /// polls without blocking (see [`EventLoopGroupBuilder::spin_before_deadline`]).
    spin: Duration,
    /// How long the loop's thread leaves the loop idle for a caller to
    /// drive it (see "Who drives a loop" above).
    idle_grace: Duration,
    waker: mio::Waker,
    inbox: Mutex<Inbox>,
    /// Wakes the loop's thread while the loop is idle, or while an executor
    /// drives it, to take it back (with the inbox lock).
    idle_wake: Condvar,
    /// What the driver works with: held by whoever drives.
    turns: Mutex<TurnState>,
    /// Exchanges attached to this loop's connections and not ended (see
    /// [`EventLoop::attach_exchange`]): what the tests check the awaited
    /// count against.
    #[cfg(test)]
    attached: AtomicUsize,
    /// Those of them someone polls, or waits on with no loop to drive:
    /// while any is on the loop, it is never left idle (see "Who drives a
    /// loop" above).
    awaited: AtomicUsize,
    /// Threads asleep on a condition variable for news of an exchange of
    /// this loop (see [`EventLoop::sleep_on`]): while any is, the loop is
    /// never left idle.
    asleep: AtomicUsize,
    /// Requests waiting for a connection in the pools of the clients on
    /// this loop's group (see [`EventLoopGroup::queued`]): while any is,
    /// the loop is never left idle.
    queued_in_group: Arc<AtomicUsize>,
    timers: Mutex<Timers>,
    counters: Arc<TimerCounters>,
    /// The standing entries on the heap that nobody holds (see
    /// [`IdleStanding`]), whose fire does nothing: while every entry on
    /// the heap is one, nothing is looked at after a task or an event.
    idle_standing: IdleStanding,
    shutting_down: AtomicBool,
    thread_id: OnceLock<ThreadId>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Wakes the loop when a manual clock advances; kept alive here.
    advance_listener: OnceLock<Arc<AdvanceListener>>,
    /// Interrupts the poll of the keeper of the loop's deadlines while an
    /// executor drives the loop (see "Driven by an executor" above);
    /// `None` for a loop its thread drives.
    keeper: Option<Arc<executor::KeeperWaker>>,
    /// The executor that drives the loop, or drove it until its task
    /// ended; `None` for a loop its thread drives.
    executor: Option<Executor>,
}

impl EventLoop {
    /// Starts loop `index` of a group `group` describes, on `cpu`; with
    /// `keeper`, the waker of its deadline keeper — given exactly when an
    /// executor drives the group.
    fn start(
        index: usize,
        group: &EventLoopGroupBuilder,
        cpu: Option<affinity::Cpu>,
        queued_in_group: Arc<AtomicUsize>,
        keeper: Option<Arc<executor::KeeperWaker>>,
    ) -> io::Result<Arc<EventLoop>> {
        let (clock, spin, idle_grace) = (group.clock.clone(), group.spin, group.idle_grace);
        let name = format!("{}-{index}", group.thread_name);
        let executor = group.driving_executor();
        let by_executor = executor.is_some();
        debug_assert_eq!(keeper.is_some(), by_executor);
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        // The executor's reactor watches a duplicate of the poll's
        // descriptor: its registration never names a closed one.
        let poll_fd = match by_executor {
            true => Some(executor::PollFd::of(&poll)?),
            false => None,
        };
        let turns = TurnState::new(poll, clock.as_manual().is_some())?;
        let heap = CountedHeap::with_capacity(64);
        let event_loop = Arc::new(EventLoop {
            index,
            clock,
            spin,
            idle_grace,
            waker,
            inbox: Mutex::new(Inbox {
                tasks: Vec::new(),
                for_the_thread: false,
                closed: false,
                parked: false,
                driver: if by_executor {
                    Driver::Executor
                } else {
                    Driver::Thread
                },
                thread_wakes_at: None,
                thread_awaits_release: false,
                releases: 0,
                executor_task: None,
                executor_awaits_turns: false,
                kept: false,
                #[cfg(test)]
                wakeups: 0,
            }),
            idle_wake: Condvar::new(),
            turns: Mutex::new(turns),
            #[cfg(test)]
            attached: AtomicUsize::new(0),
            awaited: AtomicUsize::new(0),
            asleep: AtomicUsize::new(0),
            queued_in_group,
            counters: heap.counters(),
            idle_standing: IdleStanding::default(),
            timers: Mutex::new(Timers {
                heap,
                closed: false,
                forced_expiry: false,
            }),
            shutting_down: AtomicBool::new(false),
            thread_id: OnceLock::new(),
            thread: Mutex::new(None),
            advance_listener: OnceLock::new(),
            keeper,
            executor: executor.cloned(),
        });
        if let Some(manual) = event_loop.clock.as_manual() {
            let weak = Arc::downgrade(&event_loop);
            let listener: Arc<AdvanceListener> = Arc::new(move |_| {
                if let Some(event_loop) = weak.upgrade() {
                    let _ = event_loop.waker.wake();
                    event_loop.wake_deadline_keeper();
                }
            });
            manual.on_advance(Arc::downgrade(&listener));
            let _ = event_loop.advance_listener.set(listener);
        }
        let runner = event_loop.clone();
        // Started inside the group's `without_pinning` (its `build`): on
        // the CPUs of the thread that builds it, never on a loop's one.
        let handle = thread::Builder::new().name(name).spawn(move || {
            let _pinned = affinity::LoopThread::pin(cpu);
            runner.run()
        })?;
        let _ = event_loop.thread_id.set(handle.thread().id());
        *lock(&event_loop.thread) = Some(handle);
        if let (Some(executor), Some(poll_fd)) = (executor, poll_fd) {
            executor.spawn_driver(event_loop.clone(), poll_fd);
        }
        Ok(event_loop)
    }

    /// Position of this loop in its group.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The loop's thread id.
    pub fn thread_id(&self) -> ThreadId {
        *self.thread_id.get().expect("set before the loop is shared")
    }

    /// Whether the calling thread runs this loop's turns: its own thread,
    /// or a caller driving it (see "Who drives a loop" above).
    pub fn in_loop(&self) -> bool {
        // Two thread-local reads (the loop's own thread sets `LOOP_THREAD`
        // first thing, in `run`), where asking the thread for its id
        // clones and drops its handle (two atomic operations).
        let here = |cell: &Cell<*const EventLoop>| std::ptr::eq(cell.get(), self);
        LOOP_THREAD.with(here) || DRIVING.with(here)
    }

    /// Whether a blocking wait on the calling thread for news only this
    /// loop can bring would never end: the thread is this loop's own, or
    /// a caller's driving it (inside a turn: a listener told there, a
    /// waker that polls its task inline), so the loop cannot turn while it
    /// waits. So too on the deadline keeper that keeps the loop (see
    /// "Driven by an executor" above), expiring another loop it keeps: the
    /// loop's timeouts would not fire while it waits. Not so on a caller's
    /// thread between its drives (its wait drives the loop), nor on another
    /// loop's thread.
    ///
    /// Three thread-local reads, no lock but on that keeper: a blocking
    /// wait asks only once [`on_any_loop`] says the thread runs some loop.
    /// A caller driving this loop from inside a turn of another that it
    /// drives in turn (a listener's wait, nested) is not seen: only the
    /// innermost loop it drives is kept.
    pub(crate) fn stalls_here(&self) -> bool {
        self.in_loop() || self.kept_here()
    }

    /// Exchanges attached to the loop's connections now, how many of them
    /// are awaited, threads asleep on the loop, and requests of its group
    /// waiting for a connection.
    #[cfg(test)]
    pub(crate) fn attached_now(&self) -> [usize; 4] {
        [
            &self.attached,
            &self.awaited,
            &self.asleep,
            &self.queued_in_group,
        ]
        .map(|count| count.load(Ordering::SeqCst))
    }

    /// Whether [`shutdown`](Self::shutdown) has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Runs `task` on the loop, soon: on its thread, or on the thread of a
    /// caller driving it (see "Who drives a loop" above). Once it returns
    /// `Ok`, the task runs, even if the loop is shut down meanwhile.
    pub fn execute(
        &self,
        task: impl FnOnce(&mut LoopContext<'_>) + Send + 'static,
    ) -> Result<(), Rejected> {
        self.execute_boxed(Box::new(task))
    }

    pub(crate) fn execute_boxed(&self, task: LoopTask) -> Result<(), Rejected> {
        self.post(task, false)
    }

    /// [`execute`](Self::execute) for a task whose poster blocks on the
    /// loop next (a request on an idle connection of this loop, the caller
    /// about to wait for its answer): an idle loop is not woken for it —
    /// that caller drives the loop, or a poll of its future wakes it
    /// ([`wake_if_idle`](Self::wake_if_idle)), or the loop's thread takes
    /// it at the end of its grace.
    pub(crate) fn execute_for_driver(&self, task: LoopTask) -> Result<(), Rejected> {
        self.post(task, true)
    }

    fn post(&self, task: LoopTask, for_driver: bool) -> Result<(), Rejected> {
        let wake = {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                drop(inbox);
                drop(task);
                return Err(Rejected);
            }
            inbox.tasks.push(task);
            inbox.for_the_thread |= !for_driver;
            // One wake-up for a parked driver; a running one drains the
            // inbox before it parks again.
            let wake = match inbox.driver {
                Driver::Idle if for_driver => Wake::None,
                Driver::Idle => Wake::Thread,
                Driver::Executor if inbox.parked => match &inbox.executor_task {
                    Some(task) => Wake::Task(task.clone()),
                    None => Wake::Poll,
                },
                Driver::Thread | Driver::Caller if inbox.parked => Wake::Poll,
                Driver::Thread | Driver::Caller | Driver::Executor => Wake::None,
            };
            inbox.parked &= matches!(wake, Wake::None | Wake::Thread);
            #[cfg(test)]
            {
                inbox.wakeups += u64::from(!matches!(wake, Wake::None));
            }
            wake
        };
        match wake {
            Wake::None => {}
            Wake::Poll => drop(self.waker.wake()),
            Wake::Thread => self.idle_wake.notify_one(),
            Wake::Task(task) => task.wake(),
        }
        Ok(())
    }

    /// If the loop is idle, its thread takes it back at once: what a poll
    /// does (a future's, a body's), which waits without driving — for a
    /// request posted for a driver ([`execute_for_driver`](Self::execute_for_driver))
    /// or a body a caller drove the loop for the head of.
    pub(crate) fn wake_if_idle(&self) {
        let mut inbox = lock(&self.inbox);
        if inbox.driver == Driver::Idle {
            inbox.driver = Driver::Thread;
            drop(inbox);
            self.idle_wake.notify_one();
        }
    }

    /// Interrupts the blocking poll of the loop's driver, and wakes the
    /// loop's thread if the loop is idle, from any thread but the driver's.
    fn interrupt(&self) {
        let _ = self.waker.wake();
        self.keeper_looks_again();
        // The thread of a loop an executor drives sleeps until its keeper
        // lets the loop go, or — none having taken it yet — until it closes.
        if matches!(lock(&self.inbox).driver, Driver::Idle | Driver::Executor) {
            self.idle_wake.notify_one();
        }
    }

    /// Wakes the driving caller blocked in this loop's poll, from another
    /// thread: what a result delivered elsewhere than on the loop does for
    /// a caller driving it (see [`drive_until`](Self::drive_until)).
    pub(crate) fn wake_driver(&self) {
        if !self.in_loop() {
            let _ = self.waker.wake();
        }
    }

    /// An exchange was attached to one of this loop's connections (`true`:
    /// by the connection, on the loop's driver, so the loop is not idle)
    /// or left it (`false`); `awaited`: whether it is
    /// [awaited](Self::await_exchange).
    pub(crate) fn attach_exchange(&self, attached: bool, awaited: bool) {
        #[cfg(test)]
        match attached {
            true => self.attached.fetch_add(1, Ordering::SeqCst),
            false => self.attached.fetch_sub(1, Ordering::SeqCst),
        };
        if awaited {
            match attached {
                true => self.awaited.fetch_add(1, Ordering::SeqCst),
                false => self.awaited.fetch_sub(1, Ordering::SeqCst),
            };
        }
    }

    /// An exchange attached to this loop became awaited: a task polls it
    /// (and waits for its waker), or a thread waits on it with no loop to
    /// drive — news of it must not wait for a driver. Once per exchange;
    /// undone when it leaves ([`attach_exchange`](Self::attach_exchange)).
    /// An idle loop's thread takes it back at once.
    pub(crate) fn await_exchange(&self) {
        self.awaited.fetch_add(1, Ordering::SeqCst);
        self.wake_if_idle();
    }

    /// A thread is about to sleep on a condition variable for news of an
    /// exchange of this loop (it could not drive it): while the returned
    /// [`Asleep`] lives, the loop is never left idle. Dropped by whoever
    /// wakes that thread, before they wake it, or by the thread itself.
    /// `None` if the loop is idle now: the thread drives it instead.
    ///
    /// Decided under the inbox lock, as leaving a loop idle is: either the
    /// loop goes idle first and the thread sees it, or the thread is
    /// counted first and the loop stays with its driver.
    pub(crate) fn sleep_on(self: &Arc<Self>) -> Option<Asleep> {
        let inbox = lock(&self.inbox);
        if inbox.driver == Driver::Idle && !inbox.closed {
            return None;
        }
        self.asleep.fetch_add(1, Ordering::SeqCst);
        Some(Asleep(self.clone()))
    }

    /// Leaves the loop idle, for a test: a task that answers a blocked
    /// caller, with no exchange on the loop; returns once the loop's
    /// thread has left it idle.
    #[cfg(test)]
    pub(crate) fn leave_idle(&self) {
        let (ran, told) = std::sync::mpsc::channel();
        self.execute(move |_| {
            answered_a_waiting_caller();
            let _ = ran.send(());
        })
        .unwrap();
        told.recv_timeout(Duration::from_secs(10)).unwrap();
        let give_up = Instant::now() + Duration::from_secs(10);
        while lock(&self.inbox).driver != Driver::Idle {
            assert!(Instant::now() < give_up, "the loop was never left idle");
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether nobody waits on this loop's news: no exchange on it is
    /// awaited, no thread sleeps on one, and no request of the group waits
    /// for a connection (this loop may carry the one it needs freed). Only
    /// then may it be left idle with exchanges on it: what they have is
    /// news nobody is blocked on.
    fn nobody_waits(&self) -> bool {
        [&self.awaited, &self.asleep, &*self.queued_in_group]
            .iter()
            .all(|count| count.load(Ordering::SeqCst) == 0)
    }

    /// Hands the source `source` readiness again (`again` set), from any
    /// thread: what a body pipe does when room or data comes for the
    /// connection that waits on it. Ignored once the source has gone or the
    /// loop is shutting down (its sources are closed then anyway).
    pub(crate) fn wake_source(&self, source: SourceRef) {
        let _ = self.execute_boxed(Box::new(move |cx| cx.ready_again_now(source)));
    }

    /// [`wake_source`](Self::wake_source) for a caller that drives this
    /// loop next if it is idle (see
    /// [`execute_for_driver`](Self::execute_for_driver)).
    pub(crate) fn wake_source_for_driver(&self, source: SourceRef) {
        let _ = self.execute_for_driver(Box::new(move |cx| cx.ready_again_now(source)));
    }

    /// Arms `timeout` on this loop's heap for `deadline`; it expires on
    /// this loop (its thread, or a caller driving it). From any thread:
    /// O(log n), no allocation once warm.
    pub fn schedule(
        &self,
        deadline: Instant,
        timeout: Arc<dyn LoopTimeout>,
        tag: u64,
    ) -> Result<LoopTimerKey, Rejected> {
        self.schedule_entry(deadline, Entry::Timeout(timeout, tag))
    }

    fn schedule_entry(&self, deadline: Instant, entry: Entry) -> Result<LoopTimerKey, Rejected> {
        let (handle, becomes_nearest) = {
            let mut timers = lock(&self.timers);
            if timers.closed {
                drop(timers);
                drop(entry);
                return Err(Rejected);
            }
            let nearest = timers.heap.next_deadline();
            let handle = timers.heap.insert(deadline, entry);
            (handle, nearest.is_none_or(|nearest| deadline < nearest))
        };
        if becomes_nearest {
            self.wake_deadline_keeper();
        }
        // Its driver re-arms its wait before polling anyway.
        if becomes_nearest && !self.in_loop() {
            let _ = self.waker.wake();
            let inbox = lock(&self.inbox);
            let sooner = |until: Instant| self.idle_wake_at(deadline).is_none_or(|at| at < until);
            if inbox.driver == Driver::Idle && inbox.thread_wakes_at.is_none_or(sooner) {
                drop(inbox);
                self.idle_wake.notify_one();
            }
        }
        Ok(LoopTimerKey(handle))
    }

    /// Disarms an entry. `false` if it already fired, was cancelled, or the
    /// loop has shut down; never panics or fails otherwise. From another
    /// thread it takes the timers lock, as an arm does.
    pub fn cancel(&self, key: LoopTimerKey) -> bool {
        let removed = lock(&self.timers).heap.cancel(key.0);
        // Dropped here, after the unlock.
        removed.is_some()
    }

    /// Timeouts armed now on this loop, fired so far, and their lag. An
    /// idle connection's standing entry, armed with nobody holding it, is
    /// no timeout: not counted armed, fired or cancelled — but its fires
    /// are in the lag histogram, as every entry taken off the heap is.
    pub fn stats(&self) -> TimerStats {
        self.idle_standing.take_out(self.counters.snapshot())
    }

    /// What the standing entries on this loop's heap did while nobody held
    /// them; their owners keep it up to date.
    pub(crate) fn idle_standing(&self) -> &IdleStanding {
        &self.idle_standing
    }

    /// Stops the loop: rejects new work, runs the tasks already accepted,
    /// closes every connection (failing their exchanges with
    /// [`Error::ClientClosed`](crate::Error::ClientClosed)), tells the
    /// timeouts left armed that they were stopped, and joins the thread
    /// (unless called on it, or on the deadline keeper that keeps the
    /// loop: see "Driven by an executor" above).
    pub fn shutdown(&self) {
        self.begin_shutdown();
        // On the loop's own thread: it ends after this turn. On its
        // deadline keeper (expiring another loop it keeps, say): the loop's
        // thread takes the loop only once this keeper lets it go, after
        // this expiry, and ends it then.
        if self.stalls_here() {
            return;
        }
        // Joined under the lock: a second caller returns once the loop
        // has ended too, not as soon as the first has taken the handle.
        let mut thread = lock(&self.thread);
        if let Some(handle) = thread.take() {
            let _ = handle.join();
        }
    }

    /// The half of [`shutdown`](Self::shutdown) that does not wait: the
    /// loop rejects new work, and its thread (or a caller driving it) ends
    /// it after its turn, telling the timeouts left armed that they were
    /// stopped.
    pub(crate) fn begin_shutdown(&self) {
        self.stop_taking_work();
        self.interrupt();
    }

    /// Says so, then closes the inbox and the heap.
    fn stop_taking_work(&self) {
        self.shutting_down.store(true, Ordering::Release);
        lock(&self.inbox).closed = true;
        lock(&self.timers).closed = true;
    }
}

/// A thread asleep on news of an exchange of a loop (see
/// [`EventLoop::sleep_on`]); uncounted when dropped.
pub(crate) struct Asleep(Arc<EventLoop>);

impl Drop for Asleep {
    fn drop(&mut self) {
        self.0.asleep.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What [`EventLoop::post`] wakes.
#[derive(Debug)]
enum Wake {
    None,
    /// The driver's blocking poll.
    Poll,
    /// The loop's thread, asleep while the loop is idle.
    Thread,
    /// The executor's task that drives the loop.
    Task(std::task::Waker),
}

thread_local! {
    /// The loop this thread drives as a caller, if any (see
    /// [`EventLoop::drive_until`]).
    static DRIVING: Cell<*const EventLoop> = const { Cell::new(std::ptr::null()) };
    /// On a loop's own thread: that loop (null elsewhere).
    static LOOP_THREAD: Cell<*const EventLoop> = const { Cell::new(std::ptr::null()) };
}

/// Whether the calling thread runs some loop's turns (a loop's thread, or a
/// caller driving one): what it posts is not for a driver, since it does
/// not wait on the exchange it posts for (a redispatch, a redirect's next
/// hop). Two thread-local reads: what a blocking wait looks at first,
/// before it asks which loop (see [`EventLoop::stalls_here`]).
pub(crate) fn on_any_loop() -> bool {
    !LOOP_THREAD.with(Cell::get).is_null() || !DRIVING.with(Cell::get).is_null()
}

impl TimeoutScheduler for EventLoop {
    fn thread_id(&self) -> ThreadId {
        EventLoop::thread_id(self)
    }

    fn is_shutting_down(&self) -> bool {
        EventLoop::is_shutting_down(self)
    }

    fn schedule(
        &self,
        deadline: Instant,
        timeout: Arc<dyn LoopTimeout>,
        tag: u64,
    ) -> Result<LoopTimerKey, Rejected> {
        EventLoop::schedule(self, deadline, timeout, tag)
    }

    fn cancel(&self, key: LoopTimerKey) -> bool {
        EventLoop::cancel(self, key)
    }
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop")
            .field("index", &self.index)
            .field("thread_id", &self.thread_id.get())
            .field("shutting_down", &self.is_shutting_down())
            .finish()
    }
}
#[cfg(test)]
mod tests;
