//! Retries inside the deadline and hedged requests, on a `ManualClock` in
//! both timeout modes: a backoff and a `Retry-After` are waited for to the
//! tick and never past the deadline, a retry that would not fit is not
//! started (and one an advance past the deadline starts times out at
//! once), what is retried depends on the method, the budget stops
//! retries and recovers, and a hedge starts exactly at its delay, wins,
//! and leaves nothing armed or open of the loser; a batch of requests
//! retried for 503s with large bodies under one connection per host is
//! answered, each retry ahead of the later requests. And HTTP/2 failures
//! before the answer, from a server whose frames are written by hand: a
//! stream reset is retried as a connection reset is (for a GET, or any
//! method with `any_method`), one refused as not processed whatever its
//! method, unless its body is streamed (but from a file, read again).

mod support;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use support::client_kit::Recorder;
use support::h2_server::{ok_headers, rst_stream, RawH2Server};
use support::*;
use tickless::timer::ManualClock;
use tickless::{hedge, retry, Client, ClientBuilder, Error, Http2Reason};

const CEILING: Duration = Duration::from_secs(10);
/// Real time given to something that must not happen, to show it does not.
const QUIET: Duration = Duration::from_millis(150);

/// A client on `clock` with one loop, its timeouts on the loop or the
/// wheel, a 10 s request timeout and no read timeout, and the recorder
/// that listens to it.
fn client_on(clock: &ManualClock, event_loop_timeouts: bool) -> (Client, Arc<Recorder>) {
    client_on_with(clock, event_loop_timeouts, |builder| builder)
}

/// [`client_on`]'s client with what `configure` sets besides, or instead
/// (a setting given again replaces its value).
fn client_on_with(
    clock: &ManualClock,
    event_loop_timeouts: bool,
    configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> (Client, Arc<Recorder>) {
    let recorder = Recorder::new();
    let builder = Client::builder()
        .clock(Arc::new(clock.clone()))
        .event_loops(1)
        .use_event_loop_timeouts(event_loop_timeouts)
        .request_timeout(Duration::from_secs(10))
        .read_timeout(Duration::ZERO)
        .listener(recorder.clone());
    let client = configure(builder).build().unwrap();
    (client, recorder)
}

/// [`resets_first`], but its reset waits until told on the sender it
/// returns (the request has come by then, or comes after).
fn resets_first_when_told() -> (TestServer, std::sync::mpsc::Sender<()>) {
    let (tell, told) = std::sync::mpsc::channel::<()>();
    let told = Arc::new(std::sync::Mutex::new(told));
    let server = TestServer::start(Behaviour::per_connection(move |index| match index {
        0 => {
            let told = told.clone();
            Behaviour::custom(move |stream, _| {
                let _ = told.lock().unwrap().recv_timeout(CEILING);
                // Closed (with the server's clone, as the closure returns)
                // with the request's bytes unread: the kernel sends RST.
                let _ = stream.peek(&mut [0; 1]);
            })
        }
        _ => Behaviour::respond(|request| ok(&format!("answered {}", request.method))),
    }));
    (server, tell)
}

/// Resets the first connection without answering; answers on the others.
fn resets_first() -> TestServer {
    TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::Reset,
        _ => Behaviour::respond(|request| ok(&format!("answered {}", request.method))),
    }))
}

/// A policy that retries a 503 once, after a backoff of 1 ms with no
/// jitter (a `Retry-After` in the answer says how long, if it does).
fn retry_a_503_once() -> retry::Policy {
    retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .jitter(false)
}

fn retries_seen(recorder: &Recorder) -> Vec<(u32, Duration)> {
    recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            client_kit::Event::Retry(attempt, delay, _) => Some((attempt, delay)),
            _ => None,
        })
        .collect()
}

fn a_reset_is_retried_after_its_backoff(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    let server = resets_first();
    let policy = retry::Policy::attempts(3)
        .backoff(Duration::from_millis(100), Duration::from_secs(1))
        .jitter(false);
    let mut future = client.get(server.url("/")).retry(policy).send();
    // Armed in the poll that saw the reset, on this thread.
    assert!(
        eventually(CEILING, || {
            poll_once(&mut future).is_pending() && retries_seen(&recorder).len() == 1
        }),
        "the reset is retried"
    );
    assert_eq!(retries_seen(&recorder), [(2, Duration::from_millis(100))]);
    assert!(eventually(CEILING, || client.stats().in_flight == 0));
    // A sentinel due 1 ms before the retry, armed at the same reading of
    // the clock (which stands still), has rung: the retry's alarm would
    // have too were it due as early, and polled it would start the retry,
    // in flight at once.
    let sentinel = Sentinel::after_backoff(&client, &recorder, Duration::from_millis(99));
    clock.advance(Duration::from_millis(99));
    sentinel.rung(&client);
    assert!(poll_once(&mut future).is_pending());
    assert_eq!(client.stats().in_flight, 0, "sent before its backoff");
    assert_eq!(server.connections_accepted(), 1, "sent before its backoff");
    clock.advance(Duration::from_millis(1));
    let response = poll_until_ready(&mut future, || "not sent after its backoff".into());
    assert_eq!(response.text().wait().unwrap(), "answered GET");
    assert_eq!(server.connections_accepted(), 2);
    // This request and its one retry, and the sentinel's.
    let budget = client.stats().retry_budget;
    assert_eq!((budget.requests, budget.retries_total), (1 + 1, 1 + 1));
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    client.close();
}

#[test]
fn a_reset_is_retried_after_its_backoff_on_the_wheel() {
    a_reset_is_retried_after_its_backoff(false);
}

#[test]
fn a_reset_is_retried_after_its_backoff_on_the_loop() {
    a_reset_is_retried_after_its_backoff(true);
}

fn a_retry_that_would_not_fit_is_not_started(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    // The first attempt fails 950 ms into a 1 s deadline.
    let server_clock = clock.clone();
    let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_ok() {
            server_clock.advance(Duration::from_millis(950));
        }
        // Dropped unanswered: a close before any response byte.
    }));
    for (backoff, min_remaining) in [
        // The backoff would end past the deadline.
        (Duration::from_millis(100), Duration::from_millis(1)),
        // It would end inside, leaving less than the minimum slice.
        (Duration::from_millis(10), Duration::from_millis(100)),
    ] {
        let policy = retry::Policy::attempts(3)
            .backoff(backoff, backoff)
            .jitter(false)
            .min_remaining(min_remaining);
        let before = server.connections_accepted();
        let error = client
            .get(server.url("/"))
            .request_timeout(Duration::from_secs(1))
            .retry(policy)
            .send()
            .wait()
            .unwrap_err();
        assert!(
            !matches!(error, Error::Retried { .. } | Error::RequestTimeout(_)),
            "the first attempt's own error: {error:?}"
        );
        assert_eq!(server.connections_accepted(), before + 1);
    }
    assert!(retries_seen(&recorder).is_empty());
    client.close();
}

#[test]
fn a_retry_that_would_not_fit_is_not_started_on_the_wheel() {
    a_retry_that_would_not_fit_is_not_started(false);
}

#[test]
fn a_retry_that_would_not_fit_is_not_started_on_the_loop() {
    a_retry_that_would_not_fit_is_not_started(true);
}

/// One advance takes the clock past the backoff and past the deadline:
/// the retry starts with its deadline already reached, and times out at
/// once, as it would on the system clock — not at the next advance, which
/// may never come.
fn a_retry_started_past_the_deadline_times_out_without_another_advance(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::Reset,
        _ => Behaviour::NeverAnswer,
    }));
    let policy = retry::Policy::attempts(2)
        .backoff(Duration::from_millis(100), Duration::from_millis(100))
        .jitter(false);
    let future = client
        .get(server.url("/"))
        .request_timeout(Duration::from_secs(1))
        .retry(policy)
        .send();
    let waiter = thread::spawn(move || future.wait());
    assert!(eventually(CEILING, || retries_seen(&recorder).len() == 1));
    clock.advance(Duration::from_secs(2));
    assert!(
        eventually(CEILING, || waiter.is_finished()),
        "mode {event_loop_timeouts}: the retry waits for another advance"
    );
    let error = waiter.join().unwrap().unwrap_err();
    assert!(
        matches!(&error, Error::Retried { attempts }
            if matches!(attempts.last(), Some(Error::RequestTimeout(_)))),
        "mode {event_loop_timeouts}: {error:?}"
    );
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    client.close();
}

#[test]
fn a_retry_started_past_the_deadline_times_out_without_another_advance_on_the_wheel() {
    a_retry_started_past_the_deadline_times_out_without_another_advance(false);
}

#[test]
fn a_retry_started_past_the_deadline_times_out_without_another_advance_on_the_loop() {
    a_retry_started_past_the_deadline_times_out_without_another_advance(true);
}

/// A status retried goes with the cookies its answer set (as a
/// redirect's next hop does): a 503 that sets a session cookie, then the
/// retry, which carries it — and a caller's own `Cookie` header still wins.
#[test]
fn a_status_retried_takes_the_cookies_its_answer_set() {
    let server = TestServer::respond(|request| match request.header("cookie") {
        None => response(503, &[("Set-Cookie", "session=abc")], b"busy"),
        Some(cookie) => ok(cookie),
    });
    let client = Client::builder()
        .event_loops(1)
        .cookie_store(true)
        .build()
        .unwrap();
    let policy = retry_a_503_once();
    let text = client
        .get(server.url("/"))
        .retry(policy.clone())
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, "session=abc");
    assert_eq!(server.requests().len(), 2);
    let text = client
        .get(server.url("/"))
        .header("cookie", "mine=1")
        .retry(policy)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, "mine=1");
    client.close();
}

/// How the 503 that answers a request's first attempt carries its body.
#[derive(Clone, Copy, Debug)]
enum BusyBody {
    /// 4 MiB with `Content-Length`: far over the body window (256 KiB)
    /// and what a connection drains of a body nobody reads.
    Large,
    /// 4 MiB chunked, 64 KiB a chunk.
    LargeChunked,
    /// A few bytes: whole on the connection with the head.
    Small,
}

/// A server that answers the first attempt of each path 503, with a body
/// of `shape`, and every later one `200 done <path>`.
fn busy_at_first(shape: BusyBody) -> TestServer {
    let answered = std::sync::Mutex::new(std::collections::HashSet::new());
    TestServer::respond(move |request| {
        if !answered.lock().unwrap().insert(request.target.clone()) {
            return ok(&format!("done {}", request.target));
        }
        let large = vec![b'x'; 4 << 20];
        match shape {
            BusyBody::Large => response(503, &[], &large),
            BusyBody::LargeChunked => {
                let chunks: Vec<&[u8]> = large.chunks(64 << 10).collect();
                chunked(503, &chunks, &[])
            }
            BusyBody::Small => response(503, &[], b"busy"),
        }
    })
}

/// Four requests sent at once to one host, with one connection allowed
/// per host, and waited on in order; the first attempt of each is
/// answered 503 (with a body of `shape`), which the policy retries once.
/// Nobody reads a 503 retried: each request must get its retry sent and
/// answered 200, none left waiting to its 10 s deadline for a connection
/// a later request holds with an answer not yet waited on.
fn a_batch_retried_for_its_503s_is_answered(shape: BusyBody) {
    let server = busy_at_first(shape);
    let client = Client::builder()
        .event_loops(1)
        .max_connections_per_host(1)
        .request_timeout(Duration::from_secs(10))
        .retry(retry_a_503_once())
        .build()
        .unwrap();
    let futures: Vec<_> = (0..4)
        .map(|index| client.get(server.url(&format!("/{index}"))).send())
        .collect();
    each_answered_in_order(&format!("{shape:?}"), futures, |index| {
        format!("done /{index}")
    });
    assert_eq!(server.requests().len(), 8, "{shape:?}: each request twice");
    client.close();
}

#[test]
fn a_batch_retried_for_503s_with_large_bodies_is_answered() {
    a_batch_retried_for_its_503s_is_answered(BusyBody::Large);
}

#[test]
fn a_batch_retried_for_503s_with_large_chunked_bodies_is_answered() {
    a_batch_retried_for_its_503s_is_answered(BusyBody::LargeChunked);
}

#[test]
fn a_batch_retried_for_503s_with_small_bodies_is_answered() {
    a_batch_retried_for_its_503s_is_answered(BusyBody::Small);
}

/// A request on `client`, to a server of its own, whose one alarm is armed
/// on the timers another request of the client is armed on (its one loop's
/// heap, or the wheel), due at a time of the test's choosing; polled until
/// it has rung. Once its alarm has rung, so has every alarm due as early:
/// the wheel fires what an advance reaches on the advancing thread, and a
/// loop expires all that is due, in deadline order, in one pass. So it
/// shows that another request's alarm has not rung, with no quiet time
/// waited through. Its alarm is a retry's wait ([`Sentinel::retry_after`],
/// [`Sentinel::after_backoff`]) or a hedge delay ([`Sentinel::hedged`]).
struct Sentinel {
    server: TestServer,
    future: tickless::ResponseFuture,
    alarm: SentinelAlarm,
}

/// What a [`Sentinel`]'s alarm starts once it has rung, which says what
/// its server has seen then.
enum SentinelAlarm {
    /// A retry: a second request, on the connection or a new one.
    Retry,
    /// A hedge's copy: a second connection (the first is never answered).
    HedgeCopy,
}

impl Sentinel {
    /// A sentinel whose retry waits for a `Retry-After` of 1 s from the
    /// clock's reading at its 503; returns once that retry is armed.
    fn retry_after(client: &Client, recorder: &Recorder) -> Sentinel {
        Sentinel::retrying(
            client,
            recorder,
            &[("Retry-After", "1")],
            retry_a_503_once(),
        )
    }

    /// A sentinel whose retry waits for `backoff` from the clock's reading
    /// at its 503 (no `Retry-After`, no jitter); returns once that retry is
    /// armed.
    fn after_backoff(client: &Client, recorder: &Recorder, backoff: Duration) -> Sentinel {
        let policy = retry::Policy::attempts(2)
            .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
            .backoff(backoff, backoff)
            .jitter(false);
        Sentinel::retrying(client, recorder, &[], policy)
    }

    /// Sends the sentinel's request, answered first with a 503 with
    /// `busy_headers`, retried by `policy`; returns once its retry is armed.
    fn retrying(
        client: &Client,
        recorder: &Recorder,
        busy_headers: &'static [(&'static str, &'static str)],
        policy: retry::Policy,
    ) -> Sentinel {
        let seen = retries_seen(recorder).len();
        let answers = AtomicUsize::new(0);
        let server = TestServer::respond(move |_| {
            if answers.fetch_add(1, Ordering::SeqCst) == 0 {
                response(503, busy_headers, b"busy")
            } else {
                ok("sentinel")
            }
        });
        let url = server.url("/");
        let mut future = client.get(&url).retry(policy).send();
        // Armed in the poll that saw the 503, on this thread.
        assert!(eventually(CEILING, || {
            poll_once(&mut future).is_pending() && retries_seen(recorder).len() == seen + 1
        }));
        // Told with its reason: the status, and the URL that answered it.
        let reason = recorder
            .events()
            .into_iter()
            .rev()
            .find_map(|(event, _)| match event {
                client_kit::Event::Retry(_, _, reason) => Some(reason),
                _ => None,
            });
        assert_eq!(
            reason,
            Some(format!("{url} answered 503 Service Unavailable"))
        );
        Sentinel {
            server,
            future,
            alarm: SentinelAlarm::Retry,
        }
    }

    /// A sentinel hedged after `delay` from the clock's reading at its
    /// send, to a server that never answers its first connection; returns
    /// once that connection's request is read. Its copy goes in the poll
    /// after the delay has rung — as another request's copy would, told at
    /// once (`on_hedge`).
    fn hedged(client: &Client, delay: Duration) -> Sentinel {
        let server = TestServer::start(Behaviour::silent_first("sentinel"));
        let future = client
            .get(server.url("/"))
            .hedge(hedge::Policy::after(delay))
            .send();
        assert!(server.wait_for_requests(1, CEILING));
        Sentinel {
            server,
            future,
            alarm: SentinelAlarm::HedgeCopy,
        }
    }

    /// Polls it until what its alarm started has answered. After a retry,
    /// waits besides for its exchanges to end, so that none is in flight.
    fn rung(mut self, client: &Client) {
        let response = poll_until_ready(&mut self.future, || "the sentinel never rang".into());
        assert_eq!(response.text().wait().unwrap(), "sentinel");
        match self.alarm {
            SentinelAlarm::Retry => {
                assert_eq!(self.server.requests().len(), 2);
                assert!(eventually(CEILING, || client.stats().in_flight == 0));
            }
            SentinelAlarm::HedgeCopy => assert_eq!(self.server.connections_accepted(), 2),
        }
    }
}

/// `future`, armed to retry `wait` from the clock's reading (a
/// `Retry-After`), is not sent before the clock has moved `wait`, and is
/// sent then: its response. Shown without quiet time: at 0.5 ms short of
/// `wait` a [`Sentinel`] due then has rung, so the retry's own alarm would
/// have too were it due as early, and polled it would start the retry,
/// registered in flight at once — its answer held by the server until
/// `open` is called, so it cannot end before it is counted.
fn sent_after_exactly(
    client: &Client,
    recorder: &Recorder,
    clock: &ManualClock,
    future: &mut tickless::ResponseFuture,
    wait: Duration,
    open: impl FnOnce(),
) -> tickless::Response {
    let half_a_millisecond = Duration::from_micros(500);
    assert!(eventually(CEILING, || client.stats().in_flight == 0));
    clock.advance(wait - Duration::from_secs(1) - half_a_millisecond);
    let sentinel = Sentinel::retry_after(client, recorder);
    clock.advance(Duration::from_secs(1));
    sentinel.rung(client);
    assert!(poll_once(future).is_pending());
    assert_eq!(client.stats().in_flight, 0, "sent before its Retry-After");
    clock.advance(half_a_millisecond);
    open();
    poll_until_ready(future, || "not sent at its Retry-After".into())
}

/// A gate for a server's answers: `hold`, called as one is made, returns
/// at once the first time and waits for `open` every time after (bounded:
/// a failed test still ends). For [`sent_after_exactly`]'s retry, whose
/// answer must not come before it is counted.
fn held_after_the_first() -> (impl Fn() + Send + Sync + 'static, impl FnOnce()) {
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let answered = AtomicUsize::new(0);
    let hold = move || {
        if answered.fetch_add(1, Ordering::SeqCst) > 0 {
            let _ = gate.lock().unwrap().recv_timeout(CEILING);
        }
    };
    (hold, move || open.send(()).unwrap())
}

fn retry_after_is_honoured_and_bounded_by_the_deadline(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    // The retry's answer to `/near` is held until the test lets it go.
    let (hold_the_retry, open) = held_after_the_first();
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/far" => response(503, &[("Retry-After", "60")], b"later"),
        _ => {
            hold_the_retry();
            response(503, &[("Retry-After", "2")], b"busy")
        }
    });
    let policy = retry_a_503_once();
    // Retry-After: 2 inside a 10 s deadline: waited for, to the tick.
    let mut future = client.get(server.url("/near")).retry(policy.clone()).send();
    assert!(eventually(CEILING, || {
        poll_once(&mut future).is_pending() && retries_seen(&recorder).len() == 1
    }));
    assert_eq!(retries_seen(&recorder), [(2, Duration::from_secs(2))]);
    let response = sent_after_exactly(
        &client,
        &recorder,
        &clock,
        &mut future,
        Duration::from_secs(2),
        open,
    );
    // Still 503 (the server always is): the last response is the outcome.
    assert_eq!(response.status(), 503);
    assert_eq!(server.requests().len(), 2);
    // The 503's body was dropped and its connection reused.
    assert_eq!(server.connections_accepted(), 1);

    // Retry-After: 60 would pass the deadline: the 503 is the response.
    let response = client
        .get(server.url("/far"))
        .retry(policy)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.text().wait().unwrap(), "later");
    assert_eq!(server.requests().len(), 3);
    client.close();
}

#[test]
fn retry_after_is_honoured_and_bounded_by_the_deadline_on_the_wheel() {
    retry_after_is_honoured_and_bounded_by_the_deadline(false);
}

#[test]
fn retry_after_is_honoured_and_bounded_by_the_deadline_on_the_loop() {
    retry_after_is_honoured_and_bounded_by_the_deadline(true);
}

/// A `Retry-After` date is the server's wall-clock time, counted from the
/// response's own `Date`: a server whose clock is decades behind the
/// client's asks for the 3 s it means — not for none, as its date long past
/// by the client's wall clock would — and the wait is timed on the client's
/// clock, a `ManualClock` here, to the tick.
#[test]
fn a_retry_after_date_counts_from_the_responses_date() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    // The retry's answer is held until the test lets it go.
    let (hold_the_retry, open) = held_after_the_first();
    let server = TestServer::respond(move |_| {
        hold_the_retry();
        response(
            503,
            &[
                ("Date", "Sun, 06 Nov 1994 08:49:37 GMT"),
                ("Retry-After", "Sun, 06 Nov 1994 08:49:40 GMT"),
            ],
            b"busy",
        )
    });
    let policy = retry_a_503_once();
    let mut future = client.get(server.url("/")).retry(policy).send();
    assert!(eventually(CEILING, || {
        poll_once(&mut future).is_pending() && retries_seen(&recorder).len() == 1
    }));
    assert_eq!(retries_seen(&recorder), [(2, Duration::from_secs(3))]);
    let response = sent_after_exactly(
        &client,
        &recorder,
        &clock,
        &mut future,
        Duration::from_secs(3),
        open,
    );
    assert_eq!(response.status(), 503);
    assert_eq!(server.requests().len(), 2);
    client.close();
}

/// A hedge delay given as a percentile is one of the origin's head
/// latencies, each from its attempt's start: the head of a retry sent after
/// a `Retry-After` of 2 s counts from the retry, not from the first attempt
/// — else those 2 s would count as the origin's latency, and the next
/// request's copy (at the 100th percentile here) would wait for them too.
/// On a `ManualClock` that never moves while a server answers, every
/// latency is zero: the copy goes 1 ms after the attempt it backs up.
#[test]
fn a_retrys_head_latency_runs_from_its_own_start() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let (busy, slow) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (gate, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/busy" if busy.fetch_add(1, Ordering::SeqCst) == 0 => {
            response(503, &[("Retry-After", "2")], b"busy")
        }
        "/slow" if slow.fetch_add(1, Ordering::SeqCst) == 0 => {
            // Held until the test ends (bounded: a failed test still
            // ends, its server dropped): the first attempt never answers.
            let _ = held.lock().unwrap().recv_timeout(CEILING);
            ok("too late")
        }
        _ => ok("answered"),
    });
    let hedge = hedge::Policy::percentile(100.0, Duration::from_secs(5));
    let retry = retry_a_503_once();
    let get = |path: &str| {
        client
            .get(server.url(path))
            .hedge(hedge.clone())
            .retry(retry.clone())
            .send()
    };
    // Twenty samples, all zero: the percentile is known from here on.
    for _ in 0..20 {
        assert_eq!(get("/").wait().unwrap().text().wait().unwrap(), "answered");
    }
    let future = get("/busy");
    let waiter = thread::spawn(move || future.wait());
    assert!(eventually(CEILING, || retries_seen(&recorder).len() == 1));
    clock.advance(Duration::from_secs(2));
    let response = waiter.join().unwrap().unwrap();
    assert_eq!(response.text().wait().unwrap(), "answered");
    assert_eq!(hedges_seen(&recorder), 0);

    let future = get("/slow");
    let waiter = thread::spawn(move || future.wait());
    assert!(server.wait_for_requests(23, CEILING));
    clock.advance(Duration::from_millis(1));
    assert!(
        eventually(CEILING, || hedges_seen(&recorder) == 1),
        "no copy 1 ms after an attempt whose origin always answered at once"
    );
    let response = waiter.join().unwrap().unwrap();
    assert_eq!(response.text().wait().unwrap(), "answered");
    drop(gate);
    client.close();
}

/// Without a request timeout only the policy bounds a `Retry-After`: one
/// past its maximum — a day, or a date decades ahead — is not waited for,
/// the 503 is the outcome at once (the clock never moves), and no retry is
/// told; one inside it still is.
fn a_retry_after_past_the_policys_maximum_is_the_outcome(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on_with(&clock, event_loop_timeouts, |builder| {
        builder.request_timeout(Duration::ZERO)
    });
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/day" => response(503, &[("Retry-After", "86400")], b"tomorrow"),
        "/date" => response(
            503,
            &[("Retry-After", "Fri, 01 Jan 2100 00:00:00 GMT")],
            b"much later",
        ),
        _ => response(503, &[("Retry-After", "60")], b"in a minute"),
    });
    let policy = retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .jitter(false);
    for (path, body) in [("/day", "tomorrow"), ("/date", "much later")] {
        let mut future = client.get(server.url(path)).retry(policy.clone()).send();
        let response = poll_until_ready(&mut future, || {
            format!(
                "{path}: waits for its Retry-After: {:?}",
                retries_seen(&recorder)
            )
        });
        assert_eq!(response.status(), 503);
        assert_eq!(response.text().wait().unwrap(), body);
    }
    assert_eq!(server.requests().len(), 2, "neither was sent again");
    assert_eq!(retries_seen(&recorder), []);
    // The policy's own maximum (60 s by default) is still waited for.
    let future = client.get(server.url("/minute")).retry(policy).send();
    let waiter = thread::spawn(move || future.wait());
    assert!(eventually(CEILING, || retries_seen(&recorder).len() == 1));
    assert_eq!(retries_seen(&recorder), [(2, Duration::from_secs(60))]);
    clock.advance(Duration::from_secs(60));
    assert_eq!(waiter.join().unwrap().unwrap().status(), 503);
    assert_eq!(server.requests().len(), 4);
    client.close();
}

#[test]
fn a_retry_after_past_the_policys_maximum_is_the_outcome_on_the_wheel() {
    a_retry_after_past_the_policys_maximum_is_the_outcome(false);
}

#[test]
fn a_retry_after_past_the_policys_maximum_is_the_outcome_on_the_loop() {
    a_retry_after_past_the_policys_maximum_is_the_outcome(true);
}

#[test]
fn what_is_retried_depends_on_whether_the_request_reached_the_server() {
    let clock = ManualClock::new();
    let (client, _recorder) = client_on(&clock, false);
    let policy = retry::Policy::attempts(3)
        .backoff(Duration::ZERO, Duration::ZERO)
        .jitter(false);
    // A POST that was sent and reset is not sent again...
    let server = resets_first();
    let error = client
        .post(server.url("/"))
        .body("once")
        .retry(policy.clone())
        .send()
        .wait()
        .unwrap_err();
    assert!(!matches!(error, Error::Retried { .. }), "{error:?}");
    assert_eq!(server.connections_accepted(), 1);
    // ...unless the caller says it may be.
    let server = resets_first();
    let response = client
        .post(server.url("/"))
        .body("twice is fine")
        .retry(policy.clone().any_method(true))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "answered POST");
    // One that never connected is, whatever its method; the error lists
    // every attempt.
    let error = client
        .post(format!("http://{}/", refused_addr()))
        .body("never sent")
        .retry(policy)
        .send()
        .wait()
        .unwrap_err();
    match &error {
        Error::Retried { attempts } => {
            assert_eq!(attempts.len(), 3);
            assert!(attempts.iter().all(|e| matches!(e, Error::Connect { .. })));
            // Its message names the earlier attempts with their causes;
            // the last is its source.
            let text = chain_text(&error);
            assert!(
                text.starts_with("3 attempts failed (earlier: 1) connect to "),
                "{text}"
            );
            assert!(text.contains("; 2) connect to "), "{text}");
            let last = std::error::Error::source(&error).expect("the last attempt");
            assert!(
                matches!(last.downcast_ref::<Error>(), Some(Error::Connect { .. })),
                "{last:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    client.close();
}

/// A file's body (`Upload::from_file`) is read again from where it began
/// for each attempt: a PUT of one reset on its first connection is retried
/// with the body whole, as one in memory is — where a body from any other
/// `Read` is sent once.
#[test]
fn a_files_body_goes_again_with_a_retry() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let body: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
    let (_dir, path) = support::real::temp_file("retry-file", &body);
    let server = resets_first();
    let policy = retry::Policy::attempts(2)
        .backoff(Duration::ZERO, Duration::ZERO)
        .jitter(false);
    let file = std::fs::File::open(&path).unwrap();
    let response = client
        .put(server.url("/"))
        .body(tickless::Upload::from_file(file).unwrap())
        .retry(policy)
        .send()
        .wait();
    assert_eq!(response.unwrap().text().wait().unwrap(), "answered PUT");
    assert_eq!(server.connections_accepted(), 2);
    assert_eq!(retries_seen(&recorder).len(), 1);
    let answered = server.requests().pop().unwrap();
    assert!(answered.body == body, "{} bytes", answered.body.len());
    client.close();
}

/// A fresh connection the server closes (a FIN, no reset) before any
/// response byte: a close before the head, retried for a GET as a reset
/// is — not a response that broke the protocol.
#[test]
fn a_close_before_the_head_is_retried() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::SendThenClose(Vec::new()),
        _ => Behaviour::respond(|request| ok(&format!("answered {}", request.method))),
    }));
    let policy = retry::Policy::attempts(2)
        .backoff(Duration::ZERO, Duration::ZERO)
        .jitter(false);
    let response = client
        .get(server.url("/"))
        .retry(policy)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "answered GET");
    assert_eq!(server.connections_accepted(), 2);
    assert_eq!(retries_seen(&recorder).len(), 1);
    client.close();
}

#[test]
fn the_budget_stops_retries_once_spent_and_recovers() {
    let clock = ManualClock::new();
    let (client, _recorder) = client_on_with(&clock, false, |builder| {
        builder
            .retry_budget(retry::Budget::new(0.0, 1, Duration::from_secs(1)))
            .retry(
                retry::Policy::attempts(2)
                    .backoff(Duration::ZERO, Duration::ZERO)
                    .jitter(false),
            )
    });
    let url = format!("http://{}/", refused_addr());
    let attempts = |client: &Client| match client.get(url.as_str()).send().wait().unwrap_err() {
        Error::Retried { attempts } => attempts.len(),
        Error::Connect { .. } => 1,
        other => panic!("{other:?}"),
    };
    assert_eq!(attempts(&client), 2, "the floor allows one retry a second");
    assert_eq!(attempts(&client), 1, "spent");
    let budget = client.stats().retry_budget;
    assert_eq!((budget.retries, budget.refused_total), (1, 1));
    clock.advance(Duration::from_secs(2));
    assert_eq!(attempts(&client), 2, "recovered with the window");
    client.close();
}

/// A failure the budget has no room to retry is the outcome, and
/// `ResponseFuture::is_done` says so — and the request stays done when
/// room comes after (another request starts, the window slides): the next
/// poll gives that failure, not a retry, and a cancel cancels nothing. The
/// budget had been asked again at each look, and the room another request
/// brought turned the done request into one pending on a retry: a caller
/// that polled once `is_done` said so (with a waker that will not be woken
/// again) was left waiting, and `cancel` said it cancelled a request it had
/// said was over.
#[test]
fn a_failure_the_budget_refused_stays_done_when_room_comes() {
    let clock = ManualClock::new();
    let (client, _recorder) = client_on_with(&clock, false, |builder| {
        builder
            // Half a retry per request, no floor: one request alone has no
            // room, two have room for one retry.
            .retry_budget(retry::Budget::new(0.5, 0, Duration::from_secs(10)))
            .retry(
                retry::Policy::attempts(2)
                    .backoff(Duration::from_millis(1), Duration::from_millis(1))
                    .jitter(false),
            )
    });
    let url = format!("http://{}/", refused_addr());
    let mut refused = client.get(url.as_str()).send();
    assert!(
        eventually(CEILING, || refused.is_done()),
        "not done, though the budget has no room for its retry"
    );
    // Another request that may be retried: room for one retry now.
    let other = client.get(url.as_str()).send();
    assert!(refused.is_done(), "done, then pending on a retry");
    assert!(!refused.cancel(), "the request had ended");
    let polled = poll_once(&mut refused);
    assert!(
        matches!(polled, std::task::Poll::Ready(Err(Error::Connect { .. }))),
        "{polled:?}"
    );
    assert_eq!(client.stats().retry_budget.refused_total, 1);
    drop(other);
    client.close();
}

fn hedges_seen(recorder: &Recorder) -> usize {
    recorder
        .events()
        .iter()
        .filter(|(event, _)| matches!(event, client_kit::Event::Hedge(_)))
        .count()
}

fn a_hedge_starts_at_its_delay_and_the_loser_is_cancelled(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    let server = TestServer::start(Behaviour::silent_first("the copy"));
    let mut future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    assert!(server.wait_for_requests(1, CEILING));
    // The hedge delay is the exchange's nearest timer: on the connection's
    // loop in event-loop mode, on the wheel otherwise.
    let placed = eventually(CEILING, || {
        let stats = client.stats();
        let on_loop = stats.loops[0].armed;
        let on_wheel = stats.wheel.armed - stats.pool_cleaner_armed;
        if event_loop_timeouts {
            (on_loop, on_wheel) == (1, 0)
        } else {
            (on_loop, on_wheel) == (0, 1)
        }
    });
    assert!(placed, "{:?}", client.stats());
    // A sentinel due 1 ms before, armed at the same reading of the clock
    // (which stands still), has rung: this request's delay would have too
    // were it due as early, and the poll after it would send the copy.
    let sentinel = Sentinel::hedged(&client, Duration::from_millis(49));
    clock.advance(Duration::from_millis(49));
    sentinel.rung(&client);
    assert!(poll_once(&mut future).is_pending());
    assert_eq!(
        hedges_seen(&recorder),
        1,
        "hedged early (the sentinel's alone)"
    );
    assert_eq!(server.connections_accepted(), 1, "hedged early");
    clock.advance(Duration::from_millis(1));
    let response = poll_until_ready(&mut future, || "no copy at its delay".into());
    assert_eq!(response.text().wait().unwrap(), "the copy");
    // This request's copy, and the sentinel's.
    assert_eq!(hedges_seen(&recorder), 1 + 1);
    // The first attempt lost: its connection is closed, nothing is armed.
    assert!(eventually(CEILING, || server.connections_open() == 1));
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    assert_eq!(client.stats().retry_budget.hedges_total, 1 + 1);
    client.close();
}

#[test]
fn a_hedge_starts_at_its_delay_and_the_loser_is_cancelled_on_the_wheel() {
    a_hedge_starts_at_its_delay_and_the_loser_is_cancelled(false);
}

#[test]
fn a_hedge_starts_at_its_delay_and_the_loser_is_cancelled_on_the_loop() {
    a_hedge_starts_at_its_delay_and_the_loser_is_cancelled(true);
}

/// The request deadline is the request's, not an attempt's: every copy in
/// flight shares it. When it passes, the request fails with
/// `Error::RequestTimeout` alone, as it does unhedged, and every attempt
/// ends with it — not with an `Error::Retried` that lists the one deadline
/// once per attempt in flight (it did: the first attempt's timeout handed
/// the request to the copy, whose timeout, the same instant, came next;
/// and a cancel then took it for a failure a copy would follow, and ended
/// the request with `Error::Cancelled`).
fn a_hedged_request_past_its_deadline_is_a_request_timeout(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let mut future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    assert!(server.wait_for_requests(1, CEILING));
    clock.advance(Duration::from_millis(50));
    poll_until(&mut future, || server.requests().len() == 2);
    assert_eq!(hedges_seen(&recorder), 1);
    clock.advance(Duration::from_secs(10));
    // Ended by its deadline: done, and a cancel now cancels nothing.
    assert!(eventually(CEILING, || future.is_done()));
    assert!(!future.cancel(), "mode {event_loop_timeouts}: cancelled");
    let started = std::time::Instant::now();
    let error = loop {
        match poll_once(&mut future) {
            std::task::Poll::Ready(outcome) => break outcome.unwrap_err(),
            std::task::Poll::Pending => {
                assert!(started.elapsed() < CEILING, "no outcome at the deadline");
                thread::sleep(Duration::from_millis(1));
            }
        }
    };
    assert!(
        matches!(&error, Error::RequestTimeout(t) if t.duration == Duration::from_secs(10)),
        "mode {event_loop_timeouts}: {error:?}"
    );
    // Both attempts ended: their connections closed, nothing armed.
    assert!(eventually(CEILING, || server.connections_open() == 0));
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    client.close();
}

#[test]
fn a_hedged_request_past_its_deadline_is_a_request_timeout_on_the_wheel() {
    a_hedged_request_past_its_deadline_is_a_request_timeout(false);
}

#[test]
fn a_hedged_request_past_its_deadline_is_a_request_timeout_on_the_loop() {
    a_hedged_request_past_its_deadline_is_a_request_timeout(true);
}

/// The deadline ends the attempts still in flight, not an answer that
/// came in time: a copy answered whole before the deadline, polled only
/// after it, is the response — the first attempt, ended by the deadline
/// meanwhile, loses to it as it would have before.
fn a_copy_answered_before_the_deadline_wins_when_polled_after_it(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    // The first connection never answers; the copy's answers once told.
    let (answer, on_answer) = std::sync::mpsc::channel::<()>();
    let on_answer = Arc::new(std::sync::Mutex::new(on_answer));
    let server = TestServer::start(Behaviour::per_connection(move |index| {
        let on_answer = on_answer.clone();
        match index {
            0 => Behaviour::NeverAnswer,
            _ => Behaviour::respond(move |_| {
                let _ = on_answer.lock().unwrap().recv_timeout(CEILING);
                ok("the copy")
            }),
        }
    }));
    let mut future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    assert!(server.wait_for_requests(1, CEILING));
    clock.advance(Duration::from_millis(50));
    poll_until(&mut future, || server.requests().len() == 2);
    // The copy's answer comes; nobody polls until the deadline has passed.
    answer.send(()).unwrap();
    assert!(eventually(CEILING, || future.is_done()));
    // Whole before the deadline: its head alone (is_done) may have been
    // read with its body still to come, which the deadline then ends.
    assert!(
        eventually(CEILING, || recorder.completions() == 1),
        "{:#?}",
        recorder.events()
    );
    clock.advance(Duration::from_secs(10));
    assert!(eventually(CEILING, || server.connections_open() <= 1));
    let response = poll_until_ready(&mut future, || "no outcome".into());
    assert_eq!(
        response.text().wait().unwrap(),
        "the copy",
        "mode {event_loop_timeouts}"
    );
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    client.close();
}

#[test]
fn a_copy_answered_before_the_deadline_wins_when_polled_after_it_on_the_wheel() {
    a_copy_answered_before_the_deadline_wins_when_polled_after_it(false);
}

#[test]
fn a_copy_answered_before_the_deadline_wins_when_polled_after_it_on_the_loop() {
    a_copy_answered_before_the_deadline_wins_when_polled_after_it(true);
}

#[test]
fn only_idempotent_requests_with_a_body_in_memory_are_hedged() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let policy = hedge::Policy::after(Duration::from_millis(10));
    let mut post = client
        .post(server.url("/"))
        .body("x")
        .hedge(policy.clone())
        .send();
    let mut streamed = client
        .put(server.url("/"))
        .body(tickless::Upload::from_reader(
            std::io::Cursor::new(b"y"),
            Some(1),
        ))
        .hedge(policy)
        .send();
    assert!(server.wait_for_requests(2, CEILING));
    // A sentinel due when theirs would be and later, armed at the same
    // reading of the clock (which stands still), has rung: their delays
    // would have too, had they been armed, and a poll would send a copy.
    let sentinel = Sentinel::hedged(&client, Duration::from_millis(20));
    clock.advance(Duration::from_millis(20));
    sentinel.rung(&client);
    assert!(poll_once(&mut post).is_pending());
    assert!(poll_once(&mut streamed).is_pending());
    assert_eq!(server.connections_accepted(), 2);
    assert_eq!(hedges_seen(&recorder), 1, "hedged (the sentinel's alone)");
    drop((post, streamed));
    client.close();
}

/// An attempt that answers before its hedge delay is the answer, and no
/// copy goes. The delay is generous (half the request timeout, so that it
/// is armed) and on the manual clock, which stands still: no machine,
/// however loaded, reaches it. What can fail is the delay left armed once
/// the answer is in (`armed_timers`); the counts after it (no hedge, one
/// connection, one request) hold by the clock standing still and say what
/// the answer came from — a copy would go on a connection of its own,
/// answered differently.
#[test]
fn a_hedged_request_that_answers_in_time_sends_no_copy() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, true);
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::respond(|_| ok("the first attempt")),
        _ => Behaviour::respond(|_| ok("a copy")),
    }));
    let response = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_secs(5)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "the first attempt");
    // The head came in time: the hedge delay is no longer armed (a copy
    // goes only in a poll of the request, which `wait` has consumed, so a
    // delay left armed would show here and nowhere else).
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    assert_eq!(hedges_seen(&recorder), 0, "hedged");
    assert_eq!(client.stats().retry_budget.hedges_total, 0, "hedged");
    client.close();
    // The server saw the one request, on the one connection.
    assert_eq!(server.connections_accepted(), 1, "a copy's connection");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].connection_index, 0, "{requests:?}");
}

#[test]
fn a_head_come_before_the_hedge_delay_sends_no_copy_however_late_the_caller_looks() {
    for event_loop_timeouts in [false, true] {
        let clock = ManualClock::new();
        let (client, recorder) = client_on(&clock, event_loop_timeouts);
        // A head, and a body still coming.
        let server = TestServer::start(Behaviour::SendThenStall(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst".to_vec(),
        ));
        let future = client
            .get(server.url("/"))
            .hedge(hedge::Policy::after(Duration::from_millis(50)))
            .send();
        assert!(eventually(CEILING, || future.is_done()), "no head");
        // The caller is busy elsewhere past the delay: it rings meanwhile,
        // as a sentinel due later, armed at the same reading of the clock
        // (which stands still), shows by ringing.
        let sentinel = Sentinel::hedged(&client, Duration::from_millis(60));
        clock.advance(Duration::from_millis(60));
        sentinel.rung(&client);
        // A copy would be sent, and told, in this wait.
        let response = future.wait().unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            hedges_seen(&recorder),
            1,
            "mode {event_loop_timeouts}: hedged (the sentinel's alone)"
        );
        // The sentinel's copy alone.
        assert_eq!(client.stats().retry_budget.hedges_total, 1);
        assert_eq!(server.connections_accepted(), 1);
        drop(response);
        client.close();
    }
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountingWake(AtomicUsize);

impl CountingWake {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl std::task::Wake for CountingWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `future` once with a waker that does nothing.
fn poll_once(
    future: &mut tickless::ResponseFuture,
) -> std::task::Poll<Result<tickless::Response, Error>> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    std::pin::Pin::new(future).poll(&mut cx)
}

/// Polls `future` (with [`poll_once`]) until it is ready, for at most
/// [`CEILING`]; past that the test fails with `why()`.
fn poll_until_ready(
    future: &mut tickless::ResponseFuture,
    why: impl Fn() -> String,
) -> tickless::Response {
    let started = std::time::Instant::now();
    loop {
        match poll_once(future) {
            std::task::Poll::Ready(outcome) => return outcome.unwrap(),
            std::task::Poll::Pending => {
                assert!(started.elapsed() < CEILING, "{}", why());
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

#[test]
fn a_backoff_ends_at_a_cancel_or_a_close_with_nothing_armed() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, true);
    let server = TestServer::respond(|_| response(503, &[], b"busy"));
    let policy = retry::Policy::attempts(3)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::from_secs(1), Duration::from_secs(1))
        .jitter(false);
    // Cancelled while it waits for its backoff.
    let mut future = client.get(server.url("/")).retry(policy.clone()).send();
    assert!(eventually(CEILING, || {
        poll_once(&mut future).is_pending() && retries_seen(&recorder).len() == 1
    }));
    // The backoff is armed on the loop of the 503's connection.
    assert!(eventually(CEILING, || client.stats().loops[0].armed == 1));
    assert!(future.cancel());
    assert!(matches!(
        poll_once(&mut future),
        std::task::Poll::Ready(Err(Error::Cancelled))
    ));
    drop(future);
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    assert_eq!(server.requests().len(), 1);

    // Waited on by a thread when the client closes: the wait ends.
    let future = client.get(server.url("/")).retry(policy).send();
    let waiter = thread::spawn(move || future.wait());
    assert!(eventually(CEILING, || retries_seen(&recorder).len() == 2));
    client.close();
    let outcome = waiter.join().unwrap();
    assert!(outcome.is_err(), "{outcome:?}");
    assert_eq!(server.requests().len(), 2, "no retry after the close");
}

/// The caller cancels while a retry waits for its backoff, and keeps the
/// future without polling it: the cancel itself disarms the backoff. Left
/// armed, its entry would stay on the wheel or the loop until the next
/// poll, the future's drop or its deadline (a server's `Retry-After` may
/// be long), which this clock never reaches.
fn a_cancel_during_a_backoff_disarms_it_at_once(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    let server = TestServer::respond(|_| response(503, &[], b"busy"));
    let policy = retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::from_secs(1), Duration::from_secs(1))
        .jitter(false);
    let mut future = client.get(server.url("/")).retry(policy).send();
    assert!(eventually(CEILING, || {
        poll_once(&mut future).is_pending() && retries_seen(&recorder).len() == 1
    }));
    // The 503's exchange has ended: the backoff is all that is armed.
    assert!(
        eventually(CEILING, || client.stats().armed_timers() == 1),
        "{:?}",
        client.stats()
    );
    assert!(future.cancel());
    assert_eq!(
        client.stats().armed_timers(),
        0,
        "the cancelled backoff is still armed"
    );
    let polled = poll_once(&mut future);
    assert!(
        matches!(polled, std::task::Poll::Ready(Err(Error::Cancelled))),
        "{polled:?}"
    );
    assert_eq!(server.requests().len(), 1);
    client.close();
}

#[test]
fn a_cancel_during_a_backoff_disarms_it_at_once_on_the_wheel() {
    a_cancel_during_a_backoff_disarms_it_at_once(false);
}

#[test]
fn a_cancel_during_a_backoff_disarms_it_at_once_on_the_loop() {
    a_cancel_during_a_backoff_disarms_it_at_once(true);
}

/// The 503 a backoff waits to retry keeps its connection, its large body
/// unread, until the retry is sent (see
/// `a_batch_retried_for_its_503s_is_answered`); a cancel during that
/// backoff sends no retry, and lets the connection go at once — not when
/// the caller drops the future it keeps.
#[test]
fn a_cancel_during_a_backoff_lets_the_retried_answers_connection_go() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, true);
    let server = TestServer::respond(|_| response(503, &[], &vec![b'x'; 4 << 20]));
    let policy = retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::from_secs(1), Duration::from_secs(1))
        .jitter(false);
    let mut future = client.get(server.url("/")).retry(policy).send();
    assert!(eventually(CEILING, || {
        poll_once(&mut future).is_pending() && retries_seen(&recorder).len() == 1
    }));
    assert_eq!(server.connections_open(), 1, "kept for the retry");
    assert!(future.cancel());
    assert!(
        server.wait_for_open(0, CEILING),
        "the 503's connection is held after the cancel"
    );
    let polled = poll_once(&mut future);
    assert!(
        matches!(polled, std::task::Poll::Ready(Err(Error::Cancelled))),
        "{polled:?}"
    );
    assert_eq!(server.requests().len(), 1);
    drop(future);
    client.close();
}

/// A close ends a retried request as a cancel does: with
/// `Error::ClientClosed` alone — while it waits for its backoff (no
/// attempt is in flight, and none is sent), and while its retry is in
/// flight — not with an `Error::Retried` that lists the close as one more
/// failed attempt: a caller that tells its own shutdown apart by
/// `ClientClosed` would take it for a failure of the request.
fn a_close_ends_a_retried_request_with_client_closed(event_loop_timeouts: bool) {
    let statuses = [http::StatusCode::SERVICE_UNAVAILABLE];
    let policy = retry::Policy::attempts(3)
        .on_status(statuses)
        .backoff(Duration::from_secs(1), Duration::from_secs(1))
        .jitter(false);
    for retry_in_flight in [false, true] {
        let clock = ManualClock::new();
        let (client, recorder) = client_on(&clock, event_loop_timeouts);
        // A 503 first; the retry is never answered.
        let server = TestServer::start(Behaviour::per_connection(|index| match index {
            0 => Behaviour::respond_then_close(|_| response(503, &[], b"busy")),
            _ => Behaviour::NeverAnswer,
        }));
        let future = client.get(server.url("/")).retry(policy.clone()).send();
        let waiter = thread::spawn(move || future.wait());
        assert!(eventually(CEILING, || retries_seen(&recorder).len() == 1));
        if retry_in_flight {
            clock.advance(Duration::from_secs(1));
            assert!(server.wait_for_requests(2, CEILING));
        }
        client.close();
        let outcome = waiter.join().unwrap();
        assert!(
            matches!(outcome, Err(Error::ClientClosed)),
            "mode {event_loop_timeouts}, retry in flight {retry_in_flight}: {outcome:?}"
        );
        let sent = if retry_in_flight { 2 } else { 1 };
        assert_eq!(server.requests().len(), sent, "no retry after the close");
    }
}

#[test]
fn a_close_ends_a_retried_request_with_client_closed_on_the_wheel() {
    a_close_ends_a_retried_request_with_client_closed(false);
}

#[test]
fn a_close_ends_a_retried_request_with_client_closed_on_the_loop() {
    a_close_ends_a_retried_request_with_client_closed(true);
}

#[test]
fn a_copy_goes_on_another_loop_than_the_attempt_it_backs_up() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on_with(&clock, false, |builder| {
        builder.event_loops(2).keep_alive(false)
    });
    let server = TestServer::start(Behaviour::per_connection(|index| match index % 2 {
        0 => Behaviour::NeverAnswer,
        _ => Behaviour::respond(|_| ok("copy")),
    }));
    let other = TestServer::respond(|_| ok("other"));
    // Several in turn, so the round robin starts on either loop.
    for round in 0..4 {
        recorder.clear();
        let future = client
            .get(server.url("/"))
            .hedge(hedge::Policy::after(Duration::from_millis(5)))
            .send();
        let waiter = thread::spawn(move || future.wait());
        assert!(server.wait_for_requests(2 * round + 1, CEILING));
        // Another connection in between: the round robin alone would now
        // put the copy on the first attempt's loop.
        client.get(other.url("/")).send().wait().unwrap();
        clock.advance(Duration::from_millis(5));
        waiter.join().unwrap().unwrap();
        let loops: Vec<usize> = recorder
            .events()
            .into_iter()
            .filter_map(|(event, _)| match event {
                client_kit::Event::ConnectSuccess(info) if info.remote == server.addr() => {
                    Some(info.loop_index)
                }
                _ => None,
            })
            .collect();
        assert_eq!(loops.len(), 2, "round {round}: {loops:?}");
        assert_ne!(
            loops[0], loops[1],
            "round {round}: the copy shares its loop"
        );
    }
    client.close();
}

/// A request hedged after 50 ms, polled once, whose first attempt's
/// server never answers (a copy's does, with "the copy"): its delay armed
/// on `clock`, the clock not yet advanced.
struct SilentFirst {
    clock: ManualClock,
    client: Client,
    recorder: Arc<Recorder>,
    server: TestServer,
    future: tickless::ResponseFuture,
}

fn silent_first_hedged() -> SilentFirst {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let server = TestServer::start(Behaviour::silent_first("the copy"));
    let mut future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    assert!(poll_once(&mut future).is_pending());
    assert!(server.wait_for_requests(1, CEILING));
    assert!(eventually(CEILING, || client.stats().armed_timers() > 0));
    SilentFirst {
        clock,
        client,
        recorder,
        server,
        future,
    }
}

/// The hedge delay rings while nobody polls the future, then the caller
/// cancels: the next poll sends no copy, and the outcome is the cancel.
#[test]
fn a_cancel_after_the_hedge_delay_rang_sends_no_copy() {
    let SilentFirst {
        clock,
        client,
        recorder,
        server,
        mut future,
    } = silent_first_hedged();
    // The delay has rung: a sentinel due later, armed at the same reading
    // of the clock (which stands still), has.
    let sentinel = Sentinel::hedged(&client, Duration::from_millis(60));
    clock.advance(Duration::from_millis(60));
    sentinel.rung(&client);
    assert!(future.cancel(), "the attempt in flight is cancelled");
    let polled = poll_once(&mut future);
    assert!(
        matches!(polled, std::task::Poll::Ready(Err(Error::Cancelled))),
        "{polled:?}"
    );
    // A copy goes in a poll, told at once: none went in that one, the last.
    assert_eq!(
        hedges_seen(&recorder),
        1,
        "a copy went after the cancel (the sentinel's alone)"
    );
    assert_eq!(
        server.connections_accepted(),
        1,
        "a copy went after the cancel"
    );
    client.close();
}

/// An attempt fails in a way the policy retries, and the caller cancels
/// before polling again: the cancel takes (the request had not ended), no
/// retry goes, and the outcome is the cancel.
#[test]
fn a_cancel_after_a_retryable_failure_stops_the_retry() {
    let clock = ManualClock::new();
    let (client, _) = client_on(&clock, false);
    // The reset after the first poll: one that came before it had that
    // poll arm the retry, and count it.
    let (server, reset) = resets_first_when_told();
    let policy = retry::Policy::attempts(3)
        .backoff(Duration::from_millis(10), Duration::from_millis(10))
        .jitter(false);
    let mut future = client.get(server.url("/")).retry(policy).send();
    assert!(poll_once(&mut future).is_pending());
    reset.send(()).unwrap();
    // The reset has reached the client and failed the attempt.
    assert!(eventually(CEILING, || client.stats().open_connections == 0));
    thread::sleep(QUIET);
    assert!(
        !future.is_done(),
        "a failure that is retried is no outcome yet"
    );
    assert!(future.cancel(), "the retry that would follow is cancelled");
    let polled = poll_once(&mut future);
    assert!(
        matches!(polled, std::task::Poll::Ready(Err(Error::Cancelled))),
        "{polled:?}"
    );
    // A retry is scheduled in a poll, counted at once: none was in that
    // one, the last — and the future, cancelled, is polled no more. Nor is
    // anything left armed that would send one.
    assert_eq!(client.stats().retry_budget.retries_total, 0);
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
    // Past the backoff a retry would have waited for.
    clock.advance(Duration::from_millis(20));
    thread::sleep(QUIET);
    assert_eq!(server.connections_accepted(), 1, "retried after the cancel");
    client.close();
}

/// `cancel` says whether *this call* cancelled the request: once one has
/// ended a failure the policy would retry, another — after it, or at
/// once on another thread (the future is `Sync`) — cancelled nothing and
/// says so, as a second cancel of a request in flight or in its backoff
/// does. (It said `true` again: the failure, untaken, still looked like
/// one a poll would retry.)
#[test]
fn a_second_cancel_after_a_retryable_failure_cancels_nothing() {
    let clock = ManualClock::new();
    let (client, _) = client_on(&clock, false);
    // The reset after the first poll, as in the test above: one before it
    // had that poll take the failure and arm the retry's backoff, and the
    // cancels below would be of the backoff, not of the failure untaken.
    let (server, reset) = resets_first_when_told();
    let policy = retry::Policy::attempts(3)
        .backoff(Duration::from_millis(10), Duration::from_millis(10))
        .jitter(false);
    let mut future = client.get(server.url("/")).retry(policy).send();
    assert!(poll_once(&mut future).is_pending());
    reset.send(()).unwrap();
    assert!(eventually(CEILING, || client.stats().open_connections == 0));
    thread::sleep(QUIET);
    assert!(!future.is_done());
    assert!(future.cancel(), "the retry that would follow is cancelled");
    assert!(!future.cancel(), "a second cancel cancelled nothing");
    let counted = std::sync::atomic::AtomicUsize::new(0);
    thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                if future.cancel() {
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(
        counted.into_inner(),
        0,
        "a cancel on another thread cancelled nothing"
    );
    let polled = poll_once(&mut future);
    assert!(
        matches!(polled, std::task::Poll::Ready(Err(Error::Cancelled))),
        "{polled:?}"
    );
    // Past the backoff a retry would have waited for.
    clock.advance(Duration::from_millis(20));
    thread::sleep(QUIET);
    assert_eq!(server.connections_accepted(), 1, "retried after the cancel");
    client.close();
}

/// A server's `Retry-After` beyond what a clock can hold (and a hedge
/// delay or backoff of `Duration::MAX`) is no retry, no copy — and no
/// panic: the answer, or the attempt's own outcome, is the outcome.
#[test]
fn delays_too_long_for_a_clock_are_no_retry_and_no_copy() {
    let client = Client::builder().event_loops(1).build().unwrap();
    let busy =
        TestServer::respond(|_| response(503, &[("Retry-After", "18446744073709551615")], b"busy"));
    let response = client
        .get(busy.url("/"))
        .retry(retry::Policy::attempts(2).on_status([http::StatusCode::SERVICE_UNAVAILABLE]))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(busy.connections_accepted(), 1);

    let fine = TestServer::respond(|_| ok("fine"));
    let hedged = client
        .get(fine.url("/"))
        .hedge(hedge::Policy::after(Duration::MAX))
        .send()
        .wait()
        .unwrap();
    assert_eq!(hedged.text().wait().unwrap(), "fine");
    let failing = resets_first();
    let retried = client
        .get(failing.url("/"))
        .retry(retry::Policy::attempts(2).backoff(Duration::MAX, Duration::MAX))
        .send()
        .wait();
    assert!(retried.is_err(), "a backoff of Duration::MAX is no retry");
    assert_eq!(failing.connections_accepted(), 1);
    client.close();
}

/// Two copies allowed: the first copy fails while the first attempt is
/// still waiting, and the second copy still goes at its delay — the delay
/// was armed on the copy that failed — and answers.
#[test]
fn a_copy_that_fails_does_not_take_the_next_copys_delay_with_it() {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::NeverAnswer,
        1 => Behaviour::Reset,
        _ => Behaviour::respond(|_| ok("the second copy")),
    }));
    let future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)).max_copies(2))
        .send();
    let (sent, outcome) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = sent.send(future.wait());
    });
    assert!(server.wait_for_requests(1, CEILING));
    assert!(eventually(CEILING, || client.stats().armed_timers() > 0));
    clock.advance(Duration::from_millis(50));
    // The first copy goes, and is reset.
    assert!(eventually(CEILING, || server.connections_accepted() == 2));
    assert!(eventually(CEILING, || hedges_seen(&recorder) == 1));
    // The delay is armed again once the waiter has seen the copy fail,
    // which a loaded machine may make late: the clock moves on a delay at
    // a time (a second of it in all, far from the 10 s request timeout)
    // until the second copy answers. Without it the clock's moves end
    // nothing, and the request still waits.
    let mut response = None;
    for _ in 0..20 {
        clock.advance(Duration::from_millis(50));
        if let Ok(outcome) = outcome.recv_timeout(QUIET) {
            response = Some(outcome.unwrap());
            break;
        }
    }
    let response = response.expect("no second copy: the request still waits");
    assert_eq!(response.text().wait().unwrap(), "the second copy");
    assert_eq!(hedges_seen(&recorder), 2);
    client.close();
}

/// Two copies allowed. The first copy goes at 50 ms, its delay to end at
/// 100 ms; it fails at 70 ms, and a poll sees it while the first attempt
/// still waits. The delay moves to the first attempt and still ends at
/// 100 ms, when the second copy goes: armed afresh from the failure, it
/// would end at 120 ms, the copy put off by the time the failed one ran.
fn a_copy_that_fails_before_its_delay_keeps_the_next_copys_time(event_loop_timeouts: bool) {
    let mut held = first_copy_held(event_loop_timeouts);
    // 70 ms: it fails, and a poll sees it.
    held.clock.advance(Duration::from_millis(20));
    held.fail_copy.send(()).unwrap();
    assert!(eventually(CEILING, || failures_seen(&held.recorder) == 1));
    assert!(poll_once(&mut held.future).is_pending());
    assert_eq!(hedges_seen(&held.recorder), 1);
    // 100 ms: the second copy goes, and answers.
    held.clock.advance(Duration::from_millis(30));
    held.second_copy_answers("no second copy at 100 ms");
}

/// Two copies allowed, the first attempt never answered: the request sent
/// with a delay of 50 ms, the clock moved to 50 ms and the first copy sent
/// — held by the server until `fail_copy` says, then closed before any
/// answer; the second copy would be answered.
struct FirstCopyHeld {
    clock: ManualClock,
    client: tickless::Client,
    recorder: Arc<Recorder>,
    server: TestServer,
    future: tickless::ResponseFuture,
    fail_copy: std::sync::mpsc::Sender<()>,
}

fn first_copy_held(event_loop_timeouts: bool) -> FirstCopyHeld {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    // Sent by the test (or never, by one that failed before: the wait is
    // bounded so that the server's drop ends).
    let (fail_copy, failed) = std::sync::mpsc::channel::<()>();
    let failed = Arc::new(std::sync::Mutex::new(failed));
    let server = TestServer::start(Behaviour::per_connection(move |index| match index {
        0 => Behaviour::NeverAnswer,
        1 => {
            let failed = failed.clone();
            Behaviour::custom(move |stream, _| {
                let _ = failed.lock().unwrap().recv_timeout(CEILING);
                drop(stream);
            })
        }
        _ => Behaviour::respond(|_| ok("the second copy")),
    }));
    let mut future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)).max_copies(2))
        .send();
    assert!(poll_once(&mut future).is_pending());
    assert!(eventually(CEILING, || server.connections_accepted() == 1));
    assert!(eventually(CEILING, || client.stats().armed_timers() > 0));
    // 50 ms: the first copy.
    clock.advance(Duration::from_millis(50));
    poll_until(&mut future, || hedges_seen(&recorder) == 1);
    assert!(eventually(CEILING, || server.connections_accepted() == 2));
    FirstCopyHeld {
        clock,
        client,
        recorder,
        server,
        future,
        fail_copy,
    }
}

impl FirstCopyHeld {
    /// Polls until the second copy's answer is the response (or fails the
    /// test with `why`), on a third connection.
    fn second_copy_answers(mut self, why: &str) {
        let response = poll_until_ready(&mut self.future, || {
            format!("{why} (copies sent: {})", hedges_seen(&self.recorder))
        });
        assert_eq!(response.text().wait().unwrap(), "the second copy");
        assert_eq!(hedges_seen(&self.recorder), 2);
        assert_eq!(self.server.connections_accepted(), 3);
        self.client.close();
    }
}

#[test]
fn a_copy_that_fails_before_its_delay_keeps_the_next_copys_time_on_the_wheel() {
    a_copy_that_fails_before_its_delay_keeps_the_next_copys_time(false);
}

#[test]
fn a_copy_that_fails_before_its_delay_keeps_the_next_copys_time_on_the_loop() {
    a_copy_that_fails_before_its_delay_keeps_the_next_copys_time(true);
}

/// Polls `future` until `done` holds after a poll, or fails the test.
fn poll_until(future: &mut tickless::ResponseFuture, mut done: impl FnMut() -> bool) {
    assert!(
        eventually(CEILING, || poll_once(future).is_pending() && done()),
        "never came"
    );
}

/// The failures the client was told of so far (one per attempt ended).
fn failures_seen(recorder: &Recorder) -> usize {
    recorder
        .events()
        .iter()
        .filter(|(event, _)| matches!(event, client_kit::Event::Failed(..)))
        .count()
}

/// Three copies allowed. The second copy fails while the first attempt
/// and the first copy wait: the next copy's delay, which the second copy
/// held, is armed again on the first attempt. Then the first attempt
/// fails, and the first copy is waited for in its place: the delay goes
/// with it, still counted from the second copy's send (the first
/// attempt's end sends nothing and starts nothing), and the third copy
/// goes when it ends. Left on the first attempt, whose timers ended with
/// it, the delay would never ring: no third copy, and the request would
/// wait on the first copy alone.
fn a_delay_armed_on_an_attempt_that_fails_moves_to_the_copy_that_takes_over(
    event_loop_timeouts: bool,
) {
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, event_loop_timeouts);
    // Sent by the test (or never, by one that failed before: the wait is
    // bounded so that the server's drop ends).
    let (fail_first, failed) = std::sync::mpsc::channel::<()>();
    let failed = Arc::new(std::sync::Mutex::new(failed));
    let server = TestServer::start(Behaviour::per_connection(move |index| match index {
        // The first attempt: held until the test says, then closed
        // before any answer.
        0 => {
            let failed = failed.clone();
            Behaviour::custom(move |stream, _| {
                let _ = failed.lock().unwrap().recv_timeout(CEILING);
                drop(stream);
            })
        }
        1 => Behaviour::NeverAnswer,
        2 => Behaviour::Reset,
        _ => Behaviour::respond(|_| ok("the third copy")),
    }));
    let mut future = client
        .get(server.url("/"))
        .hedge(hedge::Policy::after(Duration::from_millis(50)).max_copies(3))
        .send();
    assert!(poll_once(&mut future).is_pending());
    assert!(eventually(CEILING, || server.connections_accepted() == 1));
    assert!(eventually(CEILING, || client.stats().armed_timers() > 0));
    // 50 ms: the first copy, which never answers.
    clock.advance(Duration::from_millis(50));
    poll_until(&mut future, || hedges_seen(&recorder) == 1);
    // Its request is the first the server reads (the first attempt's is
    // held unread).
    assert!(server.wait_for_requests(1, CEILING));
    assert_eq!(server.connections_accepted(), 2);
    // 100 ms: the second copy, reset; a poll sees it fail, and moves the
    // next delay to the first attempt, still to end at 150 ms.
    clock.advance(Duration::from_millis(50));
    poll_until(&mut future, || hedges_seen(&recorder) == 2);
    // Due at 149 ms: armed now, at the clock's reading when the next
    // delay was armed (the second copy's send, 100 ms).
    let sentinel = Sentinel::hedged(&client, Duration::from_millis(49));
    assert!(eventually(CEILING, || failures_seen(&recorder) == 1));
    thread::sleep(QUIET);
    assert!(poll_once(&mut future).is_pending());
    // 120 ms: the first attempt fails, and a poll sees it.
    clock.advance(Duration::from_millis(20));
    fail_first.send(()).unwrap();
    assert!(eventually(CEILING, || failures_seen(&recorder) == 2));
    thread::sleep(QUIET);
    assert!(poll_once(&mut future).is_pending());
    // 149 ms: not yet. A sentinel due then, armed at 100 ms as the delay
    // was, has rung: the delay would have too were it due as early, and
    // this poll would send the third copy.
    clock.advance(Duration::from_millis(29));
    sentinel.rung(&client);
    assert!(poll_once(&mut future).is_pending());
    assert_eq!(
        hedges_seen(&recorder),
        2 + 1,
        "a third copy before its delay (the sentinel's besides)"
    );
    // 150 ms: the third copy goes, and answers.
    clock.advance(Duration::from_millis(1));
    let response = poll_until_ready(&mut future, || {
        format!(
            "no third copy at 150 ms (copies sent: {})",
            hedges_seen(&recorder)
        )
    });
    assert_eq!(response.text().wait().unwrap(), "the third copy");
    // Three copies, and the sentinel's.
    assert_eq!(hedges_seen(&recorder), 3 + 1);
    assert_eq!(server.connections_accepted(), 4);
    client.close();
}

#[test]
fn a_delay_armed_on_an_attempt_that_fails_moves_to_the_copy_that_takes_over_on_the_wheel() {
    a_delay_armed_on_an_attempt_that_fails_moves_to_the_copy_that_takes_over(false);
}

#[test]
fn a_delay_armed_on_an_attempt_that_fails_moves_to_the_copy_that_takes_over_on_the_loop() {
    a_delay_armed_on_an_attempt_that_fails_moves_to_the_copy_that_takes_over(true);
}

/// Two copies allowed. The first copy's delay rings — the second copy is
/// due — and the first copy fails before the waiter polls again: the poll
/// that sees the copy fail sends the second copy then, the clock still at
/// its delay. Armed again afresh on the first attempt, the delay that had
/// rung would hold the due copy back a whole delay more (and here, the
/// clock standing still, for ever).
#[test]
fn a_copy_that_fails_after_its_delay_rang_lets_the_next_copy_go_at_once() {
    // Delays on the wheel, which a manual clock fires on the thread that
    // advances it: rung when `advance` returns.
    let held = first_copy_held(false);
    // 100 ms: its delay rings, and it fails before the next poll.
    held.clock.advance(Duration::from_millis(50));
    held.fail_copy.send(()).unwrap();
    assert!(eventually(CEILING, || failures_seen(&held.recorder) == 1));
    assert_eq!(hedges_seen(&held.recorder), 1);
    // The clock stays at 100 ms: the second copy goes, and answers.
    held.second_copy_answers("the due copy did not go");
}

// ------------------------------------------------- HTTP/2 failures ---

const REFUSED_STREAM: u32 = 0x7;
const INTERNAL_ERROR: u32 = 0x2;

/// A prior-knowledge HTTP/2 server (frames by hand) that resets the n-th
/// stream it sees, over all its connections, with `resets[n]`, and
/// answers `200` from there on; and the count of streams it saw.
fn h2_server_resetting(resets: &'static [u32]) -> (RawH2Server, Arc<AtomicUsize>) {
    let streams = Arc::new(AtomicUsize::new(0));
    let seen = streams.clone();
    let server = RawH2Server::start(move |mut conn| loop {
        let ids = conn.read_requests(1);
        let Some(&id) = ids.first() else { return };
        match resets.get(seen.fetch_add(1, Ordering::SeqCst)) {
            Some(&code) => conn.send(&rst_stream(id, code)),
            None => conn.send(&ok_headers(id)),
        }
    });
    (server, streams)
}

fn h2c() -> (Client, Arc<Recorder>) {
    let recorder = Recorder::new();
    let client = h2c_builder(1, CEILING)
        .listener(recorder.clone())
        .build()
        .unwrap();
    (client, recorder)
}

fn no_backoff(attempts: u32) -> retry::Policy {
    retry::Policy::attempts(attempts)
        .backoff(Duration::ZERO, Duration::ZERO)
        .jitter(false)
}

/// A stream refused with `REFUSED_STREAM` was not processed: the client
/// sends it again by itself once, so it takes two refusals to fail an
/// attempt — which a policy then retries, a POST too, as one that never
/// connected. Without a policy it fails saying it was not processed.
#[test]
fn an_http2_post_refused_on_both_of_its_sends_is_retried_whatever_its_method() {
    let (server, streams) = h2_server_resetting(&[REFUSED_STREAM, REFUSED_STREAM]);
    let (client, recorder) = h2c();
    let response = client
        .post(server.url("/"))
        .body("x")
        .retry(no_backoff(2))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(streams.load(Ordering::SeqCst), 3);
    assert_eq!(retries_seen(&recorder), [(2, Duration::ZERO)]);
    client.close();

    let (server, streams) = h2_server_resetting(&[REFUSED_STREAM, REFUSED_STREAM]);
    let (client, recorder) = h2c();
    let error = client
        .post(server.url("/"))
        .body("x")
        .send()
        .wait()
        .unwrap_err();
    assert!(error.is_unprocessed(), "{error:?}");
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    assert!(retries_seen(&recorder).is_empty());
    client.close();
}

/// A streamed upload cannot go twice: refused, it is not retried, and its
/// error is the attempt's own, still saying it was not processed (for the
/// caller to send again from a new source).
#[test]
fn a_refused_streamed_http2_upload_is_not_retried_and_says_it_was_not_processed() {
    let (server, streams) = h2_server_resetting(&[REFUSED_STREAM]);
    let (client, recorder) = h2c();
    let error = client
        .post(server.url("/"))
        .body(tickless::Upload::from_reader(
            std::io::Cursor::new(b"streamed".to_vec()),
            None,
        ))
        .retry(no_backoff(3))
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Http2 {
                reason: Http2Reason::REFUSED_STREAM,
                unprocessed: true,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(streams.load(Ordering::SeqCst), 1);
    assert!(retries_seen(&recorder).is_empty());
    client.close();
}

/// An HTTP/2 stream the server reset before answering is the HTTP/1.1
/// connection reset under another name: a GET is retried.
#[test]
fn an_http2_get_reset_before_its_answer_is_retried() {
    let (server, streams) = h2_server_resetting(&[INTERNAL_ERROR]);
    let (client, recorder) = h2c();
    let response = client
        .get(server.url("/"))
        .retry(no_backoff(2))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    let retries = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            client_kit::Event::Retry(_, _, why) => Some(why),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(retries.len(), 1);
    assert!(retries[0].contains("INTERNAL_ERROR"), "{retries:?}");
    client.close();
}

/// A POST whose stream the server reset before answering may have been
/// processed: it goes once — unless the caller says twice is fine.
#[test]
fn an_http2_post_reset_before_its_answer_is_retried_only_with_any_method() {
    let (server, streams) = h2_server_resetting(&[INTERNAL_ERROR]);
    let (client, recorder) = h2c();
    let error = client
        .post(server.url("/"))
        .body("x")
        .retry(no_backoff(3))
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Http2 {
                reason: Http2Reason::INTERNAL_ERROR,
                unprocessed: false,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.is_unprocessed());
    assert_eq!(streams.load(Ordering::SeqCst), 1, "sent once");
    assert!(retries_seen(&recorder).is_empty());
    client.close();

    let (server, streams) = h2_server_resetting(&[INTERNAL_ERROR]);
    let (client, _recorder) = h2c();
    let response = client
        .post(server.url("/"))
        .body("x")
        .retry(no_backoff(3).any_method(true))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    client.close();
}

/// A GET reset before its answer (the server may have processed it),
/// retried, and then refused on both sends of its retry: the request may
/// have been processed, so nothing in its error says it is safe to send
/// again — not the whole, nor the refused attempt's own part of the
/// message, which is what a reader of the log sees last.
#[test]
fn a_retried_request_one_attempt_of_which_may_have_been_processed_says_nothing_is_safe() {
    let (server, streams) = h2_server_resetting(&[INTERNAL_ERROR, REFUSED_STREAM, REFUSED_STREAM]);
    let (client, _recorder) = h2c();
    let error = client
        .get(server.url("/"))
        .retry(no_backoff(2))
        .send()
        .wait()
        .unwrap_err();
    let Error::Retried { attempts } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(attempts.len(), 2, "{error}");
    assert_eq!(streams.load(Ordering::SeqCst), 3);
    assert!(!error.is_unprocessed(), "{error}");
    assert!(!attempts.iter().any(Error::is_unprocessed), "{error:?}");
    assert!(
        !chain_text(&error).contains("safe to send again"),
        "{error}"
    );
    client.close();
}

/// The copy answers while the first attempt never will: the future is done
/// (its next poll is ready with the copy's head), as `is_done` says — a
/// caller that polls only once it is done is not left waiting for the
/// loser.
#[test]
fn a_hedged_request_whose_copy_answered_is_done() {
    let SilentFirst {
        clock,
        client,
        recorder,
        server,
        mut future,
    } = silent_first_hedged();
    clock.advance(Duration::from_millis(50));
    // The delay rang: the next poll sends the copy, which answers. A
    // thread stalled between the copy's send and the look at its head
    // (this machine stalls sleeping threads by milliseconds) sees the
    // answer in that same poll: then the future is ready at once, and
    // polling it again would break the `Future` contract.
    let mut answered = None;
    assert!(eventually(CEILING, || match poll_once(&mut future) {
        std::task::Poll::Pending => hedges_seen(&recorder) == 1,
        ready => {
            answered = Some(ready);
            true
        }
    }));
    assert_eq!(hedges_seen(&recorder), 1);
    let polled = answered.unwrap_or_else(|| {
        assert!(server.wait_for_requests(2, CEILING));
        assert!(
            eventually(CEILING, || future.is_done()),
            "the copy answered, and the future does not say it is done"
        );
        poll_once(&mut future)
    });
    let std::task::Poll::Ready(Ok(response)) = polled else {
        panic!("{polled:?}");
    };
    assert_eq!(response.text().wait().unwrap(), "the copy");
    client.close();
}

/// The hedge delay rings while nobody polls, and the attempt fails before
/// the caller looks: it is retried, and the retry's own delay would pass
/// the deadline, so it gets none. The delay that rang was the failed
/// attempt's: no copy of the retry goes at its start.
#[test]
fn a_hedge_delay_that_rang_for_a_failed_attempt_sends_no_copy_of_its_retry() {
    use std::sync::atomic::AtomicBool;
    let clock = ManualClock::new();
    let (client, recorder) = client_on(&clock, false);
    let fail_now = Arc::new(AtomicBool::new(false));
    let fail = fail_now.clone();
    let server = TestServer::start(Behaviour::per_connection(move |index| match index {
        // Held until the test says, then closed unread: a reset.
        0 => {
            let fail = fail.clone();
            Behaviour::custom(move |stream, _| {
                while !fail.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(1));
                }
                drop(stream);
            })
        }
        _ => Behaviour::respond(|_| ok("the retry")),
    }));
    let policy = retry::Policy::attempts(2)
        .backoff(Duration::from_millis(10), Duration::from_millis(10))
        .jitter(false);
    let mut future = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .retry(policy)
        .hedge(hedge::Policy::after(Duration::from_millis(50)))
        .send();
    // Polled once with a waker that counts: the hedge delay's alarm and
    // the attempt's outcome each wake it once, in that order, and nothing
    // else does — the wake-ups say when each has happened, however late
    // the loop's thread runs.
    let wakes = Arc::new(CountingWake::default());
    let waker = std::task::Waker::from(wakes.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut future).poll(&mut cx).is_pending());
    assert!(eventually(CEILING, || server.connections_accepted() == 1));
    assert!(eventually(CEILING, || client.stats().armed_timers() > 0));
    // The delay rings (at 50 ms), then the attempt fails; nobody polls.
    clock.advance(Duration::from_millis(50));
    assert!(eventually(CEILING, || wakes.count() == 1), "no ring");
    fail_now.store(true, Ordering::SeqCst);
    assert!(eventually(CEILING, || client.stats().open_connections == 0));
    // The connection is released before its exchange fails: wait for the
    // failure itself (told just before it is delivered), then for its
    // delivery.
    assert!(eventually(CEILING, || recorder.events().iter().any(
        |(event, _)| matches!(event, client_kit::Event::Failed(..))
    )));
    assert!(
        eventually(CEILING, || wakes.count() == 2),
        "the failure not delivered"
    );
    // The failure is seen: a retry after 10 ms, whose delay would end at
    // 110 ms, past the 100 ms deadline.
    let polled = poll_once(&mut future);
    assert!(polled.is_pending(), "{polled:?}");
    assert_eq!(retries_seen(&recorder).len(), 1);
    clock.advance(Duration::from_millis(10));
    let response = poll_until_ready(&mut future, || "no answer".to_string());
    assert_eq!(response.text().wait().unwrap(), "the retry");
    assert_eq!(
        hedges_seen(&recorder),
        0,
        "a copy of the retry at its start"
    );
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

/// A failure the policy does not retry (a POST reset after it was sent, a
/// response that breaks the protocol) is the outcome at once:
/// `ResponseFuture::is_done` says so, as it does without a retry policy —
/// a caller that waits for it before it waits (or polls) is not left
/// waiting for a retry that will never come — and a cancel then cancels
/// nothing: the failure is the outcome, not `Error::Cancelled`.
#[test]
fn a_failure_the_policy_does_not_retry_is_done() {
    let clock = ManualClock::new();
    let (client, _recorder) = client_on(&clock, false);
    let policy = retry::Policy::attempts(3)
        .backoff(Duration::ZERO, Duration::ZERO)
        .jitter(false);
    let reset = TestServer::start(Behaviour::Reset);
    let garbled = TestServer::start(Behaviour::SendThenClose(b"HTTP/9 what\r\n\r\n".to_vec()));
    for (what, request) in [
        ("a POST reset", client.post(reset.url("/")).body("once")),
        ("a GET answered with garbage", client.get(garbled.url("/"))),
    ] {
        let future = request.retry(policy.clone()).send();
        assert!(
            eventually(CEILING, || future.is_done()),
            "{what}: not done, though nothing follows its failure"
        );
        assert!(!future.cancel(), "{what}: the request had ended");
        let error = future.wait().unwrap_err();
        assert!(
            !matches!(error, Error::Retried { .. } | Error::Cancelled),
            "{what}: {error:?}"
        );
    }
    assert_eq!(reset.connections_accepted(), 1);
    assert_eq!(garbled.connections_accepted(), 1);
    client.close();
}

/// A failure whose retry would not fit the deadline once its backoff is
/// drawn is the outcome, and `ResponseFuture::is_done` says so before the
/// next poll gives it. Here the shortest backoff the jitter may draw (5 ms,
/// half of 10) and the policy's minimum slice (1 ms) end exactly at the
/// deadline, so any other backoff drawn does not fit. `is_done` used to
/// look at that shortest backoff alone, and said a retry would follow
/// where the poll drew another and gave the failure: a caller waiting for
/// `is_done` waited for ever (and `cancel` turned the ended request into
/// `Error::Cancelled`). (The one draw of exactly 5 ms, 1 in 2⁵³, fits.)
#[test]
fn a_failure_whose_drawn_backoff_passes_the_deadline_is_done() {
    let clock = ManualClock::new();
    let (client, _recorder) = client_on(&clock, false);
    let policy = retry::Policy::attempts(2)
        .backoff(Duration::from_millis(10), Duration::from_millis(10))
        .jitter(true);
    let reset = TestServer::start(Behaviour::Reset);
    let future = client
        .get(reset.url("/"))
        .request_timeout(Duration::from_millis(6))
        .retry(policy)
        .send();
    assert!(
        eventually(CEILING, || future.is_done()),
        "not done, though no retry fits the deadline"
    );
    assert!(!future.cancel(), "the request had ended");
    let error = future.wait().unwrap_err();
    assert!(
        !matches!(error, Error::Retried { .. } | Error::Cancelled),
        "{error:?}"
    );
    assert_eq!(reset.connections_accepted(), 1);
    client.close();
}
