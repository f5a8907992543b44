//! [`WriteStall`]: whether a connection's request waits on the server to
//! take more of it — the time the write timeout bounds
//! ([`ClientBuilder::write_timeout`](crate::ClientBuilder::write_timeout)).
//!
//! The request waits on the server when the socket takes no more (HTTP/1.1)
//! or the server's flow-control window is spent (HTTP/2). It does not when
//! it waits on its own body's source, on `100 Continue`, or once the
//! answer's head has come: from then on the read timeout bounds the
//! server, which may have stopped reading on purpose.

use crate::exchange::Exchange;
use std::sync::Arc;
use std::time::Instant;

/// Kept by the connection beside its request, and told what each step of
/// sending came to.
#[derive(Debug, Default)]
pub(super) struct WriteStall {
    stalled: bool,
}

impl WriteStall {
    /// A step of sending ended: `waits`, the request now waits on the
    /// server; `took`, the server took some of it during the step. The
    /// timeout starts with a wait, and runs a period from its start or
    /// from the last time the server took some.
    pub(super) fn step(
        &mut self,
        exchange: &Arc<Exchange>,
        waits: bool,
        took: bool,
        now: impl FnOnce() -> Instant,
    ) {
        match (waits, self.stalled) {
            (true, false) => {
                self.stalled = true;
                exchange.start_write(now());
            }
            (true, true) if took => exchange.mark_written(now()),
            (false, true) => self.end(exchange),
            _ => {}
        }
    }

    /// The request no longer waits on the server, for good or for now.
    pub(super) fn end(&mut self, exchange: &Arc<Exchange>) {
        if self.stalled {
            self.stalled = false;
            exchange.stop_write();
        }
    }
}
