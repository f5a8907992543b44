//! Code of the caller's that panics on an event loop — a listener (before
//! the head, or while the body is read), a posted task — ends at most its
//! own exchange: the future still
//! resolves, and the loop goes on serving other requests. The same for a
//! listener called on a resolver thread.

mod support;

use std::sync::Arc;
use std::time::Duration;
use support::*;
use tickless::{Client, Error, EventListener};

const WAIT: Duration = Duration::from_secs(10);

struct PanicsOnCompletion;

impl EventListener for PanicsOnCompletion {
    fn on_completed(&self, _request: &tickless::RequestInfo, _status: http::StatusCode) {
        panic!("listener panics");
    }
}

fn client() -> Client {
    Client::builder().event_loops(1).build().unwrap()
}

/// Panics in the one method it is named after.
#[derive(Clone, Copy, PartialEq, Debug)]
enum PanicsOn {
    Resolved,
    ConnectAttempt,
    ConnectionPooled,
    ConnectionOffered,
}

impl PanicsOn {
    fn panic_if(&self, method: PanicsOn) {
        if *self == method {
            panic!("listener panics in {method:?}");
        }
    }
}

impl EventListener for PanicsOn {
    fn on_resolved(
        &self,
        _request: &tickless::RequestInfo,
        _host: &str,
        _addrs: &[std::net::SocketAddr],
    ) {
        self.panic_if(PanicsOn::Resolved);
    }
    fn on_connect_attempt(&self, _request: &tickless::RequestInfo, _remote: std::net::SocketAddr) {
        self.panic_if(PanicsOn::ConnectAttempt);
    }
    fn on_connection_pooled(
        &self,
        _request: &tickless::RequestInfo,
        _connection: &tickless::ConnectionInfo,
    ) {
        self.panic_if(PanicsOn::ConnectionPooled);
    }
    fn on_connection_offered(
        &self,
        _request: &tickless::RequestInfo,
        _connection: &tickless::ConnectionInfo,
    ) {
        self.panic_if(PanicsOn::ConnectionOffered);
    }
}

/// Sends a GET with `listener` and returns its outcome, which must come
/// (no timeout is set that would end it otherwise).
/// The body of a GET with `listener`, or the error of the exchange (before
/// or after its head).
fn outcome(client: &Client, url: String, listener: PanicsOn) -> Result<String, Error> {
    outcome_with(client, url, Arc::new(listener))
}

/// [`outcome`], with any listener.
fn outcome_with(
    client: &Client,
    url: String,
    listener: Arc<dyn EventListener>,
) -> Result<String, Error> {
    let future = client.get(url).listener(listener).send();
    assert!(eventually(WAIT, || future.is_done()), "never resolved");
    future.wait()?.text().wait()
}

/// The error a panicking listener ends its exchange with.
fn assert_listener_panicked(error: Error) {
    match error {
        Error::Io { source, .. } => {
            assert!(source.to_string().contains("listener panicked"), "{source}")
        }
        other => panic!("not the listener's panic: {other:?}"),
    }
}

/// The client still serves a request to `url` after the panic, then
/// settles and closes.
fn assert_serves_then_closes(client: Client, url: String) {
    assert_eq!(
        client
            .get(url)
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "fine"
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_listener_panicking_on_a_connect_attempt_fails_its_exchange() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = untimed_client();
    let error = outcome(&client, server.url("/"), PanicsOn::ConnectAttempt).unwrap_err();
    assert_listener_panicked(error);
    assert_serves_then_closes(client, server.url("/"));
}

#[test]
fn a_listener_panicking_on_a_resolver_thread_fails_its_exchange_and_spares_the_thread() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = untimed_client();
    let url = format!("http://localhost:{}/", server.addr().port());
    // More panics than there are resolver threads.
    for _ in 0..4 {
        let error = outcome(&client, url.clone(), PanicsOn::Resolved).unwrap_err();
        assert_listener_panicked(error);
    }
    assert_serves_then_closes(client, url);
}

#[test]
fn a_listener_panicking_as_a_pooled_connection_is_taken_fails_its_exchange() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = untimed_client();
    let first = outcome(&client, server.url("/"), PanicsOn::Resolved).unwrap();
    assert_eq!(first, "fine");
    assert!(eventually(WAIT, || client.stats().idle_connections == 1));
    let error = outcome(&client, server.url("/"), PanicsOn::ConnectionPooled).unwrap_err();
    assert_listener_panicked(error);
    assert_serves_then_closes(client, server.url("/"));
}

#[test]
fn a_listener_panicking_as_its_connection_is_offered_back_spares_the_connection() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = untimed_client();
    // The connection is offered back before the exchange ends (so that a
    // caller's next request finds it): the panic ends the exchange.
    let error = outcome(&client, server.url("/"), PanicsOn::ConnectionOffered).unwrap_err();
    assert_listener_panicked(error);
    // The connection went back to the pool whole, and serves the next one.
    assert!(eventually(WAIT, || client.stats().idle_connections == 1));
    assert_serves_then_closes(client, server.url("/"));
    assert_eq!(server.connections_accepted(), 1);
}

#[test]
fn a_panicking_listener_still_lets_the_response_through() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = client();
    let future = client
        .get(server.url("/"))
        .listener(Arc::new(PanicsOnCompletion))
        .send();
    assert!(eventually(WAIT, || future.is_done()), "never resolved");
    let response = future.wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "fine");
    assert_eq!(
        client
            .get(server.url("/"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "fine"
    );
    client.close();
}

/// Panics while the body is read off the connection.
struct PanicsOnBody;

impl EventListener for PanicsOnBody {
    fn on_body_part(&self, _request: &tickless::RequestInfo, _len: usize) {
        panic!("listener panics on the body");
    }
}

#[test]
fn a_listener_panicking_mid_body_fails_the_body_and_spares_the_loop() {
    let server = TestServer::respond(|_| ok("some body"));
    let client = client();
    let response = client
        .get(server.url("/"))
        .listener(Arc::new(PanicsOnBody))
        .send()
        .wait()
        .unwrap();
    // The head came before the panic; the body says what happened.
    let error = response.bytes().wait().unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(
        server.wait_for_open(0, WAIT),
        "the connection was not closed"
    );
    // The loop is alive: the next request on it succeeds.
    assert_eq!(
        client
            .get(server.url("/"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "some body"
    );
    assert_settles(&client, WAIT);
    client.close();
}

/// A listener panicking on a `100 Continue` fails its exchange there: the
/// body that waited for it does not go — the server reads nothing after
/// the head but the connection's end — whether it was in memory or
/// streamed (a source the connection pulls as the body goes).
#[test]
fn a_listener_panicking_on_100_continue_fails_its_exchange_before_the_body_goes() {
    struct PanicsOnInterim;
    impl EventListener for PanicsOnInterim {
        fn on_interim_head(&self, _: &tickless::RequestInfo, _: &tickless::ResponseHead<'_>) {
            panic!("listener panics on an interim head");
        }
    }
    let bodies: [fn() -> tickless::Upload; 2] = [
        || "payload".into(),
        || tickless::Upload::from_reader(std::io::Cursor::new(b"streamed".to_vec()), Some(8)),
    ];
    for (i, body) in bodies.into_iter().enumerate() {
        let after_continue = Arc::new(std::sync::Mutex::new(None));
        let server = TestServer::start(Behaviour::custom({
            let after_continue = after_continue.clone();
            move |mut stream, _| {
                use std::io::{Read, Write};
                if read_head(&mut stream).is_none() {
                    return;
                }
                let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                // Whatever comes until the client closes (or resets) it.
                let (mut read, mut buf) = (0, [0; 1024]);
                while let Ok(n @ 1..) = stream.read(&mut buf) {
                    read += n;
                }
                *after_continue.lock().unwrap() = Some(read);
            }
        }));
        // The body waits for the 100 alone: a server thread stalled past
        // the default delay (1 s) would have it go first.
        let client = Client::builder()
            .event_loops(1)
            .expect_continue_timeout(Duration::from_secs(600))
            .build()
            .unwrap();
        let future = client
            .put(server.url("/"))
            .body(body())
            .expect_continue(true)
            .listener(Arc::new(PanicsOnInterim))
            .send();
        assert!(
            eventually(WAIT, || future.is_done()),
            "body {i}: never resolved"
        );
        assert_listener_panicked(future.wait().unwrap_err());
        assert!(
            eventually(WAIT, || after_continue.lock().unwrap().is_some()),
            "body {i}: the connection was never closed"
        );
        assert_eq!(*after_continue.lock().unwrap(), Some(0), "body {i} went");
        client.close();
    }
}

#[test]
fn a_panicking_task_spares_the_loop() {
    let client = client();
    let event_loop = client.event_loop_group().loops()[0].clone();
    event_loop.execute(|_| panic!("task panics")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    event_loop.execute(move |_| tx.send(()).unwrap()).unwrap();
    rx.recv_timeout(WAIT)
        .expect("the loop died with the panicking task");
    client.close();
}

/// Panics on the status line.
struct PanicsOnStatus;

impl EventListener for PanicsOnStatus {
    fn on_status(&self, _request: &tickless::RequestInfo, _status: http::StatusCode) {
        panic!("listener panics on the status");
    }
}

#[test]
fn after_a_listener_panicked_its_exchange_tells_nothing_past_its_failure() {
    let server = TestServer::respond(|_| ok("fine"));
    let recorder = Recorder::new();
    let client = Client::builder()
        .event_loops(1)
        .listener(recorder.clone())
        .build()
        .unwrap();
    let error = outcome_with(&client, server.url("/"), Arc::new(PanicsOnStatus)).unwrap_err();
    assert_listener_panicked(error);
    // Closed: every thread that could still tell of the exchange is joined.
    client.close();
    let events: Vec<Event> = recorder.events().into_iter().map(|(e, _)| e).collect();
    let failed = events
        .iter()
        .position(|e| matches!(e, Event::Failed(..)))
        .unwrap_or_else(|| panic!("no failure told: {events:#?}"));
    assert!(
        matches!(events[failed - 1], Event::Status(_)),
        "{events:#?}"
    );
    assert_eq!(failed, events.len() - 1, "told after its end: {events:#?}");
}

/// The client's listener and the request's each hear every event: one
/// that panics keeps the other from hearing nothing — not the end of the
/// exchange, which the panic cannot change, nor the event it panicked on
/// (after which the exchange fails, as any panic of a listener fails it).
#[test]
fn a_panic_of_the_clients_listener_keeps_nothing_from_the_requests() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = Client::builder()
        .event_loops(1)
        .listener(Arc::new(PanicsOnCompletion))
        .build()
        .unwrap();
    let recorder = Recorder::new();
    let response = client
        .get(server.url("/"))
        .listener(recorder.clone())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "fine");
    assert_settles(&client, WAIT);
    assert_eq!(recorder.completions(), 1, "{:#?}", recorder.events());
    client.close();

    let client = Client::builder()
        .event_loops(1)
        .listener(Arc::new(PanicsOnStatus))
        .build()
        .unwrap();
    let recorder = Recorder::new();
    let error = outcome_with(&client, server.url("/"), recorder.clone()).unwrap_err();
    assert_listener_panicked(error);
    client.close();
    let events: Vec<Event> = recorder.events().into_iter().map(|(e, _)| e).collect();
    // Told the status the client's listener panicked on, then the failure.
    assert!(
        matches!(events.as_slice(), [.., Event::Status(_), Event::Failed(..)]),
        "{events:#?}"
    );
}

/// Panics as it is told of a server's `GOAWAY`, once it has noted that it
/// was told.
#[derive(Default)]
struct PanicsOnGoAway {
    told: std::sync::atomic::AtomicBool,
}

impl EventListener for PanicsOnGoAway {
    fn on_goaway(&self, _connection: &tickless::ConnectionInfo, _reason: tickless::Http2Reason) {
        self.told.store(true, std::sync::atomic::Ordering::SeqCst);
        panic!("listener panics on the GOAWAY");
    }
}

/// `on_goaway` is no exchange's event: a listener panicking there fails
/// none. The streams the server says it processes are still answered on
/// their connection.
#[test]
fn a_listener_panicking_on_a_goaway_fails_no_exchange() {
    use support::h2_server::{goaway, ok_headers, RawH2Server};
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(2);
        // Both processed: answered after the GOAWAY that says so.
        conn.send(&goaway(ids[1], 0));
        for id in ids {
            conn.send(&ok_headers(id));
        }
        conn.drain(Duration::from_secs(5));
    });
    let listener = Arc::new(PanicsOnGoAway::default());
    let client = h2c_builder(1, WAIT)
        .listener(listener.clone())
        .build()
        .unwrap();
    let futures = [
        client.get(server.url("/a")).send(),
        client.get(server.url("/b")).send(),
    ];
    for future in futures {
        let response = future.wait().unwrap();
        assert_eq!(response.status(), 200);
    }
    assert!(
        listener.told.load(std::sync::atomic::Ordering::SeqCst),
        "the listener was told of the GOAWAY, and panicked"
    );
    client.close();
}

/// The completion of an encoded response is told on the thread that reads
/// its body to its end, or drops it: a listener panicking there does not
/// unwind into that reader, who gets the body.
#[test]
fn a_listener_panicking_on_an_encoded_responses_completion_spares_its_reader() {
    let gzipped = gzip(b"fine");
    let server =
        TestServer::respond(move |_| response(200, &[("Content-Encoding", "gzip")], &gzipped));
    let client = Client::builder()
        .event_loops(1)
        .listener(Arc::new(PanicsOnCompletion))
        .build()
        .unwrap();
    // All of it has come, each time, before the body is read or dropped:
    // the completion is told on this thread (the request's own listener
    // hears it there too), and the client's listener's panic stays there.
    let completed_here = |recorder: &Recorder| {
        recorder.events().into_iter().any(|(event, thread)| {
            matches!(event, Event::Completed(_)) && thread == std::thread::current().id()
        })
    };
    let recorder = Recorder::new();
    let future = client
        .get(server.url("/"))
        .listener(recorder.clone())
        .send();
    assert_settles(&client, WAIT);
    assert_eq!(future.wait().unwrap().text().wait().unwrap(), "fine");
    assert!(completed_here(&recorder), "{:?}", recorder.events());
    let recorder = Recorder::new();
    let future = client
        .get(server.url("/"))
        .listener(recorder.clone())
        .send();
    assert_settles(&client, WAIT);
    drop(future.wait().unwrap());
    assert!(completed_here(&recorder), "{:?}", recorder.events());
    client.close();
}
