//! Clocks and counters: process CPU and context switches from
//! `getrusage(RUSAGE_SELF)`, a thread's own from `RUSAGE_THREAD` (what the
//! built-in server's threads report), and what one measured run returns.

use std::time::{Duration, Instant};

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
}

/// CPU time (user + system) and context switches (voluntary + involuntary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu: Duration,
    pub switches: u64,
}

impl Usage {
    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }
}

fn rusage(who: libc::c_int) -> Option<Usage> {
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero
    // bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` that outlives the call,
    // and `who` is one of the RUSAGE_* constants.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    (rc == 0).then(|| Usage {
        cpu: timeval(usage.ru_utime) + timeval(usage.ru_stime),
        switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
    })
}

/// The whole process, every thread included.
pub fn process() -> Usage {
    rusage(libc::RUSAGE_SELF).expect("getrusage(RUSAGE_SELF)")
}

/// The calling thread alone (Linux and Android; `None` elsewhere).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn this_thread() -> Option<Usage> {
    rusage(libc::RUSAGE_THREAD)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn this_thread() -> Option<Usage> {
    None
}

/// Started around the measured part of a run, stopped after it.
pub struct Meter {
    started: Instant,
    usage: Usage,
}

/// What a [`Meter`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub wall: Duration,
    pub usage: Usage,
}

impl Meter {
    pub fn start() -> Meter {
        let usage = process();
        Meter {
            started: Instant::now(),
            usage,
        }
    }

    pub fn stop(self) -> Span {
        let wall = self.started.elapsed();
        Span {
            wall,
            usage: process().since(self.usage),
        }
    }
}

/// What a client's driver returns for the measured part of one run.
#[derive(Debug, Clone)]
pub struct Sample {
    pub span: Span,
    pub requests: u64,
    /// Body bytes received (checked against the route's length).
    pub body_bytes: u64,
    /// Latency of every measured request, in nanoseconds, unsorted.
    pub latencies_ns: Vec<u64>,
}

/// How long a run warms up and how long it measures: drivers loop until
/// the clock passes these, then drain what is in flight.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub warmup: Duration,
    pub measure: Duration,
}

/// Nearest-rank percentile of sorted values (`q` in 0..=1).
pub fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Nanoseconds as a `u64` (saturating).
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
