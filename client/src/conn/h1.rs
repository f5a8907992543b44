//! HTTP/1.1 on an open connection: writing the request, reading and
//! decoding the response, and what follows it — offered back to the pool,
//! retried once on a fresh connection, or closed with a typed error.

use super::read_buf::Filled;
use super::{Conn, IdleConn, Offered, State};
use crate::error::Error;
use crate::event_loop::LoopContext;
use crate::events::EventListener;
use crate::exchange::{ConnSlot, Exchange, ResponseParts};
use crate::h1::{DecodeError, Decoded, ResponseDecoder, ResponseHead, Stage};
use crate::net::Transport;
use crate::sync::lock;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bytes a connection reads per readiness event before the loop runs due
/// timeouts and the other connections (then it reads on): one fast sender
/// must not make every other deadline on its loop late.
const READ_BUDGET: usize = 256 * 1024;

/// The exchange a connection runs, and how far it got.
pub(super) struct Active {
    pub(super) exchange: Arc<Exchange>,
    decoder: ResponseDecoder,
    /// Taken from the pool rather than freshly connected.
    reused: bool,
    /// The request is still going out, and this much of it has.
    sending: bool,
    written: usize,
    head: Option<ResponseHead>,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

impl Conn {
    /// Runs `exchange` on this idle connection (the pooled path), after
    /// checking that the server has not closed it meanwhile; gives the
    /// exchange back if it has (the connection then closes).
    pub(super) fn start_on_idle(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
    ) -> Result<(), Arc<Exchange>> {
        let alive = matches!(self.state, State::Idle)
            && self.transport.as_mut().is_some_and(Transport::still_open);
        if !alive {
            self.close(cx);
            return Err(exchange);
        }
        if exchange.is_done() {
            self.offer_or_close(cx, &exchange);
            return Ok(());
        }
        // Attached and started in one step, on this loop: an arm here wakes
        // nothing.
        exchange.start_on(self.conn_ref(cx));
        let info = self.info.clone().expect("an idle connection has connected");
        exchange.set_remote(info.remote);
        exchange.listener.on_connection_pooled(&info);
        self.begin_exchange(cx, exchange, true);
        Ok(())
    }

    pub(super) fn begin_exchange(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        reused: bool,
    ) {
        let limits = self.env().config.limits;
        let is_head = exchange.request.method == http::Method::HEAD;
        let keep_alive = exchange.request.keep_alive;
        self.state = State::Active(Box::new(Active {
            exchange,
            decoder: ResponseDecoder::new(limits, is_head, keep_alive),
            reused,
            sending: true,
            written: 0,
            head: None,
            body: Vec::new(),
            trailers: None,
        }));
        self.write_request(cx);
        // A fresh connection may already hold the answer (a server that
        // speaks as soon as it accepts, or the end of a TLS handshake's
        // records), and the readiness that said so may have come with the
        // connect's: the socket will not signal it again, so look now.
        if !reused && matches!(self.state, State::Active(_)) {
            self.read_response(cx);
        }
    }

    pub(super) fn write_request(&mut self, cx: &mut LoopContext<'_>) {
        let (State::Active(active), Some(transport)) = (&mut self.state, self.transport.as_mut())
        else {
            return;
        };
        if !active.sending {
            // The request is out; TLS may still hold records back (an
            // answer to a key update).
            if transport.wants_write() {
                if let Err(e) = transport.flush() {
                    self.io_failure(cx, e);
                }
            }
            return;
        }
        // Written straight from the exchange's encoded request: no copy.
        let bytes = &active.exchange.request.bytes;
        while active.written < bytes.len() {
            match transport.write(&bytes[active.written..]) {
                Ok(0) => {
                    let error =
                        io::Error::new(io::ErrorKind::WriteZero, "the connection took no bytes");
                    return self.write_failure(cx, error);
                }
                Ok(n) => active.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.write_failure(cx, e),
            }
        }
        // The request counts as sent once TLS has sent its last record too.
        match transport.flush() {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => return self.write_failure(cx, e),
        }
        active.sending = false;
        let exchange = active.exchange.clone();
        if let Some(info) = &self.info {
            exchange.listener.on_request_sent(info);
        }
        exchange.start_read(self.now());
    }

    /// Reads and decodes until the socket would block, the exchange ends,
    /// or the read budget is spent (then the loop hands readiness back
    /// after its other work).
    pub(super) fn read_response(&mut self, cx: &mut LoopContext<'_>) {
        let mut budget = READ_BUDGET;
        loop {
            let Some(transport) = self.transport.as_mut() else {
                return;
            };
            match self.buf.fill(transport) {
                Filled::Data(n) => {
                    let now = self.now();
                    if let State::Active(active) = &self.state {
                        active.exchange.mark_read(now);
                    }
                    if !self.decode(cx) {
                        return;
                    }
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        return cx.ready_again();
                    }
                }
                Filled::Eof => return self.on_eof(cx),
                Filled::WouldBlock => return,
                Filled::Failed(e) => return self.io_failure(cx, e),
            }
        }
    }

    /// Feeds what was read to the decoder. Returns false once the exchange
    /// on this connection has ended (the caller stops reading).
    fn decode(&mut self, cx: &mut LoopContext<'_>) -> bool {
        loop {
            let State::Active(active) = &mut self.state else {
                return false;
            };
            // The caller's code just called (a listener, the body callback)
            // may have ended the exchange: a cancel, or a timeout meanwhile.
            // Nothing more of this response is delivered.
            if active.exchange.is_done() {
                self.reset(cx);
                return false;
            }
            let decoded = match active.decoder.decode(self.buf.unread()) {
                Ok(decoded) => decoded,
                Err(error) => {
                    self.protocol_failure(cx, error);
                    return false;
                }
            };
            let (consumed, decoded) = decoded;
            match decoded {
                Decoded::NeedMore => {
                    self.buf.consume(consumed);
                    return true;
                }
                Decoded::Head(head) => {
                    active.exchange.listener.on_status(head.status);
                    active.exchange.listener.on_headers(&head.headers);
                    active.head = Some(head);
                }
                Decoded::Body(data) => {
                    active.exchange.listener.on_body_part(data.len());
                    match lock(&active.exchange.body_sink).as_mut() {
                        Some(sink) => sink(data),
                        None => active.body.extend_from_slice(data),
                    }
                }
                Decoded::Trailers(map) => active.trailers = Some(map),
                Decoded::Done { keep_alive } => {
                    self.buf.consume(consumed);
                    self.response_done(cx, keep_alive);
                    return false;
                }
            }
            self.buf.consume(consumed);
        }
    }

    /// The decoder says the response is complete.
    fn response_done(&mut self, cx: &mut LoopContext<'_>, keep_alive: bool) {
        // Bytes past the response were never asked for: the server broke
        // the framing, and what it sent cannot be trusted.
        if !self.buf.is_empty() {
            let count = self.buf.unread().len();
            return self.protocol_failure(cx, DecodeError::BytesAfterResponse { count });
        }
        let State::Active(active) = &self.state else {
            return;
        };
        // A request the server answered before it was fully written leaves
        // the stream mid-request. Over TLS, bytes past the response may
        // still sit in the TLS layer: then the connection is not reused.
        let reusable = keep_alive
            && !active.sending
            && !self
                .transport
                .as_mut()
                .is_some_and(Transport::has_buffered_input);
        self.complete(cx, reusable);
    }

    fn on_eof(&mut self, cx: &mut LoopContext<'_>) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        if !active.decoder.bytes_seen() && self.retry_on_fresh_connection(cx) {
            return;
        }
        let State::Active(active) = &mut self.state else {
            return;
        };
        match active.decoder.eof() {
            // The end of the stream ends a response framed by it.
            Ok(_) => self.complete(cx, false),
            Err(error) => self.protocol_failure(cx, error),
        }
    }

    /// A reused connection failed before any response byte: the server
    /// closed it while idle. An idempotent request goes again once, on a
    /// new connection. Returns whether it did.
    fn retry_on_fresh_connection(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let State::Active(active) = &self.state else {
            return false;
        };
        let exchange = active.exchange.clone();
        if !active.reused
            || !exchange.is_idempotent()
            || exchange.retried.swap(true, Ordering::AcqRel)
        {
            return false;
        }
        self.close(cx);
        // Its read timeout stays with the connection it leaves.
        exchange.attach(ConnSlot::None);
        self.owner.redispatch(exchange, false);
        true
    }

    /// Sending the request failed. A server that refuses a request early (a
    /// 413 to a large upload) answers and closes without reading the rest,
    /// and its answer is still in the socket when the write fails: RFC 9112
    /// §9.5 asks a client to watch for it. So what has arrived is decoded
    /// first — up to the end of the stream, which completes a
    /// close-delimited answer — and the write error ends the exchange only
    /// if that answer does not. When nothing arrived, it is the write error
    /// at once (and a pooled connection the server had dropped is retried
    /// as for any I/O error).
    fn write_failure(&mut self, cx: &mut LoopContext<'_>, error: io::Error) {
        // `sending` stays set: a connection whose request went out only in
        // part is never reused, whatever the answer says.
        let mut arrived = false;
        let mut ended = false;
        while let Some(transport) = self.transport.as_mut() {
            match self.buf.fill(transport) {
                Filled::Data(_) => arrived = true,
                Filled::Eof => {
                    ended = true;
                    break;
                }
                Filled::WouldBlock | Filled::Failed(_) => break,
            }
        }
        if arrived {
            let now = self.now();
            if let State::Active(active) = &self.state {
                active.exchange.mark_read(now);
            }
            if self.decode(cx) && ended {
                self.on_eof(cx);
            }
        }
        if matches!(self.state, State::Active(_)) {
            self.io_failure(cx, error);
        }
    }

    fn io_failure(&mut self, cx: &mut LoopContext<'_>, error: io::Error) {
        let State::Active(active) = &self.state else {
            return self.close(cx);
        };
        if !active.decoder.bytes_seen() && self.retry_on_fresh_connection(cx) {
            return;
        }
        self.close_failing(cx, |exchange| Error::Io {
            remote: exchange.remote_name(),
            source: error,
        });
    }

    fn protocol_failure(&mut self, cx: &mut LoopContext<'_>, error: DecodeError) {
        self.close_failing(cx, |exchange| {
            let remote = exchange.remote_name();
            match error {
                DecodeError::BodyTooLarge { limit } => Error::BodyTooLarge { remote, limit },
                source => Error::Protocol { remote, source },
            }
        });
    }

    /// The response is complete: hand the connection back to the pool
    /// *before* waking the caller, so a caller that sends its next request
    /// at once reuses it.
    fn complete(&mut self, cx: &mut LoopContext<'_>, reusable: bool) {
        let State::Active(active) = std::mem::replace(&mut self.state, State::Idle) else {
            return;
        };
        let Active {
            exchange,
            head,
            body,
            trailers,
            ..
        } = *active;
        self.buf.clear();
        let Some(head) = head else {
            // Done without a head cannot happen; treat it as a protocol error.
            self.close(cx);
            exchange.finish(Err(Error::Protocol {
                remote: exchange.remote_name(),
                source: DecodeError::Truncated { stage: Stage::Head },
            }));
            return;
        };
        let response = ResponseParts {
            status: head.status,
            version: head.version,
            headers: head.headers,
            body,
            trailers,
            remote: self.remote.expect("an active connection has a remote"),
        };
        if reusable {
            self.offer_or_close(cx, &exchange);
        } else {
            self.close(cx);
        }
        exchange.finish(Ok(response));
    }

    /// Offers the idle connection to the pool, or closes it if the pool
    /// will not have it; runs a waiter the pool hands back on it.
    pub(super) fn offer_or_close(&mut self, cx: &mut LoopContext<'_>, finished: &Arc<Exchange>) {
        let Some(info) = self.info.clone() else {
            return self.close(cx);
        };
        let idle = IdleConn {
            conn: self.conn_ref(cx),
            info: info.clone(),
            origin: self.origin.clone(),
            idle_since: self.now(),
            created: self.created,
        };
        match self.owner.offer(idle) {
            Offered::Kept => finished.listener.on_connection_offered(&info),
            Offered::Serve(waiter) => {
                finished.listener.on_connection_offered(&info);
                // The pooled path for the waiter, on this very loop.
                if let Err(waiter) = self.start_on_idle(cx, waiter) {
                    self.owner.redispatch(waiter, true);
                }
            }
            Offered::Refused => self.close(cx),
        }
    }

    pub(super) fn on_idle_readable(&mut self, cx: &mut LoopContext<'_>) {
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        if transport.still_open() {
            return;
        }
        // Closed by the server (or it sent bytes nobody asked for).
        if let Some(info) = &self.info {
            self.owner.remove_idle(&self.origin, info.id);
        }
        self.close(cx);
    }
}
