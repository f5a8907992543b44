//! The `event-loop` instrument: the client's own [`EventLoop`](tickless::event_loop::EventLoop).
//!
//! The burst is armed from the probe's thread with [`EventLoop::schedule`](tickless::event_loop::EventLoop::schedule),
//! the very call the client makes when it arms an exchange's timeout on the
//! loop that owns its connection: a heap insert under the loop's timers lock,
//! and a wake-up when the entry becomes the nearest. The loop wakes at its
//! nearest deadline through its precise wait (a timerfd on Linux) and
//! expires what is due on its own thread.

use super::{Burst, Fired, Recorder};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickless::event_loop::{EventLoopGroup, LoopContext, LoopTimeout};

/// The burst as the loop sees it: one `Arc` for every entry, the entry's
/// tag its number, so arming allocates nothing per timeout.
struct LoopBurst {
    recorder: Arc<Recorder>,
    /// Deadlines as nanoseconds since `origin`, written before each arm.
    origin: Instant,
    deadlines: Box<[AtomicU64]>,
}

impl LoopTimeout for LoopBurst {
    fn expire(self: Arc<Self>, tag: u64, _cx: &mut LoopContext<'_>) {
        let index = tag as usize;
        let nanos = self.deadlines[index].load(Ordering::Relaxed);
        self.recorder
            .record(index, self.origin + Duration::from_nanos(nanos));
    }
}

/// `event-loop`.
pub fn run(burst: &Burst) -> io::Result<Fired> {
    // One loop: by default not pinned (see `pin_to_cpus`), so `--unpinned`
    // changes nothing here.
    let group = EventLoopGroup::builder()
        .threads(1)
        .spin_before_deadline(burst.loop_spin)
        .thread_name("tick-lag-loop")
        .build()?;
    let event_loop = group.loops()[0].clone();
    let count = u64::try_from(burst.count).map_err(|_| io::Error::other("count too large"))?;
    let recorder = Recorder::new(burst.count);
    let origin = Instant::now();
    let entries = Arc::new(LoopBurst {
        recorder: recorder.clone(),
        origin,
        deadlines: (0..burst.count).map(|_| AtomicU64::new(0)).collect(),
    });
    for tag in 0..count {
        let deadline = Instant::now() + burst.deadline;
        let nanos = u64::try_from((deadline - origin).as_nanos()).unwrap_or(u64::MAX);
        entries.deadlines[tag as usize].store(nanos, Ordering::Relaxed);
        event_loop
            .schedule(deadline, entries.clone(), tag)
            .map_err(|rejected| io::Error::other(rejected.to_string()))?;
    }
    recorder.wait(origin + burst.ceiling());
    let fired = recorder.fired();
    group.shutdown();
    Ok(fired)
}
