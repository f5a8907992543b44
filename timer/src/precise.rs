//! [`PreciseWait`]: an event loop's wake-up at its nearest deadline.

use crate::sys::OsWait;
use std::io;
use std::time::{Duration, Instant};

/// Wakes a mio `Poll` at a deadline, as precisely as the platform allows.
///
/// An event loop registers one with a token of its own, and before each
/// `poll` calls [`arm`](Self::arm) with its nearest deadline (from its
/// [`DeadlineHeap`](crate::DeadlineHeap)) and passes the returned timeout to
/// `Poll::poll`. When `poll` returns the token, it calls
/// [`acknowledge`](Self::acknowledge). Either way it then pops what is due:
/// the heap, not the wait, decides what fires, so a wake-up that comes a
/// little early fires nothing early.
///
/// # Portability
///
/// On Linux a timerfd set to an absolute `CLOCK_MONOTONIC` time: nanosecond
/// resolution, and a lateness that does not grow with the length of the
/// wait (only the thread's wake-up is late). Elsewhere the poll
/// timeout, which mio rounds up to whole milliseconds.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use tickless_timer::PreciseWait;
///
/// let mut poll = mio::Poll::new()?;
/// let mut events = mio::Events::with_capacity(8);
/// let mut wait = PreciseWait::new(poll.registry(), mio::Token(0))?;
/// let deadline = Instant::now() + Duration::from_millis(2);
/// while Instant::now() < deadline {
///     let timeout = wait.arm(Some(deadline), Instant::now())?;
///     poll.poll(&mut events, timeout)?;
///     if events.iter().any(|e| e.token() == mio::Token(0)) {
///         wait.acknowledge();
///     }
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct PreciseWait {
    os: OsWait,
}

impl PreciseWait {
    /// Whether this platform wakes finer than whole milliseconds.
    pub const IS_PRECISE: bool = OsWait::PRECISE;

    /// Registers the wait with `registry` under `token`.
    pub fn new(registry: &mio::Registry, token: mio::Token) -> io::Result<Self> {
        Ok(PreciseWait {
            os: OsWait::new(registry, token)?,
        })
    }

    /// Arms the wake-up for `deadline` (`None`: no deadline) and returns the
    /// timeout to give `Poll::poll`.
    ///
    /// The OS timer is only moved earlier, never later or off: a wake-up
    /// armed for a deadline that was since cancelled comes anyway, once, and
    /// the loop then finds nothing due and arms again. That spares a system
    /// call on every arm and every cancel.
    #[inline]
    pub fn arm(&mut self, deadline: Option<Instant>, now: Instant) -> io::Result<Option<Duration>> {
        self.os.arm(deadline, now)
    }

    /// Consumes a wake-up, once `poll` reported the wait's token.
    pub fn acknowledge(&mut self) {
        self.os.acknowledge()
    }
}

impl std::fmt::Debug for PreciseWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreciseWait")
            .field("precise", &Self::IS_PRECISE)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::last_instant;

    #[test]
    fn a_deadline_at_the_end_of_time_arms_and_a_near_one_still_wakes() {
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(8);
        let token = mio::Token(7);
        let mut wait = PreciseWait::new(poll.registry(), token).unwrap();
        // Saturates to the latest time the OS timer can hold: no error, no
        // overflow.
        wait.arm(Some(last_instant(Instant::now())), Instant::now())
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(5);
        let give_up = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            assert!(
                Instant::now() < give_up,
                "the near deadline never woke the poll"
            );
            let timeout = wait.arm(Some(deadline), Instant::now()).unwrap();
            poll.poll(&mut events, timeout.or(Some(Duration::from_secs(10))))
                .unwrap();
            if events.iter().any(|e| e.token() == token) {
                wait.acknowledge();
            }
        }
    }
}
