//! [`Pacing`]: whether a caller blocked on a response head, or on more of
//! a body, yields for a while before it sleeps.
//!
//! A loopback or LAN answer often comes back within tens of microseconds:
//! yielding for a short while ([`HEAD_SPIN`]) before blocking spares both
//! sides a futex sleep and wake-up, and doubles sequential small requests.
//! So do the pieces of a body a server writes one after another (a
//! chunked body's chunks, nginx's file after its head): a reader that
//! copies them faster than they come catches up and would sleep for each
//! next one, so a wait for more of a body yields too, for less
//! ([`BODY_SPIN`]: a server writing from memory, on the reader's cores,
//! makes a longer spin cost the reader more CPU than it saves) — against
//! nginx, a 64 KiB chunked body read whole took two sleeps and wake-ups a
//! request without the spin, one with it (the README has the
//! measurements).
//! But a yielding caller holds a CPU, and a large transfer needs every CPU
//! for the server and the loop reading it: with 1 MiB bodies on two cores
//! the spin costs a quarter of the throughput. So a client yields only
//! while its bodies are small: it keeps a moving average of the sizes of
//! the bodies that have ended, and spins while that is under
//! [`BULK_BODY`]. Nor while many requests are in flight (more than
//! [`SPIN_IN_FLIGHT`]): the answer waited for comes among many, the loop
//! is busy with them and needs the CPU — with 64 requests on one HTTP/2
//! connection on two cores, the spin cost a third more CPU per request.
//! Nor while spins do not pay: a caller driving its loop notes how its
//! spin went ([`Pacing::record_spin`]), and once most of the recent ones
//! did not pay, only probes spin (see [`SpinScore`]) — scored apart for
//! heads and for bodies ([`WaitFor`]), whose news comes at other paces.

use crate::event_loop::Drove;
use crate::spin::{SpinScore, SPIN_WORTH};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a blocking wait for a head yields before it sleeps.
pub(crate) const HEAD_SPIN: Duration = Duration::from_micros(50);

/// How long a blocking wait for more of a body yields before it sleeps.
pub(crate) const BODY_SPIN: Duration = Duration::from_micros(20);

/// What a blocking wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitFor {
    /// A response's head.
    Head,
    /// More of a body, or its end.
    Body,
}

/// A typical body at least this large makes waits sleep at once.
pub(crate) const BULK_BODY: u64 = 256 * 1024;

/// More requests than this in flight in the client make waits sleep at once.
pub(crate) const SPIN_IN_FLIGHT: usize = 4;

/// A client's recent body sizes and spins, shared by its exchanges.
#[derive(Debug)]
pub(crate) struct Pacing {
    /// Moving average of body sizes (each new one weighs a quarter).
    typical_body: AtomicU64,
    /// How the recent spins of waits for a head went.
    head_spins: SpinScore,
    /// How the recent spins of waits for more of a body went.
    body_spins: SpinScore,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            typical_body: AtomicU64::new(0),
            head_spins: SpinScore::default(),
            body_spins: SpinScore::default(),
        }
    }
}

impl Pacing {
    /// An exchange's body has been read whole: `bytes` long.
    pub(crate) fn record(&self, bytes: u64) {
        // Racing updates may lose one; an average can afford that.
        let typical = self.typical_body.load(Ordering::Relaxed);
        let next = typical - typical / 4 + bytes / 4;
        self.typical_body.store(next, Ordering::Relaxed);
    }

    /// The size of the bodies this client reads, lately (a moving average).
    pub(crate) fn typical_body(&self) -> u64 {
        self.typical_body.load(Ordering::Relaxed)
    }

    /// A spin of a wait for `wait` caught its news after the time given,
    /// or not at all (`None`). It paid only if it caught the news within
    /// [`SPIN_WORTH`]: the caller held a CPU all along.
    pub(crate) fn record_spin(&self, wait: WaitFor, caught_after: Option<Duration>) {
        self.spins(wait)
            .record(caught_after.is_some_and(|after| after <= SPIN_WORTH));
    }

    /// How long a wait for `wait` yields before it sleeps, with
    /// `in_flight` requests in flight in the client and `body_so_far`
    /// bytes of the body waited on come (a body past [`BULK_BODY`] is
    /// bulk, whatever the typical one): its [`Spin`].
    pub(crate) fn spin(&self, wait: WaitFor, in_flight: usize, body_so_far: u64) -> Spin<'_> {
        let typical = self.typical_body.load(Ordering::Relaxed);
        let small = typical.max(body_so_far) < BULK_BODY;
        let time = if small && in_flight <= SPIN_IN_FLIGHT && self.spins(wait).spin_now() {
            match wait {
                WaitFor::Head => HEAD_SPIN,
                WaitFor::Body => BODY_SPIN,
            }
        } else {
            Duration::ZERO
        };
        Spin {
            pacing: self,
            wait,
            time,
        }
    }

    fn spins(&self, wait: WaitFor) -> &SpinScore {
        match wait {
            WaitFor::Head => &self.head_spins,
            WaitFor::Body => &self.body_spins,
        }
    }
}

/// A blocking wait's spin ([`Pacing::spin`]): how long it yields before
/// it sleeps, and where it tells how that went.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spin<'a> {
    /// Scores the spin.
    pacing: &'a Pacing,
    wait: WaitFor,
    time: Duration,
}

impl Spin<'_> {
    /// How long the wait yields before it sleeps.
    pub(crate) fn time(&self) -> Duration {
        self.time
    }

    /// When a drive that spins starts: the clock is read only to score a
    /// spin.
    pub(crate) fn start(&self) -> Option<std::time::Instant> {
        (!self.time.is_zero()).then(std::time::Instant::now)
    }

    /// A drive `started` (see [`start`](Self::start)) went as `drove`
    /// says (`None`: the loop was not the caller's to drive). A wait for a
    /// head caught it if the head came before a poll blocked; a wait for a
    /// body, if its spin caught news at all — a piece of the body, which
    /// spared a sleep, though the body's end may come later.
    pub(crate) fn record(&self, started: Option<std::time::Instant>, drove: Option<Drove>) {
        let (Some(started), Some(drove)) = (started, drove) else {
            return;
        };
        let caught_after = match self.wait {
            WaitFor::Head => drove.unblocked.then(|| started.elapsed()),
            // There before a turn: no spin ran, nothing to score.
            WaitFor::Body if drove.unblocked && drove.spin_caught_at.is_none() => return,
            WaitFor::Body => drove.spin_caught_at.map(|at| at - started),
        };
        self.pacing.record_spin(self.wait, caught_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spin::PROBE_EVERY;

    #[test]
    fn large_bodies_stop_the_spin_and_small_ones_bring_it_back() {
        let pacing = Pacing::default();
        assert_eq!(pacing.spin(WaitFor::Head, 1, 0).time(), HEAD_SPIN);
        for _ in 0..3 {
            pacing.record(1 << 20);
        }
        assert_eq!(pacing.spin(WaitFor::Head, 1, 0).time(), Duration::ZERO);
        // One small body does not undo a run of large ones...
        pacing.record(13);
        assert_eq!(pacing.spin(WaitFor::Head, 1, 0).time(), Duration::ZERO);
        // ...a run of them does.
        for _ in 0..20 {
            pacing.record(13);
        }
        assert_eq!(pacing.spin(WaitFor::Head, 1, 0).time(), HEAD_SPIN);
    }

    #[test]
    fn a_spin_that_catches_its_answer_later_than_spin_worth_did_not_pay() {
        let pacing = Pacing::default();
        for _ in 0..4 {
            pacing.record_spin(WaitFor::Head, None);
            pacing.record_spin(WaitFor::Head, Some(SPIN_WORTH + Duration::from_micros(1)));
        }
        let spins = (0..PROBE_EVERY * 4)
            .filter(|_| pacing.spin(WaitFor::Head, 1, 0).time() == HEAD_SPIN)
            .count();
        assert_eq!(spins, 4, "one probe in {PROBE_EVERY} waits");
        for _ in 0..8 {
            pacing.record_spin(WaitFor::Head, Some(SPIN_WORTH));
        }
        assert!((0..8).all(|_| pacing.spin(WaitFor::Head, 1, 0).time() == HEAD_SPIN));
    }

    #[test]
    fn many_requests_in_flight_stop_the_spin() {
        let pacing = Pacing::default();
        assert_eq!(
            pacing.spin(WaitFor::Head, SPIN_IN_FLIGHT, 0).time(),
            HEAD_SPIN
        );
        assert_eq!(
            pacing.spin(WaitFor::Head, SPIN_IN_FLIGHT + 1, 0).time(),
            Duration::ZERO
        );
        assert_eq!(pacing.spin(WaitFor::Head, 64, 0).time(), Duration::ZERO);
    }

    #[test]
    fn spins_for_bodies_that_do_not_pay_leave_the_spins_for_heads() {
        let pacing = Pacing::default();
        for _ in 0..8 {
            pacing.record_spin(WaitFor::Body, None);
        }
        let body_spins = (0..PROBE_EVERY * 2)
            .filter(|_| pacing.spin(WaitFor::Body, 1, 0).time() == BODY_SPIN)
            .count();
        assert_eq!(body_spins, 2, "one probe in {PROBE_EVERY} waits");
        assert!((0..8).all(|_| pacing.spin(WaitFor::Head, 1, 0).time() == HEAD_SPIN));
    }

    /// A wait for a body whose spin caught a piece of it paid, though the
    /// body's end came after a poll blocked; a wait for a head did not
    /// (its head came after the block).
    #[test]
    fn a_body_spin_pays_by_the_piece_it_caught_a_head_spin_by_the_head() {
        let started = std::time::Instant::now();
        let piece_then_block = Drove {
            unblocked: false,
            spin_caught_at: Some(started + Duration::from_micros(5)),
        };
        let pacing = Pacing::default();
        for _ in 0..8 {
            pacing
                .spin(WaitFor::Body, 1, 0)
                .record(Some(started), Some(piece_then_block));
            pacing
                .spin(WaitFor::Head, 1, 0)
                .record(Some(started), Some(piece_then_block));
        }
        assert!((0..8).all(|_| pacing.spin(WaitFor::Body, 1, 0).time() == BODY_SPIN));
        let head_spins = (0..PROBE_EVERY)
            .filter(|_| pacing.spin(WaitFor::Head, 1, 0).time() == HEAD_SPIN)
            .count();
        assert_eq!(head_spins, 1, "one probe in {PROBE_EVERY} waits");
    }

    #[test]
    fn a_body_past_bulk_stops_the_spin_whatever_the_typical_one() {
        let pacing = Pacing::default();
        assert_eq!(
            pacing.spin(WaitFor::Body, 1, BULK_BODY - 1).time(),
            BODY_SPIN
        );
        assert_eq!(
            pacing.spin(WaitFor::Body, 1, BULK_BODY).time(),
            Duration::ZERO
        );
    }

    /// A wait for a body whose news was there before its drive's first
    /// turn ran no spin: it is not scored (as a spin that paid nothing).
    #[test]
    fn a_body_wait_answered_before_a_turn_is_not_scored() {
        let started = std::time::Instant::now();
        let there_already = Drove {
            unblocked: true,
            spin_caught_at: None,
        };
        let pacing = Pacing::default();
        for _ in 0..8 {
            pacing
                .spin(WaitFor::Body, 1, 0)
                .record(Some(started), Some(there_already));
        }
        assert!((0..8).all(|_| pacing.spin(WaitFor::Body, 1, 0).time() == BODY_SPIN));
    }
}
