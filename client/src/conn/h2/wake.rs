//! [`Ready`]: which of a connection's futures a wake-up is for, so that the
//! poller polls those and no others.
//!
//! Every stream is polled with a waker of its own, which marks the stream's
//! key; the `h2` connection itself with one that marks [`CONNECTION`]. A mark
//! made while the connection is being driven (the common case: `h2` wakes a
//! stream's task as it reads that stream's frames) is taken up by that same
//! drive, which looks at the marks again before it ends; a mark made at any
//! other time — by another thread (a body's reader that made room, an
//! upload's source with data), or by the loop outside a drive — wakes the
//! connection's [`SourceWaker`], which posts one readiness to the loop.
//!
//! No wake-up is lost: a marker pushes its key and then reads `driving`; the
//! drive clears `driving` and then reads the marks. Either the drive sees
//! the key, or the marker sees `driving` cleared and posts (both may happen:
//! a spare turn, no harm).

use crate::event_loop::SourceWaker;
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

/// The key that stands for the connection itself.
pub(super) const CONNECTION: usize = usize::MAX;

/// The marks of one connection. See the [module documentation](self).
pub(super) struct Ready {
    marks: Mutex<Vec<usize>>,
    driving: AtomicBool,
    conn: Arc<SourceWaker>,
}

impl Ready {
    pub(super) fn new(conn: Arc<SourceWaker>) -> Arc<Ready> {
        Arc::new(Ready {
            marks: Mutex::new(Vec::new()),
            driving: AtomicBool::new(false),
            conn,
        })
    }

    /// A waker that marks `key`.
    pub(super) fn waker(self: &Arc<Self>, key: usize) -> Waker {
        Waker::from(Arc::new(Marker {
            ready: self.clone(),
            key,
        }))
    }

    /// A drive begins: marks from now on are its own to take.
    pub(super) fn begin(&self) {
        self.driving.store(true, Ordering::SeqCst);
    }

    /// Appends to `keys` the streams' keys marked so far, each once and in
    /// order, and returns whether [`CONNECTION`] was marked (its mark is
    /// for the connection polls, which every pass makes anyway). Both
    /// vectors keep their room: in a steady state, marking and taking
    /// allocate nothing.
    pub(super) fn take_into(&self, keys: &mut Vec<usize>) -> bool {
        let start = keys.len();
        let mut connection = false;
        keys.extend(lock(&self.marks).drain(..).filter(|&key| {
            connection |= key == CONNECTION;
            key != CONNECTION
        }));
        keys[start..].sort_unstable();
        let mut kept = start;
        for i in start..keys.len() {
            if kept == start || keys[i] != keys[kept - 1] {
                keys[kept] = keys[i];
                kept += 1;
            }
        }
        keys.truncate(kept);
        connection
    }

    /// A pass of the drive is over: returns whether marks came meanwhile
    /// (then the drive goes on, `driving` still set); if none, the drive is
    /// over, and marks from now on wake the connection.
    pub(super) fn end_pass(&self) -> bool {
        self.driving.store(false, Ordering::SeqCst);
        if lock(&self.marks).is_empty() {
            return false;
        }
        self.driving.store(true, Ordering::SeqCst);
        true
    }

    /// The drive stops with marks left (it spent its passes): it ends, and
    /// the connection is woken again for them.
    pub(super) fn stop(&self) {
        self.driving.store(false, Ordering::SeqCst);
        self.conn.wake_by_ref();
    }

    /// The drive stops before the connection is open (the handshake
    /// waits for the socket): marks from now on wake the connection.
    pub(super) fn stop_quietly(&self) {
        self.driving.store(false, Ordering::SeqCst);
    }

    fn mark(&self, key: usize) {
        lock(&self.marks).push(key);
        if !self.driving.load(Ordering::SeqCst) {
            self.conn.wake_by_ref();
        }
    }
}

struct Marker {
    ready: Arc<Ready>,
    key: usize,
}

impl Wake for Marker {
    fn wake(self: Arc<Self>) {
        self.ready.mark(self.key);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.mark(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_taken_are_the_streams_marked_each_once_after_those_there_were() {
        let group = crate::event_loop::EventLoopGroup::builder()
            .threads(1)
            .build()
            .unwrap();
        let source = crate::event_loop::SourceRef { key: 0, id: 0 };
        let ready = Ready::new(SourceWaker::new(&group.loops()[0], source));
        // Driving: the marks wake nothing.
        ready.begin();
        for key in [7, 3, CONNECTION, 7, 0, 3] {
            ready.waker(key).wake();
        }
        let mut keys = vec![9, 3];
        assert!(ready.take_into(&mut keys), "the connection was marked");
        assert_eq!(keys, [9, 3, 0, 3, 7]);
        // Taken: none left, and the pass is over.
        assert!(!ready.take_into(&mut keys));
        assert_eq!(keys, [9, 3, 0, 3, 7]);
        assert!(!ready.end_pass());
        group.shutdown();
    }
}
