//! The `event-loop` instrument: a stand-in for the client's event loop.
//!
//! **This module will be replaced by the client's real `EventLoop`** once it
//! can arm a timeout; until then it is the smallest loop with the same
//! timing: one thread owning a mio `Poll`, a [`DeadlineHeap`] of its own
//! timeouts and a [`PreciseWait`] (a timerfd on Linux) that wakes the poll
//! at the heap's nearest deadline. There is no tick: each wake-up is aimed at
//! a deadline.
//!
//! The loop thread arms the whole burst into its heap itself, then loops:
//! arm the wait for `heap.next_deadline()`, poll, acknowledge the wait if
//! its token fired, pop everything due and run it, until the heap is empty
//! or the burst's ceiling passes.

use super::{Burst, Fired, Recorder};
use mio::{Events, Poll, Token};
use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Instant;
use tickless_timer::{Clock, DeadlineHeap, PreciseWait, SystemClock};

/// The wait's token; the loop registers nothing else.
const WAKE: Token = Token(0);

/// What the loop's heap holds: the number of the timeout, which is all the
/// task needs to record its lag.
#[derive(Debug, Clone, Copy)]
struct LagTask {
    index: usize,
}

impl LagTask {
    #[inline]
    fn run(self, recorder: &Recorder, deadline: Instant) {
        recorder.record(self.index, deadline);
    }
}

/// `event-loop`.
pub fn run(burst: &Burst) -> io::Result<Fired> {
    let recorder = Recorder::new(burst.count);
    let loop_recorder = recorder.clone();
    let burst = *burst;
    let handle = thread::Builder::new()
        .name("tick-lag-loop".to_owned())
        .spawn(move || run_loop(&loop_recorder, &burst))?;
    handle
        .join()
        .map_err(|_| io::Error::other("the event loop thread panicked"))??;
    Ok(recorder.fired())
}

fn run_loop(recorder: &Arc<Recorder>, burst: &Burst) -> io::Result<()> {
    let clock = SystemClock;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(16);
    let mut wait = PreciseWait::new(poll.registry(), WAKE)?;
    let mut heap = DeadlineHeap::with_capacity(burst.count);

    let give_up = clock.now() + burst.ceiling();
    for index in 0..burst.count {
        heap.insert(clock.now() + burst.deadline, LagTask { index });
    }

    while !heap.is_empty() {
        let now = clock.now();
        if now >= give_up {
            break;
        }
        let timeout = wait.arm(heap.next_deadline(), now)?;
        // The ceiling bounds the poll only so a broken wait cannot hang the
        // probe; with a timerfd the wait is what wakes it.
        let ceiling = give_up - now;
        match poll.poll(
            &mut events,
            Some(timeout.map_or(ceiling, |t| t.min(ceiling))),
        ) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        }
        if events.iter().any(|event| event.token() == WAKE) {
            wait.acknowledge();
        }
        let now = clock.now();
        while let Some((deadline, task)) = heap.pop_due(now) {
            task.run(recorder, deadline);
        }
    }
    Ok(())
}
