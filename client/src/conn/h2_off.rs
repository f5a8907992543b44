//! HTTP/2 left out of the build (the `http2` cargo feature is off): the
//! connection type has no HTTP/2 state that can exist ([`Http2`] has no
//! value), ALPN never offers `h2`, and the builder refuses to build a client
//! that must speak HTTP/2. These are the entry points the rest of `conn`
//! calls; none can be reached.

use super::Conn;
use crate::error::Error;
use crate::event_loop::{LoopContext, Readiness};
use crate::exchange::Exchange;
use crate::net::Transport;
use std::sync::Arc;

/// No HTTP/2 connection exists in this build.
pub(super) enum Http2 {}

impl Http2 {
    pub(super) fn is_shared(&self) -> bool {
        match *self {}
    }

    pub(super) fn say_goodbye(&mut self) {
        match *self {}
    }

    pub(super) fn load_limit(&self) -> usize {
        match *self {}
    }
}

/// Without HTTP/2, no transport negotiates it.
pub(super) fn negotiated(_transport: &Transport) -> bool {
    false
}

impl Conn {
    /// Unreachable: the builder refuses prior knowledge and HTTP/2-only
    /// without the feature, and ALPN never offers `h2`. Fails the exchange
    /// rather than panic, should that ever change.
    pub(super) fn begin_h2(
        &mut self,
        _cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        _early: Vec<u8>,
    ) {
        exchange.finish_err(Error::Io {
            remote: exchange.remote_name(),
            source: std::io::Error::other("HTTP/2 is not in this build (cargo feature http2)"),
        });
    }

    pub(super) fn start_on_h2(
        &mut self,
        _cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
    ) -> Result<(), Arc<Exchange>> {
        Err(exchange)
    }

    pub(super) fn h2_ready(&mut self, _cx: &mut LoopContext<'_>, _readiness: Readiness) {}

    pub(super) fn abort_h2(&mut self, _cx: &mut LoopContext<'_>, _exchange_id: u64) {}

    pub(super) fn fail_h2(
        &mut self,
        _cx: &mut LoopContext<'_>,
        _error: impl Fn(&Exchange) -> Error,
    ) {
    }

    pub(super) fn h2_timer(&mut self, _cx: &mut LoopContext<'_>) {}

    pub(super) fn retire_h2(&mut self, _cx: &mut LoopContext<'_>) {}
}
