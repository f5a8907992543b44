//! Opening a connection: a TCP connect to each address in turn, each
//! attempt bounded by the connect timeout, then for https the TLS handshake
//! bounded by the handshake timeout. The exchange is attached as opening at
//! the start, and as ready — its timeouts re-homed onto this loop — once
//! the TCP connect succeeds, so the request deadline bounds the handshake
//! from the loop too.

use super::{Conn, ConnOwner, State, CONNECT_TIMER, HANDSHAKE_TIMER};
use crate::config::HttpVersions;
use crate::error::{Error, TimeoutKind};
use crate::event_loop::LoopContext;
use crate::events::ConnectionInfo;
use crate::exchange::{deadline_after, ConnSlot, Exchange};
use crate::net::{socket, Handshake, HandshakeError, Scheme, Transport};
use rustls::pki_types::ServerName;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

pub(super) struct Connecting {
    pub(super) exchange: Arc<Exchange>,
    remaining: VecDeque<SocketAddr>,
    last_error: Option<io::Error>,
    timed_out: bool,
}

/// Opens a connection for `exchange` on this loop (a task the client posts
/// to the loop its chooser picked), trying `addrs` in turn.
pub(crate) fn connect(
    cx: &mut LoopContext<'_>,
    owner: Arc<dyn ConnOwner>,
    exchange: Arc<Exchange>,
    addrs: Vec<SocketAddr>,
) {
    cx.add_source(|cx| {
        let created = owner.env().clock.now();
        let mut conn = Conn {
            owner,
            origin: exchange.origin.clone(),
            transport: None,
            remote: None,
            created,
            info: None,
            state: State::Connecting(Connecting {
                exchange: exchange.clone(),
                remaining: addrs.into(),
                last_error: None,
                timed_out: false,
            }),
            buf: Default::default(),
            timer: None,
            timers_armed: 0,
            h2_timer_deadline: None,
            opener: exchange.id,
        };
        // Published before `attempt_next` checks `is_done`, so an exchange
        // that ends while connecting (request timeout, cancel) aborts the
        // attempt instead of leaving its socket and permit to the connect
        // timeout, or without one to the kernel.
        exchange.attach(ConnSlot::Opening(conn.conn_ref(cx)));
        conn.attempt_next(cx);
        Box::new(conn)
    });
}

impl Conn {
    /// Starts the connect to the next address, or fails the exchange when
    /// none is left.
    fn attempt_next(&mut self, cx: &mut LoopContext<'_>) {
        loop {
            if let Some(mut transport) = self.transport.take() {
                let _ = cx.registry.deregister(transport.tcp_mut());
            }
            self.disarm_timer(cx);
            let State::Connecting(connecting) = &mut self.state else {
                return;
            };
            if connecting.exchange.is_done() {
                return self.close(cx);
            }
            let exchange = connecting.exchange.clone();
            let Some(addr) = connecting.remaining.pop_front() else {
                let error = self.no_address_left(&exchange);
                self.close(cx);
                exchange.finish_err(error);
                return;
            };
            exchange.set_remote(addr);
            exchange.listener.on_connect_attempt(addr);
            let opened = socket::connect(addr).and_then(|mut socket| {
                let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
                cx.registry.register(&mut socket, cx.token(), interest)?;
                Ok(socket)
            });
            match opened {
                Ok(socket) => {
                    self.transport = Some(Transport::Plain(socket));
                    self.remote = Some(addr);
                    let timeout = self.env().config.connect_timeout;
                    let deadline = timeout.and_then(|t| deadline_after(self.now(), t));
                    self.arm_timer(cx, CONNECT_TIMER, deadline);
                    return;
                }
                Err(error) => {
                    exchange.listener.on_connect_failure(addr, &error);
                    if let State::Connecting(connecting) = &mut self.state {
                        connecting.last_error = Some(error);
                    }
                }
            }
        }
    }

    pub(super) fn connect_timed_out(&mut self, cx: &mut LoopContext<'_>) {
        if let State::Connecting(connecting) = &mut self.state {
            connecting.timed_out = true;
            self.attempt_next(cx);
        }
    }

    pub(super) fn on_connect_ready(&mut self, cx: &mut LoopContext<'_>) {
        let Some(transport) = self.transport.as_ref() else {
            return;
        };
        let Some(result) = socket::connect_result(transport.tcp()) else {
            return; // Not connected yet: a spurious wake-up.
        };
        let State::Connecting(connecting) = &mut self.state else {
            return;
        };
        if let Err(error) = result {
            if let Some(addr) = self.remote {
                connecting
                    .exchange
                    .listener
                    .on_connect_failure(addr, &error);
            }
            connecting.last_error = Some(error);
            return self.attempt_next(cx);
        }
        let exchange = connecting.exchange.clone();
        self.disarm_timer(cx);
        let info = ConnectionInfo {
            id: cx.me().id,
            loop_index: cx.event_loop().index(),
            loop_thread: cx.event_loop().thread_id(),
            remote: self.remote.expect("set with the socket"),
        };
        self.info = Some(info.clone());
        exchange.listener.on_connect_success(&info);
        let https = self.origin.scheme == Scheme::Https;
        if exchange.is_done() {
            if https {
                // Not handshaken: of no use to anyone.
                return self.close(cx);
            }
            if self.env().config.versions == HttpVersions::Http2PriorKnowledge {
                // An HTTP/2 connection with nothing to carry: the next
                // request opens its own.
                return self.close(cx);
            }
            // The exchange ended while connecting; the connection is still good.
            self.state = State::Idle;
            return self.offer_or_close(cx, &exchange);
        }
        // Connected: the exchange's timeouts move onto this loop (a
        // same-thread arm that wakes nothing), where the handshake too runs.
        exchange.attach(ConnSlot::Ready(self.conn_ref(cx)));
        if https {
            self.start_handshake(cx, exchange, info);
        } else {
            self.begin_protocol(cx, exchange);
        }
    }

    /// The connection is open (connected, and handshaken for https): its
    /// protocol for life is chosen — what ALPN negotiated over TLS, HTTP/2
    /// over cleartext with prior knowledge, else HTTP/1.1 — and its first
    /// exchange begins.
    fn begin_protocol(&mut self, cx: &mut LoopContext<'_>, exchange: Arc<Exchange>) {
        let versions = self.env().config.versions;
        let Some(transport) = self.transport.as_ref() else {
            return;
        };
        let h2 = if self.origin.scheme == Scheme::Https {
            super::h2::negotiated(transport)
        } else {
            versions == HttpVersions::Http2PriorKnowledge
        };
        if h2 {
            return self.begin_h2(cx, exchange);
        }
        if versions == HttpVersions::Http2Only && self.origin.scheme == Scheme::Https {
            let source = io::Error::new(
                io::ErrorKind::Unsupported,
                "the server did not negotiate h2 (the client is HTTP/2 only)",
            );
            self.close(cx);
            exchange.finish_err(Error::Io {
                remote: exchange.remote_name(),
                source,
            });
            return;
        }
        if let Some(info) = &self.info {
            exchange
                .listener
                .on_protocol_negotiated(info, http::Version::HTTP_11);
        }
        self.begin_exchange(cx, exchange, false);
    }

    /// Starts TLS on the connection, just connected for `exchange`.
    fn start_handshake(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        info: ConnectionInfo,
    ) {
        exchange.listener.on_tls_handshake_attempt(&info);
        // Checked when the request was built; an error here is still no panic.
        let started = ServerName::try_from(self.origin.host.as_str())
            .map_err(|e| rustls::Error::General(format!("invalid server name: {e}")))
            .and_then(|name| {
                rustls::ClientConnection::new(self.env().tls.clone(), name.to_owned())
            });
        let tls = match started {
            Ok(tls) => tls,
            Err(source) => {
                let error = Error::tls(exchange.remote_name(), source);
                return self.fail_handshake(cx, &exchange, error);
            }
        };
        let Some(transport) = self.transport.take() else {
            return;
        };
        self.transport = Some(transport.start_tls(tls));
        let timeout = self.env().config.handshake_timeout;
        let deadline = timeout.and_then(|t| deadline_after(self.now(), t));
        self.arm_timer(cx, HANDSHAKE_TIMER, deadline);
        self.state = State::Handshaking(exchange);
        // The socket is writable: the ClientHello goes now.
        self.drive_handshake(cx);
    }

    /// Moves the handshake on, and starts the exchange once it is done.
    pub(super) fn drive_handshake(&mut self, cx: &mut LoopContext<'_>) {
        let State::Handshaking(exchange) = &self.state else {
            return;
        };
        let exchange = exchange.clone();
        if exchange.is_done() {
            // Ended by the request timeout or a cancel whose abort is still
            // in the inbox.
            return self.close(cx);
        }
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        match transport.handshake() {
            Ok(Handshake::Pending) => {}
            Ok(Handshake::Done) => {
                self.disarm_timer(cx);
                if let Some(info) = &self.info {
                    let alpn = self.transport.as_ref().and_then(Transport::alpn_protocol);
                    exchange.listener.on_tls_handshake_success(info, alpn);
                }
                // Records that came with the end of the handshake (session
                // tickets) are read there too.
                self.begin_protocol(cx, exchange);
            }
            Err(failure) => {
                let remote = exchange.remote_name();
                let error = match failure {
                    HandshakeError::Tls(source) => Error::tls(remote, source),
                    HandshakeError::Io(source) => Error::Io { remote, source },
                };
                self.fail_handshake(cx, &exchange, error);
            }
        }
    }

    pub(super) fn handshake_timed_out(&mut self, cx: &mut LoopContext<'_>) {
        let State::Handshaking(exchange) = &self.state else {
            return;
        };
        let exchange = exchange.clone();
        let duration = self.env().config.handshake_timeout.unwrap_or_default();
        let error = Error::timeout_of(TimeoutKind::Handshake, exchange.remote_name(), duration);
        self.fail_handshake(cx, &exchange, error);
    }

    fn fail_handshake(&mut self, cx: &mut LoopContext<'_>, exchange: &Exchange, error: Error) {
        if let Some(info) = &self.info {
            exchange.listener.on_tls_handshake_failure(info, &error);
        }
        self.close(cx);
        exchange.finish_err(error);
    }
}

impl Conn {
    /// Why no attempt connected: the connect timeout if the last one timed
    /// out, else what the last one failed with.
    fn no_address_left(&mut self, exchange: &Exchange) -> Error {
        let duration = self.env().config.connect_timeout.unwrap_or_default();
        let State::Connecting(connecting) = &mut self.state else {
            return Error::ClientClosed;
        };
        if connecting.timed_out {
            return Error::timeout_of(TimeoutKind::Connect, exchange.remote_name(), duration);
        }
        Error::Connect {
            remote: exchange.remote_name(),
            source: connecting.last_error.take().unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "no address to connect to")
            }),
        }
    }
}
