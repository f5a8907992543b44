//! The pool alone, on a manual clock: limits, waiters in order across
//! origins, idle eviction, retried waiters, ended waiters, and what it costs
//! to queue — with stand-ins for requests and connections.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use tickless_timer::{Clock, ManualClock};

struct Request {
    origin: Route,
    name: &'static str,
    done: AtomicBool,
    fresh: bool,
    /// Run when the request is dropped (a callback holding the last client).
    on_drop: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// A reference to itself, let go of the first time the pool asks
    /// whether it is done.
    hold: Mutex<Option<Arc<Request>>>,
    /// Ends (as a cancel or a timeout on another thread would) when the
    /// pool asks for the `ends_on_ask`-th time whether it is done; 0: never.
    ends_on_ask: usize,
    asks: std::sync::atomic::AtomicUsize,
    place: PlaceCell,
}

impl Waiter for Request {
    fn key(&self) -> &Route {
        &self.origin
    }
    fn is_done(&self) -> bool {
        drop(self.hold.lock().unwrap().take());
        let asked = self.asks.fetch_add(1, Ordering::SeqCst) + 1;
        if self.ends_on_ask != 0 && asked >= self.ends_on_ask {
            self.done.store(true, Ordering::SeqCst);
        }
        self.done.load(Ordering::SeqCst)
    }
    fn wants_fresh(&self) -> bool {
        self.fresh
    }
    fn place(&self) -> &PlaceCell {
        &self.place
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if let Some(f) = self.on_drop.get_mut().unwrap().take() {
            f();
        }
    }
}

struct Idle {
    origin: Route,
    id: u64,
    idle_since: Instant,
    created: Instant,
    server_idle_limit: Option<Duration>,
}

impl Pooled for Idle {
    fn key(&self) -> &Route {
        &self.origin
    }
    fn id(&self) -> u64 {
        self.id
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

fn origin(host: &str) -> Route {
    Route::Direct(crate::net::Origin::of(&format!("http://{host}/").parse().unwrap()).unwrap())
}

fn request(host: &str, name: &'static str) -> Arc<Request> {
    Arc::new(Request {
        origin: origin(host),
        name,
        done: AtomicBool::new(false),
        fresh: false,
        on_drop: Mutex::new(None),
        hold: Mutex::new(None),
        ends_on_ask: 0,
        asks: std::sync::atomic::AtomicUsize::new(0),
        place: PlaceCell::default(),
    })
}

/// `request`, made to end between two looks of the pool: live when it is
/// first asked, ended from the `ask`-th question on.
fn request_ending_on_ask(request: Arc<Request>, ask: usize) -> Arc<Request> {
    let mut request = Arc::try_unwrap(request).ok().expect("not shared yet");
    request.ends_on_ask = ask;
    Arc::new(request)
}

/// `request`, marked as one that must go out on a fresh connection.
fn request_wanting(request: Arc<Request>, fresh: bool) -> Arc<Request> {
    let mut request = Arc::try_unwrap(request).ok().expect("not shared yet");
    request.fresh = fresh;
    Arc::new(request)
}

fn idle(host: &str, id: u64, clock: &ManualClock) -> Idle {
    Idle {
        origin: origin(host),
        id,
        idle_since: clock.now(),
        created: clock.now(),
        server_idle_limit: None,
    }
}

type TestPool = Pool<Request, Idle>;

fn pool(limits: PoolLimits) -> (TestPool, ManualClock) {
    (Pool::new(limits), ManualClock::new())
}

fn limited(total: Option<usize>, per_host: Option<usize>) -> PoolLimits {
    PoolLimits {
        max_connections: total,
        max_connections_per_host: per_host,
        ..PoolLimits::default()
    }
}

fn acquired(pool: &TestPool, request: &Arc<Request>, clock: &ManualClock) -> &'static str {
    match pool.acquire(request, clock.now(), true).0 {
        Acquired::Idle(_) => "idle",
        Acquired::Permit => "permit",
        Acquired::Queued { .. } => "queued",
        Acquired::Closed => "closed",
    }
}

fn served(served: Option<Arc<Request>>) -> Option<&'static str> {
    served.map(|request| request.name)
}

#[test]
fn permits_are_bounded_per_host_and_in_total() {
    let (pool, clock) = pool(limited(Some(3), Some(2)));
    let a = [request("a", "a1"), request("a", "a2"), request("a", "a3")];
    let b = [request("b", "b1"), request("b", "b2")];
    assert_eq!(acquired(&pool, &a[0], &clock), "permit");
    assert_eq!(acquired(&pool, &a[1], &clock), "permit");
    assert_eq!(acquired(&pool, &a[2], &clock), "queued", "per-host limit");
    assert_eq!(acquired(&pool, &b[0], &clock), "permit");
    assert_eq!(acquired(&pool, &b[1], &clock), "queued", "total limit");
    assert_eq!(pool.counts(), (3, 0));
    assert_eq!(pool.waiting(), 2);
    // A released `a` permit serves the oldest waiter it can: a3 (b2 is
    // younger, and under the total limit either could go).
    assert_eq!(served(pool.release(&origin("a"))), Some("a3"));
    assert_eq!(served(pool.release(&origin("b"))), Some("b2"));
    assert_eq!(pool.counts(), (3, 0));
    assert_eq!(pool.waiting(), 0);
}

/// A redirect's next hop queues at its request's place: ahead of the
/// requests that asked after that one, which the permit its redirect's
/// connection gives back would otherwise serve first.
#[test]
fn a_redirects_next_hop_is_served_before_the_requests_sent_after_its_own() {
    let (pool, clock) = pool(limited(None, Some(1)));
    let first = request("a", "first");
    let later = [request("a", "later1"), request("a", "later2")];
    assert_eq!(acquired(&pool, &first, &clock), "permit");
    for later in &later {
        assert_eq!(acquired(&pool, later, &clock), "queued");
    }
    let next_hop = request("a", "next hop");
    next_hop.place.follow(&first.place);
    assert_eq!(acquired(&pool, &next_hop, &clock), "queued");
    assert_eq!(served(pool.release(&origin("a"))), Some("next hop"));
    assert_eq!(served(pool.release(&origin("a"))), Some("later1"));
    assert_eq!(served(pool.release(&origin("a"))), Some("later2"));
}

/// A waiter withdrawn from its queue leaves it, and nothing serves it
/// afterwards; one already taken out (here by `take_waiters`, as an HTTP/2
/// connection of its origin that has just opened does) is not withdrawn:
/// what took it serves it.
#[test]
fn a_withdrawn_waiter_leaves_its_queue_and_one_taken_already_is_not_withdrawn() {
    let (pool, clock) = pool(limited(None, Some(1)));
    let [a1, a2, a3] = [request("a", "a1"), request("a", "a2"), request("a", "a3")];
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    assert_eq!(acquired(&pool, &a2, &clock), "queued");
    assert_eq!(acquired(&pool, &a3, &clock), "queued");
    assert!(pool.withdraw(&a2));
    assert!(!pool.withdraw(&a2), "withdrawn once");
    assert_eq!(pool.waiting(), 1);
    let taken: Vec<_> = pool.take_waiters(&origin("a"));
    assert_eq!(taken.iter().map(|w| w.name).collect::<Vec<_>>(), ["a3"]);
    assert!(!pool.withdraw(&a3), "taken by the HTTP/2 connection");
    assert_eq!(served(pool.release(&origin("a"))), None);
    assert_eq!(pool.counts(), (0, 0));
}

/// #18, defect 2: with one connection in all, B1 queued before A2..A6 goes
/// out as soon as A's connection comes back, not after six requests to A.
#[test]
fn an_older_waiter_of_another_origin_gets_the_permit_of_a_connection_offered_back() {
    let (pool, clock) = pool(limited(Some(1), None));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let b1 = request("b", "b1");
    assert_eq!(acquired(&pool, &b1, &clock), "queued");
    let younger: Vec<_> = ["a2", "a3", "a4", "a5", "a6"]
        .into_iter()
        .map(|name| request("a", name))
        .collect();
    for a in &younger {
        assert_eq!(acquired(&pool, a, &clock), "queued");
    }
    // A's connection is offered back: B1 is older than A2, so the
    // connection is closed and its permit serves B1.
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("a"))), Some("b1"));
    // B's connection comes back: A2 is now the oldest, and needs A's
    // permit: B's connection closes too.
    assert!(matches!(
        pool.offer(idle("b", 2, &clock), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("b"))), Some("a2"));
    // Then A's connection serves A3..A6 in order, reused each time.
    for name in ["a3", "a4", "a5", "a6"] {
        match pool.offer(idle("a", 3, &clock), clock.now()) {
            Offer::Serve(request) => assert_eq!(request.name, name),
            _ => panic!("{name} not served by the connection offered back"),
        }
    }
    assert!(matches!(
        pool.offer(idle("a", 3, &clock), clock.now()),
        Offer::Kept
    ));
}

#[test]
fn a_connection_offered_back_serves_its_own_origin_first_when_its_waiter_is_older() {
    let (pool, clock) = pool(limited(Some(1), None));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let a2 = request("a", "a2");
    let b1 = request("b", "b1");
    assert_eq!(acquired(&pool, &a2, &clock), "queued");
    assert_eq!(acquired(&pool, &b1, &clock), "queued");
    match pool.offer(idle("a", 1, &clock), clock.now()) {
        Offer::Serve(request) => assert_eq!(request.name, "a2"),
        _ => panic!("a2 should reuse the connection"),
    }
}

/// The connection `pool` hands to a waiter when `host`'s connection `id`
/// is offered back: the waiter's name.
fn served_by_offer(pool: &TestPool, host: &str, id: u64, clock: &ManualClock) -> &'static str {
    match pool.offer(idle(host, id, clock), clock.now()) {
        Offer::Serve(request) => request.name,
        _ => panic!("the connection offered back should serve a waiter"),
    }
}

/// The oldest waiter, handed a connection that turns out closed, keeps its
/// place: the permit of that connection serves it, not a younger waiter
/// of its origin or of another one.
#[test]
fn a_waiter_served_a_closed_connection_keeps_its_place_at_the_front() {
    let (pool, clock) = pool(limited(Some(1), None));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let [a2, b1, a3] = [request("a", "a2"), request("b", "b1"), request("a", "a3")];
    for waiter in [&a2, &b1, &a3] {
        assert_eq!(acquired(&pool, waiter, &clock), "queued");
    }
    assert_eq!(served_by_offer(&pool, "a", 1, &clock), "a2");
    // Its connection was closed: a2 goes back, and the connection's
    // permit comes back as it closes.
    assert!(pool.requeue(&a2));
    assert_eq!(pool.waiting(), 3);
    assert_eq!(served(pool.release(&origin("a"))), Some("a2"));
    // Then the others, in the order they came.
    assert!(matches!(
        pool.offer(idle("a", 2, &clock), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("a"))), Some("b1"));
    assert!(matches!(
        pool.offer(idle("b", 3, &clock), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("b"))), Some("a3"));
}

/// Two waiters served closed connections, given back in the opposite
/// order, each go back where it was.
#[test]
fn waiters_given_back_out_of_order_keep_their_order() {
    let (pool, clock) = pool(limited(None, Some(2)));
    let [a1, a2] = [request("a", "a1"), request("a", "a2")];
    for running in [&a1, &a2] {
        assert_eq!(acquired(&pool, running, &clock), "permit");
    }
    let [a3, a4, a5] = [request("a", "a3"), request("a", "a4"), request("a", "a5")];
    for waiter in [&a3, &a4, &a5] {
        assert_eq!(acquired(&pool, waiter, &clock), "queued");
    }
    let first = served_by_offer(&pool, "a", 1, &clock);
    let second = served_by_offer(&pool, "a", 2, &clock);
    assert_eq!((first, second), ("a3", "a4"));
    assert!(pool.requeue(&a4));
    assert!(pool.requeue(&a3));
    assert_eq!(served(pool.release(&origin("a"))), Some("a3"));
    assert_eq!(served(pool.release(&origin("a"))), Some("a4"));
    assert_eq!(served(pool.release(&origin("a"))), Some("a5"));
}

/// A closed pool takes no waiter back: nothing would serve it.
#[test]
fn a_closed_pool_takes_no_waiter_back() {
    let (pool, clock) = pool(limited(Some(1), None));
    let [a1, a2] = [request("a", "a1"), request("a", "a2")];
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    assert_eq!(acquired(&pool, &a2, &clock), "queued");
    assert_eq!(served_by_offer(&pool, "a", 1, &clock), "a2");
    drop(pool.close());
    assert!(!pool.requeue(&a2));
    assert_eq!(pool.waiting(), 0);
}

#[test]
fn ended_waiters_are_skipped_and_not_kept_alive() {
    let (pool, clock) = pool(limited(Some(1), None));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let timed_out = request("a", "gone");
    let cancelled = request("b", "cancelled");
    let live = request("a", "live");
    for r in [&timed_out, &cancelled, &live] {
        assert_eq!(acquired(&pool, r, &clock), "queued");
    }
    timed_out.done.store(true, Ordering::SeqCst);
    let weak = Arc::downgrade(&cancelled);
    drop(cancelled);
    assert!(weak.upgrade().is_none(), "the queue held a dropped waiter");
    assert_eq!(pool.waiting(), 1);
    assert_eq!(served(pool.release(&origin("a"))), Some("live"));
}

/// An origin the pool knows only from waiters that ended while they
/// queued for the total limit (timed out, cancelled) is forgotten once the
/// pool passes over them — when another origin's connection comes back,
/// kept or closed — not kept for the life of the client: a client with a
/// total limit that meets many hosts would grow by one entry for each,
/// and every scan of the pool's origins with it.
#[test]
fn an_origin_whose_waiters_all_ended_is_forgotten() {
    let origins = |pool: &TestPool| lock(&pool.inner).origins.len();
    let (pool, clock) = pool(limited(Some(1), None));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    // Passed over by a connection offered back, which the pool keeps.
    let b = request("b", "b");
    assert_eq!(acquired(&pool, &b, &clock), "queued");
    b.done.store(true, Ordering::SeqCst);
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    assert_eq!(origins(&pool), 1, "only a's, with its idle connection");
    // Passed over by a permit given back: that of a's idle connection,
    // closed to make room for c, which ends before it is closed.
    let c = request("c", "c");
    assert_eq!(acquired(&pool, &c, &clock), "queued");
    drop(c);
    assert_eq!(served(pool.release(&origin("a"))), None);
    assert_eq!(origins(&pool), 0);
}

/// #18, defect 1: a waiter whose drop comes back for the pool (its callback
/// held the last client, whose drop closes the pool) is never dropped while
/// the pool's lock is held. The waiter below lets go of the last other
/// reference to itself while the pool looks at it, so the pool's own
/// reference is the last: dropped under the lock, its drop would deadlock.
#[test]
fn a_waiter_dropped_by_the_pool_is_dropped_outside_its_lock() {
    let pool = Arc::new(Pool::<Request, Idle>::new(limited(Some(1), None)));
    let clock = ManualClock::new();
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let ended = request("a", "ended");
    assert_eq!(acquired(&pool, &ended, &clock), "queued");
    let (dropped, on_dropped) = std::sync::mpsc::channel();
    {
        let pool = pool.clone();
        *ended.on_drop.lock().unwrap() = Some(Box::new(move || {
            // What the last client's drop does: close the pool.
            drop(pool.close());
            let _ = dropped.send(());
        }));
    }
    ended.done.store(true, Ordering::SeqCst);
    // From now on only the waiter itself holds it, until the pool looks.
    *ended.hold.lock().unwrap() = Some(ended.clone());
    drop(ended);
    let worker = {
        let pool = pool.clone();
        std::thread::spawn(move || served(pool.release(&origin("a"))))
    };
    let deadline = std::time::Duration::from_secs(10);
    assert!(
        on_dropped.recv_timeout(deadline).is_ok(),
        "the waiter's drop never finished: dropped under the pool's lock"
    );
    assert_eq!(worker.join().unwrap(), None);
}

/// Requests to ever new origins that end while queued behind the total
/// limit (their deadlines pass while every permit is held, say by
/// long-lived streams) leave no trace: the pool kept an origin entry and a
/// queue entry for each — a queue entry keeps the ended request's whole
/// allocation, being a weak reference — until a permit came back, and
/// only a queue with more than 32 entries was ever compacted.
#[test]
fn ended_waiters_of_many_origins_do_not_pile_up_behind_the_total_limit() {
    let (pool, clock) = pool(limited(Some(1), None));
    let holder = request("holder", "holds the permit");
    assert_eq!(acquired(&pool, &holder, &clock), "permit");
    for i in 0..2_000 {
        let host = format!("o{i}");
        let r = request(&host, "queued");
        assert_eq!(acquired(&pool, &r, &clock), "queued");
        // Its deadline passes; its caller lets go of it.
        r.done.store(true, Ordering::SeqCst);
    }
    let (origins, queued) = pool.origins_and_queued();
    assert!(
        origins <= 100 && queued <= 100,
        "2000 ended waiters of as many origins left {origins} origins and {queued} queue entries"
    );
}

/// Queues `n` requests to origin "a" (each must queue), nine in ten of
/// which end while queued (their timeouts fire); returns them all.
fn queue_mostly_ended(pool: &TestPool, clock: &ManualClock, n: usize) -> Vec<Arc<Request>> {
    (0..n)
        .map(|i| {
            let r = request("a", "queued");
            assert_eq!(acquired(pool, &r, clock), "queued");
            if i % 10 != 0 {
                r.done.store(true, Ordering::SeqCst);
            }
            r
        })
        .collect()
}

/// #18, defect 3: queueing N requests past the limit looks at O(N) queue
/// entries in all, not O(N²), even when most of them end while queued.
#[test]
fn queueing_costs_amortised_constant_work_per_request() {
    for n in [1_000usize, 8_000] {
        let (pool, clock) = pool(limited(Some(1), None));
        let first = request("a", "first");
        assert_eq!(acquired(&pool, &first, &clock), "permit");
        let _queued = queue_mostly_ended(&pool, &clock, n);
        let visited = pool.visited();
        assert!(
            visited <= 4 * n,
            "{n} requests queued, {visited} queue entries visited"
        );
        assert_eq!(pool.waiting(), n.div_ceil(10));
    }
}

/// The compaction of the queues looks at every origin: with many origins
/// holding connections and few requests queued, it must not run every few
/// requests, or each request would pay for the origins, not its queue.
#[test]
fn queueing_behind_many_origins_with_connections_costs_constant_work() {
    let origins = 2_000;
    let (pool, clock) = pool(limited(Some(origins), None));
    let held: Vec<_> = (0..origins)
        .map(|i| {
            let r = request(&format!("o{i}"), "holder");
            assert_eq!(acquired(&pool, &r, &clock), "permit");
            r
        })
        .collect();
    let n = 1_000;
    let _queued = queue_mostly_ended(&pool, &clock, n);
    let visited = pool.visited();
    assert!(
        visited <= 4 * (n + origins),
        "{n} requests queued behind {origins} origins, {visited} entries and origins visited"
    );
    drop(held);
}

#[test]
fn a_retried_request_is_served_by_a_permit_not_a_pooled_connection() {
    let (pool, clock) = pool(limited(None, Some(1)));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let retried = request_wanting(request("a", "retried"), true);
    assert_eq!(
        match pool.acquire(&retried, clock.now(), false).0 {
            Acquired::Queued { .. } => "queued",
            _ => "other",
        },
        "queued"
    );
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("a"))), Some("retried"));
}

/// A request that has gone again once (its retry spent), dispatched with
/// idle connections allowed (an HTTP/2 server's `GOAWAY` sent it
/// elsewhere), takes no idle connection of its origin — a close as it
/// came would fail it with no retry left — but a permit; with none free,
/// it queues and the idle connection of its origin closes for it.
#[test]
fn a_retried_request_takes_no_idle_connection_even_where_idle_ones_are_allowed() {
    let (pool, clock) = pool(limited(None, Some(2)));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    let retried = request_wanting(request("a", "retried"), true);
    assert_eq!(acquired(&pool, &retried, &clock), "permit");
    let again = request_wanting(request("a", "again"), true);
    let (got, to_close) = pool.acquire(&again, clock.now(), true);
    assert!(matches!(got, Acquired::Queued { .. }));
    let closed: Vec<u64> = to_close.iter().map(|c| c.id).collect();
    assert_eq!(closed, [1], "the idle connection of its origin");
    assert_eq!(served(pool.release(&origin("a"))), Some("again"));
    // A request that has not gone again takes the idle connection.
    assert!(matches!(
        pool.offer(idle("a", 2, &clock), clock.now()),
        Offer::Kept
    ));
    assert_eq!(acquired(&pool, &request("a", "a2"), &clock), "idle");
}

/// A retried request (which may only go out on a fresh connection) that
/// queues for its host's limit while a connection of its own origin sits
/// idle: nothing closes that connection for it, so it waits until some busy
/// connection of its origin is offered back, or the idle one expires —
/// with no idle timeout and nothing else in flight, until its deadline.
#[test]
fn a_retried_request_waiting_for_its_host_limit_has_an_idle_connection_of_its_origin_closed() {
    let (pool, clock) = pool(limited(None, Some(2)));
    let (a1, a2) = (request("a", "a1"), request("a", "a2"));
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    assert_eq!(acquired(&pool, &a2, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    let retried = request_wanting(request("a", "retried"), true);
    let (got, to_close) = pool.acquire(&retried, clock.now(), false);
    assert!(matches!(got, Acquired::Queued { .. }));
    let closed: Vec<u64> = to_close.iter().map(|c| c.id).collect();
    assert_eq!(closed, [1], "the idle connection of its origin");
    assert_eq!(served(pool.release(&origin("a"))), Some("retried"));
}

/// A connection offered back while the front waiter of its origin ends
/// (its deadline passes on the wheel, its caller cancels) between the
/// pool's two looks at it under the lock: `place` saw it live, then its
/// `pop_front` finds it ended and nothing behind it, and the
/// `expect("the front just seen")` panics — on the loop, in the middle of
/// `complete`, after the connection has left `Active`: the exchange whose
/// response just arrived is then never finished.
#[test]
fn a_waiter_ending_while_a_connection_is_offered_does_not_panic_the_pool() {
    let (pool, clock) = pool(limited(None, Some(1)));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let ending = request_ending_on_ask(request("a", "ending"), 2);
    assert_eq!(acquired(&pool, &ending, &clock), "queued");
    let offered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        match pool.offer(idle("a", 1, &clock), clock.now()) {
            Offer::Kept => "kept",
            Offer::Serve(..) => "serve",
            Offer::Refused => "refused",
        }
    }));
    assert!(offered.is_ok(), "offering a connection panicked");
}

/// A permit given back while the oldest waiter ends between the pool's two
/// looks at it: `serve_with_permit` picks its origin, `pop_front` finds it
/// ended, and the permit serves nobody — though a waiter of another origin
/// could use it, and then waits with capacity free until something else is
/// released or offered (with nothing else in flight: until its deadline).
#[test]
fn a_permit_given_back_as_the_oldest_waiter_ends_serves_the_next_one() {
    let (pool, clock) = pool(limited(Some(1), None));
    let a1 = request("a", "a1");
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    let ending = request_ending_on_ask(request("a", "ending"), 2);
    assert_eq!(acquired(&pool, &ending, &clock), "queued");
    let b = request("b", "b");
    assert_eq!(acquired(&pool, &b, &clock), "queued");
    let got = served(pool.release(&origin("a")));
    assert!(
        got == Some("b") || got == Some("ending"),
        "the permit served nobody: {got:?}"
    );
    if got == Some("ending") {
        // Served as it ended: its connect gives the permit straight back.
        assert_eq!(served(pool.release(&origin("a"))), Some("b"));
    }
}

#[test]
fn idle_connections_expire_by_idle_time_and_by_age_across_origins() {
    let limits = PoolLimits {
        idle_timeout: Some(Duration::from_secs(10)),
        ttl: Some(Duration::from_secs(30)),
        ..PoolLimits::default()
    };
    let (pool, clock) = pool(limits);
    let (a, b) = (request("a", "a"), request("b", "b"));
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    assert_eq!(acquired(&pool, &b, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    clock.advance(Duration::from_secs(5));
    assert!(matches!(
        pool.offer(idle("b", 2, &clock), clock.now()),
        Offer::Kept
    ));
    clock.advance(Duration::from_secs(6));
    // a: idle 11 s; b: idle 6 s.
    let evicted: Vec<u64> = pool
        .evict_expired(clock.now())
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(evicted, [1]);
    assert_eq!(pool.counts(), (2, 1));
    // b, reused and offered back again and again, still ages out at 30 s.
    let mut conn = idle("b", 2, &clock);
    conn.created = clock.now() - Duration::from_secs(11);
    clock.advance(Duration::from_secs(19));
    conn.idle_since = clock.now();
    assert!(
        matches!(pool.offer(conn, clock.now()), Offer::Refused),
        "past its time to live"
    );
}

/// A cleaner round that evicts nothing leaves every idle list as it was —
/// the same buffer, whether it holds a connection not yet expired or is
/// empty while its connection is in use — rather than rebuilding each
/// (an allocation a round for each origin, and one more for the next
/// offer to an emptied list).
#[test]
fn a_cleaner_round_that_evicts_nothing_leaves_the_idle_lists_as_they_were() {
    let limits = PoolLimits {
        idle_timeout: Some(Duration::from_secs(10)),
        ..PoolLimits::default()
    };
    let (pool, clock) = pool(limits);
    let (a, b) = (request("a", "a"), request("b", "b"));
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    assert_eq!(acquired(&pool, &b, &clock), "permit");
    for host in ["a", "b"] {
        assert!(matches!(
            pool.offer(idle(host, 1, &clock), clock.now()),
            Offer::Kept
        ));
    }
    // b's connection is in use: its list is empty, its buffer kept.
    assert_eq!(acquired(&pool, &request("b", "b2"), &clock), "idle");
    let lists = || -> Vec<(*const Idle, usize, usize)> {
        let inner = lock(&pool.inner);
        ["a", "b"]
            .map(|host| {
                let idle = &inner.origins[&origin(host)].idle;
                (idle.as_ptr(), idle.capacity(), idle.len())
            })
            .to_vec()
    };
    let before = lists();
    assert_eq!(before.iter().map(|list| list.2).collect::<Vec<_>>(), [1, 0]);
    clock.advance(Duration::from_secs(5));
    assert!(pool.evict_expired(clock.now()).is_empty());
    assert_eq!(lists(), before);
}

/// A server's announced idle limit (its `Keep-Alive: timeout`) shortens
/// the pool's idle timeout for its connection, never lengthens it, and
/// applies without one; a limit of zero is no reuse, even to a waiter.
#[test]
fn a_servers_idle_limit_shortens_the_idle_timeout_never_lengthens_it() {
    let with_limit = |host: &str, id: u64, clock: &ManualClock, limit: u64| Idle {
        server_idle_limit: Some(Duration::from_secs(limit)),
        ..idle(host, id, clock)
    };
    let limits = PoolLimits {
        max_connections_per_host: Some(1),
        idle_timeout: Some(Duration::from_secs(10)),
        ..PoolLimits::default()
    };
    let (pool, clock) = pool(limits);
    let (a, b, w) = (request("a", "a"), request("b", "b"), request("b", "w"));
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    assert_eq!(acquired(&pool, &b, &clock), "permit");
    let offered = |conn| matches!(pool.offer(conn, clock.now()), Offer::Kept);
    assert!(offered(with_limit("a", 1, &clock, 4)));
    assert!(offered(with_limit("b", 2, &clock, 60)));
    clock.advance(Duration::from_secs(4));
    let evicted = |now| -> Vec<u64> { pool.evict_expired(now).iter().map(|c| c.id).collect() };
    assert_eq!(evicted(clock.now()), [1], "idle 4 s of the server's 4");
    clock.advance(Duration::from_secs(6));
    assert_eq!(evicted(clock.now()), [2], "idle 10 s of the pool's 10");
    // Closed, they give their permits back.
    assert_eq!(served(pool.release(&origin("a"))), None);
    assert_eq!(served(pool.release(&origin("b"))), None);

    // Without a pool idle timeout, the server's alone.
    let unlimited: TestPool = Pool::new(PoolLimits::default());
    assert_eq!(acquired(&unlimited, &a, &clock), "permit");
    assert!(matches!(
        unlimited.offer(with_limit("a", 3, &clock, 4), clock.now()),
        Offer::Kept
    ));
    clock.advance(Duration::from_secs(3));
    assert!(unlimited.evict_expired(clock.now()).is_empty());
    clock.advance(Duration::from_secs(1));
    assert_eq!(unlimited.evict_expired(clock.now()).len(), 1);

    // No time left: refused, though a waiter wants it.
    let b2 = request("b", "b2");
    assert_eq!(acquired(&pool, &b2, &clock), "permit");
    assert_eq!(acquired(&pool, &w, &clock), "queued");
    assert!(matches!(
        pool.offer(with_limit("b", 4, &clock, 0), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("b"))), Some("w"));
}

#[test]
fn a_connection_offered_back_unused_past_its_idle_timeout_is_refused_even_to_a_waiter() {
    let limits = PoolLimits {
        max_connections_per_host: Some(1),
        idle_timeout: Some(Duration::from_secs(10)),
        ..PoolLimits::default()
    };
    let (pool, clock) = pool(limits);
    let a = request("a", "a");
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    // Taken at 9 s idle by a request that ended before it was sent, and
    // a waiter queued meanwhile.
    clock.advance(Duration::from_secs(9));
    let mut taken = idle("a", 1, &clock);
    taken.idle_since = clock.now() - Duration::from_secs(9);
    let (b, w) = (request("a", "b"), request("a", "w"));
    assert_eq!(acquired(&pool, &b, &clock), "idle");
    assert_eq!(acquired(&pool, &w, &clock), "queued");
    // Back at 11 s idle: past its idle timeout, it serves nobody.
    clock.advance(Duration::from_secs(2));
    assert!(matches!(pool.offer(taken, clock.now()), Offer::Refused));
    assert_eq!(served(pool.release(&origin("a"))), Some("w"));
}

#[test]
fn a_request_waiting_for_the_total_limit_has_an_idle_connection_closed_to_make_room() {
    let (pool, clock) = pool(limited(Some(2), None));
    let (a1, a2) = (request("a", "a1"), request("a", "a2"));
    assert_eq!(acquired(&pool, &a1, &clock), "permit");
    assert_eq!(acquired(&pool, &a2, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    clock.advance(Duration::from_millis(1));
    assert!(matches!(
        pool.offer(idle("a", 2, &clock), clock.now()),
        Offer::Kept
    ));
    let b = request("b", "b");
    let (got, to_close) = pool.acquire(&b, clock.now(), true);
    assert!(matches!(got, Acquired::Queued { .. }));
    let closed: Vec<u64> = to_close.iter().map(|c| c.id).collect();
    assert_eq!(closed, [1], "the longest idle");
    assert_eq!(served(pool.release(&origin("a"))), Some("b"));
}

/// A request that finds its origin's idle connection past its idle
/// timeout, and queues for the total limit: that connection, closed, makes
/// its room. Another origin's idle connection, still good, is not closed
/// as well (before, it was: the next request to that origin connected
/// again, for nothing).
#[test]
fn a_request_whose_idle_connection_expired_closes_no_other_for_the_total_limit() {
    let limits = PoolLimits {
        max_connections: Some(2),
        idle_timeout: Some(Duration::from_secs(30)),
        ..PoolLimits::default()
    };
    let (pool, clock) = pool(limits);
    let (a, b) = (request("a", "a"), request("b", "b"));
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    assert_eq!(acquired(&pool, &b, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("a", 1, &clock), clock.now()),
        Offer::Kept
    ));
    clock.advance(Duration::from_secs(20));
    assert!(matches!(
        pool.offer(idle("b", 2, &clock), clock.now()),
        Offer::Kept
    ));
    // a's idle 35 s (expired, the cleaner not round yet); b's 15 s.
    clock.advance(Duration::from_secs(15));
    let again = request("a", "again");
    let (got, to_close) = pool.acquire(&again, clock.now(), true);
    assert!(matches!(got, Acquired::Queued { wants_room: false }));
    let closed: Vec<u64> = to_close.iter().map(|c| c.id).collect();
    assert_eq!(closed, [1], "the expired one, and only it");
    assert_eq!(pool.counts(), (2, 1), "b's is still idle in the pool");
    assert_eq!(served(pool.release(&origin("a"))), Some("again"));
}

/// Whether a queued request wants room made outside the pool (an idle
/// HTTP/2 connection closed for it): only when it waits for the total
/// limit alone and no connection of the pool closes for it.
#[test]
fn a_request_waiting_for_the_total_limit_with_no_idle_connection_wants_room() {
    let (pool, clock) = pool(limited(Some(2), Some(1)));
    let wants_room = |request: &Arc<Request>| match pool.acquire(request, clock.now(), true) {
        (Acquired::Queued { wants_room }, to_close) => (wants_room, to_close.len()),
        _ => panic!("not queued"),
    };
    let (a, b) = (request("a", "a"), request("b", "b"));
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    assert_eq!(acquired(&pool, &b, &clock), "permit");
    assert!(matches!(
        pool.offer(idle("b", 1, &clock), clock.now()),
        Offer::Kept
    ));
    // Its host's limit holds it: no other connection's permit would serve it.
    assert_eq!(wants_room(&request("a", "a2")), (false, 0));
    // The total holds it, and the idle connection closes for it.
    assert_eq!(wants_room(&request("c", "c")), (false, 1));
    // The total holds it, and nothing is idle in the pool: room wanted.
    assert_eq!(wants_room(&request("d", "d")), (true, 0));
}

#[test]
fn a_closed_pool_hands_back_its_idle_connections_and_live_waiters() {
    let (pool, clock) = pool(limited(Some(1), None));
    let a = request("a", "a");
    assert_eq!(acquired(&pool, &a, &clock), "permit");
    let (w1, w2) = (request("a", "w1"), request("b", "w2"));
    assert_eq!(acquired(&pool, &w1, &clock), "queued");
    assert_eq!(acquired(&pool, &w2, &clock), "queued");
    w2.done.store(true, Ordering::SeqCst);
    let (idle, waiting) = pool.close();
    assert!(idle.is_empty());
    assert_eq!(waiting.iter().map(|w| w.name).collect::<Vec<_>>(), ["w1"]);
    assert_eq!(acquired(&pool, &request("a", "late"), &clock), "closed");
    assert!(matches!(
        pool.offer(self::idle("a", 1, &clock), clock.now()),
        Offer::Refused
    ));
    assert_eq!(served(pool.release(&origin("a"))), None);
}
