//! Soak: 100 000 mixed requests (successes, server errors, timeouts,
//! cancels) against loopback, in both timeout modes half and half. It ends
//! with nothing armed, nothing in flight, no connection open beyond the idle
//! pool, and a resident set that stopped growing.
//!
//! Bounded: the request count is fixed and every request is bounded by its
//! own timeout. Alone in its binary so its RSS readings are its own.

mod support;

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;
use support::*;
use tickless::{Client, Error, ResponseFuture};

const TOTAL: usize = 100_000;
const IN_FLIGHT: usize = 128;
const WAIT: Duration = Duration::from_secs(20);

/// `/ok` answers 200, `/err` 500, `/slow` never (until the client gives up).
fn server() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, index| {
        let mut reader = RequestReader::new(index);
        while let Ok(request) = reader.read_request(&mut stream) {
            let answer = match request.target.as_str() {
                "/slow" => continue,
                "/err" => response(500, &[], b"boom"),
                _ => ok("fine"),
            };
            if stream.write_all(&answer).is_err() {
                return;
            }
        }
    }))
}

/// Resident set size in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    server_errors: usize,
    timeouts: usize,
    cancelled: usize,
}

enum Kind {
    Ok,
    ServerError,
    Slow,
    Cancel,
}

fn kind(i: usize) -> Kind {
    match i % 20 {
        0 => Kind::Slow,
        1 | 2 => Kind::ServerError,
        3 | 4 => Kind::Cancel,
        _ => Kind::Ok,
    }
}

fn settle(future: ResponseFuture, tally: &mut Tally) {
    match future.wait() {
        Ok(response) if response.status() == 200 => tally.ok += 1,
        Ok(response) if response.status() == 500 => tally.server_errors += 1,
        Ok(response) => panic!("unexpected status {}", response.status()),
        Err(Error::RequestTimeout(_)) => tally.timeouts += 1,
        Err(Error::Cancelled) => tally.cancelled += 1,
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

fn run(client: &Client, server: &TestServer, from: usize, to: usize, tally: &mut Tally) {
    let mut window = VecDeque::with_capacity(IN_FLIGHT);
    for i in from..to {
        let path = match kind(i) {
            Kind::Slow => "/slow",
            Kind::ServerError => "/err",
            Kind::Ok | Kind::Cancel => "/ok",
        };
        // Only `/slow` is meant to time out; the others get a budget no
        // loaded machine exceeds, so the tally is exact.
        let budget = match kind(i) {
            Kind::Slow => Duration::from_millis(20),
            _ => Duration::from_secs(10),
        };
        let future = client.get(server.url(path)).request_timeout(budget).send();
        if let Kind::Cancel = kind(i) {
            // It may already have completed: then it counts as a success.
            future.cancel();
        }
        window.push_back(future);
        if window.len() == IN_FLIGHT {
            settle(window.pop_front().unwrap(), tally);
        }
    }
    for future in window {
        settle(future, tally);
    }
}

#[test]
fn a_hundred_thousand_mixed_requests_leave_nothing_behind() {
    let server = server();
    let mut tally = Tally::default();
    let mut rss_at_fifth = 0;
    for (half, event_loop_timeouts) in [false, true].into_iter().enumerate() {
        let client = Client::builder()
            .event_loops(2)
            .wheel_tick(Duration::from_millis(1))
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        let start = half * TOTAL / 2;
        let end = start + TOTAL / 2;
        if half == 0 {
            // Warm up allocator, pool and loops before the first reading.
            run(&client, &server, start, start + TOTAL / 5, &mut tally);
            rss_at_fifth = rss();
            run(&client, &server, start + TOTAL / 5, end, &mut tally);
        } else {
            run(&client, &server, start, end, &mut tally);
        }
        assert_settles(&client, WAIT);
        let stats = client.stats();
        assert_eq!(stats.waiting, 0, "{stats:?}");
        assert!(
            eventually(WAIT, || {
                let stats = client.stats();
                stats.open_connections == stats.idle_connections
            }),
            "connections open beyond the idle pool: {:?}",
            client.stats()
        );
        client.close();
    }
    let total = tally.ok + tally.server_errors + tally.timeouts + tally.cancelled;
    assert_eq!(total, TOTAL, "{tally:?}");
    assert_eq!(tally.server_errors, TOTAL / 10, "{tally:?}");
    assert_eq!(tally.timeouts, TOTAL / 20, "{tally:?}");
    assert_eq!(
        tally.ok + tally.cancelled,
        TOTAL - TOTAL / 10 - TOTAL / 20,
        "{tally:?}"
    );
    let growth = rss().saturating_sub(rss_at_fifth);
    // Four fifths of the run after the first reading: a leak of even a few
    // hundred bytes per request would show as tens of megabytes.
    assert!(
        growth < 24 << 20,
        "RSS grew by {} KiB after warm-up",
        growth >> 10
    );
    eprintln!(
        "soak: {tally:?}; RSS after warm-up {} KiB, growth {} KiB",
        rss_at_fifth >> 10,
        growth >> 10
    );
}
