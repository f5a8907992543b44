//! A hand-written `block_on`: polls a future on the calling thread, parking
//! it between polls, with a waker that unparks it. No runtime involved, so a
//! future that works here needs nothing from any executor but its waker.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

struct ThreadWaker {
    thread: Thread,
    /// Set by `wake`, cleared by the poller: guards against spurious unparks.
    woken: AtomicBool,
    wakes: AtomicUsize,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// What [`block_on_counting`] saw besides the output.
#[derive(Debug, Clone, Copy)]
pub struct BlockOnStats {
    pub polls: usize,
    pub wakes: usize,
}

/// Runs `future` to completion on this thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    block_on_counting(future).0
}

/// Runs `future` to completion on this thread and counts polls and wakes.
pub fn block_on_counting<F: Future>(future: F) -> (F::Output, BlockOnStats) {
    block_on_counting_after_first_poll(future, || {})
}

/// [`block_on_counting`], calling `pending` on this thread once, after a
/// first poll that left `future` pending and before this thread parks —
/// what a test does once the future has registered its waker (advance a
/// `ManualClock`, say), so that what follows can only reach the future
/// through a wake.
pub fn block_on_counting_after_first_poll<F: Future>(
    future: F,
    pending: impl FnOnce(),
) -> (F::Output, BlockOnStats) {
    let mut pending = Some(pending);
    let state = Arc::new(ThreadWaker {
        thread: thread::current(),
        woken: AtomicBool::new(false),
        wakes: AtomicUsize::new(0),
    });
    let waker = Waker::from(state.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            let stats = BlockOnStats {
                polls,
                wakes: state.wakes.load(Ordering::Relaxed),
            };
            return (output, stats);
        }
        if let Some(pending) = pending.take() {
            pending();
        }
        while !state.woken.swap(false, Ordering::Acquire) {
            thread::park();
        }
    }
}

/// The binary of example `name`, next to the running test's
/// (`target/<profile>/examples`): `cargo test` builds the examples before
/// it runs tests (a run filtered with `--test` may not: then build them with
/// `cargo build --examples`). Panics if it is missing or older than its
/// source or any source of the crates it is built from, rather than run a
/// stale one: a binary older than a change to `client/` would test the
/// client as it was.
pub fn example_binary(name: &str) -> std::path::PathBuf {
    let test = std::env::current_exe().unwrap();
    let binary = test
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    let built = std::fs::metadata(&binary).and_then(|m| m.modified());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = root.join("examples").join(format!("{name}.rs"));
    let crates = ["src", "client/src", "h1/src", "timer/src", "codings/src"];
    let newest = crates
        .iter()
        .map(|dir| newest_source(&root.join(dir)))
        .fold(modified(&example), std::cmp::max);
    assert!(
        built.is_ok_and(|built| built >= newest),
        "{} is missing or older than examples/{name}.rs or a source it is built from: \
         cargo build --examples",
        binary.display()
    );
    binary
}

/// When `path` was last modified.
fn modified(path: &std::path::Path) -> std::time::SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).unwrap()
}

/// The latest modification of a `.rs` file under `dir` that an example is
/// built from: not one compiled only for a crate's unit tests, which cargo
/// does not rebuild the examples for.
fn newest_source(dir: &std::path::Path) -> std::time::SystemTime {
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let here = if unit_tests_only(&path) {
            continue;
        } else if path.is_dir() {
            newest_source(&path)
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            modified(&path)
        } else {
            continue;
        };
        newest = newest.max(here);
    }
    newest
}

/// Whether `path` is compiled only under `cfg(test)`, as this workspace
/// names such modules: `tests.rs`, `*_tests.rs`, `test_util.rs`, or a
/// `tests/` directory.
fn unit_tests_only(path: &std::path::Path) -> bool {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    let stem = name.strip_suffix(".rs").unwrap_or(name);
    stem == "tests" || stem.ends_with("_tests") || stem == "test_util"
}
