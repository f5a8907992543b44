//! The threads of this test process that have not begun to exit, as Linux
//! lists them (`/proc/self/task`).
//!
//! A joined thread can still be listed: the kernel wakes the joiner early
//! in the thread's exit (when it clears the thread's id), and takes the
//! thread off the list a few steps later — here about one join in fifteen
//! still finds it there. Every exiting thread carries `PF_EXITING` in its
//! flags from the exit's first step, before the joiner is woken, and no
//! running thread does: a thread with it is counted as gone.

use std::collections::BTreeSet;

/// `PF_EXITING` in a task's flags (`include/linux/sched.h`).
const PF_EXITING: u64 = 0x4;

/// The OS thread ids of this process's threads that are not exiting.
pub fn live_threads() -> BTreeSet<u64> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&tid| flags(tid).is_some_and(|flags| flags & PF_EXITING == 0))
        .collect()
}

/// The name of thread `tid` (at most 15 bytes: the kernel keeps no more);
/// empty once it has ended.
pub fn thread_name(tid: u64) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// How many live threads have a name starting with `prefix`.
pub fn live_threads_named(prefix: &str) -> usize {
    live_threads()
        .into_iter()
        .filter(|&tid| thread_name(tid).starts_with(prefix))
        .count()
}

/// Thread `tid`'s flags (the ninth field of its `stat`), or `None` once it
/// has ended.
fn flags(tid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The name, in parentheses, may hold spaces: count fields after it.
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split_whitespace().nth(6)?.parse().ok()
}
