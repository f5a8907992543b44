//! Timeout lateness under a burst (`--lateness`), measured the way
//! `tick-lag --end-to-end` measures tickless: COUNT requests at once to a
//! server that accepts and never answers, each with the same per-request
//! timeout, each recording its own lag.
//!
//! Here every client, tickless included, is driven the same way: one tokio
//! task per request on a fresh two-worker multi-thread runtime. The task
//! reads the clock, takes that plus the timeout as its deadline, makes the
//! request with the timeout set its client's own way, awaits it, reads the
//! clock again: the lag is when the future resolved minus the deadline.
//! The deadline is read just before the client fixes its own, so a lag is
//! over-stated by that much, never under-stated. For tickless a per-request
//! listener also records when the exchange ended (the client reports the
//! failure just before it wakes the future), which is what `tick-lag`
//! prints; the difference is the wake-up of the task on tokio.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a request of the burst ended.
#[derive(Debug)]
pub enum Ended {
    /// The client reported its timeout.
    Timeout,
    /// Any other error (a client that failed for another reason).
    Error(String),
    /// A response: the server was supposed to stay silent.
    Response,
}

pub type BoxFuture = Pin<Box<dyn Future<Output = Ended> + Send>>;

/// Makes request `index` of the burst, due at `deadline`.
pub type MakeRequest = Arc<dyn Fn(usize, Instant) -> BoxFuture + Send + Sync>;

/// Marks a slot whose request has not resolved.
const NOT_SET: i64 = i64::MIN;

/// One lag slot per request of a burst, in nanoseconds (negative: early).
pub struct Slots {
    lags_ns: Box<[AtomicI64]>,
}

impl Slots {
    pub fn new(count: usize) -> Arc<Slots> {
        Arc::new(Slots {
            lags_ns: (0..count).map(|_| AtomicI64::new(NOT_SET)).collect(),
        })
    }

    /// Records that request `index`, due at `deadline`, is done now.
    pub fn record(&self, index: usize, deadline: Instant) {
        let now = Instant::now();
        let lag = match now.checked_duration_since(deadline) {
            Some(late) => i64::try_from(late.as_nanos()).unwrap_or(i64::MAX),
            None => -i64::try_from((deadline - now).as_nanos()).unwrap_or(i64::MAX),
        };
        if let Some(slot) = self.lags_ns.get(index) {
            slot.store(lag, Ordering::Relaxed);
        }
    }

    pub fn lags(&self) -> Vec<i64> {
        self.lags_ns
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .filter(|&lag| lag != NOT_SET)
            .collect()
    }
}

/// What one burst gave.
#[derive(Debug, Default)]
pub struct Burst {
    pub armed: usize,
    /// Lags of the requests that resolved with a timeout, in nanoseconds.
    pub lags_ns: Vec<i64>,
    pub timeouts: usize,
    /// Requests that resolved otherwise, and the first such error.
    pub others: usize,
    pub first_other: Option<String>,
    /// Requests still pending at the ceiling.
    pub unresolved: usize,
    /// tickless only: lags at the end of the exchange (its listener).
    pub ended_lags_ns: Option<Vec<i64>>,
}

/// How long to wait for stragglers: twice the deadline plus ten seconds,
/// as `tick-lag`.
fn ceiling(deadline: Duration) -> Duration {
    deadline * 2 + Duration::from_secs(10)
}

/// A fresh two-worker runtime, as the burst's clients get.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Sends `count` requests at once on `rt`, each made by `make` inside its
/// own task, and waits for all of them (up to the ceiling).
pub fn burst(
    rt: &tokio::runtime::Runtime,
    count: usize,
    timeout: Duration,
    make: MakeRequest,
) -> Burst {
    let slots = Slots::new(count);
    let timeouts = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..count)
        .map(|index| {
            let (make, slots, timeouts) = (make.clone(), slots.clone(), timeouts.clone());
            rt.spawn(async move {
                let deadline = Instant::now() + timeout;
                match make(index, deadline).await {
                    Ended::Timeout => {
                        slots.record(index, deadline);
                        timeouts.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                    Ended::Error(e) => Some(e),
                    Ended::Response => Some("got a response".to_string()),
                }
            })
        })
        .collect();
    let give_up = started + ceiling(timeout);
    let mut burst = Burst {
        armed: count,
        ..Burst::default()
    };
    rt.block_on(async {
        for handle in handles {
            let left = give_up.saturating_duration_since(Instant::now());
            let abort = handle.abort_handle();
            match tokio::time::timeout(left, handle).await {
                Ok(Ok(None)) => {}
                Ok(Ok(Some(error))) => {
                    burst.others += 1;
                    burst.first_other.get_or_insert(error);
                }
                Ok(Err(e)) => {
                    burst.others += 1;
                    burst.first_other.get_or_insert(format!("task failed: {e}"));
                }
                Err(_) => {
                    abort.abort();
                    burst.unresolved += 1;
                }
            }
        }
    });
    burst.lags_ns = slots.lags();
    burst.timeouts = timeouts.load(Ordering::Relaxed);
    burst
}

/// Before a burst: room in the file table for `count` descriptors (see
/// `tick-lag`'s `grow_file_table`: each doubling of the table waits for an
/// RCU grace period inside whichever `socket` or `accept` needs it), and
/// the soft descriptor limit raised to the hard one.
pub fn prepare(count: usize) {
    // SAFETY: `rlimit` is a plain C struct of integers; all-zero is valid.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `limit` is a valid, writable `rlimit` for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0
        && limit.rlim_cur < limit.rlim_max
    {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid `rlimit`, read just above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
    let Ok(file) = std::fs::File::open("/dev/null") else {
        return;
    };
    let copies: Vec<std::fs::File> = (0..count).map_while(|_| file.try_clone().ok()).collect();
    drop(copies);
}
