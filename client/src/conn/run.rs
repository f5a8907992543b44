//! Running exchanges on an open connection: writing the request, reading
//! and decoding the response, and what follows it (offered back to the pool,
//! retried once on a fresh connection, or closed with a typed error).

use super::*;

/// Runs `exchange` on idle connection `key` (the pooled path), after
/// checking that the server has not closed it meanwhile.
pub(crate) fn start_on_idle(
    cx: &mut LoopContext<'_>,
    key: usize,
    conn_id: u64,
    exchange: Arc<Exchange>,
) {
    // Idempotent: in wheel mode they started when the exchange was sent.
    exchange.timeouts.start(&exchange);
    let alive = match get(cx, key, conn_id) {
        Some(conn) if matches!(conn.state, State::Idle) => {
            conn.transport.as_mut().is_some_and(Transport::still_open)
        }
        _ => false,
    };
    if !alive {
        if get(cx, key, conn_id).is_some() {
            close(cx, key);
        }
        // Nothing was sent: any request may go again, on another connection.
        exchange.detach();
        exchange.client.dispatch(exchange.clone(), true);
        return;
    }
    if exchange.is_done() {
        offer_or_close(cx, key, &exchange);
        return;
    }
    let info = cx.conns[key]
        .info
        .clone()
        .expect("an idle connection has connected");
    exchange.set_remote(info.remote);
    exchange.listener.on_connection_pooled(&info);
    begin_exchange(cx, key, exchange, true);
}

pub(super) fn begin_exchange(
    cx: &mut LoopContext<'_>,
    key: usize,
    exchange: Arc<Exchange>,
    reused: bool,
) {
    let conn = &mut cx.conns[key];
    let limits = conn.client.config.limits;
    let is_head = exchange.request.method == http::Method::HEAD;
    let keep_alive = exchange.request.keep_alive;
    conn.sending = true;
    conn.written = 0;
    conn.state = State::Active(Box::new(Active {
        exchange,
        decoder: ResponseDecoder::new(limits, is_head, keep_alive),
        reused,
        head: None,
        body: Vec::new(),
        trailers: None,
    }));
    write_request(cx, key);
    // A fresh connection may already hold the answer (a server that speaks
    // as soon as it accepts, or the end of a TLS handshake's records), and
    // the readiness that said so may have come with the connect's: the
    // socket will not signal it again, so look now.
    if !reused && matches!(cx.conns.get(key).map(|c| &c.state), Some(State::Active(_))) {
        read_response(cx, key);
    }
}

pub(super) fn write_request(cx: &mut LoopContext<'_>, key: usize) {
    let Conn {
        state,
        transport,
        sending,
        written,
        ..
    } = &mut cx.conns[key];
    let State::Active(active) = state else {
        return;
    };
    let Some(transport) = transport.as_mut() else {
        return;
    };
    if !*sending {
        // The request is out; TLS may still hold records back (an answer
        // to a key update).
        if transport.wants_write() {
            if let Err(e) = transport.flush() {
                io_failure(cx, key, e);
            }
        }
        return;
    }
    // Written straight from the exchange's encoded request: no copy.
    let bytes = &active.exchange.request.bytes;
    while *written < bytes.len() {
        match transport.write(&bytes[*written..]) {
            Ok(0) => {
                let error =
                    io::Error::new(io::ErrorKind::WriteZero, "the connection took no bytes");
                return write_failure(cx, key, error);
            }
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return write_failure(cx, key, e),
        }
    }
    // The request counts as sent once TLS has sent its last record too.
    match transport.flush() {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => return write_failure(cx, key, e),
    }
    *sending = false;
    *written = 0;
    let exchange = active.exchange.clone();
    let conn = &cx.conns[key];
    let now = conn.client.clock.now();
    if let Some(info) = &conn.info {
        exchange.listener.on_request_sent(info);
    }
    exchange.mark_read(now);
    exchange.timeouts.start_read(&exchange, now);
}

pub(super) fn read_response(cx: &mut LoopContext<'_>, key: usize) {
    loop {
        let conn = &mut cx.conns[key];
        if conn.read_len == conn.read_buf.len() {
            make_room(conn);
        }
        let Some(transport) = conn.transport.as_mut() else {
            return;
        };
        match transport.read(&mut conn.read_buf[conn.read_len..]) {
            Ok(0) => return on_eof(cx, key),
            Ok(n) => {
                conn.read_len += n;
                let now = conn.client.clock.now();
                if let State::Active(active) = &conn.state {
                    active.exchange.mark_read(now);
                }
                if !decode(cx, key) {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return io_failure(cx, key, e),
        }
    }
}

/// Frees decoded bytes at the front of the buffer, or grows it.
fn make_room(conn: &mut Conn) {
    if conn.read_pos > 0 {
        conn.read_buf.copy_within(conn.read_pos..conn.read_len, 0);
        conn.read_len -= conn.read_pos;
        conn.read_pos = 0;
    }
    if conn.read_len == conn.read_buf.len() {
        let grown = (conn.read_buf.len() * 2).max(READ_CHUNK);
        conn.read_buf.resize(grown, 0);
    }
}

/// Feeds what was read to the decoder. Returns false once the exchange on
/// this connection has ended (the caller stops reading).
fn decode(cx: &mut LoopContext<'_>, key: usize) -> bool {
    let conn = &mut cx.conns[key];
    let State::Active(active) = &mut conn.state else {
        return false;
    };
    let Active {
        exchange,
        decoder,
        head,
        body,
        trailers,
        ..
    } = &mut **active;
    loop {
        // The caller's code just called (a listener, the body callback) may
        // have ended the exchange: a cancel, or a timeout meanwhile. Its
        // abort is on its way; nothing more of this response is delivered.
        if exchange.is_done() {
            let id = exchange.id;
            abort(cx, key, id);
            return false;
        }
        let input = &conn.read_buf[conn.read_pos..conn.read_len];
        match decoder.decode(input) {
            Ok((consumed, decoded)) => {
                conn.read_pos += consumed;
                match decoded {
                    Decoded::NeedMore => {
                        if conn.read_pos == conn.read_len {
                            conn.read_pos = 0;
                            conn.read_len = 0;
                        }
                        return true;
                    }
                    Decoded::Head(response_head) => {
                        exchange.listener.on_status(response_head.status);
                        exchange.listener.on_headers(&response_head.headers);
                        *head = Some(response_head);
                    }
                    Decoded::Body(data) => {
                        exchange.listener.on_body_part(data.len());
                        match crate::event_loop::lock(&exchange.body_sink).as_mut() {
                            Some(sink) => sink(data),
                            None => body.extend_from_slice(data),
                        }
                    }
                    Decoded::Trailers(map) => *trailers = Some(map),
                    Decoded::Done { keep_alive } => {
                        // Bytes past the response were never asked for: the
                        // server broke the framing, and what it sent cannot
                        // be trusted.
                        let extra = conn.read_len - conn.read_pos;
                        if extra > 0 {
                            let exchange = exchange.clone();
                            let error = DecodeError::BytesAfterResponse { count: extra };
                            protocol_failure(cx, key, exchange, error);
                            return false;
                        }
                        // A request the server answered before it was fully
                        // written leaves the stream mid-request.
                        // Over TLS, bytes past the response may still sit
                        // in the TLS layer: then the connection is not reused.
                        let reusable = keep_alive
                            && !conn.sending
                            && !conn
                                .transport
                                .as_mut()
                                .is_some_and(Transport::has_buffered_input);
                        complete(cx, key, reusable);
                        return false;
                    }
                }
            }
            Err(error) => {
                let exchange = exchange.clone();
                protocol_failure(cx, key, exchange, error);
                return false;
            }
        }
    }
}

fn on_eof(cx: &mut LoopContext<'_>, key: usize) {
    let conn = &mut cx.conns[key];
    let State::Active(active) = &mut conn.state else {
        return;
    };
    if !active.decoder.bytes_seen() && retry_on_fresh_connection(cx, key) {
        return;
    }
    let conn = &mut cx.conns[key];
    let State::Active(active) = &mut conn.state else {
        return;
    };
    match active.decoder.eof() {
        // The end of the stream ends a response framed by it.
        Ok(_) => complete(cx, key, false),
        Err(error) => {
            let exchange = active.exchange.clone();
            protocol_failure(cx, key, exchange, error);
        }
    }
}

/// A reused connection failed before any response byte: the server closed
/// it while idle. An idempotent request goes again once, on a new
/// connection. Returns whether it did.
fn retry_on_fresh_connection(cx: &mut LoopContext<'_>, key: usize) -> bool {
    let conn = &cx.conns[key];
    let State::Active(active) = &conn.state else {
        return false;
    };
    let exchange = active.exchange.clone();
    if !active.reused || !exchange.is_idempotent() || exchange.retried.swap(true, Ordering::AcqRel)
    {
        return false;
    }
    close(cx, key);
    exchange.detach();
    exchange.client.dispatch(exchange.clone(), false);
    true
}

/// Sending the request failed. A server that refuses a request early (a
/// 413 to a large upload) answers and closes without reading the rest, and
/// its answer is still in the socket when the write fails: RFC 9112 §9.5
/// asks a client to watch for it. So what has arrived is decoded first —
/// up to the end of the stream, which completes a close-delimited answer —
/// and the write error ends the exchange only if that answer does not.
/// When nothing arrived, it is the write error at once (and a pooled
/// connection the server had dropped is retried as for any I/O error).
fn write_failure(cx: &mut LoopContext<'_>, key: usize, error: io::Error) {
    // `sending` stays set: a connection whose request went out only in
    // part is never reused, whatever the answer says.
    let conn = &mut cx.conns[key];
    let arrived = read_arrived(conn);
    if arrived.bytes > 0 {
        let now = conn.client.clock.now();
        if let State::Active(active) = &conn.state {
            active.exchange.mark_read(now);
        }
        if decode(cx, key) && arrived.ended {
            on_eof(cx, key);
        }
    }
    if matches!(cx.conns.get(key).map(|c| &c.state), Some(State::Active(_))) {
        io_failure(cx, key, error);
    }
}

/// What [`read_arrived`] found.
struct Arrived {
    /// Bytes read.
    bytes: usize,
    /// Whether the stream ended cleanly after them.
    ended: bool,
}

/// Reads whatever the socket holds into the connection's buffer, stopping
/// at its end or any error without acting on them.
fn read_arrived(conn: &mut Conn) -> Arrived {
    let mut bytes = 0;
    loop {
        if conn.read_len == conn.read_buf.len() {
            make_room(conn);
        }
        let Some(transport) = conn.transport.as_mut() else {
            return Arrived {
                bytes,
                ended: false,
            };
        };
        match transport.read(&mut conn.read_buf[conn.read_len..]) {
            Ok(0) => return Arrived { bytes, ended: true },
            Ok(n) => {
                conn.read_len += n;
                bytes += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                return Arrived {
                    bytes,
                    ended: false,
                }
            }
        }
    }
}

fn io_failure(cx: &mut LoopContext<'_>, key: usize, error: io::Error) {
    let conn = &cx.conns[key];
    let State::Active(active) = &conn.state else {
        close(cx, key);
        return;
    };
    if !active.decoder.bytes_seen() && retry_on_fresh_connection(cx, key) {
        return;
    }
    close_failing(cx, key, |exchange| Error::Io {
        remote: exchange.remote_name(),
        source: error,
    });
}

fn protocol_failure(
    cx: &mut LoopContext<'_>,
    key: usize,
    exchange: Arc<Exchange>,
    error: DecodeError,
) {
    close(cx, key);
    let remote = exchange.remote_name();
    let error = match error {
        DecodeError::BodyTooLarge { limit } => Error::BodyTooLarge { remote, limit },
        source => Error::Protocol { remote, source },
    };
    exchange.finish(Err(error));
}

/// The response is complete: hand the connection back to the pool *before*
/// waking the caller, so a caller that sends its next request at once
/// reuses it.
fn complete(cx: &mut LoopContext<'_>, key: usize, reusable: bool) {
    let conn = &mut cx.conns[key];
    let state = std::mem::replace(&mut conn.state, State::Idle);
    let State::Active(active) = state else { return };
    let Active {
        exchange,
        head,
        body,
        trailers,
        ..
    } = *active;
    let Some(head) = head else {
        // Done without a head cannot happen; treat it as a protocol error.
        close(cx, key);
        exchange.finish(Err(Error::Protocol {
            remote: exchange.remote_name(),
            source: DecodeError::Truncated {
                stage: crate::h1::Stage::Head,
            },
        }));
        return;
    };
    let response = Response {
        status: head.status,
        version: head.version,
        headers: head.headers,
        body,
        trailers,
        remote: conn.remote.expect("an active connection has a remote"),
    };
    conn.read_pos = 0;
    conn.read_len = 0;
    exchange.detach();
    if reusable {
        offer_or_close(cx, key, &exchange);
    } else {
        close(cx, key);
    }
    exchange.finish(Ok(response));
}

/// Offers idle connection `key` to the pool, or closes it if the pool will
/// not have it; runs a waiter the pool hands back on it.
pub(super) fn offer_or_close(cx: &mut LoopContext<'_>, key: usize, finished: &Arc<Exchange>) {
    let conn = &mut cx.conns[key];
    let Some(info) = conn.info.clone() else {
        close(cx, key);
        return;
    };
    let idle = IdleConn {
        conn: ConnRef {
            event_loop: cx.event_loop.clone(),
            key,
            conn_id: conn.id,
        },
        info: info.clone(),
        origin: conn.origin.clone(),
        idle_since: conn.client.clock.now(),
        created: conn.created,
    };
    let conn_ref = idle.conn.clone();
    match conn.client.pool.offer(idle) {
        Offered::Kept => finished.listener.on_connection_offered(&info),
        Offered::Serve(waiter) => {
            finished.listener.on_connection_offered(&info);
            // The pooled path for the waiter, on this very loop.
            waiter.attach(conn_ref);
            let scheduler = conn.client.group.scheduler(cx.event_loop.index()).clone();
            waiter.timeouts.rehome(&waiter, scheduler);
            waiter.timeouts.start(&waiter);
            start_on_idle(cx, key, info.id, waiter);
        }
        Offered::Refused => close(cx, key),
    }
}

pub(super) fn on_idle_readable(cx: &mut LoopContext<'_>, key: usize) {
    let conn = &mut cx.conns[key];
    let Some(transport) = conn.transport.as_mut() else {
        return;
    };
    if transport.still_open() {
        return;
    }
    // Closed by the server (or it sent bytes nobody asked for).
    conn.client.pool.remove_idle(&conn.origin, conn.id);
    close(cx, key);
}
