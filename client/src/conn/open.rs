//! Opening a connection: happy eyeballs to the first hop (the origin, or
//! its proxy), then the proxy's handshake if the route tunnels
//! ([`tunnel`](super::tunnel)), then TLS with the origin for `https://`.
//!
//! # Happy eyeballs (RFC 8305)
//!
//! The addresses are interleaved by family, starting with the family of
//! the resolver's first, each address once ([`interleave`]). One attempt
//! starts; while no attempt has connected, the next starts when the last
//! one started has had the
//! [delay](crate::ClientBuilder::happy_eyeballs_delay), or at once when
//! the last one started fails or times out (the delay is its head start,
//! which an attempt that has ended needs no more — an earlier one may
//! still be under way). Each attempt has the
//! connect timeout of its own. Every attempt's socket is registered with the
//! connection's one token, so a readiness event asks each attempt how it
//! stands (a non-blocking `getsockopt`); the first that connected wins, and
//! the others are deregistered and closed. One timer of the connection is
//! armed at the nearest of "start the next attempt" and the attempts'
//! connect deadlines. The request deadline bounds all of it, from the wheel.
//!
//! # The exchange
//!
//! It is attached as *opening* at the start, so that its end aborts the
//! attempts, and as *ready* — its timeouts re-homed onto this loop — once
//! the TCP connect to the first hop succeeds: the proxy's handshake and TLS
//! are then bounded by the request deadline from this loop, and together by
//! one handshake timeout.

use super::tunnel::SocksTargets;
use super::{Conn, ConnOwner, State, CONNECT_TIMER, HANDSHAKE_TIMER};
use crate::config::HttpVersions;
use crate::error::{Error, ProxyError, TimeoutKind};
use crate::event_loop::LoopContext;
use crate::events::ConnectionInfo;
use crate::exchange::{deadline_after, ConnSlot, Exchange};
use crate::net::socket::{self, SocketOptions};
#[cfg(feature = "rustls")]
use crate::net::take_early_records;
use crate::net::{Handshake, HandshakeError, Route, Transport};
#[cfg(feature = "rustls")]
use rustls::pki_types::ServerName;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// What a connection's socket is registered for. Urgent data too where the
/// system reports it (Linux): a read stops short at TCP urgent data with
/// in-band bytes still queued behind it, so a short read says the socket is
/// drained only on a connection that has seen none (see `ReadBuf`).
#[cfg(any(target_os = "linux", target_os = "android"))]
const INTEREST: mio::Interest = mio::Interest::READABLE
    .add(mio::Interest::WRITABLE)
    .add(mio::Interest::PRIORITY);
/// What a connection's socket is registered for.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const INTEREST: mio::Interest = mio::Interest::READABLE.add(mio::Interest::WRITABLE);

pub(super) struct Connecting {
    pub(super) exchange: Arc<Exchange>,
    /// Addresses not tried yet, in the order to try them.
    remaining: VecDeque<SocketAddr>,
    /// Attempts under way, oldest first.
    attempts: Vec<Attempt>,
    /// When the next attempt starts if none has connected by then; `None`:
    /// only when the ones under way have failed.
    next_start: Option<Instant>,
    /// How the attempt that ended last ended, and its address (the
    /// error names it: attempts overlap, the last started may not be it).
    last_failure: Option<(Failure, SocketAddr)>,
    /// For a `socks5://` proxy: the origin's addresses, resolved here.
    socks: Option<SocksTargets>,
}

impl Connecting {
    /// Connecting for `exchange` to those of `addrs` its sockets can reach
    /// (see [`reachable`]), in happy eyeballs' order, none tried yet.
    fn new(
        exchange: Arc<Exchange>,
        addrs: Vec<SocketAddr>,
        socks: Option<SocksTargets>,
        options: &SocketOptions,
    ) -> Self {
        let (addrs, last_failure) = reachable(addrs, options);
        Connecting {
            exchange,
            remaining: interleave(addrs),
            attempts: Vec::new(),
            next_start: None,
            last_failure,
            socks,
        }
    }

    /// Takes out the attempt at `index`, which failed or timed out at
    /// `now`. If it was the last one started, the next address is due now,
    /// not when its delay would have passed.
    fn end_attempt(&mut self, index: usize, now: Instant) -> Attempt {
        if index + 1 == self.attempts.len() && !self.remaining.is_empty() {
            self.next_start = Some(now);
        }
        self.attempts.remove(index)
    }
}

struct Attempt {
    socket: mio::net::TcpStream,
    addr: SocketAddr,
    deadline: Option<Instant>,
}

enum Failure {
    TimedOut,
    Failed(io::Error),
}

/// Those of `addrs` a socket set up as `options` say can connect to: with
/// a local address, those of its family alone (hyper's connector skips
/// the others too: a socket bound to an IPv4 address cannot reach an IPv6
/// one). If that leaves none, why, as the failure of the first skipped.
fn reachable(
    mut addrs: Vec<SocketAddr>,
    options: &SocketOptions,
) -> (Vec<SocketAddr>, Option<(Failure, SocketAddr)>) {
    let (Some(local), Some(&first)) = (options.local_address, addrs.first()) else {
        return (addrs, None);
    };
    addrs.retain(|addr| addr.is_ipv6() == local.is_ipv6());
    let none_left = addrs.is_empty().then(|| {
        let error = io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("no address of the family of the local address {local}"),
        );
        (Failure::Failed(error), first)
    });
    (addrs, none_left)
}

/// `addrs` in the order happy eyeballs tries them: alternating families,
/// starting with the first address's, keeping the order within each —
/// each address once, where it first comes (a resolver may answer one
/// twice, and a port filled in makes two alike: tried again, a dead one
/// would cost another connect timeout or stagger).
pub(crate) fn interleave(addrs: Vec<SocketAddr>) -> VecDeque<SocketAddr> {
    let Some(first) = addrs.first().copied() else {
        return VecDeque::new();
    };
    let (mut preferred, mut other) = (VecDeque::new(), VecDeque::new());
    for addr in addrs {
        let family = match addr.is_ipv6() == first.is_ipv6() {
            true => &mut preferred,
            false => &mut other,
        };
        // A few addresses: a look through them costs less than hashing.
        if !family.contains(&addr) {
            family.push_back(addr);
        }
    }
    let mut ordered = VecDeque::with_capacity(preferred.len() + other.len());
    loop {
        match (preferred.pop_front(), other.pop_front()) {
            (None, None) => return ordered,
            (a, b) => ordered.extend(a.into_iter().chain(b)),
        }
    }
}

/// Opens a connection for `exchange` on this loop (a task the client posts
/// to the loop its chooser picked) to `addrs`, the route's first hop;
/// `socks` are the origin's addresses for a `socks5://` proxy.
pub(crate) fn connect(
    cx: &mut LoopContext<'_>,
    owner: Arc<dyn ConnOwner>,
    exchange: Arc<Exchange>,
    addrs: Vec<SocketAddr>,
    socks: Option<SocksTargets>,
) {
    cx.add_source(|cx| {
        let created = owner.env().clock.now();
        let options = owner.env().config.socket;
        let mut conn = Conn {
            owner,
            route: Arc::new(exchange.route().clone()),
            transport: None,
            remote: None,
            created,
            idle_since: created,
            server_keep_alive: Default::default(),
            info: None,
            state: State::Connecting(Connecting::new(exchange.clone(), addrs, socks, &options)),
            buf: Default::default(),
            timer: None,
            timers_armed: 0,
            h2_timer_deadline: None,
            recv_window_raised: false,
            opener: exchange.id,
            standing: None,
        };
        conn.make_standing_for(&exchange, cx.event_loop());
        // Published before `start_attempts` checks `is_done`, so an exchange
        // that ends while connecting (request timeout, cancel) aborts the
        // attempts instead of leaving their sockets and permit to the
        // connect timeout, or without one to the kernel.
        exchange.attach(ConnSlot::Opening(conn.conn_ref(cx)));
        conn.start_attempts(cx);
        Box::new(conn)
    });
}

impl Conn {
    /// Starts the next attempt if it is time (none under way, the delay
    /// since the last start has passed, or the last one started has ended:
    /// see `Connecting::end_attempt`), fails the exchange when no
    /// attempt is under way and no address is left, and arms the timer.
    fn start_attempts(&mut self, cx: &mut LoopContext<'_>) {
        let delay = self.env().config.happy_eyeballs_delay;
        let connect_timeout = self.env().config.connect_timeout;
        let options = self.env().config.socket;
        let now = self.now();
        let State::Connecting(connecting) = &mut self.state else {
            return;
        };
        if connecting.exchange.is_done() {
            return self.close(cx);
        }
        let exchange = connecting.exchange.clone();
        let due = connecting.attempts.is_empty() || connecting.next_start.is_some_and(|t| t <= now);
        if due {
            connecting.next_start = None;
            while let Some(addr) = connecting.remaining.pop_front() {
                exchange.set_remote(addr);
                exchange.listener.on_connect_attempt(addr);
                let opened = socket::connect(addr, &options).and_then(|mut socket| {
                    cx.registry.register(&mut socket, cx.token(), INTEREST)?;
                    Ok(socket)
                });
                match opened {
                    Ok(socket) => {
                        connecting.attempts.push(Attempt {
                            socket,
                            addr,
                            deadline: connect_timeout.and_then(|t| deadline_after(now, t)),
                        });
                        let more = !connecting.remaining.is_empty();
                        if more && !delay.is_zero() {
                            connecting.next_start = deadline_after(now, delay);
                        }
                        break;
                    }
                    // Failed at once (no route for the family, say): the
                    // next address goes now.
                    Err(error) => {
                        exchange.listener.on_connect_failure(addr, &error);
                        connecting.last_failure = Some((Failure::Failed(error), addr));
                    }
                }
            }
        }
        if connecting.attempts.is_empty() {
            let error = self.no_address_left(&exchange);
            return self.opening_failed(cx, exchange, error);
        }
        let nearest = connecting
            .attempts
            .iter()
            .filter_map(|a| a.deadline)
            .chain(connecting.next_start)
            .min();
        self.arm_timer(cx, CONNECT_TIMER, nearest);
    }

    /// The connect timer: attempts past their deadline end, and the next
    /// starts if it is time.
    pub(super) fn connect_timed_out(&mut self, cx: &mut LoopContext<'_>) {
        let now = self.now();
        let State::Connecting(connecting) = &mut self.state else {
            return;
        };
        let mut index = 0;
        while index < connecting.attempts.len() {
            if connecting.attempts[index]
                .deadline
                .is_some_and(|d| d <= now)
            {
                let mut attempt = connecting.end_attempt(index, now);
                let _ = cx.registry.deregister(&mut attempt.socket);
                // Told as a failure, as a refused one is: the listener
                // heard of the attempt, and hears how it ended.
                let error = io::Error::new(io::ErrorKind::TimedOut, "the connect timeout passed");
                connecting
                    .exchange
                    .listener
                    .on_connect_failure(attempt.addr, &error);
                connecting.last_failure = Some((Failure::TimedOut, attempt.addr));
            } else {
                index += 1;
            }
        }
        self.start_attempts(cx);
    }

    /// A readiness event while connecting: asks every attempt how it
    /// stands; the first connected wins.
    pub(super) fn on_connect_ready(&mut self, cx: &mut LoopContext<'_>) {
        let now = self.now();
        let State::Connecting(connecting) = &mut self.state else {
            return;
        };
        let mut winner = None;
        let mut index = 0;
        let mut failed = false;
        while index < connecting.attempts.len() {
            match socket::connect_result(&connecting.attempts[index].socket) {
                None => index += 1,
                Some(Ok(())) => {
                    winner = Some(connecting.attempts.remove(index));
                    break;
                }
                Some(Err(error)) => {
                    let mut attempt = connecting.end_attempt(index, now);
                    let _ = cx.registry.deregister(&mut attempt.socket);
                    connecting
                        .exchange
                        .listener
                        .on_connect_failure(attempt.addr, &error);
                    connecting.last_failure = Some((Failure::Failed(error), attempt.addr));
                    failed = true;
                }
            }
        }
        let Some(winner) = winner else {
            if failed {
                // The next address goes now if the attempt that failed was
                // the last one started (see `end_attempt`).
                self.start_attempts(cx);
            }
            return;
        };
        // The others lose: closed, as RFC 8305 says.
        for mut loser in connecting.attempts.drain(..) {
            let _ = cx.registry.deregister(&mut loser.socket);
        }
        let exchange = connecting.exchange.clone();
        exchange.set_remote(winner.addr);
        self.disarm_timer(cx);
        self.transport = Some(Transport::Plain(winner.socket));
        self.remote = Some(winner.addr);
        let info = ConnectionInfo {
            id: cx.me().id,
            loop_index: cx.event_loop().index(),
            loop_thread: cx.event_loop().thread_id(),
            remote: winner.addr,
        };
        self.info = Some(info.clone());
        exchange.listener.on_connect_success(&info);
        if exchange.is_done() {
            if self.route.tls_origin().is_some() || matches!(*self.route, Route::Tunnel { .. }) {
                // Not handshaken, or not tunnelled: of no use to anyone.
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
        let socks = match &mut self.state {
            State::Connecting(connecting) => connecting.socks.take(),
            _ => None,
        };
        // Connected: the exchange's timeouts move onto this loop (a
        // same-thread arm that wakes nothing), where the proxy's handshake
        // and TLS run too.
        exchange.attach(ConnSlot::Ready(self.conn_ref(cx)));
        match &*self.route {
            Route::Tunnel { .. } => self.start_tunnel(cx, exchange, socks),
            _ => self.connected(cx, exchange, Vec::new()),
        }
    }

    /// Connects to the proxy again, to ask it for the next of the origin's
    /// addresses in `socks` (it could not reach the last one: see
    /// [`tunnel`](super::tunnel)). The same connection, so the same
    /// permit and id; the exchange stays attached to it. Its time to live
    /// counts from now, the socket it will have.
    pub(super) fn connect_again(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        socks: SocksTargets,
    ) {
        if let Some(mut transport) = self.transport.take() {
            let _ = cx.registry.deregister(transport.tcp_mut());
        }
        self.disarm_timer(cx);
        self.created = self.owner.env().clock.now();
        self.remote = None;
        self.info = None;
        self.buf = Default::default();
        let proxy = socks.proxy.clone();
        let options = self.env().config.socket;
        self.state = State::Connecting(Connecting::new(exchange, proxy, Some(socks), &options));
        self.start_attempts(cx);
    }

    /// The byte stream reaches the origin (straight, or through a tunnel
    /// whose answer left `early` bytes after it): TLS for `https://`, else
    /// the exchange starts.
    pub(super) fn connected(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        early: Vec<u8>,
    ) {
        // Without the `rustls` feature an `https://` request is refused
        // before it gets here.
        #[cfg(feature = "rustls")]
        if self.route.tls_origin().is_some() {
            return self.start_handshake(cx, exchange, early);
        }
        self.begin_protocol(cx, exchange, early);
    }

    /// The connection is open (connected, tunnelled, and handshaken for
    /// https): its protocol for life is chosen — what ALPN negotiated over
    /// TLS, HTTP/2 over cleartext with prior knowledge (not to a proxy that
    /// forwards: that one speaks HTTP/1.1), else HTTP/1.1 — and its first
    /// exchange begins. `early`: the origin's first bytes, which came with
    /// a proxy's answer (none over TLS: they were the handshake's) — the
    /// start of an HTTP/2 server's preface, or, to HTTP/1.1, a server
    /// speaking before the request, which nothing it says can answer.
    fn begin_protocol(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        early: Vec<u8>,
    ) {
        let versions = self.env().config.versions;
        let Some(transport) = self.transport.as_ref() else {
            return;
        };
        let https = self.route.tls_origin().is_some();
        let h2 = if https {
            super::h2::negotiated(transport)
        } else {
            versions == HttpVersions::Http2PriorKnowledge && !self.route.forwards()
        };
        if h2 {
            return self.begin_h2(cx, exchange, early);
        }
        if !early.is_empty() {
            let error = exchange.proxy_failure(ProxyError::MalformedAnswer(
                "bytes from the origin before any request".into(),
            ));
            self.close(cx);
            exchange.finish_err(error);
            return;
        }
        if versions == HttpVersions::Http2Only && https {
            // An opening that failed: those that waited for it fail with it,
            // rather than each open a connection that fails the same way.
            let error = exchange.http2_not_negotiated(false);
            return self.opening_failed(cx, exchange, error);
        }
        if https {
            // Requests may have waited for this one as another HTTP/2
            // connection to an origin that spoke HTTP/2 before.
            self.owner.not_shared(&self.route, self.opener);
        }
        if let Some(info) = &self.info {
            exchange
                .listener
                .on_protocol_negotiated(info, http::Version::HTTP_11);
        }
        self.begin_exchange(cx, exchange, false);
    }

    #[cfg(feature = "rustls")]
    /// Starts TLS with the origin on the connection (straight to it, or a
    /// tunnel through a proxy: the server name and the verification are
    /// the origin's). `early`: bytes the tunnel's answer came with, which
    /// are the server's first TLS records.
    fn start_handshake(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        early: Vec<u8>,
    ) {
        let Some(info) = self.info.clone() else {
            return self.close(cx);
        };
        exchange.listener.on_tls_handshake_attempt(&info);
        let host = self
            .route
            .tls_origin()
            .map(|origin| origin.host.clone())
            .unwrap_or_default();
        // Checked when the request was built; an error here is still no panic.
        let started = ServerName::try_from(&*host)
            .map_err(|e| rustls::Error::General(format!("invalid server name: {e}")))
            .and_then(|name| {
                rustls::ClientConnection::new(self.env().tls.clone(), name.to_owned())
            });
        let mut tls = match started {
            Ok(tls) => tls,
            Err(source) => {
                let error = Error::tls(exchange.remote_name(), source);
                return self.fail_handshake(cx, exchange, error);
            }
        };
        if let Err(source) = take_early_records(&mut tls, &early) {
            let error = Error::tls(exchange.remote_name(), source);
            return self.fail_handshake(cx, exchange, error);
        }
        let Some(transport) = self.transport.take() else {
            return;
        };
        self.transport = Some(transport.start_tls(tls, &early));
        // Through a proxy the handshake timeout armed for its handshake
        // bounds TLS too: one budget for CONNECT + TLS.
        if self.timer.is_none() {
            self.arm_handshake_timer(cx);
        }
        self.state = State::Handshaking(exchange);
        // The socket is writable: the ClientHello goes now.
        self.drive_handshake(cx);
    }

    pub(super) fn arm_handshake_timer(&mut self, cx: &mut LoopContext<'_>) {
        let timeout = self.env().config.handshake_timeout;
        let deadline = timeout.and_then(|t| deadline_after(self.now(), t));
        self.arm_timer(cx, HANDSHAKE_TIMER, deadline);
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
                self.begin_protocol(cx, exchange, Vec::new());
            }
            Err(failure) => {
                let remote = exchange.remote_name();
                let error = match failure {
                    // The client offered `h2` alone, and the server has
                    // nothing else in common (RFC 7301 §3.2): it does not
                    // speak HTTP/2 — as one that negotiates nothing.
                    #[cfg(feature = "rustls")]
                    HandshakeError::Tls(rustls::Error::AlertReceived(
                        rustls::AlertDescription::NoApplicationProtocol,
                    )) if self.env().config.versions == HttpVersions::Http2Only => {
                        exchange.http2_not_negotiated(true)
                    }
                    #[cfg(feature = "rustls")]
                    HandshakeError::Tls(source) => Error::tls(remote, source),
                    // Closed or reset before the handshake was done: no
                    // byte of the request went (no early data), as when
                    // the connect fails.
                    HandshakeError::Io(source) => Error::Connect { remote, source },
                };
                self.fail_handshake(cx, exchange, error);
            }
        }
    }

    /// The handshake timer: the proxy's handshake, TLS, or both took
    /// longer than the handshake timeout.
    pub(super) fn handshake_timed_out(&mut self, cx: &mut LoopContext<'_>) {
        let Some(exchange) = self.state.exchange().cloned() else {
            return;
        };
        let duration = self.env().config.handshake_timeout.unwrap_or_default();
        let remote = exchange.remote_name();
        match self.state {
            State::Handshaking(_) => {
                let error = Error::timeout_of(TimeoutKind::Handshake, remote, duration);
                self.fail_handshake(cx, exchange, error);
            }
            // The proxy's own handshake: TLS has not begun.
            _ => {
                let timeout = crate::error::Timeout { remote, duration };
                let error = exchange.proxy_failure(ProxyError::HandshakeTimeout(timeout));
                self.opening_failed(cx, exchange, error);
            }
        }
    }

    fn fail_handshake(&mut self, cx: &mut LoopContext<'_>, exchange: Arc<Exchange>, error: Error) {
        if let Some(info) = &self.info {
            exchange.listener.on_tls_handshake_failure(info, &error);
        }
        self.opening_failed(cx, exchange, error);
    }

    /// The connection could not open for `exchange`: it closes, and the
    /// exchange fails with `error` — unless its origin has a shared HTTP/2
    /// connection, where it waits for a stream instead (nothing of it was
    /// sent; it only opened a spare connection, or came before the shared
    /// one was known). Else the requests that waited for this one, to share
    /// it, fail with it too, each with a copy of `error` — taken before the
    /// close, whose release would send them again, one of them to open the
    /// next (as it does when a connection closes because its request ended).
    pub(super) fn opening_failed(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        error: Error,
    ) {
        let waiting = self.owner.take_opening(&self.route, self.opener);
        self.close(cx);
        self.owner
            .opening_failed(&self.route, exchange, error, waiting);
    }

    /// Closes the attempts still under way (the connection closes while
    /// connecting).
    pub(super) fn close_attempts(&mut self, cx: &mut LoopContext<'_>) {
        if let State::Connecting(connecting) = &mut self.state {
            for mut attempt in connecting.attempts.drain(..) {
                let _ = cx.registry.deregister(&mut attempt.socket);
            }
        }
    }

    /// Why no attempt connected: the connect timeout if the last one timed
    /// out, else what the last one failed with — for a proxy, an error
    /// naming the proxy (as [`Error::Proxy`], a timeout too).
    fn no_address_left(&mut self, exchange: &Exchange) -> Error {
        let duration = self.env().config.connect_timeout.unwrap_or_default();
        let State::Connecting(connecting) = &mut self.state else {
            return Error::ClientClosed;
        };
        let last = connecting.last_failure.take();
        if let Some((_, addr)) = &last {
            exchange.set_remote(*addr);
        }
        let via_proxy = self.route.proxy().is_some();
        let source = match last {
            Some((Failure::TimedOut, _)) if via_proxy => {
                let timeout = crate::error::Timeout {
                    remote: exchange.remote_name(),
                    duration,
                };
                return exchange.proxy_failure(ProxyError::ConnectTimeout(timeout));
            }
            Some((Failure::TimedOut, _)) => {
                return Error::timeout_of(TimeoutKind::Connect, exchange.remote_name(), duration)
            }
            Some((Failure::Failed(error), _)) => error,
            None => io::Error::new(io::ErrorKind::NotFound, "no address to connect to"),
        };
        match via_proxy {
            true => exchange.proxy_failure(ProxyError::Connect(source)),
            false => Error::Connect {
                remote: exchange.remote_name(),
                source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::interleave;
    use std::net::SocketAddr;

    #[test]
    fn addresses_alternate_families_from_the_first_keeping_their_order() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let addrs = vec![
            a("[::1]:80"),
            a("[::2]:80"),
            a("[::3]:80"),
            a("10.0.0.1:80"),
            a("10.0.0.2:80"),
        ];
        let got: Vec<_> = interleave(addrs).into_iter().collect();
        assert_eq!(
            got,
            vec![
                a("[::1]:80"),
                a("10.0.0.1:80"),
                a("[::2]:80"),
                a("10.0.0.2:80"),
                a("[::3]:80")
            ]
        );
        let v4_first = vec![a("10.0.0.1:80"), a("[::1]:80"), a("10.0.0.2:80")];
        let got: Vec<_> = interleave(v4_first).into_iter().collect();
        assert_eq!(got, vec![a("10.0.0.1:80"), a("[::1]:80"), a("10.0.0.2:80")]);
        assert!(interleave(Vec::new()).is_empty());
        // Each address once, where it first comes.
        let twice = vec![
            a("[::1]:80"),
            a("10.0.0.1:80"),
            a("[::1]:80"),
            a("10.0.0.1:80"),
            a("[::1]:81"),
        ];
        let got: Vec<_> = interleave(twice).into_iter().collect();
        assert_eq!(got, vec![a("[::1]:80"), a("10.0.0.1:80"), a("[::1]:81")]);
    }
}
