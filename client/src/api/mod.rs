//! The public types: [`Client`], [`ClientBuilder`], [`RequestBuilder`],
//! [`Response`] and [`ResponseFuture`]. They build requests and hand them
//! to the dispatcher; everything below them is crate-private.

mod body;
mod builder;
#[cfg(test)]
mod caller_drives_tests;
mod future;
mod input;
mod request;
mod response;

pub use crate::policy::upload::Upload;
#[cfg(feature = "json")]
pub use body::CollectJson;
pub use body::{Body, Chunk, CollectBytes, CollectText};
pub use builder::ClientBuilder;
pub use future::ResponseFuture;
pub use input::{IntoHeaderName, IntoUri};
pub use request::RequestBuilder;
pub use response::{ReasonPhrase, Response};

use crate::config::ClientConfig;
use crate::dispatch::Dispatcher;
use crate::event_loop::EventLoopGroup;
use crate::policy::Policies;
use std::sync::Arc;
use std::thread::ThreadId;
use tickless_timer::{HashedWheelTimer, SharedClock, TimerStats};

/// An HTTP/1.1 and HTTP/2 client. Cheap to clone: clones share the loops,
/// the wheel and the pool. Closing it (or dropping the last clone) fails
/// what is in flight and joins its threads (see [`close`](Self::close)).
///
/// # Examples
///
/// ```no_run
/// let client = tickless_client::Client::builder().build()?;
/// let response = client.get("http://127.0.0.1:8080/").send().wait()?;
/// let status = response.status();
/// println!("{status} {}", response.text().wait()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Client {
    handle: Arc<Handle>,
}

/// Closes the client when the last [`Client`] clone goes away (exchanges
/// and connections hold the dispatcher itself, so it cannot be the one to
/// know).
struct Handle {
    dispatcher: Arc<Dispatcher>,
    policies: Arc<Policies>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.dispatcher.close();
    }
}

/// A snapshot of a client's timers and connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientStats {
    /// The hashed-wheel timer: entries armed now, fired, lag. Its `armed`
    /// count includes the pool cleaner's entry. In wheel mode an HTTP/1
    /// connection whose requests arm a request or read timeout keeps one
    /// entry they hold in turn, left armed
    /// between them: it is counted (armed, fired, cancelled) only while a
    /// request holds it — not while the connection is idle (its lag
    /// histogram counts all its fires).
    pub wheel: TimerStats,
    /// Pool-cleaner entries armed on the wheel (it re-arms itself while the
    /// client is open; `close` takes it off: 0 after).
    pub pool_cleaner_armed: usize,
    /// Each event loop's deadline heap, by loop index. In event-loop mode
    /// an HTTP/1 connection keeps one standing entry on its loop's heap,
    /// as on the wheel above: counted (armed, fired, cancelled) only while
    /// a request holds it, and its lag histogram counts all its fires —
    /// an idle connection's entry, whose fire does nothing, may be taken
    /// out late on a loop kept busy, and that lateness is in `lag` too.
    pub loops: Vec<TimerStats>,
    /// Connections open (or opening), busy or idle; each holds a permit.
    pub open_connections: usize,
    /// Of those, idle in the pool.
    pub idle_connections: usize,
    /// Requests waiting for a connection or a stream, not ended: queued
    /// for a permit (the per-host or the total connection limit), for the
    /// HTTP/2 connection being opened to their origin (its connect and
    /// handshakes), or for a stream of an open HTTP/2 connection at its
    /// concurrent-stream limit (as its loop last counted). A request whose
    /// own connection is being opened (resolved, connected, its TLS
    /// handshake) is not waiting: that connection is in `open_connections`.
    pub waiting: usize,
    /// Exchanges submitted and not yet ended.
    pub in_flight: usize,
    /// Bytes of bodies buffered by the client (response bodies read ahead
    /// of their readers, uploads read ahead of their sockets): at most
    /// about a window per body in flight.
    pub buffered_body_bytes: usize,
    /// HTTP/2 streams open now, on every connection.
    pub http2_streams_open: usize,
    /// HTTP/2 streams opened since the client started.
    pub http2_streams_opened: u64,
    /// The retry budget: requests that may be retried and retries (hedged
    /// copies included) in its window, and totals.
    pub retry_budget: crate::retry::BudgetStats,
}

/// The stable text form of a snapshot, one `key=value` line per part, for
/// logs and dashboards (fields are only ever added, at the end of a line):
///
/// ```text
/// wheel armed=3 fired=120 cancelled=980 lag_count=120 lag_p50_us=1000 lag_p99_us=2000 lag_max_us=4000
/// loop=0 armed=2 fired=40 cancelled=300 lag_count=40 lag_p50_us=50 lag_p99_us=100 lag_max_us=200
/// pool open=4 idle=2 waiting=0 in_flight=2 buffered_body_bytes=0
/// retry_budget requests=10 retries=1 retries_total=1 hedges_total=0 refused_total=0
/// http2 streams_open=3 streams_opened=120
/// ```
///
/// The lag figures are upper bounds of the histogram's buckets, in
/// microseconds (`-` when nothing has fired, or past the last bucket); the
/// wheel's `armed` includes the pool cleaner's entry.
impl std::fmt::Display for ClientStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn timer(f: &mut std::fmt::Formatter<'_>, stats: &TimerStats) -> std::fmt::Result {
            let micros = |q: f64| {
                stats
                    .lag
                    .quantile_upper_bound(q)
                    .map_or_else(|| "-".to_owned(), |d| d.as_micros().to_string())
            };
            writeln!(
                f,
                " armed={} fired={} cancelled={} lag_count={} lag_p50_us={} lag_p99_us={} lag_max_us={}",
                stats.armed,
                stats.fired,
                stats.cancelled,
                stats.lag.count(),
                micros(0.5),
                micros(0.99),
                micros(1.0),
            )
        }
        write!(f, "wheel")?;
        timer(f, &self.wheel)?;
        for (index, stats) in self.loops.iter().enumerate() {
            write!(f, "loop={index}")?;
            timer(f, stats)?;
        }
        writeln!(
            f,
            "pool open={} idle={} waiting={} in_flight={} buffered_body_bytes={}",
            self.open_connections,
            self.idle_connections,
            self.waiting,
            self.in_flight,
            self.buffered_body_bytes
        )?;
        let budget = &self.retry_budget;
        writeln!(
            f,
            "retry_budget requests={} retries={} retries_total={} hedges_total={} refused_total={}",
            budget.requests,
            budget.retries,
            budget.retries_total,
            budget.hedges_total,
            budget.refused_total
        )?;
        writeln!(
            f,
            "http2 streams_open={} streams_opened={}",
            self.http2_streams_open, self.http2_streams_opened
        )
    }
}

impl ClientStats {
    /// Timeouts armed now for exchanges and connects, on the wheel and
    /// every loop together (the pool cleaner is not counted). Zero once
    /// every exchange has ended — but for one per open HTTP/2 connection
    /// (its idle timeout, keep-alive PING or time to live, whichever is
    /// next).
    pub fn armed_timers(&self) -> usize {
        let wheel = self.wheel.armed.saturating_sub(self.pool_cleaner_armed);
        wheel + self.loops.iter().map(|l| l.armed).sum::<usize>()
    }
}

impl Default for Client {
    /// [`Client::new`].
    fn default() -> Client {
        Client::new()
    }
}

impl Client {
    /// A builder with the defaults (see [`ClientBuilder`]).
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A client with the defaults.
    ///
    /// # Panics
    ///
    /// If its threads cannot be started (the operating system refuses);
    /// [`builder`](Self::builder)`().build()` returns that error instead.
    pub fn new() -> Client {
        Client::builder()
            .build()
            .expect("start a client with the defaults")
    }

    fn start(config: ClientConfig, policies: Policies) -> std::io::Result<Client> {
        // First: a bad root certificate fails before any thread starts.
        #[cfg(feature = "rustls")]
        let tls = {
            let mut tls = crate::net::tls::client_config(&config.tls)?;
            // ALPN: what the configured HTTP versions offer.
            Arc::make_mut(&mut tls).alpn_protocols = config.versions.alpn();
            tls
        };
        #[cfg(not(feature = "rustls"))]
        let tls = ();
        let clock = config.clock.clone();
        // Deadlines are read from the client's clock: a timer or loops that
        // read another would fire them by another time, or never.
        let seams = [
            ("timer", config.timer.as_ref().map(|t| t.clock())),
            (
                "event loop group",
                config.event_loop_group.as_ref().map(|g| g.clock()),
            ),
        ];
        for (seam, seam_clock) in seams {
            if seam_clock.is_some_and(|seam_clock| !same_clock(seam_clock, &clock)) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("the {seam} given to the client reads another clock than the client's"),
                ));
            }
        }
        let wheel = match &config.timer {
            Some(timer) => timer.clone(),
            // Built on a pinned loop's thread (in a listener, say), the
            // wheel's thread starts on the CPUs that loop had before (a
            // group's `build` sees to its own loops).
            None => crate::event_loop::without_pinning(|| {
                HashedWheelTimer::builder()
                    .tick(config.wheel_tick())
                    .wheel_size(config.wheel_size)
                    .clock(clock.clone())
                    .build()
            })?,
        };
        let group = match &config.event_loop_group {
            Some(group) => group.clone(),
            None => {
                let mut builder = EventLoopGroup::builder()
                    .clock(clock)
                    .spin_before_deadline(config.event_loop_spin);
                // Unset, the group's rule decides in event-loop mode, and
                // the loops stay unpinned on the wheel.
                let pin = config
                    .pin_event_loops
                    .or((!config.use_event_loop_timeouts).then_some(false));
                if let Some(pin) = pin {
                    builder = builder.pin_to_cpus(pin);
                }
                if let Some(loops) = config.event_loops {
                    builder = builder.threads(loops);
                }
                if let Some(executor) = &config.executor {
                    builder = builder.executor(executor.clone());
                }
                Arc::new(builder.build()?)
            }
        };
        let dispatcher = Dispatcher::start(config, tls, wheel, group);
        Ok(Client {
            handle: Arc::new(Handle {
                dispatcher,
                policies: Arc::new(policies),
            }),
        })
    }

    /// Its dispatcher (a unit test makes exchanges with it).
    pub(crate) fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.handle.dispatcher
    }

    /// Connections offered back to the pool so far, kept or not.
    #[cfg(test)]
    pub(crate) fn pool_offers(&self) -> usize {
        self.dispatcher().offers()
    }

    fn policies(&self) -> &Arc<Policies> {
        &self.handle.policies
    }

    /// A GET request to `uri`.
    pub fn get<U>(&self, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        self.request(http::Method::GET, uri)
    }

    /// A POST request to `uri`.
    pub fn post<U>(&self, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        self.request(http::Method::POST, uri)
    }

    /// A PUT request to `uri`.
    pub fn put<U>(&self, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        self.request(http::Method::PUT, uri)
    }

    /// A PATCH request to `uri`.
    pub fn patch<U>(&self, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        self.request(http::Method::PATCH, uri)
    }

    /// A DELETE request to `uri`.
    pub fn delete<U>(&self, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        self.request(http::Method::DELETE, uri)
    }

    /// A HEAD request to `uri`.
    pub fn head<U>(&self, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        self.request(http::Method::HEAD, uri)
    }

    /// A request with any method. A URI that does not parse makes the
    /// request fail when sent with [`InvalidRequest::Uri`](crate::InvalidRequest::Uri), which quotes
    /// it and keeps the parser's error as its source (or
    /// [`InvalidRequest::Scheme`](crate::InvalidRequest::Scheme) for one without a scheme: see
    /// [`IntoUri`]).
    pub fn request<U>(&self, method: http::Method, uri: U) -> RequestBuilder
    where
        U: IntoUri,
    {
        RequestBuilder::new(self.clone(), method, uri.into_uri())
    }

    /// Sends an `http::Request` as it is — its method, URI, headers and
    /// body — but for what a URL parser
    /// percent-encodes in its URI's path or query (a character that is not
    /// ASCII; a `"`, `{`, `}` in the path, a `'` in the query), which goes
    /// percent-encoded, as for any request (see [`IntoUri`]). Its version
    /// does not choose the protocol, which the client's settings and the
    /// server do (see [`ClientBuilder::http2_only`]; the response's
    /// [`version`](crate::Response::version) says which was spoken):
    /// HTTP/1.1, `http`'s default, and HTTP/2 leave it to them; a version
    /// the client never speaks (HTTP/0.9, HTTP/1.0, HTTP/3) fails the
    /// request with [`InvalidRequest::Version`](crate::InvalidRequest::Version),
    /// rather than send it as another. Its extensions are not read.
    pub fn execute<B: Into<Upload>>(&self, request: http::Request<B>) -> ResponseFuture {
        let (parts, body) = request.into_parts();
        let uri = input::with_url_encoded_target(parts.uri);
        let mut request = RequestBuilder::new(self.clone(), parts.method, uri)
            .headers(parts.headers)
            .body(body);
        if ![http::Version::HTTP_11, http::Version::HTTP_2].contains(&parts.version) {
            request = request.invalid(crate::InvalidRequest::Version(parts.version));
        }
        request.send()
    }

    /// Stops accepting requests, fails every exchange in flight with
    /// [`Error::ClientClosed`](crate::Error::ClientClosed), closes every
    /// connection, stops the wheel and joins every thread — except a
    /// resolver thread inside `getaddrinfo`, and the thread of an upload
    /// from a reader ([`Upload::from_reader`]) inside its `read`, which
    /// `close` does not wait for: each ends by itself when its call
    /// returns. Idempotent; a
    /// call made while another thread closes the client returns once that
    /// close is done (unless made on one of the client's own threads, from
    /// a callback: it then returns at once).
    pub fn close(&self) {
        self.dispatcher().close();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.dispatcher().is_closed()
    }

    /// The wheel's thread: where timeouts expire by default.
    pub fn wheel_thread_id(&self) -> Option<ThreadId> {
        self.dispatcher().wheel().thread_id()
    }

    /// The event loops.
    pub fn event_loop_group(&self) -> &Arc<EventLoopGroup> {
        self.dispatcher().group()
    }

    /// Timers armed, connections open, requests waiting, exchanges in flight.
    pub fn stats(&self) -> ClientStats {
        let stats = self.dispatcher().stats();
        ClientStats {
            wheel: stats.wheel,
            pool_cleaner_armed: stats.pool_cleaner_armed,
            loops: stats.loops,
            open_connections: stats.open_connections,
            idle_connections: stats.idle_connections,
            waiting: stats.waiting,
            in_flight: stats.in_flight,
            buffered_body_bytes: stats.buffered_body_bytes,
            http2_streams_open: stats.http2_streams_open,
            http2_streams_opened: stats.http2_streams_opened,
            retry_budget: self
                .policies()
                .budget
                .stats(self.dispatcher().clock().now()),
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("stats", &self.stats())
            .finish()
    }
}

/// A request's or a client's headers as the builders' `Debug` shows them:
/// each field with its value, but a credential's — `Authorization`,
/// `Proxy-Authorization`, `Cookie`, or any value marked sensitive — as
/// `Sensitive`, the way `http` shows a sensitive one: builders are printed
/// and logged, and a credential set with `header` is not marked.
struct ShownHeaders<'a>(&'a http::HeaderMap);

impl std::fmt::Debug for ShownHeaders<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
        /// A hidden value, printed as `http` prints a sensitive one.
        struct Hidden;
        impl std::fmt::Debug for Hidden {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("Sensitive")
            }
        }
        let credential = |name: &http::HeaderName, value: &http::HeaderValue| {
            value.is_sensitive() || [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE].contains(name)
        };
        let shown = self.0.iter().map(|(name, value)| {
            let value: &dyn std::fmt::Debug = if credential(name, value) {
                &Hidden
            } else {
                value
            };
            (name, value)
        });
        f.debug_map().entries(shown).finish()
    }
}

/// Whether two clocks tell the same time: the same manual clock, or two
/// that are not manual (the system's, or the caller's own, which cannot be
/// told apart).
fn same_clock(a: &SharedClock, b: &SharedClock) -> bool {
    match (a.as_manual(), b.as_manual()) {
        (Some(a), Some(b)) => a.is(b),
        (None, None) => true,
        _ => false,
    }
}
