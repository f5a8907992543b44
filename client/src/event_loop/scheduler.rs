//! The timer seam of a loop: what a loop's heap expires ([`LoopTimeout`]),
//! and where a connection's timeouts are armed ([`TimeoutScheduler`]: the
//! loop itself, or a test's double standing in front of it).

use super::LoopContext;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;
use tickless_timer::HeapHandle;

/// Something a loop's heap expires: an exchange's timeouts, or a probe's.
///
/// Entries are `(Arc<dyn LoopTimeout>, tag)` pairs, so arming allocates
/// nothing: the `Arc` already exists and the tag says which of its timeouts
/// the entry is.
pub trait LoopTimeout: Send + Sync + 'static {
    /// Called on the loop once the entry's deadline has passed: on its
    /// thread, or on a caller driving it (see
    /// [`EventLoop`](super::EventLoop), "Who drives a loop").
    fn expire(self: Arc<Self>, tag: u64, cx: &mut LoopContext<'_>);

    /// The loop shut down with the entry still armed: it will never
    /// expire. Called once, on the loop's thread as it exits (or on the
    /// thread that shut it down). Does nothing unless implemented.
    fn stopped(self: Arc<Self>, tag: u64) {
        let _ = tag;
    }
}

/// Identifies an entry in one loop's heap, for cancelling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopTimerKey(pub(crate) HeapHandle);

/// The loop is shutting down and takes no more work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event loop is shutting down")]
pub struct Rejected;

/// Where the event-loop timeouts of a connection are armed: its loop.
///
/// [`EventLoop`](super::EventLoop) is the implementation; the trait exists
/// so that a test can stand a double in front of a loop (see
/// [`EventLoopGroupBuilder::timeout_scheduler`](super::EventLoopGroupBuilder::timeout_scheduler)).
pub trait TimeoutScheduler: Send + Sync + 'static {
    /// The loop's own thread, where expiries run unless a caller drives
    /// the loop.
    fn thread_id(&self) -> ThreadId;
    /// Whether the loop has begun shutting down. `false` does not promise
    /// that the next `schedule` succeeds.
    fn is_shutting_down(&self) -> bool;
    /// Arms `timeout` (with `tag`) for `deadline`.
    fn schedule(
        &self,
        deadline: Instant,
        timeout: Arc<dyn LoopTimeout>,
        tag: u64,
    ) -> Result<LoopTimerKey, Rejected>;
    /// Disarms an entry; `false` if it already fired, was cancelled, or the
    /// loop is gone. Never fails otherwise.
    fn cancel(&self, key: LoopTimerKey) -> bool;
}

/// Makes the [`TimeoutScheduler`] that stands for a loop.
pub type SchedulerFactory =
    Arc<dyn Fn(Arc<super::EventLoop>) -> Arc<dyn TimeoutScheduler> + Send + Sync>;
