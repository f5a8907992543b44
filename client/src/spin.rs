//! [`SpinScore`]: whether a thread's short spin before it sleeps pays,
//! lately.
//!
//! A thread about to sleep for news that often comes within microseconds
//! (an answer on loopback, a task's next request) may yield for a while
//! first and catch it awake, sparing a sleep and a wake-up. A spin that
//! catches nothing, or its news too late (for a caller holding a CPU,
//! later than [`SPIN_WORTH`]), has burnt more CPU than it saved. So a
//! spinner notes whether each spin paid ([`SpinScore::record`]), and once
//! most of its recent spins did not, spins only once in [`PROBE_EVERY`]
//! times, to notice when news comes quickly again.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A caller's spin that catches its news later than this cost more CPU
/// than the sleep and wake-up it saved.
pub(crate) const SPIN_WORTH: Duration = Duration::from_micros(20);

/// While spins do not pay, one time in this many spins all the same.
pub(crate) const PROBE_EVERY: u32 = 16;

/// [`SpinScore::score`] when every recent spin paid.
const SPIN_PAID: u32 = 1024;

/// How a spinner's recent spins went. Shared by threads (a client's
/// callers) or kept by one (a loop's driver): racing updates may lose one,
/// which a moving average can afford.
#[derive(Debug)]
pub(crate) struct SpinScore {
    /// Moving average of the spins that paid, out of
    /// [`SPIN_PAID`] (each new one weighs an eighth).
    score: AtomicU32,
    /// Times that did not spin since the last probe.
    since_probe: AtomicU32,
}

impl Default for SpinScore {
    fn default() -> Self {
        SpinScore {
            score: AtomicU32::new(SPIN_PAID),
            since_probe: AtomicU32::new(0),
        }
    }
}

impl SpinScore {
    /// A spin paid, or did not.
    pub(crate) fn record(&self, paid: bool) {
        let score = self.score.load(Ordering::Relaxed);
        let next = score - score / 8 + if paid { SPIN_PAID / 8 } else { 0 };
        self.score.store(next, Ordering::Relaxed);
    }

    /// Whether to spin this time: while most recent spins paid, and once
    /// in [`PROBE_EVERY`] times otherwise.
    pub(crate) fn spin_now(&self) -> bool {
        if self.score.load(Ordering::Relaxed) >= SPIN_PAID / 2 {
            return true;
        }
        let times = self.since_probe.fetch_add(1, Ordering::Relaxed) + 1;
        if times >= PROBE_EVERY {
            self.since_probe.store(0, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_that_do_not_pay_stop_but_for_probes_and_paying_ones_bring_them_back() {
        let score = SpinScore::default();
        assert!(score.spin_now());
        for _ in 0..8 {
            score.record(false);
        }
        let spins = (0..PROBE_EVERY * 4).filter(|_| score.spin_now()).count();
        assert_eq!(spins, 4, "one probe in {PROBE_EVERY} times");
        for _ in 0..8 {
            score.record(true);
        }
        assert!((0..8).all(|_| score.spin_now()));
    }
}
