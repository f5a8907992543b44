//! Idle connections leave the pool after `pooled_connection_idle_timeout`,
//! and no connection is reused past `connection_ttl`: the pool cleaner runs on
//! the wheel, so a `ManualClock` drives it without sleeping.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use support::*;
use tickless::timer::ManualClock;
use tickless::Client;

const WAIT: Duration = Duration::from_secs(10);

fn client(clock: &ManualClock, idle: Duration, ttl: Duration) -> Client {
    Client::builder()
        .event_loops(1)
        .clock(Arc::new(clock.clone()))
        .pooled_connection_idle_timeout(idle)
        .connection_ttl(ttl)
        .build()
        .unwrap()
}

#[test]
fn an_idle_connection_is_closed_once_its_idle_timeout_passes() {
    let server = TestServer::respond(|_| ok("hi"));
    let clock = ManualClock::new();
    let client = client(&clock, Duration::from_secs(30), Duration::ZERO);
    get_bytes(&client, &server.url("/"));
    assert_eq!(client.stats().idle_connections, 1);

    clock.advance(Duration::from_secs(29));
    // Still pooled: a request now reuses it.
    get_bytes(&client, &server.url("/"));
    assert_eq!(server.connections_accepted(), 1);

    // Idle again from now; the cleaner (every second at most) evicts it once
    // 30 s have passed.
    clock.advance(Duration::from_secs(31));
    assert!(
        server.wait_for_open(0, WAIT),
        "the idle connection was not closed"
    );
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    get_bytes(&client, &server.url("/"));
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

#[test]
fn a_connection_is_not_reused_past_its_time_to_live() {
    let server = TestServer::respond(|_| ok("hi"));
    let clock = ManualClock::new();
    let client = client(&clock, Duration::from_secs(600), Duration::from_secs(10));
    get_bytes(&client, &server.url("/"));
    clock.advance(Duration::from_secs(5));
    get_bytes(&client, &server.url("/"));
    assert_eq!(
        server.connections_accepted(),
        1,
        "reused within its time to live"
    );

    clock.advance(Duration::from_secs(6));
    // Past 10 s since it opened: evicted, and never handed out again.
    assert!(
        server.wait_for_open(0, WAIT),
        "the expired connection was not closed"
    );
    get_bytes(&client, &server.url("/"));
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

/// A request that takes an idle connection and is cancelled before its
/// loop runs it sends nothing: the connection goes back to the pool as
/// idle as it was, its idle time still counted from its last exchange.
#[test]
fn a_request_cancelled_before_it_runs_does_not_make_its_connection_idle_afresh() {
    let server = TestServer::respond(|_| ok("hi"));
    let slow = TestServer::respond(|_| ok("slow"));
    let clock = ManualClock::new();
    let client = client(&clock, Duration::from_secs(30), Duration::ZERO);
    let body = |response: Result<tickless::Response, tickless::Error>| {
        response.unwrap().bytes().wait().unwrap();
    };
    body(client.get(server.url("/")).send().wait());
    assert_eq!(client.stats().idle_connections, 1);
    clock.advance(Duration::from_secs(20));

    // The loop sits in the slow answer's listener; meanwhile a request
    // takes the idle connection and is cancelled before the loop runs it.
    let (listener, has_entered, release) = HoldingListener::new(WAIT);
    let held = {
        let (client, url) = (client.clone(), slow.url("/"));
        thread::spawn(move || body(client.get(url).listener(listener).send().wait()))
    };
    has_entered.recv_timeout(WAIT).unwrap();
    let cancelled = client.get(server.url("/cancelled")).send();
    assert_eq!(client.stats().idle_connections, 0, "it took the idle one");
    assert!(cancelled.cancel());
    release.send(()).unwrap();
    held.join().unwrap();
    assert!(eventually(WAIT, || client.stats().idle_connections == 2));
    assert_eq!(
        server.requests().len(),
        1,
        "the cancelled request never went"
    );

    // 35 s since the connection last carried anything: past its idle
    // timeout, so the next request opens a new one.
    clock.advance(Duration::from_secs(15));
    body(client.get(server.url("/")).send().wait());
    assert_eq!(
        server.connections_accepted(),
        2,
        "a connection idle for 35 s was reused (idle timeout 30 s)"
    );
    client.close();
}

/// A server that answers `hi` with `Keep-Alive: <keep_alive>`.
fn server_announcing(keep_alive: &'static str) -> TestServer {
    TestServer::respond(move |_| response(200, &[("Keep-Alive", keep_alive)], b"hi"))
}

/// A `Keep-Alive` header, the client's idle timeout (s), and steps: how
/// long the connection idles (ms), the connections accepted after.
type KeepAliveRow = (&'static str, u64, &'static [(u64, usize)]);

/// `Keep-Alive: timeout=5` is the server saying it closes a connection
/// idle for 5 s (nginx's `keepalive_timeout`, Apache's): a request sent on
/// it about then races the close. The pool keeps it 1 s less than that,
/// the client's own idle timeout notwithstanding — which the server's
/// shortens, never lengthens. Parameters come in any order and case; a
/// `Keep-Alive` the client cannot read says nothing: the client's own idle
/// timeout holds. Each row a [`KeepAliveRow`].
#[test]
fn a_servers_keep_alive_timeout_shortens_the_clients_idle_timeout_and_one_unread_says_nothing() {
    let malformed = [
        "timeout=abc",
        "timeout=-3",
        "timeout=",
        "timeout=2.5",
        "timeout=99999999999999999999999",
        "timeout",
        "max=1",
        "foo=1, bar",
    ];
    let read: [KeepAliveRow; 3] = [
        // Reused within 4 s; idle 4 s, the server's 5 s less the margin, not.
        ("timeout=5, max=100", 90, &[(3000, 1), (4000, 2)]),
        ("timeout=600", 30, &[(31_000, 2)]),
        ("MAX=5 , Timeout = 3", 90, &[(1500, 1), (2000, 2)]),
    ];
    let unread = malformed.map(|keep_alive| (keep_alive, 90, &[(60_000, 1)][..]));
    for (keep_alive, idle, steps) in read.into_iter().chain(unread) {
        let server = server_announcing(keep_alive);
        let clock = ManualClock::new();
        let client = client(&clock, Duration::from_secs(idle), Duration::ZERO);
        get_bytes(&client, &server.url("/"));
        for &(idle_ms, accepted) in steps {
            clock.advance(Duration::from_millis(idle_ms));
            get_bytes(&client, &server.url("/"));
            assert_eq!(
                server.connections_accepted(),
                accepted,
                "Keep-Alive: {keep_alive}, client idle timeout {idle} s, after idling {idle_ms} ms"
            );
        }
        client.close();
    }
}

/// A timeout within the margin (1 s or less), or no requests left
/// (`max=0`), leaves the connection nothing to be reused in: it is closed,
/// not pooled.
#[test]
fn a_keep_alive_with_no_time_or_requests_left_is_not_pooled() {
    for keep_alive in ["timeout=1", "timeout=0", "max=0", "Max=0, Timeout=30"] {
        let server = server_announcing(keep_alive);
        let clock = ManualClock::new();
        let client = client(&clock, Duration::from_secs(90), Duration::ZERO);
        get_bytes(&client, &server.url("/"));
        assert_eq!(client.stats().idle_connections, 0, "{keep_alive}");
        get_bytes(&client, &server.url("/"));
        assert_eq!(server.connections_accepted(), 2, "{keep_alive}");
        client.close();
    }
}

/// `Keep-Alive: max=1` allows one more request on the connection (RFC
/// 2068 §19.7.1.1: the requests the server still takes; Apache counts it
/// down to 1): the connection carries that one, then is not reused,
/// though the last response does not say `Connection: close` (it was
/// reused for as long as the server kept it open).
#[test]
fn a_connection_carries_no_more_requests_than_keep_alive_max_allows() {
    let server = TestServer::start(Behaviour::per_connection(|_| {
        let answered = AtomicUsize::new(0);
        Behaviour::respond(move |_| match answered.fetch_add(1, Ordering::Relaxed) {
            0 => response(200, &[("Keep-Alive", "timeout=30, max=1")], b"hi"),
            _ => ok("hi"),
        })
    }));
    let clock = ManualClock::new();
    let client = client(&clock, Duration::from_secs(90), Duration::ZERO);
    for _ in 0..4 {
        get_bytes(&client, &server.url("/"));
    }
    let mut per_connection = [0; 4];
    for request in server.requests() {
        per_connection[request.connection_index] += 1;
    }
    assert_eq!(per_connection, [2, 2, 0, 0], "requests per connection");
    client.close();
}

/// With no idle timeout and no time to live of the client's
/// own, the server's `Keep-Alive: timeout=5` is the only limit on the
/// connection's idle time (as `PoolLimits::expired` has it, and as the
/// builder's doc says: "kept 1 s less than it says"): once past it, the
/// connection is closed as one past the client's own idle timeout is
/// (`an_idle_connection_is_closed_once_its_idle_timeout_passes`), not held
/// open, dead to the pool, until a request to its origin happens to find it.
#[test]
fn a_connection_past_the_servers_keep_alive_timeout_is_closed_without_an_idle_timeout_of_the_clients(
) {
    let server = server_announcing("timeout=5");
    let clock = ManualClock::new();
    let client = client(&clock, Duration::ZERO, Duration::ZERO);
    get_bytes(&client, &server.url("/"));
    assert_eq!(client.stats().idle_connections, 1);
    clock.advance(Duration::from_secs(10));
    assert!(
        server.wait_for_open(0, WAIT),
        "a connection idle 10 s (Keep-Alive: timeout=5) is still open, {:?}",
        client.stats()
    );
    client.close();
}

/// With no idle timeout nor time to live of the client's, the cleaner runs
/// only for servers' `Keep-Alive` limits: once the one connection that had
/// such a limit is gone, it stops, though another connection (one whose
/// server gave no limit) stays idle — an idle client arms nothing. (It
/// kept a once-a-second round for as long as any connection was idle.)
#[test]
fn the_cleaner_stops_once_no_idle_connection_has_a_servers_limit() {
    let limited = server_announcing("timeout=5");
    let unlimited = TestServer::respond(|_| ok("hi"));
    let clock = ManualClock::new();
    let client = client(&clock, Duration::ZERO, Duration::ZERO);
    get_bytes(&client, &unlimited.url("/"));
    assert_eq!(client.stats().pool_cleaner_armed, 0, "no limit yet");
    get_bytes(&client, &limited.url("/"));
    assert_eq!(client.stats().idle_connections, 2);
    clock.advance(Duration::from_secs(10));
    assert!(limited.wait_for_open(0, WAIT), "{:?}", client.stats());
    assert!(eventually(WAIT, || client.stats().idle_connections == 1));
    // Rounds go on as the clock does.
    clock.advance(Duration::from_secs(10));
    assert!(
        eventually(WAIT, || client.stats().pool_cleaner_armed == 0),
        "a cleaner with nothing to close is still armed: {:?}",
        client.stats()
    );
    client.close();
}
