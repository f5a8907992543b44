//! [`Pool`]: idle keep-alive connections per origin, and the permits that
//! bound how many connections are open.
//!
//! "Origin" below means what a connection can carry, its [`Route`]: the
//! origin itself, a tunnel to it through a proxy, or an HTTP proxy that
//! takes plain requests for every origin — so the per-host limit is per
//! proxy for those.
//!
//! # Invariants
//!
//! * Every open (or opening) connection holds one permit, counted both for
//!   its origin and in the total, from the moment a request is granted one
//!   until the connection is closed and [`Pool::release`] is called.
//! * An idle connection is in exactly one place: the pool's idle list, or
//!   the exchange that took it. Its socket stays registered on its loop,
//!   which notices a server close and removes it ([`Pool::remove_idle`]);
//!   one taken out meanwhile is left to whoever took it (a request's task
//!   on its way, the cleaner's or the close's), which closes it.
//! * A request that finds neither an idle connection nor a permit waits in
//!   its origin's queue, at its place: a sequence number that orders all
//!   queues together, stamped when it first asked the pool — kept by the
//!   same exchange asking again (sent again by the client after its
//!   connection failed), by a retry policy's retry (a new exchange) and by
//!   the hops its redirects and 417s lead to, which go ahead of the
//!   requests sent after it (those may hold the connections it waits for,
//!   their bodies unread until it ends). A request that
//!   never asked the pool (it went on a shared HTTP/2 connection) has no
//!   place to pass on: its next hop queues at the back.
//!   Whatever frees capacity serves the **oldest** waiter it can: a
//!   released permit, the oldest waiter of any origin with room
//!   under its per-host limit; a connection offered back, the oldest waiter
//!   of its origin, unless an older waiter of another origin could use its
//!   permit — then the connection is closed to give it the permit. A steady
//!   stream of requests to one host never holds another host's request.
//! * Idle connections never keep a request waiting for the total limit:
//!   one that queues for it has the longest-idle connection closed to make
//!   room, unless connections of its origin it found expired are closing
//!   (their permits make it); with none in the pool, it is told to want
//!   room (the dispatcher then closes an HTTP/2 connection with no stream,
//!   which holds a permit outside the pool's idle lists). Nor a retried
//!   request for its host's limit: the longest-idle connection of its
//!   origin is closed for it.
//! * A waiter served a connection that turns out closed before it took it
//!   keeps its place: it goes back into its queue where it was
//!   ([`Pool::requeue`]), ahead of every younger waiter, so the permit that
//!   connection gives back as it closes serves it first. So does a request
//!   that took an idle connection found closed as it runs: it asks again
//!   before that connection closes — also when the loop saw the close
//!   before the request's task came, which leaves the closing to it.
//! * A request retried after a pooled connection failed under it — or any
//!   that has gone again once (its retry spent: one an HTTP/2 server never
//!   processed) — goes again on a fresh connection, never a pooled one:
//!   it takes no idle connection, and when it is the one to serve, the
//!   connection offered back is closed and its permit serves it. It asks
//!   again before the connection that failed under it closes, so that it
//!   is at its place when that connection's permit comes back, ahead of
//!   the younger waiters queued while it was on it.
//! * Queues hold waiters weakly: a request that ends while queued (its
//!   deadline passed, it was cancelled) frees its request bytes and
//!   callbacks as soon as its caller lets go, and is skipped when reached.
//!   The queues are compacted together, and origins left unused
//!   forgotten, when ended waiters outnumber live ones (and the entries
//!   the connections open), so queueing costs amortised O(1) per request,
//!   ended waiters do not pile up behind the limits (whatever their
//!   origins), and each operation scans one queue front per origin that
//!   has waiters.
//! * Nothing is dropped under the pool's lock (see [`crate::sync`]): a
//!   waiter taken out, or found ended, is dropped after the unlock — its
//!   callbacks may hold the last `Client`, whose drop closes this pool.

use crate::exchange::{PlaceCell, QueuePlace};
use crate::net::Route;
use crate::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// A request as the pool sees it.
pub(crate) trait Waiter: Send + Sync + 'static {
    fn key(&self) -> &Route;
    /// Ended (no longer waiting for anything).
    fn is_done(&self) -> bool;
    /// Must go out on a new connection, not a pooled one.
    fn wants_fresh(&self) -> bool;
    /// Its request's place among waiters: stamped at its first
    /// [`Pool::acquire`], or set before it by the hop or attempt it
    /// follows (a redirect's next hop, a 417's repeat, a retry).
    fn place(&self) -> &PlaceCell;
}

/// An idle connection as the pool sees it.
pub(crate) trait Pooled {
    fn key(&self) -> &Route;
    fn id(&self) -> u64;
    fn idle_since(&self) -> Instant;
    fn created(&self) -> Instant;
    /// How long its server lets it sit idle (an HTTP/1 `Keep-Alive:
    /// timeout`, less a margin), if it said: the connection expires at the
    /// shorter of this and the pool's idle timeout.
    fn server_idle_limit(&self) -> Option<Duration>;
}

/// What a request gets from the pool.
pub(crate) enum Acquired<C> {
    /// An idle connection to reuse.
    Idle(C),
    /// A permit to open a new connection.
    Permit,
    /// Neither: the request was queued and will be served later.
    /// `wants_room`: it waits for the total limit alone (its host has
    /// room) and no connection of the pool is closing to make room for
    /// it — one that holds a permit outside the pool's idle lists (an
    /// HTTP/2 connection with no stream, which the dispatcher shares
    /// rather than pools) may be closed for it.
    Queued { wants_room: bool },
    /// The pool is closed.
    Closed,
}

/// What becomes of a connection offered back.
pub(crate) enum Offer<W> {
    /// It is idle in the pool.
    Kept,
    /// This waiter takes it (or goes back to its place,
    /// [`Pool::requeue`], should the connection turn out closed).
    Serve(Arc<W>),
    /// Close it: the pool is closed, it is past its time to live, or its
    /// permit serves an older waiter (see the invariants).
    Refused,
}

/// Limits the pool enforces.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PoolLimits {
    pub(crate) max_connections: Option<usize>,
    pub(crate) max_connections_per_host: Option<usize>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) ttl: Option<Duration>,
}

impl PoolLimits {
    /// Whether `idle` is past its idle timeout — the pool's, or its
    /// server's if shorter (never longer) — or its time to live.
    fn expired(&self, idle: &impl Pooled, now: Instant) -> bool {
        let past = |since: Instant, limit: Option<Duration>| {
            limit.is_some_and(|limit| now.saturating_duration_since(since) >= limit)
        };
        let idle_timeout = match (self.idle_timeout, idle.server_idle_limit()) {
            (Some(own), Some(server)) => Some(own.min(server)),
            (own, server) => own.or(server),
        };
        past(idle.idle_since(), idle_timeout) || past(idle.created(), self.ttl)
    }
}

/// A queued waiter.
struct Queued<W> {
    seq: u64,
    waiter: Weak<W>,
}

struct OriginState<W, C> {
    idle: Vec<C>,
    open: usize,
    waiting: VecDeque<Queued<W>>,
}

impl<W, C> OriginState<W, C> {
    /// Nothing refers to the origin any more: no connection, no waiter.
    fn unused(&self) -> bool {
        self.open == 0 && self.idle.is_empty() && self.waiting.is_empty()
    }
}

impl<W, C> Default for OriginState<W, C> {
    fn default() -> Self {
        OriginState {
            idle: Vec::new(),
            open: 0,
            waiting: VecDeque::new(),
        }
    }
}

struct Inner<W, C> {
    /// Hashed with foldhash rather than std's SipHash: two lookups a
    /// request, each a few tens of instructions rather than ~200.
    origins: HashMap<Route, OriginState<W, C>, foldhash::fast::RandomState>,
    open: usize,
    /// Entries in all the queues (ended waiters included): while it is
    /// zero, no operation looks at a queue.
    queued: usize,
    /// Entries in all the queues at the last compaction, or fewer if the
    /// queues held fewer since (as an enqueue saw them): the queues are
    /// compacted again once they hold twice as many (see
    /// [`enqueue`](Self::enqueue)).
    live_at_compaction: usize,
    next_seq: u64,
    closed: bool,
    /// Queue entries (and origins, by a compaction) looked at, for the
    /// complexity tests.
    #[cfg(test)]
    visited: usize,
}

/// Waiters taken out under the lock, dropped after it.
type Graves<W> = Vec<Arc<W>>;

/// The pool. See the [module documentation](self).
pub(crate) struct Pool<W, C> {
    limits: PoolLimits,
    inner: Mutex<Inner<W, C>>,
}

impl<W: Waiter, C: Pooled> Inner<W, C> {
    fn per_host(&self, origin: &Route) -> usize {
        self.origins.get(origin).map_or(0, |o| o.open)
    }

    fn host_has_room(&self, limits: &PoolLimits, origin: &Route) -> bool {
        limits
            .max_connections_per_host
            .is_none_or(|max| self.per_host(origin) < max)
    }

    fn total_has_room(&self, limits: &PoolLimits) -> bool {
        limits.max_connections.is_none_or(|max| self.open < max)
    }

    fn grant(&mut self, origin: &Route) {
        self.open += 1;
        self.origins.entry(origin.clone()).or_default().open += 1;
    }

    /// The oldest live waiter of `origin` (ended ones before it are dropped
    /// from the queue), with its sequence number.
    fn front(&mut self, origin: &Route, graves: &mut Graves<W>) -> Option<(u64, Arc<W>)> {
        let state = self.origins.get_mut(origin)?;
        while let Some(queued) = state.waiting.front() {
            #[cfg(test)]
            {
                self.visited += 1;
            }
            match queued.waiter.upgrade() {
                Some(waiter) if !waiter.is_done() => return Some((queued.seq, waiter)),
                Some(ended) => graves.push(ended),
                None => {}
            }
            state.waiting.pop_front();
            self.queued -= 1;
        }
        None
    }

    /// The origin whose front waiter is the oldest among those `fits`
    /// accepts, with that waiter's sequence number and the waiter.
    fn oldest_where(
        &mut self,
        graves: &mut Graves<W>,
        fits: impl Fn(&Self, &Route) -> bool,
    ) -> Option<(u64, Route, Arc<W>)> {
        if self.queued == 0 {
            return None;
        }
        let queued: Vec<Route> = self
            .origins
            .iter()
            .filter(|(_, state)| !state.waiting.is_empty())
            .map(|(origin, _)| origin.clone())
            .collect();
        let mut oldest: Option<(u64, Route, Arc<W>)> = None;
        for origin in queued {
            if !fits(self, &origin) {
                continue;
            }
            let Some((seq, waiter)) = self.front(&origin, graves) else {
                // Its waiters had all ended: an origin known from them
                // alone (queued for the total limit, never connected)
                // would otherwise stay in the map for good.
                self.tidy(&origin);
                continue;
            };
            if oldest.as_ref().is_none_or(|(best, _, _)| seq < *best) {
                if let Some((_, _, passed)) = oldest.replace((seq, origin, waiter)) {
                    graves.push(passed);
                }
            } else {
                graves.push(waiter);
            }
        }
        oldest
    }

    /// Takes out of its queue the front waiter of `origin` that
    /// [`front`](Self::front) has just returned, under the same lock. It is
    /// not asked again whether it is done: another thread may end it at any
    /// moment, and the decision is the one made on that look (an ended
    /// waiter that is served gives what it got straight back).
    fn pop_seen_front(&mut self, origin: &Route) {
        if let Some(state) = self.origins.get_mut(origin) {
            if state.waiting.pop_front().is_some() {
                self.queued -= 1;
            }
        }
    }

    /// Serves the oldest waiter that a permit can serve now, granting it one.
    fn serve_with_permit(&mut self, limits: &PoolLimits, graves: &mut Graves<W>) -> Option<Arc<W>> {
        if !self.total_has_room(limits) {
            return None;
        }
        let (_, origin, waiter) =
            self.oldest_where(graves, |inner, origin| inner.host_has_room(limits, origin))?;
        self.pop_seen_front(&origin);
        self.grant(&origin);
        Some(waiter)
    }

    /// A new place, after every one stamped before.
    fn stamp(&mut self) -> QueuePlace {
        let seq = self.next_seq;
        self.next_seq += 1;
        QueuePlace { seq }
    }

    /// Queues `waiter` at its request's place (see the invariants): the
    /// back, unless its request asked before — a redirect's next hop, a
    /// repeat after a 417, an exchange sent again, one served a connection
    /// that turned out closed.
    fn enqueue(&mut self, waiter: &Arc<W>, graves: &mut Graves<W>) {
        let QueuePlace { seq } = waiter.place().get_or_stamp(|| self.stamp());
        self.live_at_compaction = self.live_at_compaction.min(self.queued);
        let state = self.origins.entry(waiter.key().clone()).or_default();
        let at = state.waiting.partition_point(|queued| queued.seq < seq);
        state.waiting.insert(
            at,
            Queued {
                seq,
                waiter: Arc::downgrade(waiter),
            },
        );
        self.queued += 1;
        self.compact_if_mostly_ended(graves);
    }

    /// Drops the ended waiters from every queue, and forgets the origins
    /// that leaves unused, once the queues hold more than 32 entries and
    /// twice as many as at the last compaction (or as since, the fewest an
    /// enqueue saw). All queues, not the one just grown: requests to ever
    /// new origins that end while queued behind the total limit (their
    /// deadlines pass while every permit is held) leave one entry in each
    /// of as many queues — and each entry, a weak reference, keeps its
    /// request's allocation — which nothing else takes out until a permit
    /// comes back. The work stays amortised O(1) per request: the
    /// entries visited are at most twice those queued since the count
    /// the trigger compares with, and the origins — those with
    /// connections, no more than the connections open, and those with
    /// entries — at most twice the entries, as the trigger waits for more
    /// entries than connections too.
    fn compact_if_mostly_ended(&mut self, graves: &mut Graves<W>) {
        if self.queued <= 32
            || self.queued <= 2 * self.live_at_compaction
            || self.queued <= self.open
        {
            return;
        }
        let mut kept = 0;
        #[cfg(test)]
        let visited = &mut self.visited;
        self.origins.retain(|_, state| {
            #[cfg(test)]
            {
                *visited += 1;
            }
            state.waiting.retain(|queued| {
                #[cfg(test)]
                {
                    *visited += 1;
                }
                match queued.waiter.upgrade() {
                    Some(waiter) if !waiter.is_done() => {
                        graves.push(waiter);
                        true
                    }
                    Some(ended) => {
                        graves.push(ended);
                        false
                    }
                    None => false,
                }
            });
            kept += state.waiting.len();
            !state.unused()
        });
        self.queued = kept;
        self.live_at_compaction = kept;
    }

    /// Takes the connection idle the longest, of any origin, out of the pool.
    fn take_longest_idle(&mut self) -> Option<C> {
        let (origin, index) = self
            .origins
            .iter()
            .flat_map(|(origin, state)| {
                state
                    .idle
                    .iter()
                    .enumerate()
                    .map(move |(i, c)| (origin, i, c.idle_since()))
            })
            .min_by_key(|&(_, _, idle_since)| idle_since)
            .map(|(origin, index, _)| (origin.clone(), index))?;
        Some(self.origins.get_mut(&origin)?.idle.remove(index))
    }

    /// Takes the connection of `origin` idle the longest out of the pool
    /// (idle lists are in the order connections were offered).
    fn take_longest_idle_of(&mut self, origin: &Route) -> Option<C> {
        let state = self.origins.get_mut(origin)?;
        (!state.idle.is_empty()).then(|| state.idle.remove(0))
    }

    /// Forgets an origin nothing refers to any more.
    fn tidy(&mut self, origin: &Route) {
        if self.origins.get(origin).is_some_and(OriginState::unused) {
            self.origins.remove(origin);
        }
    }
}

impl<W: Waiter, C: Pooled> Pool<W, C> {
    /// Takes every live waiter of `origin` out of its queue, oldest first:
    /// a connection that serves them all at once (HTTP/2) has opened.
    pub(crate) fn take_waiters(&self, origin: &Route) -> Vec<Arc<W>> {
        let queued: Vec<Queued<W>> = {
            let mut inner = lock(&self.inner);
            let Some(state) = inner.origins.get_mut(origin) else {
                return Vec::new();
            };
            let queued: Vec<_> = state.waiting.drain(..).collect();
            inner.queued -= queued.len();
            queued
        };
        // Upgraded and dropped after the unlock (see the invariants).
        queued
            .into_iter()
            .filter_map(|queued| queued.waiter.upgrade())
            .filter(|waiter| !waiter.is_done())
            .collect()
    }

    /// Takes `waiter` out of its queue, if it is there still: `false` if
    /// it is not — what took it meanwhile (a permit given back, a
    /// connection offered back, [`take_waiters`](Self::take_waiters))
    /// serves it. Looked for from the back: the caller has just queued it.
    pub(crate) fn withdraw(&self, waiter: &Arc<W>) -> bool {
        let mut inner = lock(&self.inner);
        let origin = waiter.key();
        let Some(state) = inner.origins.get_mut(origin) else {
            return false;
        };
        let Some(at) = state
            .waiting
            .iter()
            .rposition(|queued| std::ptr::eq(queued.waiter.as_ptr(), Arc::as_ptr(waiter)))
        else {
            return false;
        };
        // A weak reference: dropped under the lock, it runs nothing.
        state.waiting.remove(at);
        inner.queued -= 1;
        inner.tidy(origin);
        true
    }

    pub(crate) fn new(limits: PoolLimits) -> Self {
        Pool {
            limits,
            inner: Mutex::new(Inner {
                origins: HashMap::default(),
                open: 0,
                queued: 0,
                live_at_compaction: 0,
                next_seq: 1,
                closed: false,
                #[cfg(test)]
                visited: 0,
            }),
        }
    }

    /// Takes an idle connection for `waiter` (if `allow_idle`, and it does
    /// not [want a fresh one](Waiter::wants_fresh)), else a permit, else
    /// queues it. Returns also the connections to close: idle ones found
    /// expired on the way, and one closed to make room.
    pub(crate) fn acquire(
        &self,
        waiter: &Arc<W>,
        now: Instant,
        allow_idle: bool,
    ) -> (Acquired<C>, Vec<C>) {
        // A request that has gone again once already (its retry spent) has
        // no retry left for a pooled connection its server closes as it
        // comes: it goes on a new one, as it would be served from the queue.
        let allow_idle = allow_idle && !waiter.wants_fresh();
        let mut graves = Graves::new();
        let mut to_close = Vec::new();
        let acquired = {
            let mut inner = lock(&self.inner);
            let origin = waiter.key();
            // Stamped even if served at once: the hops it leads to follow it.
            waiter.place().get_or_stamp(|| inner.stamp());
            if inner.closed {
                Acquired::Closed
            } else if let Some(idle) = allow_idle
                .then(|| self.take_idle(&mut inner, origin, now, &mut to_close))
                .flatten()
            {
                Acquired::Idle(idle)
            } else if inner.total_has_room(&self.limits)
                && inner.host_has_room(&self.limits, origin)
            {
                inner.grant(origin);
                Acquired::Permit
            } else {
                inner.enqueue(waiter, &mut graves);
                // Room for it, if only idle connections fill the total: the
                // one closed gives back its permit (`release`). Expired
                // connections of its origin found on the way close anyway,
                // and give back theirs: then no other is closed for it —
                // that one would be a good connection lost for nothing.
                let for_total = inner.host_has_room(&self.limits, origin);
                if for_total {
                    if to_close.is_empty() {
                        to_close.extend(inner.take_longest_idle());
                    }
                } else if !allow_idle {
                    // A request that may not take an idle connection of its
                    // origin: one of those may be what fills the host's
                    // limit, and its permit serves it once closed.
                    to_close.extend(inner.take_longest_idle_of(origin));
                }
                Acquired::Queued {
                    wants_room: for_total && to_close.is_empty(),
                }
            }
        };
        drop(graves);
        (acquired, to_close)
    }

    /// The most recently used idle connection of `origin` that has not
    /// expired (the likeliest to be still open); expired ones go to `to_close`.
    fn take_idle(
        &self,
        inner: &mut Inner<W, C>,
        origin: &Route,
        now: Instant,
        to_close: &mut Vec<C>,
    ) -> Option<C> {
        let state = inner.origins.get_mut(origin)?;
        while let Some(idle) = state.idle.pop() {
            if self.limits.expired(&idle, now) {
                to_close.push(idle);
            } else {
                return Some(idle);
            }
        }
        None
    }

    /// Offers a connection back at `now`: after a response (`idle_since`
    /// is now), or unused (a request took it and ended before anything was
    /// sent: `idle_since` is when it last went idle, and its idle timeout
    /// may have passed since). The connection is handed back with
    /// [`Offer::Kept`]'s opposite: the caller still holds it unless the
    /// pool kept it.
    pub(crate) fn offer(&self, idle: C, now: Instant) -> Offer<W> {
        let mut graves = Graves::new();
        let offer = {
            let mut inner = lock(&self.inner);
            self.place(&mut inner, idle, now, &mut graves)
        };
        drop(graves);
        offer
    }

    fn place(
        &self,
        inner: &mut Inner<W, C>,
        idle: C,
        now: Instant,
        graves: &mut Graves<W>,
    ) -> Offer<W> {
        if inner.closed || self.limits.expired(&idle, now) {
            return Offer::Refused;
        }
        if inner.queued == 0 {
            // Nobody waits: the common case, and no queue to look at; the
            // key is cloned only for an origin not in the map yet.
            match inner.origins.get_mut(idle.key()) {
                Some(state) => state.idle.push(idle),
                None => inner
                    .origins
                    .entry(idle.key().clone())
                    .or_default()
                    .idle
                    .push(idle),
            }
            return Offer::Kept;
        }
        let origin = idle.key().clone();
        let own = inner.front(&origin, graves);
        // Another origin's oldest waiter that this connection's permit could
        // serve, were it closed.
        let limits = self.limits;
        let other = inner
            .oldest_where(graves, |inner, other| {
                *other != origin && inner.host_has_room(&limits, other)
            })
            .map(|(seq, other, waiter)| {
                graves.push(waiter);
                (seq, other)
            });
        match (own, other) {
            (Some((seq, waiter)), other) if other.as_ref().is_none_or(|(o, _)| seq < *o) => {
                if waiter.wants_fresh() {
                    // Its permit serves it, on a new connection.
                    graves.push(waiter);
                    return Offer::Refused;
                }
                // Still the front: only other origins' queues were looked at.
                inner.pop_seen_front(&origin);
                Offer::Serve(waiter)
            }
            (own, Some(_)) => {
                graves.extend(own.map(|(_, waiter)| waiter));
                Offer::Refused
            }
            (_, None) => {
                inner.origins.entry(origin).or_default().idle.push(idle);
                Offer::Kept
            }
        }
    }

    /// Whether a live waiter of another origin than `origin` could use the
    /// permit of a connection to `origin`, were it closed (its host has
    /// room: the total holds it). An HTTP/2 connection that has just lost
    /// its last stream closes then, as an HTTP/1.1 connection offered back
    /// would be refused ([`offer`](Self::offer)).
    pub(crate) fn permit_wanted(&self, origin: &Route) -> bool {
        // Without a total limit nobody waits for one (a host's limit is
        // its own connections'): no lock, as every HTTP/2 connection asks
        // this each time it goes idle.
        if self.limits.max_connections.is_none() {
            return false;
        }
        let mut graves = Graves::new();
        let wanted = {
            let mut inner = lock(&self.inner);
            let limits = self.limits;
            !inner.closed
                && inner
                    .oldest_where(&mut graves, |inner, other| {
                        other != origin && inner.host_has_room(&limits, other)
                    })
                    .map(|(_, _, waiter)| graves.push(waiter))
                    .is_some()
        };
        drop(graves);
        wanted
    }

    /// Puts `waiter`, served a connection that turned out closed before it
    /// could take it, back into its queue at its place, where it stood: ahead
    /// of every waiter queued after it (those served since it kept theirs
    /// too), so that the permit of that connection, released next, serves
    /// it first. `false` if the pool is closed: nothing will serve it.
    pub(crate) fn requeue(&self, waiter: &Arc<W>) -> bool {
        let mut graves = Graves::new();
        {
            let mut inner = lock(&self.inner);
            if inner.closed {
                return false;
            }
            // Usually back to the front.
            inner.enqueue(waiter, &mut graves);
        }
        drop(graves);
        true
    }

    /// A connection to `origin` closed: returns its permit, and the waiter
    /// it now serves (which holds the permit).
    pub(crate) fn release(&self, origin: &Route) -> Option<Arc<W>> {
        let mut graves = Graves::new();
        let served = {
            let mut inner = lock(&self.inner);
            inner.open = inner.open.saturating_sub(1);
            if let Some(state) = inner.origins.get_mut(origin) {
                state.open = state.open.saturating_sub(1);
            }
            let served = if inner.closed {
                None
            } else {
                inner.serve_with_permit(&self.limits, &mut graves)
            };
            inner.tidy(origin);
            served
        };
        drop(graves);
        served
    }

    /// The loop saw an idle connection close: out of the pool with it (if
    /// an exchange took it meanwhile, that one finds it closed).
    pub(crate) fn remove_idle(&self, origin: &Route, id: u64) -> Option<C> {
        let mut inner = lock(&self.inner);
        let state = inner.origins.get_mut(origin)?;
        let index = state.idle.iter().position(|idle| idle.id() == id)?;
        Some(state.idle.remove(index))
    }

    /// Removes and returns the idle connections past their idle timeout or
    /// time to live (the cleaner, on the wheel). A list with none of them
    /// is left as it was: a round that evicts nothing allocates nothing.
    pub(crate) fn evict_expired(&self, now: Instant) -> Vec<C> {
        let mut inner = lock(&self.inner);
        let mut evicted = Vec::new();
        let expired = |idle: &C| self.limits.expired(idle, now);
        for state in inner.origins.values_mut() {
            if !state.idle.iter().any(expired) {
                continue;
            }
            let (expired, keep): (Vec<_>, Vec<_>) = state.idle.drain(..).partition(expired);
            state.idle = keep;
            evicted.extend(expired);
        }
        evicted
    }

    /// Closes the pool: no more permits or offers. Returns the idle
    /// connections and the waiters still live, for the caller to close and fail.
    pub(crate) fn close(&self) -> (Vec<C>, Vec<Arc<W>>) {
        let mut graves = Graves::new();
        let mut idle = Vec::new();
        let mut waiting = Vec::new();
        {
            let mut inner = lock(&self.inner);
            inner.closed = true;
            for state in inner.origins.values_mut() {
                idle.append(&mut state.idle);
                for queued in state.waiting.drain(..) {
                    match queued.waiter.upgrade() {
                        Some(waiter) if !waiter.is_done() => waiting.push(waiter),
                        Some(ended) => graves.push(ended),
                        None => {}
                    }
                }
            }
            inner.queued = 0;
        }
        drop(graves);
        (idle, waiting)
    }

    /// Whether a request to `origin` would get a permit now (a hint: the
    /// answer may change before it asks).
    pub(crate) fn has_room(&self, origin: &Route) -> bool {
        let inner = lock(&self.inner);
        !inner.closed
            && inner.total_has_room(&self.limits)
            && inner.host_has_room(&self.limits, origin)
    }

    /// Whether an idle connection's server limited its idle time
    /// ([`Pooled::server_idle_limit`]).
    pub(crate) fn holds_server_limited(&self) -> bool {
        let inner = lock(&self.inner);
        inner
            .origins
            .values()
            .flat_map(|origin| &origin.idle)
            .any(|idle| idle.server_idle_limit().is_some())
    }

    /// Open connections (idle or busy) and idle ones, for snapshots.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let inner = lock(&self.inner);
        let idle = inner.origins.values().map(|s| s.idle.len()).sum();
        (inner.open, idle)
    }

    /// Requests waiting for a connection (ended ones not counted).
    pub(crate) fn waiting(&self) -> usize {
        let mut graves = Graves::new();
        let count = {
            let inner = lock(&self.inner);
            let mut count = 0;
            for queued in inner.origins.values().flat_map(|s| &s.waiting) {
                if let Some(waiter) = queued.waiter.upgrade() {
                    count += usize::from(!waiter.is_done());
                    graves.push(waiter);
                }
            }
            count
        };
        drop(graves);
        count
    }

    #[cfg(test)]
    fn visited(&self) -> usize {
        lock(&self.inner).visited
    }

    /// Origins known and queue entries held (ended waiters included).
    #[cfg(test)]
    fn origins_and_queued(&self) -> (usize, usize) {
        let inner = lock(&self.inner);
        (inner.origins.len(), inner.queued)
    }
}

#[cfg(test)]
mod tests;
