//! [`SourceWaker`]: a `std::task::Waker` that hands a source readiness again
//! on its own loop — for the futures and pipes a connection polls there (an
//! upload's source), so that whoever wakes them never runs the connection's
//! code, and many wakes before the loop gets to it cost one task.
//!
//! One readiness at most is on its way: a wake while one is queued posts
//! nothing, for the queued one runs the source after it anyway; the posted
//! task clears the mark before it runs the source, so a wake from then on
//! (one the source's run registered for) posts again. The mark is not
//! cleared by polling: a source that polls many times in one run (an
//! upload's small pieces gathered while another thread gives them, each poll
//! registering again) would post a readiness each time, each of which runs
//! the source again for as long — tens of thousands of tasks queued on the
//! loop, and the room for them kept.

use super::{EventLoop, SourceRef};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};

/// Wakes one source on its loop. See the [module documentation](self).
pub(crate) struct SourceWaker {
    event_loop: Weak<EventLoop>,
    source: SourceRef,
    /// A readiness is on its way to the loop, not yet run.
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
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(event_loop) = self.event_loop.upgrade() else {
            return;
        };
        let waker = self.clone();
        // Rejected by a loop shutting down: its sources are shut down, and
        // nothing is to run.
        let _ = event_loop.execute_boxed(Box::new(move |cx| {
            waker.queued.store(false, Ordering::Release);
            cx.ready_again_now(waker.source);
        }));
    }
}
