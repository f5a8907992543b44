//! Counters a timer keeps about itself: what is armed now, what fired, and
//! how late it fired.
//!
//! They are plain relaxed atomics: each is exact on its own, but a snapshot
//! taken while timers fire may see one counter updated before another.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// Number of lag buckets: bucket 0 holds lags under 1 µs, bucket `i` lags in
/// `[2^(i-1), 2^i)` µs, and the last one everything from about 1 s up.
pub const LAG_BUCKETS: usize = 22;

/// A histogram of how late timeouts fired, in power-of-two microsecond buckets.
#[derive(Debug, Default)]
pub struct LagHistogram {
    buckets: [AtomicU64; LAG_BUCKETS],
}

impl LagHistogram {
    /// Records one lag.
    #[inline]
    pub fn record(&self, lag: Duration) {
        let micros = lag.as_micros().min(u64::MAX as u128) as u64;
        let bucket = (u64::BITS - micros.leading_zeros()) as usize;
        self.buckets[bucket.min(LAG_BUCKETS - 1)].fetch_add(1, Relaxed);
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> LagSnapshot {
        LagSnapshot {
            counts: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
        }
    }
}

/// A copy of a [`LagHistogram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LagSnapshot {
    /// Count per bucket; see [`LAG_BUCKETS`] for the bounds.
    pub counts: [u64; LAG_BUCKETS],
}

impl LagSnapshot {
    /// How many lags were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The exclusive upper bound of bucket `index` (the last bucket has
    /// none: it holds everything from `2^(LAG_BUCKETS - 2)` µs up).
    pub fn bucket_upper_bound(index: usize) -> Duration {
        Duration::from_micros(1u64 << index.min(LAG_BUCKETS - 1))
    }

    /// An upper bound on the `q` quantile (0.0 to 1.0) of the recorded lags:
    /// the upper bound of the bucket it falls in. `None` if nothing was
    /// recorded, or if the quantile falls in the last bucket, which has no
    /// upper bound.
    pub fn quantile_upper_bound(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return (index < LAG_BUCKETS - 1).then(|| Self::bucket_upper_bound(index));
            }
        }
        None
    }
}

/// The counters of one timer (the wheel, or one loop's deadline heap).
///
/// Only the timers of this crate change them ([`HashedWheelTimer`](crate::HashedWheelTimer),
/// [`CountedHeap`](crate::CountedHeap)), as they arm, cancel and fire;
/// anyone may take a [`snapshot`](Self::snapshot).
#[derive(Debug, Default)]
pub struct TimerCounters {
    armed: AtomicUsize,
    fired: AtomicU64,
    cancelled: AtomicU64,
    lag: LagHistogram,
}

impl TimerCounters {
    /// An entry was armed.
    #[inline]
    pub(crate) fn armed(&self) {
        self.armed.fetch_add(1, Relaxed);
    }

    /// An armed entry was cancelled.
    #[inline]
    pub(crate) fn cancelled(&self) {
        self.armed.fetch_sub(1, Relaxed);
        self.cancelled.fetch_add(1, Relaxed);
    }

    /// An armed entry fired, `lag` after its deadline.
    #[inline]
    pub(crate) fn fired(&self, lag: Duration) {
        self.armed.fetch_sub(1, Relaxed);
        self.fired.fetch_add(1, Relaxed);
        self.lag.record(lag);
    }

    /// Armed entries were discarded without firing (the timer stopped).
    pub(crate) fn discarded(&self, count: usize) {
        self.armed.fetch_sub(count, Relaxed);
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> TimerStats {
        TimerStats {
            armed: self.armed.load(Relaxed),
            fired: self.fired.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            lag: self.lag.snapshot(),
        }
    }
}

/// A snapshot of one timer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    /// Entries armed now (neither fired nor cancelled yet).
    pub armed: usize,
    /// Entries that fired since the timer started.
    pub fired: u64,
    /// Entries cancelled since the timer started.
    pub cancelled: u64,
    /// How late the fired entries fired.
    pub lag: LagSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lags_land_in_power_of_two_buckets() {
        let histogram = LagHistogram::default();
        histogram.record(Duration::from_nanos(300)); // < 1 µs: bucket 0
        histogram.record(Duration::from_micros(3)); // [2, 4): bucket 2
        histogram.record(Duration::from_secs(100)); // clamped to the last
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.counts[0], 1);
        assert_eq!(snapshot.counts[2], 1);
        assert_eq!(snapshot.counts[LAG_BUCKETS - 1], 1);
        assert_eq!(
            snapshot.quantile_upper_bound(0.5),
            Some(Duration::from_micros(4))
        );
    }

    #[test]
    fn armed_returns_to_zero() {
        let counters = TimerCounters::default();
        counters.armed();
        counters.armed();
        counters.armed();
        counters.cancelled();
        counters.fired(Duration::ZERO);
        counters.discarded(1);
        let stats = counters.snapshot();
        assert_eq!((stats.armed, stats.fired, stats.cancelled), (0, 1, 1));
    }
}
