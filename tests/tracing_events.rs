//! The `tracing` integration, with a subscriber installed for the whole
//! test binary (loops and the wheel log from their own threads): a span
//! per request naming its method and URI without userinfo or query, its
//! events — connect, pool reuse and offer-back, a redirect, a retry — and
//! a timeout that fired, where it ran and how late.

#![cfg(feature = "tracing")]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use support::*;
use tickless::{retry, Client};

/// What the subscriber installed for the whole binary (once, by the first
/// test to ask) has written: every test's requests, each test looking for
/// its own.
fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        captured
    })
}

#[test]
fn requests_are_spans_and_their_events_are_logged() {
    let captured = captured();
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/old?token=secret" => response(302, &[("Location", "/new")], b""),
        _ => ok("new"),
    });
    let silent = TestServer::start(Behaviour::NeverAnswer);
    let client = Client::builder()
        .event_loops(1)
        .use_event_loop_timeouts(true)
        .build()
        .unwrap();
    let url = server
        .url("/old?token=secret")
        .replace("://", "://user:pw@");
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "new");
    let error = client
        .get(silent.url("/slow"))
        .request_timeout(Duration::from_millis(30))
        .send()
        .wait()
        .unwrap_err();
    assert!(error.is_timeout());
    let refused_addr = refused_addr();
    let refused = format!("http://{refused_addr}/");
    let policy = retry::Policy::attempts(2).backoff(Duration::ZERO, Duration::ZERO);
    client.get(refused).retry(policy).send().wait().unwrap_err();
    client.close();

    let log = captured.text();
    let authority = server.authority();
    // This test's lines: inside the spans of its own requests (the other
    // test of the binary logs the same events for its server).
    let own = |host: &str| -> String {
        log.lines()
            .filter(|line| line.contains(host))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (ours, refused_lines) = (own(&authority), own(&refused_addr.to_string()));
    for expected in [
        format!("request{{method=GET uri=http://{authority}/old"),
        "connect attempt".to_owned(),
        "connected".to_owned(),
        "redirect followed".to_owned(),
        "pooled connection reused".to_owned(),
        "connection back to the pool".to_owned(),
        "completed".to_owned(),
    ] {
        assert!(
            ours.contains(&expected),
            "{expected:?} missing from:\n{log}"
        );
    }
    assert!(refused_lines.contains("retry"), "no retry logged:\n{log}");
    // A timeout's event is not inside its request's span; no other test
    // of this binary has one fire.
    for expected in ["ran_on=\"loop\"", "timeout fired"] {
        assert!(log.contains(expected), "{expected:?} missing from:\n{log}");
    }
    assert!(!log.contains("secret"), "a query secret was logged:\n{log}");
    assert!(!log.contains("user:pw"), "userinfo was logged:\n{log}");
    let timeout = log.lines().find(|l| l.contains("timeout fired")).unwrap();
    assert!(
        timeout.contains("kind=Request") && timeout.contains("late_us="),
        "{timeout}"
    );
}

/// The query is kept out of the log everywhere, not only out of the span:
/// a redirect's target and the URL of a status that is retried (the
/// retry's reason) are logged without it.
#[test]
fn a_redirect_target_or_a_retried_url_logs_no_query() {
    let captured = captured();
    let busy = Arc::new(AtomicUsize::new(0));
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/hop" => response(302, &[("Location", "/signed?sig=hop-signature")], b""),
        "/busy?sig=retry-signature" if busy.fetch_add(1, Ordering::SeqCst) == 0 => {
            response(503, &[], b"")
        }
        _ => ok("done"),
    });
    let client = Client::builder().build().unwrap();
    let landed = client.get(server.url("/hop")).send().wait().unwrap();
    assert_eq!(landed.text().wait().unwrap(), "done");
    let policy = retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::ZERO, Duration::ZERO);
    let retried = client
        .get(server.url("/busy?sig=retry-signature"))
        .retry(policy)
        .send()
        .wait()
        .unwrap();
    assert_eq!(retried.text().wait().unwrap(), "done");
    client.close();

    let log = captured.text();
    let authority = server.authority();
    let redirect = logged(&log, &authority, &["redirect followed"]);
    assert!(redirect.contains("/signed"), "{redirect}");
    let retry = logged(&log, &authority, &["retry", "503"]);
    assert!(retry.contains("/busy"), "{retry}");
    for signature in ["hop-signature", "retry-signature"] {
        assert!(!log.contains(signature), "a query was logged:\n{log}");
    }
}

/// An interim head (a `103 Early Hints` before the answer) is logged in
/// its request's span, with its status; the span's `status` is the final
/// one's.
#[test]
fn an_interim_head_is_logged_with_its_status() {
    let captured = captured();
    let server = TestServer::respond(|_| {
        let mut bytes = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n".to_vec();
        bytes.extend(ok("hinted"));
        bytes
    });
    let client = Client::builder().build().unwrap();
    let response = client.get(server.url("/hints")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "hinted");
    client.close();

    let log = captured.text();
    let authority = server.authority();
    let interim = logged(&log, &authority, &["interim head"]);
    assert!(interim.contains("status=103"), "{interim}");
    let completed = logged(&log, &authority, &["completed"]);
    // The span's status is the final head's, not the interim's: 200 in
    // the span and in the event's own field, 103 in neither.
    assert_eq!(completed.matches("status=200").count(), 2, "{completed}");
    assert!(!completed.contains("status=103"), "{completed}");
}

/// The first line of `log` about `authority` that holds every one of
/// `words`; a test fails without one.
fn logged<'a>(log: &'a str, authority: &str, words: &[&str]) -> &'a str {
    log.lines()
        .find(|line| line.contains(authority) && words.iter().all(|w| line.contains(w)))
        .unwrap_or_else(|| panic!("no {words:?} logged:\n{log}"))
}
