//! Hedged requests ("backup requests", as in Finagle and "The Tail at
//! Scale"): when an attempt has not answered after a delay, a copy is sent
//! on another connection, and the first head to come wins; every other
//! copy is cancelled at once (its connection closed, its timers disarmed).
//!
//! * **Which**: opt-in ([`Policy`], on the client or per request), for
//!   idempotent requests whose body is held in memory.
//! * **When**: after a fixed delay ([`Policy::after`]), or a percentile of
//!   this origin's recent latencies ([`Policy::percentile`], tracked per
//!   origin in a small histogram, with a fixed delay until it has enough
//!   samples). The delay is one of the first attempt's named timers: on the
//!   wheel until its connection is ready, then on that connection's loop
//!   in event-loop mode — exact, like its timeouts.
//! * **Bounds**: at most [`Policy::max_copies`] copies; never past the
//!   request deadline (which every copy shares); each copy counts against
//!   the client's retry [`Budget`](super::retry::Budget).

use crate::net::Origin;
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Whether and when a request is hedged. See the [module documentation](self).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    delay: Option<Delay>,
    copies: u32,
}

#[derive(Clone, Copy, Debug)]
enum Delay {
    Fixed(Duration),
    Percentile {
        quantile: f64,
        until_known: Duration,
    },
}

/// Samples an origin's histogram needs before its percentile is used.
const MIN_SAMPLES: u64 = 20;

impl Policy {
    /// No hedging (the default).
    pub fn none() -> Policy {
        Policy::default()
    }

    /// One copy after `delay` without a response head.
    pub fn after(delay: Duration) -> Policy {
        Policy {
            delay: Some(Delay::Fixed(delay)),
            copies: 1,
        }
    }

    /// One copy after the `percentile` (e.g. 95.0) of this origin's recent
    /// head latencies; until 20 have been seen, after `until_known`.
    pub fn percentile(percentile: f64, until_known: Duration) -> Policy {
        Policy {
            delay: Some(Delay::Percentile {
                quantile: (percentile / 100.0).clamp(0.0, 1.0),
                until_known,
            }),
            copies: 1,
        }
    }

    /// At most `copies` copies besides the first attempt (default 1), each
    /// a delay after the one before.
    pub fn max_copies(mut self, copies: u32) -> Policy {
        self.copies = copies;
        self
    }

    pub(crate) fn hedges(&self) -> bool {
        self.delay.is_some() && self.copies > 0
    }

    pub(crate) fn copies(&self) -> u32 {
        self.copies
    }

    /// Whether this policy needs latencies recorded.
    pub(crate) fn tracks_latency(&self) -> bool {
        matches!(self.delay, Some(Delay::Percentile { .. }))
    }

    /// The delay before the next copy, for `origin`.
    pub(crate) fn delay(&self, origin: &Origin, latencies: &Latencies) -> Option<Duration> {
        match self.delay? {
            Delay::Fixed(delay) => Some(delay),
            Delay::Percentile {
                quantile,
                until_known,
            } => Some(latencies.quantile(origin, quantile).unwrap_or(until_known)),
        }
    }
}

/// Recent head latencies per origin: a histogram each, with buckets a
/// quarter of a power of two wide (about 19 % apart), from 1 µs to about
/// 70 minutes. Older samples fade: when an origin has seen 1024 since the
/// last fade, every bucket is halved.
#[derive(Default)]
pub(crate) struct Latencies {
    origins: Mutex<HashMap<Origin, Histogram>>,
}

const BUCKETS: usize = 128;
const FADE_EVERY: u64 = 1024;

struct Histogram {
    buckets: [u64; BUCKETS],
    total: u64,
    since_fade: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            buckets: [0; BUCKETS],
            total: 0,
            since_fade: 0,
        }
    }
}

/// The bucket of a latency: `4 · log2(µs)`, rounded down.
fn bucket_of(latency: Duration) -> usize {
    let micros = latency.as_micros().max(1) as f64;
    ((micros.log2() * 4.0) as usize).min(BUCKETS - 1)
}

/// The upper bound of a bucket.
fn bucket_top(bucket: usize) -> Duration {
    Duration::from_secs_f64(2f64.powf((bucket + 1) as f64 / 4.0) / 1e6)
}

impl Latencies {
    pub(crate) fn record(&self, origin: &Origin, latency: Duration) {
        let mut origins = lock(&self.origins);
        let histogram = match origins.get_mut(origin) {
            Some(histogram) => histogram,
            None => origins.entry(origin.clone()).or_default(),
        };
        histogram.buckets[bucket_of(latency)] += 1;
        histogram.total += 1;
        histogram.since_fade += 1;
        if histogram.since_fade >= FADE_EVERY {
            histogram.since_fade = 0;
            histogram.total = 0;
            for bucket in &mut histogram.buckets {
                *bucket /= 2;
                histogram.total += *bucket;
            }
        }
    }

    /// The latency below which `quantile` of `origin`'s recent samples
    /// fall (a bucket's upper bound), once it has enough of them.
    pub(crate) fn quantile(&self, origin: &Origin, quantile: f64) -> Option<Duration> {
        let origins = lock(&self.origins);
        let histogram = origins.get(origin)?;
        if histogram.total < MIN_SAMPLES {
            return None;
        }
        let rank = (quantile * histogram.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, count) in histogram.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_top(bucket));
            }
        }
        Some(bucket_top(BUCKETS - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin::of(&"http://a.test/".parse().unwrap()).unwrap()
    }

    #[test]
    fn the_percentile_is_used_once_known_and_tracks_the_tail() {
        let latencies = Latencies::default();
        let policy = Policy::percentile(95.0, Duration::from_millis(7));
        assert_eq!(
            policy.delay(&origin(), &latencies),
            Some(Duration::from_millis(7))
        );
        // 90 fast (1 ms), 10 slow (200 ms): p95 is in the slow ones' bucket,
        // p50 in the fast ones'.
        for _ in 0..90 {
            latencies.record(&origin(), Duration::from_millis(1));
        }
        for _ in 0..10 {
            latencies.record(&origin(), Duration::from_millis(200));
        }
        let p95 = latencies.quantile(&origin(), 0.95).unwrap();
        assert!(
            p95 >= Duration::from_millis(200) && p95 < Duration::from_millis(240),
            "{p95:?}"
        );
        let p50 = latencies.quantile(&origin(), 0.5).unwrap();
        assert!(
            p50 >= Duration::from_millis(1) && p50 < Duration::from_micros(1200),
            "{p50:?}"
        );
        let other = Origin::of(&"http://b.test/".parse().unwrap()).unwrap();
        assert_eq!(latencies.quantile(&other, 0.95), None, "per origin");
    }

    #[test]
    fn old_samples_fade() {
        let latencies = Latencies::default();
        for _ in 0..FADE_EVERY {
            latencies.record(&origin(), Duration::from_millis(100));
        }
        for _ in 0..3 * FADE_EVERY {
            latencies.record(&origin(), Duration::from_millis(1));
        }
        let p10 = latencies.quantile(&origin(), 0.9).unwrap();
        assert!(p10 < Duration::from_millis(2), "{p10:?}");
    }

    #[test]
    fn no_delay_no_hedge() {
        assert!(!Policy::none().hedges());
        assert!(!Policy::after(Duration::from_millis(1))
            .max_copies(0)
            .hedges());
        assert!(Policy::after(Duration::from_millis(1)).hedges());
    }
}
