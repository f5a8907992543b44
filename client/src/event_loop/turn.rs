//! One turn of a loop, step by step (the steps are listed on
//! [`EventLoop`]).

use super::deadline_wait::DeadlineWait;
use super::source::Sources;
use super::task_wakes;
use super::{Driver, Entry, EventLoop, LoopContext, LoopTask, Readiness, DRIVING, TIMER, WAKER};
use crate::spin::SpinScore;
use crate::sync::lock;
use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, TryLockError};
use std::time::{Duration, Instant};
use tickless_timer::PreciseWait;

/// How long a loop's thread that has just answered tasks polls without
/// blocking, yielding between polls, for their next requests before it
/// blocks (see [`EventLoop::poll`]).
const TASK_REQUEST_SPIN: Duration = Duration::from_micros(40);

/// The longest a poll's sources hold a task's wake-up (see
/// [`task_wakes`]) before the next event's.
#[cfg(not(test))]
const MAX_HOLD: Duration = Duration::from_millis(1);
/// In the loop's own tests, long enough that a stalled thread (this VM
/// stalls threads by 1–3 ms) does not end a hold that a test watches.
#[cfg(test)]
const MAX_HOLD: Duration = Duration::from_secs(1);

/// Tasks run per turn before the loop looks at its sockets again.
const MAX_TASKS_PER_TURN: usize = 64;

/// The slots a task queue of the loop (its inbox, its turn's) keeps once
/// it is empty again after a burst. A slot is a boxed task, 16 bytes:
/// this is 16 KiB a queue. Steady traffic posts a few tasks a request
/// between two turns, so even a loop with hundreds of requests in flight
/// stays below it.
const TASK_SLOTS_KEPT: usize = 1024;

/// A task queue holding more slots than this, empty, gives back all but
/// [`TASK_SLOTS_KEPT`]: the room of a burst (100 000 tasks: about 2 MB a
/// queue) is not kept for the loop's life. Far enough above what it keeps
/// that a load which goes up to a few thousand tasks and back does not
/// make the queues shrink and grow again at every turn. Below it, which
/// is every turn of steady traffic, the check is a compare.
pub(super) const TASK_SLOTS_KEPT_AT_MOST: usize = 4 * TASK_SLOTS_KEPT;

thread_local! {
    /// This thread has answered a caller waiting for its answer since its
    /// loop last looked (see [`answered_a_waiting_caller`]).
    static ANSWERED_A_WAITING_CALLER: Cell<bool> = const { Cell::new(false) };
}

/// Called on a loop's thread when it has just delivered what a blocking
/// caller waits for: a head, or the end of a body, to a thread waiting for
/// it. That caller's next request is likely to come within microseconds,
/// and the loop leaves itself idle for the caller to drive (see "Who
/// drives a loop" on [`EventLoop`]).
pub(crate) fn answered_a_waiting_caller() {
    ANSWERED_A_WAITING_CALLER.with(|answered| answered.set(true));
}

/// Whether this thread has [answered a waiting
/// caller](answered_a_waiting_caller) since it last asked.
pub(crate) fn take_answered_a_waiting_caller() -> bool {
    ANSWERED_A_WAITING_CALLER.with(|answered| answered.replace(false))
}

/// How long a loop's thread leaves the loop idle, for the caller it has
/// just answered to drive, before it takes the loop back (see
/// [`EventLoop::drive_until`]): what a socket's news can wait while
/// nobody is blocked on it.
pub(super) const IDLE_GRACE: Duration = Duration::from_millis(1);

/// How long before a deadline (and its spin) the thread of an idle loop
/// takes it back: a condition variable's timeout is late by the thread's
/// timer slack (50 µs by default) and its wake-up, the loop's precise
/// wait is not.
const IDLE_EARLY: Duration = Duration::from_micros(200);

/// Aborted connections wait while a timeout falls due sooner than this...
const ABORT_GAP: Duration = Duration::from_millis(1);

/// ... but once one has waited this long, it goes whatever is due, one per
/// call: expiries that keep coming less than [`ABORT_GAP`] apart hold the
/// closes back by this much, and from then on they drain as fast as they
/// did when every call closed one.
const ABORT_MAX_WAIT: Duration = Duration::from_millis(20);

/// What a loop's driver keeps across turns.
struct Turn {
    poll: mio::Poll,
    events: mio::Events,
    /// Without the OS timer, the poll timeout carries the deadline.
    wait: Option<DeadlineWait>,
    manual_clock: bool,
    /// Tasks taken from the inbox and not yet run.
    tasks: VecDeque<LoopTask>,
    /// Scratch space for due entries, kept across calls.
    due: Vec<Entry>,
    /// How the thread's waits for the requests of tasks it answered went.
    task_spins: SpinScore,
}

/// Everything a turn works with, handed from driver to driver (the loop's
/// thread, a caller driving it) behind [`EventLoop::turns`].
pub(super) struct TurnState {
    turn: Turn,
    sources: Sources,
    /// An owned handle, so the context can live across `poll`, which
    /// borrows the `Poll` mutably.
    registry: mio::Registry,
}

impl TurnState {
    /// A loop's state before its first turn, around its poll.
    pub(super) fn new(poll: mio::Poll, manual_clock: bool) -> io::Result<TurnState> {
        let wait = DeadlineWait::new(poll.registry(), TIMER)
            .ok()
            .filter(|_| !tests_without_precise_wait());
        let registry = poll.registry().try_clone()?;
        Ok(TurnState {
            turn: Turn {
                poll,
                events: mio::Events::with_capacity(256),
                wait,
                manual_clock,
                tasks: VecDeque::new(),
                due: Vec::new(),
                task_spins: SpinScore::default(),
            },
            sources: Sources::default(),
            registry,
        })
    }
}

/// What [`EventLoop::run_tasks`] leaves the rest of the turn.
struct TasksRun {
    /// The loop must exit: its inbox is closed and every task ran.
    exit: bool,
    /// The clock as the expiry after the last task read it, finding nothing
    /// due: the poll's wait for the nearest deadline starts from it rather
    /// than reading the clock again. `None` if no task ran, or its expiry
    /// read nothing (nothing armed) or fired something.
    clock_read: Option<Instant>,
}

/// Whether a test built this loop on a thread that asked for no precise
/// wait, as where the OS timer is missing (`WITHOUT_PRECISE_WAIT`, in
/// test builds).
fn tests_without_precise_wait() -> bool {
    #[cfg(test)]
    return WITHOUT_PRECISE_WAIT.with(Cell::get);
    #[cfg(not(test))]
    false
}

#[cfg(test)]
thread_local! {
    /// Tests: loops built on this thread have no precise wait, so their
    /// polls' own (relative) timeouts carry their deadlines.
    pub(super) static WITHOUT_PRECISE_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// How a turn ended.
#[derive(Debug, PartialEq, Eq)]
enum Turned {
    /// The next turn may follow.
    Again,
    /// The loop's thread left the loop idle (before polling).
    Idle,
    /// The inbox is closed and every task it accepted has run: the loop
    /// must end (on its thread).
    Exit,
}

/// What a caller's turn needs (see [`EventLoop::drive_until`]).
struct CallerTurn<'a> {
    /// Whether what the caller waits for has come.
    ready: &'a mut dyn FnMut() -> bool,
    /// Until when its poll yields rather than blocks.
    spin_until: Option<Instant>,
    /// Whether a poll has blocked.
    blocked: bool,
    /// When a spin of its polls first caught news.
    spin_caught_at: Option<Instant>,
}

/// How a caller's drive ([`EventLoop::drive_until`]) went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drove {
    /// What it waited for came before any poll blocked.
    pub(crate) unblocked: bool,
    /// When a spin of its polls first caught news (events, a task, a due
    /// deadline), if one did: news may come piece by piece (a body's)
    /// before what it waits for.
    pub(crate) spin_caught_at: Option<Instant>,
}

/// How [`EventLoop::executor_turns`] ended.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))] // driven by `executor::on_tokio`
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ExecutorTurns {
    /// Nothing left: wait for the poll's readiness.
    Parked,
    /// Work left after the budget: yield to the executor's other tasks,
    /// then turn again (`poll`: the last poll filled its buffer, poll
    /// again).
    Again { poll: bool },
    /// The deadline keeper holds the turn state: wait until it lets go
    /// ([`EventLoop::executor_awaits_turns`]), then turn (`poll`: as for
    /// `Again`, what this call was given).
    Taken { poll: bool },
    /// The executor no longer drives the loop: its thread does.
    Stopped,
}

/// What a deadline keeper's batch left on a loop (see
/// [`EventLoop::keep_deadlines_once`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct KeptLeft {
    /// Timeouts due still.
    pub(super) due: bool,
    /// Connections their timeouts failed, to close.
    pub(super) closes: bool,
}

/// Restores the loop this thread drove before an executor's turns, or a
/// deadline keeper's expiries.
struct RestoreDriving(*const EventLoop);

impl Drop for RestoreDriving {
    fn drop(&mut self) {
        DRIVING.with(|driving| driving.set(self.0));
    }
}

/// A caller driving a loop (see [`EventLoop::drive_until`]): hands the
/// loop back on drop, also when a turn unwinds.
struct Driving<'a> {
    event_loop: &'a EventLoop,
    /// The loop this thread drove before (a drive within a turn of another).
    outer: *const EventLoop,
    /// Work left that nobody would run: tasks, sources to run again, aborts.
    busy: bool,
}

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        DRIVING.with(|driving| driving.set(self.outer));
        self.event_loop.release(self.busy);
    }
}

impl EventLoop {
    pub(super) fn run(self: Arc<Self>) {
        super::LOOP_THREAD.with(|on| on.set(Arc::as_ptr(&self)));
        if self.keeper.is_some() {
            self.await_hand_back();
        }
        loop {
            {
                let mut turns = lock(&self.turns);
                let state = &mut *turns;
                loop {
                    match self.turn(state, None) {
                        Turned::Again => {}
                        Turned::Idle => break,
                        Turned::Exit => {
                            let mut cx = LoopContext {
                                event_loop: &self,
                                registry: &state.registry,
                                sources: &mut state.sources,
                            };
                            return self.close_everything(&mut cx);
                        }
                    }
                }
            }
            self.sleep_while_idle();
        }
    }

    /// One turn (the steps are listed on [`EventLoop`]), by the loop's
    /// thread or by a `caller`: that one stops before the poll if what it
    /// waits for has come by then (from a task), rather than block in a
    /// poll nothing may end.
    fn turn(
        self: &Arc<Self>,
        state: &mut TurnState,
        caller: Option<&mut CallerTurn<'_>>,
    ) -> Turned {
        let mut cx = LoopContext {
            event_loop: self,
            registry: &state.registry,
            sources: &mut state.sources,
        };
        let turn = &mut state.turn;
        let TasksRun {
            exit,
            mut clock_read,
        } = self.run_tasks(&mut cx, turn);
        if exit {
            return Turned::Exit;
        }
        // Aborts the tasks' expiries queued go before the poll, which
        // would otherwise hold them while nothing else is due. Closing
        // them takes time the last expiry's reading of the clock missed.
        if !cx.sources.aborts.is_empty() {
            clock_read = None;
        }
        self.close_aborted(&mut cx, &mut turn.due, usize::MAX);
        let busy = !turn.tasks.is_empty() || !cx.sources.again.is_empty();
        let mut caller = caller;
        if let Some(caller) = caller.as_deref_mut() {
            if (caller.ready)() {
                return Turned::Again;
            }
        }
        if !self.poll(turn, busy, caller, clock_read) {
            return Turned::Idle;
        }
        let complete = turn.events.iter().count() < turn.events.capacity();
        cx.sources.polled_at = complete.then(Instant::now);
        // The tasks the events' sources wake are woken once all have run.
        task_wakes::holding(|| self.dispatch_events(&mut cx, turn));
        // Each event's expiry has run, the last one's just now; a poll
        // that ended with no event (its wait for a deadline) has its own.
        if turn.events.is_empty() {
            self.expire_due(&mut cx, &mut turn.due);
        }
        self.run_again(&mut cx, &mut turn.due);
        self.close_aborted(&mut cx, &mut turn.due, usize::MAX);
        Turned::Again
    }

    /// Runs this loop's turns on an executor's worker (see "Driven by an
    /// executor" on [`EventLoop`]), none of whose polls blocks: until no
    /// work is left — the loop is then parked, so the next task posted
    /// wakes the executor's task — or for at most `budget` turns, or until
    /// the executor no longer drives the loop.
    ///
    /// A turn here polls first, then runs the tasks; and it polls only
    /// when the poll may have events — the executor's reactor said so
    /// (`readable`; that readiness was cleared before, so events from then
    /// on say so again), or the last poll filled its buffer — or when the
    /// last poll is older than [`FRESH_POLL`](super::source::FRESH_POLL): woken for posted tasks alone
    /// (requests for idle connections, most often), the turn runs them on
    /// what the sockets said just now, as a loop's thread does, with one
    /// poll for all rather than a peek per connection.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // called by `executor::on_tokio`
    pub(super) fn executor_turns(self: &Arc<Self>, budget: usize, readable: bool) -> ExecutorTurns {
        {
            let mut inbox = lock(&self.inbox);
            if inbox.driver != Driver::Executor {
                return ExecutorTurns::Stopped;
            }
            inbox.parked = false;
        }
        // Held by the deadline keeper expiring a batch: a worker does not
        // wait for it, but lets the executor's other tasks (those the
        // expiries woke among them) run, and the keeper wakes the task once
        // it lets go — rather than have the task yield and look again, a
        // worker spinning for the keeper's whole burst.
        let mut turns = match self.try_take_turns() {
            Some(turns) => turns,
            None if !self.await_turns() => return ExecutorTurns::Stopped,
            // Looked at once more: the keeper may have let go before it
            // could see the task waits.
            None => match self.try_take_turns() {
                Some(turns) => {
                    lock(&self.inbox).executor_awaits_turns = false;
                    turns
                }
                None => return ExecutorTurns::Taken { poll: readable },
            },
        };
        let state = &mut *turns;
        let outer = DRIVING.with(|driving| driving.replace(Arc::as_ptr(self)));
        let _restore = RestoreDriving(outer);
        let mut poll_next = readable;
        for _ in 0..budget {
            let mut cx = LoopContext {
                event_loop: self,
                registry: &state.registry,
                sources: &mut state.sources,
            };
            let turn = &mut state.turn;
            if poll_next || !cx.polled_recently() {
                self.poll_once(turn, Some(Duration::ZERO));
                poll_next = turn.events.iter().count() == turn.events.capacity();
                cx.sources.polled_at = (!poll_next).then(Instant::now);
                task_wakes::holding(|| self.dispatch_events(&mut cx, turn));
                // As in a thread's turn: each event's expiry has run.
                if turn.events.is_empty() {
                    self.expire_due(&mut cx, &mut turn.due);
                }
            }
            if self.run_tasks(&mut cx, turn).exit {
                return self.hand_back_to_thread();
            }
            self.run_again(&mut cx, &mut turn.due);
            self.close_aborted(&mut cx, &mut turn.due, MAX_TASKS_PER_TURN);
            // What a thread's poll would act on; nothing here blocks or
            // spins.
            take_answered_a_waiting_caller();
            task_wakes::take_woke_tasks();
            let busy = !turn.tasks.is_empty()
                || !cx.sources.again.is_empty()
                || !cx.sources.aborts.is_empty();
            if !busy && !poll_next && self.park() {
                return ExecutorTurns::Parked;
            }
        }
        ExecutorTurns::Again { poll: poll_next }
    }

    /// The turn state, unless someone holds it (the deadline keeper).
    fn try_take_turns(&self) -> Option<std::sync::MutexGuard<'_, TurnState>> {
        match self.turns.try_lock() {
            Ok(turns) => Some(turns),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The executor's task found the turn state held: says it waits for
    /// it (the keeper, letting go, wakes it). False if the executor no
    /// longer drives the loop.
    fn await_turns(&self) -> bool {
        let mut inbox = lock(&self.inbox);
        if inbox.driver != Driver::Executor {
            return false;
        }
        inbox.executor_awaits_turns = true;
        true
    }

    /// The executor's task, about to wait for the turn state (see
    /// [`ExecutorTurns::Taken`]): `task` is what the keeper wakes when it
    /// lets go. False if it has let go since: turn again.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // called by `executor::on_tokio`
    pub(super) fn executor_awaits_turns(&self, task: &std::task::Waker) -> bool {
        let mut inbox = lock(&self.inbox);
        if !inbox.executor_awaits_turns {
            return false;
        }
        inbox.set_executor_task(task);
        true
    }

    /// The keeper has let go of the turn state (or of the loop): wakes the
    /// executor's task if it waits for the state. Whoever clears the mark
    /// wakes the task, under the inbox lock the task checks it under, so
    /// the wake-up is never lost.
    pub(super) fn wake_executor_awaiting_turns(&self) {
        let task = {
            let mut inbox = lock(&self.inbox);
            if !std::mem::take(&mut inbox.executor_awaits_turns) {
                return;
            }
            inbox.executor_task.clone()
        };
        if let Some(task) = task {
            task.wake();
        }
    }

    /// The deadline keeper's work (see `DeadlineKeeper::keep`), one batch
    /// under the turn state's lock, an executor's task waiting for that
    /// state woken after each (it seldom wins the state before the
    /// keeper's next batch: a burst runs mostly whole, as on a loop its
    /// thread drives): at most [`MAX_TASKS_PER_TURN`] of the timeouts due,
    /// or once none is, at most `closes` of the connections they failed
    /// closed — here, on the keeper's thread, as on a loop its thread
    /// drives, rather than on the workers whose tasks those timeouts have
    /// just woken. Wakes the executor's task if what expired left work for
    /// a turn (tasks, sources to run again); returns what is left for the
    /// keeper.
    pub(super) fn keep_deadlines_once(self: &Arc<Self>, closes: usize) -> KeptLeft {
        let mut turns = lock(&self.turns);
        // The keeper runs the loop's turn state for the while: code told
        // there (a listener) is on the loop, as on its thread.
        let outer = DRIVING.with(|driving| driving.replace(Arc::as_ptr(self)));
        let _restore = RestoreDriving(outer);
        let state = &mut *turns;
        let more_due = {
            let mut timers = lock(&self.timers);
            let now = self.clock.now();
            while state.turn.due.len() < MAX_TASKS_PER_TURN {
                let Some((_, entry)) = timers.heap.pop_due(now) else {
                    break;
                };
                state.turn.due.push(entry);
            }
            timers.heap.next_deadline().is_some_and(|next| next <= now)
        };
        let mut cx = LoopContext {
            event_loop: self,
            registry: &state.registry,
            sources: &mut state.sources,
        };
        let due = &mut state.turn.due;
        if !due.is_empty() {
            task_wakes::unheld(|| self.expire(&mut cx, due));
        }
        if !more_due && closes > 0 {
            self.close_aborted(&mut cx, due, closes);
        }
        let for_a_turn = !state.turn.tasks.is_empty() || !state.sources.again.is_empty();
        let left = KeptLeft {
            due: more_due,
            closes: !state.sources.aborts.is_empty(),
        };
        drop(turns);
        if for_a_turn {
            let _ = self.waker.wake();
        }
        self.wake_executor_awaiting_turns();
        left
    }

    /// The executor's task, about to wait after its turns left the loop
    /// parked: `task` is what a task posted from now on wakes. False if
    /// one was posted since (the loop is no longer parked): turn again.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))] // called by `executor::on_tokio`
    pub(super) fn executor_waits(&self, task: &std::task::Waker) -> bool {
        let mut inbox = lock(&self.inbox);
        inbox.set_executor_task(task);
        inbox.parked
    }

    /// The executor stops driving the loop (it is closing, or the
    /// executor's task ended): the loop's thread takes it back, woken.
    pub(super) fn hand_back_to_thread(&self) -> ExecutorTurns {
        let mut inbox = lock(&self.inbox);
        if inbox.driver == Driver::Executor {
            inbox.driver = Driver::Thread;
        }
        let task = inbox.executor_task.take();
        // Waiting for the turn state, the task would not be woken to see
        // that it no longer drives the loop.
        let awaits_turns = std::mem::take(&mut inbox.executor_awaits_turns);
        drop(inbox);
        if let Some(task) = task.filter(|_| awaits_turns) {
            task.wake();
        }
        self.keeper_looks_again();
        // A thread no keeper has taken the loop from yet takes it now.
        self.idle_wake.notify_one();
        ExecutorTurns::Stopped
    }

    /// Runs this loop's turns on the calling thread until `ready` — a
    /// caller blocked on an exchange of the loop, driving it while its
    /// thread has left it idle (see "Who drives a loop" on [`EventLoop`]).
    /// `ready` is asked before every turn; whoever makes it true on
    /// another thread must [`wake_driver`](Self::wake_driver). For the
    /// first spin `spin` gives, its polls yield rather than block (see
    /// `Pacing`): asked once the loop is the caller's, so that a spin is
    /// decided — and a probe of one counted — only for a caller that
    /// drives.
    ///
    /// `None`, at once, if the loop is not idle: its thread or another
    /// caller drives it, and the caller waits as it would otherwise. Else
    /// how the drive went: whether `ready` came before any poll blocked,
    /// and when its spin first caught news.
    pub(crate) fn drive_until(
        self: &Arc<Self>,
        ready: &mut dyn FnMut() -> bool,
        spin: impl FnOnce() -> Duration,
    ) -> Option<Drove> {
        {
            let mut inbox = lock(&self.inbox);
            if inbox.driver != Driver::Idle || inbox.closed {
                return None;
            }
            inbox.driver = Driver::Caller;
        }
        let spin = spin();
        let mut caller = CallerTurn {
            ready,
            // A manual clock stands still: a deadline due by real time
            // would end every spin at once, unexpired (as the loop's own
            // poll, which does not spin then either).
            spin_until: (!spin.is_zero() && self.clock.as_manual().is_none())
                .then(|| Instant::now() + spin),
            blocked: false,
            spin_caught_at: None,
        };
        let mut turns = lock(&self.turns);
        let mut driving = Driving {
            event_loop: self,
            outer: DRIVING.with(|driving| driving.replace(Arc::as_ptr(self))),
            busy: true,
        };
        let state = &mut *turns;
        while !(caller.ready)() {
            if self.turn(state, Some(&mut caller)) != Turned::Again {
                break;
            }
        }
        driving.busy = !state.turn.tasks.is_empty()
            || !state.sources.again.is_empty()
            || !state.sources.aborts.is_empty();
        // The state goes back before the loop does (`driving`'s drop).
        drop(turns);
        Some(Drove {
            unblocked: !caller.blocked,
            spin_caught_at: caller.spin_caught_at,
        })
    }

    /// A driving caller hands the loop back: idle, or to its thread, woken
    /// at once, if anything would wait for the end of its grace — tasks or
    /// other work left, someone waiting on the loop's news (an exchange
    /// polled, a thread asleep: see [`EventLoop::sleep_on`]), a deadline
    /// before the thread's wake-up, or the loop closing. Exchanges nobody
    /// waits on (the caller's next ones, most often) stay: their news
    /// waits for the next driver, at most two graces.
    fn release(&self, busy: bool) {
        let mut inbox = lock(&self.inbox);
        // Read under the inbox lock (inbox, then timers, as the idle thread
        // does): a deadline armed after this read finds the loop idle, and
        // wakes its thread if it comes first. Idle standing entries' (see
        // `expire_due`) wake nobody: their fire does nothing, and the
        // thread, a grace away at most, pops them when it looks again.
        let nearest = {
            let timers = lock(&self.timers);
            let all_idle = timers.all_idle(&self.idle_standing);
            timers.heap.next_deadline().filter(|_| !all_idle)
        };
        inbox.driver = Driver::Idle;
        inbox.parked = false;
        inbox.releases = inbox.releases.wrapping_add(1);
        let waited_on = !self.nobody_waits();
        // A thread asleep until the caller is done is woken below, and
        // sleeps again for its grace or its nearest deadline.
        let awaits = inbox.thread_awaits_release;
        let deadline_first = !awaits
            && nearest.is_some_and(|deadline| {
                let wake_at = self.idle_wake_at(deadline);
                inbox
                    .thread_wakes_at
                    .is_none_or(|at| wake_at.is_none_or(|wake_at| wake_at < at))
            });
        if busy || waited_on || deadline_first || inbox.closed || !inbox.tasks.is_empty() {
            inbox.driver = Driver::Thread;
            drop(inbox);
            self.idle_wake.notify_one();
        } else if awaits {
            drop(inbox);
            self.idle_wake.notify_one();
        }
    }

    /// The loop's thread while the loop is idle or a caller drives it:
    /// sleeps until there is work nobody else would run (a task posted not
    /// for a driver, a deadline, the loop closing) or the loop has been
    /// left idle for its grace, then drives it again.
    ///
    /// While a caller comes and goes — request after request, each drive
    /// ending in a release — the thread looks once per grace and sleeps
    /// on: a release does not wake it, and the loop is taken back once a
    /// whole grace has passed with no release and nobody driving (so at
    /// most two graces after the last release). Once it finds a caller
    /// still driving after a grace with no release meanwhile (a long
    /// wait), it sleeps until the next release, which wakes it: a long
    /// wait costs no wake-up per grace.
    fn sleep_while_idle(&self) {
        let mut inbox = lock(&self.inbox);
        loop {
            match inbox.driver {
                // Handed back by a caller that left work.
                Driver::Thread => break,
                // Tasks posted for a driver wait for it (or for the grace).
                Driver::Idle if inbox.closed || inbox.for_the_thread => break,
                _ => {}
            }
            let releases = inbox.releases;
            let now = Instant::now();
            let mut until = now + self.idle_grace;
            let mut for_deadline = false;
            if inbox.driver == Driver::Idle {
                if let Some(deadline) = lock(&self.timers).heap.next_deadline() {
                    let wake_at = self.idle_wake_at(deadline).unwrap_or(now);
                    for_deadline = wake_at < until;
                    until = until.min(wake_at);
                }
                if until <= now {
                    break;
                }
            }
            inbox.thread_wakes_at = Some(until);
            inbox = self
                .idle_wake
                .wait_timeout(inbox, until - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            inbox.thread_wakes_at = None;
            // Woken sooner (a task, a deadline, the loop handed back):
            // look again.
            if Instant::now() < until {
                continue;
            }
            let quiet = inbox.releases == releases;
            match inbox.driver {
                Driver::Idle if quiet || for_deadline => break,
                Driver::Caller if quiet => {
                    inbox.thread_awaits_release = true;
                    // Until a release, even if the caller drives again
                    // before this thread has the lock back.
                    while inbox.driver == Driver::Caller && inbox.releases == releases {
                        inbox = self
                            .idle_wake
                            .wait(inbox)
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                    }
                    inbox.thread_awaits_release = false;
                }
                // The caller let go and came back meanwhile, or let go
                // less than a grace ago: it is likely to come back again.
                _ => {}
            }
        }
        inbox.driver = Driver::Thread;
        inbox.thread_wakes_at = None;
    }

    /// Step 1: runs up to [`MAX_TASKS_PER_TURN`] tasks, expiring what falls
    /// due after each. The loop must exit once its inbox is closed and
    /// every task it accepted has run — decided under the inbox lock, the
    /// one `execute` accepts under.
    ///
    /// Every turn takes the whole inbox: a poll consumes the wake-up of
    /// tasks posted meanwhile, so none may stay behind in it. Each queue,
    /// once empty, keeps at most [`TASK_SLOTS_KEPT_AT_MOST`] slots.
    fn run_tasks(&self, cx: &mut LoopContext<'_>, turn: &mut Turn) -> TasksRun {
        let closed = {
            let mut inbox = lock(&self.inbox);
            turn.tasks.extend(inbox.tasks.drain(..));
            // Empty now: a burst's room goes back (under the lock, once a
            // burst: posting waits for one reallocation).
            if inbox.tasks.capacity() > TASK_SLOTS_KEPT_AT_MOST {
                inbox.tasks.shrink_to(TASK_SLOTS_KEPT);
            }
            inbox.for_the_thread = false;
            inbox.closed
        };
        let batch = turn.tasks.len().min(MAX_TASKS_PER_TURN);
        let mut clock_read = None;
        for task in turn.tasks.drain(..batch) {
            // A panicking task (tasks are public: `execute`) must not take
            // the loop and every connection on it down.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(cx)));
            clock_read = self.expire_due(cx, &mut turn.due);
        }
        if turn.tasks.capacity() > TASK_SLOTS_KEPT_AT_MOST && turn.tasks.is_empty() {
            turn.tasks.shrink_to(TASK_SLOTS_KEPT);
        }
        TasksRun {
            // Closed when the inbox was drained: nothing can have come since.
            exit: closed && turn.tasks.is_empty(),
            clock_read,
        }
    }

    /// The slots of the loop's two task queues, the inbox's and the turn's,
    /// for a test. Waits for the turn state: call it while nobody drives
    /// the loop (left idle, or shut down).
    #[cfg(test)]
    pub(super) fn task_queue_slots(&self) -> [usize; 2] {
        let inbox = lock(&self.inbox).tasks.capacity();
        [inbox, lock(&self.turns).turn.tasks.capacity()]
    }

    /// Step 2: waits for events, for the nearest deadline, or not at all
    /// when work is left over (`busy`). False if, instead, the loop's
    /// thread left the loop idle: it has just answered a blocking caller,
    /// who is likely to drive it next. A `caller` yields rather than
    /// blocks until its spin ends. The loop's thread, when its sources
    /// have just woken tasks (see [`task_wakes`]), yields for up to
    /// [`TASK_REQUEST_SPIN`] first, while such spins catch something (a
    /// [`SpinScore`]): a task that has its answer often sends its next
    /// request within microseconds, which then costs neither a sleep here
    /// nor a wake-up where it is posted.
    ///
    /// `clock_read`: the clock as the last task's expiry read it, finding
    /// nothing due, if nothing has run since (see [`TasksRun`]).
    fn poll(
        &self,
        turn: &mut Turn,
        busy: bool,
        caller: Option<&mut CallerTurn<'_>>,
        clock_read: Option<Instant>,
    ) -> bool {
        let answered = take_answered_a_waiting_caller();
        let woke_tasks = task_wakes::take_woke_tasks();
        if answered && !busy && !turn.manual_clock && caller.is_none() && self.go_idle() {
            return false;
        }
        let nearest = lock(&self.timers).heap.next_deadline();
        let mut timeout = match nearest {
            _ if busy => Some(Duration::ZERO),
            // Nothing armed: events alone end the wait (the clock is read
            // only for a deadline, and not again just after the last
            // task's expiry read it).
            None => None,
            Some(deadline) => {
                let timeout =
                    self.wait_for_deadline(turn.wait.as_mut(), turn.manual_clock, deadline, || {
                        clock_read.unwrap_or_else(|| self.clock.now())
                    });
                self.force_expiry_if(timeout);
                timeout
            }
        };
        if timeout != Some(Duration::ZERO) {
            let mut spun = false;
            if caller.is_none() && woke_tasks && turn.task_spins.spin_now() {
                spun = true;
                let caught = self.spin_for(turn, Instant::now() + TASK_REQUEST_SPIN);
                turn.task_spins.record(caught);
                if caught {
                    return true;
                }
            }
            if let Some(caller) = caller {
                spun |= caller.spin_until.is_some();
                if caller
                    .spin_until
                    .is_some_and(|until| self.spin_for(turn, until))
                {
                    caller.spin_caught_at.get_or_insert_with(Instant::now);
                    return true;
                }
                caller.blocked = true;
            }
            // A timeout here is relative (a precise wait, once armed,
            // leaves none: it wakes the poll itself) — there is no OS timer,
            // or arming it failed — and the spin that just ran used up part
            // of it: worked out again, from now.
            if spun {
                if let (Some(_), Some(deadline)) = (timeout, nearest) {
                    timeout = self
                        .wait_for_deadline(None, turn.manual_clock, deadline, || self.clock.now());
                    self.force_expiry_if(timeout);
                }
            }
            if !self.park() {
                self.poll_once(turn, Some(Duration::ZERO));
                return true;
            }
        }
        self.poll_once(turn, timeout);
        lock(&self.inbox).parked = false;
        true
    }

    /// How long a poll that would block waits for `deadline`, the
    /// nearest, at `now` (the loop's own poll, or its deadline keeper's
    /// while an executor drives it): not at all if it is due or within the loop's
    /// spin (expired after a poll that does not block), else until `wait`,
    /// the poll's precise wait, armed here, wakes it — or the poll's own
    /// timeout, without one. `now` is read only when the wait is not
    /// already armed in time for `deadline` (see [`DeadlineWait`]).
    pub(super) fn wait_for_deadline(
        &self,
        wait: Option<&mut DeadlineWait>,
        manual_clock: bool,
        deadline: Instant,
        now: impl FnOnce() -> Instant,
    ) -> Option<Duration> {
        // The wait wakes the poll by this deadline's spin already (most
        // often armed for an earlier request's deadline on the same
        // connection): the poll may block, with no look at the clock. Its
        // wake-up has come already if that spin has begun: the poll
        // returns at once, and the next one looks.
        if wait.as_ref().is_some_and(|wait| wait.covers(deadline)) {
            return None;
        }
        let now = now();
        // Due already (armed since this turn's expiries).
        if deadline <= now {
            return Some(Duration::ZERO);
        }
        // A manual clock wakes the loop through the waker when advanced,
        // and stands still meanwhile: nothing to spin for.
        if manual_clock {
            return None;
        }
        // Within the spin: from `spin_from` on, the loop polls without
        // blocking until the deadline. (Compared as instants: a subtraction
        // of two instants costs several times one of a duration.)
        let Some(spin_from) = deadline.checked_sub(self.spin) else {
            return Some(Duration::ZERO);
        };
        if spin_from <= now {
            return Some(Duration::ZERO);
        }
        // Relative, the poll's own timeout counts from a fresh reading:
        // `now` may be the last task's expiry's (see `TasksRun::clock_read`),
        // and a timers lock taken since may have waited. So does a wait
        // that is not precise (not Linux): it only works out that timeout.
        let by_poll = || Some(deadline.saturating_duration_since(self.clock.now()));
        match wait {
            Some(wait) => {
                let from = if PreciseWait::IS_PRECISE {
                    now
                } else {
                    self.clock.now()
                };
                wait.arm(deadline, spin_from, from)
                    .unwrap_or_else(|_| by_poll())
            }
            None => by_poll(),
        }
    }

    /// A driving caller's poll before `until`: polls without blocking,
    /// yielding between polls — an answer on loopback or a LAN often comes
    /// within microseconds, and catching it awake saves a sleep and a
    /// wake-up. True if events, a task or a due deadline came first.
    fn spin_for(&self, turn: &mut Turn, until: Instant) -> bool {
        loop {
            self.poll_once(turn, Some(Duration::ZERO));
            if !turn.events.is_empty() || !lock(&self.inbox).tasks.is_empty() {
                return true;
            }
            let now = Instant::now();
            let nearest = lock(&self.timers).heap.next_deadline();
            if nearest.is_some_and(|deadline| deadline <= now) {
                self.force_expiry();
                return true;
            }
            if now >= until {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// When the thread of an idle loop takes it back for `deadline`: its
    /// spin and [`IDLE_EARLY`] before it, the loop's precise wait doing the
    /// rest — or `None`, at once, if that comes before any instant there
    /// is (a spin longer than the clock has run: the loop's poll busy-polls
    /// for every deadline, see [`wait_for_deadline`](Self::wait_for_deadline)).
    pub(super) fn idle_wake_at(&self, deadline: Instant) -> Option<Instant> {
        let early = self.spin.saturating_add(IDLE_EARLY);
        deadline.checked_sub(early)
    }

    /// The loop's thread leaves the loop idle, unless someone waits on its
    /// news (an exchange polled, a thread asleep on one: its events must
    /// not wait for a caller who may not come), a task has come since the
    /// inbox was drained, or it is closing. Exchanges nobody waits on may
    /// be on it: the answered caller's others, most often, which it drives
    /// the loop for when it waits on them.
    fn go_idle(&self) -> bool {
        // Under the inbox lock, as `sleep_on` counts a sleeper.
        let mut inbox = lock(&self.inbox);
        if !inbox.tasks.is_empty() || inbox.closed || !self.nobody_waits() {
            return false;
        }
        inbox.driver = Driver::Idle;
        true
    }

    fn poll_once(&self, turn: &mut Turn, timeout: Option<Duration>) {
        if let Err(error) = turn.poll.poll(&mut turn.events, timeout) {
            if error.kind() != io::ErrorKind::Interrupted {
                // A broken poll cannot be waited on again: stop taking work
                // and fail what this loop carries rather than spin.
                self.stop_taking_work();
            }
        }
    }

    /// Before a poll that blocks: marks the loop parked, so that the next
    /// task posted wakes it — unless one has come since the inbox was
    /// drained (then false: no blocking).
    fn park(&self) -> bool {
        let mut inbox = lock(&self.inbox);
        inbox.parked = inbox.tasks.is_empty();
        inbox.parked
    }

    /// Step 3: hands each event to its source, expiring what falls due
    /// after each.
    fn dispatch_events(&self, cx: &mut LoopContext<'_>, turn: &mut Turn) {
        let events = turn.events.iter().count();
        let hold = task_wakes::PollHold::new(events, MAX_HOLD, cx.sources.polled_at);
        let mut events = turn.events.iter().peekable();
        while let Some(event) = events.next() {
            match event.token() {
                WAKER => {}
                TIMER => {
                    if let Some(wait) = turn.wait.as_mut() {
                        wait.acknowledge();
                    }
                    self.force_expiry();
                }
                token => {
                    if let Some(source) = cx.sources.by_token(token.0) {
                        let readiness = Readiness::of(event);
                        cx.run_source(source, |s, cx| s.ready(cx, readiness));
                    }
                }
            }
            hold.after_event(events.peek().is_none());
            self.expire_due(cx, &mut turn.due);
        }
    }

    /// Step 4: expires every entry due now. `due` is scratch space.
    /// Returns the clock as read, if it was and nothing was due.
    ///
    /// Run after every task and every event: with nothing armed it costs
    /// the lock alone, not a read of the clock too — nor with nothing
    /// armed but *idle standing entries*, an HTTP/1 connection's entry
    /// left armed between its requests with nobody holding it (see
    /// [`IdleStanding`](super::IdleStanding)), unless an expiry is
    /// *forced*. Why that is safe:
    ///
    /// * The gate only ever skips entries whose fire is a no-op: an idle
    ///   entry's fire counts, and fires nothing.
    /// * An entry that falls due must still be popped, idle or not, or a
    ///   poll whose wait says "due now" would return at once for ever. So
    ///   the driver forces the next expiry whenever its poll finds the
    ///   nearest deadline due or within its spin, its spin ends for a due
    ///   deadline, or its precise wait goes off ([`force_expiry`](Self::force_expiry)):
    ///   the poll's wait covers every deadline on the heap, idle or not.
    ///   A busy turn (tasks left over) polls without a wait, and forces
    ///   nothing: an idle entry may then be taken out late, which delays
    ///   no one (its lateness is in the loop's lag histogram all the same);
    ///   a live one is late so only in the case below, a hold from
    ///   another thread read stale, and no later than the turns stay busy.
    /// * A hold makes its entry live (the idle count drops) under the
    ///   standing entry's lock, on the thread that holds — almost always
    ///   this loop's own (an exchange starts on a pooled connection in a
    ///   task of the loop). An entry held from another thread while this
    ///   one reads a count that has not dropped yet is due no earlier than
    ///   it was (a hold for an earlier deadline moves the entry, and is
    ///   uncounted first), a deadline the poll's wait already covers: the
    ///   forced expiry then pops it. An idle entry leaving the heap
    ///   otherwise is uncounted before it goes (a disarm), or by this
    ///   thread in the same expiry that popped it (a fire).
    fn expire_due(&self, cx: &mut LoopContext<'_>, due: &mut Vec<Entry>) -> Option<Instant> {
        let now = {
            let mut timers = lock(&self.timers);
            if timers.all_idle(&self.idle_standing) && !timers.forced_expiry {
                return None;
            }
            timers.forced_expiry = false;
            let now = self.clock.now();
            while let Some((_, entry)) = timers.heap.pop_due(now) {
                due.push(entry);
            }
            now
        };
        // Nothing due, nothing to wake at once: the hold under way (a
        // poll's events) goes on. Run after every event, an `unheld` here
        // would end it at each while anything at all is armed.
        if due.is_empty() {
            return Some(now);
        }
        // A timeout's waiter is woken at once, held wake-ups or not.
        task_wakes::unheld(|| self.expire(cx, due));
        None
    }

    /// Has the next [`expire_due`](Self::expire_due) look at the clock
    /// even if every entry on the heap is an idle standing one: the
    /// driver's poll or spin found a deadline due (or within its spin), or
    /// its precise wait went off. With no idle entry on the heap, nothing
    /// to force: the gate is shut only for an empty heap then. (One that
    /// goes idle just after this look is forced by the next poll, which
    /// finds the same deadline due.)
    fn force_expiry(&self) {
        if self.idle_standing.armed() > 0 {
            lock(&self.timers).forced_expiry = true;
        }
    }

    /// [`force_expiry`](Self::force_expiry) if `timeout`, a poll's wait
    /// for the nearest deadline, is none at all.
    fn force_expiry_if(&self, timeout: Option<Duration>) {
        if timeout == Some(Duration::ZERO) {
            self.force_expiry();
        }
    }

    fn expire(&self, cx: &mut LoopContext<'_>, due: &mut Vec<Entry>) {
        for entry in due.drain(..) {
            match entry {
                // `LoopTimeout` is public, and may panic.
                Entry::Timeout(timeout, tag) => drop(std::panic::catch_unwind(
                    std::panic::AssertUnwindSafe(|| timeout.expire(tag, cx)),
                )),
                Entry::Source(source, tag) => {
                    cx.run_source(source, |s, cx| s.timer(cx, tag));
                }
            }
        }
    }

    /// Step 5a: the sources that spent their budget run again.
    fn run_again(&self, cx: &mut LoopContext<'_>, due: &mut Vec<Entry>) {
        if cx.sources.again.is_empty() {
            return;
        }
        for source in std::mem::take(&mut cx.sources.again) {
            cx.ready_again_now(source);
            self.expire_due(cx, due);
        }
    }

    /// Step 5b (and after step 1): aborts the exchanges timeouts failed on
    /// this loop, oldest first, while no timeout falls due within
    /// [`ABORT_GAP`] — when one does, the poll that follows wakes for it,
    /// and the rest go after it — except one per call that has waited
    /// [`ABORT_MAX_WAIT`]. A burst of expiries, one every few
    /// microseconds, so runs alone, on time; the closes, which cost several
    /// times an expiry each, come after it, or one per call once they are
    /// overdue.
    ///
    /// At most `max` closes per call: an executor's turn closes a bounded
    /// batch, then lets the executor's other tasks run (the tasks those
    /// timeouts woke among them) before the next.
    fn close_aborted(&self, cx: &mut LoopContext<'_>, due: &mut Vec<Entry>, max: usize) {
        // A manual clock's poll wakes for no deadline, only for an advance:
        // an abort left for after the next expiry would wait for that. A
        // loop an executor drives expires its timeouts on its deadline
        // keeper, which a close here never holds back, and its turns would not wake for
        // that expiry (nor after it, if it is cancelled first).
        let may_defer = self.clock.as_manual().is_none() && self.keeper.is_none();
        let mut overdue_one = false;
        let mut closed = 0;
        while let Some(&(source, exchange_id, queued_at)) = cx.sources.aborts.front() {
            if closed == max {
                break;
            }
            closed += 1;
            let now = self.clock.now();
            let nearest = lock(&self.timers).heap.next_deadline();
            let soon = |deadline: Instant| deadline.saturating_duration_since(now) <= ABORT_GAP;
            if may_defer && nearest.is_some_and(soon) {
                let overdue = now.saturating_duration_since(queued_at) >= ABORT_MAX_WAIT;
                if !overdue || overdue_one {
                    break;
                }
                overdue_one = true;
            }
            cx.sources.aborts.pop_front();
            cx.run_source(source, |s, cx| s.abort(cx, exchange_id));
            self.expire_due(cx, due);
        }
    }

    /// After the last turn: every source closes, failing what it carried,
    /// and the timeouts left on the heap are told they were stopped (outside
    /// the timers lock: one may hold the last reference to a client).
    fn close_everything(&self, cx: &mut LoopContext<'_>) {
        self.stop_taking_work();
        for source in cx.sources.refs() {
            cx.run_source(source, |s, cx| {
                s.shut_down(cx);
                cx.remove_me();
            });
        }
        let leftovers = lock(&self.timers).heap.drain();
        for (_, entry) in leftovers {
            if let Entry::Timeout(timeout, tag) = entry {
                drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                    || timeout.stopped(tag),
                )));
            }
        }
    }
}
