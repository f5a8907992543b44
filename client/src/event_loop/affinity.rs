//! Which CPU each loop's thread is pinned to (see
//! [`EventLoopGroupBuilder::pin_to_cpus`](super::EventLoopGroupBuilder::pin_to_cpus)),
//! and lifting the pin for the threads a loop starts.
//!
//! A pinned group's loops take distinct CPUs of the set the building thread
//! may run on (wrapping round when they outnumber them), those with the
//! fewest of the process's pinned loops first: a group takes the CPUs
//! that groups ended since left.
//!
//! **By default** ([`Pinning::Auto`]) a group is pinned only when it has a
//! loop for every CPU of that set and no other group of the process is
//! pinned: the default group of a client that may use every CPU it sees.
//! A group with fewer loops than CPUs — a client under a CPU quota, whose
//! `available_parallelism` is the quota, in a pod that sees the whole
//! machine — would otherwise put every such process's loops on the same
//! first CPUs, and a second group would pin a second loop onto each CPU,
//! where neither could move away from the other.
//!
//! A thread starts on the CPUs of the thread that spawned it, so a thread a
//! loop starts (a resolver, an upload's pump, a client built in a listener,
//! and its wheel and loops) would run on that loop's CPU alone:
//! [`without_pinning`] lifts the pin around the spawn.
//!
//! Linux only (`sched_setaffinity`, through `nix`); elsewhere nothing is
//! pinned.

/// Whether a group's loops are pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pinning {
    /// Pinned when the group has a loop per CPU and no other group of the
    /// process is pinned (see the module's documentation).
    Auto,
    /// Pinned (wrapping round when there are more loops than CPUs).
    Always,
    /// Not pinned.
    Never,
}

#[cfg(target_os = "linux")]
mod os {
    use super::Pinning;
    use crate::sync::lock;
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    use std::cell::Cell;
    use std::sync::Mutex;

    /// The process's pinned loops that have not ended, per CPU: whether a
    /// group may pin by default (none anywhere), and where a pinned group's
    /// loops go (the CPUs with the fewest). Counted from the plan on, so
    /// that groups built at once see each other; a loop's share is given
    /// back when its [`Cpu`] drops — at the loop's end, or unused, when
    /// its group fails to start.
    static PINNED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

    thread_local! {
        /// On a pinned loop's thread: its CPU, and the CPUs it had before.
        static PIN: Cell<Option<Pin>> = const { Cell::new(None) };
    }

    /// Where a pinned loop's thread runs, and the set it had before (its
    /// builder's).
    #[derive(Clone, Copy)]
    struct Pin {
        cpu: usize,
        before: CpuSet,
    }

    /// A loop's CPU, reserved in [`PINNED`] until this drops.
    pub(crate) struct Cpu {
        pin: Pin,
    }

    impl Drop for Cpu {
        fn drop(&mut self) {
            let mut pinned = lock(&PINNED);
            if let Some(count) = pinned.get_mut(self.pin.cpu) {
                *count = count.saturating_sub(1);
            }
        }
    }

    fn current() -> Option<CpuSet> {
        sched_getaffinity(Pid::from_raw(0)).ok()
    }

    fn set_current(set: &CpuSet) -> bool {
        sched_setaffinity(Pid::from_raw(0), set).is_ok()
    }

    fn only(cpu: usize) -> Option<CpuSet> {
        let mut set = CpuSet::new();
        set.set(cpu).ok()?;
        Some(set)
    }

    pub(super) fn plan(pinning: Pinning, loops: usize) -> Vec<Option<Cpu>> {
        let unpinned = || (0..loops).map(|_| None).collect();
        if pinning == Pinning::Never {
            return unpinned();
        }
        let Some(allowed) = current() else {
            return unpinned();
        };
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&cpu| allowed.is_set(cpu).unwrap_or(false))
            .collect();
        if cpus.len() < 2 {
            return unpinned();
        }
        let mut pinned = lock(&PINNED);
        if pinned.len() < CpuSet::count() {
            pinned.resize(CpuSet::count(), 0);
        }
        if pinning == Pinning::Auto && !super::auto_pins(loops, cpus.len(), pinned.iter().sum()) {
            return unpinned();
        }
        // The allowed CPUs from the fewest pinned loops to the most (the
        // lower first among equals), a loop on each in turn, wrapping round:
        // a group's loops on distinct CPUs while it has no more loops than
        // CPUs, on those the process's other pinned loops leave free first.
        let mut order = cpus;
        order.sort_by_key(|&cpu| pinned[cpu]);
        (0..loops)
            .map(|i| {
                let cpu = order[i % order.len()];
                pinned[cpu] += 1;
                Some(Cpu {
                    pin: Pin {
                        cpu,
                        before: allowed,
                    },
                })
            })
            .collect()
    }

    pub(super) fn pin_current_thread(cpu: Option<&Cpu>) {
        let Some(Cpu { pin }) = cpu else {
            return;
        };
        if only(pin.cpu).is_some_and(|one| set_current(&one)) {
            PIN.with(|current| current.set(Some(*pin)));
        }
    }

    /// On a pinned loop's thread still on its one CPU (nobody has moved it
    /// since): the set it had before, to run `f` on, and its CPU back
    /// after — a panic in `f` included. A loop moved since (`taskset -a
    /// -p` on the process) keeps what it was given.
    pub(super) fn without_pinning<T>(f: impl FnOnce() -> T) -> T {
        /// Puts the loop back on its CPU when dropped.
        struct Repin(Option<Pin>);
        impl Drop for Repin {
            fn drop(&mut self) {
                if let Some(one) = self.0.and_then(|pin| only(pin.cpu)) {
                    set_current(&one);
                }
            }
        }
        let pin = PIN.with(Cell::get);
        let lifted = pin.filter(|pin| current() == only(pin.cpu) && set_current(&pin.before));
        let _repin = Repin(lifted);
        f()
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use super::Pinning;

    /// Never made: nothing is pinned here.
    pub(crate) enum Cpu {}

    pub(super) fn plan(_pinning: Pinning, loops: usize) -> Vec<Option<Cpu>> {
        (0..loops).map(|_| None).collect()
    }

    pub(super) fn pin_current_thread(_cpu: Option<&Cpu>) {}

    pub(super) fn without_pinning<T>(f: impl FnOnce() -> T) -> T {
        f()
    }
}

pub(crate) use os::Cpu;

/// The CPU of each of a group's `loops` loops, in order: `None` for each
/// when the group is not pinned (see [`Pinning`]) or there is nothing to
/// choose between (one CPU, or a platform where loops are not pinned).
pub(super) fn plan(pinning: Pinning, loops: usize) -> Vec<Option<Cpu>> {
    os::plan(pinning, loops)
}

/// The default rule: a group of `loops` is pinned when it has a loop for
/// each of the `cpus` its builder may use and no other group of the
/// process is pinned (`pinned` loops are).
fn auto_pins(loops: usize, cpus: usize, pinned: usize) -> bool {
    loops == cpus && pinned == 0
}

/// A loop's thread, from its first turn to its end: pinned to `cpu` if the
/// plan gave it one, which it gives back at the end, however that comes
/// (the [`Cpu`] drops with this). Best effort: a refusal (a sandbox that
/// forbids it, a CPU taken away since) leaves the thread where the OS puts
/// it.
pub(super) struct LoopThread {
    _cpu: Option<Cpu>,
}

impl LoopThread {
    pub(super) fn pin(cpu: Option<Cpu>) -> LoopThread {
        os::pin_current_thread(cpu.as_ref());
        LoopThread { _cpu: cpu }
    }
}

/// Runs `f` with the calling thread's CPU pin lifted, if it is a pinned
/// event loop's thread: the threads `f` starts may use the CPUs the loop
/// could before it was pinned, rather than its one. Elsewhere `f` just
/// runs.
///
/// A thread starts on the CPUs of the thread that spawns it. Code that runs
/// on a loop — an [`EventListener`](crate::EventListener), a task given to
/// [`EventLoop::execute`](super::EventLoop::execute), a
/// [`Resolve`](crate::Resolve) — and starts a thread, a pool or a client
/// there should do so inside `without_pinning`. The client does so for the
/// threads it starts itself.
pub fn without_pinning<T>(f: impl FnOnce() -> T) -> T {
    os::without_pinning(f)
}

#[cfg(test)]
mod tests {
    use super::auto_pins;

    #[test]
    fn by_default_only_a_loop_per_cpu_pins_and_only_while_no_other_group_is_pinned() {
        assert!(auto_pins(2, 2, 0));
        assert!(auto_pins(8, 8, 0));
        // Fewer loops than CPUs: a quota smaller than the CPUs seen.
        assert!(!auto_pins(2, 64, 0));
        // More loops than CPUs: some would share a CPU they cannot leave.
        assert!(!auto_pins(4, 2, 0));
        // Another group's loops are pinned: this one's would share theirs.
        assert!(!auto_pins(2, 2, 2));
    }
}
