//! [`Dispatcher`]: what every exchange of a client shares, and how an
//! exchange finds a connection.
//!
//! # The life of a request
//!
//! 1. The request is validated and encoded on the caller's thread, its
//!    deadline fixed, and the exchange submitted ([`Dispatcher::submit`]).
//! 2. The pool gives it an idle connection (pooled path: a task on that
//!    connection's loop attaches it and starts its timers there), or a
//!    permit to open one (connect path: timers on the wheel, resolution
//!    through the client's [`Resolve`] — for the first hop, the origin or
//!    its proxy, and for a `socks5://` proxy the origin too — then the
//!    connect, the proxy's handshake and TLS on the loop the group's
//!    chooser picks), or queues it until one of those is free. The pool
//!    matches requests and connections by [`Route`]: what a connection can
//!    carry, the origin itself or through which proxy.
//! 3. The connection's loop writes the request, decodes the response,
//!    offers the connection back to the pool ([`ConnOwner::offer`]) and then
//!    ends the exchange, which wakes the caller's future.
//!
//! HTTP/2 connections are not checked out but shared ([`Shared`]): a
//! request to an origin that has one goes to the one with the most streams
//! free as a new stream, before the pool is asked; when each is at its
//! stream limit, another is opened if the origin may have more
//! ([`http2_max_connections_per_origin`](crate::ClientBuilder::http2_max_connections_per_origin)),
//! and the requests that come meanwhile wait for it; at the most, a
//! request waits for a stream on the connection with the fewest waiting
//! — until its server lowers its limit below the streams it has open, or
//! to 0: then it goes again, if it has a place elsewhere
//! ([`ConnOwner::has_place_besides`]). Over TLS, where HTTP/2 is learnt
//! by ALPN, the requests to an origin go through the pool until a
//! connection has learnt it: shared then, it takes those queued for its
//! origin ([`ConnOwner::share`]), and one that queues just after it did
//! looks at the shared connections again.
//!
//! Connections call back up only through [`ConnOwner`], which the
//! dispatcher implements.

mod pool;
mod resolve;

use crate::config::ClientConfig;
use crate::conn::{self, ConnEnv, ConnOwner, IdleConn, Offered, SharedConn};
use crate::error::{Error, InvalidRequest, ProxyError};
use crate::event_loop::{without_pinning, EventLoopGroup};
use crate::exchange::{
    ConnSlot, Exchange, InFlight, KeptAway, Pacing, Pipe, PlaceCell, Rewound, StandingEnv,
};
use crate::net::proxy::{ProxyScheme, ProxySettings};
use crate::net::{Origin, Resolve, ResolveAnswer, Route};
use crate::sync::lock;
use pool::{Acquired, Offer, Pool, PoolLimits, Pooled, Waiter};
use resolve::ThreadedResolver;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};
use tickless_timer::{HashedWheelTimer, SharedClock, TimerStats, WheelTimeout};

/// Where [`Dispatcher::close`] is.
enum Closing {
    Open,
    /// Under way on this thread.
    By(ThreadId),
    Closed,
}

/// An origin's HTTP/2 connections, shared by its requests (not checked
/// out): at most
/// [`http2_max_connections_per_origin`](crate::ClientBuilder::http2_max_connections_per_origin)
/// open, and one more at a time being opened.
#[derive(Default)]
struct Shared {
    /// Taking streams, oldest first.
    open: Vec<SharedConn>,
    opening: Option<Opening>,
}

/// A connection being opened for the exchange `opener` — the first to an
/// origin the client knows in advance speaks HTTP/2, or another when every
/// open one is at its stream limit: `waiting` wait for it.
struct Opening {
    opener: u64,
    /// Held weakly, as the pool's queues hold their waiters (the client's
    /// registry of exchanges in flight holds them until they end): one
    /// that ends while it waits (its deadline passed, it was cancelled)
    /// frees its request and callbacks as soon as its caller lets go, not
    /// once the connection has opened. Upgraded after the unlock (see
    /// [`upgraded`]).
    waiting: Vec<Weak<Exchange>>,
}

/// The exchanges of `waiting` that are still alive and have not ended.
/// Called after the lock they were taken under is let go: an ended one
/// upgraded here may be dropped last, and its callbacks may hold the last
/// `Client`, whose drop closes the dispatcher (see [`crate::sync`]).
fn upgraded(waiting: Vec<Weak<Exchange>>) -> Vec<Arc<Exchange>> {
    waiting
        .into_iter()
        .filter_map(|waiter| waiter.upgrade())
        .filter(|exchange| !exchange.is_done())
        .collect()
}

/// Where [`Dispatcher::route_shared`] sends a request.
enum Routed {
    /// To a shared connection, or to wait for the one being opened.
    Taken,
    /// Through the pool, like any request.
    Pool(Arc<Exchange>),
    /// Through the pool, to open the connection the others wait for.
    Opener(Arc<Exchange>),
}

impl Shared {
    /// The open connection with the most streams free (the oldest of
    /// equals) but those in `avoid` — where the attempts of its request a
    /// hedged copy keeps away from run ([`Exchange::kept_away`], read
    /// before the lock) — and whether it has one free.
    fn emptiest(&self, avoid: &KeptAway) -> Option<(SharedConn, bool)> {
        self.open
            .iter()
            .filter(|conn| !avoid.avoids(conn.conn.event_loop.index(), conn.conn.source))
            .map(|conn| (conn, conn.load.free()))
            .min_by_key(|&(_, free)| std::cmp::Reverse(free))
            .map(|(conn, free)| (conn.clone(), free > 0))
    }

    /// Whether a request routed now would find a place other than the
    /// connection `conn_id` (see [`Dispatcher::route_shared`]): one with a
    /// stream free but those in `avoid` (see [`emptiest`](Self::emptiest)),
    /// the one being opened — unless it is a hedged copy (`backup`), which
    /// never waits for it — or a new one if `room`.
    fn has_place_besides(&self, conn_id: u64, avoid: &KeptAway, backup: bool, room: bool) -> bool {
        room || (!backup && self.opening.is_some())
            || self.open.iter().any(|conn| {
                conn.id != conn_id
                    && conn.load.free() > 0
                    && !avoid.avoids(conn.conn.event_loop.index(), conn.conn.source)
            })
    }

    fn is_unused(&self) -> bool {
        self.open.is_empty() && self.opening.is_none()
    }
}

/// What every exchange of a client shares. See the [module documentation](self).
pub(crate) struct Dispatcher {
    env: ConnEnv,
    wheel: HashedWheelTimer,
    pool: Pool<Exchange, IdleConn>,
    /// HTTP/2 connections, by route.
    shared: Mutex<HashMap<Route, Shared>>,
    /// The default resolver: its threads are the client's (joined at
    /// close, but for one stuck in a lookup), started only if it is used.
    own_resolver: Arc<ThreadedResolver>,
    /// The resolver in use: the caller's, or `own_resolver`.
    resolver: Arc<dyn Resolve>,
    /// Which proxy a request goes through, settled at `build()`.
    proxies: ProxySettings,
    in_flight: Arc<InFlight>,
    /// Pool-cleaner entries armed on the wheel (0 or 1), so snapshots can
    /// tell them from exchange timeouts.
    cleaner_armed: AtomicUsize,
    /// The cleaner's entry on the wheel, cancelled at close: the stop of
    /// the wheel drops it unrun, and `cleaner_armed` would count it still.
    cleaner: Mutex<Option<WheelTimeout>>,
    closed: AtomicBool,
    closing: Mutex<Closing>,
    closed_now: Condvar,
    /// Body bytes buffered by every exchange.
    body_meter: Arc<AtomicUsize>,
    /// Recent body sizes: whether blocking waits yield before they sleep.
    pacing: Arc<Pacing>,
    me: Weak<Dispatcher>,
    /// Connections offered back ([`ConnOwner::offer`]), kept or not: what
    /// tests count of the pool's work a response made.
    #[cfg(test)]
    offers: AtomicUsize,
}

/// A snapshot of a dispatcher's timers and connections.
pub(crate) struct DispatchStats {
    pub(crate) wheel: TimerStats,
    pub(crate) pool_cleaner_armed: usize,
    pub(crate) loops: Vec<TimerStats>,
    pub(crate) open_connections: usize,
    pub(crate) idle_connections: usize,
    pub(crate) waiting: usize,
    pub(crate) in_flight: usize,
    pub(crate) buffered_body_bytes: usize,
    pub(crate) http2_streams_open: usize,
    pub(crate) http2_streams_opened: u64,
}

impl Waiter for Exchange {
    fn key(&self) -> &Route {
        self.route()
    }
    fn is_done(&self) -> bool {
        Exchange::is_done(self)
    }
    fn wants_fresh(&self) -> bool {
        self.retried.load(Ordering::Acquire)
    }
    fn place(&self) -> &PlaceCell {
        &self.place
    }
}

impl Pooled for IdleConn {
    fn key(&self) -> &Route {
        &self.route
    }
    fn id(&self) -> u64 {
        self.info.id
    }
    fn idle_since(&self) -> Instant {
        self.idle_since
    }
    fn created(&self) -> Instant {
        self.created
    }
    fn server_idle_limit(&self) -> Option<Duration> {
        self.server_idle_limit
    }
}

impl Dispatcher {
    /// Starts the dispatcher's cleaner; `wheel` and `group` are the client's.
    pub(crate) fn start(
        config: ClientConfig,
        tls: conn::TlsConfig,
        wheel: HashedWheelTimer,
        group: Arc<EventLoopGroup>,
    ) -> Arc<Dispatcher> {
        let pool = Pool::new(PoolLimits {
            max_connections: config.max_connections,
            max_connections_per_host: config.max_connections_per_host,
            idle_timeout: config.pooled_connection_idle_timeout,
            ttl: config.connection_ttl,
        });
        let own_resolver = Arc::new(default_resolver(&config));
        let resolver = config
            .resolver
            .clone()
            .unwrap_or_else(|| own_resolver.clone());
        let proxies = if !config.proxies.is_empty() {
            ProxySettings::listed(config.proxies.clone())
        } else if config.env_proxies {
            // Not `std::env::var`, which has a value that is not Unicode
            // unset: the requests it would take would go straight.
            ProxySettings::from_env(&|name| {
                std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
            })
        } else {
            ProxySettings::default()
        };
        let dispatcher = Arc::new_cyclic(|me| Dispatcher {
            env: ConnEnv {
                clock: config.clock.clone(),
                config,
                tls,
                standing: StandingEnv::new(wheel.clone()),
                group,
                streams: Default::default(),
            },
            wheel,
            pool,
            shared: Mutex::default(),
            own_resolver,
            resolver,
            proxies,
            in_flight: Arc::default(),
            cleaner_armed: AtomicUsize::new(0),
            cleaner: Mutex::new(None),
            closed: AtomicBool::new(false),
            closing: Mutex::new(Closing::Open),
            closed_now: Condvar::new(),
            body_meter: Arc::default(),
            pacing: Arc::default(),
            me: me.clone(),
            #[cfg(test)]
            offers: AtomicUsize::new(0),
        });
        dispatcher.schedule_cleaner();
        dispatcher
    }

    pub(crate) fn config(&self) -> &ClientConfig {
        &self.env.config
    }

    pub(crate) fn clock(&self) -> &SharedClock {
        &self.env.clock
    }

    /// How a request to `origin` goes: straight, or through which proxy;
    /// an error if the proxy environment variable that would take it is
    /// not a proxy URL.
    pub(crate) fn route_for(&self, origin: &Origin) -> Result<Route, InvalidRequest> {
        Ok(Route::new(origin, self.proxies.for_origin(origin)?))
    }

    pub(crate) fn wheel(&self) -> &HashedWheelTimer {
        &self.wheel
    }

    pub(crate) fn group(&self) -> &Arc<EventLoopGroup> {
        &self.env.group
    }

    /// Where exchanges register while in flight.
    pub(crate) fn in_flight(&self) -> &Arc<InFlight> {
        &self.in_flight
    }

    /// The client's recent body sizes, for its exchanges' waits.
    pub(crate) fn pacing(&self) -> &Arc<Pacing> {
        &self.pacing
    }

    /// What the client's bodies have buffered, counted by their pipes.
    pub(crate) fn body_meter(&self) -> &Arc<AtomicUsize> {
        &self.body_meter
    }

    /// Starts the thread that reads an upload from `reader` into `pipe`
    /// (never an event loop: a `Read` blocks). It ends at the end of the
    /// reader, once it has given the body's declared `length` (it is not
    /// read further), at its first error or panic (either fails the
    /// request), or when the exchange no longer wants the body (its pipe's
    /// reader goes).
    ///
    /// The thread is not joined, not even by `close`: it may be inside the
    /// caller's `read`, which can block for ever (a pipe, a terminal). Once
    /// the exchange has ended, the pump ends when that `read` returns.
    pub(crate) fn spawn_pump(
        &self,
        reader: Box<dyn std::io::Read + Send>,
        length: Option<u64>,
        pipe: Arc<crate::exchange::Pipe>,
    ) -> std::io::Result<()> {
        let builder = thread::Builder::new().name("tickless-upload".into());
        without_pinning(|| builder.spawn(move || pump_or_fail(reader, length, &pipe)))?;
        Ok(())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn owner(&self) -> Arc<dyn ConnOwner> {
        self.me.upgrade().expect("a dispatcher in use is alive")
    }

    /// Publishes a new exchange and sets it going.
    pub(crate) fn submit(&self, exchange: Arc<Exchange>) {
        self.submit_at(exchange, None);
    }

    /// [`submit`](Self::submit) with `now`, a reading of the clock taken
    /// just before (the request's submission, for its first attempt): the
    /// pool looks at idle connections' expiry as of then.
    pub(crate) fn submit_at(&self, exchange: Arc<Exchange>, now: Option<Instant>) {
        exchange.register();
        // Checked after registering: `close` either sees the exchange in
        // the registry or this sees the flag.
        if self.is_closed() {
            exchange.finish_err(Error::ClientClosed);
            return;
        }
        self.dispatch_at(exchange, true, now);
    }

    /// Finds a connection for `exchange`: a shared HTTP/2 one or an idle
    /// one (if `allow_idle`), a new one, or a place in the queue.
    fn dispatch(&self, exchange: Arc<Exchange>, allow_idle: bool) {
        self.dispatch_at(exchange, allow_idle, None);
    }

    /// [`dispatch`](Self::dispatch) as of `now` if given, else of a clock
    /// read here.
    fn dispatch_at(&self, exchange: Arc<Exchange>, allow_idle: bool, now: Option<Instant>) {
        if exchange.is_done() {
            return;
        }
        // A retry after a failure (`allow_idle` off) takes no connection
        // open already: no shared HTTP/2 one either (see `route_shared`).
        let (exchange, opener) = match self.route_shared(exchange, !allow_idle) {
            Routed::Taken => return,
            Routed::Pool(exchange) => (exchange, false),
            Routed::Opener(exchange) => (exchange, true),
        };
        // Routed to the pool, not queued yet: told on the thread that
        // dispatches (a test holds a request here, in its subscriber).
        #[cfg(feature = "tracing")]
        tracing::trace!(request = exchange.id, opener, "to the pool");
        let (acquired, to_close) = self.pool.acquire(
            &exchange,
            now.unwrap_or_else(|| self.env.clock.now()),
            allow_idle,
        );
        self.close_idle(to_close);
        if opener && !matches!(acquired, Acquired::Permit) {
            // It opens nothing (an idle connection, a place in the queue):
            // those waiting for it go again.
            self.not_shared(exchange.route(), exchange.id);
        }
        match acquired {
            Acquired::Idle(idle) => self.run_on_idle(exchange, idle),
            Acquired::Permit => {
                exchange.start();
                self.connect(exchange);
            }
            // The request deadline bounds the wait.
            Acquired::Queued { wants_room } => {
                // Routed to the pool for want of a shared connection, one
                // may have come since (see `shared_since_routed`): it goes
                // there — unless what took it out of the queue meanwhile
                // serves it. (A retry after a failure waits for a new one.)
                if allow_idle
                    && !opener
                    && self.shared_since_routed(&exchange)
                    && self.pool.withdraw(&exchange)
                {
                    return self.dispatch_at(exchange, allow_idle, now);
                }
                exchange.wait_in_queue(self.env.group.queued());
                exchange.start();
                if wants_room {
                    self.retire_an_idle_shared();
                }
            }
            Acquired::Closed => {
                exchange.finish_err(Error::ClientClosed);
            }
        }
    }

    /// Sends `exchange` to the shared HTTP/2 connection of its origin with
    /// a free stream; else has it wait for the one being opened; else
    /// opens another, if the origin may have one more; else has it wait
    /// for a stream on the connection with the fewest waiting. Gives it
    /// back for the pool when its origin has no HTTP/2 connection (yet),
    /// or when it is a hedged copy with no connection to go on but those
    /// of the attempts it keeps away from.
    ///
    /// `fresh`: a retry after a failure, which takes no open connection —
    /// one may be as stale as the one that failed under it, and would
    /// leave it no retry — but waits for the one being opened, or opens
    /// one, as the first request of its origin does.
    fn route_shared(&self, exchange: Arc<Exchange>, fresh: bool) -> Routed {
        if !self.may_share(&exchange) {
            return Routed::Pool(exchange);
        }
        let https = exchange.origin.scheme == crate::net::Scheme::Https;
        let h2_known = self.env.config.versions.h2_known(https);
        let opening = || Opening {
            opener: exchange.id,
            waiting: Vec::new(),
        };
        let avoid = exchange.kept_away();
        let mut shared = lock(&self.shared);
        let Some(entry) = shared.get_mut(exchange.route()) else {
            if !h2_known {
                return Routed::Pool(exchange);
            }
            // This one opens it; those that come meanwhile wait.
            let entry = Shared {
                open: Vec::new(),
                opening: Some(opening()),
            };
            shared.insert(exchange.route().clone(), entry);
            return Routed::Opener(exchange);
        };
        let emptiest = if fresh { None } else { entry.emptiest(&avoid) };
        if exchange.is_backup() && !matches!(emptiest, Some((_, true))) {
            // A hedged copy with no other connection that has a stream
            // free: one of its own, through the pool — shared if the
            // origin may have one more, else serving the copy alone.
            drop(shared);
            return Routed::Pool(exchange);
        }
        let conn = match (emptiest, &mut entry.opening) {
            (Some((conn, true)), _) => conn,
            (_, Some(opening)) => {
                opening.waiting.push(Arc::downgrade(&exchange));
                drop(shared);
                // The request deadline bounds the wait.
                exchange.start();
                return Routed::Taken;
            }
            (emptiest, None) => {
                let room = self.may_open_another(entry, exchange.route());
                match emptiest {
                    Some((conn, _)) if !room => conn,
                    _ => {
                        // Every one is at its limit (or there is none):
                        // another, which those that come meanwhile wait for.
                        entry.opening = Some(opening());
                        return Routed::Opener(exchange);
                    }
                }
            }
        };
        conn.load.reserve();
        drop(shared);
        self.run_on_shared(exchange, conn);
        Routed::Taken
    }

    /// Whether `exchange` may ever go on a shared HTTP/2 connection. A
    /// proxy that forwards plain requests speaks HTTP/1.1; so does
    /// cleartext without prior knowledge; and without keep-alive no
    /// connection is shared (see [`share`](ConnOwner::share)). Such a
    /// request never finds a shared connection: it goes to the pool without
    /// taking the lock.
    fn may_share(&self, exchange: &Exchange) -> bool {
        let https = exchange.origin.scheme == crate::net::Scheme::Https;
        self.env.config.keep_alive
            && self.env.config.versions.may_speak_h2(https)
            && !exchange.route().forwards()
    }

    /// Whether `exchange`, just queued in the pool, would now be routed by
    /// [`route_shared`](Self::route_shared) — to a shared connection of its
    /// origin, or to wait for one being opened — rather than to the pool
    /// again. One may have come since `route_shared` looked: over TLS,
    /// HTTP/2 is learnt by ALPN, and a connection that has just learnt it
    /// is shared and takes the origin's queue ([`ConnOwner::share`]) — if
    /// that was before the request queued, nothing else would take it (no
    /// HTTP/1.1 connection of its origin serves the queue), and it would
    /// wait for its deadline, or for ever without one. `share` adds the
    /// connection to the shared list before it takes the queue, and this
    /// looks at the list after the request queued: either sees the other.
    /// A request that may never be shared takes no lock.
    fn shared_since_routed(&self, exchange: &Exchange) -> bool {
        if !self.may_share(exchange) {
            return false;
        }
        let avoid = exchange.kept_away();
        let shared = lock(&self.shared);
        // As in `route_shared`: a hedged copy goes only where a stream is
        // free, else through the pool (it would come back here at once).
        shared.get(exchange.route()).is_some_and(|entry| {
            !exchange.is_backup() || matches!(entry.emptiest(&avoid), Some((_, true)))
        })
    }

    /// Sends on the requests that waited for a connection that will not be
    /// shared: to wait for a stream on the origin's open connection with
    /// the most free, if it has one — not to open the next, which could
    /// fail as this one did — else through the dispatch again (one of them
    /// opens the next).
    fn resettle(&self, origin: &Route, orphans: Vec<Weak<Exchange>>) {
        for exchange in upgraded(orphans) {
            self.resettle_one(origin, exchange);
        }
    }

    /// [`resettle`](Self::resettle) for one.
    fn resettle_one(&self, origin: &Route, exchange: Arc<Exchange>) {
        if let Err(exchange) = self.wait_on_shared(origin, exchange) {
            self.dispatch(exchange, true);
        }
    }

    /// Fails the requests that waited for the connection to `origin` whose
    /// opening failed with `error`, each with a copy of it, as its opener
    /// fails: had each opened the next in turn, each would have failed
    /// after a whole lookup, connect or handshake of its own — the last
    /// ones at their deadline. (Chrome fails the requests pending on an
    /// HTTP/2 session that could not be established.) An error no opening
    /// fails with has no copy: such a request goes again, as
    /// [`resettle`](Self::resettle) sends it.
    fn fail_waiting(&self, origin: &Route, waiting: Vec<Weak<Exchange>>, error: &Error) {
        for exchange in upgraded(waiting) {
            match error.copy_of_opening_failure() {
                // Unprocessed (a proxy's failure) as this request is, not
                // as the opener's was.
                Some(copy) => {
                    exchange.finish_err(exchange.unprocessed(copy));
                }
                None => self.resettle_one(origin, exchange),
            }
        }
    }

    /// Whether the origin of `entry` may have one more HTTP/2 connection
    /// (`http2_max_connections_per_origin`, and the pool's permits).
    fn may_open_another(&self, entry: &Shared, route: &Route) -> bool {
        entry.open.len() < self.env.config.http2.max_connections_per_origin
            && self.pool.has_room(route)
    }

    /// Has `exchange` wait for a stream on the shared connection of
    /// `origin` with the most free; gives it back if there is none.
    fn wait_on_shared(&self, origin: &Route, exchange: Arc<Exchange>) -> Result<(), Arc<Exchange>> {
        let avoid = exchange.kept_away();
        let open = lock(&self.shared)
            .get(origin)
            .and_then(|shared| shared.emptiest(&avoid))
            .map(|(conn, _)| conn);
        let Some(conn) = open else {
            return Err(exchange);
        };
        conn.load.reserve();
        self.run_on_shared(exchange, conn);
        Ok(())
    }

    /// A new stream on a shared HTTP/2 connection: a task on its loop
    /// attaches the exchange and starts its timers there, as for the
    /// pooled path. A connection gone meanwhile leaves the list, and the
    /// request goes again.
    fn run_on_shared(&self, exchange: Arc<Exchange>, shared: SharedConn) {
        if !self.env.config.use_event_loop_timeouts {
            exchange.start();
        } else if shared.conn.event_loop.keeps_deadlines_apart() {
            exchange.start_on_loop_of(&shared.conn);
        }
        let owner = self.owner();
        let source = shared.conn.source;
        let id = shared.id;
        let task_exchange = exchange.clone();
        let task = Box::new(move |cx: &mut crate::event_loop::LoopContext<'_>| {
            if let Err(exchange) = conn::start_on_shared(cx, source, task_exchange) {
                owner.unshare(exchange.route(), id);
                owner.redispatch(exchange, true);
            }
        });
        let posted = exchange.post_for_driver(&shared.conn.event_loop, task);
        if posted.is_err() {
            exchange.finish_err(Error::ClientClosed);
        }
    }

    /// The pooled path: a task on the connection's loop attaches it and
    /// starts the timers there — in event-loop mode a same-thread arm that
    /// wakes nothing. On the wheel they start at once, from here; so do
    /// they on a loop whose turns wait for an executor's worker, on that
    /// loop, whose deadline keeper keeps them (see
    /// [`EventLoop::keeps_deadlines_apart`](crate::event_loop::EventLoop::keeps_deadlines_apart)):
    /// the task may wait there past the request deadline.
    fn run_on_idle(&self, exchange: Arc<Exchange>, idle: IdleConn) {
        if !self.env.config.use_event_loop_timeouts {
            exchange.start_holding(idle.conn.standing.clone());
        } else if idle.conn.event_loop.keeps_deadlines_apart() {
            exchange.start_on_loop_of(&idle.conn);
        }
        let owner = self.owner();
        let source = idle.conn.source;
        let task_exchange = exchange.clone();
        let task = Box::new(move |cx: &mut crate::event_loop::LoopContext<'_>| {
            if let Err(exchange) = conn::start_on_idle(cx, source, task_exchange) {
                owner.redispatch(exchange, true);
            }
        });
        let posted = exchange.post_for_driver(&idle.conn.event_loop, task);
        if posted.is_err() {
            exchange.finish_err(Error::ClientClosed);
        }
    }

    /// The connect path: `exchange` holds a permit. Resolves the first hop
    /// (the origin, or the proxy) — and for a `socks5://` proxy, which
    /// wants an address, the origin too — then connects on the loop the
    /// group's chooser picks, where the connection stays for life. Picked
    /// here, on the thread that submits (see `EventLoopGroup::next`), not
    /// on the resolver's.
    fn connect(&self, exchange: Arc<Exchange>) {
        if exchange.is_done() {
            self.released(exchange.route(), exchange.id);
            return;
        }
        let event_loop = self.env.group.next(exchange.avoided_loop()).clone();
        // Its home from now on: a blocking wait for it on this loop's
        // thread (told there while the name is looked up, say) fails
        // rather than stop the loop its connection needs.
        exchange.bound_for(&event_loop);
        let route = exchange.route().clone();
        let (host, port) = route.first_hop();
        let socks_resolves_here = route
            .proxy()
            .is_some_and(|proxy| proxy.scheme() == ProxyScheme::Socks5);
        let host = host.to_owned();
        let first_hop = match route.proxy() {
            Some(_) => Hop::Proxy,
            None => Hop::Origin,
        };
        self.lookup(
            exchange,
            first_hop,
            &host,
            port,
            move |dispatcher, exchange, addrs| {
                if !socks_resolves_here {
                    return dispatcher.connect_to(&event_loop, exchange, addrs, None);
                }
                let (origin_host, origin_port) =
                    (exchange.origin.host.clone(), exchange.origin.port);
                dispatcher.lookup(
                    exchange,
                    Hop::Origin,
                    &origin_host,
                    origin_port,
                    move |dispatcher, exchange, origin| {
                        let socks = conn::SocksTargets::new(&addrs, origin);
                        dispatcher.connect_to(&event_loop, exchange, addrs, socks);
                    },
                );
            },
        );
    }

    /// Finds the addresses of `host`, the `hop`'s, for `exchange` — an override of
    /// [`ClientBuilder::resolve`](crate::ClientBuilder::resolve) (for a
    /// name or an IP literal), an IP literal as it is, else through the
    /// resolver — and goes on with `then`, on whichever
    /// thread the answer comes. A failed lookup fails the exchange, with
    /// an error naming the hop, and gives its permit back.
    fn lookup(
        &self,
        exchange: Arc<Exchange>,
        hop: Hop,
        host: &str,
        port: u16,
        then: impl FnOnce(&Dispatcher, Arc<Exchange>, Vec<SocketAddr>) + Send + 'static,
    ) {
        // An override before an IP literal: it may stand for one too. Keyed
        // by one function from both sides, so they match as URLs do; the
        // one for this port before the one for every port.
        let overrides = &self.env.config.resolve_overrides;
        let overridden = (!overrides.is_empty())
            .then(|| {
                let mut key = (crate::net::override_key(host), Some(port));
                overrides.get(&key).or_else(|| {
                    key.1 = None;
                    overrides.get(&key)
                })
            })
            .flatten();
        if let Some(addrs) = overridden {
            let addrs = at_port_if_none(addrs.iter().copied(), port);
            exchange
                .listener
                .on_resolved(&host.to_ascii_lowercase(), &addrs);
            return then(self, exchange, addrs);
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return then(self, exchange, vec![SocketAddr::new(ip, port)]);
        }
        let host = host.to_ascii_lowercase();
        // The permit goes back as soon as the exchange ends (a timeout, a
        // cancel), not when the resolver answers: a resolver stuck for
        // seconds would otherwise hold the origin's connections.
        let (weak, route, opener) = (self.me.clone(), exchange.route().clone(), exchange.id);
        let permit_back = Box::new(move || {
            if let Some(dispatcher) = weak.upgrade() {
                dispatcher.released(&route, opener);
            }
        });
        if !exchange.hold(permit_back) {
            return;
        }
        let weak = self.me.clone();
        let asked = host.clone();
        let answer = ResolveAnswer::new(move |result| {
            let Some(permit_back) = exchange.unhold() else {
                return; // Ended meanwhile: the permit went back then.
            };
            let Some(dispatcher) = weak.upgrade() else {
                exchange.finish_err(Error::ClientClosed);
                return;
            };
            match result {
                // The permit goes on, with the connection.
                Ok(addrs) => {
                    // Port 0, as `getaddrinfo` answers (and resolvers
                    // written for reqwest, whose hyper fills the port in):
                    // the hop's port, as for an override.
                    let addrs = at_port_if_none(addrs, port);
                    exchange.listener.on_resolved(&host, &addrs);
                    then(&dispatcher, exchange, addrs);
                }
                Err(source) => {
                    // Those waiting for the connection fail with it, as
                    // when it fails to connect (see `opening_failed`):
                    // taken before the permit goes back, which would send
                    // them again.
                    let waiting = dispatcher.take_opening(exchange.route(), exchange.id);
                    permit_back();
                    let error = match (dispatcher.is_closed(), hop) {
                        (true, _) => Error::ClientClosed,
                        (false, Hop::Origin) => Error::Resolve { host, source },
                        (false, Hop::Proxy) => exchange.proxy_failure(ProxyError::Resolve(source)),
                    };
                    dispatcher.fail_waiting(exchange.route(), waiting, &error);
                    exchange.finish_err(error);
                }
            }
        });
        // The resolver is the caller's code, called on whichever thread
        // needs a connection — the caller's in `send`, a loop's, the
        // wheel's as a request that held a permit ends — in the middle of
        // the client's own work there. A panic stays here: its answer,
        // dropped as it unwinds, fails this request alone.
        let resolve = || self.resolver.resolve(&asked, port, answer);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(resolve));
    }

    /// Opens a connection for `exchange` to `addrs` (the first hop) on
    /// `event_loop`; `socks` are the origin's addresses for a `socks5://`
    /// proxy, each tried in turn until the proxy reaches one.
    fn connect_to(
        &self,
        event_loop: &Arc<crate::event_loop::EventLoop>,
        exchange: Arc<Exchange>,
        addrs: Vec<SocketAddr>,
        socks: Option<conn::SocksTargets>,
    ) {
        let (owner, task_exchange) = (self.owner(), exchange.clone());
        if event_loop
            .execute(move |cx| conn::connect(cx, owner, task_exchange, addrs, socks))
            .is_err()
        {
            self.released(exchange.route(), exchange.id);
            exchange.finish_err(Error::ClientClosed);
        }
    }

    /// A request waits for the total limit and the pool had no idle
    /// connection to close for it: an HTTP/2 connection with no stream
    /// holds a permit just as well, outside the pool, and would hold it
    /// until its idle timeout (or for ever, without one). One such is
    /// taken out of the shared list now — no request goes to it any more,
    /// nor is it picked twice — and retired on its loop: closed there at
    /// once if it still has no stream, else once its last one ends. The
    /// permit it gives back serves the oldest waiter (see the pool).
    ///
    /// A connection whose last stream is ending as the request queues may
    /// still count it here: it asks the pool itself once it has published
    /// its count of none ([`ConnOwner::permit_wanted`]), so one of the two
    /// sees the other (the request is queued before this looks).
    fn retire_an_idle_shared(&self) {
        let idle = {
            let mut shared = lock(&self.shared);
            let found = shared.iter().find_map(|(route, entry)| {
                let index = entry.open.iter().position(|conn| conn.load.is_idle())?;
                Some((route.clone(), index))
            });
            let Some((route, index)) = found else {
                return;
            };
            let Some(entry) = shared.get_mut(&route) else {
                return;
            };
            let idle = entry.open.remove(index);
            if entry.is_unused() {
                shared.remove(&route);
            }
            idle
        };
        let source = idle.conn.source;
        let _ = idle
            .conn
            .event_loop
            .execute(move |cx| conn::retire_shared(cx, source));
    }

    fn close_idle(&self, idle: Vec<IdleConn>) {
        for idle in idle {
            let source = idle.conn.source;
            let _ = idle
                .conn
                .event_loop
                .execute(move |cx| conn::close_idle(cx, source));
        }
    }

    /// The pool cleaner: a wheel task, in every timeout mode, that closes
    /// idle connections past their idle timeout or time to live — the
    /// client's, or the shorter one a server announced (`Keep-Alive:
    /// timeout=N`). With neither of the client's set, it runs only while
    /// an idle connection has its server's limit (one offered to the pool
    /// starts it: [`Dispatcher::offer`]), once a [`SERVER_LIMIT_ROUND`]. At
    /// most one is armed at a time.
    fn schedule_cleaner(&self) {
        let config = &self.env.config;
        let limits = [config.pooled_connection_idle_timeout, config.connection_ttl];
        let period = match limits.into_iter().flatten().min() {
            Some(shortest) => {
                (shortest / 2).clamp(Duration::from_millis(10), Duration::from_secs(1))
            }
            None if self.pool.holds_server_limited() => SERVER_LIMIT_ROUND,
            None => return,
        };
        // A clock at the end of time (a manual one) has no next round.
        let Some(due) = self.env.clock.now().checked_add(period) else {
            return;
        };
        let weak = self.me.clone();
        // Armed under the lock, and not once closed: `cancel_cleaner` then
        // finds every entry armed before it, and none comes after. Not
        // while one is armed: an offer may start one as the last round
        // ends and schedules the next.
        let mut cleaner = lock(&self.cleaner);
        if self.is_closed() || self.cleaner_armed.load(Ordering::Relaxed) > 0 {
            return;
        }
        // Counted before arming and uncounted when it runs: a snapshot taken
        // in between counts it before the wheel does, so exchange timeouts
        // are at worst under-counted for a moment, never over-counted.
        self.cleaner_armed.fetch_add(1, Ordering::Relaxed);
        let armed = self.wheel.arm(due, move || {
            if let Some(dispatcher) = weak.upgrade() {
                dispatcher.cleaner_armed.fetch_sub(1, Ordering::Relaxed);
                if !dispatcher.is_closed() {
                    let now = dispatcher.env.clock.now();
                    dispatcher.close_idle(dispatcher.pool.evict_expired(now));
                    dispatcher.schedule_cleaner();
                }
            }
        });
        match armed {
            Ok(entry) => *cleaner = Some(entry),
            Err(_) => {
                self.cleaner_armed.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Takes the cleaner's entry off the wheel, if it has not run (when it
    /// has, it uncounted itself).
    fn cancel_cleaner(&self) {
        let entry = lock(&self.cleaner).take();
        if entry.is_some_and(|entry| entry.cancel()) {
            self.cleaner_armed.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Connections offered back to the pool so far, kept or not.
    #[cfg(test)]
    pub(crate) fn offers(&self) -> usize {
        self.offers.load(Ordering::Relaxed)
    }

    /// Timers armed, connections open, requests waiting, exchanges in flight.
    pub(crate) fn stats(&self) -> DispatchStats {
        let (open_connections, idle_connections) = self.pool.counts();
        DispatchStats {
            pool_cleaner_armed: self.cleaner_armed.load(Ordering::Relaxed),
            wheel: self.env.standing.idle.take_out(self.wheel.stats()),
            loops: self.env.group.stats(),
            open_connections,
            idle_connections,
            waiting: self.pool.waiting() + self.waiting_for_http2(),
            in_flight: self.in_flight.len(),
            buffered_body_bytes: self.body_meter.load(Ordering::Relaxed),
            http2_streams_open: self.env.streams.open.load(Ordering::Relaxed),
            http2_streams_opened: self.env.streams.opened.load(Ordering::Relaxed),
        }
    }

    /// Requests waiting for an HTTP/2 connection, for snapshots: for the
    /// one being opened to their origin (ended ones not counted), or for a
    /// stream of an open one (as its last count says: one that has ended
    /// counts until its abort reaches the connection's loop).
    fn waiting_for_http2(&self) -> usize {
        let (queued, for_opening) = {
            let shared = lock(&self.shared);
            let queued: usize = shared
                .values()
                .flat_map(|entry| &entry.open)
                .map(|conn| conn.load.waiting())
                .sum();
            let for_opening: Vec<Weak<Exchange>> = shared
                .values()
                .filter_map(|entry| entry.opening.as_ref())
                .flat_map(|opening| opening.waiting.iter().cloned())
                .collect();
            (queued, for_opening)
        };
        // Upgraded after the unlock: one may be dropped last here.
        queued + upgraded(for_opening).len()
    }

    /// Stops accepting requests, fails every exchange in flight with
    /// [`Error::ClientClosed`], closes every connection, stops the wheel and
    /// joins every thread (a resolver thread inside `getaddrinfo` is let go
    /// instead: see `resolve`; so is an upload's pump inside its reader's
    /// `read`: see `spawn_pump`). Idempotent; a call made while another thread is
    /// closing returns once that close is done — unless it comes from one of
    /// the client's own threads (a callback on a loop, the wheel or a
    /// resolver), which the closing thread is joining: that one returns at
    /// once.
    pub(crate) fn close(&self) {
        if !self.begin_close() {
            return;
        }
        let (idle, waiting) = self.pool.close();
        drop(idle); // closed with their loops below
        for exchange in waiting {
            exchange.finish_err(Error::ClientClosed);
        }
        let shared = std::mem::take(&mut *lock(&self.shared));
        for opening in shared.into_values().filter_map(|entry| entry.opening) {
            for exchange in upgraded(opening.waiting) {
                exchange.finish_err(Error::ClientClosed);
            }
        }
        for exchange in self.in_flight.drain() {
            exchange.fail(Error::ClientClosed, None);
        }
        // Every loop is told to stop, and the wheel stops, before any
        // thread is joined: what is armed on either rings as it stops — a
        // retry's backoff, which a listener on a loop's thread (or the
        // wheel's) may be waiting for; it then finds the client closed.
        self.env.group.begin_shutdown();
        self.cancel_cleaner();
        drop(self.wheel.stop());
        self.env.group.shutdown();
        self.own_resolver.shutdown();
        *lock(&self.closing) = Closing::Closed;
        self.closed_now.notify_all();
    }

    /// Whether this call is the one to close; otherwise waits for the one
    /// under way to finish, when it may.
    fn begin_close(&self) -> bool {
        let me = thread::current().id();
        let mut closing = lock(&self.closing);
        match *closing {
            Closing::Open => {
                *closing = Closing::By(me);
                self.closed.store(true, Ordering::Release);
                true
            }
            Closing::By(closer) if closer != me && !self.is_own_thread(me) => {
                while !matches!(*closing, Closing::Closed) {
                    closing = self
                        .closed_now
                        .wait(closing)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                false
            }
            Closing::By(_) | Closing::Closed => false,
        }
    }

    /// Whether `thread` is one the client runs and `close` joins (a loop,
    /// the wheel, a resolver) — or, this thread, a caller driving one of
    /// its loops (whose thread must take the loop back to end it).
    fn is_own_thread(&self, thread: ThreadId) -> bool {
        let loops = self.env.group.loops();
        self.wheel.thread_id() == Some(thread)
            || self.own_resolver.runs_on(thread)
            || loops.iter().any(|l| l.thread_id() == thread)
            || (thread == thread::current().id() && loops.iter().any(|l| l.in_loop()))
    }
}

impl ConnOwner for Dispatcher {
    fn env(&self) -> &ConnEnv {
        &self.env
    }

    fn released(&self, origin: &Route, opener: u64) {
        // The connection that was to be shared closed before it opened (or
        // its request ended before it had one): its waiters go again (one
        // of them opens the next). One that failed took them first, to
        // fail them with it (see `opening_failed`).
        let orphans = self.take_opening(origin, opener);
        if let Some(waiter) = self.pool.release(origin) {
            // It holds the permit now.
            self.connect(waiter);
        }
        self.resettle(origin, orphans);
    }

    fn share(&self, origin: &Route, conn: SharedConn, opener: u64) -> Option<Vec<Arc<Exchange>>> {
        let max = self.env.config.http2.max_connections_per_origin;
        let (loop_index, source) = (conn.conn.event_loop.index(), conn.conn.source);
        // Without keep-alive no connection is kept for reuse: this one
        // serves what it opened for, and closes.
        if !self.env.config.keep_alive {
            return None;
        }
        let opening = {
            let mut shared = lock(&self.shared);
            let entry = shared.entry(origin.clone()).or_default();
            // The origin has its connections: this one serves what it
            // opened for, and closes.
            if entry.open.len() >= max {
                return None;
            }
            entry.open.push(conn);
            // Whichever opened first takes those waiting for one.
            entry.opening.take().map(|o| o.waiting).unwrap_or_default()
        };
        let mut waiting = upgraded(opening);
        // And those that queued for a permit to its origin.
        waiting.extend(self.pool.take_waiters(origin));
        // But not a hedged copy of a request this connection carries (one
        // queued while it was opening): it goes where `route_shared`
        // sends it — to another connection with a stream free, else
        // through the pool (its own, or back in the queue) — never behind
        // or beside an attempt it keeps away from (the request it backs
        // up, or an earlier copy). Such an attempt: one that runs on this
        // connection (read now: see `Exchange::kept_away`), or — one with
        // no connection yet — the one it was opened for, or one it takes
        // now. Mostly there is no copy among them: nothing to sort.
        if !waiting.iter().any(|exchange| exchange.is_backup()) {
            return Some(waiting);
        }
        // The ids of those it takes: a short list, searched, not hashed.
        let taken: Vec<u64> = waiting.iter().map(|exchange| exchange.id).collect();
        let taken_here = |attempt: u64| attempt == opener || taken.contains(&attempt);
        let (copies, waiting): (Vec<_>, Vec<_>) = waiting.into_iter().partition(|exchange| {
            exchange.kept_away().avoids(loop_index, source) || exchange.backs_up_any(taken_here)
        });
        for copy in copies {
            copy.keep_away_from(loop_index, source, taken_here);
            self.dispatch(copy, true);
        }
        Some(waiting)
    }

    fn unshare(&self, origin: &Route, conn_id: u64) {
        let mut shared = lock(&self.shared);
        if let Some(entry) = shared.get_mut(origin) {
            entry.open.retain(|conn| conn.id != conn_id);
            if entry.is_unused() {
                shared.remove(origin);
            }
        }
    }

    fn shared_stream_limit(&self, origin: &Route) -> Option<usize> {
        let shared = lock(&self.shared);
        let entry = shared.get(origin)?;
        entry.open.iter().map(|conn| conn.load.limit()).min()
    }

    fn has_place_besides(&self, origin: &Route, conn_id: u64, exchange: &Exchange) -> bool {
        // Read before the lock, as `route_shared` reads it.
        let avoid = exchange.kept_away();
        let shared = lock(&self.shared);
        shared.get(origin).is_some_and(|entry| {
            let room = self.may_open_another(entry, origin);
            entry.has_place_besides(conn_id, &avoid, exchange.is_backup(), room)
        })
    }

    fn take_opening(&self, origin: &Route, opener: u64) -> Vec<Weak<Exchange>> {
        let mut shared = lock(&self.shared);
        let Some(entry) = shared.get_mut(origin) else {
            return Vec::new();
        };
        if entry.opening.as_ref().is_none_or(|o| o.opener != opener) {
            return Vec::new();
        }
        let waiting = entry.opening.take().map(|o| o.waiting).unwrap_or_default();
        if entry.is_unused() {
            shared.remove(origin);
        }
        waiting
    }

    fn opening_failed(
        &self,
        origin: &Route,
        exchange: Arc<Exchange>,
        error: Error,
        waiting: Vec<Weak<Exchange>>,
    ) {
        // Ended meanwhile (its deadline, a cancel): the opening ends with
        // its request, as when the request's end closes the connection.
        if exchange.is_done() {
            return self.resettle(origin, waiting);
        }
        exchange.attach(ConnSlot::None);
        match self.wait_on_shared(origin, exchange) {
            // It only opened a spare: those waiting go on the open ones too.
            Ok(()) => self.resettle(origin, waiting),
            Err(exchange) => {
                self.fail_waiting(origin, waiting, &error);
                exchange.finish_err(error);
            }
        }
    }

    fn not_shared(&self, origin: &Route, opener: u64) {
        let orphans = self.take_opening(origin, opener);
        self.resettle(origin, orphans);
    }

    fn offer(&self, idle: IdleConn, now: Instant) -> Offered {
        #[cfg(test)]
        self.offers.fetch_add(1, Ordering::Relaxed);
        let server_limit = idle.server_idle_limit.is_some();
        match self.pool.offer(idle, now) {
            Offer::Kept => {
                // Its server's limit is the only one when the client sets
                // none: the cleaner, stopped then, starts (see
                // `schedule_cleaner`).
                if server_limit && self.cleaner_armed.load(Ordering::Relaxed) == 0 {
                    self.schedule_cleaner();
                }
                Offered::Kept
            }
            Offer::Serve(waiter) => Offered::Serve(waiter),
            Offer::Refused => Offered::Refused,
        }
    }

    fn remove_idle(&self, origin: &Route, conn_id: u64) -> bool {
        self.pool.remove_idle(origin, conn_id).is_some()
    }

    fn permit_wanted(&self, origin: &Route) -> bool {
        self.pool.permit_wanted(origin)
    }

    fn redispatch(&self, exchange: Arc<Exchange>, allow_idle: bool) {
        if exchange.is_done() {
            return;
        }
        // A body a connection took goes again from where it began, if it
        // can (a regular file's), through a pump of its own.
        // One that goes once, taken, fails: nothing is left to send.
        let window = self.env.config.body_window;
        let rewound = exchange
            .request
            .rewind(|| Arc::new(Pipe::new(window, self.body_meter.clone())));
        let rewound = match rewound {
            Ok(rewound) => rewound,
            Err(error) => {
                exchange.finish_err(error);
                return;
            }
        };
        if let Some(Rewound {
            reader,
            length,
            pipe,
        }) = rewound
        {
            if let Err(source) = self.spawn_pump(reader, length, pipe) {
                let error = Error::RequestBody {
                    source: source.into(),
                };
                exchange.finish_err(error);
                return;
            }
        }
        self.dispatch(exchange, allow_idle);
    }

    fn requeue(&self, exchange: Arc<Exchange>) {
        if !self.pool.requeue(&exchange) {
            exchange.finish_err(Error::ClientClosed);
        }
    }
}

/// How often the pool cleaner runs when only servers' `Keep-Alive`
/// limits bound idle connections (the client sets no idle timeout nor
/// time to live): a connection may stay open up to this much past its
/// server's limit, less the margin the limit already keeps.
const SERVER_LIMIT_ROUND: Duration = Duration::from_secs(1);

/// Whose name a lookup is for: a proxy's that does not resolve is the
/// proxy's failure, not the origin's.
#[derive(Clone, Copy)]
enum Hop {
    Origin,
    Proxy,
}

/// `addr` with `port`: an IPv6 address keeps its scope id (a link-local
/// address is unreachable without its interface's) and flow label, which
/// `SocketAddr::new(addr.ip(), port)` would drop.
pub(crate) fn with_port(mut addr: SocketAddr, port: u16) -> SocketAddr {
    addr.set_port(port);
    addr
}

/// `addrs`, those at port 0 (an override's, or a resolver's answering as
/// `getaddrinfo` does) at `port`, the hop's.
fn at_port_if_none(addrs: impl IntoIterator<Item = SocketAddr>, port: u16) -> Vec<SocketAddr> {
    addrs
        .into_iter()
        .map(|a| match a.port() {
            0 => with_port(a, port),
            _ => a,
        })
        .collect()
}

/// The default resolver: `getaddrinfo` on threads of its own.
#[cfg(not(test))]
fn default_resolver(_: &ClientConfig) -> ThreadedResolver {
    ThreadedResolver::default()
}

/// The default resolver, doing the lookup a test gives it, if any.
#[cfg(test)]
fn default_resolver(config: &ClientConfig) -> ThreadedResolver {
    match config.system_lookup.clone() {
        Some(lookup) => ThreadedResolver::with_lookup(Box::new(move |host| lookup(host))),
        None => ThreadedResolver::default(),
    }
}

/// [`pump`], and a panic of the caller's `read` fails the body: the
/// connection shares the pipe, so nothing else would end it, and the
/// request would wait for the rest of its body until its timeout (or for
/// ever, without one).
fn pump_or_fail(
    reader: Box<dyn std::io::Read + Send>,
    length: Option<u64>,
    pipe: &crate::exchange::Pipe,
) {
    let pumped =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pump(reader, length, pipe)));
    if pumped.is_err() {
        pipe.fail(Error::RequestBody {
            source: "the upload's reader panicked".into(),
        });
    }
}

/// Reads an upload into its pipe, a chunk at a time, blocking while the
/// pipe is full (see [`Dispatcher::spawn_pump`]), until the reader's end —
/// or until it has given `length` bytes, the declared length: the body is
/// whole then (the connection sends no more), and what the reader holds
/// past it is not the body's (the rest of a pipe, a socket), so it is not
/// read. A read that takes the body past `length` is pushed all the same:
/// the connection fails the body on it, unsent.
fn pump(
    mut reader: Box<dyn std::io::Read + Send>,
    length: Option<u64>,
    pipe: &crate::exchange::Pipe,
) {
    let mut buf = vec![0; 64 * 1024];
    let mut left = length;
    loop {
        if left == Some(0) {
            return pipe.finish(None);
        }
        match reader.read(&mut buf) {
            Ok(0) => return pipe.finish(None),
            Ok(n) => {
                if pipe.push_blocking(&buf[..n]).is_err() {
                    return;
                }
                left = left.map(|left| left.saturating_sub(n as u64));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return pipe.fail(Error::RequestBody {
                    source: source.into(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Client, Error};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// `close` while the default resolver's thread is stuck in a lookup
    /// (`getaddrinfo` waiting for a DNS server that does not answer): it
    /// returns at once, and the request waiting for the name ends with
    /// `ClientClosed` — neither waits for the system's timeout.
    #[test]
    fn close_does_not_wait_for_a_lookup_stuck_in_the_system() {
        let (began, lookup_began) = mpsc::channel::<()>();
        let (let_go, system_timeout) = mpsc::channel::<()>();
        let (began, system_timeout) = (Mutex::new(began), Mutex::new(system_timeout));
        // Stuck until the test lets go, or for 10 s: the system's timeout.
        let lookup = move |_: &str| {
            let _ = crate::sync::lock(&began).send(());
            let _ = crate::sync::lock(&system_timeout).recv_timeout(Duration::from_secs(10));
            Err(std::io::ErrorKind::TimedOut.into())
        };
        let client = Client::builder()
            .event_loops(1)
            .no_proxy()
            .system_lookup(Arc::new(lookup))
            .request_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let request = client.get("http://stuck.test/").send();
        lookup_began
            .recv_timeout(Duration::from_secs(10))
            .expect("the lookup began");
        let started = Instant::now();
        client.close();
        let took = started.elapsed();
        let _ = let_go.send(());
        assert!(took < Duration::from_secs(1), "close took {took:?}");
        let error = request.wait().unwrap_err();
        assert!(matches!(error, Error::ClientClosed), "{error:?}");
    }

    /// A response after which its server takes nothing more on the
    /// connection — `Keep-Alive` with no requests (`max=0`) or idle time
    /// (`timeout=1`, within the margin) left, or `Connection: close` —
    /// closes it without offering it to the pool, which would refuse it:
    /// the server sees it closed, and the pool was never asked. Other
    /// answers are offered, once.
    #[test]
    fn a_connection_its_server_has_spent_is_closed_without_an_offer() {
        use std::io::{Read, Write};
        for (header, offered) in [
            ("Keep-Alive: max=0", 0),
            ("Keep-Alive: timeout=30, max=0", 0),
            ("Keep-Alive: timeout=1", 0),
            ("Connection: close", 0),
            ("Keep-Alive: timeout=30, max=5", 1),
            ("X-Other: 1", 1),
        ] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            let (closed, told_closed) = mpsc::channel();
            let server = std::thread::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut head = Vec::new();
                let mut byte = [0; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    assert_eq!(stream.read(&mut byte).unwrap(), 1);
                    head.push(byte[0]);
                }
                let answer = format!("HTTP/1.1 200 OK\r\n{header}\r\nContent-Length: 2\r\n\r\nhi");
                stream.write_all(answer.as_bytes()).unwrap();
                // EOF, or the client keeping it open until the timeout.
                let _ = closed.send(matches!(stream.read(&mut byte), Ok(0)));
            });
            let client = Client::builder().event_loops(1).no_proxy().build().unwrap();
            let response = client.get(url.as_str()).send().wait().unwrap();
            assert_eq!(&response.bytes().wait().unwrap()[..], b"hi", "{header}");
            if offered == 0 {
                let closed = told_closed.recv().unwrap();
                assert!(closed, "{header}: not closed");
            } else {
                let deadline = Instant::now() + Duration::from_secs(10);
                while client.stats().idle_connections == 0 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(client.stats().idle_connections, 1, "{header}: not pooled");
            }
            assert_eq!(client.pool_offers(), offered, "{header}");
            assert_eq!(client.stats().idle_connections, offered, "{header}");
            client.close();
            server.join().unwrap();
        }
    }

    /// The pool cleaner re-arms itself while the client is open; `close`
    /// takes its entry off the wheel, and the stats say so.
    #[test]
    fn close_cancels_the_pool_cleaner() {
        let client = Client::builder().event_loops(1).build().unwrap();
        assert_eq!(client.stats().pool_cleaner_armed, 1);
        client.close();
        let stats = client.stats();
        assert_eq!(stats.pool_cleaner_armed, 0, "{stats:?}");
        assert_eq!(stats.wheel.armed, 0, "{stats:?}");
    }
}
