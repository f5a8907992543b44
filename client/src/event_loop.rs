//! [`EventLoop`] and [`EventLoopGroup`]: the I/O threads.
//!
//! How a loop works, and its contract with the threads that talk to it,
//! is documented on [`EventLoop`].

use crate::conn::{self, Conn};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};
use tickless_timer::{
    AdvanceListener, DeadlineHeap, HeapHandle, PreciseWait, SharedClock, SystemClock,
    TimerCounters, TimerStats,
};

const WAKER: mio::Token = mio::Token(usize::MAX);
const TIMER: mio::Token = mio::Token(usize::MAX - 1);

/// Tasks run per turn before the loop looks at its sockets again.
const MAX_TASKS_PER_TURN: usize = 64;

/// The most loops a group starts: each is a thread, and a loop per
/// connection is already far past the point where more loops help.
pub const MAX_EVENT_LOOPS: usize = 1024;

/// Aborted connections wait while a timeout falls due sooner than this.
const ABORT_GAP: Duration = Duration::from_millis(1);

/// A task run on a loop's thread.
pub type LoopTask = Box<dyn FnOnce(&mut LoopContext<'_>) + Send + 'static>;

/// Something a loop's heap expires: the exchange's timeouts, or a probe's.
///
/// Entries are `(Arc<dyn LoopTimeout>, tag)` pairs, so arming allocates
/// nothing: the `Arc` already exists and the tag says which timeout it is.
pub trait LoopTimeout: Send + Sync + 'static {
    /// Called on the loop's thread once the entry's deadline has passed.
    fn expire(self: Arc<Self>, tag: u32, cx: &mut LoopContext<'_>);
}

/// Identifies an entry in one loop's heap, for cancelling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopTimerKey(HeapHandle);

/// The loop is shutting down and takes no more work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event loop is shutting down")]
pub struct Rejected;

/// Where the event-loop timeouts of a connection are armed: its loop.
///
/// [`EventLoop`] is the implementation; the trait exists so that a test can
/// stand a double in front of a loop (see
/// [`EventLoopGroupBuilder::timeout_scheduler`]).
pub trait TimeoutScheduler: Send + Sync + 'static {
    /// The thread expiries run on.
    fn thread_id(&self) -> ThreadId;
    /// Whether the loop has begun shutting down. `false` does not promise
    /// that the next `schedule` succeeds.
    fn is_shutting_down(&self) -> bool;
    /// Arms `timeout` (with `tag`) for `deadline`.
    fn schedule(
        &self,
        deadline: Instant,
        timeout: Arc<dyn LoopTimeout>,
        tag: u32,
    ) -> Result<LoopTimerKey, Rejected>;
    /// Disarms an entry; `false` if it already fired, was cancelled, or the
    /// loop is gone. Never fails otherwise.
    fn cancel(&self, key: LoopTimerKey) -> bool;
}

type HeapEntry = (Arc<dyn LoopTimeout>, u32);

struct Inbox {
    tasks: Vec<LoopTask>,
    closed: bool,
}

struct Timers {
    heap: DeadlineHeap<HeapEntry>,
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
/// * a [`DeadlineHeap`] of timeouts and a [`PreciseWait`] armed for its
///   nearest deadline, so a timeout fires when it is due rather than at the
///   next tick of a shared wheel.
///
/// # One turn of the loop
///
/// 1. Run the tasks in the inbox.
/// 2. Arm the precise wait for the nearest deadline and poll.
/// 3. Hand socket readiness to the connections.
/// 4. Pop every timeout due *now* and expire it on this thread — and do
///    the same after every task and every event of steps 1 and 3, so a
///    burst of work never holds a due timeout back.
///
/// # The timers lock
///
/// The heap sits behind a mutex that only this loop and arming threads take,
/// and never across I/O or an expiry: arming or cancelling from another
/// thread (the pooled path starts an exchange from the caller's thread) is a
/// lock and an O(log n) heap operation, plus a wake-up only when the new
/// entry becomes the nearest. A posted task would cost an allocation and a
/// wake-up every time.
///
/// # Shutting down
///
/// [`EventLoop::shutdown`] first says so ([`EventLoop::is_shutting_down`]),
/// then closes the inbox and the heap: from then on `execute` and `schedule`
/// return [`Rejected`]. Between the two a caller can see "not shutting down"
/// and still be rejected; every caller handles that (timeouts fall back to
/// the wheel). The thread then closes its connections, failing what they
/// carried, and exits.
pub struct EventLoop {
    index: usize,
    clock: SharedClock,
    /// How long before its nearest deadline the loop stops sleeping and
    /// polls without blocking (see [`EventLoopGroupBuilder::spin_before_deadline`]).
    spin: Duration,
    waker: mio::Waker,
    inbox: Mutex<Inbox>,
    timers: Mutex<Timers>,
    shutting_down: AtomicBool,
    counters: TimerCounters,
    thread_id: OnceLock<ThreadId>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Wakes the loop when a manual clock advances; kept alive here.
    advance_listener: OnceLock<Arc<AdvanceListener>>,
}

/// What a task or an expiry gets on the loop's thread.
pub struct LoopContext<'a> {
    pub(crate) event_loop: &'a Arc<EventLoop>,
    pub(crate) registry: &'a mio::Registry,
    pub(crate) conns: &'a mut slab::Slab<Conn>,
    /// Connections whose exchange a timeout just failed, as `(key,
    /// exchange id)`, closed when no timeout is about to fall due (see
    /// `EventLoop::close_aborted`).
    pub(crate) aborts: &'a mut Vec<(usize, u64)>,
}

impl LoopContext<'_> {
    /// The loop this runs on.
    pub fn event_loop(&self) -> &Arc<EventLoop> {
        self.event_loop
    }
}

impl EventLoop {
    fn start(
        index: usize,
        clock: SharedClock,
        spin: Duration,
        name: String,
    ) -> io::Result<Arc<EventLoop>> {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let event_loop = Arc::new(EventLoop {
            index,
            clock,
            spin,
            waker,
            inbox: Mutex::new(Inbox {
                tasks: Vec::new(),
                closed: false,
            }),
            timers: Mutex::new(Timers {
                heap: DeadlineHeap::with_capacity(64),
                closed: false,
            }),
            shutting_down: AtomicBool::new(false),
            counters: TimerCounters::default(),
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
        let handle = thread::Builder::new()
            .name(name)
            .spawn(move || runner.run(poll))?;
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

    /// Runs `task` on the loop's thread, soon.
    pub fn execute(
        &self,
        task: impl FnOnce(&mut LoopContext<'_>) + Send + 'static,
    ) -> Result<(), Rejected> {
        self.execute_boxed(Box::new(task))
    }

    pub(crate) fn execute_boxed(&self, task: LoopTask) -> Result<(), Rejected> {
        let was_empty = {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                return Err(Rejected);
            }
            inbox.tasks.push(task);
            inbox.tasks.len() == 1
        };
        // A non-empty inbox has already woken the loop, which will drain it.
        if was_empty {
            let _ = self.waker.wake();
        }
        Ok(())
    }

    /// Arms `timeout` on this loop's heap for `deadline`; it expires on this
    /// loop's thread. From any thread: O(log n), no allocation once warm.
    pub fn schedule(
        &self,
        deadline: Instant,
        timeout: Arc<dyn LoopTimeout>,
        tag: u32,
    ) -> Result<LoopTimerKey, Rejected> {
        let becomes_nearest = {
            let mut timers = lock(&self.timers);
            if timers.closed {
                return Err(Rejected);
            }
            let nearest = timers.heap.next_deadline();
            let handle = timers.heap.insert(deadline, (timeout, tag));
            self.counters.armed();
            let becomes_nearest = nearest.is_none_or(|nearest| deadline < nearest);
            (handle, becomes_nearest)
        };
        // On its own thread the loop re-arms its wait before polling anyway.
        if becomes_nearest.1 && !self.in_loop() {
            let _ = self.waker.wake();
        }
        Ok(LoopTimerKey(becomes_nearest.0))
    }

    /// Disarms an entry. `false` if it already fired, was cancelled, or the
    /// loop has shut down; never panics or fails otherwise.
    pub fn cancel(&self, key: LoopTimerKey) -> bool {
        let removed = lock(&self.timers).heap.cancel(key.0);
        match removed {
            Some(entry) => {
                self.counters.cancelled();
                drop(entry);
                true
            }
            None => false,
        }
    }

    /// Timeouts armed now on this loop, fired so far, and their lag.
    pub fn stats(&self) -> TimerStats {
        self.counters.snapshot()
    }

    /// Stops the loop: rejects new work, closes every connection (failing
    /// their exchanges with [`Error::ClientClosed`](crate::Error::ClientClosed)),
    /// drops armed timeouts, and joins the thread (unless called on it).
    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        lock(&self.inbox).closed = true;
        lock(&self.timers).closed = true;
        let _ = self.waker.wake();
        let handle = lock(&self.thread).take();
        if let Some(handle) = handle {
            if handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }

    fn run(self: Arc<Self>, mut poll: mio::Poll) {
        let mut events = mio::Events::with_capacity(256);
        // Without the OS timer, the poll timeout carries the deadline.
        let mut wait = PreciseWait::new(poll.registry(), TIMER).ok();
        let manual_clock = self.clock.as_manual().is_some();
        // An owned handle, so the context can live across `poll`, which
        // borrows the `Poll` mutably.
        let registry = match poll.registry().try_clone() {
            Ok(registry) => registry,
            Err(_) => return self.fail_hard(),
        };
        let mut conns = slab::Slab::new();
        let mut aborts = Vec::new();
        let mut cx = LoopContext {
            event_loop: &self,
            registry: &registry,
            conns: &mut conns,
            aborts: &mut aborts,
        };
        let mut tasks: VecDeque<LoopTask> = VecDeque::new();
        let mut due: Vec<(Instant, HeapEntry)> = Vec::new();
        loop {
            // Timeouts are checked after every task and every event, not
            // only once per turn: a burst of work (a thousand connects
            // posted at once) must not make a due timeout wait behind it.
            //
            // Tasks run at most MAX_TASKS_PER_TURN at a time, then the loop
            // polls without blocking: a thousand connects posted at once
            // must not hold back the I/O of the connections already open.
            // Every turn takes the whole inbox: a poll consumes the wake-up
            // of tasks posted meanwhile, so none may stay behind in it.
            tasks.extend(lock(&self.inbox).tasks.drain(..));
            for task in tasks.drain(..tasks.len().min(MAX_TASKS_PER_TURN)) {
                // A panicking task (tasks are public: `execute`) must not
                // take the loop and every connection on it down.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(&mut cx)));
                self.expire_due(&mut cx, &mut due);
            }
            if self.is_shutting_down() && tasks.is_empty() && lock(&self.inbox).tasks.is_empty() {
                conn::close_all(&mut cx);
                break;
            }

            let now = self.clock.now();
            let nearest = lock(&self.timers).heap.next_deadline();
            let timeout = match (nearest, manual_clock) {
                _ if !tasks.is_empty() => Some(Duration::ZERO),
                (Some(deadline), _) if deadline.saturating_duration_since(now) <= self.spin => {
                    Some(Duration::ZERO)
                }
                // A manual clock wakes the loop through the waker when advanced.
                (_, true) => None,
                (nearest, false) => match wait.as_mut() {
                    Some(wait) => wait
                        .arm(nearest.map(|d| d - self.spin), now)
                        .unwrap_or_else(|_| {
                            nearest.map(|deadline| deadline.saturating_duration_since(now))
                        }),
                    None => nearest.map(|deadline| deadline.saturating_duration_since(now)),
                },
            };
            if let Err(error) = poll.poll(&mut events, timeout) {
                if error.kind() != io::ErrorKind::Interrupted {
                    // A broken poll cannot be waited on again: stop taking
                    // work and fail what this loop carries rather than spin.
                    self.fail_hard();
                }
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    TIMER => {
                        if let Some(wait) = wait.as_mut() {
                            wait.acknowledge();
                        }
                    }
                    token => {
                        // A panic in the caller's code (a listener, a body
                        // callback) ends that connection, not the loop.
                        let ready = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            conn::ready(&mut cx, token.0, event)
                        }));
                        if ready.is_err() {
                            conn::fail_after_panic(&mut cx, token.0);
                        }
                    }
                }
                self.expire_due(&mut cx, &mut due);
            }
            self.expire_due(&mut cx, &mut due);
            self.close_aborted(&mut cx, &mut due);
        }
        let leftover = lock(&self.timers).heap.drain().count();
        self.counters.discarded(leftover);
    }

    /// Expires every timeout due now. `due` is scratch space kept across calls.
    fn expire_due(&self, cx: &mut LoopContext<'_>, due: &mut Vec<(Instant, HeapEntry)>) {
        let now = self.clock.now();
        {
            let mut timers = lock(&self.timers);
            while let Some(entry) = timers.heap.pop_due(now) {
                due.push(entry);
            }
        }
        if due.is_empty() {
            return;
        }
        for (deadline, (timeout, tag)) in due.drain(..) {
            self.counters.fired(now.saturating_duration_since(deadline));
            // As for tasks: `LoopTimeout` is public, and may panic.
            let _ =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| timeout.expire(tag, cx)));
        }
    }

    /// Closes connections whose exchange a timeout failed: at least one per
    /// turn, and more while no timeout falls due within [`ABORT_GAP`]. In a
    /// burst of expiries the exchanges end (and their callers learn it) on
    /// time, and the sockets, which cost far more to close than an exchange
    /// costs to end, close in the gaps and after the burst.
    fn close_aborted(&self, cx: &mut LoopContext<'_>, due: &mut Vec<(Instant, HeapEntry)>) {
        let mut closed_one = false;
        while let Some(&(key, exchange_id)) = cx.aborts.last() {
            let now = self.clock.now();
            let nearest = lock(&self.timers).heap.next_deadline();
            let soon = |deadline: Instant| deadline.saturating_duration_since(now) <= ABORT_GAP;
            if closed_one && nearest.is_some_and(soon) {
                break;
            }
            cx.aborts.pop();
            conn::abort(cx, key, exchange_id);
            closed_one = true;
            self.expire_due(cx, due);
        }
    }

    /// Stops taking work after a failure of the poll itself.
    fn fail_hard(&self) {
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
        tag: u32,
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

/// Makes the [`TimeoutScheduler`] that stands for a loop.
pub type SchedulerFactory = Arc<dyn Fn(Arc<EventLoop>) -> Arc<dyn TimeoutScheduler> + Send + Sync>;

/// Builds an [`EventLoopGroup`].
pub struct EventLoopGroupBuilder {
    threads: usize,
    clock: SharedClock,
    spin: Duration,
    thread_name: String,
    scheduler: Option<SchedulerFactory>,
}

impl EventLoopGroupBuilder {
    /// Number of loops (default: the available cores; at least 1).
    /// [`build`](Self::build) refuses more than [`MAX_EVENT_LOOPS`].
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// The clock the loops' timeouts read (default: the system clock). Give
    /// the client's clock here when you build the group yourself.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Makes each loop busy-poll, instead of sleeping, for the last `spin`
    /// before its nearest deadline (default zero: never).
    ///
    /// A sleeping thread wakes when the OS gets round to it: about 50 µs
    /// late on a quiet Linux machine, 0.2 ms and now and then several
    /// milliseconds late in a virtual machine. Spinning through the last
    /// stretch takes that out of the timeout's lateness, at the price of a
    /// core busy for up to `spin` each time a deadline approaches — which,
    /// with request timeouts, is only when a request is about to time out.
    /// Nothing ever fires early either way: the heap decides what is due.
    pub fn spin_before_deadline(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// Prefix of the loop threads' names (default `tickless-loop`).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// A testing seam: the timeouts of each loop's connections are armed
    /// through what `factory` makes of the loop, instead of on the loop
    /// itself. A double that answers "not shutting down" and then rejects
    /// reaches the fallback to the wheel.
    pub fn timeout_scheduler(mut self, factory: SchedulerFactory) -> Self {
        self.scheduler = Some(factory);
        self
    }

    /// Starts the loops.
    pub fn build(self) -> io::Result<EventLoopGroup> {
        if self.threads > MAX_EVENT_LOOPS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} event loops asked for, at most {MAX_EVENT_LOOPS}",
                    self.threads
                ),
            ));
        }
        let mut loops = Vec::with_capacity(self.threads);
        for index in 0..self.threads {
            let started = EventLoop::start(
                index,
                self.clock.clone(),
                self.spin,
                format!("{}-{index}", self.thread_name),
            );
            match started {
                Ok(event_loop) => loops.push(event_loop),
                Err(error) => {
                    loops.iter().for_each(|l: &Arc<EventLoop>| l.shutdown());
                    return Err(error);
                }
            }
        }
        let schedulers = loops
            .iter()
            .map(|event_loop| match &self.scheduler {
                Some(factory) => factory(event_loop.clone()),
                None => event_loop.clone() as Arc<dyn TimeoutScheduler>,
            })
            .collect();
        Ok(EventLoopGroup {
            loops,
            schedulers,
            chooser: AtomicUsize::new(0),
            clock: self.clock,
        })
    }
}

/// N event loops and the round-robin chooser that pins each new connection
/// to one of them.
///
/// The chooser is used for new connections only, never to pick where a
/// timeout goes: that would put the timeout on a loop other than its
/// connection's, and shift where the next connections land.
pub struct EventLoopGroup {
    loops: Vec<Arc<EventLoop>>,
    schedulers: Vec<Arc<dyn TimeoutScheduler>>,
    chooser: AtomicUsize,
    clock: SharedClock,
}

impl EventLoopGroup {
    /// A builder: as many loops as cores, the system clock.
    pub fn builder() -> EventLoopGroupBuilder {
        EventLoopGroupBuilder {
            threads: thread::available_parallelism().map_or(1, |n| n.get()),
            clock: Arc::new(SystemClock),
            thread_name: "tickless-loop".to_owned(),
            spin: Duration::ZERO,
            scheduler: None,
        }
    }

    /// The loops, by index.
    pub fn loops(&self) -> &[Arc<EventLoop>] {
        &self.loops
    }

    /// The clock the loops read.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The loop for the next new connection (round robin).
    pub(crate) fn next(&self) -> &Arc<EventLoop> {
        let n = self.chooser.fetch_add(1, Ordering::Relaxed);
        &self.loops[n % self.loops.len()]
    }

    /// Where the timeouts of connections on loop `index` are armed.
    pub(crate) fn scheduler(&self, index: usize) -> &Arc<dyn TimeoutScheduler> {
        &self.schedulers[index]
    }

    /// Timer snapshots, one per loop.
    pub fn stats(&self) -> Vec<TimerStats> {
        self.loops.iter().map(|l| l.stats()).collect()
    }

    /// Shuts every loop down and joins them.
    pub fn shutdown(&self) {
        for event_loop in &self.loops {
            event_loop.shutdown();
        }
    }
}

impl Drop for EventLoopGroup {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for EventLoopGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoopGroup")
            .field("loops", &self.loops)
            .finish()
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Loop state stays consistent at every unlock; a panic elsewhere must not
    // wedge the loops.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

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

    #[test]
    fn a_loop_expires_on_its_own_thread_never_early() {
        // Sleeping until the deadline, busy-polling the last 10 ms, and
        // busy-polling always (a spin no deadline is further away than).
        for spin in [Duration::ZERO, Duration::from_millis(10), Duration::MAX] {
            expires_on_its_own_thread_never_early(spin);
        }
    }

    fn expires_on_its_own_thread_never_early(spin: Duration) {
        struct Record(Mutex<Vec<(Instant, ThreadId)>>);
        impl LoopTimeout for Record {
            fn expire(self: Arc<Self>, _tag: u32, _cx: &mut LoopContext<'_>) {
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
}
