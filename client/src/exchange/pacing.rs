//! [`Pacing`]: whether a caller blocked on a response head yields for a
//! while before it sleeps.
//!
//! A loopback or LAN answer often comes back within tens of microseconds:
//! yielding for a short while ([`HEAD_SPIN`]) before blocking spares both
//! sides a futex sleep and wake-up, and doubles sequential small requests.
//! But a yielding caller holds a CPU, and a large transfer needs every CPU
//! for the server and the loop reading it: with 1 MiB bodies on two cores
//! the spin costs a quarter of the throughput. So a client yields only
//! while its bodies are small: it keeps a moving average of the sizes of
//! the bodies it has read whole, and spins while that is under
//! [`BULK_BODY`]. Nor while many requests are in flight (more than
//! [`SPIN_IN_FLIGHT`]): the answer waited for comes among many, the loop
//! is busy with them and needs the CPU — with 64 requests on one HTTP/2
//! connection on two cores, the spin cost a third more CPU per request.
//! Nor while spins do not pay: a caller driving its loop notes how its
//! spin went ([`Pacing::record_spin`]), and once most of the recent ones
//! did not pay, only probes spin (see [`SpinScore`]).
//! The README has the measurements.

use crate::spin::{SpinScore, SPIN_WORTH};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a blocking wait for a head yields before it sleeps.
pub(crate) const HEAD_SPIN: Duration = Duration::from_micros(50);

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
    spins: SpinScore,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            typical_body: AtomicU64::new(0),
            spins: SpinScore::default(),
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

    /// A spin of a wait for a head caught its answer after the time
    /// given, or not at all (`None`). It paid only if it caught the answer
    /// within [`SPIN_WORTH`]: the caller held a CPU all along.
    pub(crate) fn record_spin(&self, caught_after: Option<Duration>) {
        self.spins
            .record(caught_after.is_some_and(|after| after <= SPIN_WORTH));
    }

    /// How long a wait for a head yields before it sleeps, with
    /// `in_flight` requests in flight in the client.
    pub(crate) fn head_spin(&self, in_flight: usize) -> Duration {
        let small = self.typical_body.load(Ordering::Relaxed) < BULK_BODY;
        if !small || in_flight > SPIN_IN_FLIGHT {
            return Duration::ZERO;
        }
        if self.spins.spin_now() {
            HEAD_SPIN
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spin::PROBE_EVERY;

    #[test]
    fn large_bodies_stop_the_spin_and_small_ones_bring_it_back() {
        let pacing = Pacing::default();
        assert_eq!(pacing.head_spin(1), HEAD_SPIN);
        for _ in 0..3 {
            pacing.record(1 << 20);
        }
        assert_eq!(pacing.head_spin(1), Duration::ZERO);
        // One small body does not undo a run of large ones...
        pacing.record(13);
        assert_eq!(pacing.head_spin(1), Duration::ZERO);
        // ...a run of them does.
        for _ in 0..20 {
            pacing.record(13);
        }
        assert_eq!(pacing.head_spin(1), HEAD_SPIN);
    }

    #[test]
    fn a_spin_that_catches_its_answer_later_than_spin_worth_did_not_pay() {
        let pacing = Pacing::default();
        for _ in 0..4 {
            pacing.record_spin(None);
            pacing.record_spin(Some(SPIN_WORTH + Duration::from_micros(1)));
        }
        let spins = (0..PROBE_EVERY * 4)
            .filter(|_| pacing.head_spin(1) == HEAD_SPIN)
            .count();
        assert_eq!(spins, 4, "one probe in {PROBE_EVERY} waits");
        for _ in 0..8 {
            pacing.record_spin(Some(SPIN_WORTH));
        }
        assert!((0..8).all(|_| pacing.head_spin(1) == HEAD_SPIN));
    }

    #[test]
    fn many_requests_in_flight_stop_the_spin() {
        let pacing = Pacing::default();
        assert_eq!(pacing.head_spin(SPIN_IN_FLIGHT), HEAD_SPIN);
        assert_eq!(pacing.head_spin(SPIN_IN_FLIGHT + 1), Duration::ZERO);
        assert_eq!(pacing.head_spin(64), Duration::ZERO);
    }
}
