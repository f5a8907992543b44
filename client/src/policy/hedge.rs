//! Hedged requests ("backup requests", as in Finagle and "The Tail at
//! Scale"): when an attempt has not answered after a delay, a copy is sent
//! on another connection than any attempt of the request in flight (a
//! copy beside another, on its connection, would race nothing the other
//! does not), and the first head to come wins; every other attempt is
//! cancelled at once (its connection closed, or over HTTP/2 its stream
//! reset, the connection and its other streams going on; its timers
//! disarmed).
//!
//! * **Which**: opt-in ([`Policy`], on the client or per request), for
//!   idempotent requests whose body is held in memory, or read from a
//!   regular file ([`Upload::from_file`](crate::Upload::from_file): each
//!   copy reads it from where it began).
//! * **When**: after a fixed delay ([`Policy::after`]), or a percentile of
//!   this origin's recent latencies ([`Policy::percentile`], tracked per
//!   origin in a small histogram — for the 4096 origins recorded most
//!   recently —, with a fixed delay until it has enough samples). The delay is one of the first attempt's named timers: on the
//!   wheel until its connection is ready, then on that connection's loop
//!   in event-loop mode — exact, like its timeouts.
//! * **Bounds**: at most [`Policy::max_copies`] copies; never past the
//!   request deadline (which every copy shares); each copy counts against
//!   the client's retry [`Budget`](super::retry::Budget). A deadline that
//!   passes with copies in flight ends them all: the request fails with
//!   [`Error::RequestTimeout`](crate::Error::RequestTimeout), as unhedged
//!   (an answer that came in time is the response all the same).

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

/// The quantile (0 to 1) of a percentile, clamped; a NaN is the highest
/// (see [`Policy::percentile`]).
fn quantile_of(percentile: f64) -> f64 {
    if percentile.is_nan() {
        return 1.0;
    }
    (percentile / 100.0).clamp(0.0, 1.0)
}

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
    ///
    /// `percentile` is clamped to 0–100 (an infinity too). A NaN counts as
    /// 100 — the slowest latency recorded, the fewest copies — not as 0,
    /// which would hedge about as soon as the fastest answer came.
    pub fn percentile(percentile: f64, until_known: Duration) -> Policy {
        Policy {
            delay: Some(Delay::Percentile {
                quantile: quantile_of(percentile),
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
/// last fade, every bucket is halved. At most [`MAX_ORIGINS`] origins are
/// tracked (each a histogram of [`BUCKETS`] 8-byte counters, with its
/// origin's key and the map's room besides): past that, those recorded
/// least recently are forgotten.
#[derive(Default)]
pub(crate) struct Latencies {
    origins: Mutex<Origins>,
}

#[derive(Default)]
struct Origins {
    histograms: HashMap<Origin, Histogram>,
    /// Samples recorded so far, for every origin: the stamp of the latest.
    recorded: u64,
}

const BUCKETS: usize = 128;
const FADE_EVERY: u64 = 1024;

/// The most origins whose latencies are kept. A client that meets ever
/// new origins (a crawler, webhooks to its customers' endpoints) would
/// otherwise keep a histogram for each, for its whole life; the pool
/// forgets an origin it no longer uses, and so does this, past the bound.
const MAX_ORIGINS: usize = 4096;

struct Histogram {
    buckets: [u64; BUCKETS],
    total: u64,
    since_fade: u64,
    /// The stamp of its latest sample (see [`Origins::recorded`]).
    last: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            buckets: [0; BUCKETS],
            total: 0,
            since_fade: 0,
            last: 0,
        }
    }
}

impl Origins {
    /// Makes room for an origin not tracked yet, if the bound is reached:
    /// the quarter of the origins recorded least recently go at once, so
    /// that the scan is made once per `MAX_ORIGINS / 4` new origins, not
    /// for each.
    fn make_room(&mut self) {
        if self.histograms.len() < MAX_ORIGINS {
            return;
        }
        let mut stamps: Vec<u64> = self.histograms.values().map(|h| h.last).collect();
        let (_, &mut oldest_kept, _) = stamps.select_nth_unstable(MAX_ORIGINS / 4);
        self.histograms.retain(|_, h| h.last >= oldest_kept);
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
        let mut guard = lock(&self.origins);
        let origins = &mut *guard;
        origins.recorded += 1;
        let stamp = origins.recorded;
        if !origins.histograms.contains_key(origin) {
            origins.make_room();
        }
        let histogram = match origins.histograms.get_mut(origin) {
            Some(histogram) => histogram,
            None => origins.histograms.entry(origin.clone()).or_default(),
        };
        histogram.last = stamp;
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
        let histogram = origins.histograms.get(origin)?;
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

    /// A client that talks to ever new origins (a crawler, webhooks to
    /// customers' endpoints) keeps histograms for a bounded number of them:
    /// the ones recorded least recently go, the busy ones stay.
    #[test]
    fn the_origins_tracked_are_bounded_and_the_busy_ones_kept() {
        let latencies = Latencies::default();
        let busy = origin();
        for _ in 0..MIN_SAMPLES {
            latencies.record(&busy, Duration::from_millis(3));
        }
        for i in 0..MAX_ORIGINS + 100 {
            let other = Origin::of(&format!("http://host-{i}.test/").parse().unwrap()).unwrap();
            latencies.record(&other, Duration::from_millis(1));
            if i % 64 == 0 {
                latencies.record(&busy, Duration::from_millis(3));
            }
        }
        assert!(lock(&latencies.origins).histograms.len() <= MAX_ORIGINS);
        let p50 = latencies
            .quantile(&busy, 0.5)
            .expect("the busy origin kept");
        assert!(p50 >= Duration::from_millis(3), "{p50:?}");
        let first = Origin::of(&"http://host-0.test/".parse().unwrap()).unwrap();
        assert!(!lock(&latencies.origins).histograms.contains_key(&first));
    }

    #[test]
    fn a_percentile_out_of_range_is_clamped_and_a_nan_is_the_highest() {
        let latencies = Latencies::default();
        for ms in 1..=20 {
            latencies.record(&origin(), Duration::from_millis(ms));
        }
        let delay = |percentile| {
            Policy::percentile(percentile, Duration::from_secs(60)).delay(&origin(), &latencies)
        };
        let slowest = delay(100.0);
        let fastest = delay(0.0);
        assert!(slowest >= Some(Duration::from_millis(20)), "{slowest:?}");
        assert!(fastest < Some(Duration::from_millis(2)), "{fastest:?}");
        assert_eq!(
            delay(f64::NAN),
            slowest,
            "NaN hedges at the slowest, not at once"
        );
        assert_eq!(delay(250.0), slowest);
        assert_eq!(delay(f64::INFINITY), slowest);
        assert_eq!(delay(-5.0), fastest);
        assert_eq!(delay(f64::NEG_INFINITY), fastest);
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
