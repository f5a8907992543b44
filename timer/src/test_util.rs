//! Helpers shared by the unit tests of several modules.

use std::time::{Duration, Instant};

/// The latest `Instant` there is.
pub(crate) fn last_instant(base: Instant) -> Instant {
    /// The largest `n` (up to `max`) for which `fits(n)`, given `fits(0)`.
    fn largest(max: u64, fits: impl Fn(u64) -> bool) -> u64 {
        let (mut low, mut high) = (0, max);
        while low < high {
            let mid = low + (high - low).div_ceil(2);
            if fits(mid) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        low
    }
    let secs = largest(u64::MAX, |s| {
        base.checked_add(Duration::from_secs(s)).is_some()
    });
    let base = base + Duration::from_secs(secs);
    let nanos = largest(999_999_999, |ns| {
        base.checked_add(Duration::from_nanos(ns)).is_some()
    });
    base + Duration::from_nanos(nanos)
}
