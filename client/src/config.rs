//! [`ClientConfig`]: a client's settled configuration, as the builder
//! ([`ClientBuilder`](crate::ClientBuilder), which documents every option)
//! leaves it. Options are grouped as in the Java client: timeouts,
//! connections and pool, TLS, limits, threads and testing seams.

use crate::event_loop::EventLoopGroup;
use crate::events::EventListener;
use crate::h1::Limits;
use crate::net::socket::SocketOptions;
#[cfg(feature = "rustls")]
use crate::net::tls::TlsOptions;
use crate::net::{Proxy, Resolve};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tickless_timer::{
    HashedWheelTimer, SharedClock, SystemClock, DEFAULT_TICK, DEFAULT_WHEEL_SIZE,
};

/// The wheel's tick in event-loop mode unless set: there the wheel only
/// bounds resolution and connects, and a deadline that comes while a connect
/// is under way fires at most about this late — a few times the OS's own
/// wake-up lateness, where a finer tick would buy nothing.
pub(crate) const EVENT_LOOP_MODE_WHEEL_TICK: Duration = Duration::from_micros(250);

/// RFC 8305's recommended "Connection Attempt Delay".
pub(crate) const DEFAULT_HAPPY_EYEBALLS_DELAY: Duration = Duration::from_millis(250);

/// The HTTP/2 connection window by default: 1 GiB, as Go's client has it.
/// What a connection holds is bounded per stream already (its pipe's
/// window and its stream window); a connection window below what its
/// streams may hold unread lets bodies nobody reads yet take all of it,
/// and the body being read waits for ever — a client that sends requests
/// together and reads their bodies in turn would hang on the first.
pub(crate) const DEFAULT_HTTP2_CONNECTION_WINDOW: u32 = 1 << 30;

/// The smallest HTTP/2 receive window (stream or connection) a caller may
/// set: 16 KiB, one frame of the least `SETTINGS_MAX_FRAME_SIZE` every
/// peer takes (RFC 9113 §4.2, §6.5.2). The client gives a window back
/// as the body's reader takes its bytes: a window of 0 lets no byte come,
/// ever (`h2` never sends a `WINDOW_UPDATE` to a connection whose target
/// window is 0), and one of a few bytes has the server send its body in
/// frames of that size, a round trip each — every response hangs or
/// crawls. Below this a size is raised to it.
pub(crate) const MIN_HTTP2_WINDOW: u32 = 16 * 1024;

/// The largest HTTP/2 flow-control window (RFC 9113 §6.9.1): a larger
/// `SETTINGS_INITIAL_WINDOW_SIZE` is a connection error to the server, and
/// `h2` panics on a larger connection window.
pub(crate) const MAX_HTTP2_WINDOW: u32 = (1 << 31) - 1;

/// The settled configuration of a client.
#[derive(Clone)]
pub(crate) struct ClientConfig {
    // timeouts
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) handshake_timeout: Option<Duration>,
    pub(crate) use_event_loop_timeouts: bool,
    pub(crate) event_loop_spin: Duration,
    /// `None`: the group's default (see `EventLoopGroupBuilder::pin_to_cpus`).
    pub(crate) pin_event_loops: Option<bool>,
    /// `None`: the mode's default (see [`ClientConfig::wheel_tick`]).
    pub(crate) wheel_tick: Option<Duration>,
    pub(crate) wheel_size: usize,
    // connections and pool
    pub(crate) keep_alive: bool,
    pub(crate) max_connections: Option<usize>,
    pub(crate) max_connections_per_host: Option<usize>,
    pub(crate) pooled_connection_idle_timeout: Option<Duration>,
    pub(crate) connection_ttl: Option<Duration>,
    // protocols
    pub(crate) versions: HttpVersions,
    pub(crate) http2: Http2Options,
    // the network path
    /// The builder's proxies, in order; if any, the environment's are not read.
    pub(crate) proxies: Vec<Proxy>,
    /// Read the `*_proxy` environment variables when no proxy is listed.
    pub(crate) env_proxies: bool,
    /// `None`: the default resolver (getaddrinfo on threads of its own).
    pub(crate) resolver: Option<Arc<dyn Resolve>>,
    /// Hosts answered without a resolver, keyed by
    /// [`override_key`](crate::net::override_key) and the one port the
    /// override is for (`None`: every port); one for the port wins.
    pub(crate) resolve_overrides: HashMap<(String, Option<u16>), Vec<SocketAddr>>,
    /// Tests: what the default resolver's threads do instead of
    /// `getaddrinfo` (a lookup that blocks, say).
    #[cfg(test)]
    pub(crate) system_lookup: Option<Arc<crate::net::Lookup>>,
    /// Happy eyeballs: how long an attempt has before the next one starts.
    pub(crate) happy_eyeballs_delay: Duration,
    /// What every socket is set up with: its local address, TCP keepalive.
    pub(crate) socket: SocketOptions,
    // TLS
    #[cfg(feature = "rustls")]
    pub(crate) tls: TlsOptions,
    // bodies
    /// What the loop reads ahead of a response body's reader.
    pub(crate) body_window: usize,
    /// How long a body waits for `100 Continue` (`None`: not at all).
    pub(crate) expect_continue_timeout: Option<Duration>,
    // limits
    pub(crate) limits: Limits,
    // threads and testing seams
    pub(crate) event_loops: Option<usize>,
    pub(crate) executor: Option<crate::event_loop::Executor>,
    pub(crate) clock: SharedClock,
    pub(crate) timer: Option<HashedWheelTimer>,
    pub(crate) event_loop_group: Option<Arc<EventLoopGroup>>,
    pub(crate) listener: Arc<dyn EventListener>,
}

/// Which HTTP versions the client speaks (see the builder's
/// `http1_only`, `http2_only` and `http2_prior_knowledge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpVersions {
    /// ALPN offers h2 and http/1.1 over TLS; cleartext is HTTP/1.1.
    Auto,
    Http1Only,
    /// ALPN offers h2 alone; a server that will not speak it fails the
    /// request. Cleartext is HTTP/1.1.
    Http2Only,
    /// Cleartext is HTTP/2 with prior knowledge (no upgrade); TLS as
    /// [`Auto`](Self::Auto).
    Http2PriorKnowledge,
}

impl HttpVersions {
    /// The ALPN protocols the TLS handshake offers, preferred first.
    pub(crate) fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            HttpVersions::Http1Only => vec![b"http/1.1".to_vec()],
            HttpVersions::Http2Only => vec![b"h2".to_vec()],
            HttpVersions::Auto | HttpVersions::Http2PriorKnowledge if cfg!(feature = "http2") => {
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            }
            HttpVersions::Auto | HttpVersions::Http2PriorKnowledge => vec![b"http/1.1".to_vec()],
        }
    }

    /// Whether a connection for `https` may speak HTTP/2 at all: if not,
    /// none of an origin's connections is ever shared, and a request needs
    /// no look at the shared ones.
    pub(crate) fn may_speak_h2(self, https: bool) -> bool {
        cfg!(feature = "http2")
            && match self {
                HttpVersions::Auto | HttpVersions::Http2Only => https,
                HttpVersions::Http1Only => false,
                HttpVersions::Http2PriorKnowledge => true,
            }
    }

    /// Whether every connection of the client is HTTP/2 before it has
    /// opened for `https`: then the requests that come while the first
    /// connection to an origin opens wait for it instead of opening their own.
    pub(crate) fn h2_known(self, https: bool) -> bool {
        match self {
            HttpVersions::Http2Only => https,
            HttpVersions::Http2PriorKnowledge => !https,
            HttpVersions::Auto | HttpVersions::Http1Only => false,
        }
    }
}

/// HTTP/2 settings and limits (see the builder's `http2_*` options).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Http2Options {
    /// At most this many streams in flight per connection, below the
    /// server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub(crate) max_concurrent_streams: Option<usize>,
    /// At most this many shared connections per origin: another opens
    /// when every one is at its stream limit.
    pub(crate) max_connections_per_origin: usize,
    pub(crate) max_header_list_size: u32,
    pub(crate) initial_stream_window: u32,
    pub(crate) initial_connection_window: u32,
    pub(crate) max_frame_size: u32,
    pub(crate) keep_alive_interval: Option<Duration>,
    /// How long a PING's answer is awaited (`None`: without bound).
    pub(crate) keep_alive_timeout: Option<Duration>,
    /// The id of a connection's first stream (`h2` starts at 1): for the
    /// tests of a connection that runs out of stream ids.
    #[cfg(test)]
    pub(crate) first_stream_id: Option<u32>,
}

impl Default for Http2Options {
    fn default() -> Self {
        Http2Options {
            max_concurrent_streams: None,
            max_connections_per_origin: 1,
            max_header_list_size: 64 * 1024,
            initial_stream_window: 256 * 1024,
            initial_connection_window: DEFAULT_HTTP2_CONNECTION_WINDOW,
            max_frame_size: 16 * 1024,
            keep_alive_interval: None,
            keep_alive_timeout: Some(Duration::from_secs(20)),
            #[cfg(test)]
            first_stream_id: None,
        }
    }
}

impl ClientConfig {
    /// The wheel's tick: the one set, or the mode's default.
    pub(crate) fn wheel_tick(&self) -> Duration {
        match (self.wheel_tick, self.use_event_loop_timeouts) {
            (Some(tick), _) => tick,
            (None, true) => EVENT_LOOP_MODE_WHEEL_TICK,
            (None, false) => DEFAULT_TICK,
        }
    }
}

impl Default for ClientConfig {
    /// The defaults every option documents.
    fn default() -> Self {
        ClientConfig {
            request_timeout: Some(Duration::from_secs(60)),
            read_timeout: Some(Duration::from_secs(60)),
            write_timeout: Some(Duration::from_secs(60)),
            connect_timeout: Some(Duration::from_secs(5)),
            handshake_timeout: Some(Duration::from_secs(10)),
            use_event_loop_timeouts: false,
            event_loop_spin: Duration::ZERO,
            pin_event_loops: None,
            wheel_tick: None,
            wheel_size: DEFAULT_WHEEL_SIZE,
            keep_alive: true,
            max_connections: None,
            max_connections_per_host: None,
            pooled_connection_idle_timeout: Some(Duration::from_secs(60)),
            connection_ttl: None,
            versions: HttpVersions::Auto,
            http2: Http2Options::default(),
            proxies: Vec::new(),
            env_proxies: true,
            resolver: None,
            resolve_overrides: HashMap::new(),
            #[cfg(test)]
            system_lookup: None,
            happy_eyeballs_delay: DEFAULT_HAPPY_EYEBALLS_DELAY,
            socket: SocketOptions::default(),
            #[cfg(feature = "rustls")]
            tls: TlsOptions::default(),
            body_window: crate::exchange::DEFAULT_WINDOW,
            expect_continue_timeout: Some(Duration::from_secs(1)),
            limits: Limits::default(),
            event_loops: None,
            executor: None,
            clock: Arc::new(SystemClock),
            timer: None,
            event_loop_group: None,
            listener: crate::events::nobody_listening(),
        }
    }
}
