//! Idle connections leave the pool after `pooled_connection_idle_timeout`,
//! and no connection is reused past `connection_ttl`: the pool cleaner runs on
//! the wheel, so a `ManualClock` drives it without sleeping.

mod support;

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
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    assert_eq!(client.stats().idle_connections, 1);

    clock.advance(Duration::from_secs(29));
    // Still pooled: a request now reuses it.
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    assert_eq!(server.connections_accepted(), 1);

    // Idle again from now; the cleaner (every second at most) evicts it once
    // 30 s have passed.
    clock.advance(Duration::from_secs(31));
    assert!(
        server.wait_for_open(0, WAIT),
        "the idle connection was not closed"
    );
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

#[test]
fn a_connection_is_not_reused_past_its_time_to_live() {
    let server = TestServer::respond(|_| ok("hi"));
    let clock = ManualClock::new();
    let client = client(&clock, Duration::from_secs(600), Duration::from_secs(10));
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    clock.advance(Duration::from_secs(5));
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
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
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
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
