//! Servers that answer in ways a client must cope with, though they break no
//! rule: one that speaks as soon as it accepts, and one that refuses an
//! upload before it has read it. No timeout is set: an exchange that is not
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
            // The answer is in flight on loopback: let it land.
            thread::sleep(Duration::from_millis(20));
        })
        .unwrap();
    let response = outcome(future).expect("the answer that was waiting");
    assert_eq!(response.text().wait().unwrap(), "EARLY");
    assert_settles(&client, WAIT);
    client.close();
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
