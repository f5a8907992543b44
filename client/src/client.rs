//! [`Client`]: the entry point, and the state its exchanges share.
//!
//! # The life of a request
//!
//! 1. [`RequestBuilder::send`](crate::RequestBuilder::send) validates and
//!    encodes the request on the caller's thread, fixes its deadline, and
//!    publishes the exchange ([`ClientShared::dispatch`]).
//! 2. The pool gives it an idle connection (pooled path: the connection is
//!    attached, the timeouts started on its loop, and the exchange posted
//!    to that loop), or a permit to open one (connect path: timeouts on the
//!    wheel, resolution on a resolver thread, the connect on the loop the
//!    group's chooser picks), or queues it until one of those is free.
//! 3. The connection's loop writes the request, decodes the response,
//!    offers the connection back to the pool and then ends the exchange,
//!    which wakes the caller's future.

use crate::config::ClientConfig;
use crate::conn;
use crate::error::{Error, InvalidRequest};
use crate::event_loop::{lock, EventLoopGroup};
use crate::events::EventListener;
use crate::exchange::Exchange;
use crate::pool::{Acquired, IdleConn, Pool, PoolLimits, Served};
use crate::request::RequestBuilder;
use crate::resolve::Resolver;
use crate::ResponseFuture;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;
use std::time::Duration;
use tickless_timer::{HashedWheelTimer, SharedClock, TimerStats};

/// An HTTP/1.1 client. Cheap to clone: clones share the loops, the wheel
/// and the pool. Closing it (or dropping the last clone) fails what is in
/// flight and joins every thread.
///
/// # Examples
///
/// ```no_run
/// let client = tickless_client::Client::builder().build()?;
/// let response = client.get("http://127.0.0.1:8080/").send().wait()?;
/// println!("{} {}", response.status(), response.text());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Client {
    handle: Arc<Handle>,
}

/// Closes the client when the last [`Client`] clone goes away (exchanges
/// hold [`ClientShared`] itself, so it cannot be the one to know).
struct Handle {
    shared: Arc<ClientShared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// What every exchange of a client shares.
pub(crate) struct ClientShared {
    pub(crate) config: ClientConfig,
    pub(crate) clock: SharedClock,
    pub(crate) wheel: HashedWheelTimer,
    pub(crate) group: Arc<EventLoopGroup>,
    pub(crate) pool: Pool,
    /// Shared by every TLS connection of the client.
    pub(crate) tls: Arc<rustls::ClientConfig>,
    resolver: Resolver,
    in_flight: Mutex<HashMap<u64, Arc<Exchange>>>,
    /// Pool-cleaner entries armed on the wheel (0 or 1), so snapshots can
    /// tell them from exchange timeouts.
    cleaner_armed: AtomicUsize,
    closed: AtomicBool,
    next_exchange_id: AtomicU64,
    next_conn_id: AtomicU64,
}

/// A snapshot of a client's timers and connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientStats {
    /// The hashed-wheel timer: entries armed now, fired, lag. Its `armed`
    /// count includes the pool cleaner's entry.
    pub wheel: TimerStats,
    /// Pool-cleaner entries armed on the wheel (it re-arms itself while the
    /// client is open).
    pub pool_cleaner_armed: usize,
    /// Each event loop's deadline heap, by loop index.
    pub loops: Vec<TimerStats>,
    /// Connections open (or opening), busy or idle; each holds a permit.
    pub open_connections: usize,
    /// Of those, idle in the pool.
    pub idle_connections: usize,
    /// Requests waiting for a connection.
    pub waiting: usize,
    /// Exchanges submitted and not yet ended.
    pub in_flight: usize,
}

impl ClientStats {
    /// Timeouts armed now for exchanges and connects, on the wheel and
    /// every loop together (the pool cleaner is not counted). Zero once
    /// every exchange has ended.
    pub fn armed_timers(&self) -> usize {
        let wheel = self.wheel.armed.saturating_sub(self.pool_cleaner_armed);
        wheel + self.loops.iter().map(|l| l.armed).sum::<usize>()
    }
}

impl Client {
    /// A builder with the defaults (see [`ClientBuilder`](crate::ClientBuilder)).
    pub fn builder() -> crate::ClientBuilder {
        crate::ClientBuilder::default()
    }

    pub(crate) fn start(config: ClientConfig) -> std::io::Result<Client> {
        // First: a bad root certificate fails before any thread starts.
        let tls = crate::tls::client_config(&config.tls)?;
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
            None => HashedWheelTimer::builder()
                .tick(config.wheel_tick())
                .wheel_size(config.wheel_size)
                .clock(clock.clone())
                .build()?,
        };
        let group = match &config.event_loop_group {
            Some(group) => group.clone(),
            None => {
                let mut builder = EventLoopGroup::builder()
                    .clock(clock.clone())
                    .spin_before_deadline(config.event_loop_spin);
                if let Some(loops) = config.event_loops {
                    builder = builder.threads(loops);
                }
                Arc::new(builder.build()?)
            }
        };
        let pool = Pool::new(PoolLimits {
            max_connections: config.max_connections,
            max_connections_per_host: config.max_connections_per_host,
            idle_timeout: config.pooled_connection_idle_timeout,
            ttl: config.connection_ttl,
        });
        let shared = Arc::new(ClientShared {
            config,
            clock,
            wheel,
            group,
            pool,
            tls,
            resolver: Resolver::default(),
            in_flight: Mutex::new(HashMap::new()),
            cleaner_armed: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            next_exchange_id: AtomicU64::new(1),
            next_conn_id: AtomicU64::new(1),
        });
        ClientShared::schedule_cleaner(&shared);
        Ok(Client {
            handle: Arc::new(Handle { shared }),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<ClientShared> {
        &self.handle.shared
    }

    /// A GET request to `uri`.
    pub fn get<U>(&self, uri: U) -> RequestBuilder
    where
        U: TryInto<http::Uri>,
        U::Error: std::fmt::Display,
    {
        self.request(http::Method::GET, uri)
    }

    /// A POST request to `uri`.
    pub fn post<U>(&self, uri: U) -> RequestBuilder
    where
        U: TryInto<http::Uri>,
        U::Error: std::fmt::Display,
    {
        self.request(http::Method::POST, uri)
    }

    /// A request with any method.
    pub fn request<U>(&self, method: http::Method, uri: U) -> RequestBuilder
    where
        U: TryInto<http::Uri>,
        U::Error: std::fmt::Display,
    {
        let uri = uri
            .try_into()
            .map_err(|e| InvalidRequest::Uri(e.to_string()));
        RequestBuilder::new(self.clone(), method, uri)
    }

    /// Sends an `http::Request` as it is.
    pub fn execute<B: Into<Vec<u8>>>(&self, request: http::Request<B>) -> ResponseFuture {
        let (parts, body) = request.into_parts();
        let mut builder = RequestBuilder::new(self.clone(), parts.method, Ok(parts.uri));
        builder = builder.headers(parts.headers).body(body);
        builder.send()
    }

    /// Stops accepting requests, fails every exchange in flight with
    /// [`Error::ClientClosed`], closes every connection, stops the wheel
    /// and joins every thread. Idempotent.
    pub fn close(&self) {
        self.handle.shared.close();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.handle.shared.closed.load(Ordering::Acquire)
    }

    /// The wheel's thread: where timeouts expire by default.
    pub fn wheel_thread_id(&self) -> Option<ThreadId> {
        self.handle.shared.wheel.thread_id()
    }

    /// The event loops.
    pub fn event_loop_group(&self) -> &Arc<EventLoopGroup> {
        &self.handle.shared.group
    }

    /// Timers armed, connections open, requests waiting, exchanges in flight.
    pub fn stats(&self) -> ClientStats {
        let shared = &self.handle.shared;
        let (open_connections, idle_connections) = shared.pool.counts();
        ClientStats {
            pool_cleaner_armed: shared.cleaner_armed.load(Ordering::Relaxed),
            wheel: shared.wheel.stats(),
            loops: shared.group.stats(),
            open_connections,
            idle_connections,
            waiting: shared.pool.waiting(),
            in_flight: lock(&shared.in_flight).len(),
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

impl ClientShared {
    pub(crate) fn next_conn_id(&self) -> u64 {
        self.next_conn_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn next_exchange_id(&self) -> u64 {
        self.next_exchange_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Publishes a new exchange and sets it going.
    pub(crate) fn submit(self: &Arc<Self>, exchange: Arc<Exchange>) {
        lock(&self.in_flight).insert(exchange.id, exchange.clone());
        // Checked after registering: `close` either sees the exchange in
        // the registry or this sees the flag.
        if self.is_closed() {
            exchange.finish(Err(Error::ClientClosed));
            return;
        }
        self.dispatch(exchange, true);
    }

    pub(crate) fn unregister(&self, id: u64) {
        lock(&self.in_flight).remove(&id);
    }

    /// Finds a connection for `exchange`: an idle one (if `allow_idle`), a
    /// new one, or a place in the queue.
    pub(crate) fn dispatch(self: &Arc<Self>, exchange: Arc<Exchange>, allow_idle: bool) {
        if exchange.is_done() {
            return;
        }
        let (acquired, expired) = self.pool.acquire(&exchange, self.clock.now(), allow_idle);
        self.close_idle(expired);
        match acquired {
            Acquired::Idle(idle) => self.run_on_idle(exchange, idle),
            Acquired::Permit => {
                exchange.timeouts.start(&exchange);
                self.connect(exchange);
            }
            // The request deadline bounds the wait.
            Acquired::Queued => exchange.timeouts.start(&exchange),
            Acquired::Closed => {
                exchange.finish(Err(Error::ClientClosed));
            }
        }
    }

    /// The pooled path: attach the connection, publish its loop as the
    /// timeouts' home, and run the exchange there. The timeouts start last:
    /// on the wheel here, or in event-loop mode inside the task on the
    /// connection's loop (`conn::start_on_idle`), a same-thread arm that
    /// wakes nothing.
    fn run_on_idle(self: &Arc<Self>, exchange: Arc<Exchange>, idle: IdleConn) {
        exchange.attach(idle.conn.clone());
        let scheduler = self.group.scheduler(idle.info.loop_index).clone();
        exchange.timeouts.rehome(&exchange, scheduler);
        if !self.config.use_event_loop_timeouts {
            exchange.timeouts.start(&exchange);
        }
        let (key, conn_id) = (idle.conn.key, idle.conn.conn_id);
        let task_exchange = exchange.clone();
        let posted = idle
            .conn
            .event_loop
            .execute(move |cx| conn::start_on_idle(cx, key, conn_id, task_exchange));
        if posted.is_err() {
            exchange.finish(Err(Error::ClientClosed));
        }
    }

    /// The connect path: `exchange` holds a permit. Resolves the host (off
    /// the loops unless it is an IP literal), then connects on the loop the
    /// group's chooser picks, where the connection stays for life.
    pub(crate) fn connect(self: &Arc<Self>, exchange: Arc<Exchange>) {
        if exchange.is_done() {
            self.release_permit(&exchange);
            return;
        }
        let port = exchange.origin.port;
        if let Ok(ip) = exchange.origin.host.parse::<IpAddr>() {
            self.connect_to(exchange, vec![SocketAddr::new(ip, port)]);
            return;
        }
        let client = self.clone();
        let job_exchange = exchange.clone();
        let job = Box::new(move || {
            let exchange = job_exchange;
            if exchange.is_done() {
                client.release_permit(&exchange);
                return;
            }
            let host = exchange.origin.host.clone();
            match (host.as_str(), port).to_socket_addrs() {
                Ok(addrs) => {
                    let addrs: Vec<SocketAddr> = addrs.collect();
                    exchange.listener.on_resolved(&host, &addrs);
                    client.connect_to(exchange, addrs);
                }
                Err(source) => {
                    client.release_permit(&exchange);
                    exchange.finish(Err(Error::Resolve { host, source }));
                }
            }
        });
        if self.resolver.submit(job).is_err() {
            self.release_permit(&exchange);
            exchange.finish(Err(Error::ClientClosed));
        }
    }

    fn connect_to(self: &Arc<Self>, exchange: Arc<Exchange>, addrs: Vec<SocketAddr>) {
        let event_loop = self.group.next();
        let task_exchange = exchange.clone();
        if event_loop
            .execute(move |cx| conn::connect(cx, task_exchange, addrs))
            .is_err()
        {
            self.release_permit(&exchange);
            exchange.finish(Err(Error::ClientClosed));
        }
    }

    /// Gives back the permit of a connection that was never opened.
    fn release_permit(self: &Arc<Self>, exchange: &Exchange) {
        if let Some(Served(waiter)) = self.pool.release(&exchange.origin) {
            self.connect(waiter);
        }
    }

    fn close_idle(&self, idle: Vec<IdleConn>) {
        for idle in idle {
            let (key, conn_id) = (idle.conn.key, idle.conn.conn_id);
            let _ = idle
                .conn
                .event_loop
                .execute(move |cx| conn::close_idle(cx, key, conn_id));
        }
    }

    /// The pool cleaner: a wheel task, in every timeout mode, that closes
    /// idle connections past their idle timeout or time to live.
    fn schedule_cleaner(shared: &Arc<ClientShared>) {
        let limits = [
            shared.config.pooled_connection_idle_timeout,
            shared.config.connection_ttl,
        ];
        let Some(shortest) = limits.into_iter().flatten().min() else {
            return;
        };
        let period = (shortest / 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        // A clock at the end of time (a manual one) has no next round.
        let Some(due) = shared.clock.now().checked_add(period) else {
            return;
        };
        let weak: Weak<ClientShared> = Arc::downgrade(shared);
        // Counted before arming and uncounted when it runs: a snapshot taken
        // in between counts it before the wheel does, so exchange timeouts
        // are at worst under-counted for a moment, never over-counted.
        shared.cleaner_armed.fetch_add(1, Ordering::Relaxed);
        let armed = shared.wheel.arm(due, move || {
            if let Some(shared) = weak.upgrade() {
                shared.cleaner_armed.fetch_sub(1, Ordering::Relaxed);
                if !shared.is_closed() {
                    shared.close_idle(shared.pool.evict_expired(shared.clock.now()));
                    ClientShared::schedule_cleaner(&shared);
                }
            }
        });
        if armed.is_err() {
            shared.cleaner_armed.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let (idle, waiting) = self.pool.close();
        drop(idle); // closed with their loops below
        for exchange in waiting {
            exchange.finish(Err(Error::ClientClosed));
        }
        let in_flight: Vec<_> = lock(&self.in_flight).drain().map(|(_, e)| e).collect();
        for exchange in in_flight {
            exchange.fail_and_abort(Error::ClientClosed, None);
        }
        self.group.shutdown();
        drop(self.wheel.stop());
        self.resolver.shutdown();
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

/// The listener of a request: the client's, and the request's own if it has one.
pub(crate) fn listener_for(
    client: &ClientShared,
    own: Option<Arc<dyn EventListener>>,
) -> Arc<dyn EventListener> {
    match own {
        Some(own) => Arc::new(crate::events::Both(client.config.listener.clone(), own)),
        None => client.config.listener.clone(),
    }
}
