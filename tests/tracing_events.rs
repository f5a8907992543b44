//! The `tracing` integration, with a subscriber installed for the whole
//! test binary (loops and the wheel log from their own threads): a span
//! per request naming its method and URI without userinfo or query, and
//! the status of the response given to the caller (not a losing hedged
//! copy's, none when the caller gets an error), its events — connect,
//! pool reuse and offer-back, a redirect, a retry, a hedge — each naming
//! the attempt it is about, and a timeout that fired, where it ran, how
//! late, and the attempt it failed.

#![cfg(feature = "tracing")]

mod support;

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Waker};
use std::time::Duration;
use support::*;
use tickless::timer::ManualClock;
use tickless::{hedge, retry, Client, EventListener, RequestInfo};

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
    // The timeout's event names the attempt it fails as the events of that
    // request's span do: the silent server's request, sent and timed out.
    let silent_lines = own(&silent.authority());
    let sent = silent_lines
        .lines()
        .find(|l| l.contains("request sent"))
        .unwrap_or_else(|| panic!("no request sent to the silent server:\n{log}"));
    assert_eq!(attempt_id_of(timeout), attempt_id_of(sent), "{timeout}");
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
    assert!(completed.contains("status=200"), "{completed}");
    assert!(!completed.contains("status=103"), "{completed}");
    // The span's status is the final head's, not the interim's: 200 in
    // the span and in the event's own field, 103 in neither. (Shown from
    // the response's being given to the caller, when it is recorded: the
    // loop may tell the completion before.)
    let given = logged(&log, &authority, &["response given"]);
    assert_eq!(given.matches("status=200").count(), 2, "{given}");
    assert!(!given.contains("status=103"), "{given}");
}

/// Long enough for anything that must happen on loopback.
const CEILING: Duration = Duration::from_secs(10);

/// A hedged request whose first connection stays silent while the copy
/// answers: its events, interleaved in one span, carry two attempt ids —
/// the first attempt's, and the copy's on the hedge, on the copy's head
/// and in the response. Ordered, not timed: the hedge's delay is on a
/// clock that moves only when told, once the first attempt's request is
/// logged as sent.
#[test]
fn a_hedged_requests_events_name_their_attempts() {
    let captured = captured();
    let clock = ManualClock::new();
    let server = TestServer::start(Behaviour::silent_first("the copy"));
    let authority = server.authority();
    // The request's span names its path: a line of another test whose
    // server got the same port later names another.
    let ours_only = format!("{authority}/hedged");
    let client = Client::builder()
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let future = client
        .get(server.url("/hedged"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    let sent = |log: &str| -> Vec<u64> {
        log.lines()
            .filter(|l| l.contains(&ours_only) && l.contains("request sent"))
            .map(attempt_id_of)
            .collect()
    };
    assert!(server.wait_for_requests(1, CEILING));
    assert!(eventually(CEILING, || sent(&captured.text()).len() == 1));
    let [first] = sent(&captured.text())[..] else {
        unreachable!()
    };
    clock.advance(Duration::from_millis(50));
    let response = future.wait().unwrap();
    let answered = response.attempt_id();
    assert_eq!(response.text().wait().unwrap(), "the copy");
    client.close();

    let log = captured.text();
    let ours: Vec<&str> = log.lines().filter(|l| l.contains(&ours_only)).collect();
    let mut ids: Vec<u64> = ours.iter().map(|line| attempt_id_of(line)).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 2, "two attempts, each event naming one:\n{log}");
    assert!(ids.contains(&first), "{log}");
    let hedged = attempt_id_of(logged(&log, &authority, &["hedged copy sent"]));
    assert_ne!(hedged, first, "the hedge names the copy:\n{log}");
    let heads: Vec<&str> = ours
        .iter()
        .copied()
        .filter(|line| line.contains(" head ") && !line.contains("interim"))
        .collect();
    let [head] = heads[..] else {
        panic!("one head, the copy's:\n{log}");
    };
    assert_eq!(attempt_id_of(head), hedged, "{log}");
    assert_eq!(answered, hedged, "{log}");
}

/// The `attempt_id` field of a logged event; a test fails without one.
fn attempt_id_of(line: &str) -> u64 {
    let (_, after) = line
        .split_once("attempt_id=")
        .unwrap_or_else(|| panic!("no attempt_id in {line}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{line}"))
}

/// The first line of `log` about `authority` that holds every one of
/// `words`; a test fails without one.
fn logged<'a>(log: &'a str, authority: &str, words: &[&str]) -> &'a str {
    log.lines()
        .find(|line| line.contains(authority) && words.iter().all(|w| line.contains(w)))
        .unwrap_or_else(|| panic!("no {words:?} logged:\n{log}"))
}

/// What the gated server and the test wait on: whether the first
/// connection has its request, the statuses told to `on_status` (every
/// attempt's, in order), whether `on_hedge` was told, and whether the test
/// polls no more (so that no poll takes a head before both are told).
#[derive(Default)]
struct Heads {
    state: Mutex<HeadsState>,
    changed: Condvar,
}

#[derive(Default)]
struct HeadsState {
    first_arrived: bool,
    statuses: Vec<u16>,
    /// The statuses told to `on_completed`: an attempt told there has had
    /// its head delivered (told to `on_status` before it is delivered).
    completed: Vec<u16>,
    hedged: bool,
    polls_over: bool,
}

impl Heads {
    fn update(&self, change: impl FnOnce(&mut HeadsState)) {
        change(&mut self.state.lock().unwrap());
        self.changed.notify_all();
    }

    fn read<T>(&self, look: impl FnOnce(&HeadsState) -> T) -> T {
        look(&self.state.lock().unwrap())
    }

    /// Waits (up to [`CEILING`]) until `holds`; whether it did.
    fn wait_until(&self, holds: impl Fn(&HeadsState) -> bool) -> bool {
        let state = self.state.lock().unwrap();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, CEILING, |state| !holds(state))
            .unwrap();
        holds(&state)
    }
}

impl EventListener for Heads {
    fn on_status(&self, _: &RequestInfo, status: http::StatusCode) {
        self.update(|state| state.statuses.push(status.as_u16()));
    }
    fn on_hedge(&self, _: &RequestInfo, _: u32) {
        self.update(|state| state.hedged = true);
    }
    fn on_completed(&self, _: &RequestInfo, status: http::StatusCode) {
        self.update(|state| state.completed.push(status.as_u16()));
    }
}

/// A hedged request both of whose attempts answer — the first `201`, the
/// copy `202`, told after the first's head — before the caller takes a
/// head: the span's `status` is the response's (the first attempt's, the
/// one the chain waits for first), not the losing copy's, told last.
/// Ordered, not timed: the hedge's delay is on a clock that moves only
/// when told; the first connection answers once the test polls no more,
/// the copy's once the first attempt has ended. (The first connection
/// is the first attempt's: the copy is sent after it has its request.)
#[test]
fn a_hedged_requests_span_status_is_the_responses_not_the_losers() {
    let captured = captured();
    let clock = ManualClock::new();
    let heads = Arc::new(Heads::default());
    let gate = heads.clone();
    let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
        if read_head(&mut stream).is_none() {
            return;
        }
        if index == 0 {
            gate.update(|state| state.first_arrived = true);
        }
        let (status, answer_when): (u16, fn(&HeadsState) -> bool) = match index {
            0 => (201, |state| state.polls_over),
            // Once the first attempt has ended: its head delivered, not
            // only told (a loop preempted between the two let the copy's
            // head be delivered first, and win).
            _ => (202, |state| state.completed.contains(&201)),
        };
        if gate.wait_until(answer_when) {
            let _ = stream.write_all(&response(status, &[], b"answered"));
            drain(&mut stream);
        }
    }));
    let authority = server.authority();
    let client = Client::builder()
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let mut future = client
        .get(server.url("/both-answer"))
        .listener(heads.clone())
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    assert!(heads.wait_until(|state| state.first_arrived));
    clock.advance(Duration::from_millis(50));
    // The copy is sent by a poll once the delay has rung; no poll after
    // that one until both heads are told.
    let mut cx = Context::from_waker(Waker::noop());
    let copy_sent = eventually(CEILING, || {
        assert!(Pin::new(&mut future).poll(&mut cx).is_pending());
        heads.read(|state| state.hedged)
    });
    assert!(copy_sent, "no hedged copy sent");
    heads.update(|state| state.polls_over = true);
    assert!(
        heads.wait_until(|state| state.statuses.len() == 2),
        "both heads told: {:?}",
        heads.read(|state| state.statuses.clone())
    );
    assert_eq!(heads.read(|state| state.statuses.clone()), [201, 202]);
    let response = future.wait().unwrap();
    let answered = response.attempt_id();
    let status = response.status().as_u16();
    // The first attempt's 201 is the answer, the copy's 202 told after it:
    // the case where a span taking the last head told would be wrong.
    assert_eq!(status, 201, "the answer is the first attempt's");
    assert_eq!(response.text().wait().unwrap(), "answered");
    client.close();

    let log = captured.text();
    let given = logged(&log, &authority, &["response given"]);
    assert_eq!(attempt_id_of(given), answered, "{log}");
    // The span's fields, before the event's: every `status` recorded in
    // the span by then shows there (a field recorded twice shows twice).
    let (span, _) = given.split_once("}:").unwrap();
    let recorded: Vec<&str> = span
        .split(' ')
        .filter_map(|w| w.strip_prefix("status="))
        .collect();
    assert_eq!(recorded, [status.to_string()], "{given}");
}

/// A redirect whose next hop fails: the caller is given an error, no
/// response, so the span has no `status` — not the redirect's `302`.
#[test]
fn a_span_whose_request_fails_after_a_redirect_has_no_status() {
    let captured = captured();
    let refused = format!("http://{}/gone", refused_addr());
    let server = TestServer::respond(move |_| response(302, &[("Location", &refused)], b""));
    let client = Client::builder().build().unwrap();
    client.get(server.url("/moved")).send().wait().unwrap_err();
    client.close();

    let log = captured.text();
    let authority = server.authority();
    let redirected = logged(&log, &authority, &["redirect followed"]);
    assert!(redirected.contains("status=302"), "{redirected}");
    let failed = logged(&log, &authority, &["failed", "timeout="]);
    let (span, _) = failed.split_once("}:").unwrap();
    assert!(!span.contains("status="), "{failed}");
    // By this test's path as well as its server's authority: the log is
    // every test's of this binary, and a port may be used again.
    let ours = format!("{authority}/moved");
    let given = |line: &&str| line.contains(&ours) && line.contains("response given");
    assert!(!log.lines().any(|line| given(&line)), "{log}");
}
