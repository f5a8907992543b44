//! Which CPU each loop's thread is pinned to (see
//! [`EventLoopGroupBuilder::pin_to_cpus`](super::EventLoopGroupBuilder::pin_to_cpus)),
//! and the helper threads that must not inherit that pin.
//!
//! A group's loops take consecutive CPUs of the set the thread building it
//! may run on, starting where the process's previous group stopped: the
//! loops of one group are on distinct CPUs whenever there are as many
//! CPUs as loops, and the loops of several groups (several clients) spread
//! over the CPUs rather than all starting on the first. With more loops
//! than CPUs, they wrap round.
//!
//! A thread starts with the CPUs of the thread that spawned it, so a
//! helper a loop's thread spawns (a resolver, an upload's pump) would run
//! on that loop's CPU alone: [`spawn_helper`] gives it back the set the
//! loop had before it was pinned.
//!
//! Linux only (`sched_setaffinity`, through `nix`); elsewhere nothing is
//! pinned.

use std::io;
use std::thread::{self, JoinHandle};

#[cfg(target_os = "linux")]
mod os {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Where the next group's first loop goes, counted over all groups of
    /// the process.
    static NEXT: AtomicUsize = AtomicUsize::new(0);

    thread_local! {
        /// On a pinned loop's thread: the CPUs it had before.
        static UNPINNED: RefCell<Option<CpuSet>> = const { RefCell::new(None) };
    }

    /// A loop's CPU, and the set it had before (its builder's).
    #[derive(Clone, Copy)]
    pub(crate) struct Cpu {
        cpu: usize,
        before: CpuSet,
    }

    fn current() -> Option<CpuSet> {
        sched_getaffinity(Pid::from_raw(0)).ok()
    }

    pub(super) fn plan(pin: bool, loops: usize) -> Vec<Option<Cpu>> {
        // Built on a pinned loop's thread: the CPUs that loop had before.
        let allowed = pin.then(|| unpinned_set().or_else(current)).flatten();
        let cpus: Vec<usize> = allowed.map_or_else(Vec::new, |set| {
            (0..CpuSet::count())
                .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
                .collect()
        });
        let (Some(before), true) = (allowed, cpus.len() > 1) else {
            return vec![None; loops];
        };
        let first = NEXT.fetch_add(loops, Ordering::Relaxed);
        (0..loops)
            .map(|i| {
                Some(Cpu {
                    cpu: cpus[(first + i) % cpus.len()],
                    before,
                })
            })
            .collect()
    }

    pub(super) fn pin_current_thread(cpu: Option<Cpu>) {
        let Some(Cpu { cpu, before }) = cpu else {
            return;
        };
        let mut one = CpuSet::new();
        if one.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &one).is_ok() {
            UNPINNED.with(|unpinned| *unpinned.borrow_mut() = Some(before));
        }
    }

    pub(super) fn unpinned_set() -> Option<CpuSet> {
        UNPINNED.with(|unpinned| *unpinned.borrow())
    }

    pub(super) fn restore(set: Option<CpuSet>) {
        if let Some(set) = set {
            let _ = sched_setaffinity(Pid::from_raw(0), &set);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    #[derive(Clone, Copy)]
    pub(crate) struct Cpu;
    pub(super) fn plan(_pin: bool, loops: usize) -> Vec<Option<Cpu>> {
        vec![None; loops]
    }
    pub(super) fn pin_current_thread(_cpu: Option<Cpu>) {}
    pub(super) fn unpinned_set() -> Option<()> {
        None
    }
    pub(super) fn restore(_set: Option<()>) {}
}

pub(crate) use os::Cpu;

/// The CPU of each of a group's `loops` loops, in order: `None` for each
/// when pinning is off or there is nothing to choose between (one CPU, or
/// a platform where loops are not pinned).
pub(super) fn plan(pin: bool, loops: usize) -> Vec<Option<Cpu>> {
    os::plan(pin, loops)
}

/// Pins the calling thread (a loop's, before its first turn) to `cpu`.
/// Best effort: a refusal (a sandbox that forbids it, a CPU taken away
/// since) leaves the thread where the OS puts it.
pub(super) fn pin_current_thread(cpu: Option<Cpu>) {
    os::pin_current_thread(cpu)
}

/// Spawns a helper thread with `builder`: on the CPUs its spawner may use,
/// or, spawned from a pinned loop, on those the loop had before it was
/// pinned.
pub(crate) fn spawn_helper<F, T>(builder: thread::Builder, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let unpinned = os::unpinned_set();
    builder.spawn(move || {
        os::restore(unpinned);
        f()
    })
}
