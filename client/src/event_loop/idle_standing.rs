//! [`IdleStanding`]: what the standing entries armed on one scheduler (a
//! loop's heap, or the client's wheel) did while nobody held them.
//!
//! An HTTP/1 connection keeps one *standing* entry that its requests hold
//! in turn (see `exchange::standing`): between two requests it stays
//! armed, held by nobody, and its fire then does nothing but count. Such
//! an entry is no request's timeout. Its scheduler counts it all the
//! same; these counts are what the client's stats take out of the
//! scheduler's own ([`take_out`](IdleStanding::take_out)), so that an
//! idle connection shows no timeout armed.
//!
//! A loop owns one for its heap, and reads [`armed`](IdleStanding::armed)
//! to tell whether every entry on its heap is idle: then no timeout of
//! anyone's is due to fire, and a look at the clock after a task or an
//! event can wait (see `EventLoop::expire_due`). Defined here, with the
//! loop, which must not know of exchanges: the standing entries, a layer
//! up, keep the counts.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tickless_timer::TimerStats;

/// What the standing entries of one scheduler did while nobody held them:
/// armed now, fired, disarmed. See the [module documentation](self).
#[derive(Debug, Default)]
pub(crate) struct IdleStanding {
    armed: AtomicUsize,
    fired: AtomicU64,
    cancelled: AtomicU64,
}

impl IdleStanding {
    /// A standing entry is now armed with nobody holding it (`true`), or
    /// no longer is (`false`: held, disarmed or fired). Told *after* an
    /// entry is armed idle, and *before* an idle one leaves its scheduler
    /// wherever its owner can (a disarm), so that the count does not run
    /// ahead of the idle entries there (see `EventLoop::expire_due`, which
    /// reads it under the lock the heap changes under: relaxed is enough).
    pub(crate) fn idle_now(&self, idle: bool) {
        if idle {
            self.armed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.armed.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A standing entry fired with nobody to fire (nobody held it, the
    /// fire was stale, or early for its holder).
    pub(crate) fn fired(&self) {
        self.fired.fetch_add(1, Ordering::Relaxed);
    }

    /// A standing entry nobody held was disarmed.
    pub(crate) fn cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    /// Standing entries armed now that nobody holds.
    #[inline]
    pub(crate) fn armed(&self) -> usize {
        self.armed.load(Ordering::Relaxed)
    }

    /// `stats` (the scheduler's) without what idle standing entries did.
    pub(crate) fn take_out(&self, mut stats: TimerStats) -> TimerStats {
        let armed = self.armed.load(Ordering::Relaxed);
        stats.armed = stats.armed.saturating_sub(armed);
        let fired = self.fired.load(Ordering::Relaxed);
        stats.fired = stats.fired.saturating_sub(fired);
        let cancelled = self.cancelled.load(Ordering::Relaxed);
        stats.cancelled = stats.cancelled.saturating_sub(cancelled);
        stats
    }
}
