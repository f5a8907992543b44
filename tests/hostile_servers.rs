//! Servers that misbehave: every exchange ends with a clear typed error by
//! its deadline, the connection is closed and never pooled, and nothing is
//! left behind — in both timeout modes.

mod support;

use std::time::Duration;
use support::*;
use tickless::h1::{DecodeError, Limits, Stage};
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(10);

fn client(event_loop_timeouts: bool) -> Client {
    Client::builder()
        .event_loops(2)
        .request_timeout(Duration::from_secs(5))
        .read_timeout(Duration::from_secs(5))
        .use_event_loop_timeouts(event_loop_timeouts)
        .limits(Limits {
            max_head_bytes: 4096,
            max_headers: 16,
            max_body_bytes: None,
            max_trailer_bytes: 256,
        })
        .build()
        .unwrap()
}

/// After a failed exchange: the server saw the connection closed, and the
/// client holds no connection, timer or exchange.
fn assert_clean(client: &Client, server: &TestServer) {
    assert!(server.wait_for_open(0, WAIT), "connection left open");
    assert_settles(client, WAIT);
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0),
        "{:?}",
        client.stats()
    );
}

/// Whether a decode error is the one a case expects.
type IsExpected = fn(&DecodeError) -> bool;

#[test]
fn malformed_responses_are_protocol_errors_and_close_the_connection() {
    let head_too_large = format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "a".repeat(5000));
    let many_headers = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X-H: v\r\n".repeat(17));
    let big_trailers = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-T: {}\r\n\r\n",
        "t".repeat(300)
    );
    // A size line that never ends: zeros that say nothing, read for as
    // long as they come (the server stalls after them).
    let endless_size = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        "0".repeat(2000)
    );
    // Interim heads that never end in a final one (then the server stalls).
    let endless_interim = "HTTP/1.1 102 Processing\r\n\r\n".repeat(1000);
    let cases: Vec<(&str, Vec<u8>, IsExpected)> = vec![
        (
            "invalid status line",
            b"HTTX/1.1 200 OK\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::InvalidStatusLine),
        ),
        ("bad version", b"HTTP/2.0 200 OK\r\n\r\n".to_vec(), |e| {
            matches!(e, DecodeError::BadVersion)
        }),
        (
            "non-numeric status",
            b"HTTP/1.1 2x0 OK\r\n\r\n".to_vec(),
            |e| {
                matches!(
                    e,
                    DecodeError::InvalidStatusCode | DecodeError::InvalidStatusLine
                )
            },
        ),
        (
            "status out of range",
            b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::InvalidStatusCode),
        ),
        (
            "header without colon",
            b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::HeaderWithoutColon),
        ),
        (
            "obs-fold",
            b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::ObsFold),
        ),
        (
            "invalid header byte",
            b"HTTP/1.1 200 OK\r\nX-A: a\x01b\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::InvalidHeaderValue),
        ),
        ("head too large", head_too_large.into_bytes(), |e| {
            matches!(e, DecodeError::HeadTooLarge { .. })
        }),
        ("too many headers", many_headers.into_bytes(), |e| {
            matches!(e, DecodeError::TooManyHeaders { .. })
        }),
        (
            "invalid Content-Length",
            b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::InvalidContentLength),
        ),
        (
            "conflicting Content-Length",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello".to_vec(),
            |e| matches!(e, DecodeError::ConflictingContentLength { .. }),
        ),
        (
            "Content-Length with Transfer-Encoding",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
            |e| matches!(e, DecodeError::ContentLengthWithTransferEncoding),
        ),
        (
            "chunked after a transfer coding",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::UnknownTransferCoding(_)),
        ),
        (
            "non-hex chunk size",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            |e| matches!(e, DecodeError::InvalidChunkSize),
        ),
        (
            "chunk size overflow",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n"
                .to_vec(),
            |e| matches!(e, DecodeError::ChunkSizeOverflow),
        ),
        ("padded chunk size", endless_size.into_bytes(), |e| {
            matches!(e, DecodeError::InvalidChunkSize)
        }),
        (
            "missing CRLF after chunk data",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY".to_vec(),
            |e| matches!(e, DecodeError::MissingCrlfAfterChunkData),
        ),
        ("trailers over the limit", big_trailers.into_bytes(), |e| {
            matches!(e, DecodeError::TrailersTooLarge { .. })
        }),
        ("endless interim heads", endless_interim.into_bytes(), |e| {
            matches!(e, DecodeError::InterimResponsesTooLarge { .. })
        }),
        (
            "101 without an upgrade",
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n".to_vec(),
            |e| matches!(e, DecodeError::SwitchingProtocols),
        ),
    ];
    for event_loop_timeouts in [false, true] {
        let client = client(event_loop_timeouts);
        for (name, bytes, expected) in &cases {
            // The server stalls after sending: closing is the client's job.
            let server = TestServer::start(Behaviour::SendThenStall(bytes.clone()));
            // A broken head fails the future; a broken body, its reading.
            let error = client
                .get(server.url("/"))
                .send()
                .wait()
                .and_then(|response| response.bytes().wait())
                .unwrap_err();
            match &error {
                Error::Protocol { source, .. } => assert!(expected(source), "{name}: {source:?}"),
                other => panic!("{name}: expected a protocol error, got {other:?}"),
            }
            assert!(!error.to_string().is_empty());
            assert_clean(&client, &server);
        }
        client.close();
    }
}

/// The client does not take upgrades: a `101 Switching Protocols` to a
/// request that asked for one (the caller's own `Upgrade` and
/// `Connection: upgrade`) fails saying so — not that none was asked — and
/// its connection, now the other protocol's, is closed.
#[test]
fn a_switch_to_the_protocol_the_caller_asked_for_fails_as_unsupported() {
    let switched = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
        Connection: upgrade\r\n\r\n";
    let client = client(false);
    let server = TestServer::start(Behaviour::SendThenStall(switched.to_vec()));
    let error = client
        .get(server.url("/chat"))
        .header("upgrade", "websocket")
        .header("connection", "upgrade")
        .send()
        .wait()
        .unwrap_err();
    match &error {
        Error::Protocol { source, .. } => assert!(
            matches!(source, DecodeError::UpgradeNotSupported),
            "{source:?}"
        ),
        other => panic!("expected a protocol error, got {other:?}"),
    }
    let message = chain_text(&error);
    assert!(message.contains("upgrades are not supported"), "{message}");
    assert!(!message.contains("no upgrade was requested"), "{message}");
    assert_eq!(
        server.requests()[0].header("upgrade"),
        Some("websocket"),
        "the caller's Upgrade went out"
    );
    assert_clean(&client, &server);
    client.close();
}

#[test]
fn a_peer_closing_inside_a_framed_body_is_an_error_never_a_short_success() {
    let cases: [(&[u8], Stage); 4] = [
        (b"HTTP/1.1 200 OK\r\nContent-Le", Stage::Head),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            Stage::LengthBody,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            Stage::ChunkedBody,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n",
            Stage::Trailers,
        ),
    ];
    let client = client(false);
    for (bytes, stage) in cases {
        let server = TestServer::start(Behaviour::SendThenClose(bytes.to_vec()));
        let error = client
            .get(server.url("/"))
            .send()
            .wait()
            .and_then(|r| r.bytes().wait())
            .unwrap_err();
        assert!(
            matches!(&error, Error::Protocol { source: DecodeError::Truncated { stage: s }, .. } if *s == stage),
            "{stage:?}: {error:?}"
        );
        assert_clean(&client, &server);
    }
    client.close();
}

/// A body cut short, read as `std::io::Read`, fails as `read_exact` and an
/// HTTP/2 body closed early do: `UnexpectedEof`, the tickless error inside.
#[test]
fn a_body_cut_short_reads_as_an_unexpected_eof() {
    use std::io::Read;
    let client = client(false);
    for bytes in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"[..],
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"[..],
    ] {
        let server = TestServer::start(Behaviour::SendThenClose(bytes.to_vec()));
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        let mut got = Vec::new();
        let error = response.body_mut().read_to_end(&mut got).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{error}");
        let inner = error.get_ref().and_then(|e| e.downcast_ref::<Error>());
        assert!(
            matches!(
                inner,
                Some(Error::Protocol {
                    source: DecodeError::Truncated { .. },
                    ..
                })
            ),
            "{error:?}"
        );
        assert_eq!(tickless::timeout_kind(&error), None);
        drop(response);
        assert_clean(&client, &server);
    }
    client.close();
}

#[test]
fn resets_mid_head_and_mid_body_are_errors() {
    let client = client(false);
    for partial in [
        &b"HTTP/1.1 200 OK\r\nX-"[..],
        &b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"[..],
    ] {
        let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
            use std::io::Write;
            let mut reader = RequestReader::new(index);
            let _ = reader.read_request(&mut stream);
            let _ = stream.write_all(partial);
            // Linger zero: close with a reset.
            let socket = socket2::SockRef::from(&stream);
            let _ = socket.set_linger(Some(Duration::ZERO));
        }));
        let error = client
            .get(server.url("/"))
            .send()
            .wait()
            .and_then(|r| r.bytes().wait())
            .unwrap_err();
        match &error {
            Error::Io { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::ConnectionReset)
            }
            Error::Protocol {
                source: DecodeError::Truncated { .. },
                ..
            } => {}
            other => panic!("expected a reset or a truncation, got {other:?}"),
        }
        assert_clean(&client, &server);
    }
    client.close();
}

#[test]
fn a_peer_that_never_reads_a_large_body_is_ended_by_the_request_timeout() {
    for event_loop_timeouts in [false, true] {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = {
            let done = done.clone();
            TestServer::start(Behaviour::custom(move |stream, _| {
                // Accept, never read: the socket buffers fill and stay full.
                let _held = stream;
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }))
        };
        let client = client(event_loop_timeouts);
        let started = std::time::Instant::now();
        let error = client
            .post(server.url("/upload"))
            .body(vec![b'x'; 32 * 1024 * 1024])
            .request_timeout(Duration::from_millis(300))
            .send()
            .wait()
            .and_then(|r| r.bytes().wait())
            .unwrap_err();
        assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_settles(&client, WAIT);
        client.close();
        done.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Answers the first request of each connection, then reads the second and
/// closes without a byte: a keep-alive connection the server dropped.
fn answers_once_then_drops() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, index| {
        use std::io::Write;
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_ok() {
            let _ = stream.write_all(&ok("first"));
            let _ = reader.read_request(&mut stream);
        }
    }))
}

#[test]
fn an_idempotent_request_on_a_dropped_pooled_connection_is_retried_once() {
    let server = answers_once_then_drops();
    let client = client(false);
    assert_eq!(
        client
            .get(server.url("/a"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "first"
    );
    let second = client.get(server.url("/b")).send().wait().unwrap();
    assert_eq!(
        second.text().wait().unwrap(),
        "first",
        "answered by a fresh connection"
    );
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

#[test]
fn a_non_idempotent_request_on_a_dropped_pooled_connection_is_not_retried() {
    let server = answers_once_then_drops();
    let client = client(false);
    client
        .get(server.url("/a"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    let error = client
        .post(server.url("/b"))
        .body("once")
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::Protocol {
                source: DecodeError::Truncated { stage: Stage::Head },
                ..
            } | Error::Io { .. }
        ),
        "{error:?}"
    );
    // The server read it before it closed: it may have processed it.
    assert!(!error.is_unprocessed(), "{error}");
    assert_eq!(
        server.connections_accepted(),
        1,
        "a POST must not be sent twice"
    );
    client.close();
}

#[test]
fn unsolicited_bytes_on_an_idle_connection_never_reach_the_next_request() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let sent = Arc::new(AtomicBool::new(false));
    let server = {
        let sent = sent.clone();
        TestServer::start(Behaviour::custom(move |mut stream, index| {
            use std::io::Write;
            let mut reader = RequestReader::new(index);
            if reader.read_request(&mut stream).is_ok() {
                let _ = stream.write_all(&ok("first"));
                std::thread::sleep(Duration::from_millis(50));
                // A response nobody asked for.
                let _ = stream.write_all(&ok("unsolicited"));
                sent.store(true, Ordering::Release);
                let _ = reader.read_request(&mut stream);
                let _ = stream.write_all(&ok("second on the same connection"));
            }
        }))
    };
    let client = client(false);
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    // Only once the stray bytes are on their way: the next request must
    // see them as the pooled connection's fault, not as its response.
    assert!(eventually(WAIT, || sent.load(Ordering::Acquire)));
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(
        response.text().wait().unwrap(),
        "first",
        "served by a new connection"
    );
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

/// Holds the loop for a while once a request is written, so that all of
/// the answer is on the socket before the loop's first read of it.
struct HoldAfterSending;

impl tickless::EventListener for HoldAfterSending {
    fn on_request_sent(&self, _: &tickless::RequestInfo, _: &tickless::ConnectionInfo) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server that sends TCP urgent data mid-body (out of band: a read stops
/// short at it, in-band bytes still queued behind it, and no further event
/// announces them): the whole body is read, on a connection kept open —
/// not left waiting for bytes that have arrived already. The loop reads
/// only once all of it is there. Linux, where the client registers for
/// urgent data.
#[cfg(target_os = "linux")]
#[test]
fn bytes_queued_behind_urgent_data_are_read() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let server = TestServer::start(Behaviour::custom(|mut stream, index| {
        if RequestReader::new(index).read_request(&mut stream).is_err() {
            return;
        }
        // 200 in-band body bytes, an urgent byte between their halves.
        let mut first = b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n".to_vec();
        first.extend_from_slice(&[b'a'; 100]);
        stream.write_all(&first).unwrap();
        let urgent = [b'!'];
        // SAFETY: the descriptor is the open socket `stream` owns, and the
        // buffer a live 1-byte array; send only reads it.
        let sent =
            unsafe { libc::send(stream.as_raw_fd(), urgent.as_ptr().cast(), 1, libc::MSG_OOB) };
        assert_eq!(sent, 1);
        stream.write_all(&[b'b'; 100]).unwrap();
        // Kept open until the client goes.
        while matches!(stream.read(&mut [0; 64]), Ok(n) if n > 0) {}
    }));
    let client = Client::builder()
        .event_loops(1)
        .keep_alive(false)
        .listener(std::sync::Arc::new(HoldAfterSending))
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for round in 0..3 {
        let body = client
            .get(server.url("/"))
            .send()
            .wait()
            .and_then(|response| response.bytes().wait())
            .unwrap_or_else(|error| panic!("round {round}: {error}"));
        assert_eq!(&body[..100], &[b'a'; 100][..], "round {round}");
        assert_eq!(&body[100..], &[b'b'; 100][..], "round {round}");
    }
    client.close();
}
