//! [`Pool`]: idle keep-alive connections per origin, and the permits that
//! bound how many connections are open.
//!
//! # Invariants
//!
//! * Every open (or opening) connection holds one permit, counted both for
//!   its origin and in the total, from the moment a request is granted one
//!   until the connection is closed and [`Pool::release`] is called.
//! * An idle connection is in exactly one place: the pool's idle list, or
//!   the exchange that took it. Its socket stays registered on its loop,
//!   which notices a server close and removes it ([`Pool::remove_idle`]).
//! * A request that finds neither an idle connection nor a permit waits in
//!   a FIFO; a connection offered back or a permit released serves the
//!   oldest waiter that can use it. A waiter that ended meanwhile (its
//!   deadline passed) is skipped. The wait is bounded by the request
//!   deadline, which is armed before the request waits.
//! * Idle connections never keep a request waiting for the total limit:
//!   one that queues for it has the longest-idle connection of another
//!   origin closed to make room, and a connection offered back while such
//!   a request waits is closed rather than kept.
//! * A request retried after a pooled connection failed under it goes again
//!   on a fresh connection, never a pooled one: a connection offered back
//!   while it is the oldest waiter of its origin is closed, so that the
//!   permit serves it.

use crate::event_loop::lock;
use crate::events::ConnectionInfo;
use crate::exchange::{ConnRef, Exchange};
use crate::origin::Origin;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An idle connection, ready for another request.
#[derive(Clone)]
pub(crate) struct IdleConn {
    pub(crate) conn: ConnRef,
    pub(crate) info: ConnectionInfo,
    pub(crate) origin: Origin,
    pub(crate) idle_since: Instant,
    pub(crate) created: Instant,
}

/// What a request gets from the pool.
pub(crate) enum Acquired {
    /// An idle connection to reuse.
    Idle(IdleConn),
    /// A permit to open a new connection.
    Permit,
    /// Neither: the request was queued and will be served later.
    Queued,
    /// The client is closed.
    Closed,
}

/// What a released permit now serves: a waiter that holds the permit and
/// needs a connection opened.
pub(crate) struct Served(pub(crate) Arc<Exchange>);

/// What became of a connection offered back.
pub(crate) enum Offered {
    /// It is idle in the pool.
    Kept,
    /// A waiter for its origin takes it: run the waiter on it.
    Serve(Arc<Exchange>),
    /// Close it: the pool is closed, the connection is past its time to
    /// live, or its permit is worth more to a waiter (see the invariants).
    Refused,
}

#[derive(Default)]
struct OriginState {
    idle: Vec<IdleConn>,
    open: usize,
}

struct Inner {
    origins: HashMap<Origin, OriginState>,
    open: usize,
    waiting: VecDeque<Arc<Exchange>>,
    closed: bool,
}

/// Limits the pool enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolLimits {
    pub(crate) max_connections: Option<usize>,
    pub(crate) max_connections_per_host: Option<usize>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) ttl: Option<Duration>,
}

pub(crate) struct Pool {
    limits: PoolLimits,
    inner: Mutex<Inner>,
}

impl Inner {
    fn has_permit(&self, limits: &PoolLimits, origin: &Origin) -> bool {
        let per_host = self.origins.get(origin).map_or(0, |o| o.open);
        limits.max_connections.is_none_or(|max| self.open < max)
            && limits
                .max_connections_per_host
                .is_none_or(|max| per_host < max)
    }

    /// Whether a live waiter is held back by the total limit alone (its
    /// origin is under its own limit): a permit freed anywhere would serve it.
    fn starved_by_total(&self, limits: &PoolLimits) -> bool {
        limits.max_connections.is_some_and(|max| self.open >= max)
            && self.waiting.iter().any(|exchange| {
                let per_host = self.origins.get(&exchange.origin).map_or(0, |o| o.open);
                !exchange.is_done()
                    && limits
                        .max_connections_per_host
                        .is_none_or(|max| per_host < max)
            })
    }

    /// Takes the connection idle the longest, of any origin, out of the pool.
    fn take_longest_idle(&mut self) -> Option<IdleConn> {
        let (origin, index) = self
            .origins
            .iter()
            .flat_map(|(origin, state)| {
                state
                    .idle
                    .iter()
                    .enumerate()
                    .map(move |(i, c)| (origin, i, c.idle_since))
            })
            .min_by_key(|&(_, _, idle_since)| idle_since)
            .map(|(origin, index, _)| (origin.clone(), index))?;
        Some(self.origins.get_mut(&origin)?.idle.remove(index))
    }

    fn grant(&mut self, origin: &Origin) {
        self.open += 1;
        self.origins.entry(origin.clone()).or_default().open += 1;
    }

    /// Serves the oldest waiter that a permit can serve now.
    fn serve_waiter_with_permit(&mut self, limits: &PoolLimits) -> Option<Arc<Exchange>> {
        self.waiting.retain(|exchange| !exchange.is_done());
        let index = self
            .waiting
            .iter()
            .position(|exchange| self.has_permit(limits, &exchange.origin))?;
        let exchange = self.waiting.remove(index)?;
        self.grant(&exchange.origin);
        Some(exchange)
    }
}

impl Pool {
    pub(crate) fn new(limits: PoolLimits) -> Pool {
        Pool {
            limits,
            inner: Mutex::new(Inner {
                origins: HashMap::new(),
                open: 0,
                waiting: VecDeque::new(),
                closed: false,
            }),
        }
    }

    fn expired(&self, idle: &IdleConn, now: Instant) -> bool {
        self.limits
            .idle_timeout
            .is_some_and(|timeout| now.saturating_duration_since(idle.idle_since) >= timeout)
            || self
                .limits
                .ttl
                .is_some_and(|ttl| now.saturating_duration_since(idle.created) >= ttl)
    }

    /// Takes an idle connection for `exchange` (if `allow_idle`), else a
    /// permit, else queues it. Expired idle connections found on the way are
    /// returned for closing.
    pub(crate) fn acquire(
        &self,
        exchange: &Arc<Exchange>,
        now: Instant,
        allow_idle: bool,
    ) -> (Acquired, Vec<IdleConn>) {
        let mut inner = lock(&self.inner);
        let mut expired = Vec::new();
        if inner.closed {
            return (Acquired::Closed, expired);
        }
        let idle = inner
            .origins
            .get_mut(&exchange.origin)
            .filter(|_| allow_idle);
        if let Some(origin) = idle {
            // Most recently used first: the likeliest to be still open.
            while let Some(idle) = origin.idle.pop() {
                if self.expired(&idle, now) {
                    expired.push(idle);
                } else {
                    return (Acquired::Idle(idle), expired);
                }
            }
        }
        if inner.has_permit(&self.limits, &exchange.origin) {
            inner.grant(&exchange.origin);
            (Acquired::Permit, expired)
        } else {
            // Ended waiters are skipped when served; drop them here too, so
            // a queue behind hung connections does not grow without bound.
            inner.waiting.retain(|waiting| !waiting.is_done());
            inner.waiting.push_back(exchange.clone());
            // Room for it, if only idle connections of other origins fill
            // the total: the one closed gives back its permit (`release`).
            if inner.starved_by_total(&self.limits) {
                expired.extend(inner.take_longest_idle());
            }
            (Acquired::Queued, expired)
        }
    }

    /// Offers a connection back after a response.
    pub(crate) fn offer(&self, idle: IdleConn) -> Offered {
        let mut inner = lock(&self.inner);
        if inner.closed || self.expired(&idle, idle.idle_since) {
            return Offered::Refused;
        }
        inner.waiting.retain(|exchange| !exchange.is_done());
        if let Some(index) = inner.waiting.iter().position(|e| e.origin == idle.origin) {
            if inner.waiting[index].retried.load(Ordering::Acquire) {
                // It needs a fresh connection: this one's permit serves it.
                return Offered::Refused;
            }
            let exchange = inner.waiting.remove(index).expect("index from position");
            return Offered::Serve(exchange);
        }
        if inner.starved_by_total(&self.limits) {
            // Kept idle, it would hold a permit another origin waits for.
            return Offered::Refused;
        }
        inner
            .origins
            .entry(idle.origin.clone())
            .or_default()
            .idle
            .push(idle);
        Offered::Kept
    }

    /// A connection closed: returns its permit, and the waiter it now serves.
    pub(crate) fn release(&self, origin: &Origin) -> Option<Served> {
        let mut inner = lock(&self.inner);
        inner.open = inner.open.saturating_sub(1);
        if let Some(state) = inner.origins.get_mut(origin) {
            state.open = state.open.saturating_sub(1);
            if state.open == 0 && state.idle.is_empty() {
                inner.origins.remove(origin);
            }
        }
        if inner.closed {
            return None;
        }
        inner.serve_waiter_with_permit(&self.limits).map(Served)
    }

    /// The loop saw an idle connection close: out of the pool with it (if
    /// an exchange took it meanwhile, that one finds it closed).
    pub(crate) fn remove_idle(&self, origin: &Origin, conn_id: u64) {
        let mut inner = lock(&self.inner);
        if let Some(state) = inner.origins.get_mut(origin) {
            state.idle.retain(|idle| idle.conn.conn_id != conn_id);
        }
    }

    /// Removes and returns the idle connections past their idle timeout or
    /// time to live (the cleaner, on the wheel).
    pub(crate) fn evict_expired(&self, now: Instant) -> Vec<IdleConn> {
        let mut inner = lock(&self.inner);
        let mut evicted = Vec::new();
        for state in inner.origins.values_mut() {
            let (keep, expired): (Vec<_>, Vec<_>) = state
                .idle
                .drain(..)
                .partition(|idle| !self.expired(idle, now));
            state.idle = keep;
            evicted.extend(expired);
        }
        evicted
    }

    /// Closes the pool: no more permits or offers. Returns the idle
    /// connections and the queued exchanges, for the caller to close and fail.
    pub(crate) fn close(&self) -> (Vec<IdleConn>, Vec<Arc<Exchange>>) {
        let mut inner = lock(&self.inner);
        inner.closed = true;
        let idle = inner
            .origins
            .values_mut()
            .flat_map(|s| s.idle.drain(..))
            .collect();
        let waiting = inner.waiting.drain(..).collect();
        (idle, waiting)
    }

    /// Open connections (idle or busy) and idle ones, for snapshots.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let inner = lock(&self.inner);
        let idle = inner.origins.values().map(|s| s.idle.len()).sum();
        (inner.open, idle)
    }

    /// Exchanges waiting for a connection. One that ended while queued (its
    /// deadline passed, it was cancelled) stays in the queue until the next
    /// offer or release skips it, but is not waiting.
    pub(crate) fn waiting(&self) -> usize {
        let inner = lock(&self.inner);
        inner.waiting.iter().filter(|e| !e.is_done()).count()
    }
}
