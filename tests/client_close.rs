//! `Client::close` with requests in flight: every future resolves with
//! `ClientClosed`, later requests fail at once, and no thread is left.
//!
//! One test only, alone in this binary: it compares the process's threads
//! (`/proc/self/task`) before and after, which tests running in parallel in
//! the same process would disturb.

mod support;

use std::time::{Duration, Instant};
use support::*;
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn close_fails_what_is_in_flight_and_joins_every_thread() {
    let never = TestServer::start(Behaviour::NeverAnswer);
    let stall = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\npart".to_vec(),
    ));
    let fine = TestServer::respond(|_| ok("fine"));
    let mut blackhole = UnacceptingListener::new();
    let can_hang_connects = blackhole.backlog_filled(4096);
    let before = live_threads();

    let recorder = Recorder::new();
    let client = Client::builder()
        .event_loops(2)
        .max_connections_per_host(2)
        .request_timeout(Duration::from_secs(60))
        .listener(recorder.clone())
        .build()
        .unwrap();
    assert!(
        live_threads().len() > before.len(),
        "the client starts threads"
    );

    // A pooled idle connection, and a request that resolves a name (so the
    // resolver threads start too).
    get_bytes(&client, &fine.url("/"));
    let by_name = format!("http://localhost:{}/", fine.addr().port());
    let _ = client.get(by_name).send().wait();

    // In flight: waiting for an answer, mid-body, queued behind the
    // per-host limit, and (if the kernel lets us) mid-connect.
    let mut futures = Vec::new();
    for _ in 0..3 {
        futures.push(client.get(never.url("/")).send());
    }
    futures.push(client.get(stall.url("/")).send());
    if can_hang_connects {
        futures.push(client.get(format!("http://{}/", blackhole.addr())).send());
    }
    assert!(never.wait_for_requests(2, WAIT));
    assert!(stall.wait_for_requests(1, WAIT));
    assert!(eventually(WAIT, || client.stats().waiting == 1));
    let in_flight = futures.len();
    assert_eq!(client.stats().in_flight, in_flight);

    let started = Instant::now();
    client.close();
    assert!(
        started.elapsed() < WAIT,
        "close took {:?}",
        started.elapsed()
    );
    assert!(client.is_closed());
    // close joins the client's threads before returning: right now, every
    // thread not there before is a test server's (its connection threads
    // end on their own once they see the close).
    let left: Vec<String> = live_threads()
        .difference(&before)
        .map(|&tid| thread_name(tid))
        // An empty name: the thread ended between listing and reading it.
        .filter(|name| !name.is_empty() && !name.starts_with("support-"))
        .collect();
    assert!(
        left.is_empty(),
        "client threads alive after close: {left:?}"
    );
    for (i, future) in futures.into_iter().enumerate() {
        assert!(future.is_done(), "future {i} still pending after close");
        // Failed before its head, or in its body (one had a head already).
        match future.wait().and_then(|response| response.bytes().wait()) {
            Err(Error::ClientClosed) => {}
            other => panic!("future {i}: expected ClientClosed, got {other:?}"),
        }
    }
    let closed_failures = recorder
        .events()
        .iter()
        .filter(|(e, _)| matches!(e, Event::Failed(m, false) if m == "the client is closed"))
        .count();
    assert_eq!(closed_failures, in_flight);

    // After close: refused at once, nothing sent.
    let accepted = fine.connections_accepted();
    let late = client.get(fine.url("/late")).send();
    assert!(late.is_done(), "a request after close must fail at once");
    assert!(matches!(late.wait(), Err(Error::ClientClosed)));
    let late = client.post(fine.url("/late")).body("x").send();
    assert!(matches!(late.wait(), Err(Error::ClientClosed)));
    assert_eq!(fine.connections_accepted(), accepted);
    assert!(fine.requests().iter().all(|r| r.target != "/late"));

    // Every connection was closed.
    assert!(never.wait_for_open(0, WAIT));
    assert!(stall.wait_for_open(0, WAIT));
    assert!(fine.wait_for_open(0, WAIT));
    let stats = client.stats();
    assert_eq!(stats.in_flight, 0, "{stats:?}");
    assert_eq!(stats.armed_timers(), 0, "{stats:?}");
    client.close(); // idempotent

    // And in the end no thread at all that was not there before.
    if !eventually(WAIT, || live_threads().is_subset(&before)) {
        let extra: Vec<String> = live_threads()
            .difference(&before)
            .map(|&tid| format!("{tid} {}", thread_name(tid)))
            .collect();
        panic!("threads left after close: {extra:?}");
    }
    drop(client);
}
