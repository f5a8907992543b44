//! Where pinned groups' loops go as groups come and go, and that a group
//! whose build fails gives back the CPUs it had reserved. One test, alone
//! in its process: both depend on every pinned group of the process (and
//! the second lowers the process's file limit for a moment).

#![cfg(target_os = "linux")]

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use std::sync::mpsc;
use std::time::Duration;
use tickless::event_loop::{EventLoop, EventLoopGroup};

/// The CPUs the calling thread may run on.
fn my_cpus() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect()
}

/// The CPUs `event_loop`'s thread may run on.
fn loop_cpus(event_loop: &EventLoop) -> Vec<usize> {
    let (sent, got) = mpsc::channel();
    event_loop
        .execute(move |_| {
            let _ = sent.send(my_cpus());
        })
        .unwrap();
    got.recv_timeout(Duration::from_secs(10)).unwrap()
}

fn pinned_group(loops: usize) -> EventLoopGroup {
    EventLoopGroup::builder()
        .threads(loops)
        .pin_to_cpus(true)
        .build()
        .unwrap()
}

/// Whether a group with a loop per CPU and the default rule is pinned: only
/// when no other loop of the process is.
fn default_group_pins(cpus: usize) -> bool {
    let group = EventLoopGroup::builder().threads(cpus).build().unwrap();
    let pinned = loop_cpus(&group.loops()[0]).len() == 1;
    group.shutdown();
    pinned
}

#[test]
fn groups_take_the_cpus_ended_groups_left_and_a_failed_build_gives_its_back() {
    let cpus = my_cpus();
    if cpus.len() < 2 {
        return; // Nothing is pinned on one CPU.
    }

    // A and B, a loop each, on two CPUs; A ends, and C takes the CPU A
    // left, not B's (a count of live loops would have put C after B's).
    let a = pinned_group(1);
    let b = pinned_group(1);
    let (on_a, on_b) = (loop_cpus(&a.loops()[0]), loop_cpus(&b.loops()[0]));
    assert_ne!(on_a, on_b, "two groups of a loop each, on distinct CPUs");
    a.shutdown();
    drop(a);
    let c = pinned_group(1);
    let on_c = loop_cpus(&c.loops()[0]);
    assert_ne!(on_c, on_b, "C on B's CPU while {on_a:?} is free");
    b.shutdown();
    c.shutdown();
    drop((b, c));

    // Nothing pinned now: the default pins a group with a loop per CPU.
    assert!(default_group_pins(cpus.len()));
    // A build that fails while its loops start (no file descriptor left
    // for a loop's poll) reserved CPUs for them: given back, the default
    // still pins.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let next_fd = {
        let file = std::fs::File::open("/dev/null").unwrap();
        std::os::fd::AsRawFd::as_raw_fd(&file) as u64
    };
    setrlimit(Resource::RLIMIT_NOFILE, next_fd, hard).unwrap();
    let failed = EventLoopGroup::builder()
        .threads(cpus.len())
        .pin_to_cpus(true)
        .build();
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
    assert!(failed.is_err(), "no descriptor for a poll: the build fails");
    drop(failed);
    assert!(
        default_group_pins(cpus.len()),
        "after a failed build, the default no longer pins: its CPUs were not given back"
    );
}
