//! [`EventLoopGroup`]: N loops and the chooser that pins each new
//! connection to one of them.

use super::affinity::Pinning;
use super::{EventLoop, Executor, SchedulerFactory, TimeoutScheduler};
use std::cell::{Cell, RefCell};
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use tickless_timer::{SharedClock, SystemClock, TimerStats};

/// Ids of groups.
static NEXT_GROUP: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's loop in the groups it opened connections in lately.
    static THREAD_LOOPS: RefCell<Seats> = const { RefCell::new(Seats(Vec::new())) };
    /// This thread has polled an exchange (see [`polled_here`]).
    static POLLS: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread polled an exchange that was not ready: an async
/// caller's thread (an executor's worker), which never drives a loop, so
/// its connections need not share one — they go round robin from now on,
/// as each task's would on a runtime that moves tasks between threads.
pub(crate) fn polled_here() {
    POLLS.with(|polls| polls.set(true));
}

/// A thread's turn in each group it opened connections in, the most recent
/// [`Seats::KEPT`]: a thread that moves on to more groups (a client per
/// test) forgets the oldest, and takes a new turn there if it comes back.
struct Seats(Vec<(u64, usize)>);

impl Seats {
    const KEPT: usize = 8;

    /// The thread's turn in group `id`, taken with `turn` the first time.
    fn seat(&mut self, id: u64, turn: impl FnOnce() -> usize) -> usize {
        if let Some(&(_, n)) = self.0.iter().find(|(group, _)| *group == id) {
            return n;
        }
        if self.0.len() == Self::KEPT {
            self.0.remove(0);
        }
        let n = turn();
        self.0.push((id, n));
        n
    }
}

/// A request waiting for a connection (see [`EventLoopGroup::queued`]);
/// uncounted when dropped.
pub(crate) struct Queued(Arc<AtomicUsize>);

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most loops a group starts: each is a thread, and a loop per
/// connection is already far past the point where more loops help.
pub const MAX_EVENT_LOOPS: usize = 1024;

/// Loops a CPU, by default, in a group an executor drives (see
/// [`EventLoopGroupBuilder::executor`]), up to
/// [`MOST_LOOPS_FOR_AN_EXECUTOR`].
const LOOPS_PER_CPU_FOR_AN_EXECUTOR: usize = 8;

/// The most loops a group an executor drives has by default, unless it
/// has more CPUs (then a loop each).
const MOST_LOOPS_FOR_AN_EXECUTOR: usize = 64;

/// How many loops a group has unless told: a loop a CPU, or, for an
/// executor's tasks, several.
fn default_loops(cpus: usize, by_executor: bool) -> usize {
    match by_executor {
        true => (cpus * LOOPS_PER_CPU_FOR_AN_EXECUTOR)
            .min(MOST_LOOPS_FOR_AN_EXECUTOR)
            .max(cpus),
        false => cpus,
    }
}

/// Builds an [`EventLoopGroup`].
pub struct EventLoopGroupBuilder {
    /// `None`: the available cores, counted when the loops start.
    threads: Option<usize>,
    pub(super) clock: SharedClock,
    pub(super) spin: Duration,
    pin: Pinning,
    /// How long a loop's thread leaves it idle for a caller to drive:
    /// [`IDLE_GRACE`](super::turn::IDLE_GRACE) but in tests.
    pub(super) idle_grace: Duration,
    pub(super) thread_name: String,
    scheduler: Option<SchedulerFactory>,
    pub(super) executor: Option<Executor>,
}

impl EventLoopGroupBuilder {
    /// Number of loops (default: the available cores; at least 1 — with
    /// an [`executor`](Self::executor) that drives them, eight a core, at
    /// most 64 unless there are more cores). [`build`](Self::build)
    /// refuses more than [`MAX_EVENT_LOOPS`].
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads.max(1));
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
    /// A sleeping thread wakes when the OS gets round to it, which on a
    /// busy or virtual machine can be well after the timer it asked for (the
    /// README has the figures measured here). Spinning through the last
    /// stretch takes that out of the timeout's lateness, at the price of a
    /// core busy for up to `spin` each time a deadline approaches — which,
    /// with request timeouts, is only when a request is about to time out.
    /// Nothing ever fires early either way: the heap decides what is due.
    pub fn spin_before_deadline(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// Pins each loop's thread to a CPU of its own (`true`), or leaves the
    /// loops where the OS puts them (`false`). By default a group is pinned
    /// when it has a loop for every CPU the building thread may use — the
    /// default count, for a process that may use every CPU it sees — and no
    /// other group of the process is pinned; otherwise not (the reasons are
    /// below). Pinned, the group's loops take distinct CPUs of that set
    /// (wrapping round when they outnumber them), those with the fewest of
    /// the process's pinned loops first, so the process's pinned loops are
    /// on distinct CPUs while they do not outnumber its CPUs.
    ///
    /// Unpinned, the OS can put two loops on one CPU while another idles:
    /// each wakes, runs for microseconds and sleeps again, too briefly for
    /// the load balancer to notice, and a wake-up goes back to the CPU the
    /// loop last slept on. When their deadlines then fall together — a
    /// burst of timeouts on both loops — the two take turns on that CPU
    /// and one runs late by whole scheduler slices (traced here with
    /// `perf record -e sched:sched_switch`: both loops on one vCPU through
    /// a 10 ms burst while the other stayed idle). The README has the
    /// probe's figures both ways.
    ///
    /// But a pinned loop cannot leave its CPU when something else keeps it
    /// busy, and two loops pinned to one CPU can never part. Hence the
    /// default: not with fewer loops than CPUs (a process under a CPU
    /// quota smaller than the machine it sees would put its loops on the
    /// same first CPUs as every other such process), nor with more, nor for
    /// a second group while one is pinned. Say `true` to pin anyway, `false`
    /// when the process pins threads of its own to these CPUs.
    ///
    /// A thread starts on the CPUs of the thread that starts it: the
    /// threads the client starts from a loop (resolvers, upload pumps)
    /// start on the CPUs the loop had before it was pinned, and code of
    /// yours that runs on a loop should start its threads inside
    /// [`without_pinning`](super::without_pinning). Best effort, and a
    /// no-op with a single CPU; Linux only (elsewhere the OS places the
    /// loops). In a group an [`executor`](Self::executor) drives, the
    /// rule is applied to the deadline keepers, a keeper a CPU, which keep
    /// the loops' deadlines; the loops' threads, asleep while the executor
    /// drives, are not pinned.
    pub fn pin_to_cpus(mut self, pin: bool) -> Self {
        self.pin = if pin { Pinning::Always } else { Pinning::Never };
        self
    }

    /// How long a loop's thread leaves it idle for a caller to drive:
    /// longer in a test, so that a loaded machine cannot miss the window.
    #[cfg(test)]
    pub(crate) fn idle_grace(mut self, grace: Duration) -> Self {
        self.idle_grace = grace;
        self
    }

    /// Has `executor`'s reactor drive the loops: a task of its own per
    /// loop runs the loop's turns on the executor's workers whenever the
    /// loop's sockets have news, a deadline keeper a core (a thread of
    /// the group's, no more of them than loops) keeps the loops'
    /// deadlines, and each loop's thread sleeps (see "Driven by an
    /// executor" on [`EventLoop`]). For callers that await their
    /// responses on that executor: the answers then reach their tasks on
    /// the thread that read them. Blocking callers wait rather than drive
    /// the loops. If the executor stops (its runtime shut down), the
    /// loops' threads take them back. An executor that cannot drive loops
    /// (a current-thread runtime: see `Executor::tokio`) leaves them to
    /// their threads.
    ///
    /// Such a group has eight loops a core by default (see
    /// [`threads`](Self::threads)): with a loop's task for every few
    /// connections, a worker more often finds a turn to run rather than
    /// sleep and be woken onto the core another runs on (the README has
    /// the measurements). A loop costs a sleeping thread and three
    /// descriptors; its deadlines cost no thread of their own.
    pub fn executor(mut self, executor: Executor) -> Self {
        self.executor = Some(executor);
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
        // Built on a pinned loop's thread (in a listener, say): the loops
        // are planned and started on the CPUs that loop had before.
        super::without_pinning(|| self.start())
    }

    /// The executor that drives the group's loops, if one is named and
    /// can (see `Executor::tokio`).
    pub(super) fn driving_executor(&self) -> Option<&Executor> {
        self.executor
            .as_ref()
            .filter(|executor| executor.drives_loops())
    }

    fn start(self) -> io::Result<EventLoopGroup> {
        // Counted here, not when the builder was made: on the CPUs
        // `without_pinning` gave back, if built on a pinned loop's thread.
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        let by_executor = self.driving_executor().is_some();
        let threads = self
            .threads
            .unwrap_or_else(|| default_loops(cpus, by_executor));
        if threads > MAX_EVENT_LOOPS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} event loops asked for, at most {MAX_EVENT_LOOPS}",
                    threads
                ),
            ));
        }
        // Loops started are shut down if the build goes no further: a loop
        // that fails to start, or a scheduler factory that panics.
        let mut loops = Started(Vec::with_capacity(threads));
        // An executor drives the loops: their deadlines are kept by a
        // keeper a CPU (see `executor`'s documentation), pinned as the
        // loops would be; the loops' threads only sleep until then.
        let keepers = match by_executor {
            true => (0..threads.min(cpus))
                .map(|_| super::executor::DeadlineKeeper::new())
                .collect::<io::Result<Vec<_>>>()?,
            false => Vec::new(),
        };
        let loop_pins = match by_executor {
            true => Pinning::Never,
            false => self.pin,
        };
        let queued = Arc::new(AtomicUsize::new(0));
        let loop_cpus = super::affinity::plan(loop_pins, threads);
        for (index, cpu) in loop_cpus.into_iter().enumerate() {
            let keeper = (!keepers.is_empty()).then(|| keepers[index % keepers.len()].waker());
            let event_loop = EventLoop::start(index, &self, cpu, queued.clone(), keeper)?;
            loops.0.push(event_loop);
        }
        let keeper_cpus = super::affinity::plan(self.pin, keepers.len());
        let count = keepers.len();
        for (k, (keeper, cpu)) in keepers.into_iter().zip(keeper_cpus).enumerate() {
            let kept = loops.0.iter().skip(k).step_by(count).cloned().collect();
            thread::Builder::new()
                .name(format!("{}-keeper-{k}", self.thread_name))
                .spawn(move || keeper.keep(kept, cpu))?;
        }
        let schedulers = loops
            .0
            .iter()
            .map(|event_loop| match &self.scheduler {
                Some(factory) => factory(event_loop.clone()),
                None => event_loop.clone() as Arc<dyn TimeoutScheduler>,
            })
            .collect();
        Ok(EventLoopGroup {
            loops: std::mem::take(&mut loops.0),
            schedulers,
            schedulers_are_loops: self.scheduler.is_none(),
            id: NEXT_GROUP.fetch_add(1, Ordering::Relaxed),
            chooser: AtomicUsize::new(0),
            clock: self.clock,
        })
    }
}

/// The loops of a group being built: shut down if dropped before the
/// group takes them.
struct Started(Vec<Arc<EventLoop>>);

impl Drop for Started {
    fn drop(&mut self) {
        self.0.iter().for_each(|event_loop| event_loop.shutdown());
    }
}

/// N event loops and the chooser that pins each new connection to one of
/// them.
///
/// **A blocking thread's connections share a loop.** The first connection
/// a thread opens in a group takes the next loop in turn (round robin over
/// threads); every later one the same thread opens goes there too — the
/// loop chosen on the thread that submits the request, before any lookup
/// of its host — until the thread polls an exchange (an executor's
/// worker: see `polled_here`), from then on round robin. A thread blocked
/// on several of its exchanges at once (a window of `ResponseFuture`s,
/// waited on in turn) can then drive the one loop they are all on, rather
/// than sleep while one loop's thread reads them (see "Who drives a loop"
/// on [`EventLoop`]); threads spread over the loops as connections did.
/// The cost: one blocking thread's many busy connections use one loop's
/// CPU for their reading (and TLS), not every loop's. A connection opened
/// on a loop (a redirect's next hop, a retry) goes to the next loop in
/// turn, as before — but never on the loop it is opened on, where the
/// group has another: code run there (a listener) may send a request and
/// wait for it, and that loop cannot turn while its thread waits (a wait
/// for a connection on it fails with
/// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock)). On a deadline
/// keeper (loops an executor drives), no more on the loops it keeps, whose
/// timeouts would not fire while it waits: with one keeper (one CPU),
/// such a wait is refused.
///
/// The chooser is used for new connections only, never to pick where a
/// timeout goes: that would put the timeout on a loop other than its
/// connection's, and shift where the next connections land.
pub struct EventLoopGroup {
    /// Unique in the process: the key of a thread's loop in this group.
    id: u64,
    loops: Vec<Arc<EventLoop>>,
    schedulers: Vec<Arc<dyn TimeoutScheduler>>,
    /// Whether `schedulers` are the loops themselves: no test's
    /// [`timeout_scheduler`](EventLoopGroupBuilder::timeout_scheduler)
    /// stands in front of them.
    schedulers_are_loops: bool,
    chooser: AtomicUsize,
    clock: SharedClock,
}

impl EventLoopGroup {
    /// A builder: as many loops as cores, the system clock.
    pub fn builder() -> EventLoopGroupBuilder {
        EventLoopGroupBuilder {
            threads: None,
            clock: Arc::new(SystemClock),
            thread_name: "tickless-loop".to_owned(),
            spin: Duration::ZERO,
            pin: Pinning::Auto,
            idle_grace: super::turn::IDLE_GRACE,
            scheduler: None,
            executor: None,
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

    /// The loop for the next new connection — the calling thread's (see
    /// the type's documentation) — other than the one of index `avoid`
    /// where there is another, and never, where there is another, a loop
    /// of this group the calling thread stalls (see
    /// [`EventLoop::stalls_here`]: the loop whose turns it runs, or on a
    /// deadline keeper the loops it keeps): code told there (a listener)
    /// that sends a request and waits for it would otherwise stop the very
    /// loop its connection needs, or its timeouts. That comes first: a
    /// hedged copy opened there may share its attempt's loop, with two
    /// loops.
    pub(crate) fn next(&self, avoid: Option<usize>) -> &Arc<EventLoop> {
        let turn = || self.chooser.fetch_add(1, Ordering::Relaxed);
        let on_a_loop = super::on_any_loop();
        let n = match on_a_loop || POLLS.with(Cell::get) {
            true => turn(),
            false => THREAD_LOOPS.with(|seats| seats.borrow_mut().seat(self.id, turn)),
        };
        let len = self.loops.len();
        let here = |i: usize| on_a_loop && len > 1 && self.loops[i].stalls_here();
        // The first of the chosen one and those after it that is neither
        // here nor avoided; else the first that is not here.
        let candidates = || (0..len).map(|k| (n + k) % len);
        let pick = candidates()
            .find(|&i| !here(i) && Some(i) != avoid)
            .or_else(|| candidates().find(|&i| !here(i)))
            .unwrap_or(n % len);
        &self.loops[pick]
    }

    /// Where the timeouts of connections on loop `index` are armed.
    pub(crate) fn scheduler(&self, index: usize) -> &Arc<dyn TimeoutScheduler> {
        &self.schedulers[index]
    }

    /// Whether each loop's [`scheduler`](Self::scheduler) is the loop
    /// itself (no test's double stands in front of it): what is armed
    /// through it is on the loop's heap.
    pub(crate) fn schedulers_are_loops(&self) -> bool {
        self.schedulers_are_loops
    }

    /// A request of a client on this group waits in its pool's queue for
    /// a connection — one of those a loop of the group carries, busy, may
    /// free: until the returned [`Queued`] drops, no loop of the group is
    /// left idle (see "Who drives a loop" on [`EventLoop`]), and an idle
    /// one is taken back by its thread now.
    pub(crate) fn queued(&self) -> Queued {
        let count = self.loops[0].queued_in_group.clone();
        // While any is queued, no loop goes idle (it looks under its inbox
        // lock): only the first of them may find one idle, and wakes it —
        // not every request that queues behind a busy host.
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            self.loops
                .iter()
                .for_each(|event_loop| event_loop.wake_if_idle());
        }
        Queued(count)
    }

    /// Timer snapshots, one per loop.
    pub fn stats(&self) -> Vec<TimerStats> {
        self.loops.iter().map(|l| l.stats()).collect()
    }

    /// Shuts every loop down and joins them: every loop is told to stop
    /// first, then each is joined — a loop's thread may be waiting for what
    /// another's end rings. Called on a loop's thread, or on a deadline
    /// keeper (see [`EventLoop::shutdown`]), it joins none of the loops that
    /// thread runs or keeps: they end once it returns to them.
    pub fn shutdown(&self) {
        self.begin_shutdown();
        for event_loop in &self.loops {
            event_loop.shutdown();
        }
    }

    /// Tells every loop to shut down, and waits for none (see
    /// [`EventLoop::shutdown`]): a loop's thread may be waiting (in a
    /// listener) for what another's end rings, a retry's backoff armed
    /// there, before [`shutdown`](Self::shutdown) joins it.
    pub(crate) fn begin_shutdown(&self) {
        for event_loop in &self.loops {
            event_loop.begin_shutdown();
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

#[cfg(test)]
mod tests {
    use super::default_loops;

    #[test]
    fn an_executors_group_has_eight_loops_a_cpu_up_to_64_unless_it_has_more_cpus() {
        assert_eq!(default_loops(2, false), 2);
        assert_eq!(default_loops(2, true), 16);
        assert_eq!(default_loops(1, true), 8);
        assert_eq!(default_loops(8, true), 64);
        assert_eq!(default_loops(16, true), 64);
        assert_eq!(default_loops(96, true), 96);
    }
}
