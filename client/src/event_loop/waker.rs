//! [`SourceWaker`]: a `std::task::Waker` that hands a source readiness again
//! on its own loop — for the futures a connection polls there (an async
//! request body), so that whoever wakes them never runs the connection's
//! code, and many wakes before the loop gets to it cost one task.

use super::{EventLoop, SourceRef};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};

/// Wakes one source on its loop. See the [module documentation](self).
pub(crate) struct SourceWaker {
    event_loop: Weak<EventLoop>,
    source: SourceRef,
    /// A wake-up is on its way to the loop.
    queued: AtomicBool,
}

impl SourceWaker {
    /// A waker for `source` on `event_loop`.
    pub(crate) fn new(event_loop: &Arc<EventLoop>, source: SourceRef) -> Arc<SourceWaker> {
        Arc::new(SourceWaker {
            event_loop: Arc::downgrade(event_loop),
            source,
            queued: AtomicBool::new(false),
        })
    }

    /// Call before polling with it: a wake from then on posts again.
    pub(crate) fn rearm(&self) {
        self.queued.store(false, Ordering::Release);
    }

    /// It as a `Waker`.
    pub(crate) fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(self.clone())
    }
}

impl Wake for SourceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            if let Some(event_loop) = self.event_loop.upgrade() {
                event_loop.wake_source(self.source);
            }
        }
    }
}
