//! Tests of the test kit in tests/support, with plain `std::net::TcpStream`
//! as the client.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use support::*;

const WAIT: Duration = Duration::from_secs(5);

/// Read one response framed by Content-Length (test-only, minimal).
fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> (String, Vec<u8>) {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(buf[..end].to_vec()).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = buf[end + 4..end + 4 + len].to_vec();
                buf.drain(..end + 4 + len);
                return (head, body);
            }
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "unexpected EOF");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn respond_keep_alive_round_trip() {
    let server = TestServer::respond(|req| ok(&format!("{} {}", req.method, req.target)));
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    let mut buf = Vec::new();

    // First request split across writes.
    stream
        .write_all(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-")
        .unwrap();
    stream.flush().unwrap();
    thread::sleep(Duration::from_millis(20));
    stream.write_all(b"Length: 5\r\n\r\nhel").unwrap();
    thread::sleep(Duration::from_millis(20));
    stream.write_all(b"lo").unwrap();
    let (head, body) = read_response(&mut stream, &mut buf);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert_eq!(body, b"POST /a");

    stream
        .write_all(b"PUT /b HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc")
        .unwrap();
    let (_, body) = read_response(&mut stream, &mut buf);
    assert_eq!(body, b"PUT /b");

    assert_eq!(server.connections_accepted(), 1);
    assert_eq!(server.connections_open(), 1);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].target, "/a");
    assert_eq!(reqs[0].body, b"hello");
    assert_eq!(reqs[0].header("HOST"), Some("x"));
    assert_eq!(reqs[1].body, b"abc");
    assert_eq!(reqs[1].header("Content-Length"), Some("3"));
    assert!(reqs.iter().all(|r| r.connection_index == 0));

    drop(stream);
    assert!(server.wait_for_open(0, WAIT));
}

#[test]
fn pipelined_requests_and_connection_close() {
    let server = TestServer::respond(|req| ok(&req.target));
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .write_all(
            b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap(); // server closes after /2
    let text = String::from_utf8(all).unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(text.ends_with("/2"));
    assert!(server.wait_for_requests(2, WAIT));
    assert!(server.wait_for_open(0, WAIT));
}

#[test]
fn chunked_request_body_is_decoded() {
    let server = TestServer::respond(|_| ok("done"));
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .write_all(
            b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n",
        )
        .unwrap();
    thread::sleep(Duration::from_millis(20));
    stream
        .write_all(b"7;ext=1\r\n, world\r\n0\r\nX-Sum: 12\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let (_, body) = read_response(&mut stream, &mut buf);
    assert_eq!(body, b"done");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body, b"hello, world");
    assert_eq!(
        reqs[0].trailers,
        vec![("X-Sum".to_string(), "12".to_string())]
    );
}

#[test]
fn response_helpers() {
    assert_eq!(ok("hi"), b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(
        response(404, &[("X-A", "1")], b"no"),
        b"HTTP/1.1 404 Not Found\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nno"
    );
    assert_eq!(
        response(200, &[("Content-Length", "100")], b""),
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
    );
    assert_eq!(
        chunked(200, &[b"abc", b"", b"0123456789abcdef"], &[("T", "v")]),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\n"
    );
    assert!(response_closes(
        b"HTTP/1.1 200 OK\r\nconnection: Close\r\n\r\n"
    ));
    assert!(!response_closes(
        b"HTTP/1.1 200 OK\r\n\r\nConnection: close"
    ));
}

#[test]
fn never_answer_holds_the_connection_open() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(server.wait_for_requests(1, WAIT));
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut byte = [0u8; 1];
    let err = stream.read(&mut byte).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err:?}"
    );
    assert_eq!(server.connections_open(), 1);
}

#[test]
fn send_then_close_truncates_and_reset_resets() {
    let server = TestServer::start(Behaviour::SendThenClose(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort".to_vec(),
    ));
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap();
    assert!(all.ends_with(b"\r\n\r\nshort"));

    let server = TestServer::start(Behaviour::Reset);
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut all = Vec::new();
    let err = stream.read_to_end(&mut all).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn trickle_sends_bytes_slowly() {
    let server = TestServer::start(Behaviour::Trickle {
        bytes: b"HTTP/1.1 200 OK\r\n\r\n".to_vec(),
        interval: Duration::from_millis(5),
        then_stall: false,
    });
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    let start = Instant::now();
    stream.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap();
    assert_eq!(all, b"HTTP/1.1 200 OK\r\n\r\n");
    assert!(start.elapsed() >= Duration::from_millis(5 * 18));
}

#[test]
fn per_connection_behaviour() {
    let server = TestServer::start(Behaviour::per_connection(|i| {
        if i == 0 {
            Behaviour::SendThenClose(Vec::new())
        } else {
            Behaviour::respond(|_| ok("second"))
        }
    }));
    for expected in [&b""[..], b"second"] {
        let mut stream = TcpStream::connect(server.addr()).unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut all = Vec::new();
        stream.read_to_end(&mut all).unwrap();
        assert!(all.ends_with(expected));
    }
    let reqs = server.requests();
    assert_eq!(reqs[0].connection_index, 0);
    assert_eq!(reqs[1].connection_index, 1);
}

#[test]
fn refused_addr_refuses() {
    let err = TcpStream::connect(refused_addr()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

/// The port stays refused however long the test takes: no server (of a
/// test running in parallel) can take it meanwhile, as one could once the
/// port was freed.
#[test]
fn refused_addrs_port_cannot_be_taken_by_a_listener() {
    let addr = refused_addr();
    let taken = std::net::TcpListener::bind(addr);
    assert!(taken.is_err(), "a listener took {addr}");
    let err = TcpStream::connect(addr).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

/// A test's own server waiting for a client that never connects fails
/// (its thread's join with it) instead of blocking the run for ever; one
/// that connects is accepted, read from under the same limit, and the
/// listener waits as before for the next.
#[test]
fn accept_within_gives_up_on_a_client_that_never_connects() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let waiting = thread::spawn(move || {
        accept_within(&listener, Duration::from_millis(50));
    });
    let panic = waiting.join().expect_err("accepted with no client");
    let told = panic.downcast_ref::<String>().expect("a message");
    assert!(told.starts_with("no client connected to"), "{told}");
    assert!(told.contains(&addr.to_string()), "{told}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).unwrap();
    client.write_all(b"hello").unwrap();
    let mut accepted = accept_in_time(&listener);
    let mut said = [0u8; 5];
    accepted.read_exact(&mut said).unwrap();
    assert_eq!(&said, b"hello");
    // A client that stops sending fails a read too, after the same limit.
    assert_eq!(accepted.read_timeout().unwrap(), Some(ACCEPT_LIMIT));
    // The listener's own timeout is as it was: a plain accept waits.
    let listening = socket2::SockRef::from(&listener);
    assert_eq!(listening.read_timeout().unwrap(), None);
}

/// Drop must stop and join every thread promptly even while connections are
/// held open by misbehaving servers. Run on a helper thread so a hang fails
/// the test instead of wedging it.
fn assert_drops_promptly(server: TestServer) {
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let t = thread::spawn(move || {
        drop(server);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(2))
        .expect("TestServer drop did not finish within 2 s");
    t.join().unwrap();
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn drop_joins_promptly_with_connections_open() {
    let behaviours = [
        Behaviour::NeverAnswer,
        Behaviour::SendThenStall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec()),
        Behaviour::Trickle {
            bytes: vec![b'x'; 1000],
            interval: Duration::from_secs(10),
            then_stall: true,
        },
        Behaviour::respond(|_| ok("kept alive")),
    ];
    for behaviour in behaviours {
        let server = TestServer::start(behaviour);
        let mut clients = Vec::new();
        for _ in 0..3 {
            let mut s = TcpStream::connect(server.addr()).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            clients.push(s);
        }
        // An idle connection that never sends a byte, too.
        clients.push(TcpStream::connect(server.addr()).unwrap());
        assert!(server.wait_for_requests(3, WAIT));
        assert!(server.wait_for_accepted(4, WAIT));
        assert_eq!(server.connections_open(), 4);
        assert_drops_promptly(server);
        // The server side is gone: the clients see EOF (or a reset).
        for mut c in clients {
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut sink = Vec::new();
            match c.read_to_end(&mut sink) {
                Ok(_) => {}
                Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e:?}"),
            }
        }
    }
}

#[test]
fn unaccepting_listener_backlog_fills() {
    let mut listener = UnacceptingListener::new();
    if !listener.backlog_filled(5000) {
        // Backlog larger than we are willing to fill here; nothing to check.
        eprintln!("backlog not filled; skipped");
        return;
    }
    let err = TcpStream::connect_timeout(&listener.addr(), Duration::from_millis(100)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
}
