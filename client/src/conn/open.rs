//! Opening a connection: TCP connect to each address in turn, each attempt
//! bounded by the connect timeout, then for https the TLS handshake bounded
//! by the handshake timeout; on success the exchange is attached and its
//! timeouts re-homed onto this loop.

use super::run::{begin_exchange, offer_or_close};
use super::*;
use crate::timeouts::deadline_after;

/// The connect timeout of one attempt, armed on the connection's loop.
struct ConnectTimer {
    key: usize,
    conn_id: u64,
}

impl LoopTimeout for ConnectTimer {
    fn expire(self: Arc<Self>, _tag: u32, cx: &mut LoopContext<'_>) {
        let Some(conn) = get(cx, self.key, self.conn_id) else {
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
        let Some(conn) = get(cx, self.key, self.conn_id) else {
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
        sending: false,
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
                let now = conn.client.clock.now();
                let connect_timeout = conn.client.config.connect_timeout;
                if let Some(deadline) = connect_timeout.and_then(|t| deadline_after(now, t)) {
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
    // On Linux the socket is created non-blocking (one system call, not
    // three: a burst of connects is bounded by the kernel's work per socket).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM.nonblocking().cloexec(),
        Some(socket2::Protocol::TCP),
    )?;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let socket = {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_nonblocking(true)?;
        socket
    };
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

pub(super) fn on_connect_ready(cx: &mut LoopContext<'_>, key: usize) {
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
    let now = conn.client.clock.now();
    let handshake_timeout = conn.client.config.handshake_timeout;
    let timer = handshake_timeout
        .and_then(|timeout| deadline_after(now, timeout))
        .and_then(|deadline| {
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
pub(super) fn drive_handshake(cx: &mut LoopContext<'_>, key: usize) {
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
            // Records that came with the end of the handshake (session
            // tickets) are read there too.
            begin_exchange(cx, key, exchange, false);
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
