//! HTTP/2 connections per origin (`http2_max_connections_per_origin`),
//! against the `h2` crate's server with a small
//! `SETTINGS_MAX_CONCURRENT_STREAMS`: by default one connection, and the
//! requests past its limit wait for a stream; with two allowed, a second
//! opens when the first is at its limit, both serve, and never a third.
//! Timeouts and close leave nothing armed either way. A server that
//! lowers its limit below the streams it has open (or to 0) sends the
//! requests waiting on that connection to another; one merely at its
//! limit keeps them. A connection being opened that fails (lookup,
//! connect, refusal, TLS handshake) fails the requests waiting for it with
//! its error; one whose request is cancelled hands them on. A second
//! connection opens no more streams before its server's SETTINGS than the
//! first was allowed.

mod support;

use rustls::{ServerConnection, StreamOwned};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::h2_server::{
    answer, answer_all, await_reset, frame, goaway, max_streams, ok_headers, read_frame,
    read_requests, settings_ack, H2Server, H2Stream, RawConn, RawH2Server, ACK, END_HEADERS,
    END_STREAM, HEADERS, PING, SETTINGS,
};
use support::*;
use tickless::{Client, ClientBuilder, Error};

const CEILING: Duration = Duration::from_secs(20);
/// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
const STREAMS: u32 = 2;

/// What the server saw: the streams each connection took (by its index),
/// and the stalled ones.
#[derive(Default)]
struct Seen {
    per_connection: Mutex<BTreeMap<usize, usize>>,
    stalls: AtomicUsize,
}

impl Seen {
    fn per_connection(&self) -> BTreeMap<usize, usize> {
        self.per_connection.lock().unwrap().clone()
    }
}

/// `STREAMS` streams at once per connection; `/stall` is never answered,
/// anything else after a while (so that streams pile up).
fn limited_server() -> (H2Server, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    let server = H2Server::start_with(
        |builder| {
            builder.max_concurrent_streams(STREAMS);
        },
        move |mut stream: H2Stream| {
            *counts
                .per_connection
                .lock()
                .unwrap()
                .entry(stream.connection)
                .or_default() += 1;
            let stall = stream.request.uri().path() == "/stall";
            if stall {
                counts.stalls.fetch_add(1, Ordering::SeqCst);
            }
            async move {
                if stall {
                    await_reset(&mut stream.respond, &stream.stats, Duration::from_secs(30)).await
                } else {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    answer(stream, 200, b"ok").await
                }
            }
        },
    );
    (server, seen)
}

fn h2c() -> ClientBuilder {
    h2c_builder(2, CEILING)
        // No idle timer on the connections: what is armed is a request's.
        .pooled_connection_idle_timeout(Duration::ZERO)
}

/// One request first, so that the connection knows the server's limit
/// (its SETTINGS) before the burst.
fn warm_up(client: &Client, server: &H2Server) {
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "ok");
}

/// `n` requests at once, each answered.
fn burst(client: &Client, server: &H2Server, n: usize) {
    let futures: Vec<_> = (0..n)
        .map(|i| client.get(server.url(&format!("/{i}"))).send())
        .collect();
    for future in futures {
        assert_eq!(future.wait().unwrap().bytes().wait().unwrap(), "ok");
    }
}

#[test]
fn by_default_one_connection_and_the_requests_past_its_limit_wait() {
    let (server, seen) = limited_server();
    let client = h2c().build().unwrap();
    warm_up(&client, &server);
    burst(&client, &server, 12);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert_eq!(seen.per_connection(), BTreeMap::from([(0, 13)]));
    assert!(server.stats.max_open.load(Ordering::SeqCst) <= STREAMS as usize);
    assert_eq!(client.stats().open_connections, 1);
    client.close();
}

/// `keep_alive(false)` keeps no connection for reuse over HTTP/2 either:
/// each request has a connection of its own, closed once its stream has
/// ended (it was shared, kept and reused as with keep-alive on).
#[test]
fn without_keep_alive_each_request_has_its_own_connection() {
    let (server, seen) = limited_server();
    let client = h2c().keep_alive(false).build().unwrap();
    warm_up(&client, &server);
    warm_up(&client, &server);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 2);
    assert_eq!(seen.per_connection(), BTreeMap::from([(0, 1), (1, 1)]));
    assert!(eventually(CEILING, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn with_two_per_origin_a_second_connection_opens_at_the_limit_and_both_serve() {
    let (server, seen) = limited_server();
    let client = h2c().http2_max_connections_per_origin(2).build().unwrap();
    warm_up(&client, &server);
    burst(&client, &server, 12);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 2);
    let counts = seen.per_connection();
    assert_eq!(counts.len(), 2, "{counts:?}");
    // The first served the warm-up and some of the burst, the second the rest.
    assert!(counts[&0] >= 2 && counts[&1] >= 1, "{counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 13);
    assert!(server.stats.max_open.load(Ordering::SeqCst) <= 2 * STREAMS as usize);
    // More bursts: still two, never a third.
    burst(&client, &server, 40);
    burst(&client, &server, 40);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 2);
    assert_eq!(client.stats().open_connections, 2);
    assert!(eventually(CEILING, || client.stats().http2_streams_open == 0));
    client.close();
}

/// A server that allows [`LATE_LIMIT`] streams at once and says so late,
/// as it would a round trip after the client's first flight on a slow
/// path: the first connection's SETTINGS come once `first_flight` streams
/// have (the burst the test sends: its whole first flight, however the
/// client's writes are spread in time), each later connection's once
/// that many streams have and then a second without more. The streams
/// past the limit meanwhile are
/// refused (`REFUSED_STREAM`), as a server at its limit does; the others
/// are answered — the first connection's only once the second has
/// answered its first flight (so that it stays at its limit meanwhile).
/// If `goaway_first`, the first connection says its limit at once
/// instead, and once it has 3 streams sends `GOAWAY` naming the last of
/// them, and answers them. Returns its address, and how many streams the
/// first flight of each connection that said its limit late had.
fn late_limit_server(
    goaway_first: bool,
    first_flight: usize,
) -> (std::net::SocketAddr, Arc<Mutex<Vec<usize>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let flights: Arc<Mutex<Vec<usize>>> = Arc::default();
    let second_answered = Arc::new((Mutex::new(false), Condvar::new()));
    let counted = flights.clone();
    thread::spawn(move || {
        for (index, socket) in listener.incoming().take(2).enumerate() {
            let Ok(mut socket) = socket else { return };
            let (counted, second_answered) = (counted.clone(), second_answered.clone());
            thread::spawn(move || {
                let mut preface = [0u8; 24];
                if socket.read_exact(&mut preface).is_err() {
                    return;
                }
                let mut conn = RawConn {
                    stream: socket,
                    index,
                };
                let _ = conn.stream.set_read_timeout(Some(CEILING));
                if goaway_first && index == 0 {
                    conn.send(&max_streams(LATE_LIMIT as u32));
                    let ids = conn.read_requests(LATE_LIMIT);
                    let mut out = goaway(ids[LATE_LIMIT - 1], 0x0);
                    for &id in &ids {
                        out.extend(ok_headers(id));
                    }
                    conn.send(&out);
                    conn.answer_all();
                    return;
                }
                let mut flight = Vec::new();
                while let Some(frame) = conn.read_frame() {
                    if frame.kind == HEADERS {
                        flight.push(frame.stream);
                        if index == 0 && flight.len() == first_flight {
                            break;
                        }
                        // A later connection's flight: what comes within
                        // a second of its limit (a stall only delays what
                        // would be too many, never makes a right count
                        // wrong).
                        if index > 0 && flight.len() == LATE_LIMIT {
                            let _ = conn.stream.set_read_timeout(Some(Duration::from_secs(1)));
                        }
                    }
                }
                counted.lock().unwrap().push(flight.len());
                let _ = conn.stream.set_read_timeout(Some(CEILING));
                let (taken, refused) = flight.split_at(LATE_LIMIT.min(flight.len()));
                let mut out = max_streams(LATE_LIMIT as u32);
                for &id in refused {
                    out.extend(support::h2_server::rst_stream(id, 0x7));
                }
                conn.send(&out);
                let (lock, told) = &*second_answered;
                if index == 0 {
                    let answered = lock.lock().unwrap();
                    drop(told.wait_timeout_while(answered, CEILING, |a| !*a).unwrap());
                }
                for &id in taken {
                    conn.send(&ok_headers(id));
                }
                if index == 1 {
                    *lock.lock().unwrap() = true;
                    told.notify_all();
                }
                conn.answer_all();
            });
        }
    });
    (addr, flights)
}

/// The limit of [`late_limit_server`].
const LATE_LIMIT: usize = 3;

/// A burst to a server that allows 3 streams at once, two connections per
/// origin. The first connection sends all 10 before its server's SETTINGS
/// come (it knows no limit yet); the server refuses the 7 past its limit,
/// and they go again — to a second connection, the first being at its
/// limit. That one knows the origin's limit from the first: before its
/// own SETTINGS come it opens 3 of them, not all 7, which its server would
/// refuse as well — each of those, refused twice, failed.
#[test]
fn a_second_connection_opens_no_more_streams_than_its_origin_allows_before_its_settings() {
    const BURST: usize = 10;
    let (addr, flights) = late_limit_server(false, BURST);
    let client = h2c_builder(1, CEILING)
        .http2_max_connections_per_origin(2)
        .build()
        .unwrap();
    assert_eq!(
        failures_of_a_burst(&client, addr, BURST),
        Vec::<String>::new()
    );
    assert_eq!(*flights.lock().unwrap(), [BURST, LATE_LIMIT]);
    client.close();
}

/// Sends `burst` requests to `addr` at once, waits for each, and returns
/// the errors of those that failed.
fn failures_of_a_burst(client: &Client, addr: std::net::SocketAddr, burst: usize) -> Vec<String> {
    let futures: Vec<_> = (0..burst)
        .map(|i| client.get(format!("http://{addr}/{i}")).send())
        .collect();
    futures
        .into_iter()
        .filter_map(|future| future.wait().err().map(|error| error.to_string()))
        .collect()
}

/// A burst to a server that allows 3 streams at once, and sends `GOAWAY`
/// once it has 3 of them: the 7 it did not take go to a new connection —
/// their one move, as for any server's departure. That one knows the
/// limit of the connection that sent them: before its own SETTINGS come
/// it opens 3 of them, not all 7, which its server would refuse — each of
/// those, moved once already, failed.
#[test]
fn requests_a_goaway_sends_to_a_new_connection_open_no_more_streams_than_the_old_one_allowed() {
    const BURST: usize = 10;
    let (addr, flights) = late_limit_server(true, BURST);
    let client = h2c_builder(1, CEILING).build().unwrap();
    assert_eq!(
        failures_of_a_burst(&client, addr, BURST),
        Vec::<String>::new()
    );
    assert_eq!(*flights.lock().unwrap(), [LATE_LIMIT]);
    client.close();
}

#[test]
fn with_two_per_origin_timeouts_fail_their_streams_alone_and_leave_nothing_armed() {
    let (server, seen) = limited_server();
    for event_loop_timeouts in [false, true] {
        let client = h2c()
            .http2_max_connections_per_origin(2)
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        warm_up(&client, &server);
        // Every stream of both connections taken by stalled requests; the
        // others wait for a stream until the timeouts free them.
        let stalled: Vec<_> = (0..4)
            .map(|_| {
                client
                    .get(server.url("/stall"))
                    .request_timeout(Duration::from_millis(300))
                    .send()
            })
            .collect();
        let waiting: Vec<_> = (0..6)
            .map(|i| client.get(server.url(&format!("/{i}"))).send())
            .collect();
        for future in stalled {
            let error = future.wait().unwrap_err();
            assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
        }
        for future in waiting {
            assert_eq!(future.wait().unwrap().bytes().wait().unwrap(), "ok");
        }
        assert!(client.stats().open_connections <= 2);
        assert_settles(&client, CEILING);
        client.close();
    }
    // Each stalled request that had a stream had it reset with CANCEL
    // (those that timed out waiting for one never opened one).
    let stalls = || seen.stalls.load(Ordering::SeqCst);
    assert!(stalls() >= 2);
    assert!(eventually(CEILING, || server.stats.resets().len() == stalls()));
    let resets = server.stats.resets();
    assert!(resets.iter().all(|&code| code == 0x8), "{resets:?}");
    assert!(server.stats.connections.load(Ordering::SeqCst) <= 4);
}

#[test]
fn closing_the_client_ends_every_stream_and_waiter_of_both_connections() {
    let (server, seen) = limited_server();
    let client = h2c()
        .http2_max_connections_per_origin(2)
        .use_event_loop_timeouts(true)
        .build()
        .unwrap();
    warm_up(&client, &server);
    // Streams on two connections, and requests waiting for one.
    let futures: Vec<_> = (0..10)
        .map(|_| client.get(server.url("/stall")).send())
        .collect();
    assert!(eventually(CEILING, || seen.per_connection().len() == 2
        && seen.stalls.load(Ordering::SeqCst) > STREAMS as usize));
    assert_close_ends(&client, futures);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 2);
}

/// Resolves `h2.test` to `first` for the first connection and to `rest`
/// for every one after.
struct FirstThenRest {
    first: std::net::SocketAddr,
    rest: std::net::SocketAddr,
    asked: AtomicUsize,
}

impl FirstThenRest {
    fn new(first: std::net::SocketAddr, rest: std::net::SocketAddr) -> Arc<FirstThenRest> {
        Arc::new(FirstThenRest {
            first,
            rest,
            asked: AtomicUsize::new(0),
        })
    }
}

impl tickless::Resolve for FirstThenRest {
    fn resolve(&self, _host: &str, _port: u16, answer: tickless::ResolveAnswer) {
        let first = self.asked.fetch_add(1, Ordering::SeqCst) == 0;
        answer.addresses([if first { self.first } else { self.rest }]);
    }
}

#[test]
fn when_the_second_connection_cannot_open_its_waiters_go_to_the_first() {
    let (server, seen) = limited_server();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    // The server for the first connection, a closed port after.
    let resolver = FirstThenRest::new(server.addr(), closed);
    let client = h2c()
        .http2_max_connections_per_origin(2)
        .resolver(resolver.clone())
        .build()
        .unwrap();
    let url = |path: &str| format!("http://h2.test:{}{path}", server.addr().port());
    let warm = client.get(url("/")).send().wait().unwrap();
    assert_eq!(warm.bytes().wait().unwrap(), "ok");
    let futures: Vec<_> = (0..12)
        .map(|i| client.get(url(&format!("/{i}"))).send())
        .collect();
    let mut answered = 0;
    let mut refused = 0;
    for future in futures {
        match future.wait() {
            Ok(response) => {
                assert_eq!(response.bytes().wait().unwrap(), "ok");
                answered += 1;
            }
            Err(Error::Connect { .. }) => refused += 1,
            Err(other) => panic!("{other:?}"),
        }
    }
    // A second connection was tried and refused; every request — the one
    // that opened it too, nothing of it was sent — waited for a stream on
    // the first instead.
    assert!(resolver.asked.load(Ordering::SeqCst) >= 2);
    assert_eq!((answered, refused), (12, 0));
    assert_eq!(seen.per_connection().len(), 1);
    client.close();
}

#[test]
fn the_pools_per_host_limit_bounds_them_too() {
    let (server, seen) = limited_server();
    let client = h2c()
        .http2_max_connections_per_origin(2)
        .max_connections_per_host(1)
        .build()
        .unwrap();
    warm_up(&client, &server);
    burst(&client, &server, 12);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert_eq!(seen.per_connection(), BTreeMap::from([(0, 13)]));
    client.close();
}

/// Two origins' servers that answer at once, but `/held` only once
/// `release` is notified.
fn held_servers(release: &Arc<tokio::sync::Notify>) -> (H2Server, H2Server) {
    let start = || {
        let release = release.clone();
        H2Server::start(move |stream: H2Stream| {
            let release = release.clone();
            async move {
                if stream.request.uri().path() == "/held" {
                    release.notified().await;
                }
                answer(stream, 200, b"ok").await
            }
        })
    };
    (start(), start())
}

/// An HTTP/2 connection with no stream holds a permit outside the pool's
/// idle list: a request to another origin waiting for the total limit
/// has it closed, as it would an idle HTTP/1.1 connection — not wait
/// until its idle timeout (none here) or its own request timeout.
#[test]
fn an_idle_connection_to_one_origin_makes_room_for_a_request_to_another() {
    let release = Arc::new(tokio::sync::Notify::new());
    let (a, b) = held_servers(&release);
    let client = h2c().max_connections(1).build().unwrap();
    for _ in 0..3 {
        warm_up(&client, &a);
        warm_up(&client, &b);
    }
    assert_eq!(a.stats.connections.load(Ordering::SeqCst), 3);
    assert_eq!(b.stats.connections.load(Ordering::SeqCst), 3);
    assert!(eventually(CEILING, || client.stats().open_connections == 1));
    client.close();
}

/// The same when the request queues while the connection still carries
/// its last stream: the connection, once that ends, gives its permit.
#[test]
fn a_connection_losing_its_last_stream_gives_its_permit_to_a_request_to_another_origin() {
    let release = Arc::new(tokio::sync::Notify::new());
    let (a, b) = held_servers(&release);
    let client = h2c().max_connections(1).build().unwrap();
    let held = client.get(a.url("/held")).send();
    assert!(eventually(CEILING, || a
        .stats
        .streams
        .load(Ordering::SeqCst)
        == 1));
    let other = client.get(b.url("/")).send();
    assert!(eventually(CEILING, || client.stats().waiting == 1));
    release.notify_one();
    assert_eq!(held.wait().unwrap().bytes().wait().unwrap(), "ok");
    assert_eq!(other.wait().unwrap().bytes().wait().unwrap(), "ok");
    assert_eq!(a.stats.connections.load(Ordering::SeqCst), 1);
    assert_eq!(b.stats.connections.load(Ordering::SeqCst), 1);
    let stats = client.stats();
    assert_eq!((stats.open_connections, stats.waiting), (1, 0), "{stats:?}");
    client.close();
}

/// An HTTP/2-only client whose first request (the opener) has its
/// connection accepted by a server that never answers the TLS handshake:
/// that connection stays opening. The server, the client, the URL, and the
/// opener.
fn opening_for_ever() -> (TestServer, Client, String, tickless::ResponseFuture) {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = Client::builder()
        .event_loops(1)
        .http2_only()
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let url = format!("https://{}/", server.addr());
    let opener = client.get(&url).send();
    assert!(server.wait_for_accepted(1, CEILING));
    (server, client, url, opener)
}

/// A request waiting for the connection being opened (HTTP/2 only, over
/// TLS: requests wait for the first connection) that ends meanwhile is
/// let go at once — its request and callbacks freed once its caller lets
/// it go, as from the pool's queue — not kept until that connection opens
/// or fails (here: never before the opener's own timeout).
#[test]
fn a_request_that_ends_while_waiting_for_the_connection_being_opened_is_let_go() {
    let (_server, client, url, opener) = opening_for_ever();
    struct Holds(#[allow(dead_code)] Arc<()>);
    impl tickless::EventListener for Holds {}
    let held = Arc::new(());
    let waiting = client
        .get(&url)
        .request_timeout(Duration::from_millis(100))
        .listener(Arc::new(Holds(held.clone())))
        .send();
    assert!(matches!(waiting.wait(), Err(Error::RequestTimeout(_))));
    assert!(
        eventually(CEILING / 4, || Arc::strong_count(&held) == 1),
        "the ended request is still held"
    );
    assert!(!opener.is_done(), "the connection is still opening");
    client.close();
    assert!(matches!(opener.wait(), Err(Error::ClientClosed)));
}

/// `stats().waiting` counts every request held back, not only those in
/// the pool's queues: those waiting for the HTTP/2 connection being
/// opened, and those waiting for a stream of one at its limit — until
/// they end.
#[test]
fn waiting_counts_the_requests_waiting_for_an_http2_connection_or_a_stream() {
    // The opener is connecting, not waiting.
    let (_server, client, url, opener) = opening_for_ever();
    let waiting: Vec<_> = (0..2).map(|_| client.get(&url).send()).collect();
    assert!(
        eventually(CEILING, || client.stats().waiting == 2),
        "{:?}",
        client.stats()
    );
    assert_eq!(client.stats().open_connections, 1);
    client.close();
    assert_eq!(client.stats().waiting, 0);
    drop((opener, waiting));

    // For a stream: the server takes `STREAMS` at once, and stalls them.
    let (server, seen) = limited_server();
    let client = h2c().build().unwrap();
    warm_up(&client, &server);
    let stalled: Vec<_> = (0..STREAMS + 3)
        .map(|_| client.get(server.url("/stall")).send())
        .collect();
    assert!(eventually(CEILING, || seen.stalls.load(Ordering::SeqCst)
        == STREAMS as usize));
    assert!(
        eventually(CEILING, || client.stats().waiting == 3),
        "{:?}",
        client.stats()
    );
    // The waiting ones cancelled (their futures dropped; the last three
    // sent), they leave the count, the streams still stalled: their aborts
    // take them out of the connection's queue.
    let mut stalled = stalled;
    drop(stalled.split_off(STREAMS as usize));
    assert!(
        eventually(CEILING, || client.stats().waiting == 0),
        "{:?}",
        client.stats()
    );
    client.close();
    drop(stalled);
}

/// The connect timeout of the connections that cannot open.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
/// The handshake timeout of those whose TLS handshake never ends.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(300);
/// Requests sent at once to an origin whose connection cannot open.
const AT_ONCE: usize = 5;

/// What a lookup of [`HeldLookups`] answers.
#[derive(Clone, Copy)]
enum Lookup {
    To(std::net::SocketAddr),
    Fails,
}

/// Answers every lookup with `answer`, and counts them; holds the answer
/// to the first until [`let_go`](Self::let_go).
struct HeldLookups {
    answer: Lookup,
    first: Mutex<Option<tickless::ResolveAnswer>>,
    asked: AtomicUsize,
}

impl HeldLookups {
    fn new(answer: Lookup) -> Arc<HeldLookups> {
        Arc::new(HeldLookups {
            answer,
            first: Mutex::new(None),
            asked: AtomicUsize::new(0),
        })
    }

    fn let_go(&self) {
        let first = self.first.lock().unwrap().take().expect("a lookup held");
        self.give(first);
    }

    fn give(&self, answer: tickless::ResolveAnswer) {
        match self.answer {
            Lookup::To(addr) => answer.addresses([addr]),
            Lookup::Fails => answer.failed(std::io::Error::other("no such host")),
        }
    }
}

impl tickless::Resolve for HeldLookups {
    fn resolve(&self, _host: &str, _port: u16, answer: tickless::ResolveAnswer) {
        if self.asked.fetch_add(1, Ordering::SeqCst) == 0 {
            *self.first.lock().unwrap() = Some(answer);
        } else {
            self.give(answer);
        }
    }
}

/// Sends [`AT_ONCE`] requests at once to `scheme://h2.test/` with a client
/// of `builder` whose lookups of it answer `answer`: the first request
/// opens the origin's HTTP/2 connection, and the others wait for it (its
/// lookup held until they do). Its opening fails, and each request fails
/// with it — their errors, in the order sent — and that one connection was
/// all that was opened (one lookup): none of those waiting opened the next
/// in turn, each to fail after a whole connect (or handshake) of its own,
/// the last ones past their deadline. Each also fails within a quarter of
/// the ceiling from the lookup's answer — a bound a loaded machine leaves
/// room under; the lookups counted are what tells "together" from "in
/// turn" (five lookups, not one, before the fix).
fn all_fail_with_the_opening(builder: ClientBuilder, scheme: &str, answer: Lookup) -> Vec<Error> {
    let resolver = HeldLookups::new(answer);
    let client = builder.resolver(resolver.clone()).build().unwrap();
    let url = format!("{scheme}://h2.test/");
    let futures: Vec<_> = (0..AT_ONCE).map(|_| client.get(&url).send()).collect();
    assert!(
        eventually(CEILING, || client.stats().waiting == AT_ONCE - 1),
        "{:?}",
        client.stats()
    );
    let answered = Instant::now();
    resolver.let_go();
    let errors = futures
        .into_iter()
        .enumerate()
        .map(|(i, future)| match future.wait() {
            Ok(_) => panic!("request {i} was answered"),
            Err(error) => {
                let after = answered.elapsed();
                assert!(
                    after < CEILING / 4,
                    "request {i} failed after {after:?}: {error:?}"
                );
                error
            }
        })
        .collect();
    assert_eq!(resolver.asked.load(Ordering::SeqCst), 1, "lookups");
    client.close();
    errors
}

/// Requests waiting for the HTTP/2 connection being opened to their
/// origin (prior knowledge), whose connect hangs: they fail with its
/// connect timeout together, as over HTTP/1.1 — not one after another,
/// each after a connect of its own, the last ones at their request
/// timeout.
#[test]
fn requests_waiting_for_a_connection_whose_connect_times_out_fail_with_its_timeout_at_once() {
    let mut blackhole = UnacceptingListener::new();
    if !blackhole.backlog_filled(4096) {
        return;
    }
    let builder = h2c_builder(1, CEILING).connect_timeout(CONNECT_TIMEOUT);
    let answer = Lookup::To(blackhole.addr());
    for error in all_fail_with_the_opening(builder, "http", answer) {
        assert!(matches!(error, Error::ConnectTimeout(_)), "{error:?}");
    }
}

/// Requests waiting for the HTTP/2 connection being opened to their
/// origin, whose port is closed: they fail with its refusal, at once.
#[test]
fn requests_waiting_for_a_connection_that_is_refused_fail_with_its_refusal() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let builder = h2c_builder(1, CEILING);
    for error in all_fail_with_the_opening(builder, "http", Lookup::To(closed)) {
        assert!(
            matches!(&error, Error::Connect { source, .. }
                if source.kind() == ErrorKind::ConnectionRefused),
            "{error:?}"
        );
    }
}

/// Requests of an HTTP/2-only client waiting for the connection being
/// opened to their origin over TLS, whose handshake never ends: they fail
/// with its handshake timeout together.
#[test]
fn requests_waiting_for_a_connection_whose_tls_handshake_times_out_fail_with_its_timeout() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let builder = Client::builder()
        .event_loops(1)
        .http2_only()
        .handshake_timeout(HANDSHAKE_TIMEOUT)
        .request_timeout(CEILING);
    let answer = Lookup::To(server.addr());
    for error in all_fail_with_the_opening(builder, "https", answer) {
        assert!(matches!(error, Error::HandshakeTimeout(_)), "{error:?}");
    }
}

/// Requests waiting for the HTTP/2 connection being opened to their
/// origin, whose name does not resolve: they fail with the lookup's
/// failure — that one lookup: none of them looks it up again in turn.
#[test]
fn requests_waiting_for_a_connection_whose_host_does_not_resolve_fail_with_its_lookup() {
    let builder = h2c_builder(1, CEILING);
    for error in all_fail_with_the_opening(builder, "http", Lookup::Fails) {
        assert!(
            matches!(&error, Error::Resolve { host, .. } if host == "h2.test"),
            "{error:?}"
        );
    }
}

/// A request whose connection is being opened, the others to its origin
/// waiting for it, is cancelled: the opening ends with its request, not
/// with a failure of the origin's, and those waiting go on — one of them
/// opens the next connection (one only: the others wait for it), where
/// each is answered.
#[test]
fn when_the_request_opening_the_connection_is_cancelled_those_waiting_open_the_next() {
    let mut blackhole = UnacceptingListener::new();
    if !blackhole.backlog_filled(4096) {
        return;
    }
    let (server, seen) = limited_server();
    // The first connection's connect hangs; the next reaches the server.
    let resolver = FirstThenRest::new(blackhole.addr(), server.addr());
    let client = h2c().resolver(resolver.clone()).build().unwrap();
    let url = format!("http://h2.test:{}/", server.addr().port());
    let opener = client.get(&url).send();
    let waiting: Vec<_> = (0..4).map(|_| client.get(&url).send()).collect();
    assert!(
        eventually(CEILING, || client.stats().waiting == 4),
        "{:?}",
        client.stats()
    );
    assert!(opener.cancel());
    assert!(matches!(opener.wait(), Err(Error::Cancelled)));
    for future in waiting {
        assert_eq!(future.wait().unwrap().bytes().wait().unwrap(), "ok");
    }
    assert_eq!(resolver.asked.load(Ordering::SeqCst), 2);
    assert_eq!(seen.per_connection().len(), 1);
    client.close();
}

#[test]
fn a_hedged_copy_goes_on_another_connection_than_the_attempt_it_backs_up() {
    for event_loops in [1, 2] {
        // The first connection takes the request and never answers (as a
        // stalled connection would); any other answers at once.
        let server = support::h2_server::RawH2Server::start(|mut conn| {
            if conn.index == 0 {
                conn.drain(CEILING);
            } else {
                conn.answer_all();
            }
        });
        let client = h2c_builder(event_loops, CEILING).build().unwrap();
        let response = client
            .get(server.url("/"))
            .hedge(tickless::hedge::Policy::after(Duration::from_millis(50)))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200, "{event_loops} loops");
        assert_eq!(server.connections.load(Ordering::SeqCst), 2);
        client.close();
        assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    }
}

/// A hedged request whose first attempt loses on a connection shared with
/// another request: the loser's stream is reset (`CANCEL`), and the
/// connection and its other stream go on — the other request, which the
/// server answers only once it has seen that reset, gets its answer there.
#[test]
fn a_hedged_loser_on_a_shared_connection_is_its_stream_reset_alone() {
    let server = H2Server::start(|mut stream| async move {
        let path = stream.request.uri().path().to_string();
        match (path.as_str(), stream.connection) {
            // The first attempt of `/hedged` never answers: it loses.
            ("/hedged", 0) => {
                await_reset(&mut stream.respond, &stream.stats, CEILING).await;
                return;
            }
            // `/other` waits for the loser's reset, on the same connection.
            ("/other", _) => {
                let limit = Instant::now() + CEILING;
                while stream.stats.resets().is_empty() && Instant::now() < limit {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            _ => {}
        }
        let text = format!("{path} on {}", stream.connection);
        let response = http::Response::builder().status(200).body(()).unwrap();
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(bytes::Bytes::from(text), true);
        }
    });
    let client = h2c_builder(2, CEILING).build().unwrap();
    let warm = client.get(server.url("/warm")).send().wait().unwrap();
    assert_eq!(warm.text().wait().unwrap(), "/warm on 0");
    let other = client.get(server.url("/other")).send();
    let hedged = client
        .get(server.url("/hedged"))
        .hedge(tickless::hedge::Policy::after(Duration::from_millis(20)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(hedged.text().wait().unwrap(), "/hedged on 1");
    let other = other.wait().expect("the shared connection went on");
    assert_eq!(other.text().wait().unwrap(), "/other on 0");
    assert_eq!(server.stats.resets(), [u32::from(h2::Reason::CANCEL)]);
    client.close();
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
}

#[test]
fn a_connection_closed_idle_or_retired_tells_the_server_with_a_goaway() {
    use support::h2_server::{ok_headers, GOAWAY};
    // Answers every request, and notes the client's GOAWAY (its error
    // code) before the connection ends.
    let goaways = Arc::new(Mutex::new(Vec::new()));
    let seen = goaways.clone();
    let server = RawH2Server::start(move |mut conn| {
        let settings = settings_ack();
        while let Some(frame) = conn.read_frame() {
            match frame.kind {
                HEADERS => conn.send(&ok_headers(frame.stream)),
                SETTINGS if frame.flags & ACK == 0 => conn.send(&settings),
                GOAWAY => seen
                    .lock()
                    .unwrap()
                    .push(u32::from_be_bytes(frame.payload[4..8].try_into().unwrap())),
                _ => {}
            }
        }
    });
    let short = Duration::from_millis(100);
    let idle = Client::builder().pooled_connection_idle_timeout(short);
    let retired = Client::builder().connection_ttl(short);
    for (why, builder) in [("idle", idle), ("retired", retired)] {
        let before = goaways.lock().unwrap().len();
        let client = builder.http2_prior_knowledge().build().unwrap();
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.status(), 200);
        drop(response);
        assert!(
            eventually(CEILING, || goaways.lock().unwrap().len() > before),
            "{why}: no GOAWAY"
        );
        assert_eq!(goaways.lock().unwrap()[before], 0, "{why}: NO_ERROR");
        client.close();
    }
}

// ------------------------------------------- a limit lowered mid-connection ---

/// One connection of [`limit_server`]: what it received, and whether it
/// answers.
#[derive(Default)]
struct Side {
    /// The request HEADERS that came (stream ids), and whether they are
    /// answered (those that come afterwards too, at once).
    requests: Mutex<(Vec<u32>, bool)>,
    /// The client's SETTINGS ACKs.
    acks: AtomicUsize,
    writer: Mutex<Option<std::net::TcpStream>>,
}

impl Side {
    fn requests(&self) -> usize {
        self.requests.lock().unwrap().0.len()
    }

    fn send(&self, bytes: &[u8]) {
        use std::io::Write;
        if let Some(writer) = self.writer.lock().unwrap().as_mut() {
            let _ = writer.write_all(bytes);
        }
    }

    /// Answers the requests that came, and those to come.
    fn answer(&self, status: u8) {
        let mut requests = self.requests.lock().unwrap();
        requests.1 = true;
        for &id in &requests.0 {
            self.send(&answer_with(id, status));
        }
    }
}

/// HEADERS with the HPACK static entry `status` (0x88: 200, 0x89: 204),
/// ending the stream.
fn answer_with(stream: u32, status: u8) -> Vec<u8> {
    frame(HEADERS, END_HEADERS | END_STREAM, stream, &[status])
}

/// What the test tells the first connection, and what both saw.
struct Stage {
    sides: [Side; 2],
    /// The first connection's limit at the start, and after `lower`.
    first_limit: u32,
    lowered_to: u32,
    lower: AtomicBool,
}

/// Two connections, frames by hand: the first takes `first_limit`
/// streams at once, and `lowered_to` once told; the second one; neither
/// answers until told (the first `:status 200`, the second 204, so the
/// test knows which served). Any third is not expected.
fn limit_server(first_limit: u32, lowered_to: u32) -> (RawH2Server, Arc<Stage>) {
    let stage = Arc::new(Stage {
        sides: Default::default(),
        first_limit,
        lowered_to,
        lower: AtomicBool::new(false),
    });
    let shared = stage.clone();
    let server = RawH2Server::start(move |conn| serve_side(conn, &shared));
    (server, stage)
}

/// One connection of [`limit_server`]: a reader thread records what comes;
/// this one sends the first connection's lowered limit when told.
fn serve_side(mut conn: RawConn, stage: &Arc<Stage>) {
    let Some(side) = stage.sides.get(conn.index) else {
        return;
    };
    *side.writer.lock().unwrap() = conn.stream.try_clone().ok();
    side.send(&max_streams(if conn.index == 0 {
        stage.first_limit
    } else {
        1
    }));
    let _ = conn.stream.set_read_timeout(Some(CEILING));
    let reader_stage = stage.clone();
    let index = conn.index;
    let reader = std::thread::spawn(move || {
        let side = &reader_stage.sides[index];
        while let Some(read) = conn.read_frame() {
            match read.kind {
                HEADERS => {
                    let mut requests = side.requests.lock().unwrap();
                    requests.0.push(read.stream);
                    if requests.1 {
                        side.send(&answer_with(read.stream, status_of(index)));
                    }
                }
                SETTINGS if read.flags & ACK == 0 => side.send(&settings_ack()),
                SETTINGS => {
                    side.acks.fetch_add(1, Ordering::SeqCst);
                }
                _ => {}
            }
        }
    });
    if index == 0 && eventually(CEILING, || stage.lower.load(Ordering::SeqCst)) {
        side.send(&max_streams(stage.lowered_to));
    }
    let _ = reader.join();
}

/// The `:status` (HPACK static entry) each connection answers with.
fn status_of(connection: usize) -> u8 {
    if connection == 0 {
        0x88
    } else {
        0x89
    }
}

/// Until `n` requests have come to `side` and the client has acknowledged
/// both SETTINGS (the preface's and the limit's), and a moment for the
/// client to publish the limit it read.
fn settled(side: &Side, n: usize) {
    assert!(eventually(CEILING, || side.requests() == n
        && side.acks.load(Ordering::SeqCst) >= 2));
    std::thread::sleep(Duration::from_millis(100));
}

/// The first connection's streams are all taken (`first_limit`), then
/// the second's (1); a request then waits on the first (the oldest of
/// two at their limit, with no room for a third). The second answers,
/// and the first's server changes its limit to `lowered_to` — or, if
/// `lowered_first`, the other way round. Returns the waiting request's
/// outcome, how long after the second of the two, and the requests each
/// connection received.
fn waiting_request_after_limit_change(
    first_limit: u32,
    lowered_to: u32,
    lowered_first: bool,
) -> (Result<u16, Error>, Duration, [usize; 2]) {
    let (server, stage) = limit_server(first_limit, lowered_to);
    let client = h2c()
        .http2_max_connections_per_origin(2)
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let on_first: Vec<_> = (0..first_limit)
        .map(|i| {
            let future = client.get(server.url(&format!("/first/{i}"))).send();
            settled(&stage.sides[0], i as usize + 1);
            future
        })
        .collect();
    let mut on_second = Some(client.get(server.url("/second")).send());
    settled(&stage.sides[1], 1);
    let waiting = client.get(server.url("/waiting")).send();
    std::thread::sleep(Duration::from_millis(100));
    // Both at their limit: it waits on the first, unsent.
    assert_eq!(stage.sides[0].requests(), first_limit as usize);
    assert_eq!(stage.sides[1].requests(), 1);
    // The first's server lowers its limit, and the client has read it
    // (acknowledged: its third SETTINGS ACK).
    let lower = || {
        stage.lower.store(true, Ordering::SeqCst);
        assert!(eventually(CEILING, || stage.sides[0]
            .acks
            .load(Ordering::SeqCst)
            >= 3));
    };
    let changed = if lowered_first {
        lower();
        // No place elsewhere yet: it stays, unsent.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(stage.sides[1].requests(), 1);
        let changed = Instant::now();
        stage.sides[1].answer(status_of(1));
        changed
    } else {
        stage.sides[1].answer(status_of(1));
        let second = on_second.take().expect("not waited for yet");
        assert_eq!(second.wait().unwrap().status(), 204);
        // The second has published its free stream.
        std::thread::sleep(Duration::from_millis(100));
        lower();
        Instant::now()
    };
    // Whether it moves shows within the moment (it is answered at once
    // on the second); staying, it is answered once the first's streams end
    // — which, lowered first, drives the first: nothing ends there until
    // it is answered (or times out).
    if !lowered_first {
        std::thread::sleep(Duration::from_millis(300));
        stage.sides[0].answer(status_of(0));
    }
    let outcome = waiting.wait().map(|response| response.status().as_u16());
    let after = changed.elapsed();
    if lowered_first {
        stage.sides[0].answer(status_of(0));
    }
    if let Some(second) = on_second {
        assert_eq!(second.wait().unwrap().status(), 204);
    }
    for future in on_first {
        assert_eq!(future.wait().unwrap().status(), 200);
    }
    let received = [stage.sides[0].requests(), stage.sides[1].requests()];
    client.close();
    drop(server);
    (outcome, after, received)
}

/// A server that lowers its limit to 0 (no GOAWAY) with a request waiting
/// on its connection: the request goes to the origin's other connection,
/// which has a stream free, at once — not when its request timeout ends —
/// and is sent once.
#[test]
fn a_request_waiting_on_a_connection_whose_limit_drops_to_zero_goes_to_another() {
    let (outcome, after, received) = waiting_request_after_limit_change(1, 0, false);
    assert_eq!(outcome.unwrap(), 204, "served by the second connection");
    assert!(after < Duration::from_secs(5), "{after:?}");
    assert_eq!(received, [1, 2], "each request sent once");
}

/// The same, the limit lowered below the streams open (2 to 1): no room
/// until more streams end than the server said, so the request moves.
#[test]
fn a_request_waiting_on_a_connection_whose_limit_drops_below_its_open_streams_goes_to_another() {
    let (outcome, after, received) = waiting_request_after_limit_change(2, 1, false);
    assert_eq!(outcome.unwrap(), 204, "served by the second connection");
    assert!(after < Duration::from_secs(5), "{after:?}");
    assert_eq!(received, [2, 2], "each request sent once");
}

/// A connection merely at its limit (its server's SETTINGS say the same
/// limit again) keeps the request waiting on it: its streams will end
/// and free room, and moving would churn. It is served there.
#[test]
fn a_request_waiting_on_a_connection_merely_at_its_limit_stays() {
    let (outcome, _, received) = waiting_request_after_limit_change(1, 1, false);
    assert_eq!(outcome.unwrap(), 200, "served by the first connection");
    assert_eq!(received, [2, 1], "each request sent once");
}

/// The limit lowered to 0 while the origin's other connection is busy too
/// (no place elsewhere: the request stays), and then that one frees a
/// stream: the request goes there then — not when its request timeout
/// ends — and is sent once.
#[test]
fn a_request_held_by_a_lowered_limit_goes_to_a_stream_freed_later_elsewhere() {
    let (outcome, after, received) = waiting_request_after_limit_change(1, 0, true);
    assert_eq!(outcome.unwrap(), 204, "served by the second connection");
    assert!(after < Duration::from_secs(5), "{after:?}");
    assert_eq!(received, [1, 2], "each request sent once");
}

/// A connection whose server lowered its limit to 0 under its one stream
/// holds the request that came next (one connection per origin: no other
/// place for it). The stream answered, then that request cancelled, the
/// connection has nothing left: its idle timeout closes it. Before,
/// the cancel's abort took the request out of the queue and marked the
/// connection idle without arming its timer (only a drive did), and the
/// connection stayed open for good.
#[test]
fn a_connection_a_cancelled_waiting_request_leaves_idle_closes_at_its_idle_timeout() {
    let limit_acked = Arc::new(AtomicBool::new(false));
    let answer_now = Arc::new(AtomicBool::new(false));
    let (acked, go) = (limit_acked.clone(), answer_now.clone());
    let server = RawH2Server::start(move |mut conn| {
        // The first request; then the limit of 0, and the client's acks:
        // of the preface's SETTINGS and of that one.
        let (mut first, mut acks) = (None, 0);
        while first.is_none() || acks < 2 {
            let Some(read) = conn.read_frame() else {
                return;
            };
            match read.kind {
                HEADERS if first.is_none() => {
                    first = Some(read.stream);
                    conn.send(&max_streams(0));
                }
                SETTINGS if read.flags & ACK == 0 => conn.send(&settings_ack()),
                SETTINGS => acks += 1,
                _ => {}
            }
        }
        acked.store(true, Ordering::SeqCst);
        if eventually(CEILING, || go.load(Ordering::SeqCst)) {
            conn.send(&ok_headers(first.unwrap_or(1)));
        }
        conn.drain(CEILING);
    });
    let client = h2c()
        .pooled_connection_idle_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let first = client.get(server.url("/")).send();
    assert!(eventually(CEILING, || limit_acked.load(Ordering::SeqCst)));
    let waiting = client.get(server.url("/")).send();
    assert!(
        eventually(CEILING, || client.stats().waiting == 1),
        "{:?}",
        client.stats()
    );
    answer_now.store(true, Ordering::SeqCst);
    assert_eq!(first.wait().unwrap().status(), 200);
    drop(waiting);
    assert!(
        eventually(CEILING, || client.stats().open_connections == 0),
        "the idle connection stayed open: {:?}",
        client.stats()
    );
    client.close();
}

/// A TLS connection of a scripted HTTP/2 server, `h2` by ALPN, its
/// handshake done and the client's preface read. `settings`, the
/// server's SETTINGS, go with its side of the TLS handshake (TLS 1.3
/// half-RTT data, in one write): the client reads them in its first
/// drive, before it can open a stream. Nothing follows unasked (no
/// session ticket): the server writes again only when its script does.
fn tls_h2(mut socket: TcpStream, settings: &[u8]) -> StreamOwned<ServerConnection, TcpStream> {
    socket.set_read_timeout(Some(CEILING)).unwrap();
    let mut config = (*tls::server_config(&tls::certs().valid)).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    config.send_half_rtt_data = true;
    config.send_tls13_tickets = 0;
    let mut session = ServerConnection::new(Arc::new(config)).unwrap();
    // The ClientHello, answered by the server's flight.
    while !session.wants_write() {
        // Ok(0): the client closed before its ClientHello was whole (read
        // again, it would be Ok(0) for ever).
        let read = session.read_tls(&mut socket).unwrap();
        assert_ne!(read, 0, "the client closed before its ClientHello");
        session.process_new_packets().unwrap();
    }
    session.writer().write_all(settings).unwrap();
    let mut flight = Vec::new();
    while session.wants_write() {
        session.write_tls(&mut flight).unwrap();
    }
    socket.write_all(&flight).unwrap();
    let mut tls = StreamOwned::new(session, socket);
    let mut preface = [0u8; 24];
    tls.read_exact(&mut preface).unwrap();
    tls
}

/// A TLS server on loopback that accepts `n` connections and gives each,
/// with its index, to `script` on a thread of its own; joined with them.
fn tls_h2_server(
    n: usize,
    script: impl Fn(usize, TcpStream) + Send + Sync + 'static,
) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let script = Arc::new(script);
    let server = thread::spawn(move || {
        let workers: Vec<_> = (0..n)
            .map(|index| {
                let socket = accept_in_time(&listener);
                let script = script.clone();
                thread::spawn(move || script(index, socket))
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    });
    (url, server)
}

/// Holds, until let go, the request that reaches the client's pool on a
/// thread that sends it [`with_pool_entry_held`]: the client's dispatch
/// logs (`trace`) "to the pool" on that thread once the request has been
/// routed to the pool, and before it is queued there; the subscriber's
/// writer holds that line.
#[cfg(feature = "tracing")]
#[derive(Debug, Default)]
struct HoldsThePoolEntry {
    /// Holding, and let go.
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

#[cfg(feature = "tracing")]
impl HoldsThePoolEntry {
    fn wait_until_holding(&self) {
        let state = self.state.lock().unwrap();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, CEILING, |(holding, _)| !*holding)
            .unwrap();
        assert!(state.0, "no request reached the pool");
    }

    fn let_go(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

/// The writer of one line the subscriber logs.
#[cfg(feature = "tracing")]
struct PoolEntryLine(Arc<HoldsThePoolEntry>);

#[cfg(feature = "tracing")]
impl Write for PoolEntryLine {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        const TOLD: &[u8] = b"tickless_client::dispatch: to the pool";
        if line.windows(TOLD.len()).any(|part| part == TOLD) {
            let hold = &self.0;
            hold.state.lock().unwrap().0 = true;
            hold.changed.notify_all();
            let state = hold.state.lock().unwrap();
            let _ = hold
                .changed
                .wait_timeout_while(state, CEILING, |(_, let_go)| !*let_go);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `f`, on this thread, with a `tracing` subscriber (for this thread only)
/// that holds the request reaching the pool (see [`HoldsThePoolEntry`]).
#[cfg(feature = "tracing")]
fn with_pool_entry_held<T>(hold: &Arc<HoldsThePoolEntry>, f: impl FnOnce() -> T) -> T {
    use tracing_subscriber::util::SubscriberInitExt;

    let hold = hold.clone();
    let _subscribed = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
        .with_ansi(false)
        .with_writer(move || PoolEntryLine(hold.clone()))
        .set_default();
    f()
}

/// Over TLS a client learns that an origin speaks HTTP/2 by ALPN: until
/// its first connection has, the requests to it go through the pool, and
/// the connection, shared once open, takes those queued there. A request
/// routed to the pool just before that (no shared connection yet), that
/// reaches the pool's queue just after (the host's one permit held by the
/// shared connection), goes on the shared connection all the same. (It
/// waited in a queue no connection would ever serve, until its timeout —
/// for ever without one.) The server holds the first connection's
/// handshake until the second request has been routed; a subscriber of
/// the client's `tracing` events holds that request's way to the pool
/// until the first connection has served its request, and so was shared.
#[cfg(feature = "tracing")]
#[test]
fn a_request_that_reaches_the_pool_after_alpn_shared_the_connection_goes_on_it() {
    let (handshake, handshake_held) = mpsc::channel::<()>();
    let handshake_held = Mutex::new(handshake_held);
    let (url, server) = tls_h2_server(1, move |_, socket| {
        let _ = handshake_held.lock().unwrap().recv_timeout(CEILING);
        answer_all(&mut tls_h2(socket, &frame(SETTINGS, 0, 0, &[])));
    });
    let hold = Arc::new(HoldsThePoolEntry::default());
    let client = Client::builder()
        .event_loops(1)
        .add_root_certificate(&tls::certs().ca_pem)
        .max_connections_per_host(1)
        .request_timeout(CEILING)
        // No idle timeout: the shared connection keeps the host's permit.
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap();
    // The first takes the permit, and opens the connection.
    let first = client.get(&url).send();
    let second = thread::spawn({
        let (client, hold, url) = (client.clone(), hold.clone(), url.clone());
        move || with_pool_entry_held(&hold, || client.get(&url).send())
    });
    hold.wait_until_holding();
    handshake.send(()).unwrap();
    let first = first.wait().unwrap();
    assert_eq!(first.version(), http::Version::HTTP_2);
    hold.let_go();
    let second = second.join().unwrap().wait();
    let second = second.expect("the second request goes on the shared connection");
    assert_eq!(second.version(), http::Version::HTTP_2);
    client.close();
    server.join().unwrap();
}

/// What the server saw of a connection: the client closed it, or it was
/// still open when the server stopped waiting.
#[derive(Debug, PartialEq)]
enum SpareSeen {
    Closed,
    StillOpen,
    AStream,
}

/// Reads the frames the client sends on a spare connection, each given to
/// `each` (with the connection, to answer), until the first of: a stream
/// (HEADERS), the client's close, or the read timeout.
fn watch_spare<S: Read + Write>(
    tls: &mut S,
    mut each: impl FnMut(&mut S, u8, u8, &[u8]),
) -> SpareSeen {
    loop {
        let mut head = [0u8; 9];
        match tls.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return SpareSeen::StillOpen
            }
            Err(_) => return SpareSeen::Closed,
        }
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let mut payload = vec![0; len];
        if tls.read_exact(&mut payload).is_err() {
            return SpareSeen::Closed;
        }
        if head[3] == HEADERS {
            return SpareSeen::AStream;
        }
        each(tls, head[3], head[4], &payload);
    }
}

/// A spare HTTP/2 connection — the origin had its shared one already
/// (here a hedged copy's: a copy keeps away from the connection of the
/// request it backs up) — whose server allows no stream (its SETTINGS
/// came before the client could open one): the copy waits on it. The copy
/// cancelled (the request it backs up has its answer), nothing is left
/// for the connection to serve and nobody will come to it: it closes. (It
/// stayed open, holding its permit, until its idle timeout — for ever
/// without one.)
#[test]
fn a_spare_http2_connection_whose_waiting_request_is_cancelled_closes() {
    let (copy_waits, wait_for_the_copy) = sync_channel();
    let (seen, spare_seen) = mpsc::channel::<SpareSeen>();
    let seen = Mutex::new(seen);
    let (primary_in, primary_arrived) = mpsc::channel::<()>();
    let primary_in = Mutex::new(primary_in);
    let (url, server) = tls_h2_server(2, move |index, socket| {
        if index == 0 {
            let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
            // The request backed up: answered once the copy waits.
            let id = *read_requests(&mut tls, 1)
                .first()
                .expect("the first request");
            primary_in.lock().unwrap().send(()).unwrap();
            let _ = wait_for_the_copy.lock().unwrap().recv_timeout(CEILING);
            tls.write_all(&ok_headers(id)).unwrap();
            return answer_all(&mut tls);
        }
        let mut tls = tls_h2(socket, &max_streams(0));
        let mut told = false;
        // Quiet (the client's SETTINGS not acknowledged): a frame from the
        // server would have the connection look at itself.
        let seen_here = watch_spare(&mut tls, |_, kind, flags, _| {
            // The client has our limit of none: the copy waits.
            if kind == SETTINGS && flags & ACK != 0 && !told {
                told = true;
                copy_waits.lock().unwrap().send(()).unwrap();
            }
        });
        let _ = seen.lock().unwrap().send(seen_here);
    });
    // The hedge delay rings when the test says: once the first request
    // has reached the server, on a connection shared by then.
    let clock = tickless::timer::ManualClock::new();
    let client = Client::builder()
        .event_loops(2)
        .clock(Arc::new(clock.clone()))
        .add_root_certificate(&tls::certs().ca_pem)
        .request_timeout(CEILING)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let hedge_delay = Duration::from_millis(10);
    let future = client
        .get(&url)
        .hedge(tickless::hedge::Policy::after(hedge_delay))
        .send();
    primary_arrived
        .recv_timeout(CEILING)
        .expect("the first request reached the server");
    clock.advance(hedge_delay);
    let response = future.wait().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    let spare = spare_seen.recv_timeout(2 * CEILING);
    assert_eq!(spare, Ok(SpareSeen::Closed), "the spare connection closes");
    client.close();
    server.join().unwrap();
}

/// A spare HTTP/2 connection whose server allows no stream (as in
/// [`a_request_waiting_on_a_spare_http2_connection_that_allows_no_stream_goes_to_the_shared_one`]),
/// while the shared connection is at its limit (one stream, busy): its
/// request has no other place then, and stays; once the shared one frees
/// its stream, the request goes there — with one connection per origin
/// too, as a spare is one more — not when its request timeout ends.
#[test]
fn a_request_held_on_a_spare_http2_connection_goes_to_a_stream_the_shared_one_frees_later() {
    let (second_in, second_connected) = sync_channel();
    let (first_in, first_read) = sync_channel();
    let (held_in, spare_holds) = sync_channel();
    let (seen, spare_seen) = mpsc::channel::<SpareSeen>();
    let seen = Mutex::new(seen);
    let (url, server) = tls_h2_server(2, move |index, socket| {
        if index == 0 {
            let _ = second_connected.lock().unwrap().recv_timeout(CEILING);
            let mut tls = tls_h2(socket, &max_streams(1));
            let id = *read_requests(&mut tls, 1).first().expect("a first request");
            first_in.lock().unwrap().send(()).unwrap();
            // Its one stream busy until the spare holds its request.
            let _ = spare_holds.lock().unwrap().recv_timeout(CEILING);
            tls.write_all(&ok_headers(id)).unwrap();
            return answer_all(&mut tls);
        }
        second_in.lock().unwrap().send(()).unwrap();
        let _ = first_read.lock().unwrap().recv_timeout(CEILING);
        let mut tls = tls_h2(socket, &max_streams(0));
        let mut told = false;
        let seen_here = watch_spare(&mut tls, |_, kind, flags, _| {
            // The client has our limit of none (and has looked for another
            // place in the same turn, finding none).
            if kind == SETTINGS && flags & ACK != 0 && !told {
                told = true;
                held_in.lock().unwrap().send(()).unwrap();
            }
        });
        let _ = seen.lock().unwrap().send(seen_here);
    });
    let client = Client::builder()
        .event_loops(2)
        .add_root_certificate(&tls::certs().ca_pem)
        .request_timeout(CEILING)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap();
    two_answered_over_http2(&client, &url);
    let spare = spare_seen.recv_timeout(2 * CEILING);
    assert_eq!(
        spare,
        Ok(SpareSeen::Closed),
        "the spare connection closes, no stream opened on it"
    );
    client.close();
    server.join().unwrap();
}

/// A hedged copy waiting on a spare HTTP/2 connection whose server allows
/// no stream (set up as in
/// [`a_spare_http2_connection_whose_waiting_request_is_cancelled_closes`])
/// stays there, though the shared connection has streams free: that one
/// carries the request the copy backs up, which the copy keeps away from,
/// and a spare of its own could be held as this one is. The server then
/// allows one stream: the copy opens it on the spare (moved off, the spare
/// would have closed, and no stream come).
#[test]
fn a_hedged_copy_waiting_on_a_spare_that_allows_no_stream_stays_there() {
    let (copy_sent, wait_for_the_copy) = sync_channel();
    let (seen, spare_seen) = mpsc::channel::<SpareSeen>();
    let seen = Mutex::new(seen);
    let (primary_in, primary_arrived) = mpsc::channel::<()>();
    let primary_in = Mutex::new(primary_in);
    let (url, server) = tls_h2_server(2, move |index, socket| {
        if index == 0 {
            let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
            // The request backed up: answered once the copy has its stream.
            let id = *read_requests(&mut tls, 1)
                .first()
                .expect("the first request");
            primary_in.lock().unwrap().send(()).unwrap();
            let _ = wait_for_the_copy.lock().unwrap().recv_timeout(CEILING);
            tls.write_all(&ok_headers(id)).unwrap();
            return answer_all(&mut tls);
        }
        let mut tls = tls_h2(socket, &max_streams(0));
        let mut raised = false;
        let seen_here = watch_spare(&mut tls, |tls, kind, flags, _| {
            // The client has our limit of none (and has looked for another
            // place for the copy in the same turn): now one.
            if kind == SETTINGS && flags & ACK != 0 && !raised {
                raised = true;
                tls.write_all(&max_streams(1)).unwrap();
            }
        });
        let _ = seen.lock().unwrap().send(seen_here);
        copy_sent.lock().unwrap().send(()).unwrap();
    });
    // The hedge delay rings when the test says: once the first request
    // has reached the server, on a connection shared by then.
    let clock = tickless::timer::ManualClock::new();
    let client = Client::builder()
        .event_loops(2)
        .clock(Arc::new(clock.clone()))
        .add_root_certificate(&tls::certs().ca_pem)
        .request_timeout(CEILING)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let hedge_delay = Duration::from_millis(10);
    let future = client
        .get(&url)
        .hedge(tickless::hedge::Policy::after(hedge_delay))
        .send();
    primary_arrived
        .recv_timeout(CEILING)
        .expect("the first request reached the server");
    clock.advance(hedge_delay);
    // Waited for on a thread of its own: the answer comes only once the
    // server has seen the copy's stream, and the copy comes while the
    // caller waits (with nobody waiting, none came).
    let waiter = thread::spawn(move || future.wait().map(|response| response.version()));
    let spare = spare_seen.recv_timeout(2 * CEILING);
    assert_eq!(
        spare,
        Ok(SpareSeen::AStream),
        "the copy stays on the spare, and opens its stream there"
    );
    assert_eq!(waiter.join().unwrap().unwrap(), http::Version::HTTP_2);
    client.close();
    server.join().unwrap();
}

/// A spare HTTP/2 connection — opened over TLS for a request routed
/// before the origin's first connection had learnt HTTP/2 by ALPN, and
/// not shared (the origin has its one connection by then) — whose server
/// sends `GOAWAY` naming none of its streams processed: its request goes
/// again, on the shared connection; the spare, with nothing left, closes
/// (giving back its permit); and the listener is told of the `GOAWAY`, as
/// for a shared connection. The server holds the first connection's
/// handshake until the second has connected, and the second's until the
/// first (shared by then) has a request.
#[test]
fn a_goaway_on_a_spare_http2_connection_sends_its_request_to_the_shared_one() {
    let (second_in, second_connected) = sync_channel();
    let (first_in, first_served) = sync_channel();
    let (seen, spare_seen) = mpsc::channel::<SpareSeen>();
    let seen = Mutex::new(seen);
    let (url, server) = tls_h2_server(2, move |index, socket| {
        if index == 0 {
            let _ = second_connected.lock().unwrap().recv_timeout(CEILING);
            let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
            let id = *read_requests(&mut tls, 1).first().expect("a first request");
            first_in.lock().unwrap().send(()).unwrap();
            tls.write_all(&ok_headers(id)).unwrap();
            return answer_all(&mut tls);
        }
        second_in.lock().unwrap().send(()).unwrap();
        let _ = first_served.lock().unwrap().recv_timeout(CEILING);
        let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
        let ids = read_requests(&mut tls, 1);
        assert_eq!(ids.len(), 1, "the spare's request");
        tls.write_all(&goaway(0, 0)).unwrap();
        let seen_here = watch_spare(&mut tls, |tls, kind, flags, payload| {
            // The probe after the GOAWAY: answered, as a server that goes
            // on would.
            if kind == PING && flags & ACK == 0 {
                tls.write_all(&frame(PING, ACK, 0, payload)).unwrap();
            }
        });
        let _ = seen.lock().unwrap().send(seen_here);
    });
    let recorder = Recorder::new();
    let client = Client::builder()
        .event_loops(2)
        .add_root_certificate(&tls::certs().ca_pem)
        .listener(recorder.clone())
        .request_timeout(CEILING)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap();
    two_answered_over_http2(&client, &url);
    let spare = spare_seen.recv_timeout(2 * CEILING);
    assert_eq!(spare, Ok(SpareSeen::Closed), "the spare connection closes");
    assert!(
        eventually(CEILING, || client.stats().open_connections == 1),
        "the spare's permit is given back: {:?}",
        client.stats()
    );
    let goaways: Vec<u32> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::GoAway(_, code) => Some(code),
            _ => None,
        })
        .collect();
    assert_eq!(goaways, [0], "the listener is told of the spare's GOAWAY");
    client.close();
    server.join().unwrap();
}

/// A spare HTTP/2 connection (set up as in
/// [`a_goaway_on_a_spare_http2_connection_sends_its_request_to_the_shared_one`])
/// whose server allows no stream (SETTINGS, no `GOAWAY`): its request,
/// which it cannot send, goes to the shared connection, which has a
/// stream free; the spare, with nothing left, closes without a stream.
/// (It waited on the spare until its request timeout — for ever without
/// one: only a shared connection gave its held requests elsewhere.)
#[test]
fn a_request_waiting_on_a_spare_http2_connection_that_allows_no_stream_goes_to_the_shared_one() {
    let (second_in, second_connected) = sync_channel();
    let (first_in, first_served) = sync_channel();
    let (seen, spare_seen) = mpsc::channel::<SpareSeen>();
    let seen = Mutex::new(seen);
    let (url, server) = tls_h2_server(2, move |index, socket| {
        if index == 0 {
            let _ = second_connected.lock().unwrap().recv_timeout(CEILING);
            let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
            let id = *read_requests(&mut tls, 1).first().expect("a first request");
            first_in.lock().unwrap().send(()).unwrap();
            tls.write_all(&ok_headers(id)).unwrap();
            return answer_all(&mut tls);
        }
        second_in.lock().unwrap().send(()).unwrap();
        let _ = first_served.lock().unwrap().recv_timeout(CEILING);
        let mut tls = tls_h2(socket, &max_streams(0));
        let seen_here = watch_spare(&mut tls, |_, _, _, _| {});
        let _ = seen.lock().unwrap().send(seen_here);
    });
    let client = Client::builder()
        .event_loops(2)
        .add_root_certificate(&tls::certs().ca_pem)
        .request_timeout(CEILING)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap();
    two_answered_over_http2(&client, &url);
    let spare = spare_seen.recv_timeout(2 * CEILING);
    assert_eq!(
        spare,
        Ok(SpareSeen::Closed),
        "the spare connection closes, no stream opened on it"
    );
    assert!(
        eventually(CEILING, || client.stats().open_connections == 1),
        "the spare's permit is given back: {:?}",
        client.stats()
    );
    client.close();
    server.join().unwrap();
}

/// A TLS HTTP/2 server whose counting connection counts the streams the
/// client opens before it answers a PING, sent with the first stream:
/// the answer comes after every stream the client opened by then. (With
/// a stalled first connection before it: see [`stream_counting_server`].)
struct StreamCountingServer {
    url: String,
    /// Joined once the client has closed.
    server: thread::JoinHandle<()>,
    /// Told once the client has connected (its handshake held).
    connecting: mpsc::Receiver<()>,
    /// Lets the handshake go (or `CEILING` does).
    handshake: mpsc::Sender<()>,
    /// How many streams came before the PING's answer; then each is
    /// answered `:status 200`, as every later request.
    streams_seen: mpsc::Receiver<usize>,
}

/// See [`StreamCountingServer`]. With `stalled`, the first connection
/// reads one request, tells `stalled`, and answers nothing until the
/// client closes; the counting connection is the second.
fn stream_counting_server(stalled: Option<mpsc::Sender<()>>) -> StreamCountingServer {
    let (handshake, handshake_held) = mpsc::channel::<()>();
    let handshake_held = Mutex::new(handshake_held);
    let (seen, streams_seen) = mpsc::channel::<usize>();
    let seen = Mutex::new(seen);
    let (accepted, connecting) = mpsc::channel::<()>();
    let accepted = Mutex::new(accepted);
    let connections = 1 + usize::from(stalled.is_some());
    let stalled = Mutex::new(stalled);
    let (url, server) = tls_h2_server(connections, move |index, socket| {
        // Cloned out: the lock is not held while the connection stalls.
        let stalled = (index == 0).then(|| stalled.lock().unwrap().clone());
        if let Some(stalled) = stalled.flatten() {
            let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
            assert_eq!(read_requests(&mut tls, 1).len(), 1, "the stalled request");
            stalled.send(()).unwrap();
            while read_frame(&mut tls).is_some() {}
            return;
        }
        accepted.lock().unwrap().send(()).unwrap();
        let _ = handshake_held.lock().unwrap().recv_timeout(CEILING);
        let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
        let mut streams = Vec::new();
        let mut pinged = false;
        while let Some(got) = read_frame(&mut tls) {
            match got.kind {
                HEADERS => {
                    streams.push(got.stream);
                    if !pinged {
                        pinged = true;
                        tls.write_all(&frame(PING, 0, 0, &[7; 8])).unwrap();
                    }
                }
                SETTINGS if got.flags & ACK == 0 => tls.write_all(&settings_ack()).unwrap(),
                PING if got.flags & ACK != 0 => break,
                _ => {}
            }
        }
        seen.lock().unwrap().send(streams.len()).unwrap();
        for stream in streams {
            tls.write_all(&ok_headers(stream)).unwrap();
        }
        answer_all(&mut tls);
    });
    StreamCountingServer {
        url,
        server,
        connecting,
        handshake,
        streams_seen,
    }
}

/// A client of one loop on `clock`, trusting the test CA, with `permits`
/// connections per host (HTTP/2 ones too): the hedged-copy tests' (a copy
/// then waits in the pool's queue while the host's permits are held).
fn client_of_permits_on(clock: &tickless::timer::ManualClock, permits: usize) -> Client {
    Client::builder()
        .event_loops(1)
        .clock(Arc::new(clock.clone()))
        .add_root_certificate(&tls::certs().ca_pem)
        .max_connections_per_host(permits)
        .http2_max_connections_per_origin(permits)
        .request_timeout(CEILING)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .build()
        .unwrap()
}

/// Lets the counting connection's handshake go (`handshake`): the copy
/// queued meanwhile stays out of it — one stream came before the PING's
/// answer (else `why`) — and, back in the queue, is let go with
/// `response`, an HTTP/2 answer; then the client closes and `server` ends.
fn the_queued_copy_stayed_out(
    StreamCountingServer {
        server,
        handshake,
        streams_seen,
        connecting,
        ..
    }: StreamCountingServer,
    response: thread::JoinHandle<Result<tickless::Response, Error>>,
    client: &Client,
    clock: &tickless::timer::ManualClock,
    connects: &str,
    why: &str,
) {
    // The copy is made once `connects` connects (that connection the
    // client's, before it connects), and queues.
    connecting.recv_timeout(CEILING).expect(connects);
    clock.advance(HEDGE_DELAY);
    assert!(
        eventually(CEILING, || client.stats().waiting == 1),
        "the copy never queued ({why}): {:?}",
        client.stats()
    );
    handshake.send(()).unwrap();
    let streams = streams_seen.recv_timeout(2 * CEILING);
    assert_eq!(streams, Ok(1), "{why}");
    let response = response.join().unwrap().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert!(
        eventually(CEILING, || client.stats().waiting == 0),
        "{:?}",
        client.stats()
    );
    client.close();
    server.join().unwrap();
}

/// The hedge delay of [`hedged_on_a_thread`]'s request.
const HEDGE_DELAY: Duration = Duration::from_millis(10);

/// A GET of `url` with a copy after [`HEDGE_DELAY`], waited for on a
/// thread of its own: the copy goes when the request is polled.
fn hedged_on_a_thread(
    client: &Client,
    url: String,
) -> thread::JoinHandle<Result<tickless::Response, Error>> {
    copies_on_a_thread(client, url, 1)
}

/// [`hedged_on_a_thread`] with up to `copies` copies, one each
/// [`HEDGE_DELAY`] after the one before.
fn copies_on_a_thread(
    client: &Client,
    url: String,
    copies: u32,
) -> thread::JoinHandle<Result<tickless::Response, Error>> {
    let policy = tickless::hedge::Policy::after(HEDGE_DELAY).max_copies(copies);
    let future = client.get(url).hedge(policy).send();
    thread::spawn(move || future.wait())
}

/// An h2c client of up to three connections to an origin, on `clock`
/// (the hedge delays ring when the test advances it).
fn h2c_of_three_connections(clock: &tickless::timer::ManualClock) -> Client {
    h2c()
        .clock(Arc::new(clock.clone()))
        .http2_max_connections_per_origin(3)
        .build()
        .unwrap()
}

/// `response` is a 200, and `server` opened three connections for it
/// (else `why`); `client` then settles with no timer armed.
fn answered_on_a_third_connection(
    response: thread::JoinHandle<Result<tickless::Response, Error>>,
    server: &RawH2Server,
    client: &Client,
    why: &str,
) {
    let response = response.join().unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 3, "{why}");
    client.close();
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
}

/// A hedged copy queued in the pool while the connection of the request
/// it backs up is still in its TLS handshake (the host's one permit held
/// by that connection), when the connection learns HTTP/2 by ALPN and is
/// shared: the connection takes the pool's queue, but not the copy — a
/// copy keeps away from the connection of the request it backs up, as
/// when it is routed to a shared one. (It went on that connection, behind
/// the stalled request it was to back up.) The hedge delay rings once the
/// request is connecting; the server holds the handshake until the copy
/// waits, then, the first request in, pings the client: the client's
/// answer comes after every stream it opened with that request.
#[test]
fn a_hedged_copy_queued_while_its_attempts_connection_learns_http2_keeps_away_from_it() {
    let counting = stream_counting_server(None);
    let clock = tickless::timer::ManualClock::new();
    let client = client_of_permits_on(&clock, 1);
    let response = hedged_on_a_thread(&client, counting.url.clone());
    // The copy is to keep away from a connection the request has: it
    // rings once the request is connecting.
    the_queued_copy_stayed_out(
        counting,
        response,
        &client,
        &clock,
        "the request connects",
        "the copy went on the connection of the request it backs up",
    );
}

/// As above, but the copy is of a request that had no connection when
/// the copy was made — it waited in the pool's queue, as the copy came to
/// — so the copy has no connection to keep away from yet: the connection
/// that, shared, takes the request from the queue, does not take the copy
/// with it. (Both went on it.) The first request opens the connection;
/// the hedged one queues behind it, then its copy; the server, its
/// handshake held until then, counts the streams the client opens before
/// it answers a ping: the first request's and the hedged one's.
#[test]
fn a_hedged_copy_of_a_request_queued_without_a_connection_keeps_away_from_the_one_that_takes_it() {
    let StreamCountingServer {
        url,
        server,
        connecting,
        handshake,
        streams_seen,
    } = stream_counting_server(None);
    let clock = tickless::timer::ManualClock::new();
    let client = client_of_permits_on(&clock, 1);
    let opener = client.get(format!("{url}a")).send();
    connecting
        .recv_timeout(CEILING)
        .expect("the first request connects");
    let response = hedged_on_a_thread(&client, format!("{url}b"));
    assert!(
        eventually(CEILING, || client.stats().waiting == 1),
        "the hedged request never queued: {:?}",
        client.stats()
    );
    clock.advance(HEDGE_DELAY);
    assert!(
        eventually(CEILING, || client.stats().waiting == 2),
        "the copy never queued: {:?}",
        client.stats()
    );
    handshake.send(()).unwrap();
    let streams = streams_seen.recv_timeout(2 * CEILING);
    let _ = opener.wait();
    let _ = response.join();
    assert_eq!(
        streams,
        Ok(2),
        "the copy went on the connection of the request it backs up"
    );
    client.close();
    server.join().unwrap();
}

/// A hedged copy keeps away from the connection the request it backs up
/// runs on now, not only from the one it ran on when the copy was made.
/// The request goes on the first connection, its copy on a second; the
/// first server goes away (`GOAWAY`, nothing processed) and the request
/// goes again — on the second connection, the one with a stream free.
/// Then the second server refuses the copy's stream (`REFUSED_STREAM`),
/// and the copy goes again: on a third connection, not behind the request
/// it backs up on the second. (It went on the second: it kept away only
/// from the first, where the request was when the copy was made.) The
/// second connection answers any stream after the refusal, the third
/// every one: the answer comes either way.
#[test]
fn a_hedged_copy_keeps_away_from_the_connection_its_request_moved_to() {
    let (original_in, original_arrived) = mpsc::channel::<()>();
    let (copy_in, copy_arrived) = mpsc::channel::<()>();
    let (original_in, copy_in) = (Mutex::new(original_in), Mutex::new(copy_in));
    let copy_arrived = Mutex::new(copy_arrived);
    let server = RawH2Server::start(move |mut conn| match conn.index {
        0 => {
            assert_eq!(conn.read_requests(1).len(), 1, "the request");
            original_in.lock().unwrap().send(()).unwrap();
            let _ = copy_arrived.lock().unwrap().recv_timeout(CEILING);
            // Nothing processed: the request goes elsewhere.
            conn.send(&support::h2_server::goaway(0, 0));
            conn.drain(CEILING);
        }
        1 => {
            let copy = conn.read_requests(1);
            copy_in.lock().unwrap().send(()).unwrap();
            // The request, moved here.
            assert_eq!(conn.read_requests(1).len(), 1, "the request, moved");
            conn.send(&support::h2_server::rst_stream(copy[0], 0x7));
            conn.answer_all();
        }
        _ => conn.answer_all(),
    });
    // The hedge delay rings when the test says: once the request has
    // reached the server.
    let clock = tickless::timer::ManualClock::new();
    let client = h2c_of_three_connections(&clock);
    let response = hedged_on_a_thread(&client, server.url("/"));
    original_arrived
        .recv_timeout(CEILING)
        .expect("the request reached the server");
    clock.advance(HEDGE_DELAY);
    answered_on_a_third_connection(
        response,
        &server,
        &client,
        "the copy went on the connection the request it backs up moved to",
    );
}

/// A second hedged copy keeps away from the first copy's connection too,
/// not only from the connection of the request they back up: each copy
/// races every attempt of its request in flight, never sharing one's
/// connection. The request stalls on the first connection, its first copy
/// on a second; the second copy goes on a third, which answers. (It went
/// on the second, as another stream beside the first copy: it kept away
/// only from the request's connection.) The delays ring when the test
/// says: each once the attempt before has reached the server. The second
/// connection answers every stream after the first copy's, the third
/// every one: the answer comes either way.
#[test]
fn a_second_hedged_copy_keeps_away_from_the_first_copys_connection() {
    let (original_in, original_arrived) = mpsc::channel::<()>();
    let (copy_in, copy_arrived) = mpsc::channel::<()>();
    let (original_in, copy_in) = (Mutex::new(original_in), Mutex::new(copy_in));
    let server = RawH2Server::start(move |mut conn| match conn.index {
        0 => {
            assert_eq!(conn.read_requests(1).len(), 1, "the request");
            original_in.lock().unwrap().send(()).unwrap();
            conn.drain(CEILING);
        }
        1 => {
            assert_eq!(conn.read_requests(1).len(), 1, "the first copy");
            copy_in.lock().unwrap().send(()).unwrap();
            // Stalled, unless another stream comes here.
            if let Some(&id) = conn.read_requests(1).first() {
                conn.send(&ok_headers(id));
                conn.answer_all();
            }
        }
        _ => conn.answer_all(),
    });
    let clock = tickless::timer::ManualClock::new();
    let client = h2c_of_three_connections(&clock);
    let response = copies_on_a_thread(&client, server.url("/"), 2);
    original_arrived
        .recv_timeout(CEILING)
        .expect("the request reached the server");
    clock.advance(HEDGE_DELAY);
    copy_arrived
        .recv_timeout(CEILING)
        .expect("the first copy reached the server");
    clock.advance(HEDGE_DELAY);
    answered_on_a_third_connection(
        response,
        &server,
        &client,
        "the second copy went on the first copy's connection",
    );
}

/// A second hedged copy queued in the pool while the first copy's
/// connection is in its TLS handshake (the host's two permits held, by
/// the request's connection and that one), when that connection learns
/// HTTP/2 by ALPN and is shared: the connection takes the pool's queue,
/// but not the second copy — it keeps away from the first copy's
/// connection as from the request's. (It went on it, beside the first
/// copy.) The request stalls on the first connection; the second server
/// holds its handshake until the second copy waits, then, the first copy
/// in, pings the client: the client's answer comes after every stream it
/// opened with that copy.
#[test]
fn a_second_hedged_copy_queued_while_the_first_copys_connection_learns_http2_keeps_away_from_it() {
    let (stalled, original_arrived) = mpsc::channel::<()>();
    let counting = stream_counting_server(Some(stalled));
    let clock = tickless::timer::ManualClock::new();
    let client = client_of_permits_on(&clock, 2);
    let response = copies_on_a_thread(&client, counting.url.clone(), 2);
    original_arrived
        .recv_timeout(CEILING)
        .expect("the request reached the server");
    clock.advance(HEDGE_DELAY);
    the_queued_copy_stayed_out(
        counting,
        response,
        &client,
        &clock,
        "the first copy connects",
        "the second copy went on the first copy's connection",
    );
}

/// A channel both of whose ends a server's closure may hold (it must be
/// `Sync`: each end in a `Mutex`), for one connection to tell another.
fn sync_channel() -> (Mutex<mpsc::Sender<()>>, Mutex<mpsc::Receiver<()>>) {
    let (sender, receiver) = mpsc::channel();
    (Mutex::new(sender), Mutex::new(receiver))
}

/// Two GETs of `url` sent together (the second routed while the first's
/// connection is being set up, so it opens a spare), both answered 200
/// over HTTP/2.
fn two_answered_over_http2(client: &Client, url: &str) {
    let futures = [client.get(url).send(), client.get(url).send()];
    for future in futures {
        let response = future.wait().expect("both answered");
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.status(), 200);
    }
}

/// An origin that speaks HTTP/2 on one connection and HTTP/1.1 on another
/// (ALPN differs behind one name): a request its HTTP/2 connection's
/// `GOAWAY` sends elsewhere, unprocessed, has gone again once — it takes
/// no pooled HTTP/1.1 connection, where a close as it comes (the server's
/// idle timeout) would fail it with no retry left, but a new one. (It took
/// the pooled one, met the close and failed.)
#[test]
fn a_request_a_goaway_sent_elsewhere_takes_a_new_connection_not_a_pooled_one() {
    let (first_read, has_read_first) = mpsc::channel::<()>();
    let (answer_first, answer_now) = mpsc::channel::<()>();
    let (first_read, answer_now) = (Mutex::new(first_read), Mutex::new(answer_now));
    let (url, server) = tls_h2_server(3, move |index, socket| {
        if index == 1 {
            // HTTP/2: the second request answered, the third refused by a
            // `GOAWAY` that names the second the last it processes.
            let mut tls = tls_h2(socket, &frame(SETTINGS, 0, 0, &[]));
            let second = read_requests(&mut tls, 1)[0];
            tls.write_all(&ok_headers(second)).unwrap();
            assert_eq!(read_requests(&mut tls, 1).len(), 1, "the third request");
            tls.write_all(&goaway(second, 0)).unwrap();
            while read_frame(&mut tls).is_some() {}
            return;
        }
        // HTTP/1.1 by ALPN.
        socket.set_read_timeout(Some(CEILING)).unwrap();
        let session = ServerConnection::new(tls::server_config(&tls::certs().valid)).unwrap();
        let mut tls = StreamOwned::new(session, socket);
        let mut reader = RequestReader::new(index);
        reader.read_request(&mut tls).unwrap();
        if index == 2 {
            tls.write_all(&ok("fresh")).unwrap();
        } else {
            // The first request, answered once the second has its
            // HTTP/2 connection; the next one here is met by a close.
            first_read.lock().unwrap().send(()).unwrap();
            answer_now.lock().unwrap().recv().unwrap();
            tls.write_all(&ok("first")).unwrap();
        }
        let _ = reader.read_request(&mut tls);
    });
    let client = Client::builder()
        .event_loops(1)
        .add_root_certificate(&tls::certs().ca_pem)
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let first = client.get(url.as_str()).send();
    has_read_first.recv_timeout(CEILING).unwrap();
    let second = client.get(url.as_str()).send().wait().unwrap();
    assert_eq!(second.version(), http::Version::HTTP_2);
    answer_first.send(()).unwrap();
    let first = first.wait().unwrap();
    assert_eq!(first.version(), http::Version::HTTP_11);
    assert_eq!(first.text().wait().unwrap(), "first");
    let third = client
        .get(url.as_str())
        .send()
        .wait()
        .and_then(|response| response.text().wait());
    let third = third.expect("the request went again, on a new connection");
    assert_eq!(third, "fresh");
    client.close();
    server.join().unwrap();
}

/// A request whose reused HTTP/2 connection closed under it, before any
/// answer (the server's idle close as it came), goes again once — on a
/// new connection, as the failure's retry says, not on the origin's other
/// shared connection, which may be as stale: that one closing under it
/// too would fail it with no retry left. (It went on the other one, met
/// its close and failed.)
#[test]
fn a_request_retried_after_its_http2_connection_closed_goes_on_a_new_one_not_another_shared_one() {
    let (first_read, has_read_first) = mpsc::channel::<()>();
    let (answer_first, answer_now) = mpsc::channel::<()>();
    let (first_read, answer_now) = (Mutex::new(first_read), Mutex::new(answer_now));
    let (url, server) = tls_h2_server(3, move |index, socket| {
        // One stream at a time: the second request opens a second
        // connection while the first holds the first.
        let mut tls = tls_h2(socket, &max_streams(1));
        if index == 2 {
            return answer_all(&mut tls);
        }
        let id = read_requests(&mut tls, 1)[0];
        if index == 0 {
            first_read.lock().unwrap().send(()).unwrap();
            answer_now.lock().unwrap().recv().unwrap();
        }
        tls.write_all(&ok_headers(id)).unwrap();
        // The next request here is met by a close, no GOAWAY.
        read_requests(&mut tls, 1);
    });
    let client = Client::builder()
        .event_loops(1)
        .add_root_certificate(&tls::certs().ca_pem)
        .http2_only()
        .http2_max_connections_per_origin(2)
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let first = client.get(url.as_str()).send();
    has_read_first.recv_timeout(CEILING).unwrap();
    assert_eq!(
        client.get(url.as_str()).send().wait().unwrap().status(),
        200
    );
    answer_first.send(()).unwrap();
    assert_eq!(first.wait().unwrap().status(), 200);
    assert_eq!(client.stats().open_connections, 2);
    let third = client.get(url.as_str()).send().wait();
    let third = third.expect("the request went again, on a new connection");
    assert_eq!(third.status(), 200);
    client.close();
    server.join().unwrap();
}

/// Requests retried after their HTTP/2 connection closed under them
/// (reused, no answer yet: the server's idle close as they came) each go
/// again on a new connection, not on an open one — but on one and the
/// same: the first opens it, the others wait for it, as requests that find
/// an origin's connection being opened do. (Each opened one of its own.)
#[test]
fn requests_retried_after_their_http2_connection_closed_share_the_one_new_connection() {
    const IN_FLIGHT: usize = 5;
    let server = RawH2Server::start(|mut conn| {
        if conn.index > 0 {
            return conn.answer_all();
        }
        let first = conn.read_requests(1)[0];
        conn.send(&ok_headers(first));
        // Closed with these unanswered, no GOAWAY.
        assert_eq!(conn.read_requests(IN_FLIGHT).len(), IN_FLIGHT);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    });
    let client = h2c_builder(1, CEILING).build().unwrap();
    let url = server.url("/");
    assert_eq!(client.get(&url).send().wait().unwrap().status(), 200);
    let in_flight: Vec<_> = (0..IN_FLIGHT).map(|_| client.get(&url).send()).collect();
    for response in in_flight {
        let response = response.wait().expect("the request went again");
        assert_eq!(response.status(), 200);
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    client.close();
}
