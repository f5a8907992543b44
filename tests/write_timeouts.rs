//! The write timeout: a server that stops taking the request — its socket
//! full over HTTP/1.1, its flow-control window spent over HTTP/2 — fails
//! the exchange with `Error::WriteTimeout` though the request timeout be
//! off; a server that takes it slowly but steadily does not, nor one that
//! answers early and stops reading on purpose. In both timeout modes. And
//! over TLS, records rustls holds go while the body's source has nothing.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::h2_server::{frame, ok_headers, RawH2Server, DATA, END_HEADERS, END_STREAM, HEADERS};
use support::*;
use tickless::timer::ManualClock;
use tickless::{Client, ClientBuilder, Error, TimeoutKind, Upload};

/// Far past any write timeout here: a test that hangs fails on it instead.
const BACKSTOP: Duration = Duration::from_secs(30);
/// How late a timeout may fire before a test calls it broken.
const CEILING: Duration = Duration::from_secs(10);

fn builder(event_loop_timeouts: bool) -> ClientBuilder {
    Client::builder()
        .event_loops(2)
        .use_event_loop_timeouts(event_loop_timeouts)
        .request_timeout(BACKSTOP)
}

/// `len` zero bytes, read from a thread (a streamed upload).
fn zeros(len: u64) -> Upload {
    Upload::from_reader(std::io::repeat(0).take(len), Some(len))
}

/// Sends `request`, which must fail with a write timeout of `timeout`, on
/// time, naming `remote`.
fn write_times_out(request: tickless::RequestBuilder, timeout: Duration, remote: &str) {
    let error = fails_on_time(request, timeout, CEILING);
    assert!(matches!(error, Error::WriteTimeout(_)), "{error:?}");
    assert_eq!(error.timeout_kind(), Some(TimeoutKind::Write));
    assert_eq!(
        error.to_string(),
        format!("Write timeout to {remote} after {} ms", timeout.as_millis())
    );
}

#[test]
fn a_server_that_never_reads_an_upload_is_a_write_timeout() {
    // A listener that never accepts: the kernel completes the connection
    // and buffers what it can of the request, then takes no more.
    let listener = UnacceptingListener::new();
    let addr = listener.addr();
    let url = format!("http://{addr}/upload");
    let remote = format!("127.0.0.1/{addr}");
    let timeout = Duration::from_millis(300);
    for event_loop_timeouts in [false, true] {
        let client = builder(event_loop_timeouts)
            .request_timeout(Duration::ZERO)
            .write_timeout(timeout)
            .build()
            .unwrap();
        // Streamed, and in memory (written straight after the head).
        let streamed = client
            .post(&url)
            .request_timeout(BACKSTOP)
            .body(zeros(64 << 20));
        write_times_out(streamed, timeout, &remote);
        let in_memory = client
            .post(&url)
            .request_timeout(BACKSTOP)
            .body(vec![0u8; 32 << 20]);
        write_times_out(in_memory, timeout, &remote);
        // Per request, the client's timeout is replaced.
        let shorter = Duration::from_millis(150);
        let per_request = client
            .post(&url)
            .request_timeout(BACKSTOP)
            .write_timeout(shorter)
            .body(zeros(64 << 20));
        write_times_out(per_request, shorter, &remote);
        client.close();
    }
}

/// Reads a request of `body` bytes from `stream` `piece` bytes every 50
/// ms, then answers `ok`; returns how long the body took to read.
fn read_slowly(mut stream: impl Read + Write, body: usize, piece: usize) -> Duration {
    let head = read_head(&mut stream).unwrap();
    assert_eq!(content_length(&head), body);
    let started = Instant::now();
    let mut buf = vec![0; piece];
    let mut left = body;
    while left > 0 {
        let mut got = 0;
        while got < piece && left > 0 {
            let want = (piece - got).min(left);
            let n = stream.read(&mut buf[..want]).unwrap();
            assert!(n > 0, "the client closed with {left} bytes to go");
            got += n;
            left -= n;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        .unwrap();
    stream.flush().unwrap();
    took
}

#[test]
fn a_server_that_reads_an_upload_slowly_but_steadily_is_no_write_timeout() {
    // 2.5 MiB/s, with loopback's buffers: the socket tells of room only
    // once a third of its send buffer (megabytes) is free, longer than the
    // timeout — which must find the progress all the same. (A timeout
    // twice the reader's own pauses and more: a reader thread stalled
    // 300 ms by a loaded machine is still no timeout.)
    const BODY: usize = 8 << 20;
    let timeout = Duration::from_millis(400);
    for event_loop_timeouts in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // 128 KiB every 50 ms: 2.5 MiB/s.
        let server = thread::spawn(move || read_slowly(accept_in_time(&listener), BODY, 128 << 10));
        let client = builder(event_loop_timeouts)
            .write_timeout(timeout)
            .build()
            .unwrap();
        // In memory: the request never waits on its source, only on the
        // server, for the whole upload.
        let response = client
            .post(format!("http://{addr}/"))
            .body(vec![0u8; BODY])
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.bytes().wait().unwrap(), "ok");
        // The upload outlasted the timeout several times over: it was
        // held back by the server all along, and went on.
        let took = server.join().unwrap();
        assert!(took > 3 * timeout, "the upload took only {took:?}");
        client.close();
    }
}

/// The same slow, steady reader, after a whole 2xx it sent at the upload's
/// start: the upload goes on (an answer whole before it does not stop it)
/// under the write timeout, which finds the progress all the same, and the
/// server gets all of it; the connection is pooled after.
#[test]
fn a_server_that_reads_slowly_after_a_whole_2xx_is_no_write_timeout() {
    const BODY: usize = 16 << 20;
    let timeout = Duration::from_secs(1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let mut stream = accept_in_time(&listener);
        let head = read_head(&mut stream).unwrap();
        assert_eq!(content_length(&head), BODY);
        stream.write_all(&ok("ok")).unwrap();
        // 128 KiB every 50 ms: 2.5 MiB/s.
        let started = Instant::now();
        let mut buf = vec![0; 128 << 10];
        let mut left = BODY;
        while left > 0 {
            let want = buf.len().min(left);
            stream.read_exact(&mut buf[..want]).unwrap();
            left -= want;
            thread::sleep(Duration::from_millis(50));
        }
        // The stream too: open until the test has looked at the pool.
        (started.elapsed(), stream)
    });
    let client = builder(false).write_timeout(timeout).build().unwrap();
    let response = client
        .put(format!("http://{addr}/"))
        .body(vec![0u8; BODY])
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().wait().unwrap(), "ok");
    let (took, _stream) = server.join().unwrap();
    assert!(took > 3 * timeout, "the upload took only {took:?}");
    assert!(eventually(CEILING, || client.stats().idle_connections == 1));
    client.close();
}

/// A body that gives `len` zero bytes at once, then nothing until `resume`
/// says, then ends.
struct Pausing {
    left: usize,
    resume: std::sync::mpsc::Receiver<()>,
}

impl Read for Pausing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let _ = self.resume.recv();
            return Ok(0);
        }
        let n = buf.len().min(self.left);
        buf[..n].fill(0);
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn over_tls_what_the_source_gave_reaches_the_server_while_it_has_no_more() {
    // TLS holds records beyond the socket; when the body's source has
    // nothing more for a while, they must still go as the server makes
    // room — not wait for the source's next bytes.
    const GIVEN: usize = 512 << 10;
    let listener = small_buffered_listener();
    let addr = listener.local_addr().unwrap();
    let config = support::tls::server_config(&support::tls::certs().valid);
    let received = Arc::new(AtomicUsize::new(0));
    let counter = received.clone();
    // Reads the chunked body as it comes, 16 KiB every 10 ms, and answers
    // at its end.
    let server = thread::spawn(move || {
        let tcp = accept_in_time(&listener);
        let tls = rustls::ServerConnection::new(config).unwrap();
        let mut stream = rustls::StreamOwned::new(tls, tcp);
        let mut seen = Vec::new();
        let mut buf = vec![0; 16 << 10];
        while !seen.ends_with(b"\r\n0\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed");
            seen.extend_from_slice(&buf[..n]);
            counter.store(seen.len(), Ordering::Relaxed);
            thread::sleep(Duration::from_millis(10));
        }
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        stream.flush().unwrap();
    });
    let client = builder(false)
        .add_root_certificate(&support::tls::certs().ca_pem)
        .build()
        .unwrap();
    let (resume, paused) = std::sync::mpsc::channel();
    let body = Pausing {
        left: GIVEN,
        resume: paused,
    };
    let response = client
        .post(format!("https://localhost:{}/", addr.port()))
        .body(Upload::from_reader(body, None))
        .send();
    // The head, the chunk framing and all the source gave.
    assert!(
        eventually(CEILING, || received.load(Ordering::Relaxed) > GIVEN),
        "the server has {} bytes of the {GIVEN} given",
        received.load(Ordering::Relaxed)
    );
    resume.send(()).unwrap();
    assert_eq!(response.wait().unwrap().status(), 200);
    server.join().unwrap();
    client.close();
}

#[test]
fn an_answer_before_the_upload_ends_stops_the_write_timeout() {
    let timeout = Duration::from_millis(400);
    for event_loop_timeouts in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Reads the request head and nothing more; answers once the
        // client's upload has filled the buffers (its write timeout runs),
        // and sends the rest of its answer well past that timeout.
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let server = thread::spawn(move || {
            let mut stream = accept_in_time(&listener);
            read_head(&mut stream).unwrap();
            thread::sleep(Duration::from_millis(150));
            stream
                .write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 10\r\n\r\n12345")
                .unwrap();
            thread::sleep(Duration::from_millis(800));
            stream.write_all(b"67890").unwrap();
            // Holds the socket, unread, until the test is done.
            let _ = done_rx.recv_timeout(BACKSTOP);
        });
        let client = builder(event_loop_timeouts)
            .request_timeout(Duration::ZERO)
            .write_timeout(timeout)
            .build()
            .unwrap();
        let response = client
            .post(format!("http://{addr}/"))
            .request_timeout(BACKSTOP)
            .body(zeros(64 << 20))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 413);
        assert_eq!(response.bytes().wait().unwrap(), "1234567890");
        client.close();
        done_tx.send(()).unwrap();
        server.join().unwrap();
    }
}

fn h2c(event_loop_timeouts: bool, timeout: Duration) -> Client {
    builder(event_loop_timeouts)
        .http2_prior_knowledge()
        .write_timeout(timeout)
        .build()
        .unwrap()
}

#[test]
fn an_http2_server_that_grants_no_window_is_a_write_timeout() {
    // Reads everything, and never sends a WINDOW_UPDATE: the body stops
    // at the initial 64 KiB window.
    let server = RawH2Server::start(|mut conn| {
        conn.read_requests(1);
        conn.drain(BACKSTOP);
    });
    let timeout = Duration::from_millis(300);
    for event_loop_timeouts in [false, true] {
        let client = h2c(event_loop_timeouts, timeout);
        let remote = format!("127.0.0.1/{}", server.addr());
        write_times_out(
            client.post(server.url("/")).body(vec![0u8; 1 << 20]),
            timeout,
            &remote,
        );
        write_times_out(
            client.post(server.url("/")).body(zeros(1 << 20)),
            timeout,
            &remote,
        );
        client.close();
    }
}

#[test]
fn an_http2_server_that_grants_its_window_slowly_is_no_write_timeout() {
    const BODY: usize = 256 << 10;
    const GRANT: u32 = 16 << 10;
    // Grants 16 KiB of stream and connection window every 50 ms past the
    // initial 64 KiB, and answers at the body's end: 12 grants, 600 ms.
    let server = RawH2Server::start(|mut conn| {
        let id = conn.read_requests(1)[0];
        let mut received = 0;
        let mut granted = 65_535;
        while let Some(got) = conn.read_frame() {
            if got.kind != DATA {
                continue;
            }
            received += got.payload.len();
            if got.flags & END_STREAM != 0 {
                conn.send(&ok_headers(id));
                conn.drain(BACKSTOP);
                return;
            }
            while received == granted.min(BODY) && granted < BODY {
                thread::sleep(Duration::from_millis(50));
                for stream in [0, id] {
                    conn.send(&frame(0x8, 0, stream, &GRANT.to_be_bytes()));
                }
                granted += GRANT as usize;
            }
        }
    });
    let timeout = Duration::from_millis(300);
    for event_loop_timeouts in [false, true] {
        let client = h2c(event_loop_timeouts, timeout);
        let started = Instant::now();
        let response = client
            .post(server.url("/"))
            .body(vec![0u8; BODY])
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        let took = started.elapsed();
        assert!(took > timeout, "the window came too fast: {took:?}");
        client.close();
    }
}

#[test]
fn an_http2_answer_before_the_upload_ends_stops_the_write_timeout() {
    // Answers `200`, then a first piece apart (the stream, polled again,
    // still has no window: no wait on the server begins there), grants no
    // window, and ends its body well past the write timeout.
    let server = RawH2Server::start(|mut conn| {
        let id = conn.read_requests(1)[0];
        conn.send(&frame(HEADERS, END_HEADERS, id, &[0x88]));
        thread::sleep(Duration::from_millis(100));
        conn.send(&frame(DATA, 0, id, b"early-"));
        thread::sleep(Duration::from_millis(800));
        conn.send(&frame(DATA, END_STREAM, id, b"late"));
        conn.drain(BACKSTOP);
    });
    let timeout = Duration::from_millis(200);
    for event_loop_timeouts in [false, true] {
        let client = h2c(event_loop_timeouts, timeout);
        let response = client
            .post(server.url("/"))
            .body(vec![0u8; 1 << 20])
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.bytes().wait().unwrap(), "early-late");
        client.close();
    }
}

/// A streamed body that gives 4 KiB pieces until `dry`, then nothing
/// (its waker kept) until `ended`, then ends.
struct Tap {
    state: Arc<TapState>,
}

#[derive(Default)]
struct TapState {
    dry: std::sync::atomic::AtomicBool,
    ended: std::sync::atomic::AtomicBool,
    waker: std::sync::Mutex<Option<std::task::Waker>>,
}

impl TapState {
    fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        if let Some(waker) = self.waker.lock().unwrap().take() {
            waker.wake();
        }
    }
}

static TAP_PIECE: [u8; 4096] = [b't'; 4096];

impl tickless::http_body::Body for Tap {
    type Data = tickless::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<tickless::http_body::Frame<tickless::Bytes>, Self::Error>>>
    {
        let state = &self.state;
        if state.ended.load(Ordering::SeqCst) {
            return std::task::Poll::Ready(None);
        }
        if state.dry.load(Ordering::SeqCst) {
            *state.waker.lock().unwrap() = Some(cx.waker().clone());
            if state.ended.load(Ordering::SeqCst) {
                return std::task::Poll::Ready(None);
            }
            return std::task::Poll::Pending;
        }
        let piece = tickless::Bytes::from_static(&TAP_PIECE);
        std::task::Poll::Ready(Some(Ok(tickless::http_body::Frame::data(piece))))
    }
}

/// After a whole 2xx, over TLS, an upload whose source has nothing for a
/// while (it waits on its source, not on the server) while rustls still
/// holds records the socket has no room for: the server, reading a little
/// (too little for the socket to signal room), lets them go at the write
/// timeout's probe of the socket — records, the server's progress, though no
/// plaintext went (there is none to send). The upload must go on, as it
/// does once the socket signals room (it then waits on its source, with
/// no write timeout), and end when its source does; the connection is
/// pooled after. The probe counted only plaintext: it stopped the upload
/// and closed the connection.
///
/// On a `ManualClock`, its phases ordered by what the server and the
/// client's wheel show, not by sleeps: the write timeout armed (the socket
/// full), then the source dry, then the little read, then the timeout's
/// period past.
#[test]
fn over_tls_an_upload_after_a_whole_2xx_that_waits_on_its_source_is_no_write_timeout() {
    let timeout = Duration::from_secs(3);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = support::tls::server_config(&support::tls::certs().valid);
    let tap = Arc::new(TapState::default());
    let fast = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server_fast = fast.clone();
    // The test tells the server when to read a little, then the rest; the
    // server tells when it has read the little.
    let (read_a_little, little_asked) = std::sync::mpsc::channel::<()>();
    let (little_read, little_done) = std::sync::mpsc::channel::<()>();
    let (read_the_rest, rest_asked) = std::sync::mpsc::channel::<()>();
    let server = thread::spawn(move || {
        let tcp = accept_in_time(&listener);
        // A client that stops sending fails the test instead of hanging it.
        tcp.set_read_timeout(Some(BACKSTOP)).unwrap();
        let tls = rustls::ServerConnection::new(config).unwrap();
        let mut stream = rustls::StreamOwned::new(tls, tcp);
        // The head and 64 KiB of the body; then a whole 200.
        let mut seen = Vec::new();
        let mut buf = vec![0; 64 << 10];
        loop {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed");
            seen.extend_from_slice(&buf[..n]);
            let head_end = seen.windows(4).position(|w| w == b"\r\n\r\n");
            if head_end.is_some_and(|end| seen.len() >= end + 4 + (64 << 10)) {
                break;
            }
        }
        stream.write_all(&ok("ok")).unwrap();
        stream.flush().unwrap();
        // The upload fills the socket buffers; once its source has run
        // dry, a little of it is read.
        little_asked
            .recv_timeout(BACKSTOP)
            .expect("the test asks for a little");
        let mut little = vec![0; 128 << 10];
        stream.read_exact(&mut little).unwrap();
        little_read.send(()).unwrap();
        // Nothing more until past the write timeout; then the rest.
        rest_asked
            .recv_timeout(BACKSTOP)
            .expect("the test asks for the rest");
        server_fast.store(true, Ordering::SeqCst);
        let (_, whole) = read_to_last_chunk(&mut stream, Vec::new());
        // The stream too: open until the test has looked at the pool.
        (whole, stream)
    });
    let clock = ManualClock::new();
    // The write timeout alone: an entry of the exchange on the wheel is
    // its timer, armed while the upload waits on the server. (The clock
    // stands still but when the test moves it: no timeout could fire on
    // its own.)
    let client = builder(false)
        .clock(Arc::new(clock.clone()))
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .connect_timeout(Duration::ZERO)
        .handshake_timeout(Duration::ZERO)
        .add_root_certificate(&support::tls::certs().ca_pem)
        .write_timeout(timeout)
        .build()
        .unwrap();
    let write_timer_armed = || {
        let stats = client.stats();
        stats.wheel.armed - stats.pool_cleaner_armed == 1
    };
    let response = client
        .put(format!("https://localhost:{}/", addr.port()))
        .body(Upload::from_stream(Tap { state: tap.clone() }))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    // The socket full after the answer: the upload waits on the server.
    assert!(
        eventually(CEILING, write_timer_armed),
        "{:?}",
        client.stats()
    );
    // Its source runs dry (it is polled again only once the socket takes
    // more), and the server reads a little.
    tap.dry.store(true, Ordering::SeqCst);
    read_a_little.send(()).unwrap();
    little_done
        .recv_timeout(BACKSTOP)
        .expect("the server reads a little");
    // The write timeout's period passes: its probe of the socket lets the
    // records go, and the upload then waits on its source — no write
    // timeout. Seen before the clock moves again (past the probe's wait,
    // at which a timeout with no progress seen would fail).
    clock.advance(timeout);
    assert!(
        eventually(CEILING, || !write_timer_armed()),
        "the upload still waits on the server: {:?}",
        client.stats()
    );
    clock.advance(timeout * 2);
    read_the_rest.send(()).unwrap();
    assert!(eventually(CEILING, || fast.load(Ordering::SeqCst)));
    tap.end();
    assert_eq!(response.bytes().wait().unwrap(), "ok");
    let (whole, _stream) = server.join().unwrap();
    assert!(whole, "the upload was cut short");
    assert!(eventually(CEILING, || client.stats().idle_connections == 1));
    client.close();
}
