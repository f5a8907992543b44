//! A connection on its loop: opening (connect, TLS), running one HTTP/1.1
//! exchange at a time, idle in the pool, closed.
//!
//! Everything here runs on the connection's own loop thread, the only
//! thread that touches its socket and codec state: a [`Conn`] is a `Source`
//! of that loop (see [`crate::event_loop`]). It reaches the client above it
//! only through [`ConnOwner`] — to give back its permit, offer itself to the
//! pool, or hand a request back to be sent again.
//!
//! ```text
//!                        ┌─(tunnel)─▶ Tunnelling ─┐
//!                        │                        ▼
//!   connect ──▶ Connecting ──(connected)────▶ (https) Handshaking ──(done)──┐
//!                  │      │                       │                       ▼
//!                  │      └──(http, straight or forwarded by a proxy)──▶ Active ──(keep-alive)──▶ Idle
//!                  ▼                              ▼                      ▼   ▲                     │
//!                Closed ◀──(every address failed, proxy or TLS failure, error, abort, timeout)     │
//!                                                                        └───(from the pool)───────┘
//! ```
//!
//! Connecting is happy eyeballs to the first hop ([`open`]); a route that
//! tunnels through a proxy (`CONNECT`, SOCKS5) then runs the proxy's
//! handshake ([`tunnel`]), and `https://` TLS with the origin inside it.
//! The socket sits behind a [`Transport`]: plain TCP, or TLS over it. The
//! exchange is attached as *opening* when its connection starts, so that its
//! end aborts the attempt, and as *ready* once the TCP connect to the first
//! hop succeeds: its timeouts then move onto this loop in event-loop mode,
//! and bound the proxy's handshake and TLS from there. The connect timeout
//! of each attempt and the handshake timeout (one for the proxy's handshake
//! and TLS together) are timers of the connection on its loop's heap.
//! Closing a TLS connection sends `close_notify` first.
//!
//! The protocol seam: once open, a connection speaks one protocol for
//! life — [`h1`] runs HTTP/1.1 exchanges one at a time, checked out of the
//! pool and offered back; [`h2`] runs HTTP/2 streams, many at once, on a
//! connection the pool shares ([`ConnOwner::share`]). Which one is chosen
//! when the connection opens: by ALPN over TLS, by prior knowledge over
//! cleartext.

mod h1;
#[cfg(feature = "http2")]
mod h2;
/// Without the `http2` feature: no HTTP/2 connection ever exists.
#[cfg(not(feature = "http2"))]
#[path = "h2_off.rs"]
mod h2;
mod open;
mod read_buf;
mod tunnel;
mod upload;
mod write_stall;

pub(crate) use open::connect;
pub(crate) use tunnel::SocksTargets;

use crate::config::ClientConfig;
use crate::error::Error;
use crate::event_loop::{
    EventLoop, EventLoopGroup, LoopContext, LoopTimerKey, Readiness, Source, SourceRef,
};
use crate::events::ConnectionInfo;
use crate::exchange::{ConnRef, ConnSlot, Exchange, Standing, StandingEnv};
use crate::net::{Route, Transport};
use read_buf::ReadBuf;
use std::any::Any;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tickless_timer::SharedClock;

/// Bytes a connection reads per readiness event before the loop runs due
/// timeouts and the other connections (then it reads on): one fast sender
/// must not make every other deadline on its loop late — nor, on HTTP/2,
/// a flood of frames the connection answers itself (PING, SETTINGS).
const READ_BUDGET: usize = 256 * 1024;

/// Bytes of a request a connection offers the socket in one go — of its
/// head (which a small body in memory is part of), then again of its body,
/// so at most twice this in one pass — before the loop runs due timeouts
/// and the other connections, and the connection reads (then it writes
/// on): a server that takes an upload as
/// fast as it comes would otherwise keep the loop in one write for the
/// whole body — every other deadline of the loop late, and an answer that
/// refuses the rest (RFC 9112 §9.5) unread until the body was all sent.
const WRITE_BUDGET: usize = 256 * 1024;

/// The TLS configuration a client's connections share (nothing without
/// the `rustls` feature: the client speaks plain HTTP only).
#[cfg(feature = "rustls")]
pub(crate) type TlsConfig = Arc<rustls::ClientConfig>;
/// The TLS configuration a client's connections share (nothing without
/// the `rustls` feature: the client speaks plain HTTP only).
#[cfg(not(feature = "rustls"))]
pub(crate) type TlsConfig = ();

/// HTTP/2 streams of a client, for its statistics.
#[derive(Default)]
pub(crate) struct StreamCounts {
    /// Streams open now.
    pub(crate) open: AtomicUsize,
    /// Streams opened since the client started.
    pub(crate) opened: AtomicU64,
}

/// What every connection of a client shares.
pub(crate) struct ConnEnv {
    pub(crate) config: ClientConfig,
    pub(crate) clock: SharedClock,
    /// Shared by every TLS connection of the client.
    pub(crate) tls: TlsConfig,
    /// For the scheduler of each loop (where timeouts go in event-loop mode).
    pub(crate) group: Arc<EventLoopGroup>,
    pub(crate) streams: StreamCounts,
    /// Where HTTP/1 connections keep their standing timer entries in
    /// wheel mode (in event-loop mode, each on its own loop).
    pub(crate) standing: StandingEnv,
}

/// An HTTP/2 connection the pool shares: requests to its origin go to it
/// as new streams.
#[derive(Clone)]
pub(crate) struct SharedConn {
    pub(crate) conn: ConnRef,
    pub(crate) id: u64,
    /// How many of its streams are taken, as the dispatcher sees it.
    pub(crate) load: Arc<StreamLoad>,
}

/// How busy a shared HTTP/2 connection is: the streams it runs or has
/// queued, and the requests sent to it that its loop has not taken yet,
/// against the most streams it may run at once. The connection publishes
/// its own count and limit after each pass on its loop; the dispatcher
/// counts a request it sends there at once ([`reserve`](Self::reserve)),
/// until the connection has it ([`arrived`](Self::arrived)), so a burst of
/// requests sees the connection fill before its loop has run. Never under
/// the truth, briefly over it (a stream that has just ended).
#[derive(Default)]
pub(crate) struct StreamLoad {
    used: AtomicUsize,
    in_transit: AtomicUsize,
    limit: AtomicUsize,
    /// Of `used`, the requests queued for a stream (for snapshots:
    /// [`waiting`](Self::waiting)).
    waiting: AtomicUsize,
}

impl StreamLoad {
    /// Streams still free (negative: requests waiting for one).
    pub(crate) fn free(&self) -> isize {
        let signed = |n: usize| isize::try_from(n).unwrap_or(isize::MAX);
        let used = signed(self.used.load(Ordering::Acquire))
            .saturating_add(signed(self.in_transit.load(Ordering::Acquire)));
        signed(self.limit.load(Ordering::Acquire)).saturating_sub(used)
    }

    /// A request is on its way to this connection.
    pub(crate) fn reserve(&self) {
        self.in_transit.fetch_add(1, Ordering::AcqRel);
    }

    /// The connection has taken (or refused) a reserved request, and
    /// published its count since.
    pub(crate) fn arrived(&self) {
        let _ = self
            .in_transit
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Whether the connection carries nothing, nor has a request on its
    /// way to it (as far as its last count says: a stream that has just
    /// ended may still count).
    pub(crate) fn is_idle(&self) -> bool {
        self.used.load(Ordering::Acquire) == 0 && self.in_transit.load(Ordering::Acquire) == 0
    }

    /// The connection's own count: `used` streams open or queued, of
    /// `limit`; `waiting` of them queued (one that has ended counts until
    /// its abort reaches the connection's loop and takes it out).
    pub(crate) fn publish(&self, used: usize, waiting: usize, limit: usize) {
        self.limit.store(limit, Ordering::Release);
        self.used.store(used, Ordering::Release);
        self.waiting.store(waiting, Ordering::Release);
    }

    /// Requests queued on the connection for a stream, as of its last
    /// count: during its handshake, or at its stream limit (one that has
    /// ended counts until its abort reaches the connection's loop).
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// The most streams it may run at once, as of its last count.
    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }
}

/// The client a connection belongs to, as the connection sees it: the calls
/// that go up from a connection, and nothing else.
pub(crate) trait ConnOwner: Send + Sync + 'static {
    /// What connections share.
    fn env(&self) -> &ConnEnv;
    /// A connection on `route` closed: its permit is free again. `opener`
    /// is the exchange it was opened for.
    fn released(&self, route: &Route, opener: u64);
    /// A connection finished an exchange (or took one that ended unsent)
    /// and can carry another: offered at `now`.
    fn offer(&self, idle: IdleConn, now: Instant) -> Offered;
    /// An idle connection found its server gone: out of the pool with it.
    /// False if it was no longer there — taken by a request (whose task,
    /// on its way to the connection, finds it closed) or by the pool's
    /// cleaner or close (whose task closes it).
    fn remove_idle(&self, route: &Route, conn_id: u64) -> bool;
    /// Whether a request waiting for the total limit could use the permit
    /// of a connection on `route`, were it closed: an HTTP/2 connection
    /// that has just lost its last stream asks (an HTTP/1.1 one is offered
    /// back instead).
    fn permit_wanted(&self, route: &Route) -> bool;
    /// `exchange` must go again: nothing of it reached a server (its
    /// pooled connection was gone). `allow_idle`: it may take another
    /// connection open already (an idle HTTP/1.1 one, a shared HTTP/2 one);
    /// a retry after a failure never does. A streamed
    /// body a connection took goes again from where it began, if it can
    /// (`RequestParts::rewind`); one that goes once fails the exchange
    /// with [`Error::RequestBody`].
    fn redispatch(&self, exchange: Arc<Exchange>, allow_idle: bool);
    /// `exchange`, served a connection offered back ([`Offered::Serve`])
    /// that turned out closed before it took it, goes back to its place
    /// in the queue, ahead of the waiters younger than it — where the
    /// permit that connection gives back as it closes serves it.
    fn requeue(&self, exchange: Arc<Exchange>);
    /// An HTTP/2 connection to `origin` is open: requests to its origin
    /// go to it from now on, and it takes the requests that waited for it
    /// (returned) — but for the hedged copies of a request it carries
    /// (`opener`, the one it was opened for, or one it takes), which go
    /// elsewhere. `None`: it is not shared — the origin has as many as
    /// [`http2_max_connections_per_origin`](crate::ClientBuilder::http2_max_connections_per_origin)
    /// already, or the client keeps no connection for reuse
    /// ([`keep_alive`](crate::ClientBuilder::keep_alive) off).
    fn share(&self, route: &Route, conn: SharedConn, opener: u64) -> Option<Vec<Arc<Exchange>>>;
    /// The shared connection `conn_id` takes no more streams.
    fn unshare(&self, route: &Route, conn_id: u64);
    /// The fewest streams a shared HTTP/2 connection of `route` may run at
    /// once, as they last counted (see [`StreamLoad::limit`]); `None` if
    /// the route has none. What the origin's server allows, for a new
    /// connection of the route until its own server's SETTINGS say.
    fn shared_stream_limit(&self, route: &Route) -> Option<usize>;
    /// Whether `exchange`, waiting for a stream on the connection
    /// `conn_id` (shared, or a spare), sent through the dispatch again,
    /// would find a place on another connection of `route`: one with a
    /// stream free — for a hedged copy, not one where an attempt it keeps
    /// away from runs — the one being opened (not for a hedged copy, which
    /// never waits for it), or room to open one. (A hedged copy's own new
    /// connection through the pool is no place: with no room it would be
    /// a spare, which the same server may hold as it held this one.)
    fn has_place_besides(&self, route: &Route, conn_id: u64, exchange: &Exchange) -> bool;
    /// The connection opened for `opener` speaks HTTP/1.1 (ALPN): it will
    /// not be shared, and the requests that waited for it go again.
    fn not_shared(&self, route: &Route, opener: u64);
    /// Takes the requests that waited for the connection opened for
    /// `opener` (HTTP/2, to share), which failed to open: taken before its
    /// [release](Self::released), which would send them again, they fail
    /// with it ([`opening_failed`](Self::opening_failed)).
    fn take_opening(&self, route: &Route, opener: u64) -> Vec<Weak<Exchange>>;
    /// The connection opened for `exchange` could not open, with `error`
    /// (and has closed); `waiting` waited for it ([`take_opening`](Self::take_opening)).
    /// The exchange waits for a stream on a shared HTTP/2 connection of
    /// its route, if there is one (it only opened a spare), and `waiting`
    /// go as the connection's release sends them; else it fails with
    /// `error`, and so do `waiting`, each with a copy of it.
    fn opening_failed(
        &self,
        route: &Route,
        exchange: Arc<Exchange>,
        error: Error,
        waiting: Vec<Weak<Exchange>>,
    );
}

/// An idle connection, ready for another request.
#[derive(Clone)]
pub(crate) struct IdleConn {
    pub(crate) conn: ConnRef,
    pub(crate) info: ConnectionInfo,
    /// What it can carry: the pool's key (the connection's own, shared).
    pub(crate) route: Arc<Route>,
    pub(crate) idle_since: Instant,
    pub(crate) created: Instant,
    /// How long it may stay idle, as its server announced (the pool
    /// keeps the shorter of this and its own idle timeout); `None`: no
    /// limit but the pool's.
    pub(crate) server_idle_limit: Option<Duration>,
}

/// What became of a connection offered back.
pub(crate) enum Offered {
    /// It is idle in the pool.
    Kept,
    /// A waiter for its origin takes it: run the waiter on it (or give
    /// it back to its place, [`ConnOwner::requeue`], if the connection
    /// turns out closed).
    Serve(Arc<Exchange>),
    /// Close it: the pool is closed, the connection is past its time to
    /// live, or its permit is worth more to a waiter.
    Refused,
}

/// Timers a connection arms on its loop (the tag's high half; the low half
/// counts arms, so a late one is known).
const CONNECT_TIMER: u64 = 1 << 32;
const HANDSHAKE_TIMER: u64 = 2 << 32;
/// How long a body waits for `100 Continue` before it goes anyway.
const EXPECT_TIMER: u64 = 3 << 32;
/// An HTTP/2 connection's idle time, or its keep-alive PING.
const H2_TIMER: u64 = 4 << 32;

/// One connection. See the [module documentation](self).
pub(crate) struct Conn {
    owner: Arc<dyn ConnOwner>,
    /// Where it goes, and through which proxy (shared with it while idle
    /// in the pool).
    route: Arc<Route>,
    transport: Option<Transport>,
    remote: Option<SocketAddr>,
    created: Instant,
    /// When it last went idle (offered to the pool): a request that takes
    /// it and ends before anything is sent leaves it idle since then, not
    /// since it came back.
    idle_since: Instant,
    /// What its HTTP/1 responses' `Keep-Alive` headers have said of how
    /// long it may sit idle in the pool (the server closes it then) and
    /// how many more requests it may carry.
    server_keep_alive: h1::keep_alive::ServerKeepAlive,
    info: Option<ConnectionInfo>,
    state: State,
    buf: ReadBuf,
    /// The tag of the timer armed now (connect or handshake), if any.
    timer: Option<(LoopTimerKey, u64)>,
    timers_armed: u32,
    /// What the HTTP/2 timer is armed for.
    h2_timer_deadline: Option<Instant>,
    /// Whether a collected body has raised the socket's receive window
    /// (see `h1::LOWAT_COLLECTED`): once a connection.
    recv_window_raised: bool,
    /// The exchange it was opened for.
    opener: u64,
    /// The timer entry its HTTP/1 exchanges hold one after another (see
    /// `exchange::standing`), on the wheel or on this connection's loop,
    /// made for the first that arms a timeout (`make_standing_for`);
    /// closed with it.
    standing: Option<Arc<Standing>>,
}

enum State {
    Connecting(open::Connecting),
    Tunnelling(tunnel::Tunnelling),
    Handshaking(Arc<Exchange>),
    Active(Box<h1::Active>),
    H2(Box<h2::Http2>),
    Idle,
    Closed,
}

impl State {
    /// The exchange the connection carries now, if any.
    fn exchange(&self) -> Option<&Arc<Exchange>> {
        match self {
            State::Active(active) => Some(&active.exchange),
            State::Connecting(connecting) => Some(&connecting.exchange),
            State::Tunnelling(tunnelling) => Some(&tunnelling.exchange),
            State::Handshaking(exchange) => Some(exchange),
            // Many: see `h2`.
            State::H2(_) | State::Idle | State::Closed => None,
        }
    }
}

impl Conn {
    fn env(&self) -> &ConnEnv {
        self.owner.env()
    }

    fn now(&self) -> Instant {
        self.env().clock.now()
    }

    /// Makes the connection's standing entry for `exchange` if it is the
    /// first to arm a timeout (a request or read timeout, the client's or
    /// its own: a write timeout waits for a full socket): on the wheel, or
    /// in event-loop mode on `event_loop`, the connection's. A connection
    /// whose requests arm none keeps none, nor one whose group has a
    /// test's scheduler in front of its loops (what that arms may not be
    /// on the loop's heap).
    fn make_standing_for(&mut self, exchange: &Exchange, event_loop: &Arc<EventLoop>) {
        let env = self.owner.env();
        if self.standing.is_some() || !exchange.arms_a_timeout() {
            return;
        }
        self.standing = match env.config.use_event_loop_timeouts {
            false => Some(env.standing.on_wheel(&env.clock)),
            true if env.group.schedulers_are_loops() => {
                Some(StandingEnv::on_loop(event_loop.clone(), &env.clock))
            }
            true => None,
        };
    }

    /// This connection as an exchange names it.
    fn conn_ref(&self, cx: &LoopContext<'_>) -> ConnRef {
        let index = cx.event_loop().index();
        // An HTTP/2 connection's streams run at once: each arms its own.
        let standing = match self.state {
            State::H2(_) => None,
            _ => self.standing.clone(),
        };
        ConnRef {
            event_loop: cx.event_loop().clone(),
            source: cx.me(),
            scheduler: self.env().group.scheduler(index).clone(),
            waker: None,
            standing,
        }
    }

    /// `exchange`, none of which was sent on this connection, goes to
    /// another: a pooled one too if `allow_idle` (not after a close that
    /// may have made them as stale). From HTTP/2 it takes this one's stream
    /// limit along ([`Exchange::hear_stream_limit`]). Called before this
    /// connection closes, if it does: the exchange is then at its place in
    /// the pool's queue when the permit the close gives back serves the
    /// oldest waiter.
    fn send_to_another(&self, exchange: Arc<Exchange>, allow_idle: bool) {
        if let State::H2(h2) = &self.state {
            exchange.hear_stream_limit(h2.load_limit());
        }
        exchange.attach(ConnSlot::None);
        self.owner.redispatch(exchange, allow_idle);
    }

    /// Arms one connection timer of `kind` on the loop, replacing the one
    /// there is.
    fn arm_timer(&mut self, cx: &mut LoopContext<'_>, kind: u64, deadline: Option<Instant>) {
        self.disarm_timer(cx);
        if let Some(deadline) = deadline {
            self.timers_armed = self.timers_armed.wrapping_add(1);
            let tag = kind | u64::from(self.timers_armed);
            self.timer = cx.schedule_timer(deadline, tag).ok().map(|key| (key, tag));
        }
    }

    fn disarm_timer(&mut self, cx: &mut LoopContext<'_>) {
        if let Some((key, _)) = self.timer.take() {
            cx.event_loop().cancel(key);
        }
    }

    /// Closes the connection and gives back its permit (which may start a
    /// waiter). Does not end the exchange it carried. The loop drops the
    /// connection when the current call returns.
    fn close(&mut self, cx: &mut LoopContext<'_>) {
        if matches!(self.state, State::Closed) {
            return;
        }
        // A body's bytes held back for its reader go back to it first,
        // before the error that ends it.
        self.hold_last_gathered();
        self.close_attempts(cx);
        if let Some(mut transport) = self.transport.take() {
            // TLS: close_notify, without waiting for the socket.
            transport.close();
            let _ = cx.registry.deregister(transport.tcp_mut());
        }
        self.disarm_timer(cx);
        if let Some(standing) = &self.standing {
            standing.close();
        }
        if let State::H2(h2) = &self.state {
            if h2.is_shared() {
                let id = self.info.as_ref().map_or(0, |info| info.id);
                self.owner.unshare(&self.route, id);
            }
        }
        let state = std::mem::replace(&mut self.state, State::Closed);
        cx.remove_me();
        self.owner.released(&self.route, self.opener);
        // Last: `h2`'s code may panic (a connection closed because it
        // did), and nothing above may be left undone.
        if let State::H2(mut h2) = state {
            h2.say_goodbye();
        }
    }

    /// Resets the stream (an abandoned exchange leaves it mid-message) and
    /// closes. A reset is final for both ends at once (no FIN handshake, no
    /// TIME_WAIT left on this side), and costs the loop less, which matters
    /// when a burst of timeouts aborts many connections together.
    fn reset(&mut self, cx: &mut LoopContext<'_>) {
        if let Some(mut transport) = self.transport.take() {
            let _ = cx.registry.deregister(transport.tcp_mut());
            transport.reset();
        }
        self.close(cx);
    }

    /// Closes the connection and fails the exchange it carried with the
    /// error `error` makes for it.
    fn close_failing(&mut self, cx: &mut LoopContext<'_>, error: impl FnOnce(&Exchange) -> Error) {
        let exchange = self.state.exchange().cloned();
        self.close(cx);
        if let Some(exchange) = exchange {
            exchange.finish_err(error(&exchange));
        }
    }

    /// The exchange this connection carried ended elsewhere (a timeout or a
    /// cancel): its abort may still be on its way. Resets the connection if
    /// so; returns whether it did.
    fn reset_if_abandoned(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let abandoned = self.state.exchange().is_some_and(|e| e.is_done());
        if abandoned {
            self.reset(cx);
        }
        abandoned
    }
}

impl Source for Conn {
    fn ready(&mut self, cx: &mut LoopContext<'_>, readiness: Readiness) {
        // Not while connecting: an attempt's events (a refused one's error)
        // say nothing of the socket the connection ends up with, whose
        // reads the buffer's state is about.
        if readiness.can_read() && !matches!(self.state, State::Connecting(_)) {
            self.buf
                .on_readable(readiness.read_closed || readiness.error, readiness.urgent);
        }
        match &self.state {
            // Any readiness: an attempt that failed reports an error.
            State::Connecting(_) => self.on_connect_ready(cx),
            State::Tunnelling(_) => self.drive_tunnel(cx),
            // Either readiness may move a handshake on.
            State::Handshaking(_) => self.drive_handshake(cx),
            State::Active(_) => {
                if self.reset_if_abandoned(cx) {
                    return;
                }
                if readiness.can_write() {
                    self.write_request(cx);
                }
                if readiness.can_read() && matches!(self.state, State::Active(_)) {
                    self.read_response(cx);
                }
            }
            State::H2(_) => self.h2_ready(cx, readiness),
            State::Idle => {
                if readiness.can_read() {
                    self.on_idle_readable(cx);
                }
            }
            State::Closed => {}
        }
    }

    fn timer(&mut self, cx: &mut LoopContext<'_>, tag: u64) {
        if self.timer.is_none_or(|(_, armed)| armed != tag) {
            return;
        }
        self.timer = None;
        match tag & !u64::from(u32::MAX) {
            CONNECT_TIMER => self.connect_timed_out(cx),
            HANDSHAKE_TIMER => self.handshake_timed_out(cx),
            // Not for an exchange that ended while its abort waits.
            EXPECT_TIMER if !self.reset_if_abandoned(cx) => self.continue_body(cx),
            H2_TIMER => self.h2_timer(cx),
            _ => {}
        }
    }

    fn abort(&mut self, cx: &mut LoopContext<'_>, exchange_id: u64) {
        if matches!(self.state, State::H2(_)) {
            return self.abort_h2(cx, exchange_id);
        }
        if self.state.exchange().is_some_and(|e| e.id == exchange_id) {
            self.reset(cx);
        }
    }

    fn shut_down(&mut self, cx: &mut LoopContext<'_>) {
        // An idle connection is in the pool's idle list: out of it first,
        // or the pool would count it and hand it out after it has gone.
        if let (State::Idle, Some(info)) = (&self.state, &self.info) {
            self.owner.remove_idle(&self.route, info.id);
        }
        if matches!(self.state, State::H2(_)) {
            return self.fail_h2(cx, |_| Error::ClientClosed);
        }
        self.close_failing(cx, |_| Error::ClientClosed);
    }

    fn panicked(&mut self, cx: &mut LoopContext<'_>) {
        let error = |exchange: &Exchange| Error::Io {
            remote: exchange.remote_name(),
            source: io::Error::other("a callback panicked on the event loop"),
        };
        if matches!(self.state, State::H2(_)) {
            return self.fail_h2(cx, error);
        }
        self.close_failing(cx, |exchange| Error::Io {
            remote: exchange.remote_name(),
            source: io::Error::other("a callback panicked on the event loop"),
        });
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Runs `exchange` on the idle connection `conn` (the pooled path): a
/// task on that connection's loop. Gives the exchange back, detached, if
/// the connection has gone since it was taken from the pool — nothing was
/// sent, so any request may go again, elsewhere. One still there that its
/// server has closed sends the exchange again itself, before it closes
/// (see `Conn::start_on_idle`).
pub(crate) fn start_on_idle(
    cx: &mut LoopContext<'_>,
    conn: SourceRef,
    exchange: Arc<Exchange>,
) -> Result<(), Arc<Exchange>> {
    start_with(cx, conn, exchange, Conn::start_on_idle)
}

/// Runs `exchange` as a new stream of the shared HTTP/2 connection `conn`
/// (a task on its loop). Gives the exchange back, detached, if the
/// connection has closed or takes no more streams — nothing was sent.
pub(crate) fn start_on_shared(
    cx: &mut LoopContext<'_>,
    conn: SourceRef,
    exchange: Arc<Exchange>,
) -> Result<(), Arc<Exchange>> {
    start_with(cx, conn, exchange, Conn::start_on_h2)
}

/// How a connection takes an exchange: `Err` gives it back, unsent.
type Start = fn(&mut Conn, &mut LoopContext<'_>, Arc<Exchange>) -> Result<(), Arc<Exchange>>;

/// `start` on the connection `conn`, if it is still there; the exchange
/// back, detached, if it is not or `start` gave it back.
fn start_with(
    cx: &mut LoopContext<'_>,
    conn: SourceRef,
    exchange: Arc<Exchange>,
    start: Start,
) -> Result<(), Arc<Exchange>> {
    let mut pending = Some(exchange);
    cx.with_source::<Conn>(conn, |conn, cx| {
        if let Some(exchange) = pending.take() {
            if let Err(exchange) = start(conn, cx, exchange) {
                pending = Some(exchange);
            }
        }
    });
    match pending {
        None => Ok(()),
        Some(exchange) => {
            exchange.attach(crate::exchange::ConnSlot::None);
            Err(exchange)
        }
    }
}

/// Closes the idle connection `conn` (evicted by the cleaner, or the pool
/// made room): a task on its loop.
pub(crate) fn close_idle(cx: &mut LoopContext<'_>, conn: SourceRef) {
    cx.with_source::<Conn>(conn, |conn, cx| {
        if matches!(conn.state, State::Idle) {
            conn.close(cx);
        }
    });
}

/// Retires the shared HTTP/2 connection `conn`, which the dispatcher has
/// taken out of its shared list to give its permit to a request waiting
/// for the total limit (a task on its loop): see [`Conn::retire_h2`].
pub(crate) fn retire_shared(cx: &mut LoopContext<'_>, conn: SourceRef) {
    cx.with_source::<Conn>(conn, |conn, cx| {
        if matches!(conn.state, State::H2(_)) {
            conn.retire_h2(cx);
        }
    });
}

/// The error of an exchange whose connection's stream failed with `source`:
/// a TLS failure that ended the server's side of the handshake (a TLS 1.3
/// server refusing the client's certificate, which the client learns only
/// on its first read) is an [`Error::Tls`], as it is in TLS 1.2; anything
/// else an [`Error::Io`].
pub(super) fn stream_failure(remote: String, source: io::Error) -> Error {
    #[cfg(feature = "rustls")]
    if let Some(tls) = crate::net::late_handshake_failure(&source) {
        return Error::tls(remote, tls.clone());
    }
    Error::Io { remote, source }
}

/// Whether `error` is a TLS failure that ended the server's side of the
/// handshake (see [`stream_failure`]).
#[cfg(feature = "rustls")]
pub(super) fn ends_handshake(error: &io::Error) -> bool {
    crate::net::late_handshake_failure(error).is_some()
}

/// Without TLS no failure ends a handshake.
#[cfg(not(feature = "rustls"))]
pub(super) fn ends_handshake(_error: &io::Error) -> bool {
    false
}

/// Whether `name` is a field of the connection rather than of the message
/// (`Connection` and those it names, and their kin; `Host`, which HTTP/2
/// carries as `:authority`): neither HTTP/2 nor a trailer section carries
/// one (RFC 9113 §8.2.2, RFC 9110 §6.5.1).
pub(super) fn connection_specific(name: &http::HeaderName) -> bool {
    use http::header;
    matches!(
        *name,
        header::CONNECTION
            | header::TRANSFER_ENCODING
            | header::UPGRADE
            | header::HOST
            | header::TE
    ) || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}
