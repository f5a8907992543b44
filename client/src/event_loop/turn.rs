//! One turn of a loop, step by step (the steps are listed on
//! [`EventLoop`]).

use super::source::Sources;
use super::{Entry, EventLoop, LoopContext, LoopTask, Readiness, TIMER, WAKER};
use crate::sync::lock;
use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickless_timer::PreciseWait;

/// Tasks run per turn before the loop looks at its sockets again.
const MAX_TASKS_PER_TURN: usize = 64;

thread_local! {
    /// This thread has answered a caller waiting for its answer since its
    /// loop last looked (see [`answered_a_waiting_caller`]).
    static ANSWERED_A_WAITING_CALLER: Cell<bool> = const { Cell::new(false) };
}

/// Called on a loop's thread when it has just delivered what a blocking
/// caller waits for: a head to a caller spinning for it (a wait that
/// yields before it sleeps), or the end of a body to a thread blocked for
/// it. That caller's next request is likely to come within microseconds,
/// and the loop lingers for it before it blocks (see [`EventLoop::linger`]).
pub(crate) fn answered_a_waiting_caller() {
    ANSWERED_A_WAITING_CALLER.with(|answered| answered.set(true));
}

/// Whether this thread has [answered a waiting
/// caller](answered_a_waiting_caller) since it last asked.
pub(crate) fn take_answered_a_waiting_caller() -> bool {
    ANSWERED_A_WAITING_CALLER.with(|answered| answered.replace(false))
}

/// How long a loop that has just answered a waiting caller polls without
/// blocking for that caller's next request (see [`EventLoop::linger`]).
pub(super) const LINGER: Duration = Duration::from_micros(30);

/// Aborted connections wait while a timeout falls due sooner than this...
const ABORT_GAP: Duration = Duration::from_millis(1);

/// ... but once one has waited this long, it goes whatever is due, one per
/// call: expiries that keep coming less than [`ABORT_GAP`] apart hold the
/// closes back by this much, and from then on they drain as fast as they
/// did when every call closed one.
const ABORT_MAX_WAIT: Duration = Duration::from_millis(20);

/// What a loop's thread keeps across turns.
struct Turn {
    poll: mio::Poll,
    events: mio::Events,
    /// Without the OS timer, the poll timeout carries the deadline.
    wait: Option<PreciseWait>,
    manual_clock: bool,
    /// Tasks taken from the inbox and not yet run.
    tasks: VecDeque<LoopTask>,
    /// Scratch space for due entries, kept across calls.
    due: Vec<Entry>,
}

impl EventLoop {
    pub(super) fn run(self: Arc<Self>, poll: mio::Poll) {
        let wait = PreciseWait::new(poll.registry(), TIMER).ok();
        // An owned handle, so the context can live across `poll`, which
        // borrows the `Poll` mutably.
        let registry = match poll.registry().try_clone() {
            Ok(registry) => registry,
            Err(_) => return self.stop_taking_work(),
        };
        let mut turn = Turn {
            poll,
            events: mio::Events::with_capacity(256),
            wait,
            manual_clock: self.clock.as_manual().is_some(),
            tasks: VecDeque::new(),
            due: Vec::new(),
        };
        let mut sources = Sources::default();
        let mut cx = LoopContext {
            event_loop: &self,
            registry: &registry,
            sources: &mut sources,
        };
        while self.run_tasks(&mut cx, &mut turn) {
            // Aborts the tasks' expiries queued go before the poll, which
            // would otherwise hold them while nothing else is due.
            self.close_aborted(&mut cx, &mut turn.due);
            let busy = !turn.tasks.is_empty() || !cx.sources.again.is_empty();
            self.poll(&mut turn, busy);
            let complete = turn.events.iter().count() < turn.events.capacity();
            cx.sources.polled_at = complete.then(Instant::now);
            self.dispatch_events(&mut cx, &mut turn);
            self.expire_due(&mut cx, &mut turn.due);
            self.run_again(&mut cx, &mut turn.due);
            self.close_aborted(&mut cx, &mut turn.due);
        }
        self.close_everything(&mut cx);
    }

    /// Step 1: runs up to [`MAX_TASKS_PER_TURN`] tasks, expiring what falls
    /// due after each. Returns false once the loop must exit: its inbox is
    /// closed and every task it accepted has run — decided under the inbox
    /// lock, the one `execute` accepts under.
    ///
    /// Every turn takes the whole inbox: a poll consumes the wake-up of
    /// tasks posted meanwhile, so none may stay behind in it.
    fn run_tasks(&self, cx: &mut LoopContext<'_>, turn: &mut Turn) -> bool {
        let closed = {
            let mut inbox = lock(&self.inbox);
            turn.tasks.extend(inbox.tasks.drain(..));
            inbox.closed
        };
        let batch = turn.tasks.len().min(MAX_TASKS_PER_TURN);
        for task in turn.tasks.drain(..batch) {
            // A panicking task (tasks are public: `execute`) must not take
            // the loop and every connection on it down.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(cx)));
            self.expire_due(cx, &mut turn.due);
        }
        // Closed when the inbox was drained: nothing can have come since.
        !(closed && turn.tasks.is_empty())
    }

    /// Step 2: waits for events, for the nearest deadline, or not at all
    /// when work is left over (`busy`).
    fn poll(&self, turn: &mut Turn, busy: bool) {
        let answered = take_answered_a_waiting_caller();
        if answered && !busy && !turn.manual_clock && self.linger(turn) {
            return;
        }
        let now = self.clock.now();
        let nearest = lock(&self.timers).heap.next_deadline();
        let timeout = match nearest {
            _ if busy => Some(Duration::ZERO),
            // Due already (armed since this turn's expiries): expired after
            // a poll that does not block.
            Some(deadline) if deadline <= now => Some(Duration::ZERO),
            // A manual clock wakes the loop through the waker when advanced,
            // and stands still meanwhile: nothing to spin for.
            _ if turn.manual_clock => None,
            Some(deadline) if deadline.saturating_duration_since(now) <= self.spin => {
                Some(Duration::ZERO)
            }
            nearest => {
                let wake_at = nearest.map(|deadline| deadline - self.spin);
                let by_poll = || nearest.map(|deadline| deadline.saturating_duration_since(now));
                match turn.wait.as_mut() {
                    Some(wait) => wait.arm(wake_at, now).unwrap_or_else(|_| by_poll()),
                    None => by_poll(),
                }
            }
        };
        if timeout != Some(Duration::ZERO) && !self.park() {
            return self.poll_once(turn, Some(Duration::ZERO));
        }
        self.poll_once(turn, timeout);
        lock(&self.inbox).parked = false;
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

    /// This turn answered a blocking caller waiting for it (see
    /// [`answered_a_waiting_caller`]): its next request is likely to come
    /// within microseconds. Polls without blocking, yielding between polls, for
    /// up to its linger ([`LINGER`]), while not parked — so the caller posts it without
    /// waking the loop, and the loop takes it without a sleep and a
    /// wake-up. Not with a manual clock (its deadlines are not read off
    /// `Instant`).
    ///
    /// True if events, a task or a deadline came (the turn goes on).
    fn linger(&self, turn: &mut Turn) -> bool {
        let until = Instant::now() + self.linger;
        loop {
            self.poll_once(turn, Some(Duration::ZERO));
            if !turn.events.is_empty() || !lock(&self.inbox).tasks.is_empty() {
                return true;
            }
            let now = Instant::now();
            let nearest = lock(&self.timers).heap.next_deadline();
            if nearest.is_some_and(|deadline| deadline <= now) {
                return true;
            }
            if now >= until {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// Step 3: hands each event to its source, expiring what falls due
    /// after each.
    fn dispatch_events(&self, cx: &mut LoopContext<'_>, turn: &mut Turn) {
        for event in turn.events.iter() {
            match event.token() {
                WAKER => {}
                TIMER => {
                    if let Some(wait) = turn.wait.as_mut() {
                        wait.acknowledge();
                    }
                }
                token => {
                    if let Some(source) = cx.sources.by_token(token.0) {
                        let readiness = Readiness::of(event);
                        cx.run_source(source, |s, cx| s.ready(cx, readiness));
                    }
                }
            }
            self.expire_due(cx, &mut turn.due);
        }
    }

    /// Step 4: expires every entry due now. `due` is scratch space.
    fn expire_due(&self, cx: &mut LoopContext<'_>, due: &mut Vec<Entry>) {
        {
            let mut timers = lock(&self.timers);
            // Run after every task and every event: with nothing armed it
            // costs the lock alone, not a read of the clock too.
            if timers.heap.next_deadline().is_none() {
                return;
            }
            let now = self.clock.now();
            while let Some((_, entry)) = timers.heap.pop_due(now) {
                due.push(entry);
            }
        }
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
    fn close_aborted(&self, cx: &mut LoopContext<'_>, due: &mut Vec<Entry>) {
        // A manual clock's poll wakes for no deadline, only for an advance:
        // an abort left for after the next expiry would wait for that.
        let may_defer = self.clock.as_manual().is_none();
        let mut overdue_one = false;
        while let Some(&(source, exchange_id, queued_at)) = cx.sources.aborts.front() {
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
