//! The I/O threads: [`EventLoop`] and [`EventLoopGroup`].
//!
//! A loop is one thread with a mio `Poll`, an inbox of tasks, a deadline
//! heap with a precise wait, and the connections registered on it. It
//! knows nothing of HTTP or exchanges: a connection is a `Source` it hands
//! readiness, timers and aborts to (see [`LoopContext`]); a timeout is a
//! [`LoopTimeout`] it expires. How one turn goes, and the contract with the
//! threads that talk to a loop, are documented on [`EventLoop`].

mod affinity;
mod group;
mod scheduler;
mod source;
mod turn;
pub use affinity::without_pinning;
pub(crate) use turn::answered_a_waiting_caller;
#[cfg(test)]
pub(crate) use turn::take_answered_a_waiting_caller;
mod waker;

pub use group::{EventLoopGroup, EventLoopGroupBuilder, MAX_EVENT_LOOPS};
pub use scheduler::{LoopTimeout, LoopTimerKey, Rejected, SchedulerFactory, TimeoutScheduler};
pub use source::LoopContext;
pub(crate) use source::{Readiness, Source, SourceRef};
pub(crate) use waker::SourceWaker;

use crate::sync::lock;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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

struct Inbox {
    tasks: Vec<LoopTask>,
    closed: bool,
    /// The loop is in, or about to enter, a poll that blocks: the next task
    /// posted wakes it. While false the loop looks at its inbox before it
    /// blocks again, so posting costs no wake-up.
    parked: bool,
    /// Wake-ups posted for tasks.
    #[cfg(test)]
    wakeups: u64,
}

struct Timers {
    heap: CountedHeap<Entry>,
    closed: bool,
}

/// One I/O thread, and what it owns.
///
/// # What a loop owns
///
/// One thread, one mio `Poll`, and:
///
/// * the connections registered on it: only this thread touches their
///   sockets and codec state, for the whole life of each connection;
/// * an inbox of tasks that other threads post ([`EventLoop::execute`]),
///   with a mio `Waker` to interrupt the poll;
/// * a deadline heap of timeouts and a precise wait armed for its nearest
///   deadline, so a timeout fires when it is due rather than at the next
///   tick of a shared wheel.
///
/// # One turn of the loop
///
/// 1. Run the tasks in the inbox (at most 64, then poll without blocking).
/// 2. Arm the precise wait for the nearest deadline and poll. A poll that
///    would block first marks the loop *parked* (under the inbox's lock,
///    with the inbox empty): only a task posted to a parked loop wakes it —
///    one posted while it runs is taken before it parks. A turn that
///    answered a caller spinning for its answer, or ended a body a thread
///    was blocked for, first *lingers*: polls
///    without blocking, yielding between polls, for up to 30 µs, so that
///    caller's next request (a sequential client's) is taken without a
///    wake-up or a sleep.
/// 3. Hand socket readiness to the connections. A connection reads at most
///    a budget per event, then asks to run again after the rest.
/// 4. Pop every timeout due *now* and expire it on this thread — and do
///    the same after every task and every event of steps 1 and 3, so a
///    burst of work never holds a due timeout back.
/// 5. Run again the connections that spent their budget, then close the
///    connections whose exchange a timeout failed, oldest first, while no
///    timeout is about to fall due.
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
    /// How long the loop polls without blocking after answering a waiting
    /// caller, for that caller's next request (see step 2 above).
    linger: Duration,
    waker: mio::Waker,
    inbox: Mutex<Inbox>,
    timers: Mutex<Timers>,
    counters: Arc<TimerCounters>,
    shutting_down: AtomicBool,
    thread_id: OnceLock<ThreadId>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Wakes the loop when a manual clock advances; kept alive here.
    advance_listener: OnceLock<Arc<AdvanceListener>>,
}

impl EventLoop {
    fn start(
        index: usize,
        clock: SharedClock,
        spin: Duration,
        linger: Duration,
        name: String,
        cpu: Option<affinity::Cpu>,
    ) -> io::Result<Arc<EventLoop>> {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let heap = CountedHeap::with_capacity(64);
        let event_loop = Arc::new(EventLoop {
            index,
            clock,
            spin,
            linger,
            waker,
            inbox: Mutex::new(Inbox {
                tasks: Vec::new(),
                closed: false,
                parked: false,
                #[cfg(test)]
                wakeups: 0,
            }),
            counters: heap.counters(),
            timers: Mutex::new(Timers {
                heap,
                closed: false,
            }),
            shutting_down: AtomicBool::new(false),
            thread_id: OnceLock::new(),
            thread: Mutex::new(None),
            advance_listener: OnceLock::new(),
        });
        if let Some(manual) = event_loop.clock.as_manual() {
            let weak = Arc::downgrade(&event_loop);
            let listener: Arc<AdvanceListener> = Arc::new(move |_| {
                if let Some(event_loop) = weak.upgrade() {
                    let _ = event_loop.waker.wake();
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
            runner.run(poll)
        })?;
        let _ = event_loop.thread_id.set(handle.thread().id());
        *lock(&event_loop.thread) = Some(handle);
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

    /// Whether the calling thread is this loop's.
    pub fn in_loop(&self) -> bool {
        thread::current().id() == self.thread_id()
    }

    /// Whether [`shutdown`](Self::shutdown) has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Runs `task` on the loop's thread, soon. Once it returns `Ok`, the
    /// task runs, even if the loop is shut down meanwhile.
    pub fn execute(
        &self,
        task: impl FnOnce(&mut LoopContext<'_>) + Send + 'static,
    ) -> Result<(), Rejected> {
        self.execute_boxed(Box::new(task))
    }

    pub(crate) fn execute_boxed(&self, task: LoopTask) -> Result<(), Rejected> {
        let parked = {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                drop(inbox);
                drop(task);
                return Err(Rejected);
            }
            inbox.tasks.push(task);
            // One wake-up for a parked loop; a running one drains its inbox
            // before it parks again.
            let parked = std::mem::replace(&mut inbox.parked, false);
            #[cfg(test)]
            {
                inbox.wakeups += u64::from(parked);
            }
            parked
        };
        if parked {
            let _ = self.waker.wake();
        }
        Ok(())
    }

    /// Hands the source `source` readiness again (`again` set), from any
    /// thread: what a body pipe does when room or data comes for the
    /// connection that waits on it. Ignored once the source has gone or the
    /// loop is shutting down (its sources are closed then anyway).
    pub(crate) fn wake_source(&self, source: SourceRef) {
        let _ = self.execute_boxed(Box::new(move |cx| cx.ready_again_now(source)));
    }

    /// Arms `timeout` on this loop's heap for `deadline`; it expires on this
    /// loop's thread. From any thread: O(log n), no allocation once warm.
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
        // On its own thread the loop re-arms its wait before polling anyway.
        if becomes_nearest && !self.in_loop() {
            let _ = self.waker.wake();
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

    /// Timeouts armed now on this loop, fired so far, and their lag.
    pub fn stats(&self) -> TimerStats {
        self.counters.snapshot()
    }

    /// Stops the loop: rejects new work, runs the tasks already accepted,
    /// closes every connection (failing their exchanges with
    /// [`Error::ClientClosed`](crate::Error::ClientClosed)), tells the
    /// timeouts left armed that they were stopped, and joins the thread
    /// (unless called on it).
    pub fn shutdown(&self) {
        self.stop_taking_work();
        let _ = self.waker.wake();
        // On the loop's own thread: it ends after this turn.
        if self.in_loop() {
            return;
        }
        // Joined under the lock: a second caller returns once the loop
        // has ended too, not as soon as the first has taken the handle.
        let mut thread = lock(&self.thread);
        if let Some(handle) = thread.take() {
            let _ = handle.join();
        }
    }

    /// Says so, then closes the inbox and the heap.
    fn stop_taking_work(&self) {
        self.shutting_down.store(true, Ordering::Release);
        lock(&self.inbox).closed = true;
        lock(&self.timers).closed = true;
    }
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
