//! [`ClientConfig`]: a client's settled configuration, as the builder
//! ([`ClientBuilder`](crate::ClientBuilder), which documents every option)
//! leaves it. Options are grouped as in the Java client: timeouts,
//! connections and pool, TLS, limits, threads and testing seams.

use crate::event_loop::EventLoopGroup;
use crate::events::{EventListener, NoopListener};
use crate::h1::Limits;
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

/// The settled configuration of a client.
#[derive(Clone)]
pub(crate) struct ClientConfig {
    // timeouts
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) handshake_timeout: Option<Duration>,
    pub(crate) use_event_loop_timeouts: bool,
    pub(crate) event_loop_spin: Duration,
    /// `None`: the mode's default (see [`ClientConfig::wheel_tick`]).
    pub(crate) wheel_tick: Option<Duration>,
    pub(crate) wheel_size: usize,
    // connections and pool
    pub(crate) keep_alive: bool,
    pub(crate) max_connections: Option<usize>,
    pub(crate) max_connections_per_host: Option<usize>,
    pub(crate) pooled_connection_idle_timeout: Option<Duration>,
    pub(crate) connection_ttl: Option<Duration>,
    // the network path
    /// The builder's proxies, in order; if any, the environment's are not read.
    pub(crate) proxies: Vec<Proxy>,
    /// Read the `*_proxy` environment variables when no proxy is listed.
    pub(crate) env_proxies: bool,
    /// `None`: the default resolver (getaddrinfo on threads of its own).
    pub(crate) resolver: Option<Arc<dyn Resolve>>,
    /// Host names (lower case) answered without a resolver.
    pub(crate) resolve_overrides: HashMap<String, Vec<SocketAddr>>,
    /// Happy eyeballs: how long an attempt has before the next one starts.
    pub(crate) happy_eyeballs_delay: Duration,
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
    pub(crate) clock: SharedClock,
    pub(crate) timer: Option<HashedWheelTimer>,
    pub(crate) event_loop_group: Option<Arc<EventLoopGroup>>,
    pub(crate) listener: Arc<dyn EventListener>,
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
            connect_timeout: Some(Duration::from_secs(5)),
            handshake_timeout: Some(Duration::from_secs(10)),
            use_event_loop_timeouts: false,
            event_loop_spin: Duration::ZERO,
            wheel_tick: None,
            wheel_size: DEFAULT_WHEEL_SIZE,
            keep_alive: true,
            max_connections: None,
            max_connections_per_host: None,
            pooled_connection_idle_timeout: Some(Duration::from_secs(60)),
            connection_ttl: None,
            proxies: Vec::new(),
            env_proxies: true,
            resolver: None,
            resolve_overrides: HashMap::new(),
            happy_eyeballs_delay: DEFAULT_HAPPY_EYEBALLS_DELAY,
            #[cfg(feature = "rustls")]
            tls: TlsOptions::default(),
            body_window: crate::exchange::DEFAULT_WINDOW,
            expect_continue_timeout: Some(Duration::from_secs(1)),
            limits: Limits::default(),
            event_loops: None,
            clock: Arc::new(SystemClock),
            timer: None,
            event_loop_group: None,
            listener: Arc::new(NoopListener),
        }
    }
}
