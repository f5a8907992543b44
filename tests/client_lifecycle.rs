//! Ending exchanges from the caller's side: cancelling and dropping futures
//! mid-request, mid-connect and in the queue; what is left afterwards.
//! (Closing the whole client is in `client_close.rs`, alone in its binary
//! because it counts the process's threads.)

mod support;

use std::time::{Duration, Instant};
use support::*;
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(5);

fn client() -> Client {
    Client::builder()
        .event_loops(2)
        .request_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Returns once a task posted to each of `client`'s loops has run: what a
/// loop was doing when it was posted (telling an event, say) is over.
fn after_what_the_loops_are_doing(client: &Client) {
    for event_loop in client.event_loop_group().loops() {
        let (ran, has_run) = std::sync::mpsc::channel();
        event_loop
            .execute(move |_| {
                let _ = ran.send(());
            })
            .expect("the loop takes tasks");
        has_run.recv_timeout(WAIT).expect("the loop ran the task");
    }
}

#[test]
fn cancel_resolves_with_cancelled_and_closes_the_connection() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let (client, recorder) = recorded_client();
    let future = client.get(server.url("/")).send();
    assert!(server.wait_for_requests(1, WAIT));
    // The server may read the request while its loop is still telling
    // `on_request_sent` (a loop thread stalled there by the machine, say):
    // a cancel then is told by that teller, on the loop's thread, once it
    // returns — as `EventListener` documents, but not what is shown here.
    after_what_the_loops_are_doing(&client);
    assert!(!future.is_done());
    assert!(future.cancel(), "the first cancel ends the exchange");
    assert!(!future.cancel(), "a second cancel does nothing");
    assert!(future.is_done());
    let error = future.wait().and_then(|r| r.bytes().wait()).unwrap_err();
    assert!(matches!(error, Error::Cancelled), "{error:?}");
    assert!(!error.is_timeout());
    // Not `Interrupted`, which `std::io::Read` callers retry.
    assert_eq!(
        std::io::Error::from(error).kind(),
        std::io::ErrorKind::Other
    );
    // The cancel ran on this thread and was reported once.
    let failures: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|(e, _)| matches!(e, Event::Failed(..)))
        .collect();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].1, std::thread::current().id());
    assert!(
        server.wait_for_open(0, WAIT),
        "cancel left the connection open"
    );
    assert_settles(&client, WAIT);
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn cancel_after_completion_changes_nothing() {
    let server = TestServer::respond(|_| ok("done"));
    let client = client();
    let future = client.get(server.url("/")).send();
    // Done at the head; the exchange ends with its body, read from the
    // same segment a moment later (a cancel in between would end it).
    assert!(eventually(WAIT, || future.is_done() && client.stats().in_flight == 0));
    assert!(!future.cancel());
    assert_eq!(future.wait().unwrap().text().wait().unwrap(), "done");
    // The connection went back to the pool untouched.
    assert_eq!(client.stats().idle_connections, 1);
    get_bytes(&client, &server.url("/"));
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

#[test]
fn dropping_a_future_mid_request_closes_its_connection() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client();
    let future = client.get(server.url("/")).send();
    assert!(server.wait_for_requests(1, WAIT));
    assert_eq!(server.connections_open(), 1);
    drop(future);
    assert!(
        server.wait_for_open(0, WAIT),
        "dropping the future left the connection open"
    );
    // The abort is posted to the loop: poll for the client to settle.
    assert_settles(&client, WAIT);
    let stats = client.stats();
    assert_eq!(stats.armed_timers(), 0, "{stats:?}");
    assert_eq!(stats.in_flight, 0, "{stats:?}");
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn dropping_a_future_mid_body_closes_its_connection() {
    let server = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nsome of it".to_vec(),
    ));
    let (client, recorder) = recorded_client();
    let future = client.get(server.url("/")).send();
    assert!(recorder.wait_for(WAIT, |events| events
        .iter()
        .any(|(e, _)| matches!(e, Event::BodyPart(_)))));
    drop(future);
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    // A half-read connection is never pooled.
    assert_eq!(client.stats().idle_connections, 0);
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn dropping_a_future_while_connecting_gives_the_connection_back() {
    let mut listener = UnacceptingListener::new();
    if !listener.backlog_filled(4096) {
        // The kernel did not let the accept queue fill, so a connect cannot
        // be made to hang locally; nothing to test here.
        eprintln!("backlog could not be filled; test skipped");
        return;
    }
    let recorder = Recorder::new();
    let client = Client::builder()
        .event_loops(2)
        .connect_timeout(Duration::from_secs(60))
        .max_connections(1)
        .listener(recorder.clone())
        .build()
        .unwrap();
    let future = client.get(format!("http://{}/", listener.addr())).send();
    // The connect is under way on its loop (not merely granted a permit).
    assert!(recorder.wait_for(WAIT, |events| events
        .iter()
        .any(|(e, _)| matches!(e, Event::ConnectAttempt(_)))));
    assert_eq!(client.stats().open_connections, 1);
    drop(future);
    // Not after the 60 s connect timeout: the attempt is aborted now.
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0),
        "{:?}",
        client.stats()
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn cancelling_a_queued_request_lets_the_next_one_through() {
    let server = TestServer::echo_slow_after(Duration::from_millis(200));
    let client = Client::builder()
        .event_loops(2)
        .max_connections(1)
        .build()
        .unwrap();
    let slow = client.get(server.url("/slow")).send();
    assert!(server.wait_for_requests(1, WAIT));
    let cancelled = client.get(server.url("/cancelled")).send();
    let next = client.get(server.url("/next")).send();
    assert!(eventually(WAIT, || client.stats().waiting == 2));
    assert!(cancelled.cancel());
    assert_eq!(client.stats().waiting, 1);
    assert!(matches!(cancelled.wait(), Err(Error::Cancelled)));
    assert_eq!(slow.wait().unwrap().text().wait().unwrap(), "/slow");
    assert_eq!(next.wait().unwrap().text().wait().unwrap(), "/next");
    let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, vec!["/slow", "/next"]);
    assert_eq!(server.connections_accepted(), 1);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn dropping_many_futures_at_once_leaves_nothing_behind() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client();
    let futures: Vec<_> = (0..20)
        .map(|_| client.get(server.url("/")).send())
        .collect();
    assert!(server.wait_for_requests(20, WAIT));
    let started = Instant::now();
    drop(futures);
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    assert!(started.elapsed() < WAIT);
    client.close();
}

/// A client that tells `listener` and retries a 503 twice, at once.
fn retrying_503s(listener: &std::sync::Arc<Recorder>, event_loop_timeouts: bool) -> Client {
    Client::builder()
        .event_loops(2)
        .use_event_loop_timeouts(event_loop_timeouts)
        .retry(
            tickless::retry::Policy::attempts(3)
                .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
                .backoff(Duration::ZERO, Duration::ZERO),
        )
        .listener(listener.clone())
        .build()
        .unwrap()
}

/// A cancel after a head the client follows has come whole (a redirect,
/// a status its retry policy retries) and before the future is polled
/// again: the request has not ended (`is_done`, but the next poll would
/// send again), so the cancel ends it — nothing more is sent, and the
/// future resolves with `Cancelled`. A small answer has usually come
/// whole with its head, its exchange ended, before the caller looks.
#[test]
fn cancelling_between_hops_sends_nothing_more() {
    for event_loop_timeouts in [false, true] {
        for target in ["/redirected", "/busy"] {
            let server = TestServer::respond(|request| match request.target.as_str() {
                "/redirected" => response(302, &[("Location", "/there")], b"moved"),
                "/busy" => response(503, &[], b"busy"),
                _ => ok("there"),
            });
            let listener = Recorder::new();
            let client = retrying_503s(&listener, event_loop_timeouts);
            let future = client.get(server.url(target)).send();
            // The head has come, and its body whole: the exchange is over.
            assert!(listener.wait_for(WAIT, |events| events
                .iter()
                .any(|(e, _)| matches!(e, Event::Completed(_)))));
            assert!(future.is_done());
            assert!(future.cancel(), "{target}: the cancel found nothing to end");
            let outcome = future.wait().map(|response| response.status());
            assert!(
                matches!(outcome, Err(Error::Cancelled)),
                "{target}: {outcome:?}"
            );
            let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
            assert_eq!(targets, vec![target], "sent again after the cancel");
            assert_settles(&client, WAIT);
            client.close();
        }
    }
}

/// A status the retry policy retries, come whole with no attempt left, is
/// the response: a cancel then finds nothing to end, and the future gives
/// it back. (Each retry is sent by a poll; the last answer is held until
/// the polls stop, so that none of them takes it.)
#[test]
fn a_cancel_after_the_last_retried_status_changes_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let gate = std::sync::Arc::new(AtomicBool::new(false));
    let server = TestServer::respond({
        let gate = gate.clone();
        let answered = std::sync::atomic::AtomicUsize::new(0);
        move |_| {
            if answered.fetch_add(1, Ordering::SeqCst) == 2 {
                eventually(WAIT, || gate.load(Ordering::SeqCst));
            }
            response(503, &[], b"busy")
        }
    });
    let listener = Recorder::new();
    let client = retrying_503s(&listener, false);
    let mut future = client.get(server.url("/busy")).send();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(eventually(WAIT, || {
        assert!(std::future::Future::poll(std::pin::Pin::new(&mut future), &mut cx).is_pending());
        server.requests().len() == 3
    }));
    gate.store(true, Ordering::SeqCst);
    assert!(listener.wait_for(WAIT, |events| events
        .iter()
        .filter(|(e, _)| matches!(e, Event::Completed(_)))
        .count()
        == 3));
    assert!(!future.cancel(), "the last 503 is the response");
    let outcome = future.wait().map(|response| response.status());
    assert!(
        matches!(outcome, Ok(http::StatusCode::SERVICE_UNAVAILABLE)),
        "{outcome:?}"
    );
    assert_eq!(server.requests().len(), 3);
    client.close();
}

/// A server that answers each request's head with a `417` (its body waits
/// for a `100 Continue` never sent), then reads what comes.
fn answering_417_to_the_head() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        use std::io::{Read, Write};
        let mut head = Vec::new();
        let mut byte = [0; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let _ = stream.write_all(&response(417, &[], b""));
        drain(&mut stream);
    }))
}

/// A POST of `body` with `Expect: 100-continue` to a server
/// [answering `417` to the head](answering_417_to_the_head), by a client
/// of two loops, once its `417` has come: the server, the client and the
/// request's future.
fn answered_417(
    body: impl Into<tickless::Upload>,
) -> (TestServer, Client, tickless::ResponseFuture) {
    let server = answering_417_to_the_head();
    let listener = Recorder::new();
    let client = Client::builder()
        .event_loops(2)
        .listener(listener.clone())
        .build()
        .unwrap();
    let future = client
        .post(server.url("/"))
        .expect_continue(true)
        .body(body)
        .send();
    assert!(listener.wait_for(WAIT, |events| events
        .iter()
        .any(|(e, _)| matches!(e, Event::Completed(_)))));
    (server, client, future)
}

/// A streamed body a `417` left unsent, kept for the repeat a cancel then
/// rules out, goes at the cancel — its source dropped before the future
/// is waited on or dropped.
#[test]
fn a_cancel_after_a_417_lets_the_kept_streamed_body_go_at_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct Source(std::sync::Arc<AtomicBool>);
    impl std::io::Read for Source {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(7);
            Ok(buf.len().min(100))
        }
    }
    impl Drop for Source {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = std::sync::Arc::new(AtomicBool::new(false));
    let source = tickless::Upload::from_reader(Source(dropped.clone()), None);
    let (server, client, future) = answered_417(source);
    assert!(future.cancel(), "the cancel found nothing to end");
    assert!(
        eventually(WAIT, || dropped.load(Ordering::SeqCst)),
        "the body's source is kept until the future goes"
    );
    assert!(matches!(future.wait(), Err(Error::Cancelled)));
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// The same for a `417` to the request's `Expect: 100-continue`, which the
/// client would repeat without it: cancelled once the `417` has come, the
/// request is not sent again.
#[test]
fn cancelling_after_a_417_sends_nothing_more() {
    let (server, client, future) = answered_417(vec![7; 1000]);
    assert!(future.is_done());
    assert!(future.cancel(), "the cancel found nothing to end");
    assert!(matches!(future.wait(), Err(Error::Cancelled)));
    assert_eq!(
        server.connections_accepted(),
        1,
        "sent again after the cancel"
    );
    assert_settles(&client, WAIT);
    client.close();
}
