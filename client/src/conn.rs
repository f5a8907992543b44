//! A connection on its loop: connecting, running one exchange at a time,
//! idle in the pool, closed.
//!
//! Everything here runs on the connection's own loop thread, the only thread
//! that touches its socket and codec state. Other threads reach a
//! connection by posting a task to its loop with the connection's slot key
//! and id (the id guards against a slot reused by a later connection).
//!
//! ```text
//!                            ┌──(https)──▶ Handshaking ──(done)──┐
//!                            │                  │                ▼
//!   connect ──▶ Connecting ──(connected)──(http)──────────────▶ Active ──(response, keep-alive)──▶ Idle
//!                  │                            │                │  ▲                               │
//!                  │ (every address failed)     │ (TLS failure)  │  └────(taken from the pool)──────┘
//!                  ▼                            ▼                ▼
//!                closed ◀──────(error, close-delimited, abort, timeout)──
//! ```
//!
//! The socket sits behind a [`Transport`]: plain TCP, or TLS over it. An
//! https connection is attached to its exchange, and the exchange's
//! timeouts re-homed onto this loop, right after the TCP connect, as for
//! http; then it handshakes (driven on readable and writable events alike,
//! until done or the socket would block), so the request deadline bounds the
//! handshake too, besides the handshake timeout (a timer on this loop's
//! heap, like the connect timeout). Closing a TLS connection sends
//! `close_notify` first.

use crate::client::ClientShared;
use crate::error::{Error, TimeoutKind};
use crate::event_loop::{LoopContext, LoopTimeout, LoopTimerKey};
use crate::events::ConnectionInfo;
use crate::exchange::{ConnRef, Exchange};
use crate::h1::{DecodeError, Decoded, ResponseDecoder, ResponseHead};
use crate::origin::{Origin, Scheme};
use crate::pool::{IdleConn, Offered, Served};
use crate::response::Response;
use crate::transport::{Handshake, HandshakeError, Transport};
use rustls::pki_types::ServerName;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Bytes read per system call; the buffer grows past it only for a large head.
const READ_CHUNK: usize = 16 * 1024;

pub(crate) struct Conn {
    id: u64,
    transport: Option<Transport>,
    origin: Origin,
    client: Arc<ClientShared>,
    remote: Option<SocketAddr>,
    created: Instant,
    info: Option<ConnectionInfo>,
    state: State,
    /// `read_buf[read_pos..read_len]` is received and not yet decoded.
    read_buf: Vec<u8>,
    read_pos: usize,
    read_len: usize,
    /// The request being written, and how much of it is out.
    write_buf: Vec<u8>,
    written: usize,
}

enum State {
    Connecting(Connecting),
    Handshaking(Handshaking),
    Active(Box<Active>),
    Idle,
}

struct Connecting {
    exchange: Arc<Exchange>,
    remaining: VecDeque<SocketAddr>,
    timer: Option<LoopTimerKey>,
    last_error: Option<io::Error>,
    timed_out: bool,
}

struct Handshaking {
    exchange: Arc<Exchange>,
    timer: Option<LoopTimerKey>,
}

struct Active {
    exchange: Arc<Exchange>,
    decoder: ResponseDecoder,
    /// Taken from the pool rather than freshly connected.
    reused: bool,
    head: Option<ResponseHead>,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

/// The connect timeout of one attempt, armed on the connection's loop.
struct ConnectTimer {
    key: usize,
    conn_id: u64,
}

impl LoopTimeout for ConnectTimer {
    fn expire(self: Arc<Self>, _tag: u32, cx: &mut LoopContext<'_>) {
        let Some(conn) = cx.conns.get_mut(self.key).filter(|c| c.id == self.conn_id) else {
            return;
        };
        if let State::Connecting(connecting) = &mut conn.state {
            connecting.timer = None;
            connecting.timed_out = true;
            attempt_next(cx, self.key);
        }
    }
}

/// The handshake timeout of one connection, armed on its loop.
struct HandshakeTimer {
    key: usize,
    conn_id: u64,
}

impl LoopTimeout for HandshakeTimer {
    fn expire(self: Arc<Self>, _tag: u32, cx: &mut LoopContext<'_>) {
        let Some(conn) = cx.conns.get_mut(self.key).filter(|c| c.id == self.conn_id) else {
            return;
        };
        let State::Handshaking(handshaking) = &mut conn.state else {
            return;
        };
        handshaking.timer = None;
        let exchange = handshaking.exchange.clone();
        let duration = conn.client.config.handshake_timeout.unwrap_or_default();
        let error = Error::timeout_of(TimeoutKind::Handshake, exchange.remote_name(), duration);
        if let Some(info) = &conn.info {
            exchange.listener.on_tls_handshake_failure(info, &error);
        }
        close(cx, self.key);
        exchange.finish(Err(error));
    }
}

fn get<'c>(cx: &'c mut LoopContext<'_>, key: usize, conn_id: u64) -> Option<&'c mut Conn> {
    cx.conns.get_mut(key).filter(|conn| conn.id == conn_id)
}

/// Opens a connection for `exchange` on this loop, trying `addrs` in turn.
pub(crate) fn connect(cx: &mut LoopContext<'_>, exchange: Arc<Exchange>, addrs: Vec<SocketAddr>) {
    let client = exchange.client.clone();
    let conn_id = client.next_conn_id();
    let attempting = exchange.clone();
    let conn = Conn {
        id: conn_id,
        transport: None,
        origin: exchange.origin.clone(),
        client,
        remote: None,
        created: exchange.client.clock.now(),
        info: None,
        state: State::Connecting(Connecting {
            exchange,
            remaining: addrs.into(),
            timer: None,
            last_error: None,
            timed_out: false,
        }),
        read_buf: Vec::new(),
        read_pos: 0,
        read_len: 0,
        write_buf: Vec::new(),
        written: 0,
    };
    let key = cx.conns.insert(conn);
    // Publish the attempt on the exchange (before `attempt_next` checks
    // `is_done`), so an exchange that ends while connecting (request
    // timeout, cancel) aborts the attempt instead of leaving its socket and
    // permit to the connect timeout, or without one to the kernel.
    attempting.attach(ConnRef {
        event_loop: cx.event_loop.clone(),
        key,
        conn_id,
    });
    attempt_next(cx, key);
}

/// Starts the connect to the next address, or fails the exchange when none is left.
fn attempt_next(cx: &mut LoopContext<'_>, key: usize) {
    loop {
        let conn = &mut cx.conns[key];
        let State::Connecting(connecting) = &mut conn.state else {
            return;
        };
        if let Some(mut transport) = conn.transport.take() {
            let _ = cx.registry.deregister(transport.tcp_mut());
        }
        if let Some(timer) = connecting.timer.take() {
            cx.event_loop.cancel(timer);
        }
        if connecting.exchange.is_done() {
            close(cx, key);
            return;
        }
        let Some(addr) = connecting.remaining.pop_front() else {
            let exchange = connecting.exchange.clone();
            let error = if connecting.timed_out {
                let duration = conn.client.config.connect_timeout.unwrap_or_default();
                Error::timeout_of(TimeoutKind::Connect, exchange.remote_name(), duration)
            } else {
                Error::Connect {
                    remote: exchange.remote_name(),
                    source: connecting.last_error.take().unwrap_or_else(|| {
                        io::Error::new(io::ErrorKind::NotFound, "no address to connect to")
                    }),
                }
            };
            close(cx, key);
            exchange.finish(Err(error));
            return;
        };
        let exchange = connecting.exchange.clone();
        exchange.set_remote(addr);
        exchange.listener.on_connect_attempt(addr);
        match open_socket(addr) {
            Ok(mut socket) => {
                let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
                if let Err(error) = cx.registry.register(&mut socket, mio::Token(key), interest) {
                    exchange.listener.on_connect_failure(addr, &error);
                    connecting.last_error = Some(error);
                    continue;
                }
                conn.transport = Some(Transport::Plain(socket));
                conn.remote = Some(addr);
                if let Some(timeout) = conn.client.config.connect_timeout {
                    let deadline = conn.client.clock.now() + timeout;
                    let timer = Arc::new(ConnectTimer {
                        key,
                        conn_id: conn.id,
                    });
                    connecting.timer = cx.event_loop.schedule(deadline, timer, 0).ok();
                }
                return;
            }
            Err(error) => {
                exchange.listener.on_connect_failure(addr, &error);
                connecting.last_error = Some(error);
            }
        }
    }
}

fn open_socket(addr: SocketAddr) -> io::Result<mio::net::TcpStream> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM.cloexec(),
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_nonblocking(true)?;
    socket.set_tcp_nodelay(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        // The connect goes on in the background; writability reports its end.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(mio::net::TcpStream::from_std(socket.into()))
}

/// The loop reported readiness for connection `key`.
pub(crate) fn ready(cx: &mut LoopContext<'_>, key: usize, event: &mio::event::Event) {
    let Some(conn) = cx.conns.get_mut(key) else {
        return;
    };
    match &conn.state {
        State::Connecting(_) => {
            if event.is_writable() || event.is_error() || event.is_write_closed() {
                on_connect_ready(cx, key);
            }
        }
        // Either readiness may move a handshake on.
        State::Handshaking(_) => drive_handshake(cx, key),
        State::Active(active) => {
            if active.exchange.is_done() {
                // Ended by a timeout or a cancel whose abort is still in the inbox.
                close(cx, key);
                return;
            }
            if event.is_writable() {
                write_request(cx, key);
            }
            if cx.conns.contains(key)
                && (event.is_readable() || event.is_read_closed() || event.is_error())
            {
                read_response(cx, key);
            }
        }
        State::Idle => {
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                on_idle_readable(cx, key);
            }
        }
    }
}

fn on_connect_ready(cx: &mut LoopContext<'_>, key: usize) {
    let conn = &mut cx.conns[key];
    let Some(transport) = conn.transport.as_ref() else {
        return;
    };
    let socket = transport.tcp();
    let State::Connecting(connecting) = &mut conn.state else {
        return;
    };
    let failure = match socket.take_error() {
        Ok(Some(error)) | Err(error) => Some(error),
        Ok(None) => match socket.peer_addr() {
            Ok(_) => None,
            // Not connected yet: a spurious wake-up.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => Some(e),
        },
    };
    if let Some(error) = failure {
        if let Some(addr) = conn.remote {
            connecting
                .exchange
                .listener
                .on_connect_failure(addr, &error);
        }
        connecting.last_error = Some(error);
        attempt_next(cx, key);
        return;
    }
    if let Some(timer) = connecting.timer.take() {
        cx.event_loop.cancel(timer);
    }
    let exchange = connecting.exchange.clone();
    let remote = conn.remote.expect("set with the socket");
    let info = ConnectionInfo {
        id: conn.id,
        loop_index: cx.event_loop.index(),
        loop_thread: cx.event_loop.thread_id(),
        remote,
    };
    conn.info = Some(info.clone());
    exchange.listener.on_connect_success(&info);
    let https = conn.origin.scheme == Scheme::Https;
    if exchange.is_done() {
        if https {
            // Not handshaken: of no use to anyone.
            close(cx, key);
            return;
        }
        // The exchange ended while connecting; the connection is still good.
        conn.state = State::Idle;
        offer_or_close(cx, key, &exchange);
        return;
    }
    // Publish the connection on the exchange, then move its timeouts onto
    // this loop (a same-thread schedule: no wake-up).
    exchange.attach(ConnRef {
        event_loop: cx.event_loop.clone(),
        key,
        conn_id: conn.id,
    });
    let scheduler = conn.client.group.scheduler(cx.event_loop.index()).clone();
    exchange.timeouts.rehome(&exchange, scheduler);
    if https {
        start_handshake(cx, key, exchange, info);
    } else {
        begin_exchange(cx, key, exchange, false);
    }
}

/// Starts TLS on connection `key`, just connected for `exchange`.
fn start_handshake(
    cx: &mut LoopContext<'_>,
    key: usize,
    exchange: Arc<Exchange>,
    info: ConnectionInfo,
) {
    let conn = &mut cx.conns[key];
    exchange.listener.on_tls_handshake_attempt(&info);
    // Checked when the request was built; an error here is still no panic.
    let started = ServerName::try_from(conn.origin.host.as_str())
        .map_err(|e| rustls::Error::General(format!("invalid server name: {e}")))
        .and_then(|name| rustls::ClientConnection::new(conn.client.tls.clone(), name.to_owned()));
    let tls = match started {
        Ok(tls) => tls,
        Err(source) => {
            let error = Error::tls(exchange.remote_name(), source);
            exchange.listener.on_tls_handshake_failure(&info, &error);
            close(cx, key);
            exchange.finish(Err(error));
            return;
        }
    };
    let Some(transport) = conn.transport.take() else {
        return;
    };
    conn.transport = Some(transport.start_tls(tls));
    let timer = conn.client.config.handshake_timeout.and_then(|timeout| {
        let deadline = conn.client.clock.now() + timeout;
        let timer = Arc::new(HandshakeTimer {
            key,
            conn_id: conn.id,
        });
        cx.event_loop.schedule(deadline, timer, 0).ok()
    });
    conn.state = State::Handshaking(Handshaking { exchange, timer });
    // The socket is writable: the ClientHello goes now.
    drive_handshake(cx, key);
}

/// Moves the handshake of connection `key` on, and starts the exchange
/// once it is done.
fn drive_handshake(cx: &mut LoopContext<'_>, key: usize) {
    let conn = &mut cx.conns[key];
    let State::Handshaking(handshaking) = &mut conn.state else {
        return;
    };
    if handshaking.exchange.is_done() {
        // Ended by the request timeout or a cancel whose abort is still in
        // the inbox.
        close(cx, key);
        return;
    }
    let Some(transport) = conn.transport.as_mut() else {
        return;
    };
    let outcome = transport.handshake();
    let exchange = handshaking.exchange.clone();
    let Some(info) = conn.info.clone() else {
        return;
    };
    match outcome {
        Ok(Handshake::Pending) => {}
        Ok(Handshake::Done) => {
            if let Some(timer) = handshaking.timer.take() {
                cx.event_loop.cancel(timer);
            }
            exchange
                .listener
                .on_tls_handshake_success(&info, transport.alpn_protocol());
            begin_exchange(cx, key, exchange, false);
            // Records that came with the end of the handshake (session
            // tickets) are read now: the socket may not signal again.
            if matches!(cx.conns.get(key).map(|c| &c.state), Some(State::Active(_))) {
                read_response(cx, key);
            }
        }
        Err(failure) => {
            let remote = exchange.remote_name();
            let error = match failure {
                HandshakeError::Tls(source) => Error::tls(remote, source),
                HandshakeError::Io(source) => Error::Io { remote, source },
            };
            exchange.listener.on_tls_handshake_failure(&info, &error);
            close(cx, key);
            exchange.finish(Err(error));
        }
    }
}

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
        if cx.conns.get(key).is_some_and(|c| c.id == conn_id) {
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

fn begin_exchange(cx: &mut LoopContext<'_>, key: usize, exchange: Arc<Exchange>, reused: bool) {
    let conn = &mut cx.conns[key];
    let limits = conn.client.config.limits;
    let is_head = exchange.request.method == http::Method::HEAD;
    let keep_alive = exchange.request.keep_alive;
    conn.write_buf.clear();
    conn.write_buf.extend_from_slice(&exchange.request.bytes);
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
}

fn write_request(cx: &mut LoopContext<'_>, key: usize) {
    let conn = &mut cx.conns[key];
    let State::Active(active) = &conn.state else {
        return;
    };
    let Some(transport) = conn.transport.as_mut() else {
        return;
    };
    if conn.write_buf.is_empty() {
        // The request is out; TLS may still hold records back (an answer
        // to a key update).
        if transport.wants_write() {
            if let Err(e) = transport.flush() {
                io_failure(cx, key, e);
            }
        }
        return;
    }
    while conn.written < conn.write_buf.len() {
        match transport.write(&conn.write_buf[conn.written..]) {
            Ok(0) => {
                let error =
                    io::Error::new(io::ErrorKind::WriteZero, "the connection took no bytes");
                return io_failure(cx, key, error);
            }
            Ok(n) => conn.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return io_failure(cx, key, e),
        }
    }
    // The request counts as sent once TLS has sent its last record too.
    match transport.flush() {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => return io_failure(cx, key, e),
    }
    conn.write_buf.clear();
    conn.written = 0;
    let exchange = active.exchange.clone();
    let now = conn.client.clock.now();
    if let Some(info) = &conn.info {
        exchange.listener.on_request_sent(info);
    }
    exchange.mark_read(now);
    exchange.timeouts.start_read(&exchange, now);
}

fn read_response(cx: &mut LoopContext<'_>, key: usize) {
    loop {
        let conn = &mut cx.conns[key];
        if conn.transport.is_none() {
            return;
        }
        if conn.read_len == conn.read_buf.len() {
            make_room(conn);
        }
        let conn = &mut cx.conns[key];
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
                            && conn.write_buf.is_empty()
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
        Ok(Decoded::Done { .. }) => complete(cx, key, false),
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

fn io_failure(cx: &mut LoopContext<'_>, key: usize, error: io::Error) {
    let conn = &cx.conns[key];
    let State::Active(active) = &conn.state else {
        close(cx, key);
        return;
    };
    if !active.decoder.bytes_seen() && retry_on_fresh_connection(cx, key) {
        return;
    }
    let conn = &cx.conns[key];
    let State::Active(active) = &conn.state else {
        return;
    };
    let exchange = active.exchange.clone();
    close(cx, key);
    exchange.finish(Err(Error::Io {
        remote: exchange.remote_name(),
        source: error,
    }));
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
fn offer_or_close(cx: &mut LoopContext<'_>, key: usize, finished: &Arc<Exchange>) {
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

fn on_idle_readable(cx: &mut LoopContext<'_>, key: usize) {
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

/// Ends the exchange with id `exchange_id` on connection `key`, if it is
/// still running there: it failed from outside (a timeout or a cancel).
pub(crate) fn abort(cx: &mut LoopContext<'_>, key: usize, exchange_id: u64) {
    let running = match cx.conns.get(key).map(|c| &c.state) {
        Some(State::Active(active)) => active.exchange.id == exchange_id,
        Some(State::Connecting(connecting)) => connecting.exchange.id == exchange_id,
        Some(State::Handshaking(handshaking)) => handshaking.exchange.id == exchange_id,
        _ => false,
    };
    if running {
        // An abandoned exchange leaves the stream mid-message: reset it
        // rather than close it gracefully. A reset is final for both ends at
        // once (no FIN handshake, no TIME_WAIT left on this side), and costs
        // the loop less, which matters when a burst of timeouts aborts many
        // connections together.
        if let Some(mut transport) = cx.conns[key].transport.take() {
            let _ = cx.registry.deregister(transport.tcp_mut());
            transport.reset();
        }
        close(cx, key);
    }
}

/// Closes idle connection `key` (evicted by the cleaner, or the client is closing).
pub(crate) fn close_idle(cx: &mut LoopContext<'_>, key: usize, conn_id: u64) {
    if get(cx, key, conn_id).is_some_and(|c| matches!(c.state, State::Idle)) {
        close(cx, key);
    }
}

/// Closes connection `key` and returns its permit, starting a waiter the
/// permit now serves. Does not end the exchange it carried.
fn close(cx: &mut LoopContext<'_>, key: usize) {
    let mut conn = cx.conns.remove(key);
    if let Some(mut transport) = conn.transport.take() {
        // TLS: close_notify, without waiting for the socket.
        transport.close();
        let _ = cx.registry.deregister(transport.tcp_mut());
    }
    let timer = match &mut conn.state {
        State::Connecting(connecting) => connecting.timer.take(),
        State::Handshaking(handshaking) => handshaking.timer.take(),
        _ => None,
    };
    if let Some(timer) = timer {
        cx.event_loop.cancel(timer);
    }
    if let Some(Served(waiter)) = conn.client.pool.release(&conn.origin) {
        conn.client.connect(waiter);
    }
}

/// The loop is shutting down: close every connection and fail what they carry.
pub(crate) fn close_all(cx: &mut LoopContext<'_>) {
    let keys: Vec<usize> = cx.conns.iter().map(|(key, _)| key).collect();
    for key in keys {
        let exchange = match &cx.conns[key].state {
            State::Active(active) => Some(active.exchange.clone()),
            State::Connecting(connecting) => Some(connecting.exchange.clone()),
            State::Handshaking(handshaking) => Some(handshaking.exchange.clone()),
            State::Idle => None,
        };
        close(cx, key);
        if let Some(exchange) = exchange {
            exchange.finish(Err(Error::ClientClosed));
        }
    }
}
