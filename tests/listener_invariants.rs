//! The listener's contract, over many mixed exchanges: every exchange the
//! client starts tells exactly one end — `on_completed` or `on_failed` —
//! and nothing of its progress after it, whatever happens to it: a body
//! read, dropped unread, read on another thread or held across
//! `Client::close`; an encoded body that decodes or not; a `HEAD` or a
//! `304` naming a coding with no body; redirects, retries, a hedge whose
//! loser is cancelled; a timeout, a cancel, a close in flight; HTTP/2.

mod support;

use std::sync::Arc;
use std::time::Duration;
use support::*;
use tickless::{hedge, retry, Client, EventListener, RequestInfo, Response};

const WAIT: Duration = Duration::from_secs(10);

/// Whether every attempt `recorder` was told of has told its end.
fn all_ended(recorder: &Recorder) -> bool {
    recorder
        .attempts()
        .iter()
        .all(|(_, events)| events.iter().any(|what| is_end(what)))
}

fn is_end(what: &str) -> bool {
    what == "completed" || what == "failed"
}

/// What a request's policy tells of the attempt it follows, maybe after
/// its end.
fn is_policy(what: &str) -> bool {
    matches!(what, "redirect" | "retry" | "hedge")
}

/// Asserts the contract on every attempt `recorder` was told of — at least
/// `started`, the requests the test knows to have begun (an exchange that
/// told nothing at all is one short): one end, nothing of its progress
/// after it, and its events in the order the work is done.
fn assert_contract(recorder: &Recorder, case: &str, started: usize) {
    assert!(
        eventually(WAIT, || all_ended(recorder)),
        "{case}: an exchange never ended: {:?}",
        recorder.attempts()
    );
    let told = recorder.attempts().len();
    assert!(
        told >= started,
        "{case}: {started} requests began, {told} told of: {:?}",
        recorder.attempts()
    );
    for (id, events) in recorder.attempts() {
        let ends = events.iter().filter(|what| is_end(what)).count();
        assert_eq!(ends, 1, "{case}: attempt {id} told {ends} ends: {events:?}");
        let end = events.iter().position(|what| is_end(what)).unwrap();
        let after: Vec<_> = events[end + 1..]
            .iter()
            .filter(|what| !is_policy(what))
            .collect();
        assert!(
            after.is_empty(),
            "{case}: attempt {id} told {after:?} after its end: {events:?}"
        );
        // A request sent again by the client itself starts again, under
        // the same attempt, on the connection it takes then (maybe a new
        // one): the order holds from that connection's events on.
        let last_connection = events
            .iter()
            .rposition(|what| *what == "connect_attempt" || *what == "connection_pooled")
            .unwrap_or(0);
        let send = &events[last_connection..];
        let first = |what: &str| send.iter().position(|told| *told == what);
        let order = [
            "connect_success",
            "tls_handshake_attempt",
            "tls_handshake_success",
            "protocol_negotiated",
            "request_head",
            "status",
            "headers",
            "response_head",
            "body_part",
        ];
        let told: Vec<_> = order.iter().filter_map(|what| first(what)).collect();
        assert!(
            told.windows(2).all(|pair| pair[0] < pair[1]),
            "{case}: attempt {id} told out of order: {events:?}"
        );
    }
}

/// The paths of the HTTP/1.1 server and what each answers.
const PATHS: [&str; 8] = [
    "/plain",
    "/gzip",
    "/bad-gzip",
    "/redirect",
    "/unavailable",
    "/not-modified",
    "/head",
    "/big",
];

fn http1_server() -> TestServer {
    let good = gzip(b"hello");
    let mut bad = good.clone();
    let crc_at = bad.len() - 8;
    bad[crc_at] ^= 0xff;
    let big = gzip(&vec![b'x'; 1 << 20]);
    let gzipped = [("Content-Encoding", "gzip")];
    TestServer::respond(move |request| {
        let body: &[u8] = match request.target.as_str() {
            "/plain" => return ok("hello"),
            "/gzip" | "/head" => &good,
            "/bad-gzip" => &bad,
            "/big" => &big,
            "/redirect" => {
                return response(
                    302,
                    &[("Location", "/gzip"), ("Content-Encoding", "gzip")],
                    &good,
                )
            }
            "/unavailable" => return response(503, &gzipped, &good),
            "/not-modified" => return response(304, &gzipped, b""),
            slow if slow.starts_with("/slow/") => {
                // Answers after a pause its path names, in milliseconds:
                // a request timeout may race it.
                let pause = slow["/slow/".len()..].parse().unwrap_or(0);
                std::thread::sleep(Duration::from_millis(pause));
                &good
            }
            _ => return response(404, &[], b""),
        };
        if request.method == "HEAD" {
            let length = body.len().to_string();
            let head = [("Content-Encoding", "gzip"), ("Content-Length", &length)];
            return response(200, &head, b"");
        }
        response(200, &gzipped, body)
    })
}

/// What the caller does with a response.
#[derive(Clone, Copy, Debug)]
enum Reading {
    Whole,
    DropUnread,
    OnAnotherThread,
    FirstChunkOnly,
    HeldAcrossClose,
}

impl Reading {
    /// Does this with `response`; one held across the client's close goes
    /// to `hold`.
    fn read(self, mut response: Response, hold: impl FnOnce(Response)) {
        match self {
            Reading::Whole => drop(response.bytes().wait()),
            Reading::DropUnread => drop(response),
            Reading::OnAnotherThread => {
                std::thread::spawn(move || drop(response.bytes().wait()))
                    .join()
                    .unwrap();
            }
            Reading::FirstChunkOnly => {
                let mut first = [0; 1];
                let _ = std::io::Read::read(response.body_mut(), &mut first);
                drop(response);
            }
            Reading::HeldAcrossClose => hold(response),
        }
    }
}

const READINGS: [Reading; 5] = [
    Reading::Whole,
    Reading::DropUnread,
    Reading::OnAnotherThread,
    Reading::FirstChunkOnly,
    Reading::HeldAcrossClose,
];

/// Every path, with every way of reading, one client per way (as a held
/// response outlives its client's close).
#[test]
fn every_exchange_over_http1_tells_one_end_however_its_response_goes() {
    let server = http1_server();
    for reading in READINGS {
        let recorder = Recorder::new();
        let client = Client::builder()
            .listener(recorder.clone())
            .build()
            .unwrap();
        let mut held = Vec::new();
        for path in PATHS {
            let method = if path == "/head" {
                http::Method::HEAD
            } else {
                http::Method::GET
            };
            let policy = retry::Policy::attempts(2)
                .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
                .backoff(Duration::ZERO, Duration::ZERO);
            let result = client
                .request(method, server.url(path))
                .retry(policy)
                .send()
                .wait();
            let Ok(response) = result else { continue };
            reading.read(response, |response| held.push(response));
        }
        assert_settles(&client, WAIT);
        client.close();
        drop(held);
        assert_contract(&recorder, &format!("{reading:?}"), PATHS.len());
    }
}

/// Exchanges that end otherwise than by their response: a timeout, a
/// cancel, a close with requests in flight, a hedge whose loser is
/// cancelled, a connection refused.
#[test]
fn every_exchange_ended_from_outside_tells_one_end() {
    let stalls = TestServer::start(Behaviour::NeverAnswer);
    let half = TestServer::start(Behaviour::SendThenStall(
        response(200, &[("Content-Length", "100")], b"half").to_vec(),
    ));
    let hedged = TestServer::start(Behaviour::silent_first("copy"));
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        format!("http://{addr}/")
    };
    let recorder = Recorder::new();
    let client = Client::builder()
        .listener(recorder.clone())
        .build()
        .unwrap();
    // A timeout before the head, and one while the body comes.
    let timed_out = client
        .get(stalls.url("/"))
        .request_timeout(Duration::from_millis(50))
        .send()
        .wait();
    assert!(timed_out.is_err());
    let response = client
        .get(half.url("/"))
        .request_timeout(Duration::from_millis(200))
        .send()
        .wait();
    if let Ok(response) = response {
        assert!(response.bytes().wait().is_err());
    }
    // A cancel.
    let future = client.get(stalls.url("/cancelled")).send();
    assert!(eventually(WAIT, || client.stats().in_flight >= 1));
    drop(future);
    // A hedge: the copy answers, the first attempt is cancelled.
    let response = client
        .get(hedged.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(20)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "copy");
    // Refused.
    assert!(client.get(&refused).send().wait().is_err());
    // A close with requests in flight, being answered or not.
    let in_flight: Vec<_> = (0..3)
        .map(|i| client.get(stalls.url(&format!("/{i}"))).send())
        .collect();
    assert!(eventually(WAIT, || stalls.requests().len() >= 3));
    assert_close_ends(&client, in_flight);
    // Eight requests: the two timed out, the cancel, the hedge, the refused
    // one and the three the close ended.
    assert_contract(&recorder, "ended from outside", 8);
}

/// Over HTTP/2: encoded bodies that decode or not, read or dropped.
#[test]
fn every_exchange_over_http2_tells_one_end() {
    let good = gzip(b"hello");
    let mut bad = good.clone();
    let crc_at = bad.len() - 8;
    bad[crc_at] ^= 0xff;
    let server = h2_server::H2Server::start(move |mut stream| {
        let body = if stream.request.uri().path() == "/bad" {
            bad.clone()
        } else {
            good.clone()
        };
        async move {
            let head = http::Response::builder()
                .status(200)
                .header("content-encoding", "gzip")
                .body(())
                .unwrap();
            if let Ok(mut sender) = stream.respond.send_response(head, false) {
                let _ = sender.send_data(body.into(), true);
            }
        }
    });
    for reading in READINGS {
        let recorder = Recorder::new();
        let client = Client::builder()
            .http2_prior_knowledge()
            .listener(recorder.clone())
            .build()
            .unwrap();
        let mut held = Vec::new();
        for path in ["/good", "/bad"] {
            let response = client.get(server.url(path)).send().wait().unwrap();
            reading.read(response, |response| held.push(response));
        }
        assert!(eventually(WAIT, || client.stats().in_flight == 0));
        client.close();
        drop(held);
        assert_contract(&recorder, &format!("HTTP/2 {reading:?}"), 2);
    }
}

/// A small generator of pseudo-random numbers, seeded: a failing run can
/// be repeated.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

/// Many exchanges at once, on a few threads of one client: each a random
/// path, way of reading, maybe a request timeout racing its answer, maybe
/// cancelled as it goes; then the client closes with some still in flight.
#[test]
fn mixed_exchanges_at_once_each_tell_one_end() {
    mixed_exchanges_at_once(Recorder::new(), "mixed, at once");
}

/// The same, told to a listener that blocks its thread briefly on each
/// status and body part: the timeouts and cancels that end exchanges
/// meanwhile, on other threads, lose none of their events.
#[test]
fn mixed_exchanges_told_to_a_listener_that_blocks_each_tell_one_end() {
    let recorder = Recorder::pausing(Duration::from_millis(2));
    mixed_exchanges_at_once(recorder, "mixed, told to a listener that blocks");
}

/// Runs the mixed exchanges told to `recorder`, and checks the contract.
fn mixed_exchanges_at_once(recorder: Arc<Recorder>, case: &str) {
    let server = http1_server();
    let client = Client::builder()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let seed = 0x5eed_u64;
    // The requests waited for to their outcome: each has begun.
    let waited = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let (client, url, waited) = (client.clone(), server.url("/"), waited.clone());
            std::thread::spawn(move || {
                let mut random = Lcg(seed + thread);
                // The last few are left in flight for the close, with the
                // responses held across it.
                let mut left: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
                for i in 0..16 {
                    let path = match random.below(PATHS.len() as u64 + 1) as usize {
                        index if index < PATHS.len() => PATHS[index].to_string(),
                        _ => format!("/slow/{}", random.below(20)),
                    };
                    let method = if path == "/head" {
                        http::Method::HEAD
                    } else {
                        http::Method::GET
                    };
                    let mut request = client
                        .request(method, format!("{}{}", url.trim_end_matches('/'), path))
                        .retry(
                            retry::Policy::attempts(2)
                                .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
                                .backoff(Duration::ZERO, Duration::ZERO),
                        );
                    if random.below(3) == 0 {
                        request =
                            request.request_timeout(Duration::from_millis(random.below(15) + 1));
                    }
                    let future = request.send();
                    if i >= 14 {
                        left.push(Box::new(future));
                        continue;
                    }
                    if random.below(6) == 0 {
                        std::thread::sleep(Duration::from_millis(random.below(5)));
                        drop(future);
                        continue;
                    }
                    let outcome = future.wait();
                    waited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Ok(response) = outcome else {
                        continue;
                    };
                    READINGS[random.below(READINGS.len() as u64) as usize]
                        .read(response, |response| left.push(Box::new(response)));
                }
                left
            })
        })
        .collect();
    let left: Vec<_> = threads
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect();
    client.close();
    drop(left);
    let waited = waited.load(std::sync::atomic::Ordering::Relaxed);
    assert_contract(&recorder, case, waited);
}

/// Over TLS: the handshake's events come between the connect and the
/// protocol, before the request's; a handshake that fails ends its
/// exchange once.
#[test]
fn every_exchange_over_tls_tells_one_end_after_its_handshake() {
    use support::tls::{certs, TlsServer};
    let good = gzip(b"hello");
    let server = TlsServer::respond(&certs().valid, move |_| {
        response(200, &[("Content-Encoding", "gzip")], &good)
    });
    let mismatched = TlsServer::respond(&certs().other_name, |_| ok("no"));
    let recorder = Recorder::new();
    let client = Client::builder()
        .add_root_certificate(&certs().ca_pem)
        .listener(recorder.clone())
        .build()
        .unwrap();
    for reading in READINGS {
        let response = client.get(server.url("/")).send().wait().unwrap();
        match reading {
            Reading::HeldAcrossClose | Reading::DropUnread => drop(response),
            _ => assert_eq!(response.text().wait().unwrap(), "hello"),
        }
        // A dropped body (whole, so the connection is kept) goes back to
        // the pool on the loop, after the drop returns: the next request
        // waits for it rather than race it and open a second connection.
        assert!(
            eventually(WAIT, || client.stats().idle_connections == 1),
            "{:?}",
            client.stats()
        );
    }
    assert!(client.get(mismatched.url("/")).send().wait().is_err());
    assert_settles(&client, WAIT);
    client.close();
    assert_contract(&recorder, "TLS", READINGS.len() + 1);
    let handshakes = (
        recorder.count("tls_handshake_success"),
        recorder.count("tls_handshake_failure"),
    );
    assert_eq!(handshakes, (1, 1), "{:?}", recorder.events());
}

/// Over HTTP/2, requests the client sends again by itself, under the same
/// attempt: one refused (`REFUSED_STREAM`) and one above a `GOAWAY`'s last
/// stream id, each answered on its second send, and one the `GOAWAY` says
/// was processed, answered on the first connection. Each tells one end.
#[test]
fn requests_sent_again_over_http2_each_tell_one_end() {
    use support::h2_server::{goaway, ok_headers, rst_stream, RawH2Server};
    let server = RawH2Server::start(|mut conn| {
        if conn.index > 0 {
            return conn.answer_all();
        }
        let ids = conn.read_requests(3);
        // The GOAWAY first: the refused stream goes again elsewhere too.
        conn.send(&goaway(ids[1], 0));
        conn.send(&rst_stream(ids[0], 0x7));
        conn.send(&ok_headers(ids[1]));
        conn.drain(Duration::from_secs(5));
    });
    let recorder = Recorder::new();
    let client = h2c_builder(1, WAIT)
        .listener(recorder.clone())
        .build()
        .unwrap();
    let futures: Vec<_> = ["/refused", "/processed", "/above"]
        .iter()
        .map(|path| client.get(server.url(path)).send())
        .collect();
    for future in futures {
        assert_eq!(future.wait().unwrap().status(), 200);
    }
    // Ended (the connection stays open, its own timer armed).
    assert!(eventually(WAIT, || client.stats().in_flight == 0));
    client.close();
    assert_contract(&recorder, "HTTP/2 sent again", 3);
    // The two sent again each went on with the events of the connection
    // they went on (a new one, or one another opened, pooled), then their
    // head.
    let attempts = recorder.attempts();
    let sent_again: Vec<_> = attempts
        .iter()
        .filter(|(_, events)| {
            events
                .iter()
                .filter(|what| **what == "request_head")
                .count()
                == 2
        })
        .collect();
    assert_eq!(sent_again.len(), 2, "{attempts:?}");
    assert!(
        sent_again.iter().all(|(_, events)| {
            let first_head = events.iter().position(|what| *what == "request_head");
            let last_connection = events
                .iter()
                .rposition(|what| *what == "connect_attempt" || *what == "connection_pooled");
            last_connection > first_head
        }),
        "{attempts:?}"
    );
}

/// Panics as it is told a status.
struct PanicsOnStatus;

impl EventListener for PanicsOnStatus {
    fn on_status(&self, _: &RequestInfo, _: http::StatusCode) {
        panic!("listener panics on the status");
    }
}

/// A listener that panics ends its own exchange only: the other streams
/// of its HTTP/2 connection, at once with it, are answered and tell their
/// events, each one end; the panicking one's client listener hears its
/// failure.
#[test]
fn a_listener_panicking_over_http2_loses_no_other_streams_events() {
    let server = h2_server::H2Server::start(|mut stream| async move {
        let head = http::Response::builder().status(200).body(()).unwrap();
        if let Ok(mut sender) = stream.respond.send_response(head, false) {
            // The rest of the body a while after the heads: the streams
            // are all open as the panicking ones fail.
            let _ = sender.send_data(vec![b'x'; 5_000].into(), false);
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = sender.send_data(vec![b'x'; 5_000].into(), true);
        }
    });
    let recorder = Recorder::new();
    let client = Client::builder()
        .http2_prior_knowledge()
        .event_loops(1)
        .listener(recorder.clone())
        .build()
        .unwrap();
    // One connection, then many streams on it at once.
    let first = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(first.bytes().wait().unwrap().len(), 10_000);
    let futures: Vec<_> = (0..8)
        .map(|i| {
            let request = client.get(server.url(&format!("/{i}")));
            match i % 4 {
                0 => request.listener(Arc::new(PanicsOnStatus)).send(),
                _ => request.send(),
            }
        })
        .collect();
    let mut answered = 0;
    for (i, future) in futures.into_iter().enumerate() {
        match future.wait().and_then(|response| response.bytes().wait()) {
            Ok(body) => {
                assert_eq!(body.len(), 10_000);
                answered += 1;
            }
            Err(error) => assert!(i % 4 == 0, "{i}: {error:?}"),
        }
    }
    assert_eq!(answered, 6);
    assert!(eventually(WAIT, || client.stats().in_flight == 0));
    client.close();
    assert_contract(&recorder, "HTTP/2, a listener panicking", 9);
    let ends = (recorder.count("completed"), recorder.count("failed"));
    assert_eq!(ends, (7, 2), "{:?}", recorder.events());
}
