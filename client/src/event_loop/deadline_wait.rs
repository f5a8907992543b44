//! [`DeadlineWait`]: a loop's precise wait, and the deadline it is armed
//! for.
//!
//! Before a poll that would block, a loop works out how long it may wait
//! for its nearest deadline: not at all once the deadline is within the
//! loop's spin, else until the precise wait wakes it there (see
//! [`EventLoop::wait_for_deadline`](super::EventLoop)). That costs a look
//! at the clock and an instant's arithmetic — on every poll of a
//! connection whose requests each carry a timeout, since each request's
//! deadline is a new one.
//!
//! The OS timer (a timerfd on Linux) is only ever moved earlier. So once it
//! is set to wake the poll by the spin of deadline `covered`, it wakes the
//! poll in time for any deadline no earlier than `covered`: the poll may
//! block on it without reading the clock. Should that deadline's spin have
//! begun already, the timer has gone off, and the poll returns at once with
//! its event — the loop then looks at the clock as before. Kept exact by
//! both sides of the timer: set where the timer is armed, cleared where its
//! wake-up is consumed ([`acknowledge`](DeadlineWait::acknowledge)), which
//! every poll's events reach.

use std::io;
use std::time::{Duration, Instant};
use tickless_timer::PreciseWait;

/// A loop's [`PreciseWait`] and the earliest deadline it has been armed
/// for since it last woke. See the [module documentation](self).
pub(super) struct DeadlineWait {
    wait: PreciseWait,
    /// The OS timer wakes the poll by this deadline's spin (it is set for
    /// that spin's start, or earlier); `None` until armed, and again once
    /// its wake-up is consumed. Always `None` where the wait is not
    /// precise: there the poll's own timeout carries the deadline.
    covered: Option<Instant>,
}

impl DeadlineWait {
    /// Registers the wait with `registry` under `token`.
    pub(super) fn new(registry: &mio::Registry, token: mio::Token) -> io::Result<Self> {
        Ok(DeadlineWait {
            wait: PreciseWait::new(registry, token)?,
            covered: None,
        })
    }

    /// Whether the OS timer wakes the poll in time for `deadline`: a poll
    /// may then block without a look at the clock.
    #[inline]
    pub(super) fn covers(&self, deadline: Instant) -> bool {
        self.covered.is_some_and(|covered| covered <= deadline)
    }

    /// Arms the wake-up for `wake_at`, the start of `deadline`'s spin, and
    /// returns the poll's timeout (see [`PreciseWait::arm`]).
    pub(super) fn arm(
        &mut self,
        deadline: Instant,
        wake_at: Instant,
        now: Instant,
    ) -> io::Result<Option<Duration>> {
        let timeout = self.wait.arm(Some(wake_at), now)?;
        if PreciseWait::IS_PRECISE {
            // Moved earlier only: it still wakes by the earlier of the two.
            self.covered = Some(self.covered.map_or(deadline, |c| c.min(deadline)));
        }
        Ok(timeout)
    }

    /// Consumes a wake-up, once a poll reported the wait's token.
    pub(super) fn acknowledge(&mut self) {
        self.wait.acknowledge();
        self.covered = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait() -> (mio::Poll, DeadlineWait) {
        let poll = mio::Poll::new().unwrap();
        let wait = DeadlineWait::new(poll.registry(), mio::Token(1)).unwrap();
        (poll, wait)
    }

    #[test]
    fn it_covers_the_earliest_deadline_armed_and_later_ones_until_it_wakes() {
        if !PreciseWait::IS_PRECISE {
            return;
        }
        let (_poll, mut wait) = wait();
        let now = Instant::now();
        let at = |ms: u64| now + Duration::from_secs(60) + Duration::from_millis(ms);
        assert!(!wait.covers(at(0)), "nothing armed yet");
        wait.arm(at(20), at(10), now).unwrap();
        assert!(wait.covers(at(20)));
        assert!(
            wait.covers(at(30)),
            "a later deadline: the timer wakes first"
        );
        assert!(!wait.covers(at(19)), "an earlier one: it may wake too late");
        // A later arm leaves the timer where it is, and what it covers.
        wait.arm(at(40), at(30), now).unwrap();
        assert!(!wait.covers(at(19)));
        assert!(wait.covers(at(20)));
        // An earlier one moves both.
        wait.arm(at(15), at(5), now).unwrap();
        assert!(wait.covers(at(15)));
        // Its wake-up consumed, it covers nothing until armed again.
        wait.acknowledge();
        assert!(!wait.covers(at(40)));
        wait.arm(at(40), at(30), now).unwrap();
        assert!(wait.covers(at(40)));
        assert!(!wait.covers(at(20)));
    }
}
