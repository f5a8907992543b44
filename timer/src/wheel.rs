//! [`HashedWheelTimer`]: one thread carrying the timeouts of a whole client.
//!
//! How the wheel works and what it promises is documented on
//! [`HashedWheelTimer`], for its users; what follows is for maintainers.
//!
//! # Concurrency ground rules
//!
//! * All entries live in one slab under one mutex (`Core`). Arming and
//!   cancelling take it for O(1) work; the worker takes it to collect what is
//!   due and releases it before running anything, so a task may arm or cancel
//!   freely.
//! * A bucket is an intrusive doubly linked list through the slab (each
//!   entry holds the keys of its neighbours; the bucket its first and last),
//!   kept in arming order: appended at arming, unlinked in place. So a
//!   bucket owns nothing but its two ends, and arming or cancelling
//!   allocates only when the slab grows, which it does (doubling) only when
//!   more entries are armed at once than ever before on this wheel — never
//!   for a bucket's first use, however large the wheel.
//! * `Core::occupancy` has a bit per bucket, set iff its list is not empty
//!   (kept by `link` and `remove`, the only places a list changes, and by
//!   the stop), so the next occupied bucket is found in a few word reads
//!   rather than by walking up to 2^20 buckets under the lock.
//! * Whoever removes an entry from the slab owns its task: the worker (it
//!   fires), [`WheelTimeout::cancel`] (it drops the task at once, so a
//!   cancelled task's captured resources are not kept until its bucket comes
//!   round) or [`HashedWheelTimer::stop`] (it hands a boxed task back, and
//!   tells a [`WheelTask`] it was stopped). That removal is the single point
//!   where an entry's fate is decided, and the task is told which fate it
//!   was: fired, or stopped; a cancelled task is told nothing.
//! * No task runs, and no task is dropped, while `Core` is locked: a task
//!   may hold the last reference to something whose drop arms or cancels.
//! * The worker sleeps until the next tick whose bucket holds an entry, not
//!   every tick: `Core::worker_wakes_at` is that tick (`u64::MAX`: nothing
//!   armed, sleep until woken). Collecting sets it to the tick after `now`;
//!   an arm for an earlier tick (one the worker has passed, or will not
//!   wake for) lowers it and unparks the worker, under the same lock; and
//!   after running what it collected the worker keeps a value an arm lowered,
//!   or else plans the first occupied bucket after `now`. So an entry is
//!   either in a bucket the worker scans when it plans, or it lowered the
//!   plan and woke the worker.
//! * A task that blocks the worker's thread may fire what falls due
//!   meanwhile itself ([`HashedWheelTimer::fire_due`]): it collects under
//!   the lock as the worker does, so no entry fires twice, and the worker,
//!   once the task returns, plans from what that collect left.

use crate::clock::{AdvanceListener, SharedClock};
use crate::stats::{TimerCounters, TimerStats};
use occupancy::Occupancy;
use slab::Slab;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle, Thread, ThreadId};
use std::time::{Duration, Instant};

/// The work a timer runs when an entry fires.
pub type TimerTask = Box<dyn FnOnce() + Send + 'static>;

/// A task shared by many entries, told by a tag which entry it is, and told
/// explicitly whether that entry fired or the wheel stopped under it.
///
/// Arming one ([`HashedWheelTimer::arm_task`]) allocates nothing: the `Arc`
/// already exists, and the tag says which of its timeouts the entry is.
pub trait WheelTask: Send + Sync + 'static {
    /// The entry armed with `tag` is due: called once, on the wheel's thread
    /// (or the executor's, or the thread advancing a manual clock).
    fn fire(self: Arc<Self>, tag: u64);

    /// The wheel stopped with the entry armed with `tag` still armed: it
    /// will never fire. Called once, on the thread that stopped the wheel.
    fn stopped(self: Arc<Self>, tag: u64);
}

/// What an entry runs.
enum Task {
    Once(TimerTask),
    Shared(Arc<dyn WheelTask>, u64),
}

/// Runs fired tasks somewhere other than the wheel's own thread.
pub type Executor = Arc<dyn Fn(TimerTask) + Send + Sync + 'static>;

/// The default tick, as the Java client's.
pub const DEFAULT_TICK: Duration = Duration::from_millis(100);
/// The default number of buckets, as the Java client's.
pub const DEFAULT_WHEEL_SIZE: usize = 512;
/// The longest tick (1 s): every entry fires at most about a tick late, and
/// a timer whose timeouts may fire a minute late is no timer. (An idle
/// wheel costs nothing whatever its tick, so there is no saving past it.)
pub const MAX_TICK: Duration = Duration::from_secs(1);
/// The most buckets a wheel takes (2^20); a larger size is clamped to it.
pub const MAX_WHEEL_SIZE: usize = 1 << 20;

/// Arming failed because the timer was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerStopped;

impl fmt::Display for TimerStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the timer is stopped")
    }
}

impl std::error::Error for TimerStopped {}

/// A hashed-wheel timer: one worker thread, O(1) arm and cancel from any thread.
///
/// Clones share the same wheel; it stops when the last clone is dropped, or
/// at [`stop`](Self::stop).
///
/// # How it works
///
/// Time since the wheel started is cut into ticks of `tick` length. An entry
/// whose deadline falls in tick `T` (the first tick boundary at or after the
/// deadline is `T`) is kept in bucket `T mod size`. The worker wakes at the
/// next tick boundary whose bucket holds an entry (a wheel with nothing
/// armed costs no wake-ups, whatever its tick), visits the buckets from the
/// first tick it has not finished up to the tick the clock has reached, and
/// fires every entry whose deadline is `<= now`. Entries of later rounds
/// share those buckets and are skipped by the same comparison, so no round
/// counter is needed, and visiting a bucket can never fire anything early.
///
/// # Contract
///
/// * Never early: an entry fires only once the clock reads its deadline.
/// * At most about one tick late, plus the worker's wake-up latency and the
///   time the tasks before it take: a burst that runs long makes the next
///   ones late, which is why the design offers event-loop timeouts.
/// * Entries found due together (the same tick, or many after a stall or a
///   long advance of a manual clock) fire in deadline order, equal
///   deadlines in arming order; what their tasks arm for a time already
///   passed fires after them.
/// * With a [`ManualClock`](crate::ManualClock) there is no worker: entries fire on the thread
///   that advances the clock, exactly when it passes their deadline — also what their tasks
///   arm for a time the same advance passes. An entry armed between advances for a time the
///   clock has reached already waits for the next advance (`advance(Duration::ZERO)` fires it).
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
/// use std::time::{Duration, Instant};
/// use tickless_timer::HashedWheelTimer;
///
/// let timer = HashedWheelTimer::builder().tick(Duration::from_millis(1)).build()?;
/// let (fired, on_fire) = mpsc::channel();
/// let deadline = Instant::now() + Duration::from_millis(5);
/// timer.arm(deadline, move || fired.send(Instant::now()).unwrap()).unwrap();
/// assert!(on_fire.recv().unwrap() >= deadline);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct HashedWheelTimer {
    owner: Arc<Owner>,
}

/// Stops the wheel when the last [`HashedWheelTimer`] clone goes away.
/// (The worker holds `Shared` itself, so `Shared` cannot be the one to know.)
struct Owner {
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        drop(self.shared.stop());
    }
}

struct Shared {
    core: Mutex<Core>,
    tick: Duration,
    clock: SharedClock,
    executor: Option<Executor>,
    counters: TimerCounters,
    worker: Mutex<Option<JoinHandle<()>>>,
    worker_thread: OnceLock<Thread>,
    /// Times the worker woke to collect what is due.
    worker_wakeups: AtomicU64,
    stopping: AtomicBool,
    /// Keeps the manual clock's listener alive for as long as the wheel is.
    advance_listener: OnceLock<Arc<AdvanceListener>>,
}

struct Core {
    start: Instant,
    /// Every armed entry, by key. Its storage grows (doubling) only when
    /// more entries are armed at once than ever before; a freed key is
    /// reused first.
    slots: Slab<Entry>,
    /// Each bucket's list of entries, in arming order.
    buckets: Box<[Bucket]>,
    /// Which buckets' lists are not empty.
    occupancy: Occupancy,
    /// Every entry due before this tick has fired; an entry armed for an
    /// earlier tick is placed here instead, so the next visit fires it.
    first_open_tick: u64,
    next_sequence: u64,
    stopped: bool,
    /// The tick the worker sleeps until; see the module notes.
    worker_wakes_at: u64,
    /// The tick the last arm fell in, with its bounds (see [`TickSpan`]).
    last_arm: Option<TickSpan>,
}

/// A tick and the instants that bound it: a deadline in `(after,
/// through]` falls in it. Arms come mostly in deadline order, many to a
/// tick, so one that falls in the last arm's tick is told so by two
/// comparisons, without the subtraction of instants the tick's number
/// takes (std's, some 50 instructions).
#[derive(Clone, Copy)]
struct TickSpan {
    after: Instant,
    through: Instant,
    tick: u64,
}

/// An entry taken out of the wheel to fire: its deadline, for the lag and
/// the firing order, and its sequence, for the order among equal deadlines.
struct Due {
    deadline: Instant,
    sequence: u64,
    task: Task,
}

/// The key that stands for no entry in a bucket's links (a slab never
/// hands it out: it would need `usize::MAX` entries first).
const NIL: usize = usize::MAX;

/// The ends of one bucket's list: both [`NIL`] when it is empty.
#[derive(Clone, Copy)]
struct Bucket {
    first: usize,
    last: usize,
}

impl Bucket {
    const EMPTY: Bucket = Bucket {
        first: NIL,
        last: NIL,
    };
}

struct Entry {
    deadline: Instant,
    sequence: u64,
    bucket: usize,
    /// The entries armed into the same bucket just before and just after
    /// this one ([`NIL`] at the ends).
    previous: usize,
    next: usize,
    task: Task,
}

/// The handle of one armed entry.
#[derive(Clone)]
pub struct WheelTimeout {
    shared: Arc<Shared>,
    key: usize,
    sequence: u64,
    deadline: Instant,
}

impl HashedWheelTimer {
    /// A builder with the defaults: 100 ms ticks, 512 buckets, the system clock.
    pub fn builder() -> WheelBuilder {
        WheelBuilder::new()
    }

    /// Arms `task` to run once the clock reaches `deadline`. Callable from
    /// any thread; O(1).
    pub fn arm(
        &self,
        deadline: Instant,
        task: impl FnOnce() + Send + 'static,
    ) -> Result<WheelTimeout, TimerStopped> {
        self.arm_boxed(deadline, Box::new(task))
    }

    /// [`arm`](Self::arm) for a task that is already boxed.
    pub fn arm_boxed(
        &self,
        deadline: Instant,
        task: TimerTask,
    ) -> Result<WheelTimeout, TimerStopped> {
        self.insert(deadline, Task::Once(task))
    }

    /// Arms the entry `tag` of `task` to fire once the clock reaches
    /// `deadline`: `task.fire(tag)` then, or `task.stopped(tag)` if the
    /// wheel stops first. Callable from any thread; O(1). Arming and
    /// cancelling allocate nothing, in whichever bucket, unless more entries
    /// are armed at once than ever before on this wheel: only then does the
    /// entries' storage grow (doubling).
    pub fn arm_task(
        &self,
        deadline: Instant,
        task: Arc<dyn WheelTask>,
        tag: u64,
    ) -> Result<WheelTimeout, TimerStopped> {
        self.insert(deadline, Task::Shared(task, tag))
    }

    #[inline]
    fn insert(&self, deadline: Instant, task: Task) -> Result<WheelTimeout, TimerStopped> {
        let shared = &self.owner.shared;
        let mut core = shared.lock_core();
        if core.stopped {
            drop(core);
            drop(task);
            return Err(TimerStopped);
        }
        let tick = core
            .arm_tick(deadline, shared.tick)
            .max(core.first_open_tick);
        let bucket = (tick as usize) & (core.buckets.len() - 1);
        let sequence = core.next_sequence;
        core.next_sequence += 1;
        let key = core.slots.insert(Entry {
            deadline,
            sequence,
            bucket,
            previous: NIL,
            next: NIL,
            task,
        });
        core.link(key);
        let wake_worker = tick < core.worker_wakes_at;
        if wake_worker {
            core.worker_wakes_at = tick;
        }
        // Counted before the unlock: once the entry is in, a fire (and its
        // decrement) may come at any moment.
        shared.counters.armed();
        drop(core);
        if let (true, Some(worker)) = (wake_worker, shared.worker_thread.get()) {
            worker.unpark();
        }
        Ok(WheelTimeout {
            shared: shared.clone(),
            key,
            sequence,
            deadline,
        })
    }

    /// Stops the worker, joins it (unless called from a task on the worker
    /// itself), tells every [`WheelTask`] entry still armed that it was
    /// stopped, and returns the boxed tasks that never ran. Later arms fail
    /// with [`TimerStopped`]. A second call does nothing and returns nothing.
    pub fn stop(&self) -> Vec<TimerTask> {
        self.owner.shared.stop()
    }

    /// Fires, on the calling thread, every entry due now. For a task that
    /// blocks the wheel's own thread, waiting for what another entry's
    /// firing may bring (a caller's listener waiting for a request whose
    /// timeout is on this wheel): called while it waits, at least once a
    /// [`tick`](Self::tick), it fires the wheel's entries about as late as
    /// its thread would were it free, rather than after the task. Entries
    /// collected with the task, due when it was, still wait for it. On
    /// another thread it fires what the worker would, beside it.
    pub fn fire_due(&self) {
        self.owner.shared.fire_due(&mut Vec::new());
    }

    /// Whether [`stop`](Self::stop) has been called: a task dropped without
    /// running while this is true was dropped by the stop, not cancelled.
    pub fn is_stopped(&self) -> bool {
        self.owner.shared.stopping.load(Ordering::Acquire)
    }

    /// The worker thread's id: fired tasks run there unless an executor was
    /// given. `None` with a manual clock, where they run on the advancing thread.
    pub fn thread_id(&self) -> Option<ThreadId> {
        self.owner.shared.worker_thread.get().map(Thread::id)
    }

    /// How many times the worker has woken to collect due entries. It
    /// sleeps through ticks whose bucket is empty, so this stays still while
    /// nothing is armed. Zero with a manual clock.
    pub fn worker_wakeups(&self) -> u64 {
        self.owner.shared.worker_wakeups.load(Ordering::Relaxed)
    }

    /// The tick length.
    pub fn tick(&self) -> Duration {
        self.owner.shared.tick
    }

    /// The clock the wheel reads.
    pub fn clock(&self) -> &SharedClock {
        &self.owner.shared.clock
    }

    /// Entries armed now, fired and cancelled, and the lag of those fired.
    pub fn stats(&self) -> TimerStats {
        self.owner.shared.counters.snapshot()
    }
}

impl fmt::Debug for HashedWheelTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashedWheelTimer")
            .field("tick", &self.tick())
            .field("thread_id", &self.thread_id())
            .field("stats", &self.stats())
            .finish()
    }
}

impl WheelTimeout {
    /// Disarms the entry and drops its task at once. Returns whether it was
    /// still armed (false if it fired, was cancelled, or the timer stopped).
    /// O(1).
    ///
    /// `true` means the task never runs. `false` on a race with expiry means
    /// the entry was already taken out to fire: its task may be running on
    /// the wheel's thread, or about to, as this returns.
    pub fn cancel(&self) -> bool {
        let task = {
            let mut core = self.shared.lock_core();
            match core.slots.get(self.key) {
                Some(entry) if entry.sequence == self.sequence => core.remove(self.key).task,
                _ => return false,
            }
        };
        self.shared.counters.cancelled();
        drop(task);
        true
    }

    /// The deadline the entry was armed for.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl fmt::Debug for WheelTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WheelTimeout")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Core {
    /// The first tick boundary at or after `deadline`, for an arm: the
    /// last arm's tick again if `deadline` falls in it.
    #[inline]
    fn arm_tick(&mut self, deadline: Instant, tick: Duration) -> u64 {
        if let Some(span) = self.last_arm {
            if span.after < deadline && deadline <= span.through {
                return span.tick;
            }
        }
        let number = self.tick_at_or_after(deadline, tick);
        self.last_arm = self.span_of(number, tick);
        number
    }

    /// The bounds of tick `number` — the deadlines `tick_at_or_after`
    /// puts in it: from `start + (number - 1) * tick`, exclusive, to
    /// `start + number * tick` — unless they are not instants (tick 0
    /// holds every deadline up to the start, and the last tick a `u64`
    /// counts those past it).
    fn span_of(&self, number: u64, tick: Duration) -> Option<TickSpan> {
        let before = number.checked_sub(1)?.checked_mul(nanos_of(tick))?;
        let after = self.start.checked_add(Duration::from_nanos(before))?;
        let through = after.checked_add(tick)?;
        (number != u64::MAX).then_some(TickSpan {
            after,
            through,
            tick: number,
        })
    }

    /// The first tick boundary at or after `instant`.
    fn tick_at_or_after(&self, instant: Instant, tick: Duration) -> u64 {
        let since = instant.saturating_duration_since(self.start);
        match u64::try_from(since.as_nanos()) {
            Ok(nanos) => nanos.div_ceil(nanos_of(tick)),
            Err(_) => beyond_u64_nanos(since, tick, u128::div_ceil),
        }
    }

    /// The last tick boundary at or before `instant`.
    fn tick_at_or_before(&self, instant: Instant, tick: Duration) -> u64 {
        let since = instant.saturating_duration_since(self.start);
        match u64::try_from(since.as_nanos()) {
            Ok(nanos) => nanos / nanos_of(tick),
            Err(_) => beyond_u64_nanos(since, tick, |since, tick| since / tick),
        }
    }

    /// Appends the entry `key`, just put in the slab unlinked, to the end
    /// of its bucket's list.
    fn link(&mut self, key: usize) {
        let bucket = self.slots[key].bucket;
        let last = self.buckets[bucket].last;
        self.slots[key].previous = last;
        if last == NIL {
            self.buckets[bucket].first = key;
            self.occupancy.set(bucket);
        } else {
            self.slots[last].next = key;
        }
        self.buckets[bucket].last = key;
    }

    /// Takes the entry `key` out of its bucket's list and of the slab; the
    /// rest of the list keeps its order.
    fn remove(&mut self, key: usize) -> Entry {
        let entry = self.slots.remove(key);
        let bucket = &mut self.buckets[entry.bucket];
        match entry.previous {
            NIL => bucket.first = entry.next,
            previous => self.slots[previous].next = entry.next,
        }
        match entry.next {
            NIL => bucket.last = entry.previous,
            next => self.slots[next].previous = entry.previous,
        }
        if bucket.first == NIL {
            self.occupancy.clear(entry.bucket);
        }
        entry
    }

    /// The first tick from `from` on whose bucket holds an entry (of this
    /// round or a later one: the worker then wakes, fires nothing and plans
    /// again), or `u64::MAX` if every bucket is empty (or the tick would
    /// lie past `u64::MAX`: the worker then sleeps until an arm wakes it;
    /// `collect_due` asks [`first_occupied_tick`](Self::first_occupied_tick),
    /// which tells that last tick from none). Read from the
    /// occupancy bits, not by visiting the buckets: a few word reads even
    /// on the largest wheel, so a thread arming never waits long for the
    /// worker planning.
    fn next_occupied_tick(&self, from: u64) -> u64 {
        self.first_occupied_tick(from, u64::MAX).unwrap_or(u64::MAX)
    }

    /// The first tick of `from..=through` whose bucket holds an entry, if
    /// any. Inclusive, and `None` rather than a `u64::MAX` that stands for
    /// nothing, so that the last tick there is (where every deadline past
    /// the range of a `u64` of ticks lands) can be visited too.
    fn first_occupied_tick(&self, from: u64, through: u64) -> Option<u64> {
        let size = self.buckets.len() as u64;
        let start = (from % size) as usize;
        let bucket = self
            .occupancy
            .first_from(start)
            .or_else(|| self.occupancy.first_from(0))?;
        // Buckets on from `start`, wrapping round past the last; a tick
        // past `u64::MAX` is none.
        let tick = from.checked_add((bucket as u64 + size - start as u64) % size)?;
        (tick <= through).then_some(tick)
    }

    /// Moves every entry due at `now` into `due`, in the order they are to
    /// run: by deadline, equal deadlines in arming order.
    ///
    /// The buckets alone do not give that order: a bucket holds every
    /// deadline of its tick (and of later rounds' ticks) in arming order,
    /// not deadline order; and once the clock has passed more than a
    /// revolution (a stalled worker, one long advance of a manual clock) the
    /// visit starts mid-wheel and meets the rounds interleaved. So the
    /// entries are sorted here, where they are few: only those due.
    fn collect_due(&mut self, now: Instant, tick: Duration, due: &mut Vec<Due>) {
        let already = due.len();
        let size = self.buckets.len() as u64;
        let last = self.tick_at_or_after(now, tick);
        let visits = last
            .saturating_sub(self.first_open_tick)
            .saturating_add(1)
            .min(size);
        // The ticks `first_open_tick..=through`, at most a revolution, so
        // each bucket at most once; only the occupied ones are visited.
        // (`visits - 1` past the first: it cannot overflow, as `visits` is
        // at most `last - first_open_tick + 1`, and it reaches `u64::MAX`
        // itself when the tick numbers have saturated.)
        let through = self.first_open_tick + (visits - 1);
        let mut visit = self.first_occupied_tick(self.first_open_tick, through);
        while let Some(tick) = visit {
            let mut key = self.buckets[(tick % size) as usize].first;
            while key != NIL {
                // Read before a removal frees the entry; the next one stays.
                let next = self.slots[key].next;
                if self.slots[key].deadline <= now {
                    let entry = self.remove(key);
                    due.push(Due {
                        deadline: entry.deadline,
                        sequence: entry.sequence,
                        task: entry.task,
                    });
                }
                key = next;
            }
            visit = (tick.checked_add(1)).and_then(|from| self.first_occupied_tick(from, through));
        }
        // A bucket is in arming order, most often deadline order too, so
        // this mostly finds the entries sorted already, in linear time.
        // Unstable, which does not allocate; the sequence makes every key
        // distinct, so the order is still fully determined.
        due[already..].sort_unstable_by_key(|entry| (entry.deadline, entry.sequence));
        self.first_open_tick = self.first_open_tick.max(self.tick_at_or_before(now, tick));
        // Until the worker plans: an arm into a tick it has passed wakes it.
        self.worker_wakes_at = self.tick_at_or_before(now, tick).saturating_add(1);
    }
}

impl Shared {
    fn lock_core(&self) -> MutexGuard<'_, Core> {
        // Tasks run outside the lock, so a poisoned lock means a bug in this
        // file; the data is still consistent at every unlock point.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_worker(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        self.worker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run_worker(&self) {
        let mut due = Vec::new();
        let start = self.lock_core().start;
        let tick_nanos = self.tick.as_nanos();
        while !self.stopping.load(Ordering::Acquire) {
            // Re-read each time round: an arm may have moved it earlier.
            let wakes_at = self.lock_core().worker_wakes_at;
            if wakes_at == u64::MAX {
                thread::park();
                continue;
            }
            let since_start = duration_from_nanos(u128::from(wakes_at).saturating_mul(tick_nanos));
            // A deadline near the end of time can round up past it: nothing
            // to wait for there, so sleep until an arm wakes the worker.
            let Some(wake_at) = start.checked_add(since_start) else {
                thread::park();
                continue;
            };
            let now = self.clock.now();
            if now < wake_at {
                thread::park_timeout(wake_at - now);
                continue;
            }
            self.worker_wakeups.fetch_add(1, Ordering::Relaxed);
            let now = self.fire_due(&mut due);
            // After the tasks ran: what they (or anyone) armed meanwhile is
            // in a bucket scanned here, or already lowered the plan.
            let mut core = self.lock_core();
            let next = core.tick_at_or_before(now, self.tick).saturating_add(1);
            if core.worker_wakes_at >= next {
                core.worker_wakes_at = core.next_occupied_tick(next);
            }
        }
    }

    /// Collects what is due now and runs it; returns the time it read.
    fn fire_due(&self, due: &mut Vec<Due>) -> Instant {
        let now = self.clock.now();
        self.lock_core().collect_due(now, self.tick, due);
        for Due { deadline, task, .. } in due.drain(..) {
            self.counters
                .fired(self.clock.now().saturating_duration_since(deadline));
            self.run(task);
        }
        now
    }

    /// Manual clock: fires what is due at `now`, on the advancing thread —
    /// also what the tasks fired arm for a time this advance has passed
    /// (a task re-arming itself a period on): one long advance fires what
    /// several short ones would, as the worker does after a stall.
    fn expire(&self, now: Instant) {
        let mut due = Vec::new();
        loop {
            self.lock_core().collect_due(now, self.tick, &mut due);
            if due.is_empty() {
                return;
            }
            for Due { deadline, task, .. } in due.drain(..) {
                self.counters.fired(now.saturating_duration_since(deadline));
                self.run(task);
            }
        }
    }

    fn run(&self, task: Task) {
        // A panicking task must not take the whole client's timeouts down
        // (the worker), nor the entries collected with it (taken out of the
        // wheel, they would never fire), nor unwind into the thread
        // advancing a manual clock. Nor may an executor's panic: it is the
        // caller's code, and may run the task inline.
        let run = || match (&self.executor, task) {
            (Some(executor), Task::Once(task)) => executor(task),
            (Some(executor), Task::Shared(task, tag)) => executor(Box::new(move || task.fire(tag))),
            (None, Task::Once(task)) => task(),
            (None, Task::Shared(task, tag)) => task.fire(tag),
        };
        drop(catch_unwind(AssertUnwindSafe(run)));
    }

    fn stop(&self) -> Vec<TimerTask> {
        self.stopping.store(true, Ordering::Release);
        let leftovers: Vec<Task> = {
            let mut core = self.lock_core();
            core.stopped = true;
            core.buckets.fill(Bucket::EMPTY);
            core.occupancy.clear_all();
            core.slots.drain().map(|entry| entry.task).collect()
        };
        self.counters.discarded(leftovers.len());
        let mut boxed = Vec::new();
        for task in leftovers {
            match task {
                Task::Once(task) => boxed.push(task),
                Task::Shared(task, tag) => {
                    drop(catch_unwind(AssertUnwindSafe(|| task.stopped(tag))));
                }
            }
        }
        let worker = self.lock_worker().take();
        if let Some(worker) = worker {
            worker.thread().unpark();
            if thread::current().id() != worker.thread().id() {
                let _ = worker.join();
            }
        }
        boxed
    }
}

/// A tick's nanoseconds: a tick is 1 µs to 1 s (the builder clamps it),
/// so they fit a `u64` and are never zero. Ticks are worked out in `u64`
/// while the time since the wheel's start fits one (584 years), where
/// dividing is an instruction rather than a call to `__udivti3`: arming
/// divides once.
fn nanos_of(tick: Duration) -> u64 {
    tick.as_secs() * 1_000_000_000 + u64::from(tick.subsec_nanos())
}

/// The tick `divide` gives for `since`, more than `u64::MAX` nanoseconds
/// after the wheel's start, in `u128`, saturated at the last tick a `u64`
/// counts (where every deadline past that range lands).
#[cold]
fn beyond_u64_nanos(since: Duration, tick: Duration, divide: fn(u128, u128) -> u128) -> u64 {
    divide(since.as_nanos(), tick.as_nanos()).min(u64::MAX as u128) as u64
}

fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = (nanos / 1_000_000_000).min(u64::MAX as u128) as u64;
    Duration::new(secs, (nanos % 1_000_000_000) as u32)
}

mod builder;
mod occupancy;
#[cfg(test)]
mod tests;

pub use builder::WheelBuilder;
