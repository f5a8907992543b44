//! The timers `tick-lag` measures, and the recorder their tasks write to.
//!
//! An [`Instrument`] is a name and a function that arms one [`Burst`] and
//! returns what fired; adding an instrument is one more entry in [`ALL`].
//!
//! Every task does the same thing and nothing else: it reads the clock,
//! stores its lag (that reading minus its deadline, in signed nanoseconds)
//! in the [`Recorder`] slot numbered after it, and counts itself. The slots
//! are allocated before arming, so firing allocates nothing.

mod client;
mod event_loop;
mod load;
mod wheel;

use std::io;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// One burst: `count` timeouts, each due `deadline` after the clock reading
/// taken when it is armed.
#[derive(Debug, Clone, Copy)]
pub struct Burst {
    /// How many timeouts to arm.
    pub count: usize,
    /// Distance from arming to deadline.
    pub deadline: Duration,
    /// How long event loops busy-poll before a deadline (`--loop-spin-us`).
    pub loop_spin: Duration,
    /// Event loops are left unpinned (`--unpinned`).
    pub unpinned: bool,
    /// End-to-end requests are HTTP/2 streams over a few connections.
    pub http2: bool,
    /// End-to-end requests go out on connections opened and pooled first.
    pub warm: bool,
    /// End-to-end: the client carries a throughput load meanwhile
    /// (`--under-load`, [`load`]).
    pub under_load: bool,
}

impl Burst {
    /// How long after arming starts to stop waiting for stragglers: the
    /// deadline plus ten seconds (plus the deadline again, for long ones).
    pub fn ceiling(&self) -> Duration {
        self.deadline * 2 + Duration::from_secs(10)
    }
}

/// A timer under measurement.
#[derive(Debug)]
pub struct Instrument {
    /// The name used on the command line and in the output.
    pub name: &'static str,
    /// One line for `--help`.
    pub description: &'static str,
    /// Arms the burst, waits for it (up to [`Burst::ceiling`]) and returns
    /// the lags of the timeouts that fired.
    pub run: fn(&Burst) -> io::Result<Fired>,
    /// Whether it sends whole requests through the client (`--end-to-end`)
    /// rather than arming a timer directly.
    pub end_to_end: bool,
    /// Whether its timeouts fire on event loops, which `--loop-spin-us`
    /// makes busy-poll; with `end_to_end`, the client's loops, which it
    /// pins by default (in event-loop mode only) and `--unpinned` does not.
    pub on_loops: bool,
}

/// Instruments are the same when their names are.
impl PartialEq for Instrument {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// Every instrument, in the default order.
pub static ALL: [Instrument; 6] = [
    Instrument {
        name: "wheel-5ms",
        description: "HashedWheelTimer, 5 ms tick, tasks run on its worker",
        run: wheel::run_5ms,
        end_to_end: false,
        on_loops: false,
    },
    Instrument {
        name: "wheel-1ms",
        description: "HashedWheelTimer, 1 ms tick, tasks run on its worker",
        run: wheel::run_1ms,
        end_to_end: false,
        on_loops: false,
    },
    Instrument {
        name: "event-loop",
        description: "the client's EventLoop: deadline heap + precise wait (timerfd on Linux)",
        run: event_loop::run,
        end_to_end: false,
        on_loops: true,
    },
    Instrument {
        name: "client-wheel-5ms",
        description: "requests through the client, timeouts on a 5 ms wheel",
        run: client::wheel_5ms,
        end_to_end: true,
        on_loops: false,
    },
    Instrument {
        name: "client-wheel-1ms",
        description: "requests through the client, timeouts on a 1 ms wheel",
        run: client::wheel_1ms,
        end_to_end: true,
        on_loops: false,
    },
    Instrument {
        name: "client-event-loop",
        description: "requests through the client, use_event_loop_timeouts",
        run: client::event_loop,
        end_to_end: true,
        on_loops: true,
    },
];

/// The instruments run by default: the timers themselves, or with
/// `--end-to-end` whole requests through the client.
pub fn defaults(end_to_end: bool) -> Vec<&'static Instrument> {
    ALL.iter().filter(|i| i.end_to_end == end_to_end).collect()
}

/// The instrument called `name`.
pub fn find(name: &str) -> Option<&'static Instrument> {
    ALL.iter().find(|instrument| instrument.name == name)
}

/// The names of all instruments.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|instrument| instrument.name).collect()
}

/// Before the end-to-end instruments: room in the file table for a burst
/// of `count` connections, both ends (see [`client::grow_file_table`]).
pub fn prepare_end_to_end(count: usize) {
    client::grow_file_table(count.saturating_mul(2).saturating_add(64));
}

/// Servers, so connections, an HTTP/2 burst is spread over.
pub use client::H2_SERVERS;

/// Requests the `--under-load` load keeps in flight.
pub use load::IN_FLIGHT as LOAD_IN_FLIGHT;

/// The kernel's share of a burst: see [`client::connect_floor`].
pub fn connect_floor(count: usize) -> io::Result<Duration> {
    client::connect_floor(count)
}

/// What came back from one burst.
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    /// How many timeouts were armed.
    pub armed: usize,
    /// The lag of each timeout that fired, in nanoseconds, in arming order;
    /// negative if one fired early (a bug in the timer).
    pub lags_ns: Vec<i64>,
    /// With `use_event_loop_timeouts`: where the timeouts expired. `None`
    /// elsewhere.
    pub split: Option<Split>,
    /// With `--under-load`: the load's requests per second while the burst
    /// ran.
    pub load_rate: Option<f64>,
    /// End to end: the requests that failed otherwise than by their
    /// timeout (a connect refused, out of descriptors), so have no lag,
    /// and what the first of them failed with.
    pub failed: Option<Failed>,
}

/// The requests of a burst that failed otherwise than by their timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// How many.
    pub count: usize,
    /// The first one's error, with its causes.
    pub first: String,
}

/// Where the timeouts of an event-loop-mode burst expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// How many expired on the client's wheel, because their connect had
    /// not succeeded by their deadline (their lag is the wheel's).
    pub on_wheel: usize,
    /// The lags of the others, which expired on their connection's loop.
    pub on_loops_ns: Vec<i64>,
}

/// Marks a slot whose task has not run.
const NOT_FIRED: i64 = i64::MIN;

/// Where the tasks of one burst record their lags.
#[derive(Debug)]
pub struct Recorder {
    lags_ns: Box<[AtomicI64]>,
    /// Timeouts fired plus requests failed otherwise: the burst is over
    /// when they are all.
    ended: AtomicUsize,
    failed: Mutex<Option<Failed>>,
    /// Unparked by the task that completes the burst.
    waiter: Thread,
}

impl Recorder {
    /// Room for `count` lags; the calling thread is the one [`wait`](Self::wait) wakes.
    pub fn new(count: usize) -> Arc<Self> {
        Arc::new(Recorder {
            lags_ns: (0..count).map(|_| AtomicI64::new(NOT_FIRED)).collect(),
            ended: AtomicUsize::new(0),
            failed: Mutex::new(None),
            waiter: thread::current(),
        })
    }

    /// The task body: records that timeout `index`, due at `deadline`, fires
    /// now. Allocates nothing.
    #[inline]
    pub fn record(&self, index: usize, deadline: Instant) {
        let now = Instant::now();
        let lag = match now.checked_duration_since(deadline) {
            Some(late) => i64::try_from(late.as_nanos()).unwrap_or(i64::MAX),
            None => i64::try_from((deadline - now).as_nanos()).map_or(i64::MIN + 1, |early| -early),
        };
        if let Some(slot) = self.lags_ns.get(index) {
            slot.store(lag, Ordering::Relaxed);
        }
        self.end_one();
    }

    /// A request of the burst failed otherwise than by its timeout (told
    /// by `error`, called for the first alone): it has no lag, and no
    /// timeout of its own left to wait for.
    pub fn fail(&self, error: impl FnOnce() -> String) {
        {
            let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
            match &mut *failed {
                Some(failed) => failed.count += 1,
                None => {
                    *failed = Some(Failed {
                        count: 1,
                        first: error(),
                    })
                }
            }
        }
        self.end_one();
    }

    fn end_one(&self) {
        if self.ended.fetch_add(1, Ordering::AcqRel) + 1 == self.lags_ns.len() {
            self.waiter.unpark();
        }
    }

    /// Blocks the thread that created the recorder until every timeout
    /// fired (or its request failed otherwise) or `give_up` passed.
    pub fn wait(&self, give_up: Instant) {
        while self.ended.load(Ordering::Acquire) < self.lags_ns.len() {
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            // Wakes at the last task's unpark; the cap covers a lost wake-up.
            thread::park_timeout((give_up - now).min(Duration::from_millis(100)));
        }
    }

    /// The lag recorded for timeout `index`, if it fired.
    pub fn lag(&self, index: usize) -> Option<i64> {
        let lag = self.lags_ns.get(index)?.load(Ordering::Acquire);
        (lag != NOT_FIRED).then_some(lag)
    }

    /// The lags recorded so far.
    pub fn fired(&self) -> Fired {
        let lags_ns = self
            .lags_ns
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .filter(|&lag| lag != NOT_FIRED)
            .collect();
        Fired {
            armed: self.lags_ns.len(),
            lags_ns,
            split: None,
            load_rate: None,
            failed: self
                .failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_keeps_signed_lags_and_skips_unfired() {
        let recorder = Recorder::new(3);
        let now = Instant::now();
        recorder.record(0, now - Duration::from_millis(1));
        recorder.record(2, now + Duration::from_secs(60)); // "early"
        assert!(recorder.lag(0).is_some_and(|lag| lag >= 1_000_000));
        assert_eq!(recorder.lag(1), None);
        assert_eq!(recorder.lag(3), None, "out of range");
        let fired = recorder.fired();
        assert_eq!(fired.armed, 3);
        assert_eq!(fired.lags_ns.len(), 2);
        assert!(fired.lags_ns[0] >= 1_000_000);
        assert!(fired.lags_ns[1] < -59_000_000_000);
    }

    #[test]
    fn names_are_unique() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }
}
