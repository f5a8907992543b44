//! [`ClientBuilder`]: how a client is configured.

use crate::config::ClientConfig;
use crate::event_loop::EventLoopGroup;
use crate::events::EventListener;
use crate::h1::Limits;
use crate::policy::{redirect, CookieStore, Policies};
use http::header::{CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::HeaderValue;
use std::sync::Arc;
use std::time::Duration;
use tickless_timer::{HashedWheelTimer, SharedClock};

/// A duration option where zero means "none".
fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

/// An HTTP/2 receive window as set: within what flow control can use
/// (see [`MIN_HTTP2_WINDOW`](crate::config::MIN_HTTP2_WINDOW)) and what
/// HTTP/2 allows.
fn http2_window(size: u32) -> u32 {
    size.clamp(
        crate::config::MIN_HTTP2_WINDOW,
        crate::config::MAX_HTTP2_WINDOW,
    )
}

/// Builds a [`Client`](crate::Client).
///
/// A timeout or time limit set to zero means "none": no timeout, no limit.
/// The durations that are not bounds say what zero does on their own:
/// [`happy_eyeballs_delay`](Self::happy_eyeballs_delay),
/// [`expect_continue_timeout`](Self::expect_continue_timeout) (zero: the
/// body does not wait), [`event_loop_spin`](Self::event_loop_spin) and
/// [`wheel_tick`](Self::wheel_tick).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = tickless_client::Client::builder()
///     .request_timeout(Duration::from_millis(20))
///     .use_event_loop_timeouts(true)
///     .build()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use]
#[derive(Default)]
pub struct ClientBuilder {
    config: ClientConfig,
    policies: Policies,
}

impl ClientBuilder {
    // --- timeouts ---

    /// Bound on a whole exchange, from submission to the last body byte:
    /// waiting for a connection, resolution, connect, writing and reading —
    /// the body included, however slowly it is read. The deadline is fixed
    /// when the request is submitted. Default 60 s; zero disables it. To
    /// download something large, give that request a longer timeout, or
    /// none ([`RequestBuilder::request_timeout`](crate::RequestBuilder::request_timeout)
    /// with zero), and let the [read timeout](Self::read_timeout) catch a
    /// server that stops sending.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.config.request_timeout = nonzero(timeout);
        self
    }

    /// Bound on the server's silence: the time between two reads (or
    /// between sending the request — or its head, while its body waits
    /// for `100 Continue` — and the first read; an answer whose head comes
    /// before the request is all sent starts it at its head; over HTTP/2,
    /// one that comes whole then stops it, nothing being left to read, and
    /// the upload goes on to its end, bounded by the
    /// [write timeout](Self::write_timeout)).
    /// It runs only while the client has room for the body's bytes and
    /// waits for them (see [`body_window`](Self::body_window)). Default
    /// 60 s; zero disables it.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.config.read_timeout = nonzero(timeout);
        self
    }

    /// Bound on the server not taking the request: how long writing it
    /// may wait, its socket full (over HTTP/2: the server's flow-control
    /// window spent), for the server to take more. A socket tells of room
    /// only once a share of its buffer is free, so before the timeout
    /// fails, the connection tries the socket once more: it fires a few
    /// milliseconds after its period, never before — unless that try
    /// finds room the socket did not tell of: the server's side took a
    /// little more of the request meanwhile (its kernel may, though the
    /// server reads nothing), progress dated when the try sees it, and
    /// the timeout fires a period after that — for a server that has
    /// stopped reading, about twice its period after the last progress
    /// the socket told of. It
    /// runs only while the request waits on the server — not while a
    /// streamed body's source has nothing yet, nor while the body waits
    /// for `100 Continue`. A server that stops reading an upload fails it
    /// with [`Error::WriteTimeout`](crate::Error::WriteTimeout), though
    /// the request timeout be off — but over HTTP/2 an answer that has come
    /// whole before the upload's end stands: the upload alone stops
    /// there, its stream reset (RFC 9113 §8.1: such an answer does not
    /// depend on the rest). Default 60 s; zero disables it.
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.config.write_timeout = nonzero(timeout);
        self
    }

    /// Bound on each TCP connect attempt. Default 5 s; zero disables it
    /// (the request timeout still bounds it).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = nonzero(timeout);
        self
    }

    /// Bound on each TLS handshake, and on a proxy's own (its CONNECT
    /// answer, the SOCKS5 exchange), from the TCP connect to the end of
    /// the handshake. Default 10 s; zero disables it (the request timeout
    /// still bounds it). Armed on the connection's loop in both timeout
    /// modes; it fails the exchange with [`Error::HandshakeTimeout`](crate::Error::HandshakeTimeout),
    /// or, if the proxy's handshake had not ended,
    /// [`Error::Proxy`](crate::Error::Proxy) with
    /// [`ProxyError::HandshakeTimeout`](crate::ProxyError::HandshakeTimeout).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.config.handshake_timeout = nonzero(timeout);
        self
    }

    /// Arms request and read timeouts on the event loop that owns the
    /// exchange's connection instead of on the client's hashed-wheel timer.
    /// Off by default.
    ///
    /// **The trade-off.** A wheel rounds every deadline up to its next tick
    /// (100 ms by default) and runs every expiry of the whole client on one
    /// thread, so short deadlines fire late and a burst of expiries queues
    /// behind itself. A loop keeps a deadline heap and wakes exactly for its
    /// nearest deadline (a timerfd on Linux), so a 20 ms timeout fires at
    /// 20 ms. The price: the expiry — and so whatever the completion wakes
    /// or calls, an [`EventListener`] method, a waker that runs the task
    /// inline — then runs on an I/O thread, and blocking there stalls every
    /// connection of that loop. Keep such code short, or hand the work to
    /// another thread.
    ///
    /// **Where a timeout is armed when this is on.** Always the loop that
    /// owns the exchange's connection, never one picked from the group's
    /// chooser (that would be the wrong loop, and would shift where new
    /// connections land). An exchange that reuses a pooled connection arms
    /// on that connection's loop at once. An exchange that has to connect
    /// has no loop yet, so its request timeout is armed on the wheel — where
    /// it also bounds resolution and the connect — and moved onto the new
    /// connection's loop when the connect succeeds, keeping its absolute
    /// deadline; its read timeout is armed there too. A loop that is
    /// shutting down rejects the arm, and the timeout falls back to the
    /// wheel. The pool cleaner stays on the wheel either way.
    ///
    /// **The wheel in this mode** ticks every 250 µs unless
    /// [`wheel_tick`](Self::wheel_tick) says otherwise, so a deadline that
    /// comes while its connect is still under way (a burst of connects can
    /// keep the loops busy for longer than a short timeout) fires at most
    /// about that late rather than up to 100 ms. The wheel's thread wakes
    /// only for ticks that hold an entry: the finer tick costs wake-ups
    /// while connects are under way, and while the client is idle about one
    /// per turn of the wheel (512 ticks: 128 ms) for the pool cleaner's
    /// entry.
    ///
    /// **The loops in this mode** are pinned to a CPU each when there is
    /// one per CPU, unless [`pin_event_loops`](Self::pin_event_loops) says
    /// otherwise.
    pub fn use_event_loop_timeouts(mut self, enabled: bool) -> Self {
        self.config.use_event_loop_timeouts = enabled;
        self
    }

    /// In event-loop mode, how long before a loop's nearest deadline it stops
    /// sleeping and busy-polls (default zero: never). Trades a core for the
    /// last stretch before a timeout against the OS's wake-up lateness; see
    /// [`EventLoopGroupBuilder::spin_before_deadline`](crate::event_loop::EventLoopGroupBuilder::spin_before_deadline).
    /// Ignored when a group is given with [`event_loop_group`](Self::event_loop_group).
    pub fn event_loop_spin(mut self, spin: Duration) -> Self {
        self.config.event_loop_spin = spin;
        self
    }

    /// Pins each event loop's thread to a CPU of its own (`true`), or
    /// leaves the loops where the OS puts them (`false`). By default, with
    /// [`use_event_loop_timeouts`](Self::use_event_loop_timeouts), the loops
    /// are pinned when there is one per CPU the process may use (the
    /// default count) and no other client's loops in the process are: two
    /// loops left to share one CPU while another idles take turns on it in
    /// a burst of timeouts on both, and one of them fires late by whole
    /// scheduler slices. Without it (timeouts on the wheel) they are not
    /// pinned by default: a pinned loop cannot move off a CPU that
    /// something else keeps busy, which cost throughput in some runs here
    /// (HTTP/2, 64 in flight, against a server sharing the two cores). See
    /// [`EventLoopGroupBuilder::pin_to_cpus`](crate::event_loop::EventLoopGroupBuilder::pin_to_cpus)
    /// for the rule and its reasons, and
    /// [`without_pinning`](crate::event_loop::without_pinning) for threads
    /// your code starts on a loop. Ignored when a group is given with
    /// [`event_loop_group`](Self::event_loop_group).
    pub fn pin_event_loops(mut self, pin: bool) -> Self {
        self.config.pin_event_loops = Some(pin);
        self
    }

    /// Tick of the client's hashed-wheel timer: default 100 ms, or 250 µs
    /// with [`use_event_loop_timeouts`](Self::use_event_loop_timeouts) (see
    /// there); from 1 µs to [`MAX_TICK`](tickless_timer::MAX_TICK) (1 s),
    /// a tick outside taken as the nearer end (zero as 1 µs).
    /// Ignored when a timer is given with [`timer`](Self::timer).
    pub fn wheel_tick(mut self, tick: Duration) -> Self {
        self.config.wheel_tick = Some(tick);
        self
    }

    /// Buckets of the client's hashed-wheel timer (default 512; rounded up to a
    /// power of two, at most [`MAX_WHEEL_SIZE`](tickless_timer::MAX_WHEEL_SIZE)).
    pub fn wheel_size(mut self, size: usize) -> Self {
        self.config.wheel_size = size;
        self
    }

    // --- connections and pool ---

    /// Keep connections open for reuse (default true). Off, each request
    /// has a connection of its own, closed once it is done: over HTTP/1.1
    /// it says `Connection: close`, and an HTTP/2 connection is not shared
    /// with the origin's other requests.
    pub fn keep_alive(mut self, enabled: bool) -> Self {
        self.config.keep_alive = enabled;
        self
    }

    /// Most connections open at once, all hosts together (default
    /// unlimited; zero means unlimited). A request beyond it waits for a
    /// connection, bounded by its request timeout; an idle connection (an
    /// HTTP/1.1 one in the pool, an HTTP/2 one with no stream) is closed
    /// to make room for it. A response's unread body holds its connection
    /// against this limit too (see
    /// [`max_connections_per_host`](Self::max_connections_per_host)).
    pub fn max_connections(mut self, max: usize) -> Self {
        self.config.max_connections = (max > 0).then_some(max);
        self
    }

    /// Most connections open at once to one host (default unlimited; zero
    /// means unlimited): the connections a request could go on, counted
    /// together. A request beyond it waits for one of them, bounded by its
    /// request timeout.
    ///
    /// The host is the one the connection is for:
    ///
    /// * straight: the origin (scheme, host and port);
    /// * through a tunnel (a `CONNECT` through an HTTP proxy, for
    ///   `https://` requests, or SOCKS5): the origin through that proxy,
    ///   counted apart from the origin's direct connections;
    /// * plain `http://` requests through an HTTP [`Proxy`](crate::Proxy),
    ///   which forwards them: **the proxy**. Such a connection carries
    ///   requests for any origin (the pool keys it by proxy, so one serves
    ///   them all), so the limit bounds the connections to the proxy, every
    ///   origin together: with a limit of 2, requests to three origins
    ///   through one such proxy have two connections at once, not six.
    ///   curl's connection cache counts such connections for the proxy too.
    ///
    /// Under a limit, an HTTP/1.1 response whose body is larger than the
    /// [`body_window`](Self::body_window) holds its connection until the
    /// body is read or dropped: a caller that waits on a later request
    /// before reading an earlier body can wait to its request timeout
    /// (the README's *Streaming bodies* says more, and how a small
    /// redirect ahead can lose its connection so).
    pub fn max_connections_per_host(mut self, max: usize) -> Self {
        self.config.max_connections_per_host = (max > 0).then_some(max);
        self
    }

    /// How long a connection may sit idle in the pool (default 60 s). An
    /// HTTP/1.1 server that announces a shorter one (`Keep-Alive:
    /// timeout=5`) has its connections kept 1 s less than it says, so that
    /// no request races its close; `timeout=1` or `max=0` (no more
    /// requests) keeps them out of the pool, and `max=N` lets a connection
    /// carry no more than `N` further requests. Zero sets no limit of the
    /// client's: an idle connection is kept until its server closes it (or
    /// says how long it may, as above).
    pub fn pooled_connection_idle_timeout(mut self, timeout: Duration) -> Self {
        self.config.pooled_connection_idle_timeout = nonzero(timeout);
        self
    }

    /// How long a connection may be reused after it opened (default: no limit).
    pub fn connection_ttl(mut self, ttl: Duration) -> Self {
        self.config.connection_ttl = nonzero(ttl);
        self
    }

    // --- the network path ---

    /// Sends requests through `proxy` (see [`Proxy`](crate::Proxy) for its
    /// URLs and credentials). Repeat to add several: the first that serves
    /// a request (by scheme, and not bypassed by its
    /// [`no_proxy`](crate::Proxy::no_proxy) list) takes it; none serving it
    /// means straight to the origin. Adding one turns the proxy
    /// environment variables off, as in reqwest.
    pub fn proxy(mut self, proxy: crate::Proxy) -> Self {
        self.config.proxies.push(proxy);
        self
    }

    /// No proxy: requests go straight to their origin. It drops the
    /// proxies given so far with [`proxy`](Self::proxy), as reqwest's does
    /// (one given after it is used), and the proxy environment variables
    /// are not read. Unless this is called, or a proxy is given, a client
    /// reads them when it is built, with curl's rules (which reqwest mostly
    /// shares):
    ///
    /// * `http_proxy` (or `HTTP_PROXY`) for `http://` requests,
    ///   `https_proxy` (or `HTTPS_PROXY`) for `https://` ones, and
    ///   `all_proxy` (or `ALL_PROXY`) for those without their own; the lower
    ///   case name wins when both are set;
    /// * `no_proxy` (or `NO_PROXY`): hosts that go straight, in the syntax of
    ///   [`Proxy::no_proxy`](crate::Proxy::no_proxy);
    /// * `HTTP_PROXY` (upper case) is ignored when `REQUEST_METHOD` is set:
    ///   in a CGI program it is the request's `Proxy:` header, which the
    ///   client's caller controls ("httpoxy"), as curl does; with the
    ///   feature `tracing`, a `warn` event says so when the client is built;
    /// * a value that is not a proxy URL (`HTTPS_PROXY=http://[bad`) fails
    ///   the requests it would take, with
    ///   [`InvalidRequest::ProxyVariable`](crate::InvalidRequest::ProxyVariable)
    ///   naming the variable, as curl does (reqwest ignores it): they do not
    ///   go straight to their origin, past a proxy that may be the only way
    ///   out allowed, nor through `all_proxy`. Requests it would not take (of
    ///   the other scheme, or to a `no_proxy` host) go as they would without it;
    /// * a value that is not Unicode is set all the same, read with U+FFFD
    ///   for what is not UTF-8 (so a proxy host so spelt is no proxy URL).
    pub fn no_proxy(mut self) -> Self {
        self.config.proxies.clear();
        self.config.env_proxies = false;
        self
    }

    /// Tests: the default resolver's threads do `lookup` instead of
    /// `getaddrinfo`.
    #[cfg(test)]
    pub(crate) fn system_lookup(mut self, lookup: Arc<crate::net::Lookup>) -> Self {
        self.config.system_lookup = Some(lookup);
        self
    }

    /// Resolves host names with `resolver` instead of the default (the
    /// operating system's `getaddrinfo` on a bounded pool of threads of the
    /// client's own, where a slow name holds up no other).
    pub fn resolver(mut self, resolver: Arc<dyn crate::Resolve>) -> Self {
        self.config.resolver = Some(resolver);
        self
    }

    /// Connects to `addrs` for `host` without resolving it (reqwest's
    /// `resolve_to_addrs`, curl's `--resolve`): for the origin's host or a
    /// proxy's. An address with port 0 takes the port of the request (or
    /// the proxy), keeping the rest of it (an IPv6 scope id); any other
    /// port is used as given. Hosts compare as URLs name them: names
    /// case-insensitively and with or without a final dot (`example.com.`
    /// is `example.com`), a name that is not ASCII as it is or in IDNA's
    /// ASCII form (`bücher.test` is `xn--bcher-kva.test`, the name a
    /// request's URL goes to), an IP address in any spelling its URL takes, an
    /// IPv6 one with or without brackets (`[2001:db8::1]`) — an IP literal
    /// is overridden too, as by curl. An empty list removes the override. An origin
    /// whose name the proxy resolves (through an HTTP proxy, or `socks5h://`)
    /// is not looked up here, so its override is not used either: the proxy
    /// is given the name, as curl gives it. An override for one port of
    /// the host ([`resolve_port`](Self::resolve_port)) wins over this one at
    /// that port. A `host` with a port (`example.test:443`, `[::1]:443`),
    /// which no request's host would match, makes [`build`](Self::build)
    /// fail with `InvalidInput`: the port goes to
    /// [`resolve_port`](Self::resolve_port).
    pub fn resolve(self, host: &str, addrs: &[std::net::SocketAddr]) -> Self {
        self.resolve_override(host, None, addrs)
    }

    /// [`resolve`](Self::resolve) for `host` at `port` only, as curl's
    /// `--resolve host:port:addr` is: a connection to `host` at that port
    /// (the origin's, or a proxy's) goes to `addrs`, one at any other port
    /// is resolved as without it (or by the host's override for every
    /// port, which this one wins over at `port`). An address with port 0
    /// takes `port`; any other port is used as given. Hosts compare as for
    /// [`resolve`](Self::resolve), and a `host` with a port makes
    /// [`build`](Self::build) fail as there; an empty list removes the
    /// override for that port.
    ///
    /// ```
    /// # use std::net::SocketAddr;
    /// // example.test:443 goes to a local server; example.test at any other
    /// // port is looked up as usual.
    /// let client = tickless_client::Client::builder()
    ///     .resolve_port("example.test", 443, &[SocketAddr::from(([127, 0, 0, 1], 8443))])
    ///     .build()?;
    /// # client.close();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn resolve_port(self, host: &str, port: u16, addrs: &[std::net::SocketAddr]) -> Self {
        self.resolve_override(host, Some(port), addrs)
    }

    /// Sets (or, with no address, removes) the override of `host` at
    /// `port` (`None`: every port).
    fn resolve_override(
        mut self,
        host: &str,
        port: Option<u16>,
        addrs: &[std::net::SocketAddr],
    ) -> Self {
        let key = (crate::net::override_key(host), port);
        if addrs.is_empty() {
            self.config.resolve_overrides.remove(&key);
        } else {
            self.config.resolve_overrides.insert(key, addrs.to_vec());
        }
        self
    }

    /// Happy eyeballs (RFC 8305): how long a connect attempt has before
    /// the next address is tried beside it (default 250 ms). Addresses are
    /// tried alternating IPv6 and IPv4, starting with the resolver's first;
    /// when the last one started fails, the next starts at once (an
    /// earlier one may still be under way); the first to connect
    /// wins and the others are closed. The [connect
    /// timeout](Self::connect_timeout) bounds each attempt, and the request
    /// timeout all of them. Zero tries one address at a time.
    pub fn happy_eyeballs_delay(mut self, delay: Duration) -> Self {
        self.config.happy_eyeballs_delay = delay;
        self
    }

    /// Binds every outgoing socket to `address` before it connects
    /// (reqwest's `local_address`, curl's `--interface ADDR`): the source
    /// address a server, or the proxy, sees (default: the system picks
    /// it). The port stays the system's pick. Only the addresses of its
    /// family are tried (hyper's connector does the same): an IPv4
    /// address skips a host's IPv6 addresses, and an IPv6 one its IPv4
    /// addresses; a host with none of its family fails the request with
    /// [`Error::Connect`](crate::Error::Connect) (through a proxy,
    /// [`ProxyError::Connect`](crate::ProxyError::Connect)) of kind
    /// `AddrNotAvailable`, naming the local address. An address the
    /// machine does not have fails each connect with the system's error
    /// (`AddrNotAvailable` on Linux). A proxy's socket is bound the same
    /// way; a SOCKS5 or HTTP proxy's own connection to the origin is not
    /// the client's to bind. It does not choose a network interface
    /// (`SO_BINDTODEVICE`) nor change routing: the system routes by
    /// destination as usual.
    pub fn local_address(mut self, address: std::net::IpAddr) -> Self {
        self.config.socket.local_address = Some(address);
        self
    }

    /// Turns TCP keepalive on for every socket (reqwest's `tcp_keepalive`,
    /// curl's `--keepalive-time`): once a connection has been idle for
    /// `idle`, the system sends probes, and ends a connection whose peer
    /// answers none with an error (`ETIMEDOUT`) — a peer that vanished
    /// without a word (a host powered off, a NAT that forgot the
    /// connection) is found without data to send, and the probes keep a
    /// NAT's mapping of an idle connection alive. The interval between
    /// probes and how many go unanswered before the connection ends are
    /// the system's (on Linux 75 s and 9). `idle` goes to the
    /// system in whole seconds: a fraction is rounded up, and more than
    /// 32767 s (about 9 h, the most Linux takes) is taken as that. Default
    /// off, as in hyper's `HttpConnector` — reqwest turns it on by
    /// default (15 s idle, 15 s between 3 probes, and on Linux a
    /// `TCP_USER_TIMEOUT` of 30 s); zero turns it off. It says nothing of HTTP keep-alive (see
    /// [`keep_alive`](Self::keep_alive)), nor of HTTP/2's PINGs (see
    /// [`http2_keep_alive_interval`](Self::http2_keep_alive_interval)).
    pub fn tcp_keepalive(mut self, idle: Duration) -> Self {
        self.config.socket.tcp_keepalive = nonzero(idle).map(crate::net::socket::keepalive_idle);
        self
    }

    // --- TLS ---

    #[cfg(feature = "rustls")]
    /// Trusts `certificate` as a root, besides the default roots (or those
    /// given to [`tls_roots`](Self::tls_roots)): a PEM text (every
    /// `CERTIFICATE` block in it is added) or one DER certificate. Repeat
    /// to add several. A certificate that does not parse makes
    /// [`build`](Self::build) fail with `InvalidInput`.
    pub fn add_root_certificate(mut self, certificate: impl AsRef<[u8]>) -> Self {
        self.config
            .tls
            .extra_roots
            .push(certificate.as_ref().to_vec());
        self
    }

    #[cfg(feature = "rustls")]
    /// Replaces the default roots (Mozilla's, from `webpki-roots`) with
    /// `roots`; an empty store trusts only what
    /// [`add_root_certificate`](Self::add_root_certificate) adds.
    pub fn tls_roots(mut self, roots: rustls::RootCertStore) -> Self {
        self.config.tls.roots = Some(roots);
        self
    }

    /// Verifies server certificates with the operating system's verifier
    /// (and its roots, plus those of
    /// [`add_root_certificate`](Self::add_root_certificate)) instead of
    /// webpki and the bundled roots; [`tls_roots`](Self::tls_roots) is then
    /// ignored. Off by default. Needs the cargo feature `platform-verifier`.
    #[cfg(feature = "platform-verifier")]
    pub fn platform_verifier(mut self, enabled: bool) -> Self {
        self.config.tls.platform_verifier = enabled;
        self
    }

    #[cfg(feature = "rustls")]
    /// **Dangerous**: accepts any server certificate — unknown issuer,
    /// expired, for another host, self-signed. Anyone on the path can then
    /// read and change the traffic. For tests and lab setups only; off by
    /// default. Prefer [`add_root_certificate`](Self::add_root_certificate)
    /// with the lab's CA.
    pub fn danger_accept_invalid_certs(mut self, accept: bool) -> Self {
        self.config.tls.danger_accept_invalid_certs = accept;
        self
    }

    #[cfg(feature = "rustls")]
    /// Authenticates the client to servers that ask for a certificate
    /// (mutual TLS): `chain` is a PEM text of the client's certificate
    /// first, then any intermediates; `key` a PEM text of its private key
    /// (PKCS#8, PKCS#1 RSA or SEC1 EC). Either not parsing, or the key not
    /// fitting the crypto provider, makes [`build`](Self::build) fail with
    /// `InvalidInput`.
    pub fn client_identity_pem(mut self, chain: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Self {
        self.config.tls.identity = Some((chain.as_ref().to_vec(), key.as_ref().to_vec()));
        self
    }

    #[cfg(feature = "rustls")]
    /// The oldest TLS version offered (default TLS 1.2, the oldest rustls
    /// speaks). A range with no version in it makes [`build`](Self::build)
    /// fail with `InvalidInput`.
    pub fn min_tls_version(mut self, version: crate::TlsVersion) -> Self {
        self.config.tls.min_version = Some(version);
        self
    }

    #[cfg(feature = "rustls")]
    /// The newest TLS version offered (default TLS 1.3).
    pub fn max_tls_version(mut self, version: crate::TlsVersion) -> Self {
        self.config.tls.max_version = Some(version);
        self
    }

    #[cfg(feature = "rustls")]
    /// Resumes TLS sessions with servers it has met (TLS 1.3 tickets, TLS
    /// 1.2 session ids and tickets, from rustls' in-memory cache of 256
    /// sessions): a reconnect then skips the certificate exchange and its
    /// verification (see the README for what that saves). On by default.
    pub fn tls_session_resumption(mut self, enabled: bool) -> Self {
        self.config.tls.resumption = enabled;
        self
    }

    #[cfg(feature = "rustls")]
    /// The escape hatch: TLS with `config`, made by the caller, instead of
    /// one built from the options above (roots, verification, identity,
    /// versions and resumption are then the config's; those options are
    /// ignored). Its ALPN list is replaced by the protocol layer's (from
    /// the client's HTTP versions), since the connection must speak what
    /// the server picks from it, and a pick from outside the list fails
    /// the handshake (`check_selected_alpn` is set).
    pub fn tls_config(mut self, config: Arc<rustls::ClientConfig>) -> Self {
        self.config.tls.custom = Some(config);
        self
    }

    // --- bodies ---

    /// How many bytes of a response body the connection's loop reads ahead
    /// of the body's reader (default 256 KiB). When that much waits unread,
    /// the loop stops reading the socket — and the read timeout stops with
    /// it, since a reader that does not read is not a silent server — until
    /// the reader has taken half of it. Memory per response stays about
    /// this, whatever the body's size. At least 1 byte.
    pub fn body_window(mut self, bytes: usize) -> Self {
        self.config.body_window = bytes.max(1);
        self
    }

    /// How long a request body waits for the server's `100 Continue` when
    /// the request says `Expect: 100-continue` (default 1 s, as curl): then
    /// it is sent anyway. Zero: it does not wait. However long the delay,
    /// the [read timeout](Self::read_timeout) bounds the server's silence
    /// meanwhile. A final answer that comes
    /// first is the response, and the body is never sent (nor the
    /// connection reused) — but a `417 Expectation Failed` sends the
    /// request again at once, on another connection, without the `Expect`
    /// (RFC 9110 §10.1.1; once per request), its body whole: one in memory
    /// or a regular file's (read again from where it began), or another
    /// streamed one (an [`Upload`](crate::Upload) from a reader or an
    /// async body), which had waited and not begun to go — the same
    /// source, untouched. To such a streamed body that began to go (the
    /// delay passed before the 417 came) the 417 is the response. That repeat is
    /// no retry: no attempt of a [retry policy](Self::retry) is counted, no
    /// [budget](Self::retry_budget) spent, and
    /// [`EventListener::on_retry`] is not
    /// told. Likewise a redirect that keeps the body (a `307`, a `308`)
    /// and comes first is followed (see [redirects](crate::redirect)) with
    /// such a streamed body whole, the same source; to one that began to go
    /// it is the response. Over HTTP/2 the `Expect` is not sent and the
    /// body goes at once, without waiting.
    pub fn expect_continue_timeout(mut self, timeout: Duration) -> Self {
        self.config.expect_continue_timeout = nonzero(timeout);
        self
    }

    // --- protocols ---

    /// Speaks HTTP/1.1 only: the TLS handshake offers `http/1.1` alone
    /// (ALPN). By default it offers `h2` and `http/1.1`, and the server picks.
    pub fn http1_only(mut self) -> Self {
        self.config.versions = crate::config::HttpVersions::Http1Only;
        self
    }

    /// Speaks HTTP/2 only over TLS: the handshake offers `h2` alone, and a
    /// server that does not pick it fails the request with
    /// [`Error::Http2NotNegotiated`](crate::Error::Http2NotNegotiated) —
    /// one that offers other protocols (`http/1.1`) refuses the handshake
    /// (`handshake_refused`), one that negotiates none finishes it — before
    /// any byte of the request is sent
    /// ([`is_unprocessed`](crate::Error::is_unprocessed): another client,
    /// one that speaks HTTP/1.1, may send it whatever its method). It is not
    /// retried by a [retry policy](Self::retry): the next connection would
    /// meet the same. Cleartext `http://` stays HTTP/1.1 unless
    /// [`http2_prior_knowledge`](Self::http2_prior_knowledge).
    ///
    /// ```no_run
    /// use tickless_client::Error;
    ///
    /// let client = tickless_client::Client::builder().http2_only().build()?;
    /// match client.get("https://example.com/").send().wait() {
    ///     Ok(response) => assert_eq!(response.version(), http::Version::HTTP_2),
    ///     Err(Error::Http2NotNegotiated { remote, .. }) => {
    ///         eprintln!("{remote} does not speak HTTP/2")
    ///     }
    ///     Err(other) => return Err(other.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn http2_only(mut self) -> Self {
        self.config.versions = crate::config::HttpVersions::Http2Only;
        self
    }

    /// Speaks HTTP/2 over cleartext `http://` from the first byte (prior
    /// knowledge, RFC 9113 §3.3): for servers known to speak it. There is no
    /// `h2c` upgrade. `https://` negotiates as by default.
    ///
    /// Requests to one origin become streams of one connection, in flight
    /// together:
    ///
    #[cfg_attr(feature = "http2", doc = "```")]
    #[cfg_attr(not(feature = "http2"), doc = "```ignore")]
    /// # let url = tickless_client::doc_support::serve_h2("hello");
    /// let client = tickless_client::Client::builder()
    ///     .http2_prior_knowledge()
    ///     .use_event_loop_timeouts(true)
    ///     .build()?;
    /// let in_flight: Vec<_> = (0..8).map(|_| client.get(&url).send()).collect();
    /// for response in in_flight {
    ///     let response = response.wait()?;
    ///     assert_eq!(response.version(), http::Version::HTTP_2);
    ///     assert_eq!(response.text().wait()?, "hello");
    /// }
    /// let stats = client.stats();
    /// assert_eq!(stats.open_connections, 1);
    /// assert_eq!(stats.http2_streams_opened, 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn http2_prior_knowledge(mut self) -> Self {
        self.config.versions = crate::config::HttpVersions::Http2PriorKnowledge;
        self
    }

    /// At most this many HTTP/2 streams in flight on one connection (the
    /// server's `SETTINGS_MAX_CONCURRENT_STREAMS` bounds it too); the
    /// requests past it wait for a stream. At least 1 (zero is taken as 1,
    /// not as no limit). Default: the server's limit.
    pub fn http2_max_concurrent_streams(mut self, max: usize) -> Self {
        self.config.http2.max_concurrent_streams = Some(max.max(1));
        self
    }

    /// The id of each HTTP/2 connection's first stream, for the tests of a
    /// connection that runs out of stream ids.
    #[cfg(test)]
    pub(crate) fn http2_first_stream_id(mut self, id: u32) -> Self {
        self.config.http2.first_stream_id = Some(id);
        self
    }

    /// At most this many HTTP/2 connections per origin (at least 1; the
    /// default is 1). Requests to an origin share its connections as
    /// streams; when every one of them is at its stream limit (the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, or
    /// [`http2_max_concurrent_streams`](Self::http2_max_concurrent_streams))
    /// and fewer than `max` are open, another opens and is shared too; at
    /// `max`, requests wait for a stream. A request goes to the connection
    /// with the most streams free, and stays on the one it was given while
    /// it waits. If another cannot open (refused, TLS failed, timed out),
    /// the requests that waited for it — the one that opened it too:
    /// nothing of it was sent — wait for a stream on the open ones. The pool's
    /// [`max_connections_per_host`](Self::max_connections_per_host) and
    /// [`max_connections`](Self::max_connections) bound these connections
    /// too. (Go's `StrictMaxConcurrentStreams` and .NET's
    /// `EnableMultipleHttp2Connections` make the same choice, unbounded.)
    /// Without the cargo feature `http2` it has no effect.
    pub fn http2_max_connections_per_origin(mut self, max: usize) -> Self {
        self.config.http2.max_connections_per_origin = max.max(1);
        self
    }

    /// The largest HTTP/2 response header list accepted
    /// (`SETTINGS_MAX_HEADER_LIST_SIZE`); a larger one fails its stream —
    /// but one more than four times larger ends the whole connection
    /// (`h2`, which decodes it, takes it for a flood and sends `GOAWAY`
    /// with `ENHANCE_YOUR_CALM`), failing every stream on it with
    /// [`Error::Http2`](crate::Error::Http2); the next request opens
    /// another connection. Default 64 KiB.
    ///
    /// The stream fails with `h2`'s reset (`PROTOCOL_ERROR`, as for a
    /// malformed head), not with the typed "head too large" of HTTP/1.1:
    /// `h2` decodes the head and tells nothing more. Trailers past the
    /// limit `h2` does not refuse: it keeps the fields that came first
    /// while they fit and drops the rest, and the body ends with those —
    /// unless they pass [`max_trailer_bytes`](crate::h1::Limits::max_trailer_bytes)
    /// (16 KiB by default), which fails the body. Telling either apart
    /// would take decoding every header block a second time, beside `h2`.
    pub fn http2_max_header_list_size(mut self, max: u32) -> Self {
        self.config.http2.max_header_list_size = max;
        self
    }

    /// The HTTP/2 flow-control window of each stream: what the server may
    /// send ahead of the body's reader, beyond the
    /// [body window](Self::body_window). Default 256 KiB; at least 16 KiB
    /// (a smaller size is taken as that: the window is given back as the
    /// reader takes the body, so at 0 no byte of any response would ever
    /// come, and a window of a few bytes has every body sent in frames of
    /// that size, a round trip each); at most 2^31 - 1, the largest HTTP/2
    /// allows (a larger size is taken as that).
    pub fn http2_initial_stream_window_size(mut self, size: u32) -> Self {
        self.config.http2.initial_stream_window = http2_window(size);
        self
    }

    /// The HTTP/2 flow-control window of each connection, shared by its
    /// streams. Default 1 GiB: what a connection holds is bounded per
    /// stream (its [body window](Self::body_window) and its
    /// [stream window](Self::http2_initial_stream_window_size)). A window
    /// smaller than the streams you leave unread times their stream window
    /// lets those hold all of it: a body being read then gets no more until
    /// they are read (a read timeout, or a hang without one). At least
    /// 16 KiB, as the [stream window](Self::http2_initial_stream_window_size)
    /// (a smaller size is taken as that: at 0 the connection would take no
    /// more once its first 64 KiB had come, at 1 a byte a round trip); at
    /// most 2^31 - 1, the largest HTTP/2 allows (a larger size is taken as
    /// that).
    pub fn http2_initial_connection_window_size(mut self, size: u32) -> Self {
        self.config.http2.initial_connection_window = http2_window(size);
        self
    }

    /// Sends an HTTP/2 PING on each connection at this interval, and
    /// closes a connection whose PING is not answered within
    /// [`http2_keep_alive_timeout`](Self::http2_keep_alive_timeout): a dead
    /// connection is found even with no stream on it. Default off.
    pub fn http2_keep_alive_interval(mut self, interval: Duration) -> Self {
        self.config.http2.keep_alive_interval = nonzero(interval);
        self
    }

    /// How long a keep-alive PING waits for its answer. Default 20 s; zero
    /// disables it: an unanswered PING then never closes the connection.
    /// Past it, the streams on the connection without a whole answer fail
    /// with [`Error::KeepAliveTimeout`](crate::Error::KeepAliveTimeout).
    pub fn http2_keep_alive_timeout(mut self, timeout: Duration) -> Self {
        self.config.http2.keep_alive_timeout = nonzero(timeout);
        self
    }

    // --- policy: redirects, decompression, cookies ---

    /// Which redirects are followed (default: up to 10; see
    /// [`redirect`] for the rules of a hop).
    pub fn redirect(mut self, policy: redirect::Policy) -> Self {
        self.policies.redirect = policy;
        self
    }

    /// Which failed attempts are retried, inside the request deadline
    /// (default: none; see [`retry`](crate::retry)).
    pub fn retry(mut self, policy: crate::retry::Policy) -> Self {
        self.policies.retry = policy;
        self
    }

    /// The client's retry budget, shared by retries and hedged copies
    /// (default: 20 % of requests plus 10 a second, over 10 s).
    pub fn retry_budget(mut self, budget: crate::retry::Budget) -> Self {
        self.policies.budget = crate::policy::retry::BudgetState::new(budget);
        self
    }

    /// Whether and when requests are hedged (default: never; see
    /// [`hedge`](crate::hedge)).
    pub fn hedge(mut self, policy: crate::hedge::Policy) -> Self {
        self.policies.hedge = policy;
        self
    }

    /// Whether responses are decompressed (default: yes): `Accept-Encoding`
    /// is sent with the codings this build has (cargo features `gzip`,
    /// `deflate` by default, `brotli`, `zstd`), and a body in one of them is
    /// decoded as it is read, its `Content-Encoding` and `Content-Length`
    /// removed from the headers (a 206 is not: a range of the encoded bytes
    /// does not decode alone). [`max_body_bytes`](Self::max_body_bytes)
    /// then bounds the decoded size.
    pub fn decompress(mut self, decompress: bool) -> Self {
        self.policies.decompress = decompress;
        self
    }

    /// `decompress(false)`: bodies come as the server encoded them.
    pub fn no_decompress(self) -> Self {
        self.decompress(false)
    }

    /// A cookie store for the client (off by default): cookies that
    /// responses set are kept ([`Jar`](crate::cookie::Jar), RFC 6265) and
    /// sent on later requests, and on the next hops of a redirect chain.
    #[cfg(feature = "cookies")]
    pub fn cookie_store(mut self, enable: bool) -> Self {
        self.policies.cookies = if enable {
            Some(Arc::new(crate::policy::Jar::new()))
        } else {
            None
        };
        self
    }

    /// A cookie store of one's own (or a [`Jar`](crate::cookie::Jar) shared
    /// with other clients).
    pub fn cookie_provider(mut self, store: Arc<dyn CookieStore>) -> Self {
        self.policies.cookies = Some(store);
        self
    }

    /// The `User-Agent` sent unless a request has its own (default:
    /// `tickless/<version>`).
    pub fn user_agent(mut self, agent: HeaderValue) -> Self {
        self.policies.user_agent = Some(agent);
        self
    }

    /// Sends no `User-Agent` unless a request has its own.
    pub fn no_user_agent(mut self) -> Self {
        self.policies.user_agent = None;
        self
    }

    /// Headers sent with every request (reqwest's `default_headers`, curl's
    /// `-H` in a config file), each name with all its values — unless the
    /// request has its own field of that name: then the request's values
    /// replace all the default's (reqwest's rule). The credentials of a
    /// request's URL are its own `Authorization`. A later call replaces
    /// the names it gives and keeps the others.
    ///
    /// They become the request's own headers when it is sent, and are
    /// treated as such from then on: they go on its retries, hedged copies
    /// and redirects — where a hop to another origin drops
    /// `Authorization`, `Cookie` and `Proxy-Authorization`, as it drops a
    /// request's own (see [`redirect`]); a default `Cookie` is sent
    /// instead of the [cookie store](Self::cookie_store)'s, as a request's
    /// own is; over HTTP/2 a connection-specific field (`Connection`,
    /// those it names, `Keep-Alive`, `Upgrade`, ...) is left out. A
    /// default `User-Agent` replaces the client's own (that of
    /// [`user_agent`](Self::user_agent) too, or sends one after
    /// [`no_user_agent`](Self::no_user_agent)), and a default
    /// `Accept-Encoding` the one [decompression](Self::decompress) sends —
    /// responses in the codings this build has are still decoded.
    ///
    /// A default `Host`, `Content-Length` or `Transfer-Encoding` makes
    /// [`build`](Self::build) fail with `InvalidInput`: the first would
    /// name one host to every origin, the others would frame every
    /// request, whatever its body. Give those to the requests that need them.
    pub fn default_headers(mut self, headers: http::HeaderMap) -> Self {
        self.policies.defaults.extend(headers);
        self
    }

    // --- limits ---

    /// Limits on response heads, header counts, trailers and bodies. Over
    /// HTTP/2, `max_headers` bounds the fields of each head and of the
    /// trailers, `max_trailer_bytes` the trailers (each field counted as
    /// HTTP/2 sizes a header list: its name, its value and 32), and
    /// `max_head_bytes` a response's interim (1xx) heads in all, as over
    /// HTTP/1.1 (a head's own size is
    /// [`http2_max_header_list_size`](Self::http2_max_header_list_size)'s).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.config.limits = limits;
        self
    }

    /// Largest response body accepted, in bytes (default unlimited): as it
    /// comes on the wire, and once decoded (a small body that inflates past
    /// it fails with [`Error::BodyTooLarge`](crate::Error::BodyTooLarge) at
    /// the limit, in bounded memory). A response that declares a longer
    /// body still delivers its head — a redirect is followed, a caller sees
    /// the status — and its body fails at once, nothing of it read. One
    /// that grows past it gives a reader what came within it first: a
    /// body read to the server's close, or an HTTP/2 one that declares no
    /// length, every byte up to the limit; a chunked one the chunks within
    /// it (it fails at the size of the chunk that passes it).
    pub fn max_body_bytes(mut self, max: u64) -> Self {
        self.config.limits.max_body_bytes = Some(max);
        self
    }

    // --- threads and testing seams ---

    /// Number of event loops (default: the available cores, or with an
    /// [`executor`](Self::executor) eight a core, at most 64 unless there
    /// are more cores; at least 1).
    /// [`build`](Self::build) refuses more than
    /// [`MAX_EVENT_LOOPS`](crate::event_loop::MAX_EVENT_LOOPS). Each new
    /// connection stays on one loop for life: a thread that waits blocking
    /// opens all its connections on one loop, which it then drives itself
    /// while it waits; threads that poll spread theirs over the loops (see
    /// [`EventLoopGroup`]).
    pub fn event_loops(mut self, loops: usize) -> Self {
        self.config.event_loops = Some(loops.max(1));
        self
    }

    /// Has `executor`'s reactor drive the client's event loops (see
    /// [`EventLoopGroupBuilder::executor`](crate::event_loop::EventLoopGroupBuilder::executor)):
    /// for a client whose requests are awaited on that executor's tasks.
    /// Ignored with an [`event_loop_group`](Self::event_loop_group) of
    /// your own (give it to that group's builder instead).
    pub fn executor(mut self, executor: crate::event_loop::Executor) -> Self {
        self.config.executor = Some(executor);
        self
    }

    /// The clock every deadline reads (default: the system's monotonic
    /// clock). With a [`ManualClock`](tickless_timer::ManualClock), timeouts
    /// fire when the test advances it, in both timeout modes.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.config.clock = clock;
        self
    }

    /// Use this wheel instead of starting one. The client stops it on
    /// close, so do not share it with another client. It must read the
    /// client's [`clock`](Self::clock) (`build` fails otherwise). Once it
    /// has stopped, a request with a timeout armed on it, or arming one,
    /// fails with [`Error::ClientClosed`](crate::Error::ClientClosed).
    pub fn timer(mut self, timer: HashedWheelTimer) -> Self {
        self.config.timer = Some(timer);
        self
    }

    /// Use these loops instead of starting some. The client shuts them
    /// down on close. Build them with the client's clock (`build` fails
    /// otherwise).
    ///
    /// Several clients may share one group: connections are told apart by
    /// ids unique in the process, so nothing one client posts to a loop can
    /// reach another's connection. The first of them to close shuts the
    /// loops down, and the others' requests then fail with
    /// [`Error::ClientClosed`](crate::Error::ClientClosed): close them
    /// together.
    pub fn event_loop_group(mut self, group: Arc<EventLoopGroup>) -> Self {
        self.config.event_loop_group = Some(group);
        self
    }

    /// Told of every exchange's progress (see [`EventListener`]).
    pub fn listener(mut self, listener: Arc<dyn EventListener>) -> Self {
        self.config.listener = listener;
        self
    }

    /// Starts the client's threads.
    ///
    /// # Errors
    ///
    /// Before any thread starts:
    ///
    /// * `InvalidInput` if the TLS options do not make a configuration: a
    ///   root certificate ([`add_root_certificate`](Self::add_root_certificate))
    ///   or the client's identity ([`client_identity_pem`](Self::client_identity_pem))
    ///   does not parse, or [`min_tls_version`](Self::min_tls_version) and
    ///   [`max_tls_version`](Self::max_tls_version) leave no version;
    /// * `InvalidInput` if a [`timer`](Self::timer) or an
    ///   [`event_loop_group`](Self::event_loop_group) given reads another
    ///   clock than the client's;
    /// * `InvalidInput` if a host given to [`resolve`](Self::resolve) has a
    ///   port;
    /// * `InvalidInput` if [`default_headers`](Self::default_headers) has a
    ///   `Host`, `Content-Length` or `Transfer-Encoding`;
    /// * `Unsupported` if it must speak HTTP/2 (`http2_only`,
    ///   `http2_prior_knowledge`) in a build without the cargo feature
    ///   `http2`.
    ///
    /// Then `InvalidInput` if more than
    /// [`MAX_EVENT_LOOPS`](crate::event_loop::MAX_EVENT_LOOPS) loops are
    /// asked for, and the operating system's error if it refuses a thread
    /// or a loop's poller.
    pub fn build(self) -> std::io::Result<crate::Client> {
        // An IPv6 address is the only host with a colon: anything else
        // with one has a port, and would never match.
        let with_a_port = self
            .config
            .resolve_overrides
            .keys()
            .map(|(host, _)| host)
            .find(|host| host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_err());
        if let Some(host) = with_a_port {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("resolve: {host:?} is a host with a port; give the port to resolve_port"),
            ));
        }
        let refused = [HOST, CONTENT_LENGTH, TRANSFER_ENCODING]
            .into_iter()
            .find(|name| self.policies.defaults.contains_key(name));
        if let Some(name) = refused {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("default_headers: {name} is not sent with every request; give it to the request"),
            ));
        }
        let needs_http2 = matches!(
            self.config.versions,
            crate::config::HttpVersions::Http2Only
                | crate::config::HttpVersions::Http2PriorKnowledge
        );
        if needs_http2 && !cfg!(feature = "http2") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "HTTP/2 only or prior knowledge needs the cargo feature http2",
            ));
        }
        super::Client::start(self.config, self.policies)
    }
}

impl std::fmt::Debug for ClientBuilder {
    /// The settings given, credentials hidden: a proxy's (its URL shows
    /// none), and among the default headers the values of
    /// `Authorization`, `Proxy-Authorization`, `Cookie` and any marked
    /// sensitive, shown as `Sensitive`. Seams given as objects (a
    /// resolver, a listener, a timer, loops, a clock) and the TLS material
    /// are left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (config, policies) = (&self.config, &self.policies);
        f.debug_struct("ClientBuilder")
            .field("request_timeout", &config.request_timeout)
            .field("read_timeout", &config.read_timeout)
            .field("write_timeout", &config.write_timeout)
            .field("connect_timeout", &config.connect_timeout)
            .field("handshake_timeout", &config.handshake_timeout)
            .field("use_event_loop_timeouts", &config.use_event_loop_timeouts)
            .field("keep_alive", &config.keep_alive)
            .field("max_connections", &config.max_connections)
            .field("max_connections_per_host", &config.max_connections_per_host)
            .field(
                "pooled_connection_idle_timeout",
                &config.pooled_connection_idle_timeout,
            )
            .field("connection_ttl", &config.connection_ttl)
            .field("versions", &config.versions)
            .field("proxies", &config.proxies)
            .field("env_proxies", &config.env_proxies)
            .field("body_window", &config.body_window)
            .field("expect_continue_timeout", &config.expect_continue_timeout)
            .field("limits", &config.limits)
            .field("event_loops", &config.event_loops)
            .field("redirect", &policies.redirect)
            .field("decompress", &policies.decompress)
            .field("cookie_store", &policies.cookies.is_some())
            .field("user_agent", &policies.user_agent)
            .field("default_headers", &super::ShownHeaders(&policies.defaults))
            .field("retry", &policies.retry)
            .field("hedge", &policies.hedge)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickless_timer::DEFAULT_TICK;

    fn tick_of(builder: ClientBuilder) -> Duration {
        builder.config.wheel_tick()
    }

    #[test]
    fn http2_windows_too_small_to_use_are_raised_to_the_floor() {
        let builder = super::super::Client::builder;
        let floor = crate::config::MIN_HTTP2_WINDOW;
        for (size, taken) in [(0, floor), (1, floor), (floor - 1, floor), (floor, floor)] {
            let config = builder()
                .http2_initial_stream_window_size(size)
                .http2_initial_connection_window_size(size)
                .config;
            assert_eq!(config.http2.initial_stream_window, taken, "{size}");
            assert_eq!(config.http2.initial_connection_window, taken, "{size}");
        }
        let big = builder().http2_initial_stream_window_size(1 << 20).config;
        assert_eq!(big.http2.initial_stream_window, 1 << 20);
    }

    /// A host given with a port would never match a request's host (the
    /// override is looked up by host alone): refused, not silently unused.
    /// An IPv6 address, with or without brackets, is a host.
    #[test]
    fn a_resolve_override_for_a_host_with_a_port_is_refused() {
        let addr = [std::net::SocketAddr::from(([127, 0, 0, 1], 8443))];
        let builder = super::super::Client::builder;
        for host in ["example.test:443", "[::1]:443", "127.0.0.1:80", "h:"] {
            for built in [
                builder().resolve(host, &addr).build(),
                builder().resolve_port(host, 443, &addr).build(),
            ] {
                let error = built.err().unwrap_or_else(|| panic!("{host} was taken"));
                assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{host}");
                assert!(error.to_string().contains("resolve_port"), "{error}");
            }
        }
        for host in ["example.test", "::1", "[::1]", "2001:db8::1"] {
            let client = builder().resolve(host, &addr).build().unwrap();
            client.close();
        }
    }

    /// Zero turns TCP keepalive off; any other idle time is taken as the
    /// system takes it (whole seconds, within its bounds: the rounding
    /// itself is `net::socket`'s, tested there; here, that the builder
    /// applies it).
    #[test]
    fn a_tcp_keepalive_of_zero_is_off_and_others_are_whole_seconds() {
        let keepalive = |idle| {
            super::super::Client::builder()
                .tcp_keepalive(idle)
                .config
                .socket
                .tcp_keepalive
        };
        assert_eq!(ClientConfig::default().socket.tcp_keepalive, None);
        assert_eq!(keepalive(Duration::ZERO), None);
        assert_eq!(
            keepalive(Duration::from_millis(1)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            keepalive(Duration::from_secs(60)),
            Some(Duration::from_secs(60))
        );
    }

    #[test]
    fn the_wheel_ticks_finer_in_event_loop_mode_unless_told_otherwise() {
        let builder = super::super::Client::builder;
        assert_eq!(tick_of(builder()), DEFAULT_TICK);
        assert_eq!(
            tick_of(builder().use_event_loop_timeouts(true)),
            crate::config::EVENT_LOOP_MODE_WHEEL_TICK
        );
        let set = Duration::from_millis(3);
        assert_eq!(tick_of(builder().wheel_tick(set)), set);
        // Set before or after the mode: the tick given wins.
        assert_eq!(
            tick_of(builder().wheel_tick(set).use_event_loop_timeouts(true)),
            set
        );
        assert_eq!(
            tick_of(builder().use_event_loop_timeouts(true).wheel_tick(set)),
            set
        );
    }
}
