//! One client-wide listener tells concurrent requests apart: every event
//! carries its request's id (shared by the hops of a redirect chain and the
//! attempts of a retried request) and the method and URI of its exchange.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tickless::{retry, Client, EventListener, RequestInfo};

/// Every event, as (request id, method, path, event name).
#[derive(Default)]
struct ByRequest(Mutex<Vec<(u64, String, String, &'static str)>>);

impl ByRequest {
    fn note(&self, request: &RequestInfo, event: &'static str) {
        self.0.lock().unwrap().push((
            request.id(),
            request.method().to_string(),
            request.uri().path().to_owned(),
            event,
        ));
    }
}

impl EventListener for ByRequest {
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
    let listener = Arc::new(ByRequest::default());
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
    for (id, method, path, event) in listener.0.lock().unwrap().iter().cloned() {
        requests.entry(id).or_default().push((method, path, event));
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

/// Every event, as (attempt id, event name).
#[derive(Default)]
struct ByAttempt(Mutex<Vec<(u64, &'static str)>>);

impl ByAttempt {
    fn note(&self, request: &RequestInfo, event: &'static str) {
        self.0.lock().unwrap().push((request.attempt_id(), event));
    }
}

impl EventListener for ByAttempt {
    fn on_status(&self, request: &RequestInfo, _status: http::StatusCode) {
        self.note(request, "status");
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
    let listener = Arc::new(ByAttempt::default());
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
    let events = listener.0.lock().unwrap().clone();
    let of = |name| -> Vec<u64> {
        let ids = events.iter().filter(|(_, event)| *event == name);
        ids.map(|(id, _)| *id).collect()
    };
    let ([failed], [retried], [redirected], [first, last]) = (
        &of("failed")[..],
        &of("retry")[..],
        &of("redirect")[..],
        &of("status")[..],
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
