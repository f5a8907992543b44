//! Servers that answer in ways a client must cope with, though they break no
//! rule: one that speaks as soon as it accepts, one that refuses an
//! upload before it has read it, and one that answers `408 Request Timeout`
//! on a keep-alive connection it timed out. No timeout is set: an exchange that is not
//! ended by the server's answer would hang, and the test's ceiling says so.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::{Error, Response};

const WAIT: Duration = Duration::from_secs(10);

/// Waits (up to [`WAIT`]) until every byte written on `stream` has reached
/// its peer's socket: none is left unacknowledged, which on loopback the
/// peer's kernel does as it queues them. Ordering, not a sleep: the early
/// answers below must be in the client's socket before its loop looks.
fn delivered(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let give_up = Instant::now() + WAIT;
    loop {
        let mut unacknowledged: libc::c_int = 0;
        // SAFETY: `TIOCOUTQ` writes one `c_int` through the pointer, which
        // points at a live local; the descriptor is `stream`'s, open.
        let asked = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut unacknowledged) };
        if asked != 0 || unacknowledged == 0 || Instant::now() >= give_up {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// The outcome of `future`, which must come within [`WAIT`].
fn outcome(future: tickless::ResponseFuture) -> Result<Response, Error> {
    assert!(eventually(WAIT, || future.is_done()), "never resolved");
    future.wait()
}

/// Reads `stream` until the end of a request head.
fn read_head(stream: &mut TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn an_answer_already_there_when_the_connect_is_seen_is_read() {
    // The loop is held just after it starts the connect, until the server
    // has accepted and answered: it then sees the connect done and the
    // answer waiting in one readiness, which will not come again.
    let answered = Arc::new(AtomicBool::new(false));
    let server = {
        let answered = answered.clone();
        TestServer::start(Behaviour::custom(move |mut stream, _| {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEARLY");
            delivered(&stream);
            answered.store(true, Ordering::Release);
            // Keep the connection open, reading what comes.
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        }))
    };
    let client = untimed_client();
    let future = client.get(server.url("/")).send();
    client.event_loop_group().loops()[0]
        .execute(move |_| {
            let give_up = Instant::now() + WAIT;
            while !answered.load(Ordering::Acquire) && Instant::now() < give_up {
                thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
    let response = outcome(future).expect("the answer that was waiting");
    assert_eq!(response.text().wait().unwrap(), "EARLY");
    assert_settles(&client, WAIT);
    client.close();
}

/// Holds the loop once a connection is made, until the flag is set (or
/// [`WAIT`] has passed): what the server sent is in the socket by then.
struct HoldUntil(Arc<AtomicBool>);

impl tickless::EventListener for HoldUntil {
    fn on_connect_success(&self, _: &tickless::RequestInfo, _: &tickless::ConnectionInfo) {
        let give_up = Instant::now() + WAIT;
        while !self.0.load(Ordering::Acquire) && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A server that spoke before it saw the request (as the test above) and
/// would answer the request too, later: its first answer is to no request,
/// so every answer on its connection after it would be one off. The
/// connection must not carry another request, which would be given the
/// answer to the one before it; nor is the request sent, whose own answer
/// nothing would read.
#[test]
fn a_connection_whose_server_spoke_before_the_request_is_not_reused() {
    let answered = Arc::new(AtomicBool::new(false));
    let (first_seen, saw_first) = std::sync::mpsc::channel();
    let first_seen = std::sync::Mutex::new(first_seen);
    let server = {
        let answered = answered.clone();
        TestServer::start(Behaviour::custom(move |mut stream, index| {
            if index > 0 {
                // A fresh connection: each request answered with its target.
                while let Some(head) = support::read_head(&mut stream) {
                    let target = head.split(' ').nth(1).unwrap_or_default().to_owned();
                    if stream.write_all(&ok(&target)).is_err() {
                        return;
                    }
                }
                return;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEARLY");
            delivered(&stream);
            answered.store(true, Ordering::Release);
            // The answer to the first request goes only once a second one
            // has come on this connection (if one does): it is then the
            // answer that second request would read.
            let first = support::read_head(&mut stream);
            let _ = first_seen.lock().unwrap().send(first.is_some());
            let second = support::read_head(&mut stream);
            if let (Some(first), Some(_)) = (first, second) {
                let target = first.split(' ').nth(1).unwrap_or_default().to_owned();
                let _ = stream.write_all(&ok(&target));
            }
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        }))
    };
    // The loop is held as the connect is done, before the request goes,
    // until the server has spoken: the early answer is there first.
    let client = tickless::Client::builder()
        .event_loops(1)
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .listener(Arc::new(HoldUntil(answered)))
        .build()
        .expect("client");
    let future = client.get(server.url("/first")).send();
    let response = outcome(future).expect("the answer that was waiting");
    assert_eq!(response.text().wait().unwrap(), "EARLY");
    let response = outcome(client.get(server.url("/second")).send()).expect("the second answer");
    assert_eq!(
        response.text().wait().unwrap(),
        "/second",
        "the second request was given another request's answer"
    );
    assert_eq!(
        saw_first.recv_timeout(WAIT),
        Ok(false),
        "the request answered before it went was sent all the same"
    );
    assert_settles(&client, WAIT);
    client.close();
}

/// A server speaking another protocol — HTTP/2 with prior knowledge, whose
/// first bytes are a SETTINGS frame, with no line end — before the request
/// goes (the loop held at connect until they are there) or after it: the
/// request fails at once as a protocol error (an invalid status line), not
/// when a timeout fires — none is set here, so it would hang. Such a server
/// waits for its own preface and sends nothing more.
#[test]
fn a_server_speaking_another_protocol_fails_the_request_at_once() {
    const SETTINGS_FRAME: &[u8] = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64";
    for speaks_first in [true, false] {
        let spoken = Arc::new(AtomicBool::new(false));
        let server = {
            let spoken = spoken.clone();
            TestServer::start(Behaviour::custom(move |mut stream, _| {
                if !speaks_first {
                    read_head(&mut stream);
                }
                let _ = stream.write_all(SETTINGS_FRAME);
                delivered(&stream);
                spoken.store(true, Ordering::Release);
                let _ = std::io::copy(&mut stream, &mut std::io::sink());
            }))
        };
        let mut client = tickless::Client::builder()
            .event_loops(1)
            .request_timeout(Duration::ZERO)
            .read_timeout(Duration::ZERO);
        if speaks_first {
            client = client.listener(Arc::new(HoldUntil(spoken)));
        }
        let client = client.build().expect("client");
        let error = outcome(client.get(server.url("/")).send()).unwrap_err();
        assert!(
            matches!(
                &error,
                Error::Protocol {
                    source: tickless::h1::DecodeError::InvalidStatusLine,
                    ..
                }
            ),
            "speaks first: {speaks_first}: {error:?}"
        );
        assert_settles(&client, WAIT);
        client.close();
    }
}

#[test]
fn an_early_refusal_of_an_upload_is_the_answer_not_the_reset_that_follows() {
    // RFC 9112 §9.5: the server answers 413 after the head and closes
    // without reading the body, so the client's writes fail with a reset
    // while the answer sits in its socket: framed by its length, or by the
    // end of the stream (the server shuts its side down first).
    let framed: &[u8] = b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n\
                          Content-Length: 8\r\n\r\ntoo big!";
    let to_the_end: &[u8] = b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n\r\ntoo big!";
    for answer in [framed, to_the_end] {
        let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
            read_head(&mut stream);
            let _ = stream.write_all(answer);
            let _ = stream.shutdown(std::net::Shutdown::Write);
            // Dropped with the body unread: the kernel resets the connection.
        }));
        let client = untimed_client();
        for method in [http::Method::POST, http::Method::PUT] {
            let future = client
                .request(method.clone(), server.url("/upload"))
                .body(vec![b'x'; 32 * 1024 * 1024])
                .send();
            let response = outcome(future).unwrap_or_else(|e| panic!("{method}: {e:?}"));
            assert_eq!(response.status(), 413, "{method}");
            assert_eq!(response.text().wait().unwrap(), "too big!", "{method}");
        }
        assert_settles(&client, WAIT);
        assert!(
            eventually(WAIT, || client.stats().open_connections == 0),
            "a half-sent connection was kept: {:?}",
            client.stats()
        );
        client.close();
    }
}

/// What a server that gave up on an idle connection writes before it
/// closes it (Apache, Node and HAProxy say `Connection: close`).
const TIMED_OUT: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// On its first connection, answers the first request with `0 <target>`,
/// then the second with [`TIMED_OUT`] and closes: the idle keep-alive
/// connection it timed out just as the client's next request came. Every
/// later connection answers each request with `<connection> <target>`.
/// Every request is recorded.
fn times_out_its_pooled_connection() -> TestServer {
    TestServer::start(Behaviour::per_connection(|index| {
        if index > 0 {
            return Behaviour::respond(|request| {
                ok(&format!("{} {}", request.connection_index, request.target))
            });
        }
        let answered = AtomicBool::new(false);
        Behaviour::respond(move |request| {
            if answered.swap(true, Ordering::SeqCst) {
                TIMED_OUT.to_vec()
            } else {
                ok(&format!("0 {}", request.target))
            }
        })
    }))
}

/// The (connection, target) of every request `server` has read.
fn requests_seen(server: &TestServer) -> Vec<(usize, String)> {
    let requests = server.requests();
    requests
        .into_iter()
        .map(|request| (request.connection_index, request.target))
        .collect()
}

#[test]
fn a_408_on_a_pooled_connection_sends_the_request_again_on_a_new_one() {
    let server = times_out_its_pooled_connection();
    let recorder = Recorder::new();
    let client = tickless::Client::builder()
        .event_loops(1)
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .listener(recorder.clone())
        .build()
        .unwrap();
    let first = outcome(client.get(server.url("/a")).send()).unwrap();
    assert_eq!(first.text().wait().unwrap(), "0 /a");
    let second = outcome(client.get(server.url("/b")).send()).unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(
        second.text().wait().unwrap(),
        "1 /b",
        "answered on a new connection"
    );
    assert_eq!(
        requests_seen(&server),
        [(0, "/a".into()), (0, "/b".into()), (1, "/b".into())]
    );
    assert_eq!(server.connections_accepted(), 2);
    // As a close before the answer: the 408 is told to nobody, and the
    // request goes again without a policy's retry.
    let (statuses, retried) = recorder.statuses_and_retried();
    assert_eq!(statuses, [200, 200], "{:?}", recorder.events());
    assert!(!retried, "{:?}", recorder.events());
    client.close();
}

/// A PUT (it may go twice) of a body in memory too large to share the
/// head's buffer goes again whole on the new connection.
#[test]
fn a_408_on_a_pooled_connection_sends_a_large_put_again_whole() {
    let body: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    let server = times_out_its_pooled_connection();
    let client = untimed_client();
    let first = outcome(client.get(server.url("/a")).send()).unwrap();
    assert_eq!(first.text().wait().unwrap(), "0 /a");
    let second = outcome(client.put(server.url("/b")).body(body.clone()).send()).unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(second.text().wait().unwrap(), "1 /b");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1].body == body && requests[2].body == body);
    assert_eq!(requests[2].connection_index, 1);
    client.close();
}

/// A PUT of a file's body (`Upload::from_file`, read again from where it
/// began by each exchange that sends it) goes again whole on the new
/// connection, as one in memory does — where a body from any other `Read`
/// went once, and the 408 is the answer.
#[test]
fn a_408_on_a_pooled_connection_sends_a_put_of_a_file_again_whole() {
    use std::io::{Seek, SeekFrom};
    let body: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    let (_dir, path) = real::temp_file("408-file", &[&b"skipped|"[..], &body].concat());
    let client = untimed_client();
    let server = times_out_its_pooled_connection();
    let first = outcome(client.get(server.url("/a")).send()).unwrap();
    assert_eq!(first.text().wait().unwrap(), "0 /a");
    let mut file = std::fs::File::open(&path).unwrap();
    file.seek(SeekFrom::Start(8)).unwrap();
    let upload = tickless::Upload::from_file(file).unwrap();
    let second = outcome(client.put(server.url("/b")).body(upload).send()).unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(second.text().wait().unwrap(), "1 /b");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests[1..] {
        assert!(request.body == body, "{} bytes", request.body.len());
    }
    assert_eq!(requests[2].connection_index, 1);

    let server = times_out_its_pooled_connection();
    let first = outcome(client.get(server.url("/a")).send()).unwrap();
    assert_eq!(first.text().wait().unwrap(), "0 /a");
    let reader = std::io::Cursor::new(body.clone());
    let upload = tickless::Upload::from_reader(reader, Some(body.len() as u64));
    let second = outcome(client.put(server.url("/b")).body(upload).send()).unwrap();
    assert_eq!(second.status(), 408);
    assert_eq!(requests_seen(&server), [(0, "/a".into()), (0, "/b".into())]);
    client.close();
}

#[test]
fn a_408_on_a_pooled_connection_to_a_post_is_the_answer() {
    // The same rule as for a close before the answer: a request that may
    // not go twice does not.
    let server = times_out_its_pooled_connection();
    let client = untimed_client();
    let first = outcome(client.get(server.url("/a")).send()).unwrap();
    assert_eq!(first.text().wait().unwrap(), "0 /a");
    let second = outcome(client.post(server.url("/b")).body("once").send()).unwrap();
    assert_eq!(second.status(), 408);
    assert_eq!(requests_seen(&server), [(0, "/a".into()), (0, "/b".into())]);
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

#[test]
fn a_408_on_a_new_connection_is_the_answer() {
    let server = TestServer::respond(|_| TIMED_OUT.to_vec());
    let client = untimed_client();
    let response = outcome(client.get(server.url("/a")).send()).unwrap();
    assert_eq!(response.status(), 408);
    assert_eq!(requests_seen(&server), [(0, "/a".into())]);
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}
