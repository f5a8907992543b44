//! Bodies as streams, both ways: the bounded window, backpressure against
//! the read timeout, `Expect: 100-continue`, truncation found where it is
//! read, a dropped body, async readers, uploads from a `Read`, a file and
//! an async body — and an upload the server answers before it ends: stopped
//! by a refusal, not by a 2xx or an interim answer.

mod support;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::{Bytes, Client, Error, ResponseFuture, Upload};

const WAIT: Duration = Duration::from_secs(10);
const WINDOW: usize = 256 * 1024;

/// One loop, a window of [`WINDOW`], timeouts where `event_loop_timeouts`
/// says.
fn builder(event_loop_timeouts: bool) -> tickless::ClientBuilder {
    Client::builder()
        .event_loops(1)
        .use_event_loop_timeouts(event_loop_timeouts)
        .body_window(WINDOW)
}

fn client(event_loop_timeouts: bool) -> Client {
    builder(event_loop_timeouts)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Writes a body of `total` bytes as fast as the client takes it, counting
/// what went out.
fn endless(total: u64, written: Arc<AtomicU64>) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n");
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let chunk = vec![b'w'; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            let n = chunk.len().min((total - sent) as usize);
            if stream.write_all(&chunk[..n]).is_err() {
                return;
            }
            sent += n as u64;
            written.store(sent, Ordering::SeqCst);
        }
        drain(&mut stream);
    }))
}

/// [`endless`] framed by chunks of 64 KiB: a body of unknown length.
fn endless_chunked(total: u64, written: Arc<AtomicU64>) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let mut chunk = b"10000\r\n".to_vec();
        chunk.extend_from_slice(&[b'w'; 64 * 1024]);
        chunk.extend_from_slice(b"\r\n");
        let mut sent = 0;
        while sent < total {
            if stream.write_all(&chunk).is_err() {
                return;
            }
            sent += 64 * 1024;
            written.store(sent, Ordering::SeqCst);
        }
        let _ = stream.write_all(b"0\r\n\r\n");
        drain(&mut stream);
    }))
}

/// Waits until `value` has stood still for a while (the sender is blocked).
fn settled(value: &AtomicU64) -> u64 {
    let mut last = value.load(Ordering::SeqCst);
    let give_up = Instant::now() + WAIT;
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = value.load(Ordering::SeqCst);
        if now == last || Instant::now() > give_up {
            return now;
        }
        last = now;
    }
}

#[test]
fn a_reader_that_does_not_read_holds_at_most_a_window_of_its_body() {
    a_reader_that_does_not_read_holds_at_most_a_window_of(endless);
}

/// A body of unknown length is held back from a pipe nobody has touched
/// (the connection's deferred bytes): bounded by the window all the same,
/// and counted.
#[test]
fn a_reader_that_does_not_read_holds_at_most_a_window_of_its_chunked_body() {
    a_reader_that_does_not_read_holds_at_most_a_window_of(endless_chunked);
}

fn a_reader_that_does_not_read_holds_at_most_a_window_of(
    server: fn(u64, Arc<AtomicU64>) -> TestServer,
) {
    let written = Arc::new(AtomicU64::new(0));
    let server = server(100 << 20, written.clone());
    let client = client(false);
    let response = client.get(server.url("/")).send().wait().unwrap();
    let sent = settled(&written);
    let buffered = client.stats().buffered_body_bytes;
    assert!(
        buffered <= WINDOW + 64 * 1024,
        "{buffered} bytes buffered for a window of {WINDOW}"
    );
    assert!(buffered > 0, "nothing read ahead");
    assert!(
        sent < 100 << 20,
        "the server sent everything: no backpressure"
    );
    drop(response);
    assert!(server.wait_for_open(0, WAIT), "the connection stayed open");
    assert_settles(&client, WAIT);
    assert_eq!(client.stats().buffered_body_bytes, 0);
    client.close();
}

#[test]
fn a_reader_that_stalls_is_no_read_timeout_but_a_silent_server_is() {
    for event_loop_timeouts in [false, true] {
        // 4 MiB, far past the window: the loop stops reading while the
        // reader sleeps past the read timeout (four times over), and no
        // timeout fires. The timeout is generous for the server's pauses
        // once reading resumes: a loaded machine can stall it for 100s of ms.
        let written = Arc::new(AtomicU64::new(0));
        let server = endless(4 << 20, written);
        let client = builder(event_loop_timeouts)
            .read_timeout(Duration::from_millis(500))
            .wheel_tick(Duration::from_millis(10))
            .build()
            .unwrap();
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        thread::sleep(Duration::from_millis(2000));
        let mut read = 0;
        let mut buf = vec![0; 64 * 1024];
        loop {
            match response.body_mut().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(error) => panic!("mode {event_loop_timeouts}: {error} after {read} bytes"),
            }
        }
        assert_eq!(read, 4 << 20, "mode {event_loop_timeouts}");

        // A server that goes silent mid-body is a read timeout, told where
        // the body is read.
        let silent = TestServer::start(Behaviour::SendThenStall(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome".to_vec(),
        ));
        let response = client.get(silent.url("/")).send().wait().unwrap();
        let error = response.bytes().wait().unwrap_err();
        assert!(
            matches!(error, Error::ReadTimeout(_)),
            "mode {event_loop_timeouts}: {error:?}"
        );
        assert_settles(&client, WAIT);
        client.close();
    }
}

/// A server that declares 100 bytes of body, sends 50 and closes.
fn truncating() -> TestServer {
    let mut wire = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec();
    wire.extend_from_slice(&[b'h'; 50]);
    TestServer::start(Behaviour::SendThenClose(wire))
}

/// Reads `response`'s body as a stream until it fails: the bytes that came
/// before the error, and the client's error inside the `io::Error`.
fn read_to_error(response: &mut tickless::Response) -> (Vec<u8>, Error) {
    let mut got = Vec::new();
    let error = response.body_mut().read_to_end(&mut got).unwrap_err();
    let inner = error.into_inner().expect("a tickless error inside");
    (got, *inner.downcast::<Error>().unwrap())
}

/// A chunked head and one chunk of 50 bytes, no more.
fn one_chunk_of_fifty() -> Vec<u8> {
    let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n".to_vec();
    wire.extend_from_slice(&[b'h'; 50]);
    wire.extend_from_slice(b"\r\n");
    wire
}

#[test]
fn a_truncated_body_is_an_error_where_it_is_read_never_a_short_success() {
    let server = truncating();
    let client = client(false);
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let (got, error) = read_to_error(&mut response);
    assert_eq!(got.len(), 50, "the bytes before the cut are delivered");
    assert!(matches!(error, Error::Protocol { .. }), "{error:?}");
    client.close();
}

/// Bytes of a body of unknown length that came before its reader first
/// looked are held back for it (see `Conn::push_gathered`): a cut found
/// meanwhile still delivers them before the error.
#[test]
fn a_chunked_body_cut_before_its_reader_looks_gives_its_bytes_then_the_error() {
    let server = TestServer::start(Behaviour::SendThenClose(one_chunk_of_fifty()));
    let client = client(false);
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    // The loop reads the chunk and the close meanwhile.
    assert!(server.wait_for_open(0, WAIT), "the server did not close");
    thread::sleep(Duration::from_millis(200));
    let (got, error) = read_to_error(&mut response);
    assert_eq!(got, [b'h'; 50], "the bytes before the cut are delivered");
    assert!(matches!(error, Error::Protocol { .. }), "{error:?}");
    client.close();
}

/// A server that sends a chunked head and a first chunk of `FIRST` bytes,
/// then the end only once `go` is set (or, after [`WAIT`], closes).
fn first_chunk_then_waits(go: Arc<AtomicBool>) -> TestServer {
    first_chunk_then(go, b"0\r\n\r\n")
}

/// [`first_chunk_then_waits`], sending `then` once `go` is set.
fn first_chunk_then(go: Arc<AtomicBool>, then: &'static [u8]) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        let mut wire =
            format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{FIRST:x}\r\n")
                .into_bytes();
        wire.extend_from_slice(&[b'f'; FIRST]);
        wire.extend_from_slice(b"\r\n");
        if stream.write_all(&wire).is_err() {
            return;
        }
        if eventually(WAIT, || go.load(Ordering::SeqCst)) {
            let _ = stream.write_all(then);
            drain(&mut stream);
        }
    }))
}

const FIRST: usize = 1000;

/// The first chunk, read with the head and held back for a reader who had
/// not looked yet, reaches that reader when it first reads — before the
/// server sends anything more (it waits for the client to have it).
#[test]
fn bytes_held_for_a_late_reader_reach_its_first_read_blocking() {
    let go = Arc::new(AtomicBool::new(false));
    let server = first_chunk_then_waits(go.clone());
    let client = client(false);
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    thread::sleep(Duration::from_millis(100));
    let mut got = vec![0; 2 * FIRST];
    let mut n = 0;
    while n < FIRST {
        let read = response.body_mut().read(&mut got[n..]).unwrap();
        assert!(read > 0, "the body ended after {n} bytes");
        n += read;
    }
    assert_eq!(&got[..n], &[b'f'; FIRST][..]);
    go.store(true, Ordering::SeqCst);
    assert_eq!(response.body_mut().read(&mut got).unwrap(), 0);
    client.close();
}

/// [`bytes_held_for_a_late_reader_reach_its_first_read_blocking`] for a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_held_for_a_late_reader_reach_its_first_poll() {
    let go = Arc::new(AtomicBool::new(false));
    let server = first_chunk_then_waits(go.clone());
    let client = client(true);
    let mut response = client.get(server.url("/")).send().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut got = Vec::new();
    while got.len() < FIRST {
        let chunk = response
            .chunk()
            .await
            .unwrap()
            .expect("the body ended early");
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got, [b'f'; FIRST]);
    go.store(true, Ordering::SeqCst);
    assert!(response.chunk().await.unwrap().is_none());
    client.close();
}

/// Bytes held back for a reader who has not looked yet are not lost when
/// the exchange ends elsewhere meanwhile (a read timeout here; a cancel or
/// the client's close end it the same way): they come first, then the
/// error, as bytes pushed into the pipe would.
#[test]
fn a_chunked_body_that_times_out_before_its_reader_looks_gives_its_bytes_then_the_timeout() {
    let server = TestServer::start(Behaviour::SendThenStall(one_chunk_of_fifty()));
    let client = builder(false)
        .read_timeout(Duration::from_millis(200))
        .wheel_tick(Duration::from_millis(10))
        .build()
        .unwrap();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    // The timeout ends the exchange, and its connection is aborted.
    assert_settles(&client, WAIT);
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0),
        "the connection stayed open"
    );
    let (got, error) = read_to_error(&mut response);
    assert_eq!(
        got, [b'h'; 50],
        "the bytes before the timeout are delivered"
    );
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    client.close();
}

/// Bytes held back for a reader who has not looked yet, taken back by
/// the connection to gather more on, are not lost when the framing breaks
/// in that very read: the held bytes and those of the same read before
/// the break come first, then the error.
#[test]
fn held_bytes_gathered_on_in_a_read_that_breaks_the_framing_come_before_the_error() {
    let go = Arc::new(AtomicBool::new(false));
    let server = first_chunk_then(go.clone(), b"10\r\nssssssssssssssss\r\nzz\r\n");
    let client = client(false);
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    assert!(
        eventually(WAIT, || client.stats().buffered_body_bytes >= FIRST),
        "the first chunk never came"
    );
    go.store(true, Ordering::SeqCst);
    // The loop reads the rest and the break meanwhile.
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0),
        "the connection stayed open"
    );
    let (got, error) = read_to_error(&mut response);
    let mut sent = vec![b'f'; FIRST];
    sent.extend_from_slice(&[b's'; 16]);
    assert!(
        got == sent,
        "{} bytes delivered before the break, of the {} sent",
        got.len(),
        sent.len()
    );
    assert!(matches!(error, Error::Protocol { .. }), "{error:?}");
    client.close();
}

#[test]
fn a_body_that_failed_fails_again_however_it_is_read_again() {
    // Code that reads on after an error (a retry after a timeout,
    // `BufRead::lines`) must not find a clean end: the body was cut short.
    let server = truncating();
    let client = client(false);
    for read_again in ["read", "chunk", "bytes"] {
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        let body = response.body_mut();
        let mut got = Vec::new();
        assert!(body.read_to_end(&mut got).is_err());
        assert_eq!(got.len(), 50);
        assert!(!body.is_end(), "a failed body has no end");
        let again = match read_again {
            "read" => body.read(&mut [0; 16]).map(|n| n.to_string()),
            "chunk" => body
                .chunk()
                .wait()
                .map(|c| format!("{c:?}"))
                .map_err(std::io::Error::from),
            _ => response
                .bytes()
                .wait()
                .map(|b| format!("{b:?}"))
                .map_err(std::io::Error::from),
        };
        let error = again.expect_err(read_again);
        // The source says so, and what the first failure was.
        let text = chain_text(&error);
        assert!(text.contains("failed earlier"), "{text}");
        assert!(
            text.contains("connection closed inside a Content-Length body"),
            "{text}"
        );
        // Of the first's kind: still a body cut short, not `Other`.
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::UnexpectedEof,
            "{read_again}: {text}"
        );
    }
    client.close();
}

#[test]
fn a_read_retried_after_its_timeout_fails_for_good_and_does_not_spin() {
    // A caller that reads again on `TimedOut`, as a socket with a read
    // timeout invites, meets it once: the body's timeout ended its
    // exchange, and the read after it fails as the end of a failed body,
    // `Other`, its source naming the timeout.
    let silent = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome".to_vec(),
    ));
    let client = builder(false)
        .read_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut response = client.get(silent.url("/")).send().wait().unwrap();
    let body = response.body_mut();
    let mut buf = [0; 16];
    let mut got = 0;
    let mut timeouts = 0;
    let error = loop {
        match body.read(&mut buf) {
            Ok(0) => panic!("a body that timed out has no end"),
            Ok(n) => got += n,
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                timeouts += 1;
                assert!(timeouts < 10, "a retry on TimedOut spins");
            }
            Err(error) => break error,
        }
    };
    assert_eq!((got, timeouts), (4, 1));
    assert_eq!(error.kind(), std::io::ErrorKind::Other);
    let text = chain_text(&error);
    assert!(text.contains("failed earlier: Read timeout to "), "{text}");
    client.close();
}

#[test]
fn dropping_a_body_midway_frees_its_connection_permit_and_timers_in_both_modes() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::SendThenStall(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nfirst".to_vec(),
        ));
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .max_connections_per_host(1)
            .build()
            .unwrap();
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(
            response.chunk().wait().unwrap().as_deref(),
            Some(&b"first"[..])
        );
        drop(response);
        assert!(server.wait_for_open(0, WAIT), "mode {event_loop_timeouts}");
        assert_settles(&client, WAIT);
        assert_eq!(client.stats().open_connections, 0);
        // Its permit is back: the next request gets a connection.
        let next = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(next.status(), 200);
        client.close();
    }
}

#[test]
fn a_small_body_dropped_unread_gives_its_connection_back() {
    let server = TestServer::respond(|request| ok(&request.target));
    let client = client(false);
    for i in 0..20 {
        // Only the status is looked at; the body goes unread.
        let response = client
            .get(server.url(&format!("/{i}")))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // A request may go out while the body before it is still being drained
    // on its loop, and so open a connection of its own; but every
    // connection comes back to the pool, none is closed for the unread body.
    let accepted = server.connections_accepted();
    assert!(
        accepted < 20,
        "{accepted} connections for 20 small requests"
    );
    assert!(
        eventually(WAIT, || client.stats().idle_connections == accepted),
        "{:?} with {accepted} connections accepted",
        client.stats()
    );
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_streams_chunk_by_chunk_under_tokio() {
    let server =
        TestServer::respond(|_| chunked(200, &[b"one ", b"two ", b"three"], &[("X-T", "3")]));
    let client = client(true);
    let mut response = client.get(server.url("/")).send().await.unwrap();
    let mut text = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.extend_from_slice(&chunk);
    }
    assert_eq!(text, b"one two three");
    assert_eq!(response.trailers().unwrap()["x-t"], "3");
    client.close();
}

#[test]
fn a_body_is_an_http_body_polled_by_hand() {
    let server = TestServer::respond(|_| chunked(200, &[b"ab", b"cd"], &[("X-T", "2")]));
    let client = client(false);
    let body = block_on(client.get(server.url("/")).send())
        .unwrap()
        .into_body();
    let frames = block_on(async move {
        let mut body = body;
        let mut frames = Vec::new();
        loop {
            let frame = std::future::poll_fn(|cx| {
                tickless::http_body::Body::poll_frame(std::pin::Pin::new(&mut body), cx)
            })
            .await;
            match frame {
                Some(Ok(frame)) => frames.push(frame),
                Some(Err(error)) => panic!("{error}"),
                None => break,
            }
        }
        assert!(tickless::http_body::Body::is_end_stream(&body));
        frames
    });
    let (data, trailers): (Vec<_>, Vec<_>) = frames.into_iter().partition(|f| f.is_data());
    let data: Vec<u8> = data
        .into_iter()
        .flat_map(|f| f.into_data().unwrap().to_vec())
        .collect();
    assert_eq!(data, b"abcd");
    assert_eq!(trailers.len(), 1);
    assert_eq!(trailers[0].trailers_ref().unwrap()["x-t"], "2");
    client.close();
}

/// The `http_body` size hint of a response's body, as `(lower, upper)`.
fn hint(body: &tickless::Body) -> (u64, Option<u64>) {
    let hint = tickless::http_body::Body::size_hint(body);
    (hint.lower(), hint.upper())
}

#[test]
fn a_body_hints_its_length_when_its_head_tells_it() {
    let gzipped = {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        encoder.write_all(&[b'x'; 1000]).unwrap();
        encoder.finish().unwrap()
    };
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/chunked" => chunked(200, &[b"ab", b"cd"], &[]),
        "/gzip" => response(200, &[("Content-Encoding", "gzip")], &gzipped),
        "/unknown-coding" => response(200, &[("Content-Encoding", "x-mine")], &[b'y'; 10]),
        // Repeated identical values are one length (RFC 9112 §6.3).
        "/repeated-list" => response(200, &[("Content-Length", "10, 10")], &[b'r'; 10]),
        "/repeated-fields" => response(
            200,
            &[("Content-Length", "10"), ("Content-Length", "10")],
            &[b'r'; 10],
        ),
        _ => response(200, &[], &[b'z'; 10_000]),
    });
    let client = client(false);
    let get = |path: &str| {
        client
            .get(server.url(path))
            .send()
            .wait()
            .unwrap()
            .into_body()
    };

    // Known, counting down as it is read, 0 at the end.
    let mut body = get("/length");
    assert_eq!(hint(&body), (10_000, Some(10_000)));
    let mut first = [0; 100];
    body.read_exact(&mut first).unwrap();
    assert_eq!(hint(&body), (9_900, Some(9_900)));
    let mut rest = Vec::new();
    body.read_to_end(&mut rest).unwrap();
    assert_eq!((rest.len(), hint(&body)), (9_900, (0, Some(0))));

    // Unknown until it ends: chunked, or decoded (the header's length is
    // the encoded one).
    for path in ["/chunked", "/gzip"] {
        let mut body = get(path);
        assert_eq!(hint(&body), (0, None), "{path}");
        body.read_to_end(&mut Vec::new()).unwrap();
        assert_eq!(hint(&body), (0, Some(0)), "{path}");
    }
    // A coding this build does not decode comes as it is, length and all.
    assert_eq!(hint(&get("/unknown-coding")), (10, Some(10)));
    // A length repeated, in one field or in two, frames the body exactly
    // (as the connection reads it), and so is its hint.
    for path in ["/repeated-list", "/repeated-fields"] {
        let mut body = get(path);
        assert_eq!(hint(&body), (10, Some(10)), "{path}");
        let mut read = Vec::new();
        body.read_to_end(&mut read).unwrap();
        assert_eq!((read.len(), hint(&body)), (10, (0, Some(0))), "{path}");
    }

    // An answer to HEAD has none, whatever length it declares.
    let head = client.head(server.url("/length")).send().wait().unwrap();
    assert_eq!(hint(&head.into_body()), (0, Some(0)));
    client.close();
}

/// Whether `http_body` says the body has ended.
fn end_stream(body: &tickless::Body) -> bool {
    tickless::http_body::Body::is_end_stream(body)
}

/// A body that ended with its head — an answer to HEAD, a 204, a 304, a
/// `Content-Length: 0`, decoded or not — says so through `http_body`
/// before any read, with an exact size hint of 0, as hyper's does: code
/// that skips an ended body (a proxy) does not poll it. One whose end is
/// still to be read (an empty chunked body: trailers may come) does not,
/// until it is read.
#[test]
fn a_body_that_ended_with_its_head_is_at_its_end_before_any_read() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/204" => response(204, &[], b""),
        "/304" => response(304, &[("Content-Length", "10")], b""),
        "/empty" => response(200, &[("Content-Length", "0")], b""),
        "/empty-gzip" => response(
            200,
            &[("Content-Length", "0"), ("Content-Encoding", "gzip")],
            b"",
        ),
        "/empty-chunked" => chunked(200, &[], &[]),
        _ => response(200, &[], &[b'z'; 10]),
    });
    let client = client(false);
    let body = |method: http::Method, path: &str| {
        client
            .request(method, server.url(path))
            .send()
            .wait()
            .unwrap()
            .into_body()
    };
    let ended = [
        (http::Method::HEAD, "/length"),
        (http::Method::GET, "/204"),
        (http::Method::GET, "/304"),
        (http::Method::GET, "/empty"),
        (http::Method::GET, "/empty-gzip"),
    ];
    for (method, path) in ended {
        let mut body = body(method.clone(), path);
        assert!(end_stream(&body), "{method} {path}");
        assert_eq!(hint(&body), (0, Some(0)), "{method} {path}");
        // Read all the same, it is empty, and still at its end.
        let mut read = Vec::new();
        body.read_to_end(&mut read).unwrap();
        assert_eq!(read, b"", "{method} {path}");
        assert!(end_stream(&body), "{method} {path}");
    }
    for path in ["/empty-chunked", "/length"] {
        let mut body = body(http::Method::GET, path);
        assert!(!end_stream(&body), "{path}");
        body.read_to_end(&mut Vec::new()).unwrap();
        assert!(end_stream(&body), "{path}");
    }
    client.close();
}

/// An empty 2xx (`Content-Length: 0`, a 204) that comes whole while the
/// request's body still goes is not at its end before a read: its end
/// waits for the upload's (`Exchange::hold_answer`) — a poll is pending
/// meanwhile, and the upload's failure would fail it — and code that
/// trusts `is_end_stream` drops an ended body unpolled (hyper's HTTP/2
/// server, forwarding it), which stops the upload the server still reads.
/// Before, it said it had ended. Dropped, the upload stops. A 304 stops
/// the upload as it comes (nothing waits for it): its body has ended at
/// once.
#[test]
fn an_empty_2xx_that_comes_while_the_upload_goes_is_not_at_its_end_before_a_read() {
    for (answer, ended) in [
        (response(200, &[("Content-Length", "0")], b""), false),
        (response(204, &[], b""), false),
        (response(304, &[("Content-Length", "10")], b""), true),
    ] {
        let head = String::from_utf8_lossy(&answer).into_owned();
        let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
            if read_head(&mut stream).is_none() {
                return;
            }
            let mut first = vec![0; 64 * 1024];
            if stream.read_exact(&mut first).is_err() || stream.write_all(&answer).is_err() {
                return;
            }
            drain(&mut stream);
        }));
        let (client, mut response, dropped) = endless_put(&server);
        assert_eq!(end_stream(response.body_mut()), ended, "{head}");
        if ended {
            let mut read = Vec::new();
            response.body_mut().read_to_end(&mut read).unwrap();
            assert_eq!(read, b"", "{head}");
        } else {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let polled = tickless::http_body::Body::poll_frame(
                std::pin::Pin::new(response.body_mut()),
                &mut cx,
            );
            assert!(polled.is_pending(), "{head}: {polled:?}");
        }
        drop(response);
        assert_upload_let_go(&client, &dropped, &head);
        client.close();
    }
}

#[test]
fn text_is_decoded_from_the_charset_of_its_content_type() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/latin1" => response(
            200,
            &[("Content-Type", "text/plain; charset=ISO-8859-1")],
            b"caf\xe9",
        ),
        _ => response(200, &[("Content-Type", "text/plain")], "café".as_bytes()),
    });
    let client = client(false);
    for path in ["/latin1", "/utf8"] {
        let text = client
            .get(server.url(path))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap();
        assert_eq!(text, "café", "{path}");
    }
    client.close();
}

/// Answers `Expect: 100-continue` with `100 Continue`, reads the body and
/// says how long it was.
fn continues() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let length = content_length(&head);
        // Nothing of the body before the go-ahead.
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut early = [0; 1];
        let before = matches!(stream.read(&mut early), Ok(1));
        stream.set_read_timeout(None).unwrap();
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        let mut body = vec![0; length];
        if stream.read_exact(&mut body).is_err() {
            return;
        }
        let answer = format!("{length} early={before}");
        let _ = stream.write_all(&ok(&answer));
        drain(&mut stream);
    }))
}

#[test]
fn expect_continue_sends_the_body_after_100_continue() {
    let server = continues();
    let client = client(false);
    let text = client
        .put(server.url("/"))
        .body(vec![b'u'; 100_000])
        .expect_continue(true)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, "100000 early=false");
    client.close();
}

#[test]
fn a_final_answer_before_100_continue_means_the_body_is_never_sent() {
    let received = Arc::new(AtomicUsize::new(usize::MAX));
    let server = {
        let received = received.clone();
        TestServer::start(Behaviour::custom(move |mut stream, _| {
            if read_head(&mut stream).is_none() {
                return;
            }
            let _ = stream.write_all(&response(401, &[], b"no"));
            // Count what the client still sends, until it closes.
            let mut total = 0;
            let mut buf = [0; 16 * 1024];
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                total += n;
            }
            received.store(total, Ordering::SeqCst);
        }))
    };
    let client = client(false);
    let response = client
        .post(server.url("/"))
        .body(vec![b'x'; 50_000])
        .header("Expect", "100-continue")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.text().wait().unwrap(), "no");
    // The connection is closed, not reused: the server sees its end.
    assert!(eventually(WAIT, || received.load(Ordering::SeqCst) != usize::MAX));
    assert_eq!(received.load(Ordering::SeqCst), 0, "body bytes were sent");
    assert_eq!(client.stats().idle_connections, 0);
    client.close();
}

/// Posts 1000 bytes behind `Expect: 100-continue` to `server`, with
/// `delay` as the client's `expect_continue_timeout`: the answer's text.
fn post_expecting_continue(server: &TestServer, delay: Duration) -> String {
    let client = Client::builder()
        .event_loops(1)
        .expect_continue_timeout(delay)
        .build()
        .unwrap();
    let text = client
        .post(server.url("/"))
        .body(vec![b'y'; 1000])
        .expect_continue(true)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    client.close();
    text
}

#[test]
fn a_server_that_never_says_continue_gets_the_body_after_the_delay() {
    let server = TestServer::respond(|request| ok(&request.body.len().to_string()));
    let text = post_expecting_continue(&server, Duration::from_millis(200));
    assert_eq!(text, "1000");
}

/// What a server that refuses expectations saw of each request: whether
/// it said `Expect: 100-continue`, and the body it sent (none is read
/// after a 417).
type Seen = Arc<Mutex<Vec<(bool, Vec<u8>)>>>;

/// Answers `417 Expectation Failed` to a request that says `Expect:
/// 100-continue` (reading no body, so closing the connection after it, as
/// RFC 9110 §10.1.1 has a server that does not read the rest do), and to
/// one that does not the length of its body (framed by its length or
/// chunked); records each in `seen`.
fn refuses_expectations(seen: Seen) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        if head
            .to_ascii_lowercase()
            .contains("\r\nexpect: 100-continue")
        {
            seen.lock().unwrap().push((true, Vec::new()));
            let refused = response(417, &[("Connection", "close")], b"no expectations");
            let _ = stream.write_all(&refused);
            return drain(&mut stream);
        }
        // The head again, before the rest, for the parser.
        let mut request = head.as_bytes().chain(&mut stream);
        let Ok(recorded) = RequestReader::new(index).read_request(&mut request) else {
            return;
        };
        let length = recorded.body.len();
        seen.lock().unwrap().push((false, recorded.body));
        let _ = stream.write_all(&ok(&length.to_string()));
        drain(&mut stream);
    }))
}

/// Also with a retry policy that retries a 417: the repeat without the
/// `Expect` comes first (retried with it, the request would get the same
/// 417 until its attempts ran out).
#[test]
fn a_417_to_an_expectation_repeats_a_body_in_memory_once_without_it() {
    let retrying_417 = tickless::retry::Policy::attempts(3)
        .on_status([http::StatusCode::EXPECTATION_FAILED])
        .any_method(true)
        .backoff(Duration::from_millis(1), Duration::from_millis(1));
    for retry in [tickless::retry::Policy::none(), retrying_417] {
        let seen = Seen::default();
        let server = refuses_expectations(seen.clone());
        let client = client(false);
        let response = client
            .post(server.url("/"))
            .body(vec![b'e'; 1000])
            .expect_continue(true)
            .retry(retry)
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().wait().unwrap(), "1000");
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert_eq!(
            *seen.lock().unwrap(),
            [(true, Vec::new()), (false, vec![b'e'; 1000])]
        );
        client.close();
    }
}

/// A 417 whose body is far over the body window and the drain bound (its
/// connection closes), to requests sent together under a limit of one
/// connection per host and waited on in order: each one's repeat without
/// the `Expect` goes ahead of the requests sent after it for the permit
/// that connection frees — served first, one of them would hold it with
/// its own 417, unread until the repeat, waited on, has completed. The
/// 10 s request timeout is the failure signal.
#[test]
fn repeats_after_417s_with_large_bodies_waited_on_in_order_each_complete() {
    let server = TestServer::start(Behaviour::custom(|mut stream, index| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        if head
            .to_ascii_lowercase()
            .contains("\r\nexpect: 100-continue")
        {
            let _ = stream.write_all(&response(417, &[], &vec![b'x'; 4 << 20]));
            return drain(&mut stream);
        }
        let mut request = head.as_bytes().chain(&mut stream);
        if RequestReader::new(index).read_request(&mut request).is_ok() {
            // One request a connection here.
            let _ = stream.write_all(&response(200, &[("Connection", "close")], b"repeated"));
        }
        drain(&mut stream);
    }));
    let client = Client::builder()
        .event_loops(1)
        .max_connections_per_host(1)
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let futures: Vec<_> = (0..5)
        .map(|_| {
            client
                .post(server.url("/"))
                .body("payload")
                .expect_continue(true)
                .send()
        })
        .collect();
    each_answered_in_order("repeated after a 417", futures, |_| "repeated".into());
    client.close();
}

/// `len` bytes that are not all alike: a body cut, doubled or reordered
/// does not pass for it.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Posts `body` (`what`) behind `Expect: 100-continue` to a server that
/// refuses expectations, and checks that it went again once, whole (as
/// `sent`), without the `Expect`, and that the repeat was told as no retry.
/// `after_its_end`: the future is looked at only once the 417's exchange
/// has ended (else at once: it may end before or after).
fn repeated_whole_after_a_417(what: &str, body: Upload, sent: &[u8], after_its_end: bool) {
    let seen = Seen::default();
    let server = refuses_expectations(seen.clone());
    let recorder = Recorder::new();
    let client = builder(false)
        .request_timeout(Duration::from_secs(30))
        .listener(recorder.clone())
        .build()
        .unwrap();
    let future = client
        .post(server.url("/"))
        .body(body)
        .expect_continue(true)
        .send();
    if after_its_end {
        let ended = |events: &[(Event, std::thread::ThreadId)]| {
            events
                .iter()
                .any(|(event, _)| matches!(event, Event::Completed(status) if *status == 417))
        };
        assert!(
            recorder.wait_for(WAIT, ended),
            "{what}: the 417 never ended"
        );
    }
    let response = future.wait().unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert_eq!(response.status(), 200, "{what}");
    assert_eq!(response.text().wait().unwrap(), sent.len().to_string());
    // Whole, the second time, and without the `Expect`.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{what}");
    assert_eq!(seen[0], (true, Vec::new()), "{what}");
    assert!(!seen[1].0, "{what}: the repeat said Expect");
    assert!(seen[1].1 == sent, "{what}: the body came otherwise");
    // No retry: the 417 is told as a status, and nothing of a retry.
    let (statuses, retried) = recorder.statuses_and_retried();
    assert_eq!(statuses, [417, 200], "{what}: {:?}", recorder.events());
    assert!(!retried, "{what}: {:?}", recorder.events());
    client.close();
}

/// A body in memory too large to share the head's buffer: held for
/// `100 Continue`, then, repeated without the `Expect`, sent at once from
/// its own bytes after the head.
#[test]
fn a_417_to_an_expectation_repeats_a_large_body_in_memory_whole_without_it() {
    let long = pattern(300_000);
    repeated_whole_after_a_417("a large Vec", Upload::from(long.clone()), &long, false);
}

#[test]
fn a_417_to_an_expectation_repeats_a_streamed_body_that_waited_whole_without_it() {
    // Longer than the window: a reader's pump is blocked on its full pipe
    // when the 417 comes, and goes on for the repeat.
    let long = pattern(WINDOW + 50_000);
    let length = long.len() as u64;
    let chunks = || Chunks {
        left: 40,
        size: 1000,
        yielded: false,
    };
    // The 417's exchange ended before the policy looked at it (it keeps
    // the body past its end), or not yet.
    for after_its_end in [true, false] {
        let reader = std::io::Cursor::new(long.clone());
        repeated_whole_after_a_417(
            "a reader of known length",
            Upload::from_reader(reader.clone(), Some(length)),
            &long,
            after_its_end,
        );
        repeated_whole_after_a_417(
            "a reader, chunked",
            Upload::from_reader(reader, None),
            &long,
            after_its_end,
        );
        repeated_whole_after_a_417(
            "an async body, chunked",
            Upload::from_stream(chunks()),
            &[b'a'; 40_000],
            after_its_end,
        );
    }
}

/// Answers a request that says `Expect: 100-continue` with part of a
/// `417`'s body, then reads on (its exchange goes on until the rest comes);
/// one that does not, with `sent again`, at its head. Records each, with
/// no body, in `seen`.
fn refuses_expectations_in_part(seen: Seen) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let expects = head
            .to_ascii_lowercase()
            .contains("\r\nexpect: 100-continue");
        seen.lock().unwrap().push((expects, Vec::new()));
        let _ = match expects {
            true => stream
                .write_all(b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 100\r\n\r\nno "),
            false => stream.write_all(&ok("sent again")),
        };
        drain(&mut stream);
    }))
}

/// Posts `body` behind `Expect: 100-continue` to
/// [`refuses_expectations_in_part`], and cancels it once the 417's head is
/// there, not taken: the cancel ends the 417's exchange, and says so.
fn cancelled_after_a_417(client: &Client, server: &TestServer, body: Upload) -> ResponseFuture {
    let future = client
        .post(server.url("/"))
        .body(body)
        .expect_continue(true)
        .send();
    assert!(eventually(WAIT, || future.is_done()), "no 417 came");
    assert!(future.cancel(), "the 417's exchange had not ended");
    future
}

/// A cancel that ended the 417's exchange ends the request, as `cancel`
/// says: the future resolves with `Error::Cancelled`, and the body that
/// waited is not sent again without the `Expect` (nor by any repeat, retry
/// or redirect: nothing follows a cancelled head).
#[test]
fn a_cancel_after_a_417_came_sends_nothing_more() {
    let seen = Seen::default();
    let server = refuses_expectations_in_part(seen.clone());
    let client = builder(false)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let body = Upload::from_reader(std::io::Cursor::new(pattern(1000)), Some(1000));
    let future = cancelled_after_a_417(&client, &server, body);
    match future.wait() {
        Err(Error::Cancelled) => {}
        other => panic!(
            "{:?} after a cancel",
            other.map(|response| response.status())
        ),
    }
    assert_eq!(*seen.lock().unwrap(), [(true, Vec::new())]);
    client.close();
}

/// The streamed body a 417's exchange keeps past its end for the repeat
/// goes with a cancel that ended that exchange — a reader's pump, blocked
/// on its full pipe, and the reader (a file, say) — at once, not when the
/// future is dropped: nothing will send it now.
#[test]
fn a_cancel_after_a_417_came_lets_the_body_that_waited_go_at_once() {
    let server = refuses_expectations_in_part(Seen::default());
    let client = builder(false)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let reader = EndlessReader {
        _flag: DropFlag(dropped.clone()),
    };
    let future = cancelled_after_a_417(&client, &server, Upload::from_reader(reader, None));
    assert!(
        eventually(WAIT, || dropped.load(Ordering::SeqCst)),
        "the reader is kept while the cancelled future is"
    );
    drop(future);
    client.close();
}

#[test]
fn a_417_after_a_streamed_body_began_to_go_is_the_response() {
    // No wait for `100 Continue`: the body goes after the head at once, and
    // is spent when the 417 comes.
    let seen = Seen::default();
    let server = refuses_expectations(seen.clone());
    let client = builder(false)
        .request_timeout(Duration::from_secs(30))
        .expect_continue_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let body = Upload::from_reader(std::io::Cursor::new(vec![b's'; 1000]), Some(1000));
    let response = client
        .post(server.url("/"))
        .body(body)
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 417);
    assert_eq!(response.text().wait().unwrap(), "no expectations");
    assert_eq!(*seen.lock().unwrap(), [(true, Vec::new())]);
    client.close();
}

/// A file's body (`Upload::from_file`) is read again from where it began:
/// though it began to go before the 417 came, the request goes again
/// without the `Expect`, the file whole — as a body in memory does.
#[test]
fn a_417_after_a_files_body_began_to_go_repeats_it_whole() {
    let seen = Seen::default();
    let server = refuses_expectations(seen.clone());
    let client = builder(false)
        .request_timeout(Duration::from_secs(30))
        .expect_continue_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let (_dir, path) = support::real::temp_file("417-file", &pattern(1000));
    let body = Upload::from_file(std::fs::File::open(&path).unwrap()).unwrap();
    let response = client
        .post(server.url("/"))
        .body(body)
        .expect_continue(true)
        .send()
        .wait();
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "1000");
    assert_eq!(
        *seen.lock().unwrap(),
        [(true, Vec::new()), (false, pattern(1000))]
    );
    client.close();
}

/// Answers a request with a redirect (`status`) to `to`, with `Connection:
/// close` — at its head, or, given `reads_first`, after `100 Continue` and
/// that much of its body — then reads what else comes until the client
/// closes; records whether the request said `Expect: 100-continue` and the
/// body bytes it got, framing and all, in `seen`.
fn redirects_early(status: u16, to: String, reads_first: usize, seen: Seen) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let expects = head
            .to_ascii_lowercase()
            .contains("\r\nexpect: 100-continue");
        let mut received = vec![0; reads_first];
        if reads_first > 0 {
            let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
            if stream.read_exact(&mut received).is_err() {
                return;
            }
        }
        let moved = response(status, &[("Location", &to), ("Connection", "close")], b"");
        let _ = stream.write_all(&moved);
        let mut buf = [0; 16 * 1024];
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            received.extend_from_slice(&buf[..n]);
        }
        seen.lock().unwrap().push((expects, received));
    }))
}

/// Says `100 Continue` to a request that expects it, reads its body (framed
/// by its length or chunked) and answers with its method and the body's
/// length; records whether it said `Expect: 100-continue` and the body, in
/// `seen`.
fn takes_bodies(seen: Seen) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let expects = head
            .to_ascii_lowercase()
            .contains("\r\nexpect: 100-continue");
        if expects {
            let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        // The head again, before the rest, for the parser.
        let mut request = head.as_bytes().chain(&mut stream);
        let Ok(recorded) = RequestReader::new(index).read_request(&mut request) else {
            return;
        };
        let answer = format!("{} {}", recorded.method, recorded.body.len());
        seen.lock().unwrap().push((expects, recorded.body));
        let _ = stream.write_all(&ok(&answer));
        drain(&mut stream);
    }))
}

/// A client that waits for `100 Continue` as long as it takes (no delay
/// sends a body before a server says so), telling `recorder`.
fn waiting_for_continue(recorder: &Arc<Recorder>) -> Client {
    builder(false)
        .request_timeout(Duration::from_secs(30))
        .expect_continue_timeout(Duration::MAX)
        .listener(recorder.clone())
        .build()
        .unwrap()
}

/// PUTs `body` (`what`) behind `Expect: 100-continue` to a server that
/// answers its head with a redirect (`status`) to another origin, and
/// checks that the body went whole there (as `sent`), still behind the
/// `Expect`, and none of it to the first. `after_its_end`: the future is
/// looked at only once the redirect's exchange has ended (else at once: it
/// may end before or after).
fn redirected_whole_before_continue(
    what: &str,
    status: u16,
    body: Upload,
    sent: &[u8],
    after_its_end: bool,
) {
    let (seen_first, seen_there) = (Seen::default(), Seen::default());
    let there = takes_bodies(seen_there.clone());
    let first = redirects_early(status, there.url("/to"), 0, seen_first.clone());
    let recorder = Recorder::new();
    let client = waiting_for_continue(&recorder);
    let future = client
        .put(first.url("/from"))
        .body(body)
        .expect_continue(true)
        .send();
    if after_its_end {
        let ended = |events: &[(Event, std::thread::ThreadId)]| {
            events.iter().any(
                |(event, _)| matches!(event, Event::Completed(done) if done.as_u16() == status),
            )
        };
        assert!(
            recorder.wait_for(WAIT, ended),
            "{what}: the {status} never ended"
        );
    }
    let response = future.wait().unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert_eq!(response.status(), 200, "{what}: {status}");
    let text = response.text().wait().unwrap();
    assert_eq!(text, format!("PUT {}", sent.len()), "{what}: {status}");
    let seen_there = seen_there.lock().unwrap().clone();
    assert_eq!(seen_there.len(), 1, "{what}: {status}");
    assert!(seen_there[0].0, "{what}: {status}: the Expect was dropped");
    assert!(
        seen_there[0].1 == sent,
        "{what}: {status}: the body came otherwise"
    );
    // The first server saw the head alone (recorded once the client closed
    // its connection, never reused).
    assert!(eventually(WAIT, || !seen_first.lock().unwrap().is_empty()));
    assert_eq!(
        *seen_first.lock().unwrap(),
        [(true, Vec::new())],
        "{what}: {status}"
    );
    let (statuses, retried) = recorder.statuses_and_retried();
    assert_eq!(statuses, [status, 200], "{what}: {:?}", recorder.events());
    assert!(!retried, "{what}: {:?}", recorder.events());
    client.close();
}

/// A redirect that keeps the body — a `307` or `308`, or to a PUT a `301`
/// or `302` — that answers a streamed body's `Expect: 100-continue` before
/// any of it went (S3's region redirects do) is followed: the body goes
/// whole where it points — a reader's (its pump blocked on its full pipe
/// meanwhile), of known length or chunked, or an async body's.
#[test]
fn a_redirect_before_100_continue_sends_a_streamed_body_whole_where_it_points() {
    let long = pattern(WINDOW + 50_000);
    let length = long.len() as u64;
    let chunks = || Chunks {
        left: 40,
        size: 1000,
        yielded: false,
    };
    for status in [307, 308, 301, 302] {
        // The redirect's exchange ended before the policy looked at it (it
        // keeps the body past its end), or not yet.
        for after_its_end in [true, false] {
            let reader = std::io::Cursor::new(long.clone());
            redirected_whole_before_continue(
                "a reader of known length",
                status,
                Upload::from_reader(reader.clone(), Some(length)),
                &long,
                after_its_end,
            );
            redirected_whole_before_continue(
                "a reader, chunked",
                status,
                Upload::from_reader(reader, None),
                &long,
                after_its_end,
            );
            redirected_whole_before_continue(
                "an async body, chunked",
                status,
                Upload::from_stream(chunks()),
                &[b'a'; 40_000],
                after_its_end,
            );
        }
    }
}

/// A streamed body that began to go (the server said `100 Continue` and
/// read some of it) cannot go again: the `307` that came then is the
/// response, and nothing is sent where it points.
#[test]
fn a_307_after_a_streamed_body_began_to_go_is_the_response() {
    let (seen_first, seen_there) = (Seen::default(), Seen::default());
    let there = takes_bodies(seen_there.clone());
    let first = redirects_early(307, there.url("/to"), 1000, seen_first.clone());
    let recorder = Recorder::new();
    let client = waiting_for_continue(&recorder);
    let long = pattern(WINDOW + 50_000);
    let body = Upload::from_reader(std::io::Cursor::new(long.clone()), Some(long.len() as u64));
    let response = client
        .put(first.url("/from"))
        .body(body)
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 307);
    drop(response);
    assert!(eventually(WAIT, || !seen_first.lock().unwrap().is_empty()));
    let (expects, received) = seen_first.lock().unwrap()[0].clone();
    assert!(expects);
    assert!(long.starts_with(&received) && received.len() >= 1000);
    assert!(seen_there.lock().unwrap().is_empty());
    assert_eq!(there.connections_accepted(), 0);
    client.close();
}

/// A `303` before `100 Continue` goes on as a GET without the body (nor
/// the `Expect` that described it), as it does for any body; the reader
/// that waited is let go, not kept for a hop that will not send it.
#[test]
fn a_303_before_100_continue_goes_as_a_get_without_the_streamed_body() {
    let (seen_first, seen_there) = (Seen::default(), Seen::default());
    let there = takes_bodies(seen_there.clone());
    let first = redirects_early(303, there.url("/to"), 0, seen_first.clone());
    let recorder = Recorder::new();
    let client = waiting_for_continue(&recorder);
    let dropped = Arc::new(AtomicBool::new(false));
    // 1000 bytes, chunked.
    let reader = EndlessReader {
        _flag: DropFlag(dropped.clone()),
    }
    .take(1000);
    let response = client
        .put(first.url("/from"))
        .body(Upload::from_reader(reader, None))
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "GET 0");
    assert_eq!(*seen_there.lock().unwrap(), [(false, Vec::new())]);
    assert!(eventually(WAIT, || !seen_first.lock().unwrap().is_empty()));
    assert_eq!(*seen_first.lock().unwrap(), [(true, Vec::new())]);
    assert!(eventually(WAIT, || dropped.load(Ordering::SeqCst)));
    client.close();
}

/// A redirect that answered a streamed body's `Expect: 100-continue`
/// before any of it went, and is not followed (the request's policy
/// follows none), is the response: the body that waited for it is let go
/// with that answer — a reader's pump and the reader — not kept with a
/// future that is polled no more but still held.
#[test]
fn a_redirect_not_followed_lets_the_body_that_waited_go_with_its_answer() {
    let first = redirects_early(307, "/to".to_string(), 0, Seen::default());
    let client = waiting_for_continue(&Recorder::new());
    let dropped = Arc::new(AtomicBool::new(false));
    let reader = EndlessReader {
        _flag: DropFlag(dropped.clone()),
    };
    let mut future = client
        .put(first.url("/from"))
        .body(Upload::from_reader(reader, None))
        .expect_continue(true)
        .redirect(tickless::redirect::Policy::none())
        .send();
    let response = block_on(&mut future).unwrap();
    assert_eq!(response.status(), 307);
    assert!(
        eventually(WAIT, || dropped.load(Ordering::SeqCst)),
        "the reader is kept while the future is"
    );
    drop((future, response));
    client.close();
}

/// Echoes what it got: the framing header it came with, and the body.
fn framing_echo() -> TestServer {
    TestServer::respond(|request| {
        let framing = match (
            request.header("content-length"),
            request.header("transfer-encoding"),
        ) {
            (Some(length), None) => format!("length {length}"),
            (None, Some(coding)) => coding.to_owned(),
            other => format!("{other:?}"),
        };
        let mut body = format!("{framing}|").into_bytes();
        body.extend_from_slice(&request.body);
        response(200, &[], &body)
    })
}

#[test]
fn an_upload_from_a_reader_goes_with_its_length_and_one_of_unknown_length_chunked() {
    let server = framing_echo();
    let client = client(false);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    for (length, framing) in [
        (Some(data.len() as u64), "length 300000"),
        (None, "chunked"),
    ] {
        let echoed = client
            .post(server.url("/"))
            .body(Upload::from_reader(
                std::io::Cursor::new(data.clone()),
                length,
            ))
            .send()
            .wait()
            .unwrap()
            .bytes()
            .wait()
            .unwrap();
        let (head, body) = echoed.split_at(echoed.iter().position(|&b| b == b'|').unwrap());
        assert_eq!(std::str::from_utf8(head).unwrap(), framing);
        assert!(body[1..] == data[..], "{framing}: the body differs");
    }
    client.close();
}

/// A reader that counts its reads and says when it is dropped.
struct Watched {
    reads: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let n = buf.len().min(100);
        buf[..n].fill(b'w');
        Ok(n)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// A request sent on a closed client fails with `ClientClosed` and leaves
/// its body alone: not one read of its reader (a pipe, a socket, the
/// terminal, whose bytes would be lost to the caller), which is let go.
#[test]
fn an_upload_sent_on_a_closed_client_is_never_read() {
    let server = framing_echo();
    let client = client(false);
    client.close();
    let (reads, dropped) = (Arc::default(), Arc::default());
    let reader = Watched {
        reads: Arc::clone(&reads),
        dropped: Arc::clone(&dropped),
    };
    let future = client
        .post(server.url("/"))
        .body(Upload::from_reader(reader, None))
        .send();
    assert!(matches!(future.wait(), Err(Error::ClientClosed)));
    assert!(
        eventually(WAIT, || dropped.load(Ordering::SeqCst)),
        "the reader is kept"
    );
    assert_eq!(reads.load(Ordering::SeqCst), 0, "the reader was read");
    assert_eq!(server.connections_accepted(), 0);
}

#[test]
fn an_upload_from_a_file_takes_its_length_from_the_file() {
    let server = framing_echo();
    let client = client(true);
    let (_dir, path) = support::real::temp_file("upload", &[b'f'; 70_000]);
    let upload = Upload::from_file(std::fs::File::open(&path).unwrap()).unwrap();
    let echoed = client
        .put(server.url("/"))
        .body(upload)
        .send()
        .wait()
        .unwrap();
    let text = echoed.text().wait().unwrap();
    assert!(text.starts_with("length 70000|fff"), "{}", &text[..20]);
    assert_eq!(text.len(), "length 70000|".len() + 70_000);
    client.close();
}

// Found by a hunt (2026-12-07): a file written to while it went failed.

/// A file that grows after its upload was made — a log still written to —
/// goes as long as its metadata said then, which its `Content-Length`
/// announces: what was added since is not the body's, as `curl -T` sends
/// the size it measured. Before 2026-12-07 the body's reads ran on past
/// that length into the new bytes, and the request failed with
/// `Error::RequestBody` ("longer than its Content-Length") whenever the
/// last read of the body caught some of them.
#[test]
fn an_upload_from_a_file_that_grows_goes_with_the_length_it_had() {
    use std::io::Write;
    let server = framing_echo();
    let client = client(true);
    let (_dir, path) = support::real::temp_file("upload-grows", &[b'f'; 70_000]);
    let upload = Upload::from_file(std::fs::File::open(&path).unwrap()).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    log.write_all(b"written after").unwrap();
    drop(log);
    let text = client
        .put(server.url("/"))
        .body(upload)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, format!("length 70000|{}", "f".repeat(70_000)));
    client.close();
}

/// What the framing echo at `server` answers to `file` sent as an upload
/// (`Upload::from_file`): its framing, `|`, the body.
fn put_file(client: &Client, server: &TestServer, file: std::fs::File) -> String {
    let upload = Upload::from_file(file).unwrap();
    let echoed = client.put(server.url("/")).body(upload).send().wait();
    echoed.unwrap().text().wait().unwrap()
}

/// A file that is not a regular one (a pipe, a FIFO, `/dev/stdin`) has no
/// length in its metadata, only 0: its body goes chunked. A regular file
/// already read into goes with what is left of it.
#[test]
fn an_upload_from_a_pipe_goes_chunked_and_a_file_from_where_it_is() {
    use std::io::{Seek, SeekFrom};
    use std::process::{Command, Stdio};
    let server = framing_echo();
    let client = client(true);
    let put = |file| put_file(&client, &server, file);
    let mut child = Command::new("printf")
        .arg("through a pipe")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let pipe = std::fs::File::from(std::os::fd::OwnedFd::from(stdout));
    assert_eq!(put(pipe), "chunked|through a pipe");
    child.wait().unwrap();

    let (_dir, path) = support::real::temp_file("upload-rest", b"skipped|the rest");
    let mut file = std::fs::File::open(&path).unwrap();
    file.seek(SeekFrom::Start(8)).unwrap();
    let text = put(file);
    assert_eq!(text, "length 8|the rest");
    client.close();
}

// Found by a hunt (2026-12-06): a /proc file went as an empty body.

/// A regular file whose metadata says it is empty though it holds bytes —
/// every file of `/proc` says so, whatever it holds — goes chunked, with
/// what it holds; one that is empty goes empty, with its length. Before
/// 2026-12-06 the metadata's 0 was taken as the length: the request went
/// with `Content-Length: 0` and no body, and succeeded.
#[cfg(target_os = "linux")]
#[test]
fn an_upload_from_a_file_whose_metadata_says_empty_sends_what_it_holds() {
    let server = framing_echo();
    let client = client(true);
    let put = |file| put_file(&client, &server, file);
    let proc_file = "/proc/version";
    let held = std::fs::read_to_string(proc_file).unwrap();
    assert!(!held.is_empty(), "{proc_file} holds nothing here");
    let file = std::fs::File::open(proc_file).unwrap();
    assert_eq!(file.metadata().unwrap().len(), 0, "{proc_file}'s metadata");
    assert_eq!(put(file), format!("chunked|{held}"));

    let (_dir, path) = support::real::temp_file("upload-empty", b"");
    let text = put(std::fs::File::open(&path).unwrap());
    assert_eq!(text, "length 0|");
    client.close();
}

/// An async body: `count` chunks of `size`, every other one after a
/// `Pending` that wakes itself at once.
struct Chunks {
    left: usize,
    size: usize,
    yielded: bool,
}

impl tickless::http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        self.left -= 1;
        Poll::Ready(Some(Ok(tickless::http_body::Frame::data(Bytes::from(
            vec![b'a'; self.size],
        )))))
    }
}

#[test]
fn an_upload_from_an_async_body_streams_chunked() {
    let server = framing_echo();
    let client = client(true);
    let body = Upload::from_stream(Chunks {
        left: 40,
        size: 1000,
        yielded: false,
    });
    let text = client
        .post(server.url("/"))
        .body(body)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, format!("chunked|{}", "a".repeat(40_000)));
    client.close();
}

// Found by a hunt (2026-12-07): a body of tokio's failed, polled off its runtime.

/// An async body made in a tokio runtime is polled in that runtime's
/// context, on the client's loop as before, so a body of tokio's own
/// (its timers, `tokio::fs`, its sockets) goes as it does with reqwest.
/// Before 2026-12-07 it was polled with no runtime entered: tokio panicked
/// ("there is no reactor running"), and the request failed with
/// `Error::RequestBody` ("the upload's body panicked").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_from_an_async_body_of_the_callers_tokio_runtime_goes() {
    let server = framing_echo();
    let client = client(true);
    let body = Upload::from_stream(support::bodies::Throttled::new(5));
    let response = client.post(server.url("/")).body(body).send().await;
    let text = response.unwrap().text().await.unwrap();
    assert_eq!(text, format!("chunked|{}", "tick;".repeat(5)));
    client.close();
}

#[test]
fn an_upload_that_gives_more_or_fewer_bytes_than_its_length_fails() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client(false);
    for (bytes, declared) in [(10usize, 20u64), (30, 20)] {
        let error = client
            .post(server.url("/"))
            .body(Upload::from_reader(
                std::io::Cursor::new(vec![b'z'; bytes]),
                Some(declared),
            ))
            .send()
            .wait()
            .unwrap_err();
        assert!(
            matches!(error, Error::RequestBody { .. }),
            "{bytes} for {declared}: {error:?}"
        );
    }
    assert_settles(&client, WAIT);
    client.close();
}

/// A `Read` that gives `whole` in its first read; read again, it says so
/// and gives more (as a pipe or a socket with more behind the body would),
/// and its drop says it has been let go.
struct MoreAfterWhole {
    whole: Option<&'static [u8]>,
    read_past: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

impl Read for MoreAfterWhole {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(whole) = self.whole.take() {
            buf[..whole.len()].copy_from_slice(whole);
            return Ok(whole.len());
        }
        self.read_past.store(true, Ordering::SeqCst);
        buf.fill(b'!');
        Ok(buf.len())
    }
}

impl Drop for MoreAfterWhole {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// A reader that has given its declared length is read no further (as
/// `Upload::from_reader` says): its bytes past the length are not the
/// body's, and may be someone else's (the rest of a pipe or a socket). Its
/// thread ends, and lets it go, without another `read` — which, on a pipe
/// kept open, would block that thread for as long. Before, the pump read
/// on until the exchange let go of the body, taking up to a window past
/// the length; a length of 0 was read too.
#[test]
fn an_upload_from_a_reader_that_has_given_its_length_is_read_no_further() {
    let server = TestServer::respond(|request| ok(&String::from_utf8_lossy(&request.body)));
    let client = client(false);
    for whole in [&b"whole"[..], b""] {
        let read_past = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicBool::new(false));
        let reader = MoreAfterWhole {
            whole: Some(whole),
            read_past: read_past.clone(),
            dropped: dropped.clone(),
        };
        let length = Some(whole.len() as u64);
        let text = client
            .post(server.url("/"))
            .body(Upload::from_reader(reader, length))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap();
        assert_eq!(text.as_bytes(), whole);
        assert!(
            eventually(WAIT, || dropped.load(Ordering::SeqCst)),
            "{length:?}: the reader was never let go"
        );
        assert!(
            !read_past.load(Ordering::SeqCst),
            "{length:?}: the reader was read past its length"
        );
    }
    client.close();
}

/// A `Read` that gives some bytes, then fails (`panics: false`: an I/O
/// error) or panics.
struct BreaksAfter {
    left: usize,
    panics: bool,
}

impl Read for BreaksAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            if self.panics {
                panic!("the upload's reader panics");
            }
            return Err(std::io::Error::other("the disk went away"));
        }
        let n = buf.len().min(self.left);
        buf[..n].fill(b'r');
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn an_upload_whose_reader_fails_fails_the_request() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client(false);
    let error = client
        .post(server.url("/"))
        .body(Upload::from_reader(
            BreaksAfter {
                left: 100_000,
                panics: false,
            },
            None,
        ))
        .send()
        .wait()
        .unwrap_err();
    match error {
        Error::RequestBody { source } => assert!(source.to_string().contains("the disk went away")),
        other => panic!("{other:?}"),
    }
    client.close();
}

#[test]
fn an_upload_whose_reader_panics_fails_the_request_at_once() {
    // Not a request left waiting for the rest of its body until its
    // timeout: the panic ends the body as an error would.
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client(false);
    let started = Instant::now();
    let error = client
        .post(server.url("/"))
        .body(Upload::from_reader(
            BreaksAfter {
                left: 100_000,
                panics: true,
            },
            None,
        ))
        .send()
        .wait()
        .unwrap_err();
    match error {
        Error::RequestBody { source } => {
            assert!(source.to_string().contains("panicked"), "{source}")
        }
        other => panic!("{other:?} after {:?}", started.elapsed()),
    }
    assert_settles(&client, WAIT);
    client.close();
}

/// An endless `Read` counting what it gave.
struct Endless(Arc<AtomicU64>);

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(b'e');
        self.0.fetch_add(buf.len() as u64, Ordering::SeqCst);
        Ok(buf.len())
    }
}

#[test]
fn an_upload_to_a_server_that_does_not_read_holds_at_most_a_window() {
    let server = TestServer::start(Behaviour::custom(|mut stream, _| {
        let _ = read_head(&mut stream);
        // Reads nothing more, until the client goes.
        let mut byte = [0; 1];
        let _ = stream.peek(&mut byte);
        thread::sleep(Duration::from_secs(5));
    }));
    let client = client(false);
    let produced = Arc::new(AtomicU64::new(0));
    let future = client
        .put(server.url("/"))
        .body(Upload::from_reader(Endless(produced.clone()), None))
        .send();
    settled(&produced);
    let buffered = client.stats().buffered_body_bytes;
    assert!(
        buffered <= WINDOW + 64 * 1024,
        "{buffered} bytes read ahead of a server that does not read"
    );
    assert!(future.cancel());
    // The pump let go when the request ended.
    let at_cancel = settled(&produced);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(produced.load(Ordering::SeqCst), at_cancel);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_server_refusing_a_streamed_upload_early_is_heard_not_its_reset() {
    let server = TestServer::start(Behaviour::custom(|mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        let _ = stream.write_all(&response(413, &[("Connection", "close")], b"too big"));
        // Closed with the upload unread: the client's writes get a reset.
    }));
    let client = client(false);
    let produced = Arc::new(AtomicU64::new(0));
    let response = client
        .put(server.url("/"))
        .body(Upload::from_reader(Endless(produced), None))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(response.text().wait().unwrap(), "too big");
    client.close();
}

/// The same early answer, longer than the body's window, read by a slow
/// reader, and delimited by the close: reading pauses when the window is
/// full, the upload's next write fails meanwhile (the server has closed),
/// and the answer, there whole in the socket, is still read to its end,
/// in both timeout modes — not failed by the write's reset at the point
/// the window filled, with the end of the stream left unread.
#[test]
fn an_early_answer_longer_than_the_window_is_read_whole_after_the_upload_fails() {
    // Small enough for the client's socket to hold what it has not read
    // (so all of it is there before the server's reset), far more than
    // the window.
    let body: Vec<u8> = (0..30_000u32).map(|i| (i % 251) as u8).collect();
    for event_loop_timeouts in [false, true] {
        let sent = body.clone();
        let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
            if read_head(&mut stream).is_none() {
                return;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            // Some first, so that the client reads and fills its window
            // before the rest and the close come.
            let _ = stream.write_all(&sent[..10_000]);
            thread::sleep(Duration::from_millis(100));
            let _ = stream.write_all(&sent[10_000..]);
            thread::sleep(Duration::from_millis(300));
            // Closed with the upload unread: the client's writes get a reset.
        }));
        let client = builder(event_loop_timeouts)
            .body_window(1)
            .request_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let produced = Arc::new(AtomicU64::new(0));
        let mut response = client
            .put(server.url("/"))
            .body(Upload::from_reader(Endless(produced), None))
            .send()
            .wait()
            .unwrap();
        // A slow reader: the upload fails while its window is full.
        thread::sleep(Duration::from_millis(1000));
        let mut got = Vec::new();
        let read = response.body_mut().read_to_end(&mut got);
        assert!(
            read.is_ok(),
            "{event_loop_timeouts}: after {} of {} bytes: {read:?}",
            got.len(),
            body.len()
        );
        assert!(got == body, "{event_loop_timeouts}: the body differs");
        client.close();
    }
}

/// Sets its flag when dropped: tells when an upload's source is let go.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A PUT of an endless body (an [`EndlessReader`]) to `server`, on a
/// client with no request timeout, once its head has come: the client, the
/// response, and the flag its source sets when it is dropped.
fn endless_put(server: &TestServer) -> (tickless::Client, tickless::Response, Arc<AtomicBool>) {
    let client = builder(false)
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let source = EndlessReader {
        _flag: DropFlag(dropped.clone()),
    };
    let response = client
        .put(server.url("/"))
        .body(Upload::from_reader(source, None))
        .send()
        .wait()
        .unwrap();
    (client, response, dropped)
}

/// A `Read` that never ends (its flag set when it is dropped).
struct EndlessReader {
    _flag: DropFlag,
}

impl Read for EndlessReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(b'r');
        Ok(buf.len())
    }
}

static PIECE: [u8; 16 * 1024] = [b's'; 16 * 1024];

/// An async body that never ends, each poll ready with its next piece
/// (its flag set when it is dropped).
struct EndlessBody {
    _flag: DropFlag,
}

impl tickless::http_body::Body for EndlessBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        let piece = Bytes::from_static(&PIECE);
        Poll::Ready(Some(Ok(tickless::http_body::Frame::data(piece))))
    }
}

/// The head and first bytes of an answer whose body is `too big!`.
const REFUSAL: &[u8] = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\n\r\ntoo ";

/// [`answers_midway`] with `answer_start`, then writes the rest of the
/// answer, `rest`, only once it gets `finish`; then reads until the client
/// goes.
fn refuses_midway(
    answer_start: &'static [u8],
    rest: &'static [u8],
    finish: std::sync::mpsc::Receiver<()>,
) -> TestServer {
    let finish = std::sync::Mutex::new(finish);
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        if !answers_midway(&mut stream, answer_start) {
            return;
        }
        let _ = finish.lock().unwrap().recv_timeout(WAIT);
        let _ = stream.write_all(rest);
        drain(&mut stream);
    }))
}

/// Reads a request's head and the first 64 KiB of its upload (the upload
/// is under way), then writes `answer_start`. `false` if the client went
/// first.
fn answers_midway(stream: &mut std::net::TcpStream, answer_start: &[u8]) -> bool {
    if read_head(stream).is_none() {
        return false;
    }
    let mut first = vec![0; 64 * 1024];
    if stream.read_exact(&mut first).is_err() {
        return false;
    }
    let _ = stream.write_all(answer_start);
    true
}

/// RFC 9112 §9.5: a refusal that comes while the upload goes on stops it.
/// The answer's end is held back until the upload's source has been let
/// go: the answer is the caller's at its head, while its upload is
/// endless, and the source (a reader's thread, an async body) is dropped
/// then, not read on until the answer ends. The connection, its request
/// cut short, is closed, never pooled.
#[test]
fn a_refusal_while_the_upload_goes_on_lets_go_of_its_source_at_once() {
    for kind in ["reader", "async body"] {
        let (finish, finishing) = std::sync::mpsc::channel();
        let server = refuses_midway(REFUSAL, b"big!", finishing);
        let client = client(false);
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let upload = match kind {
            "reader" => Upload::from_reader(EndlessReader { _flag: flag }, None),
            _ => Upload::from_stream(EndlessBody { _flag: flag }),
        };
        let future = client.put(server.url("/")).body(upload).send();
        assert!(
            eventually(WAIT, || future.is_done()),
            "{kind}: the answer waits on an endless upload"
        );
        let response = future.wait().unwrap();
        assert_eq!(response.status(), 413, "{kind}");
        assert!(
            eventually(WAIT, || dropped.load(Ordering::SeqCst)),
            "{kind}: the source is still held while the answer is read"
        );
        finish.send(()).unwrap();
        assert_eq!(response.text().wait().unwrap(), "too big!", "{kind}");
        assert!(
            eventually(WAIT, || client.stats().open_connections == 0),
            "{kind}: a half-sent connection was kept: {:?}",
            client.stats()
        );
        client.close();
    }
}

/// [`answers_midway`] with `answer_start`, then reads on as a server that
/// drains what it refused (nginx's lingering close): until the end of the
/// stream, a second's silence, or [`READ_ON_MAX`] bytes. Then stores what
/// it read there in `read_on` and sends `rest`.
fn reads_on_after_refusing(
    answer_start: &'static [u8],
    rest: &'static [u8],
    read_on: Arc<AtomicU64>,
) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        if !answers_midway(&mut stream, answer_start) {
            return;
        }
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut total = 0;
        let mut buf = vec![0; 256 * 1024];
        while total < READ_ON_MAX {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n as u64,
            }
        }
        read_on.store(total, Ordering::SeqCst);
        stream.set_read_timeout(None).unwrap();
        let _ = stream.write_all(rest);
        drain(&mut stream);
    }))
}

/// More than the socket buffers can hold between client and server here
/// (`net.ipv4.tcp_wmem` and `tcp_rmem` allow 4 and 32 MiB at most).
const READ_ON_MAX: u64 = 128 << 20;

/// RFC 9112 §9.5, seen from a server that reads on: after a refusal —
/// kept alive, or with `Connection: close` — only what was already on its
/// way arrives, not the rest of a body larger than the buffers on the way.
#[test]
fn a_refusal_while_the_upload_goes_on_stops_it_though_the_server_reads_on() {
    let refusals: [&[u8]; 2] = [
        REFUSAL,
        b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo ",
    ];
    for answer_start in refusals {
        let read_on = Arc::new(AtomicU64::new(u64::MAX));
        let server = reads_on_after_refusing(answer_start, b"big!", read_on.clone());
        let client = client(false);
        let body = vec![b'h'; READ_ON_MAX as usize + (1 << 20)];
        let response = client
            .put(server.url("/"))
            .body(body)
            .send()
            .wait()
            .unwrap();
        let status = response.status();
        assert!(status == 413 || status == 401, "{status}");
        assert_eq!(response.text().wait().unwrap(), "too big!", "{status}");
        let read_on = read_on.load(Ordering::SeqCst);
        assert!(
            read_on < READ_ON_MAX,
            "{status}: the upload went on after the refusal ({read_on} bytes)"
        );
        assert!(
            eventually(WAIT, || client.stats().open_connections == 0),
            "{status}: a half-sent connection was kept: {:?}",
            client.stats()
        );
        client.close();
    }
}

/// An answer that does not refuse the request — interim `100 Continue` and
/// `103 Early Hints` unasked for, then a 2xx head — lets the upload go on
/// to its end: the server (an echo, a transform) may still be reading it,
/// and ends its answer only once it has all of it.
#[test]
fn interim_answers_and_an_early_2xx_let_the_upload_go_on_to_its_end() {
    const LENGTH: usize = 8 << 20;
    let uploads = [
        ("bytes", Upload::from(vec![b'b'; LENGTH])),
        (
            "reader",
            Upload::from_reader(
                std::io::repeat(b'r').take(LENGTH as u64),
                Some(LENGTH as u64),
            ),
        ),
    ];
    for (kind, upload) in uploads {
        let server = answers_while_it_reads();
        let client = client(false);
        let response = client
            .put(server.url("/"))
            .body(upload)
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200, "{kind}");
        let text = response.text().wait().unwrap();
        assert_eq!(text, format!("received {LENGTH}"), "{kind}");
        client.close();
    }
}

/// Answers a request while it reads its upload: `100 Continue` and `103
/// Early Hints` after 64 KiB, a 200's head after 128 KiB, and the body,
/// saying how much came, once it has all of it.
fn answers_while_it_reads() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let mut upload = vec![0; content_length(&head)];
        let (start, rest) = upload.split_at_mut(64 * 1024);
        let (middle, rest) = rest.split_at_mut(64 * 1024);
        let answered = stream.read_exact(start).is_ok()
            && stream
                .write_all(
                    b"HTTP/1.1 100 Continue\r\n\r\n\
                      HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n",
                )
                .is_ok()
            && stream.read_exact(middle).is_ok()
            && stream
                .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                .is_ok()
            && stream.read_exact(rest).is_ok();
        if !answered {
            return;
        }
        let said = format!("received {}", upload.len());
        let last = format!("{:x}\r\n{said}\r\n0\r\n\r\n", said.len());
        let _ = stream.write_all(last.as_bytes());
        drain(&mut stream);
    }))
}

/// A `Read` that blocks until its sender goes, then ends.
struct Blocked(std::sync::mpsc::Receiver<()>);

impl Read for Blocked {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        let _ = self.0.recv();
        Ok(0)
    }
}

#[test]
fn closing_does_not_wait_for_an_upload_reader_that_blocks() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client(true);
    let (unblock, blocked) = std::sync::mpsc::channel();
    let future = client
        .post(server.url("/"))
        .body(Upload::from_reader(Blocked(blocked), None))
        .send();
    assert!(eventually(WAIT, || client.stats().in_flight == 1));
    client.close();
    assert!(matches!(future.wait(), Err(Error::ClientClosed)));
    drop(unblock);
}

/// A body whose every byte says where it is.
fn patterned(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn a_body_collected_after_its_window_filled_comes_whole_and_in_order() {
    let body = patterned(1 << 20);
    let length_framed = response(200, &[], &body);
    let pieces: Vec<&[u8]> = body.chunks(10_000).collect();
    let chunk_framed = chunked(200, &pieces, &[("X-Done", "yes")]);
    for event_loop_timeouts in [false, true] {
        for (framing, bytes) in [("length", &length_framed), ("chunked", &chunk_framed)] {
            let bytes = bytes.clone();
            let server = TestServer::respond(move |_| bytes.clone());
            let client = client(event_loop_timeouts);
            let response = client.get(server.url("/")).send().wait().unwrap();
            // The loop reads a window ahead and stops; collecting takes
            // that back and gathers the rest after it.
            assert!(eventually(WAIT, || client.stats().buffered_body_bytes >= WINDOW));
            let got = response.bytes().wait().unwrap();
            assert!(got == body, "{framing}: the collected body differs");
            assert_settles(&client, WAIT);
            assert_eq!(client.stats().buffered_body_bytes, 0);
            client.close();
        }
    }
}

#[test]
fn a_body_collected_at_once_is_read_in_place_byte_for_byte() {
    let body = patterned(3 << 20);
    let bytes = response(200, &[], &body);
    let server = TestServer::respond(move |_| bytes.clone());
    let client = client(true);
    for _ in 0..3 {
        let got = client
            .get(server.url("/"))
            .send()
            .wait()
            .unwrap()
            .bytes()
            .wait()
            .unwrap();
        assert!(got == body, "the body read in place differs");
    }
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_collected_by_a_task_comes_whole() {
    let body = patterned(700_000);
    let bytes = response(
        200,
        &[("Content-Type", "text/plain; charset=latin1")],
        &body,
    );
    let server = TestServer::respond(move |_| bytes.clone());
    let client = client(false);
    let got = client
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(got == body);
    let text = client
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Latin-1: one char per byte.
    assert_eq!(text.chars().count(), body.len());
    client.close();
}

/// Answers `/big` with `body` (length-framed) in pieces of 100 000 bytes a
/// few milliseconds apart — so the client finds the socket empty mid-body —
/// then stops after `cut` bytes if given (and closes, or stalls if
/// `stall`); anything else with `small`.
fn in_pieces(body: Vec<u8>, cut: Option<usize>, stall: bool) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        while let Ok(request) = reader.read_request(&mut stream) {
            if request.target != "/big" {
                if stream.write_all(&response(200, &[], b"small")).is_err() {
                    return;
                }
                continue;
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            let end = cut.unwrap_or(body.len());
            for piece in body[..end].chunks(100_000) {
                if stream.write_all(piece).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(2));
            }
            if cut.is_some() {
                if stall {
                    thread::sleep(Duration::from_secs(3));
                }
                return;
            }
        }
    }))
}

fn no_read_timeout(event_loop_timeouts: bool, request_timeout: Duration) -> Client {
    builder(event_loop_timeouts)
        .read_timeout(Duration::ZERO)
        .request_timeout(request_timeout)
        .build()
        .unwrap()
}

/// Without a read timeout, a collected body of known length makes the loop
/// wait for its rest on the socket's low-water mark (Linux): the body still
/// comes whole, the next answer on the same connection is not held back by
/// the mark, and an early end or a stall mid-body still ends it.
#[test]
fn a_collected_body_waited_for_in_large_pieces_is_whole_and_the_next_answer_is_not_held_back() {
    let body = patterned(3 << 20);
    for event_loop_timeouts in [false, true] {
        let server = in_pieces(body.clone(), None, false);
        let client = no_read_timeout(event_loop_timeouts, Duration::from_secs(30));
        for _ in 0..2 {
            let got = client
                .get(server.url("/big"))
                .send()
                .wait()
                .unwrap()
                .bytes()
                .wait()
                .unwrap();
            assert!(got == body, "the body differs");
            // A small answer right after, on the same connection: read at
            // its first bytes, not when a mark of the last body is reached.
            let started = Instant::now();
            let small = client
                .get(server.url("/small"))
                .request_timeout(Duration::from_secs(5))
                .send()
                .wait()
                .unwrap()
                .bytes()
                .wait()
                .unwrap();
            assert_eq!(&small[..], b"small");
            assert!(started.elapsed() < Duration::from_secs(4));
        }
        assert_eq!(server.connections_accepted(), 1);
        client.close();
    }
}

#[test]
fn a_collected_body_cut_short_or_stalled_under_the_low_water_mark_still_ends() {
    let body = patterned(3 << 20);
    for event_loop_timeouts in [false, true] {
        // The server closes after 1.5 MiB: a truncation, found at once.
        let server = in_pieces(body.clone(), Some(1_500_000), false);
        let client = no_read_timeout(event_loop_timeouts, Duration::from_secs(30));
        let response = client.get(server.url("/big")).send().wait().unwrap();
        let started = Instant::now();
        let result = response.bytes().wait();
        assert!(result.is_err(), "a truncated body is an error");
        assert!(started.elapsed() < Duration::from_secs(10));
        client.close();
        // The server stalls after 1.5 MiB: the request timeout ends it.
        let server = in_pieces(body.clone(), Some(1_500_000), true);
        let client = no_read_timeout(event_loop_timeouts, Duration::from_millis(800));
        let response = client.get(server.url("/big")).send().wait().unwrap();
        match response.bytes().wait() {
            Err(e) => assert!(e.is_timeout(), "{e}"),
            Ok(_) => panic!("a stalled body came whole"),
        }
        client.close();
    }
}

#[test]
fn a_body_of_known_length_read_as_a_stream_is_byte_exact() {
    let body = patterned(3 << 20);
    let bytes = response(200, &[], &body);
    let server = TestServer::respond(move |_| bytes.clone());
    for event_loop_timeouts in [false, true] {
        let client = client(event_loop_timeouts);
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        let mut got = Vec::new();
        response.body_mut().read_to_end(&mut got).unwrap();
        assert!(got == body, "the streamed body differs");
        assert_settles(&client, WAIT);
        assert_eq!(client.stats().buffered_body_bytes, 0);
        client.close();
    }
}

/// Answers with a head announcing 1 MiB and sends it in three pieces: the
/// first at once, each next one only when `next` says so (or after 20 s) —
/// so bytes of it reach the client only if it reads them.
fn piece_by_piece(next: std::sync::mpsc::Receiver<()>) -> TestServer {
    let next = std::sync::Mutex::new(next);
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        let body = patterned(1 << 20);
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        let _ = stream.write_all(head.as_bytes());
        let (first, rest) = body.split_at(100_000);
        let (second, third) = rest.split_at(100_000);
        for (i, piece) in [first, second, third].into_iter().enumerate() {
            if i > 0 {
                let next = next.lock().unwrap();
                let _ = next.recv_timeout(Duration::from_secs(20));
            }
            if stream.write_all(piece).is_err() {
                return;
            }
        }
        // Until the client goes.
        while matches!(stream.read(&mut [0; 64]), Ok(n) if n > 0) {}
    }))
}

/// Without a read timeout, a body of known length nobody has read yet lets
/// its bytes pile up on the socket's low-water mark (Linux). Its reader's
/// first read must bring the mark down: a stream read piece by piece gets
/// each piece as it arrives, not when the body's rest is there.
#[test]
fn a_body_read_as_a_stream_after_a_pause_gets_each_piece_as_it_arrives() {
    let body = patterned(1 << 20);
    for event_loop_timeouts in [false, true] {
        let (next, pieces) = std::sync::mpsc::channel();
        let server = piece_by_piece(pieces);
        let client = no_read_timeout(event_loop_timeouts, Duration::from_secs(60));
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        // The loop reads the first piece and finds the socket empty.
        thread::sleep(Duration::from_millis(200));
        let body_reader = response.body_mut();
        let mut got = vec![0; 200_000];
        body_reader.read_exact(&mut got[..100_000]).unwrap();
        next.send(()).unwrap();
        // The second piece comes only now: read as it arrives, well before
        // the server's 20 s fallback.
        let started = Instant::now();
        body_reader.read_exact(&mut got[100_000..]).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the second piece took {:?}",
            started.elapsed()
        );
        next.send(()).unwrap();
        body_reader.read_to_end(&mut got).unwrap();
        assert!(got == body, "the streamed body differs");
        client.close();
    }
}

/// Dropping such a body unread ends its exchange at once, not when the
/// rest of the body reaches the mark.
#[test]
fn a_body_dropped_before_its_first_read_ends_at_once_without_a_read_timeout() {
    for event_loop_timeouts in [false, true] {
        let (_next, pieces) = std::sync::mpsc::channel();
        let server = piece_by_piece(pieces);
        let client = no_read_timeout(event_loop_timeouts, Duration::from_secs(60));
        let response = client.get(server.url("/")).send().wait().unwrap();
        thread::sleep(Duration::from_millis(200));
        drop(response);
        // Well before the server's 20 s fallback sends the second piece.
        assert_settles(&client, WAIT);
        client.close();
    }
}

// Found by a review (2026-12-04): the read timeout while the request is
// not all sent, and `Duration::MAX` as the `100 Continue` delay.

/// A server that never says `100 Continue`: it reports whether any body
/// byte came within 500 ms of the head.
fn never_continues() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut early = [0; 1];
        let before = matches!(stream.read(&mut early), Ok(1));
        let _ = stream.write_all(&response(
            200,
            &[("Connection", "close")],
            format!("early={before}").as_bytes(),
        ));
    }))
}

/// `expect_continue_timeout(Duration::MAX)` is "wait as long as it takes"
/// (it sent the body at once, as zero does, before 2026-12-04: the
/// deadline overflowed to none, which `sent_part` read as "no delay").
#[test]
fn expect_continue_timeout_max_waits_rather_than_sending_at_once() {
    let text = post_expecting_continue(&never_continues(), Duration::MAX);
    assert_eq!(text, "early=false", "the body went before any 100 Continue");
}

/// Answers a request's head at once with a head announcing a 1 MB body and
/// 10 bytes of it, then goes silent: it neither sends more nor reads the
/// rest of the upload (a server that answers early, then hangs).
fn answers_early_then_stalls() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n0123456789");
        // Silent for 8 s, holding the socket without reading the upload,
        // then gone.
        thread::sleep(Duration::from_secs(8));
    }))
}

/// A client with a read timeout of 500 ms and no request timeout (as the
/// builder's docs advise for large transfers), and its response to
/// `upload` bytes posted to `server` (behind `Expect: 100-continue` if
/// `expect`).
fn upload_with_a_read_timeout(
    server: &TestServer,
    upload: usize,
    expect: bool,
) -> (Client, tickless::Response) {
    let client = Client::builder()
        .event_loops(1)
        .read_timeout(Duration::from_millis(500))
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let response = client
        .post(server.url("/"))
        .body(vec![b'u'; upload])
        .expect_continue(expect)
        .send()
        .wait()
        .unwrap();
    (client, response)
}

/// Posts `upload` bytes (behind `Expect: 100-continue` if `expect`) to a
/// server that answers at once with 10 bytes of a 1 MB body and goes
/// silent, and reads the body ([`upload_with_a_read_timeout`]): the read
/// timeout must end it, within 5 s. It is the server's silence while the
/// client has room for the body — whether or not the request was written
/// whole (before 2026-12-04 only a request written whole started it).
fn silent_mid_body(upload: usize, expect: bool) {
    let server = answers_early_then_stalls();
    let (client, mut response) = upload_with_a_read_timeout(&server, upload, expect);
    let (done, ended) = std::sync::mpsc::channel();
    let reader = thread::spawn(move || {
        let mut got = Vec::new();
        let result = response.body_mut().read_to_end(&mut got);
        let _ = done.send((got.len(), result.map_err(|e| e.to_string())));
    });
    match ended.recv_timeout(Duration::from_secs(5)) {
        Ok((len, result)) => {
            assert_eq!(len, 10);
            assert!(
                result.is_err(),
                "a 10-byte body of a 1 MB one is no success"
            );
        }
        Err(_) => {
            client.close();
            let _ = reader.join();
            panic!("no read timeout: the body still waits 5 s after the server went silent (read timeout 500 ms)");
        }
    }
    client.close();
}

/// Control: an upload small enough to be written whole.
#[test]
fn control_a_silent_server_mid_body_is_a_read_timeout_after_a_small_upload() {
    silent_mid_body(1000, false);
}

/// An upload the server stopped reading: the request is never written
/// whole.
#[test]
fn a_silent_server_mid_body_is_a_read_timeout_even_while_the_upload_is_stuck() {
    silent_mid_body(64 << 20, false);
}

/// `Expect: 100-continue` answered before any `100 Continue`: the body is
/// never sent (`Sending::Skipped`), so the request is never written whole.
#[test]
fn a_silent_server_mid_body_is_a_read_timeout_after_an_early_final_answer_to_expect() {
    silent_mid_body(1000, true);
}

/// Answers at once with a 4 MB body (which fills the client's window and
/// socket), and only after 300 ms reads the request's upload (32 MB: more than the
/// socket buffers hold, so the upload ends only then).
fn answers_big_then_reads_the_upload() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let length = content_length(&head);
        let mut writer = stream.try_clone().unwrap();
        let sender = thread::spawn(move || {
            let body = vec![b'd'; 4 << 20];
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(&body);
        });
        thread::sleep(Duration::from_millis(300));
        let mut upload = vec![0; length];
        let _ = stream.read_exact(&mut upload);
        let _ = sender.join();
        // Until the client goes.
        let mut sink = [0; 64];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    }))
}

fn busy_caller_reads_late(upload: usize) {
    let server = answers_big_then_reads_the_upload();
    let (client, mut response) = upload_with_a_read_timeout(&server, upload, false);
    // The caller is busy: the window fills (and, for a large upload, the
    // upload ends meanwhile).
    thread::sleep(Duration::from_secs(2));
    let mut got = Vec::new();
    let result = response.body_mut().read_to_end(&mut got);
    assert!(
        result.is_ok(),
        "after {} bytes: {:?}",
        got.len(),
        result.map_err(|e| e.to_string())
    );
    assert_eq!(got.len(), 4 << 20);
    client.close();
}

/// Control: an upload the socket buffers take at once (sent whole before
/// the window fills): the caller reading 2 s late gets its whole body.
#[test]
fn control_a_reader_that_has_not_read_yet_is_no_read_timeout_after_a_small_upload() {
    busy_caller_reads_late(1 << 20);
}

/// The read timeout "runs only while the client has room for the body's
/// bytes and waits for them" (a full pipe pauses it: `pause_read`). But
/// `sent_part` starts it, unconditionally, when the request's last byte
/// goes out — here while the pipe is full and the caller has not read yet:
/// a caller that reads its body 2 s later gets a read timeout, though the
/// server was never silent while the client had room.
#[test]
fn a_reader_that_has_not_read_yet_is_no_read_timeout_when_the_upload_ends_late() {
    busy_caller_reads_late(32 << 20);
}

// Found by a review (2026-12-05): the wait for `100 Continue` ran no
// timeout but the request's.

/// Waits for `100 Continue` as long as it takes (`Duration::MAX`), behind
/// a read timeout of 300 ms and no request timeout, to a server that takes
/// the head and says nothing: its silence is a read timeout. Before
/// 2026-12-05 nothing bounded it — the read timeout started only once the
/// body was out, which it never was — and the request waited for ever
/// (with a finite delay, until the delay sent the body).
#[test]
fn a_server_silent_while_the_body_waits_for_100_continue_is_a_read_timeout() {
    silent_while_waiting_for_100_continue(false);
    silent_while_waiting_for_100_continue(true);
}

fn silent_while_waiting_for_100_continue(event_loop_timeouts: bool) {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = builder(event_loop_timeouts)
        .read_timeout(Duration::from_millis(300))
        .request_timeout(Duration::ZERO)
        .expect_continue_timeout(Duration::MAX)
        .build()
        .unwrap();
    let pending = client
        .post(server.url("/"))
        .body(vec![b'c'; 1000])
        .expect_continue(true)
        .send();
    read_timeout_within_5s(
        &client,
        pending,
        &format!("waiting for 100 Continue (event-loop timeouts: {event_loop_timeouts})"),
    );
    client.close();
}

/// Waits for `pending` on another thread: its outcome must be a read
/// timeout within 5 s. Past that the client is closed (which ends the
/// wait) and the test fails, saying it was `what` that waited.
fn read_timeout_within_5s(client: &Client, pending: ResponseFuture, what: &str) {
    let (done, ended) = std::sync::mpsc::channel();
    let waiter = thread::spawn(move || {
        let _ = done.send(pending.wait().map(|response| response.status()));
    });
    match ended.recv_timeout(Duration::from_secs(5)) {
        Ok(result) => assert!(
            matches!(result, Err(Error::ReadTimeout(_))),
            "{what}: {result:?}"
        ),
        Err(_) => {
            client.close();
            let _ = waiter.join();
            panic!("no read timeout 5 s on: {what}");
        }
    }
}

/// Says `100 Continue` at once, then reads the body (64 MB) steadily but
/// slowly — 512 KiB every 20 ms, about 2.6 s in all — and answers with its
/// length.
fn continues_then_reads_slowly() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let mut left = content_length(&head);
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        let mut buf = vec![0; 512 * 1024];
        while left > 0 {
            let n = buf.len().min(left);
            if stream.read_exact(&mut buf[..n]).is_err() {
                return;
            }
            left -= n;
            thread::sleep(Duration::from_millis(20));
        }
        let _ = stream.write_all(&ok("whole"));
        drain(&mut stream);
    }))
}

/// The other side of the test above: once `100 Continue` came, the body
/// going out is not the server's silence — a read timeout (1 s) shorter
/// than the upload (about 2.6 s) does not fire while it goes.
#[test]
fn a_body_sent_after_100_continue_is_no_read_timeout_however_long_it_takes() {
    let server = continues_then_reads_slowly();
    let client = Client::builder()
        .event_loops(1)
        .read_timeout(Duration::from_secs(1))
        .request_timeout(Duration::ZERO)
        .expect_continue_timeout(Duration::MAX)
        .build()
        .unwrap();
    let text = client
        .post(server.url("/"))
        .body(vec![b'b'; 64 << 20])
        .expect_continue(true)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, "whole");
    client.close();
}

/// An async body of a declared length (5) that gives it, then never ends.
struct WholeThenPending(Option<&'static str>);

impl tickless::http_body::Body for WholeThenPending {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        match self.0.take() {
            Some(piece) => Poll::Ready(Some(Ok(tickless::http_body::Frame::data(piece.into())))),
            None => Poll::Pending,
        }
    }

    fn size_hint(&self) -> tickless::http_body::SizeHint {
        tickless::http_body::SizeHint::with_exact(5)
    }
}

/// Over HTTP/1.1 a body whose `Content-Length` has all gone is whole on
/// the wire: the request is sent, though its source never says it has
/// ended (as over HTTP/2 since 88f37bc). Before 2026-12-05 the request was
/// never counted sent, so a server silent after taking it whole ran no
/// read timeout — the request waited for ever (with no request timeout).
#[test]
fn a_silent_server_after_an_upload_whole_by_its_length_is_a_read_timeout() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = builder(false)
        .read_timeout(Duration::from_millis(300))
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let pending = client
        .post(server.url("/"))
        .body(Upload::from_stream(WholeThenPending(Some("whole"))))
        .send();
    read_timeout_within_5s(&client, pending, "a silent server that took the whole body");
    client.close();
}

/// The same body, answered: the connection, its request whole, goes back
/// to the pool (before 2026-12-05 it was closed: the request never
/// counted as sent, it was taken as cut short).
#[test]
fn a_connection_whose_upload_was_whole_by_its_length_is_reused() {
    let server = TestServer::respond(|request| ok(&String::from_utf8_lossy(&request.body)));
    let client = client(false);
    let text = client
        .post(server.url("/"))
        .body(Upload::from_stream(WholeThenPending(Some("whole"))))
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(text, "whole");
    assert!(eventually(WAIT, || client.stats().idle_connections == 1));
    let again = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(again.status(), 200);
    drop(again);
    assert_eq!(
        server.connections_accepted(),
        1,
        "the first connection was not reused"
    );
    client.close();
}

// Found by a review (2026-12-05): a final answer to `Expect: 100-continue`
// that came while the head was still going sent the body all the same; a
// 2xx that came whole while a streamed upload went on cut the upload.

/// A head of `Expect: 100-continue` larger than the socket buffers hold on
/// the way (8 MiB of headers), so that it is still going out when the
/// answer comes.
fn huge_headers() -> Vec<(String, String)> {
    (0..128)
        .map(|i| (format!("X-Pad-{i}"), "p".repeat(64 * 1024)))
        .collect()
}

/// What the server of [`answers_200_mid_head`] saw: the body bytes that came
/// after the request's head (none if the head never ended), once the client
/// closed.
type BodySeen = Arc<Mutex<Option<usize>>>;

/// Reads 64 KiB of a request's head, answers with the head of a 200 and
/// the first half of its body, reads what comes for as long as the client
/// sends (a second of silence ends it), then sends the rest of the answer
/// and reads until the client closes. Stores the body bytes it saw.
fn answers_200_mid_head(seen: BodySeen) -> (std::net::SocketAddr, thread::JoinHandle<()>) {
    let listener = small_buffered_listener();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let mut stream = accept_in_time(&listener);
        let mut got = vec![0; 64 * 1024];
        stream.read_exact(&mut got).unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nok")
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut buf = vec![0; 256 * 1024];
        let mut closed = false;
        loop {
            match stream.read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
        }
        stream.set_read_timeout(None).unwrap();
        if !closed {
            let _ = stream.write_all(b"!!");
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        }
        let body = got
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(0, |end| got.len() - end - 4);
        *seen.lock().unwrap() = Some(body);
    });
    (addr, server)
}

/// A 2xx to `Expect: 100-continue` that comes before any `100 Continue`,
/// while the request's head is still going out: the body is never sent,
/// as when the same answer comes once the head is out (the server has
/// said by its final answer that it does not wait for it) — and the
/// connection, its request cut short, is closed. Before 2026-12-05 only
/// a refusal stopped the request there: after a 2xx the head went on,
/// and the body after the expect delay.
#[test]
fn a_2xx_before_100_continue_while_the_head_goes_out_skips_the_body() {
    for kind in ["bytes", "reader"] {
        let seen = BodySeen::default();
        let (addr, server) = answers_200_mid_head(seen.clone());
        let client = builder(false)
            .expect_continue_timeout(Duration::from_millis(100))
            .request_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let upload = match kind {
            "bytes" => Upload::from(vec![b'b'; 100_000]),
            _ => Upload::from_reader(std::io::repeat(b'r').take(100_000), Some(100_000)),
        };
        let mut request = client
            .post(format!("http://{addr}/"))
            .body(upload)
            .expect_continue(true);
        for (name, value) in huge_headers() {
            request = request.header(name, value);
        }
        let response = request.send().wait().unwrap();
        assert_eq!(response.status(), 200, "{kind}");
        assert_eq!(response.text().wait().unwrap(), "ok!!", "{kind}");
        assert!(
            eventually(WAIT, || client.stats().open_connections == 0),
            "{kind}: a connection whose body was skipped was kept: {:?}",
            client.stats()
        );
        server.join().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            Some(0),
            "{kind}: body bytes were sent"
        );
        client.close();
    }
}

/// What the server of [`answers_whole_then_reads_on`] counted of each
/// upload it read to its end after answering it.
type UploadsRead = Arc<Mutex<Vec<usize>>>;

/// On one connection, request after request: a request with a body has
/// 64 KiB of it read, then a whole 200 (`ok`) at once, then the rest of
/// the body read and counted (by its `Content-Length`, or its chunks'
/// bytes, framing included); one without is answered `ok`.
fn answers_whole_then_reads_on(uploads: UploadsRead) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| loop {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let length = content_length(&head);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        if length == 0 && !chunked {
            if stream.write_all(&ok("ok")).is_err() {
                return;
            }
            continue;
        }
        let mut first = vec![0; 64 * 1024];
        if stream.read_exact(&mut first).is_err() || stream.write_all(&ok("ok")).is_err() {
            return;
        }
        let mut read = first.len();
        let mut buf = vec![0; 256 * 1024];
        if chunked {
            // Until the last chunk (the body's bytes are all `r`).
            let (more, whole) = read_to_last_chunk(&mut stream, first);
            read += more;
            if !whole {
                uploads.lock().unwrap().push(read);
                return;
            }
        } else {
            while read < length {
                let want = buf.len().min(length - read);
                match stream.read(&mut buf[..want]) {
                    Ok(n @ 1..) => read += n,
                    _ => {
                        uploads.lock().unwrap().push(read);
                        return;
                    }
                }
            }
        }
        uploads.lock().unwrap().push(read);
    }))
}

/// More than the socket buffers hold between client and server, so that
/// the upload is still going when the answer comes whole.
const UPLOAD_PAST_THE_ANSWER: u64 = 64 << 20;

/// A 2xx that comes whole — head and body — while a streamed upload still
/// goes: the answer is the caller's at once (its bytes read before the
/// upload ends), the upload goes on to its end — the server, which may
/// read it on, gets all of it — and only then does the answer end and the
/// connection go back to the pool, to take the next request (as over
/// HTTP/2). Before 2026-12-05 the whole answer closed the connection, and
/// the upload was cut short under the server reading it.
#[test]
fn a_2xx_whole_before_the_upload_ends_lets_it_go_on_and_pools_the_connection_after() {
    for length in [Some(UPLOAD_PAST_THE_ANSWER), None] {
        let uploads = UploadsRead::default();
        let server = answers_whole_then_reads_on(uploads.clone());
        let client = client(false);
        let source = std::io::repeat(b'r').take(UPLOAD_PAST_THE_ANSWER);
        let mut response = client
            .put(server.url("/"))
            .body(Upload::from_reader(source, length))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200, "{length:?}");
        // The answer's bytes are there before the upload's end.
        let mut first = [0; 2];
        response.body_mut().read_exact(&mut first).unwrap();
        assert_eq!(&first, b"ok", "{length:?}");
        assert_eq!(response.text().wait().unwrap(), "", "{length:?}");
        // Counted once the server has read it: the client's last write
        // may be in the socket buffers still.
        assert!(eventually(WAIT, || !uploads.lock().unwrap().is_empty()));
        let read = uploads.lock().unwrap().clone();
        assert_eq!(read.len(), 1, "{length:?}");
        let framing = if length.is_some() {
            0
        } else {
            read[0] as u64 - UPLOAD_PAST_THE_ANSWER
        };
        assert!(
            read[0] as u64 >= UPLOAD_PAST_THE_ANSWER && framing < (1 << 20),
            "{length:?}: the server read {} bytes of the upload",
            read[0]
        );
        assert!(
            eventually(WAIT, || client.stats().idle_connections == 1),
            "{length:?}: {:?}",
            client.stats()
        );
        let again = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(again.text().wait().unwrap(), "ok", "{length:?}");
        assert_eq!(server.connections_accepted(), 1, "{length:?}: not reused");
        client.close();
    }
}

/// The same early whole 2xx, with an upload whose source fails after it:
/// the request was cut short, so the connection is closed, never pooled.
#[test]
fn a_2xx_whole_before_an_upload_that_then_fails_closes_the_connection() {
    let uploads = UploadsRead::default();
    let server = answers_whole_then_reads_on(uploads.clone());
    let client = client(false);
    let source = BreaksAfter {
        left: UPLOAD_PAST_THE_ANSWER as usize / 2,
        panics: false,
    };
    let response = client
        .put(server.url("/"))
        .body(Upload::from_reader(source, Some(UPLOAD_PAST_THE_ANSWER)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    // The answer's end is the upload's (as over HTTP/2): its failure.
    let _ = response.bytes().wait();
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0),
        "a connection whose upload failed was kept: {:?}",
        client.stats()
    );
    assert!(eventually(WAIT, || !uploads.lock().unwrap().is_empty()));
    let read = uploads.lock().unwrap()[0] as u64;
    assert!(read < UPLOAD_PAST_THE_ANSWER, "{read}");
    client.close();
}

/// Reads a request's head and 64 KiB of its upload, answers with a whole
/// 200 (`ok`), and reads no more until `done` (or [`WAIT`]).
fn answers_whole_then_stops_reading(done: std::sync::mpsc::Receiver<()>) -> TestServer {
    let done = Mutex::new(done);
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        let mut first = vec![0; 64 * 1024];
        if stream.read_exact(&mut first).is_err() || stream.write_all(&ok("ok")).is_err() {
            return;
        }
        let _ = done.lock().unwrap().recv_timeout(WAIT);
    }))
}

/// The same early whole 2xx, from a server that then takes no more of the
/// upload: the upload stops at the write timeout (2 s), the answer
/// stands, and the connection, its request cut short, is closed (as over
/// HTTP/2). Only the request timeout (10 s here) bounded it before.
#[test]
fn an_upload_after_a_whole_2xx_stops_at_the_write_timeout() {
    stopped_upload_leaves_the_answer(Duration::from_secs(2), Duration::from_secs(10));
}

/// The same, with no write timeout: the request timeout ends the upload,
/// and the answer, whole before it, stands — its reader gets its end, not
/// the timeout (as over HTTP/2) — and the connection closes.
#[test]
fn the_request_timeout_after_a_whole_2xx_stops_the_upload_and_the_answer_stands() {
    stopped_upload_leaves_the_answer(Duration::ZERO, Duration::from_secs(3));
}

/// A PUT the server answers whole (`ok`) after 64 KiB and then takes no
/// more of, with these timeouts: its answer's end comes — with a write
/// timeout, a second before the request timeout would bring it (a
/// loaded machine gets the rest of that as slack); without, within
/// [`WAIT`] — and its connection closes with nothing left in flight.
fn stopped_upload_leaves_the_answer(write_timeout: Duration, request_timeout: Duration) {
    let (done, finishing) = std::sync::mpsc::channel();
    let server = answers_whole_then_stops_reading(finishing);
    let client = builder(false)
        .write_timeout(write_timeout)
        .request_timeout(request_timeout)
        .build()
        .unwrap();
    let source = std::io::repeat(b'r').take(UPLOAD_PAST_THE_ANSWER);
    let response = client
        .put(server.url("/"))
        .body(Upload::from_reader(source, Some(UPLOAD_PAST_THE_ANSWER)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    let bound = match write_timeout.is_zero() {
        true => WAIT,
        false => request_timeout - Duration::from_secs(1),
    };
    let text = within("the answer's end", bound, move || response.text().wait());
    assert_eq!(text.unwrap(), "ok");
    assert!(
        eventually(WAIT, || {
            let stats = client.stats();
            stats.open_connections == 0 && stats.in_flight == 0
        }),
        "{:?}",
        client.stats()
    );
    let _ = done.send(());
    client.close();
}

/// The same early whole 2xx to an endless upload the server reads on, and
/// a reader that drops the body: nobody waits for the upload any more, so
/// it stops (its source let go) and the connection closes (as over
/// HTTP/2), rather than going on for ever (no request timeout here).
#[test]
fn an_upload_after_a_whole_2xx_stops_when_the_body_is_dropped() {
    let uploads = UploadsRead::default();
    let server = answers_whole_then_reads_on(uploads.clone());
    let (client, response, dropped) = endless_put(&server);
    assert_eq!(response.status(), 200);
    // Its answer is whole (`ok`); its end waits for the upload's.
    let mut response = response;
    let mut answer = [0; 2];
    response.body_mut().read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"ok");
    drop(response);
    assert_upload_let_go(
        &client,
        &dropped,
        "the upload went on after the body was dropped",
    );
    client.close();
}

/// The same early whole 2xx, followed by what nobody asked for — bytes
/// past it, or the end of the stream — while the upload goes on: the
/// stream cannot carry the rest, so the upload stops there, the answer
/// standing, and the connection is closed.
#[test]
fn an_upload_after_a_whole_2xx_stops_at_bytes_past_it_or_the_streams_end() {
    for past in ["bytes", "end"] {
        // What comes past the answer goes only once the client has its
        // head, read with the whole answer (one write): in an event of its
        // own, after the hold began.
        let (head_read, read) = std::sync::mpsc::channel::<()>();
        let read = Arc::new(std::sync::Mutex::new(read));
        let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
            if read_head(&mut stream).is_none() {
                return;
            }
            let mut first = vec![0; 64 * 1024];
            if stream.read_exact(&mut first).is_err() || stream.write_all(&ok("ok")).is_err() {
                return;
            }
            let _ = read.lock().unwrap().recv_timeout(WAIT);
            match past {
                "bytes" => drop(stream.write_all(b"HTTP/1.1 200 OK\r\n")),
                _ => drop(stream.shutdown(std::net::Shutdown::Write)),
            }
            drain(&mut stream);
        }));
        let (client, response, dropped) = endless_put(&server);
        assert_eq!(response.status(), 200, "{past}");
        head_read.send(()).unwrap();
        assert_eq!(response.text().wait().unwrap(), "ok", "{past}");
        assert_upload_let_go(&client, &dropped, past);
        client.close();
    }
}

/// An async body that ends at once; its size hint says so if `exact`.
struct NoBody {
    exact: bool,
}

impl tickless::http_body::Body for NoBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        true
    }

    fn size_hint(&self) -> tickless::http_body::SizeHint {
        if self.exact {
            tickless::http_body::SizeHint::with_exact(0)
        } else {
            tickless::http_body::SizeHint::default()
        }
    }
}

/// An empty request body, every way one can be given — in memory, as a
/// `Content-Length: 0` or chunked, from a reader or an async body of
/// known or unknown length — with `Expect: 100-continue` or without, by
/// POST and PUT, one after another on one connection (the first fresh,
/// the rest pooled): each goes once (nothing is taken for a write that
/// took no bytes and sent again), is answered, and leaves the connection
/// to the next. Before 2026-12-05 a streamed body of length 0 behind
/// `Expect: 100-continue` waited for `100 Continue` as any body, and the
/// server's answer (it waits for no body) found it waiting: the body
/// counted as skipped, and its connection was closed.
#[test]
fn empty_request_bodies_go_once_and_keep_their_connection() {
    let server = TestServer::respond(|request| {
        let framing = match request.header("transfer-encoding") {
            Some(_) => "chunked",
            None => request.header("content-length").unwrap_or("none"),
        };
        ok(&format!(
            "{} {} {framing}",
            request.method,
            request.body.len()
        ))
    });
    let client = builder(false)
        .expect_continue_timeout(Duration::from_millis(100))
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    type Make = fn() -> Upload;
    let bodies: [(&str, Make, &str); 6] = [
        ("vec", || Upload::from(Vec::new()), "0"),
        ("bytes", || Upload::from(Bytes::new()), "0"),
        (
            "reader of length 0",
            || Upload::from_reader(std::io::empty(), Some(0)),
            "0",
        ),
        (
            "reader",
            || Upload::from_reader(std::io::empty(), None),
            "chunked",
        ),
        (
            "async body of length 0",
            || Upload::from_stream(NoBody { exact: true }),
            "0",
        ),
        (
            "async body",
            || Upload::from_stream(NoBody { exact: false }),
            "chunked",
        ),
    ];
    let mut sent = 0;
    for expect in [false, true] {
        for method in [http::Method::POST, http::Method::PUT] {
            for (kind, body, framing) in bodies {
                for chunked in [false, true] {
                    let mut request = client
                        .request(method.clone(), server.url("/"))
                        .body(body())
                        .expect_continue(expect);
                    if chunked {
                        request = request.header("transfer-encoding", "chunked");
                    }
                    let what = format!("{method} {kind} expect={expect} chunked={chunked}");
                    let text = request.send().wait().unwrap().text().wait().unwrap();
                    sent += 1;
                    let framing = if chunked { "chunked" } else { framing };
                    assert_eq!(text, format!("{method} 0 {framing}"), "{what}");
                    assert_eq!(server.requests().len(), sent, "{what}: sent again");
                    assert!(
                        eventually(WAIT, || client.stats().idle_connections == 1),
                        "{what}: {:?}",
                        client.stats()
                    );
                    assert_eq!(server.connections_accepted(), 1, "{what}: not reused");
                }
            }
        }
    }
    client.close();
}

/// The early whole 2xx whose end is the end of the stream: framed by the
/// server's close (no length, not chunked), or with a length and the
/// server's `shutdown(Write)` sent right behind it. The server's end of
/// the stream stops the upload after a whole 2xx (see
/// `an_upload_after_a_whole_2xx_stops_at_bytes_past_it_or_the_streams_end`),
/// so it must here too — but here it came with the answer, before the
/// answer's end was held, and no readable event follows: the answer's
/// end was held until the write timeout (60 s by default) or the request
/// timeout. Before d16ab35 it came at once. The server keeps its socket
/// open. The client has sent all its upload's source has given (four
/// pieces, read by the server before it answers) and waits on the source,
/// which wakes nothing; the server's answer and its end come in one
/// segment (corked, the FIN on the answer's bytes), so the client learns
/// of both in one event.
#[test]
fn a_whole_2xx_that_ends_with_the_stream_is_not_held_for_the_upload() {
    for framing in ["close-delimited", "length, then the stream's end"] {
        let (done, finishing) = std::sync::mpsc::channel::<()>();
        let finishing = Mutex::new(finishing);
        let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
            if read_head(&mut stream).is_none() {
                return;
            }
            let mut pieces = vec![0; 4 * PIECE.len()];
            if stream.read_exact(&mut pieces).is_err() {
                return;
            }
            let answer: &[u8] = match framing {
                "close-delimited" => b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nok",
                _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            };
            let _ = socket2::SockRef::from(&stream).set_tcp_cork(true);
            let _ = stream.write_all(answer);
            let _ = stream.shutdown(std::net::Shutdown::Write);
            let _ = finishing.lock().unwrap().recv_timeout(WAIT);
        }));
        let (client, response, dropped) = four_pieces_then_pending_put(&server);
        assert_eq!(response.status(), 200, "{framing}");
        let text = within(framing, WAIT, move || response.text().wait());
        assert_eq!(text.unwrap(), "ok", "{framing}");
        assert_upload_let_go(&client, &dropped, framing);
        let _ = done.send(());
        client.close();
    }
}

/// The same early whole 2xx on a connection whose first address refused
/// the connect (the resolver's first address closed, the second the
/// server's — as `localhost` is for a server on 127.0.0.1 only when `::1`
/// comes first): the upload goes on to its end and the connection is
/// pooled, as with one address. (The refused attempt's error event was
/// noted in the connection's read buffer as the peer closing, which
/// `response_done` took for the *server* having ended the stream: the
/// answer was not held, the upload cut and the connection closed.)
#[test]
fn a_whole_2xx_on_a_connection_whose_first_address_refused_lets_the_upload_go_on() {
    let uploads = UploadsRead::default();
    let server = answers_whole_then_reads_on(uploads.clone());
    // A port nothing listens on: bound, then let go.
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = builder(false)
        .request_timeout(Duration::from_secs(30))
        .resolve("upload.test", &[refused, server.addr()])
        .build()
        .unwrap();
    let url = format!("http://upload.test:{}/", server.addr().port());
    let source = std::io::repeat(b'r').take(UPLOAD_PAST_THE_ANSWER);
    let response = client
        .put(url.as_str())
        .body(Upload::from_reader(source, Some(UPLOAD_PAST_THE_ANSWER)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "ok");
    assert!(eventually(WAIT, || !uploads.lock().unwrap().is_empty()));
    let read = uploads.lock().unwrap().clone();
    assert!(
        read[0] as u64 >= UPLOAD_PAST_THE_ANSWER,
        "the upload was cut at {} of {UPLOAD_PAST_THE_ANSWER} bytes under a server reading on",
        read[0]
    );
    assert!(
        eventually(WAIT, || client.stats().idle_connections == 1),
        "not pooled: {:?}",
        client.stats()
    );
    client.close();
}

/// The body of the answer [`stray_bytes_after_a_held_answer`] holds:
/// a first byte with the head, then a piece the client reads in place
/// (a full read, its read buffer's room) and a last one under
/// `IN_PLACE_MIN` it reads through its read buffer — a short read, which
/// says the socket is drained.
const HELD_BODY: usize = 1 + 64 * 1024 + 1024;

/// What [`stray_bytes_after_a_held_answer`] sends past its answer: an
/// answer nobody asked for.
const STRAY: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray";

/// A server of small segments (an MSS of 536, as on a network) and a
/// small receive buffer, both inherited by what it accepts: a client's
/// upload fills the socket buffers from its first few hundred KiB, and a
/// mark on the client's socket holds. (Linux wakes a reader whatever its
/// mark once its window has less than a segment left, and loopback's
/// segments are 64 KiB: there a few bytes past a 64 KiB answer woke the
/// client all the same.) Its first connection reads a PUT's head and 64
/// KiB of its upload, answers 200 with [`HELD_BODY`] bytes — its head and
/// first byte, then at the first `step` the rest — at the next `step`
/// sends [`STRAY`] and says so on `stray_sent`, and at the next reads the
/// rest of the upload, chunked, keeping the connection open. Its second
/// answers `fresh`.
fn stray_bytes_after_a_held_answer(
    steps: std::sync::mpsc::Receiver<()>,
    stray_sent: std::sync::mpsc::Sender<()>,
) -> (std::net::SocketAddr, thread::JoinHandle<()>) {
    let listener = small_buffered_listener();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let mut stream = accept_in_time(&listener);
        read_head(&mut stream).unwrap();
        let mut tail = vec![0; 64 * 1024];
        stream.read_exact(&mut tail).unwrap();
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {HELD_BODY}\r\n\r\na");
        stream.write_all(head.as_bytes()).unwrap();
        steps.recv_timeout(WAIT).unwrap();
        stream.write_all(&vec![b'a'; HELD_BODY - 1]).unwrap();
        steps.recv_timeout(WAIT).unwrap();
        stream.write_all(STRAY).unwrap();
        stray_sent.send(()).unwrap();
        steps.recv_timeout(WAIT).unwrap();
        // Until the last chunk (the body's bytes are all `s`), or the end.
        read_to_last_chunk(&mut stream, tail);
        let mut fresh = accept_in_time(&listener);
        RequestReader::new(1).read_request(&mut fresh).unwrap();
        fresh.write_all(&ok("fresh")).unwrap();
        drain(&mut fresh);
        drain(&mut stream);
    });
    (addr, server)
}

/// An async body of [`PIECE`]s, each poll ready with the next, that ends
/// at the first poll after `end` is set.
struct EndsWhenTold {
    end: Arc<AtomicBool>,
}

impl tickless::http_body::Body for EndsWhenTold {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        if self.end.load(Ordering::SeqCst) {
            return Poll::Ready(None);
        }
        let piece = Bytes::from_static(&PIECE);
        Poll::Ready(Some(Ok(tickless::http_body::Frame::data(piece))))
    }
}

/// A whole 2xx held for its upload (`answered_whole`), its body unread as
/// it came — so the socket's receive low-water mark was raised for it —
/// then bytes nobody asked for, and then the upload's end, a request
/// waiting for the connection (one per host): the bytes past the answer
/// are never the next request's answer. The connection serves it only if
/// its stream is clean: the waiting GET gets `fresh`, from a second
/// connection. (The mark stayed raised through the hold, so the bytes,
/// fewer than it, woke nothing and stopped no upload, and the socket's
/// last read, short, still said it drained: the waiting GET took the
/// connection without a peek and read `stray` as its answer.) The upload
/// waits on the server throughout: its end, told while it waits, goes in
/// the socket's next room, no read between.
#[test]
fn bytes_past_a_held_answer_under_its_bodys_mark_are_never_the_next_answer() {
    let (step, steps) = std::sync::mpsc::channel();
    let (stray_sent, stray_in) = std::sync::mpsc::channel();
    let (addr, server) = stray_bytes_after_a_held_answer(steps, stray_sent);
    let url = format!("http://{addr}/");
    let recorder = Recorder::new();
    let client = builder(false)
        .read_timeout(Duration::ZERO)
        .request_timeout(Duration::from_secs(30))
        .max_connections_per_host(1)
        .listener(recorder.clone())
        .build()
        .unwrap();
    let end = Arc::new(AtomicBool::new(false));
    let put = client
        .put(url.as_str())
        .body(Upload::from_stream(EndsWhenTold { end: end.clone() }))
        .send()
        .wait()
        .unwrap();
    assert_eq!(put.status(), 200);
    // The head is read, the body's mark raised (nobody reads it): the rest.
    step.send(()).unwrap();
    let body_read = || {
        let parts = recorder.events().into_iter().map(|(event, _)| match event {
            Event::BodyPart(n) => n,
            _ => 0,
        });
        parts.sum::<usize>() == HELD_BODY
    };
    assert!(eventually(WAIT, body_read), "the answer's body read whole");
    let get = client.get(url.as_str()).send();
    assert!(
        eventually(WAIT, || client.stats().waiting == 1),
        "{:?}",
        client.stats()
    );
    // The stray bytes; the upload's end; the server reads it.
    step.send(()).unwrap();
    stray_in.recv_timeout(WAIT).unwrap();
    // They stop the upload, the answer standing: the PUT ends, the GET
    // alone in flight. (Under the raised mark they woke nothing, and the
    // GET's answer below told it only when the pooled connection was
    // taken without a peek, as the loop's last poll was recent: most
    // often not, with other tests running beside it.)
    assert!(
        eventually(WAIT, || client.stats().in_flight == 1),
        "the bytes past the held answer did not stop its upload: {:?}",
        client.stats()
    );
    end.store(true, Ordering::SeqCst);
    step.send(()).unwrap();
    let text = get.wait().unwrap().text().wait().unwrap();
    assert_eq!(
        text, "fresh",
        "the bytes past the held answer were an answer"
    );
    let body = put.bytes().wait().unwrap();
    assert_eq!(body.len(), HELD_BODY, "the held answer stands");
    client.close();
    server.join().unwrap();
}

/// The upload's connection closes and its source is dropped (`dropped`
/// set), or the test fails saying `what` went on.
fn assert_upload_let_go(client: &tickless::Client, dropped: &AtomicBool, what: &str) {
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0
            && dropped.load(Ordering::SeqCst)),
        "{what}: {:?}",
        client.stats()
    );
}

/// An async body of four [`PIECE`]s, then pending for ever (it keeps no
/// waker: nothing of it wakes its connection again); its flag set when it
/// is dropped.
struct FourPiecesThenPending {
    given: usize,
    _flag: DropFlag,
}

impl tickless::http_body::Body for FourPiecesThenPending {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        if self.given == 4 {
            return Poll::Pending;
        }
        self.given += 1;
        let piece = Bytes::from_static(&PIECE);
        Poll::Ready(Some(Ok(tickless::http_body::Frame::data(piece))))
    }
}

/// A PUT of [`FourPiecesThenPending`] to `server`, on a client with no
/// request timeout, once its head has come: the client, the response, and
/// the flag its source sets when it is dropped.
fn four_pieces_then_pending_put(
    server: &TestServer,
) -> (tickless::Client, tickless::Response, Arc<AtomicBool>) {
    let client = builder(false)
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let source = FourPiecesThenPending {
        given: 0,
        _flag: DropFlag(dropped.clone()),
    };
    let response = client
        .put(server.url("/"))
        .body(Upload::from_stream(source))
        .send()
        .wait()
        .unwrap();
    (client, response, dropped)
}

/// The early whole 2xx with bytes nobody asked for right behind it, in
/// one write: they come in the readable event that brings the answer's
/// end, which the client reads exactly (its length known, in place), so
/// they are left in the socket and no event follows for them. The stream
/// cannot carry the rest of the upload, which stops there — the answer
/// standing, the source let go, the connection closed — as it does for
/// the same bytes later
/// (`an_upload_after_a_whole_2xx_stops_at_bytes_past_it_or_the_streams_end`).
/// (The upload went on for a connection nothing could reuse: here, its
/// source waiting, for ever; to a server that stops reading, until the
/// write timeout.)
#[test]
fn an_upload_after_a_whole_2xx_stops_at_bytes_that_came_with_its_end() {
    const ANSWER: usize = 32 * 1024;
    let server = TestServer::start(Behaviour::custom(|mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        // The four pieces (and their chunks' framing, which follows).
        let mut pieces = vec![0; 4 * PIECE.len()];
        if stream.read_exact(&mut pieces).is_err() {
            return;
        }
        let mut answer =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {ANSWER}\r\n\r\n").into_bytes();
        answer.extend_from_slice(&[b'a'; ANSWER]);
        answer.extend_from_slice(STRAY);
        if stream.write_all(&answer).is_ok() {
            drain(&mut stream);
        }
    }));
    let (client, response, dropped) = four_pieces_then_pending_put(&server);
    assert_eq!(response.status(), 200);
    assert_upload_let_go(
        &client,
        &dropped,
        "the upload went on after bytes past its answer",
    );
    assert_eq!(response.bytes().wait().unwrap().len(), ANSWER);
    client.close();
}

/// The early 2xx framed by the server's close (no length, not chunked),
/// its bytes read while the upload goes on (its source waiting, which
/// wakes nothing), then the close on its own: the end of the stream ends
/// the answer (`on_eof`), which is whole and not held for the upload —
/// the server has ended the stream, which can carry no more of it. The
/// reader gets the answer's end, the upload stops (its source let go),
/// and the connection closes.
#[test]
fn a_close_framed_2xx_ends_at_the_close_that_comes_after_its_bytes_mid_upload() {
    let (step, steps) = std::sync::mpsc::channel::<()>();
    let steps = Mutex::new(steps);
    let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        let mut pieces = vec![0; 4 * PIECE.len()];
        if stream.read_exact(&mut pieces).is_err()
            || stream
                .write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nok")
                .is_err()
            || steps.lock().unwrap().recv_timeout(WAIT).is_err()
        {
            return;
        }
        let _ = stream.shutdown(std::net::Shutdown::Write);
        drain(&mut stream);
    }));
    let (client, mut response, dropped) = four_pieces_then_pending_put(&server);
    assert_eq!(response.status(), 200);
    let mut answer = [0; 2];
    response.body_mut().read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"ok");
    // The answer's bytes are read: now its end.
    step.send(()).unwrap();
    let rest = within("the answer's end", WAIT, move || response.text().wait());
    assert_eq!(rest.unwrap(), "");
    assert_upload_let_go(
        &client,
        &dropped,
        "the upload went on after the server's close",
    );
    client.close();
}

/// A body of unknown length nobody has touched is held back on its
/// connection (in the pipe, in the buffer it was gathered in). When the
/// connection ends — the close that ends a body framed by it, or one that
/// cuts a chunked body short — the held bytes count once among the
/// client's buffered bytes, reach the reader before the body's end or its
/// error, and count no more once read.
#[test]
fn a_held_body_counts_once_when_its_connection_closes() {
    let body: Vec<u8> = (0..5000).map(|i| (i % 251) as u8).collect();
    let heads: [&[u8]; 2] = [
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2710\r\n",
    ];
    for (head, whole) in heads.into_iter().zip([true, false]) {
        let server = TestServer::start(Behaviour::SendThenClose([head, &body].concat()));
        for event_loop_timeouts in [false, true] {
            let client = client(event_loop_timeouts);
            let mut response = client.get(server.url("/")).send().wait().unwrap();
            // The exchange ends with the connection, its body untouched.
            assert_settles(&client, WAIT);
            assert_eq!(client.stats().buffered_body_bytes, body.len(), "{whole}");
            let mut read = Vec::new();
            let result = response.body_mut().read_to_end(&mut read);
            assert_eq!(result.is_ok(), whole, "{result:?}");
            assert!(read == body, "{whole}: {} bytes", read.len());
            assert_eq!(client.stats().buffered_body_bytes, 0, "{whole}");
            client.close();
        }
    }
}

/// A PUT whose streamed body waits for `100 Continue`, sent on a pooled
/// connection its server closed as the request came (it read the head,
/// then closed: the close of an idle connection racing the request), goes
/// again on a new connection: none of the body went — its source was never
/// taken — so it can go whole, as a body in memory would, and a PUT may be
/// sent twice (curl sends it again too).
#[test]
fn a_streamed_put_waiting_for_100_on_a_closed_pooled_connection_goes_again() {
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::custom(|mut stream, _| {
            if read_head(&mut stream).is_some() {
                let _ = stream.write_all(&ok("warm"));
            }
            // The PUT's head, and the close.
            let _ = read_head(&mut stream);
        }),
        _ => Behaviour::continue_and_early_hints(|body| ok(&format!("got {}", body.len()))),
    }));
    let client = Client::builder().event_loops(1).build().unwrap();
    let warm = client.get(server.url("/warm")).send().wait().unwrap();
    assert_eq!(warm.text().wait().unwrap(), "warm");
    let body = Upload::from_reader(std::io::Cursor::new(vec![b'u'; 1000]), Some(1000));
    let response = client
        .put(server.url("/put"))
        .body(body)
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "got 1000");
    assert_eq!(server.connections_accepted(), 2);
    assert_settles(&client, WAIT);
    client.close();
}
