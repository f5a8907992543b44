//! The connection pool: keep-alive reuse, `Connection: close`, a server
//! that closes idle connections, the per-host and total limits.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn sequential_requests_use_exactly_one_connection() {
    let server = TestServer::respond(|request| ok(&request.target));
    let (client, recorder) = recorded_client();
    for i in 0..10 {
        let path = format!("/n/{i}");
        let response = client.get(server.url(&path)).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), path);
    }
    assert_eq!(server.connections_accepted(), 1);
    assert!(server.requests().iter().all(|r| r.connection_index == 0));
    let events = recorder.events();
    let connects = events
        .iter()
        .filter(|(e, _)| matches!(e, Event::ConnectSuccess(_)))
        .count();
    let pooled = events
        .iter()
        .filter(|(e, _)| matches!(e, Event::ConnectionPooled(_)))
        .count();
    assert_eq!((connects, pooled), (1, 9));
    let stats = client.stats();
    assert_eq!(stats.open_connections, 1, "{stats:?}");
    assert_eq!(stats.idle_connections, 1, "{stats:?}");
    assert_eq!(stats.armed_timers(), 0, "{stats:?}");
    client.close();
    assert!(
        server.wait_for_open(0, WAIT),
        "close() left a connection open"
    );
}

#[test]
fn connection_close_response_makes_the_next_request_connect_again() {
    let server = TestServer::respond(|_| response(200, &[("Connection", "close")], b"bye"));
    let client = Client::builder().event_loops(2).build().unwrap();
    for i in 0..3 {
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), "bye");
        assert_eq!(server.connections_accepted(), i + 1);
        assert_eq!(client.stats().idle_connections, 0);
    }
    let indices: Vec<usize> = server
        .requests()
        .iter()
        .map(|r| r.connection_index)
        .collect();
    assert_eq!(indices, vec![0, 1, 2]);
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn keep_alive_off_asks_for_close_and_never_reuses() {
    let server = TestServer::respond(|_| ok("x"));
    let client = Client::builder()
        .event_loops(2)
        .keep_alive(false)
        .build()
        .unwrap();
    for _ in 0..3 {
        get_bytes(&client, &server.url("/"));
    }
    assert_eq!(server.connections_accepted(), 3);
    assert!(server
        .requests()
        .iter()
        .all(|r| r.header("connection") == Some("close")));
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn server_closing_an_idle_connection_does_not_fail_the_next_request() {
    // One request per connection, then FIN without `Connection: close`.
    let server = TestServer::start(Behaviour::respond_then_close(|r| ok(&r.target)));
    let client = Client::builder().event_loops(2).build().unwrap();
    for i in 0..3 {
        let path = format!("/{i}");
        let response = client.get(server.url(&path)).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), path);
        // Let the server's close reach the idle connection before the next
        // request (the other ordering is the retry path, also fine).
        assert!(server.wait_for_open(0, WAIT));
    }
    assert_eq!(server.connections_accepted(), 3);
    assert_settles(&client, WAIT);
    client.close();
}

/// Counts how many connections a server holds open at once, and the most
/// ever. Each connection answers every request after `delay`.
struct PeakServer {
    server: TestServer,
    current: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

fn peak_server(delay: Duration) -> PeakServer {
    let current = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (c, p) = (current.clone(), peak.clone());
    let server = TestServer::start(Behaviour::custom(move |mut stream: TcpStream, index| {
        let now = c.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        let mut reader = RequestReader::new(index);
        while let Ok(request) = reader.read_request(&mut stream) {
            thread::sleep(delay);
            let body = format!("{} on {index}", request.target);
            if stream.write_all(&ok(&body)).is_err() {
                break;
            }
        }
        c.fetch_sub(1, Ordering::SeqCst);
    }));
    PeakServer {
        server,
        current,
        peak,
    }
}

#[test]
fn per_host_limit_caps_open_connections_and_queues_the_rest() {
    let PeakServer {
        server,
        current,
        peak,
    } = peak_server(Duration::from_millis(400)); // a wide window to see the queue in
    let client = Client::builder()
        .event_loops(2)
        .max_connections_per_host(2)
        .request_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let futures: Vec<_> = (0..6)
        .map(|i| client.get(server.url(&format!("/{i}"))).send())
        .collect();
    // While the first two are being served, the other four wait.
    assert!(server.wait_for_accepted(2, WAIT));
    assert!(eventually(WAIT, || client.stats().waiting >= 1));
    let stats = client.stats();
    assert!(stats.open_connections <= 2, "{stats:?}");
    let results: Vec<_> = futures.into_iter().map(|f| f.wait()).collect();
    for (i, result) in results.into_iter().enumerate() {
        let response = result.unwrap_or_else(|e| panic!("request {i} failed: {e}"));
        assert!(response
            .text()
            .wait()
            .unwrap()
            .starts_with(&format!("/{i} on ")));
    }
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "server saw {} connections open at once",
        peak.load(Ordering::SeqCst)
    );
    assert!(server.connections_accepted() <= 2);
    assert_settles(&client, WAIT);
    let stats = client.stats();
    assert_eq!(stats.waiting, 0, "{stats:?}");
    client.close();
    assert!(eventually(WAIT, || current.load(Ordering::SeqCst) == 0));
}

#[test]
fn per_host_limit_is_per_host() {
    // Two origins (two servers), limit 1 each: both are served at once.
    let a = peak_server(Duration::from_millis(50));
    let b = peak_server(Duration::from_millis(50));
    let client = Client::builder()
        .event_loops(2)
        .max_connections_per_host(1)
        .build()
        .unwrap();
    let futures: Vec<_> = (0..4)
        .flat_map(|i| {
            [
                client.get(a.server.url(&format!("/a{i}"))).send(),
                client.get(b.server.url(&format!("/b{i}"))).send(),
            ]
        })
        .collect();
    for future in futures {
        future.wait().unwrap();
    }
    assert_eq!(a.peak.load(Ordering::SeqCst), 1);
    assert_eq!(b.peak.load(Ordering::SeqCst), 1);
    assert_eq!(a.server.connections_accepted(), 1);
    assert_eq!(b.server.connections_accepted(), 1);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_queued_request_times_out_while_waiting_for_a_connection() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = Client::builder()
        .event_loops(2)
        .max_connections(1)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // The only connection is taken by a request the server never answers.
    let holder = client.get(server.url("/hold")).send();
    assert!(server.wait_for_requests(1, WAIT));
    let started = Instant::now();
    let queued = client
        .get(server.url("/queued"))
        .request_timeout(Duration::from_secs(1))
        .send();
    assert!(eventually(WAIT, || client.stats().waiting == 1));
    let error = queued.wait().and_then(|r| r.bytes().wait()).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(error, Error::RequestTimeout(_)),
        "expected RequestTimeout, got {error:?}"
    );
    assert!(
        elapsed >= Duration::from_secs(1),
        "fired early: {elapsed:?}"
    );
    assert!(elapsed < WAIT, "fired far too late: {elapsed:?}");
    // Never connected: the remote is the origin.
    assert_eq!(
        error.to_string(),
        format!("Request timeout to {} after 1000 ms", server.addr())
    );
    // It never got a connection of its own, and it no longer waits.
    assert_eq!(server.connections_accepted(), 1);
    assert_eq!(server.requests().len(), 1);
    let stats = client.stats();
    assert_eq!(stats.waiting, 0, "{stats:?}");
    assert_eq!(stats.in_flight, 1, "{stats:?}");
    // The holder is still running; cancelling it frees the connection.
    assert!(holder.cancel());
    assert!(matches!(holder.wait(), Err(Error::Cancelled)));
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    // The permit comes back when the loop runs the abort, just after the
    // socket closes: poll.
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn a_queued_request_runs_when_the_connection_frees_up() {
    let server = TestServer::echo_slow_after(Duration::from_millis(100));
    let client = Client::builder()
        .event_loops(2)
        .max_connections(1)
        .build()
        .unwrap();
    let slow = client.get(server.url("/slow")).send();
    assert!(server.wait_for_requests(1, WAIT));
    let queued = client.get(server.url("/next")).send();
    assert_eq!(slow.wait().unwrap().text().wait().unwrap(), "/slow");
    assert_eq!(queued.wait().unwrap().text().wait().unwrap(), "/next");
    assert_eq!(server.connections_accepted(), 1);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn an_idle_connection_to_one_origin_makes_room_for_a_request_to_another() {
    for event_loop_timeouts in [false, true] {
        let a = TestServer::respond(|request| ok(&request.target));
        let b = TestServer::respond(|request| ok(&request.target));
        // No timeout ends the wait: only the room made for it can.
        let client = Client::builder()
            .event_loops(2)
            .use_event_loop_timeouts(event_loop_timeouts)
            .max_connections(1)
            .request_timeout(Duration::ZERO)
            .pooled_connection_idle_timeout(Duration::ZERO)
            .build()
            .unwrap();
        assert_eq!(
            client
                .get(a.url("/a"))
                .send()
                .wait()
                .unwrap()
                .text()
                .wait()
                .unwrap(),
            "/a"
        );
        assert!(eventually(WAIT, || client.stats().idle_connections == 1));
        let to_b = client.get(b.url("/b")).send();
        assert!(
            eventually(WAIT, || to_b.is_done()),
            "B waited behind A's idle connection"
        );
        assert_eq!(to_b.wait().unwrap().text().wait().unwrap(), "/b");
        // And back: B's idle connection makes room for A again.
        let to_a = client.get(a.url("/a2")).send();
        assert!(
            eventually(WAIT, || to_a.is_done()),
            "A waited behind B's idle connection"
        );
        assert_eq!(to_a.wait().unwrap().text().wait().unwrap(), "/a2");
        assert!(client.stats().open_connections <= 1, "{:?}", client.stats());
        assert_settles(&client, WAIT);
        client.close();
    }
}

#[test]
fn a_retried_request_goes_again_on_a_fresh_connection_even_after_waiting() {
    // Answers the first request of each connection, then closes on the
    // next: every pooled connection fails under its second request.
    let server = TestServer::start(Behaviour::custom(|mut stream, index| {
        let mut reader = RequestReader::new(index);
        if let Ok(request) = reader.read_request(&mut stream) {
            let _ = stream.write_all(&ok(&request.target));
        }
        let _ = reader.read_request(&mut stream);
    }));
    for event_loop_timeouts in [false, true] {
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .max_connections_per_host(1)
            .build()
            .unwrap();
        assert_eq!(
            client
                .get(server.url("/r1"))
                .send()
                .wait()
                .unwrap()
                .text()
                .wait()
                .unwrap(),
            "/r1"
        );
        // r2 takes the pooled connection and fails under it; its retry
        // goes on a new connection, ahead of r3 (sent after it) — which,
        // served that connection next, fails under it in turn and goes
        // again on a third.
        let r2 = client.get(server.url("/r2")).send();
        let r3 = client.get(server.url("/r3")).send();
        assert_eq!(r3.wait().unwrap().text().wait().unwrap(), "/r3");
        assert_eq!(r2.wait().unwrap().text().wait().unwrap(), "/r2");
        assert_settles(&client, WAIT);
        client.close();
    }
}

/// A request whose pooled connection its server closes under it (the
/// server's idle timeout met the request) is sent again, on a new
/// connection — ahead of a request sent after it and queued meanwhile for
/// the host's one connection, not behind it: the permit the closed
/// connection gives back serves the oldest waiter, and the retried one is
/// older. Here the younger request's answer is held by the server until
/// the older one has its own: behind it, the older would wait as long as
/// the younger's answer takes (its request timeout, for a long download).
#[test]
fn a_retried_request_keeps_its_place_ahead_of_a_younger_one_queued_meanwhile() {
    use std::sync::mpsc;
    use std::sync::Mutex;
    for event_loop_timeouts in [false, true] {
        // The server says when it holds r2 on the first connection; the
        // test says when to close under it, and when to answer the younger
        // request (or the wait for its word ends, should the test fail
        // first).
        let (holding_r2, on_holding_r2) = mpsc::channel::<()>();
        let (close_r2, on_close_r2) = mpsc::channel::<()>();
        let (answer_younger, on_answer_younger) = mpsc::channel::<()>();
        let (holding_r2, on_close_r2) = (Mutex::new(holding_r2), Mutex::new(on_close_r2));
        let on_answer_younger = Mutex::new(on_answer_younger);
        let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
            let mut reader = RequestReader::new(index);
            if index == 0 {
                // Answers r1, then closes under r2 when told.
                let Ok(first) = reader.read_request(&mut stream) else {
                    return;
                };
                let _ = stream.write_all(&ok(&first.target));
                if reader.read_request(&mut stream).is_ok() {
                    let _ = holding_r2.lock().unwrap().send(());
                    let _ = on_close_r2.lock().unwrap().recv_timeout(WAIT);
                }
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
            while let Ok(request) = reader.read_request(&mut stream) {
                if request.target == "/younger" {
                    let _ = on_answer_younger.lock().unwrap().recv_timeout(WAIT);
                }
                if stream.write_all(&ok(&request.target)).is_err() {
                    return;
                }
            }
        }));
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .max_connections_per_host(1)
            .build()
            .unwrap();
        assert_eq!(get_bytes(&client, &server.url("/r1")), "/r1");
        assert!(eventually(WAIT, || client.stats().idle_connections == 1));
        // r2 takes the pooled connection; the server reads it and holds it.
        let r2 = client.get(server.url("/r2")).send();
        on_holding_r2.recv_timeout(WAIT).expect("the server got r2");
        // A younger request queues for the host's one connection...
        let younger = client.get(server.url("/younger")).send();
        assert!(eventually(WAIT, || client.stats().waiting == 1));
        // ...then r2's connection closes under it, unanswered: r2 goes
        // again, first.
        close_r2.send(()).unwrap();
        let r2 = within("r2, ahead of the younger request", WAIT, move || {
            r2.wait().and_then(|response| response.text().wait())
        });
        assert_eq!(
            r2.unwrap(),
            "/r2",
            "mode {event_loop_timeouts}: the retry failed"
        );
        answer_younger.send(()).unwrap();
        assert_eq!(
            younger.wait().unwrap().text().wait().unwrap(),
            "/younger",
            "mode {event_loop_timeouts}"
        );
        assert_eq!(server.connections_accepted(), 2);
        assert_settles(&client, WAIT);
        client.close();
    }
}

/// #10, defect 1: a request retried after its pooled connection failed
/// under it leaves that connection's read timeout behind. Here the retry
/// waits in the queue (per-host limit 1) three times its read timeout,
/// behind a slow request older than it — the next hop of a redirect sent
/// before it, which keeps its request's place — it must not fail with a
/// read timeout it no longer has a connection for.
#[test]
fn a_retry_waiting_in_the_queue_is_not_failed_by_the_read_timeout_of_the_connection_it_left() {
    use std::sync::mpsc;
    use std::sync::Mutex;
    for event_loop_timeouts in [false, true] {
        // The test says when to answer r1 (once the others are queued);
        // the server says when it holds r2, and the test when to drop it
        // (or the wait for its word ends, should the test fail first).
        let (answer_r1, on_answer_r1) = mpsc::channel::<()>();
        let (holding, on_holding) = mpsc::channel::<()>();
        let (release, on_release) = mpsc::channel::<()>();
        let (on_answer_r1, holding) = (Mutex::new(on_answer_r1), Mutex::new(holding));
        let on_release = Mutex::new(on_release);
        let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
            let mut reader = RequestReader::new(index);
            let Ok(first) = reader.read_request(&mut stream) else {
                return;
            };
            if first.target == "/slow" {
                thread::sleep(Duration::from_secs(3));
            }
            if first.target == "/r1" {
                let _ = on_answer_r1.lock().unwrap().recv_timeout(WAIT);
            }
            let _ = stream.write_all(&ok(&first.target));
            if first.target == "/r1" {
                // The redirect, sent before r2, then r2: closed unanswered,
                // once the test has seen the redirect's next hop queued.
                if reader.read_request(&mut stream).is_ok() {
                    let _ = stream.write_all(&response(
                        302,
                        &[("Location", "/slow"), ("Content-Length", "0")],
                        b"",
                    ));
                }
                if reader.read_request(&mut stream).is_ok() {
                    let _ = holding.lock().unwrap().send(());
                    let _ = on_release.lock().unwrap().recv_timeout(WAIT);
                }
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
            drain(&mut stream);
        }));
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .max_connections_per_host(1)
            // Long enough that r2, held by the server from its read until the
            // test lets go (a thread's wake-up, a poll), is not failed by
            // it on a loaded machine; the slow request takes three times it.
            .read_timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        // r1 holds the only connection while the redirect, then r2, queue;
        // the redirect is waited on (its next hop follows its head) at once.
        let r1 = client
            .get(server.url("/r1"))
            .read_timeout(Duration::ZERO)
            .send();
        let slow = client
            .get(server.url("/redirect"))
            .read_timeout(Duration::ZERO)
            .send();
        let slow = thread::spawn(move || slow.wait().and_then(|response| response.text().wait()));
        let r2 = client.get(server.url("/r2")).send();
        assert!(eventually(WAIT, || client.stats().waiting == 2));
        answer_r1.send(()).unwrap();
        assert_eq!(r1.wait().unwrap().text().wait().unwrap(), "/r1");
        // The redirect goes first on the connection, then r2, which the
        // server reads and holds; the redirect's next hop, to the slow
        // one, queues for the only permit...
        on_holding.recv_timeout(WAIT).expect("the server got r2");
        assert!(eventually(WAIT, || client.stats().waiting == 1));
        // ...then r2's connection closes under it: r2 is retried, and its
        // retry queues behind the slow request, older, which takes the
        // permit.
        release.send(()).unwrap();
        assert_eq!(slow.join().unwrap().unwrap(), "/slow");
        match r2.wait() {
            Ok(response) => assert_eq!(response.text().wait().unwrap(), "/r2"),
            Err(error) => panic!("mode {event_loop_timeouts}: the retry failed: {error}"),
        }
        // The retry went on a new connection, not on the slow one's,
        // offered back as it was the oldest waiter.
        assert_eq!(server.connections_accepted(), 3);
        assert_settles(&client, WAIT);
        client.close();
    }
}

/// #18, defect 1: a request that ends while queued, whose listener holds
/// the last `Client`. When its caller lets it go, the client closes there
/// and then — and no loop thread is left blocked on the pool's lock.
#[test]
fn a_queued_request_holding_the_last_client_never_wedges_a_loop() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::NeverAnswer);
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .max_connections(1)
            .build()
            .unwrap();
        let group = client.event_loop_group().clone();
        let first = client
            .get(server.url("/first"))
            .request_timeout(Duration::from_millis(1500))
            .send();
        assert!(server.wait_for_requests(1, WAIT));
        // A listener of its own that holds a client: it lives as long as
        // the request does.
        struct Holds(#[allow(dead_code)] Client);
        impl tickless::EventListener for Holds {}
        let queued = client
            .get(server.url("/queued"))
            .request_timeout(Duration::from_millis(100))
            .listener(Arc::new(Holds(client.clone())))
            .send();
        drop(client);
        assert!(matches!(queued.wait(), Err(Error::RequestTimeout(_))));
        // The queued request is gone with its future, and with it the last
        // client: closed now, not by a loop when the first one ends.
        assert!(
            matches!(first.wait(), Err(Error::ClientClosed)),
            "mode {event_loop_timeouts}: the client outlived its last handle"
        );
        assert!(eventually(WAIT, || group.loops()[0].is_shutting_down()));
    }
}

/// #18, defect 2: with one connection in all, a request to B queued before
/// five more to A goes out as soon as A's connection is free — not after
/// them.
#[test]
fn a_request_to_another_origin_is_not_starved_by_younger_requests_to_a_busy_one() {
    let arrivals = Arc::new(std::sync::Mutex::new(Vec::new()));
    let answer = |name: &'static str| {
        let arrivals = arrivals.clone();
        move |request: &RecordedRequest| {
            arrivals
                .lock()
                .unwrap()
                .push(format!("{name}{}", request.target));
            thread::sleep(Duration::from_millis(20));
            ok(&request.target)
        }
    };
    let a = TestServer::respond(answer("a"));
    let b = TestServer::respond(answer("b"));
    let client = Client::builder()
        .event_loops(1)
        .max_connections(1)
        .build()
        .unwrap();
    let a1 = client.get(a.url("/1")).send();
    assert!(a.wait_for_requests(1, WAIT));
    let b1 = client.get(b.url("/1")).send();
    assert!(eventually(WAIT, || client.stats().waiting == 1));
    let younger: Vec<_> = (2..=6)
        .map(|i| client.get(a.url(&format!("/{i}"))).send())
        .collect();
    assert!(a1.wait().is_ok());
    assert!(b1.wait().is_ok());
    for future in younger {
        assert!(future.wait().is_ok());
    }
    let order = arrivals.lock().unwrap().clone();
    assert_eq!(order[..2], ["a/1", "b/1"], "order of arrival: {order:?}");
    client.close();
}

/// #18, defect 5: host names compare case-insensitively, so a URL spelled
/// in capitals reuses the connection and counts against the same limit.
#[test]
fn hosts_differing_only_in_case_share_connections() {
    let server = TestServer::respond(|request| ok(&request.target));
    let client = Client::builder()
        .event_loops(1)
        .max_connections_per_host(1)
        .build()
        .unwrap();
    let port = server.addr().port();
    for host in ["localhost", "LOCALHOST", "LocalHost"] {
        let url = format!("http://{host}:{port}/{host}");
        let response = client.get(url).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), format!("/{host}"));
        assert!(eventually(WAIT, || client.stats().idle_connections == 1));
    }
    assert_eq!(server.connections_accepted(), 1);
    assert_eq!(client.stats().open_connections, 1);
    client.close();
}

/// A server that answers each request with its target, and a client on
/// one loop with `keep_alive(false)`.
fn echo_target_without_keep_alive() -> (TestServer, Client) {
    let server = TestServer::respond(|request| ok(&request.target));
    let client = Client::builder()
        .event_loops(1)
        .keep_alive(false)
        .build()
        .unwrap();
    (server, client)
}

/// #18, defect 6: `keep_alive(false)` holds for a request that names other
/// connection options: `close` joins them, and nothing is pooled.
#[test]
fn keep_alive_off_adds_close_to_a_connection_header_the_request_has() {
    let (server, client) = echo_target_without_keep_alive();
    for _ in 0..2 {
        let response = client
            .get(server.url("/te"))
            .header("Connection", "te")
            .header("TE", "trailers")
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.text().wait().unwrap(), "/te");
    }
    let requests = server.requests();
    assert_eq!(requests[0].header("connection"), Some("te, close"));
    assert_eq!(server.connections_accepted(), 2, "a connection was reused");
    assert_eq!(client.stats().idle_connections, 0);
    client.close();
}

/// `keep_alive(false)` and a request that asks for `close` itself: its
/// `Connection` header goes as the caller wrote it, no second `close`
/// joined to it.
#[test]
fn keep_alive_off_leaves_the_close_a_request_has() {
    let (server, client) = echo_target_without_keep_alive();
    let response = client
        .get(server.url("/said"))
        .header("Connection", "Close")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "/said");
    assert_eq!(server.requests()[0].header_all("connection"), ["Close"]);
    client.close();
}
