//! One client-wide listener tells concurrent requests apart: every event
//! carries its request's id (shared by the hops of a redirect chain and the
//! attempts of a retried request) and the method and URI of its exchange.
//! And the attempts of one request: each — a redirect's hop, a retry, a
//! hedged copy, a repeat after a `417` — has an attempt id of its own,
//! which the response names for the one that answered; a send the client
//! makes again by itself (over HTTP/2, a stream never processed after a
//! `103`) keeps its attempt's id, its request head told again.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tickless::timer::ManualClock;
use tickless::{hedge, retry, Client, EventListener, RequestInfo};

/// Every event, with the request it was told of.
#[derive(Default)]
struct Told(Mutex<Vec<(RequestInfo, &'static str)>>);

impl Told {
    fn note(&self, request: &RequestInfo, event: &'static str) {
        self.0.lock().unwrap().push((request.clone(), event));
    }

    /// Every event so far, in the order told.
    fn events(&self) -> Vec<(RequestInfo, &'static str)> {
        self.0.lock().unwrap().clone()
    }

    /// The attempt ids of the events named `name`, in the order told.
    fn of(&self, name: &str) -> Vec<u64> {
        let events = self.0.lock().unwrap();
        let named = events.iter().filter(|(_, event)| *event == name);
        named.map(|(request, _)| request.attempt_id()).collect()
    }
}

impl EventListener for Told {
    fn on_status(&self, request: &RequestInfo, _status: http::StatusCode) {
        self.note(request, "status");
    }
    fn on_completed(&self, request: &RequestInfo, _status: http::StatusCode) {
        self.note(request, "completed");
    }
    fn on_failed(&self, request: &RequestInfo, _error: &tickless::Error) {
        self.note(request, "failed");
    }
    fn on_redirect(
        &self,
        request: &RequestInfo,
        _: http::StatusCode,
        _: &http::Uri,
        _: &http::Uri,
    ) {
        self.note(request, "redirect");
    }
    fn on_retry(&self, request: &RequestInfo, _: u32, _: Duration, _: &tickless::Error) {
        self.note(request, "retry");
    }
    fn on_hedge(&self, request: &RequestInfo, _: u32) {
        self.note(request, "hedge");
    }
    fn on_request_head(
        &self,
        request: &RequestInfo,
        _: &tickless::ConnectionInfo,
        _: &tickless::RequestHead<'_>,
    ) {
        self.note(request, "request head");
    }
    /// Named by its `x-send` field, which marks the send it came on.
    fn on_interim_head(&self, request: &RequestInfo, head: &tickless::ResponseHead<'_>) {
        let mark = head.headers().get("x-send").map(|mark| mark.as_bytes());
        let event = match mark {
            Some(b"first") => "interim first",
            Some(b"again") => "interim again",
            _ => "interim",
        };
        self.note(request, event);
    }
}

#[test]
fn concurrent_requests_hops_and_attempts_are_told_apart() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/hop" => response(307, &[("Location", "/landed")], b""),
        target => ok(target),
    });
    let resetting = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::Reset,
        _ => Behaviour::respond(|_| ok("second")),
    }));
    let listener = Arc::new(Told::default());
    let client = Client::builder()
        .event_loops(2)
        .listener(listener.clone())
        .build()
        .unwrap();
    let futures: Vec<_> = ["/a", "/b", "/c"]
        .iter()
        .map(|path| client.get(server.url(path)).send())
        .collect();
    let chain = client.post(server.url("/hop")).body("x").send();
    let retried = client
        .get(resetting.url("/again"))
        .retry(retry::Policy::attempts(2).backoff(Duration::ZERO, Duration::ZERO))
        .send();
    for future in futures.into_iter().chain([chain, retried]) {
        future.wait().unwrap().bytes().wait().unwrap();
    }
    client.close();

    let mut requests: BTreeMap<u64, Vec<(String, String, &'static str)>> = BTreeMap::new();
    // The events this test names (each attempt's request head, told or
    // not before a reset, is another test's).
    let named = ["status", "completed", "failed", "redirect", "retry"];
    for (request, event) in listener.events() {
        if named.contains(&event) {
            let (method, path) = (request.method(), request.uri().path());
            let told = (method.to_string(), path.to_owned(), event);
            requests.entry(request.id()).or_default().push(told);
        }
    }
    assert_eq!(requests.len(), 5, "one id per request: {requests:?}");
    let mut seen: Vec<Vec<(String, String, &'static str)>> = requests.into_values().collect();
    seen.sort();
    let event = |method: &str, path: &str, name| (method.to_owned(), path.to_owned(), name);
    let mut expected = vec![
        vec![
            event("GET", "/a", "status"),
            event("GET", "/a", "completed"),
        ],
        vec![
            event("GET", "/b", "status"),
            event("GET", "/b", "completed"),
        ],
        vec![
            event("GET", "/c", "status"),
            event("GET", "/c", "completed"),
        ],
        // The chain: its hops share the id; each event names its hop.
        vec![
            event("POST", "/hop", "status"),
            event("POST", "/hop", "completed"),
            event("POST", "/hop", "redirect"),
            event("POST", "/landed", "status"),
            event("POST", "/landed", "completed"),
        ],
        // The retried request: the failed attempt and the one that answered.
        vec![
            event("GET", "/again", "failed"),
            event("GET", "/again", "retry"),
            event("GET", "/again", "status"),
            event("GET", "/again", "completed"),
        ],
    ];
    expected.sort();
    // Within a request, the order of completion and the redirect (or the
    // retry) depends on threads; compare as sets per request.
    let sorted = |mut v: Vec<Vec<(String, String, &'static str)>>| {
        for events in &mut v {
            events.sort();
        }
        v.sort();
        v
    };
    assert_eq!(sorted(seen), sorted(expected));
}

/// Each attempt of a request — a redirect's hop, a retry — has an attempt
/// id of its own, which every event of its exchange carries, a redirect
/// and a retry that of the attempt they follow; the response names the
/// attempt that answered.
#[test]
fn each_attempt_has_its_own_id_and_the_response_names_the_one_that_answered() {
    // Reset first, then a redirect, then the answer.
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::Reset,
        _ => Behaviour::respond(|request| match request.target.as_str() {
            "/hop" => response(307, &[("Location", "/landed")], b""),
            target => ok(target),
        }),
    }));
    let listener = Arc::new(Told::default());
    let client = Client::new();
    let response = client
        .get(server.url("/hop"))
        .listener(listener.clone())
        .retry(retry::Policy::attempts(2).backoff(Duration::ZERO, Duration::ZERO))
        .send()
        .wait()
        .unwrap();
    let answered = response.attempt_id();
    assert_eq!(response.text().wait().unwrap(), "/landed");
    client.close();
    let events = listener.events();
    let ([failed], [retried], [redirected], [first, last]) = (
        &listener.of("failed")[..],
        &listener.of("retry")[..],
        &listener.of("redirect")[..],
        &listener.of("status")[..],
    ) else {
        panic!("{events:?}");
    };
    assert_eq!(retried, failed, "{events:?}");
    assert_eq!(redirected, first, "{events:?}");
    assert_eq!(*last, answered, "{events:?}");
    let mut ids = vec![*failed, *first, *last];
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "one id per attempt: {events:?}");
}

/// Long enough for anything that must happen on loopback.
const CEILING: Duration = Duration::from_secs(10);

/// A hedged request whose first connection stays silent: the copy that
/// answers has an attempt id of its own, which `on_hedge` carries, as do
/// the copy's events and the response — not the first attempt's.
/// Ordered, not timed: the delay is on a clock that moves only when told,
/// once the first attempt's head has been told.
#[test]
fn a_hedged_copy_has_its_own_id_which_on_hedge_and_the_response_carry() {
    let clock = ManualClock::new();
    let server = TestServer::start(Behaviour::silent_first("the copy"));
    let listener = Arc::new(Told::default());
    let client = Client::builder()
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let future = client
        .get(server.url("/"))
        .listener(listener.clone())
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    assert!(server.wait_for_requests(1, CEILING));
    assert!(eventually(CEILING, || listener.of("request head").len() == 1));
    let [first] = listener.of("request head")[..] else {
        unreachable!()
    };
    clock.advance(Duration::from_millis(50));
    let response = future.wait().unwrap();
    let answered = response.attempt_id();
    assert_eq!(response.text().wait().unwrap(), "the copy");
    client.close();
    let events = listener.events();
    let ([hedged], [status], [head_first, head_copy]) = (
        &listener.of("hedge")[..],
        &listener.of("status")[..],
        &listener.of("request head")[..],
    ) else {
        panic!("{events:?}");
    };
    assert_eq!(*head_first, first, "{events:?}");
    assert_eq!(hedged, status, "on_hedge names the copy: {events:?}");
    assert_eq!(*hedged, answered, "{events:?}");
    assert_eq!(hedged, head_copy, "{events:?}");
    assert_ne!(*hedged, first, "the copy has an id of its own: {events:?}");
}

/// A `417 Expectation Failed` to `Expect: 100-continue`: the request
/// repeated without it (no retry) is a new exchange, with a new attempt
/// id, which the response names.
#[test]
fn a_request_repeated_after_a_417_has_a_fresh_attempt_id() {
    use std::io::{Read, Write};
    let server = TestServer::start(Behaviour::custom(|mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        if head
            .to_ascii_lowercase()
            .contains("\r\nexpect: 100-continue")
        {
            let _ = stream.write_all(&response(417, &[], b"no expectations"));
        } else {
            let mut body = vec![0; content_length(&head)];
            if stream.read_exact(&mut body).is_ok() {
                let _ = stream.write_all(&ok("repeated"));
            }
        }
        drain(&mut stream);
    }));
    let listener = Arc::new(Told::default());
    let client = Client::new();
    let response = client
        .post(server.url("/"))
        .body("payload")
        .expect_continue(true)
        .listener(listener.clone())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    let answered = response.attempt_id();
    assert_eq!(response.text().wait().unwrap(), "repeated");
    client.close();
    let events = listener.events();
    // The 417's status is told before the repeat is made.
    let ([refused, repeated], [head_refused, head_repeated]) =
        (&listener.of("status")[..], &listener.of("request head")[..])
    else {
        panic!("{events:?}");
    };
    assert_eq!(head_refused, refused, "{events:?}");
    assert_eq!(head_repeated, repeated, "{events:?}");
    assert_eq!(*repeated, answered, "{events:?}");
    assert_ne!(repeated, refused, "a fresh id: {events:?}");
    assert!(listener.of("retry").is_empty(), "no retry: {events:?}");
}

/// Over HTTP/2, a stream the server says it never processed after a
/// `103`, its answer's head not come — refused (`REFUSED_STREAM`), or
/// above a `GOAWAY`'s last stream id — is sent again by the client itself
/// (no retry) under the same attempt id: its head is told again (on the
/// same connection after the refusal, on a new one after the `GOAWAY`),
/// and the second stream's interim heads follow — the first stream's
/// `103` comes before the second head, so a listener that clears an
/// attempt's interim heads at each request head (as `examples/get.rs`
/// does) keeps only the answer's.
#[test]
fn an_http2_stream_unprocessed_after_a_103_goes_again_under_the_same_attempt_id() {
    use support::h2_server::*;
    for goaway_case in [false, true] {
        let server = RawH2Server::start(move |mut conn| {
            let Some(&id) = conn.read_requests(1).first() else {
                return;
            };
            if conn.index == 0 {
                conn.send(&marked_early_hints(id, "first"));
                if goaway_case {
                    // The stream is above the last stream id: never
                    // processed, the `103` notwithstanding.
                    conn.send(&goaway(0, 0));
                    conn.drain(CEILING);
                    return;
                }
                conn.send(&rst_stream(id, 0x7));
                let Some(&again) = conn.read_requests(1).first() else {
                    return;
                };
                let mut out = marked_early_hints(again, "again");
                out.extend(ok_headers(again));
                conn.send(&out);
            } else {
                let mut out = marked_early_hints(id, "again");
                out.extend(ok_headers(id));
                conn.send(&out);
            }
            conn.drain(CEILING);
        });
        let listener = Arc::new(Told::default());
        let client = h2c_builder(1, CEILING).build().unwrap();
        let response = client
            .get(server.url("/"))
            .listener(listener.clone())
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), http::Version::HTTP_2);
        let answered = response.attempt_id();
        // Read to its end: the exchange is complete before the close.
        assert!(response.bytes().wait().unwrap().is_empty());
        client.close();
        let connections = server.connections.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(connections, 1 + usize::from(goaway_case));
        let events = listener.events();
        let told: Vec<&str> = events
            .iter()
            .map(|(_, event)| *event)
            .filter(|event| *event != "status")
            .collect();
        assert_eq!(
            told,
            [
                "request head",
                "interim first",
                "request head",
                "interim again",
                "completed"
            ],
            "GOAWAY: {goaway_case}; {events:?}"
        );
        assert!(
            events
                .iter()
                .all(|(request, _)| request.attempt_id() == answered),
            "one attempt id throughout: {events:?}"
        );
        assert!(listener.of("retry").is_empty(), "no retry: {events:?}");
    }
}
