//! The `wheel-*` instruments: a [`HashedWheelTimer`] on the system clock,
//! its tasks run inline on the wheel's worker thread.
//!
//! A wheel fires an entry at the first tick boundary at or after its
//! deadline, so the lag of a burst depends on where in a tick it was armed.
//! A client's wheel lives long and requests arrive at any time, so the burst
//! is armed at a random point of a tick (not right after the wheel started,
//! which would always be the worst case): expect anything from zero to one
//! tick from run to run, one tick over two on average.

use super::{Burst, Fired, Recorder};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::time::{Duration, SystemTime};
use tickless_timer::HashedWheelTimer;

/// `wheel-5ms`.
pub fn run_5ms(burst: &Burst) -> io::Result<Fired> {
    run(burst, Duration::from_millis(5))
}

/// `wheel-1ms`.
pub fn run_1ms(burst: &Burst) -> io::Result<Fired> {
    run(burst, Duration::from_millis(1))
}

fn run(burst: &Burst, tick: Duration) -> io::Result<Fired> {
    let timer = HashedWheelTimer::builder()
        .tick(tick)
        .thread_name("tick-lag-wheel")
        .build()?;
    let recorder = Recorder::new(burst.count);
    // Let the worker settle into its rhythm, then land at a random phase.
    std::thread::sleep(tick * 2 + random_fraction_of(tick));
    let started = timer.clock().now();
    for index in 0..burst.count {
        let deadline = timer.clock().now() + burst.deadline;
        let task = {
            let recorder = recorder.clone();
            move || recorder.record(index, deadline)
        };
        timer
            .arm(deadline, task)
            .map_err(|stopped| io::Error::other(stopped.to_string()))?;
    }
    recorder.wait(started + burst.ceiling());
    let fired = recorder.fired();
    drop(timer.stop());
    Ok(fired)
}

/// A duration in `[0, of)`, random per call: std's hasher keys are seeded
/// from the OS, which is random enough to pick a phase with no extra crate.
fn random_fraction_of(of: Duration) -> Duration {
    let entropy = RandomState::new().hash_one(SystemTime::now());
    let nanos = u64::try_from(of.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(entropy % nanos)
}
