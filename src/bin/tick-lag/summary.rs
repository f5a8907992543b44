//! The statistics of one burst: mean and nearest-rank percentiles of the lags.

/// Lags of one burst, summarised. All values in nanoseconds, signed so that
/// a timeout that fired early shows as negative instead of vanishing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many timeouts fired.
    pub count: usize,
    /// Mean lag.
    pub mean: f64,
    /// Median lag (nearest rank).
    pub p50: i64,
    /// 99th percentile lag (nearest rank).
    pub p99: i64,
    /// Largest lag.
    pub max: i64,
}

impl Summary {
    /// Summarises `lags_ns`; `None` if it is empty.
    pub fn of(lags_ns: &[i64]) -> Option<Summary> {
        let mut sorted = lags_ns.to_vec();
        sorted.sort_unstable();
        let sum: i128 = sorted.iter().map(|&lag| i128::from(lag)).sum();
        Some(Summary {
            count: sorted.len(),
            mean: sum as f64 / sorted.len().max(1) as f64,
            p50: percentile(&sorted, 50)?,
            p99: percentile(&sorted, 99)?,
            max: *sorted.last()?,
        })
    }
}

/// The nearest-rank `percent` percentile of `sorted` (ascending): the
/// smallest value with at least `percent`% of the values at or below it, that
/// is the value of rank `ceil(percent / 100 * n)`, counting from 1. `None`
/// for an empty slice.
pub fn percentile(sorted: &[i64], percent: u32) -> Option<i64> {
    let percent = usize::try_from(percent.min(100)).ok()?;
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let hundred: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&hundred, 50), Some(50));
        assert_eq!(percentile(&hundred, 99), Some(99));
        assert_eq!(percentile(&hundred, 100), Some(100));
        assert_eq!(percentile(&hundred, 0), Some(1));
        // n = 10: p99 is rank ceil(9.9) = 10, p50 rank 5.
        let ten: Vec<i64> = (1..=10).map(|v| v * 10).collect();
        assert_eq!(percentile(&ten, 99), Some(100));
        assert_eq!(percentile(&ten, 50), Some(50));
        // n = 2000 as in the default burst: p50 is rank 1000, p99 rank 1980.
        let burst: Vec<i64> = (1..=2000).collect();
        assert_eq!(percentile(&burst, 50), Some(1000));
        assert_eq!(percentile(&burst, 99), Some(1980));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn summary_sorts_and_keeps_signs() {
        let summary = Summary::of(&[30, -10, 20, 10]).unwrap();
        assert_eq!(summary.count, 4);
        assert_eq!(summary.mean, 12.5);
        assert_eq!((summary.p50, summary.p99, summary.max), (10, 30, 30));
        assert_eq!(Summary::of(&[]), None);
    }
}
