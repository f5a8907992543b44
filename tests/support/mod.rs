//! Loopback HTTP/1.1 servers for integration tests: ones that behave and ones
//! that misbehave on purpose (never answer, stall mid-body, trickle, truncate,
//! reset).
//!
//! The servers are std only: threads and `std::net`, bound to 127.0.0.1:0,
//! nothing reaches the internet ([`client_kit`] and [`exec`] are helpers for
//! the client side). Dropping a [`TestServer`] stops it and joins every thread it
//! started: it sets a stop flag, wakes the accept loop by connecting to itself,
//! shuts down (`Both`) every socket it still holds, and joins. Nothing waits on
//! a fixed sleep to tear down. Server threads never panic on I/O errors or bad
//! input; they just end the connection quietly.
//!
//! [`real`] starts real servers instead (nginx, proxies, httpbin,
//! hypercorn), also on loopback only.
//!
//! Use from a test file with `mod support;` and `use support::*;`.
#![allow(dead_code, unused_imports, unreachable_pub)]

mod http;

/// Upload bodies: one paced by tokio's timer.
pub mod bodies;

/// What a `tracing` subscriber wrote (the facade's feature `tracing`:
/// without it the client logs nothing).
#[cfg(feature = "tracing")]
pub mod captured;
/// Driving a `tickless::Client` in tests: event recorder, settling.
pub mod client_kit;
/// A hand-written `block_on` (thread-park waker), no runtime.
pub mod exec;
/// HTTP/2 servers: the h2 crate's server side (scripted), and raw frames.
pub mod h2_server;
/// Real servers and proxies (nginx, tinyproxy, microsocks, httpbin on
/// gunicorn, hypercorn), started by the test on loopback; `scripts/test`
/// installs them.
pub mod real;
/// The process's live threads, for tests that check a client joins its
/// own.
pub mod threads;
/// A loopback TLS server and the certificates it serves (rcgen, made at
/// test time).
pub mod tls;

#[cfg(feature = "tracing")]
pub use captured::Captured;
pub use client_kit::{
    assert_close_ends, assert_on_time, assert_settles, chain_text, each_answered_in_order,
    eventually, fails_on_time, get_bytes, h2c_builder,
    read_timeout_fires_a_period_after_the_last_read, recorded_client, untimed_client, within,
    Event, HoldingListener, Recorder,
};
pub use exec::{
    block_on, block_on_counting, block_on_counting_after_first_poll, example_binary, BlockOnStats,
};
pub use http::{
    chunked, content_length, drain, gzip, ok, parse_request, read_head, read_to_last_chunk, reason,
    response, response_closes, small_buffered_listener, Parsed, ReadEnd, RecordedRequest,
    RequestReader,
};
pub use threads::{live_threads, live_threads_named, thread_name};

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Closure answering one recorded request with raw response bytes.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Vec<u8> + Send + Sync>;

/// How a [`TestServer`] treats each accepted connection. Every variant that
/// reads a request records it (see [`TestServer::requests`]) before acting.
#[derive(Clone)]
pub enum Behaviour {
    /// Keep-alive HTTP/1.1: read each request (head + body framed by
    /// Content-Length or chunked; pipelined requests are answered in order),
    /// record it, write the bytes the closure returns. The connection is
    /// closed after the response if those bytes have `Connection: close` in
    /// their head or the request asked for close (or was HTTP/1.0 without
    /// keep-alive); otherwise the loop reads the next request. The closure
    /// is called after the request is recorded, so it may block.
    Respond(Responder),
    /// Like `Respond`, but answers exactly one request per connection and
    /// then closes (FIN) without having said `Connection: close`: the
    /// server-closed-an-idle-keep-alive-connection case.
    RespondThenClose(Responder),
    /// Accept and read whatever arrives (requests are still recorded), never
    /// answer; the socket stays open until the client closes or the server
    /// is dropped.
    NeverAnswer,
    /// Read one request, write these bytes (e.g. a head with
    /// `Content-Length: 100` and no body), then stall holding the socket
    /// (discarding anything else the client sends) until the client closes
    /// or the server is dropped.
    SendThenStall(Vec<u8>),
    /// Read one request, then write `bytes` one byte at a time with
    /// `interval` between bytes, then close (or stall like `SendThenStall`
    /// if `then_stall`). The waits end early when the server is dropped.
    Trickle {
        bytes: Vec<u8>,
        interval: Duration,
        then_stall: bool,
    },
    /// Read one request, write these bytes, then close (FIN) — for
    /// truncation and close-delimited body tests.
    SendThenClose(Vec<u8>),
    /// Wait until request bytes arrive, record the request if it is already
    /// complete, then close the socket *without reading them*. Linux answers
    /// a close with unread received data with a RST, so the client sees
    /// `ECONNRESET` (on read, or on a later write) rather than a clean EOF.
    /// (std has no stable `SO_LINGER`, so this is how a reset is produced.)
    /// Depending on timing the client may see the reset while still writing.
    Reset,
    /// The closure gets each accepted stream and its 0-based connection
    /// index, on its own thread. The server holds a clone of the stream and
    /// shuts it down on drop, so the closure should block only in socket
    /// I/O on that stream (not in long sleeps) for drop to be prompt.
    /// [`RequestReader`] parses requests for it (not recorded).
    Custom(Arc<dyn Fn(TcpStream, usize) + Send + Sync>),
    /// Choose the behaviour per connection from its 0-based index, e.g. reset
    /// the first connection and answer on the second.
    PerConnection(Arc<dyn Fn(usize) -> Behaviour + Send + Sync>),
}

impl Behaviour {
    /// `Behaviour::Respond` from a closure.
    pub fn respond(f: impl Fn(&RecordedRequest) -> Vec<u8> + Send + Sync + 'static) -> Behaviour {
        Behaviour::Respond(Arc::new(f))
    }

    /// `Behaviour::RespondThenClose` from a closure.
    pub fn respond_then_close(
        f: impl Fn(&RecordedRequest) -> Vec<u8> + Send + Sync + 'static,
    ) -> Behaviour {
        Behaviour::RespondThenClose(Arc::new(f))
    }

    /// `Behaviour::Custom` from a closure.
    pub fn custom(f: impl Fn(TcpStream, usize) + Send + Sync + 'static) -> Behaviour {
        Behaviour::Custom(Arc::new(f))
    }

    /// An upload's interim heads, then its answer: `100 Continue` to the
    /// request's head, its body read (`Content-Length` long), a `103 Early
    /// Hints` with a `Link: </s.css>` field, and the final answer `answer`
    /// makes of the body.
    pub fn continue_and_early_hints(
        answer: impl Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static,
    ) -> Behaviour {
        Behaviour::custom(move |mut stream, _| {
            use std::io::Read;
            let Some(head) = http::read_head(&mut stream) else {
                return;
            };
            let mut body = vec![0; http::content_length(&head)];
            let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
            if stream.read_exact(&mut body).is_err() {
                return;
            }
            let _ = stream.write_all(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n");
            let _ = stream.write_all(&answer(&body));
            http::drain(&mut stream);
        })
    }

    /// `Behaviour::PerConnection` from a closure.
    pub fn per_connection(f: impl Fn(usize) -> Behaviour + Send + Sync + 'static) -> Behaviour {
        Behaviour::PerConnection(Arc::new(f))
    }

    /// The first connection read and never answered (`NeverAnswer`), each
    /// later one answered with a 200 of body `answer` (`Respond`): a
    /// hedged request's first attempt stalls and its copy gets `answer`.
    pub fn silent_first(answer: &'static str) -> Behaviour {
        Behaviour::per_connection(move |index| match index {
            0 => Behaviour::NeverAnswer,
            _ => Behaviour::respond(move |_| ok(answer)),
        })
    }
}

struct State {
    requests: Vec<RecordedRequest>,
    accepted: usize,
    open: usize,
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Clones of the open connections' streams, by connection index, so drop
    /// can shut them down and wake their threads.
    streams: Mutex<HashMap<usize, TcpStream>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn stopping(&self) -> bool {
        lock(&self.state).stopping
    }

    fn record(&self, request: RecordedRequest) {
        lock(&self.state).requests.push(request);
        self.changed.notify_all();
    }

    /// Sleep for `d` unless the server stops first; false if it stopped.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut state = lock(&self.state);
        loop {
            if state.stopping {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn wait_until(&self, timeout: Duration, pred: impl Fn(&State) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = lock(&self.state);
        loop {
            if pred(&state) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// One accepted connection's bookkeeping. Dropping it releases the server's
/// clone of the stream (closing the socket if the thread's own handle is
/// gone) and counts the connection as closed.
struct Conn {
    shared: Arc<Shared>,
    index: usize,
    closed: bool,
}

impl Conn {
    fn mark_closed(&mut self) {
        if !self.closed {
            self.closed = true;
            lock(&self.shared.state).open -= 1;
            self.shared.changed.notify_all();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let clone = lock(&self.shared.streams).remove(&self.index);
        drop(clone);
        self.mark_closed();
    }
}

/// A loopback HTTP/1.1 server on 127.0.0.1 with a chosen [`Behaviour`].
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Bind 127.0.0.1:0 and start accepting.
    pub fn start(behaviour: Behaviour) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        TestServer::start_on(listener, behaviour)
    }

    /// Start accepting on `listener` (a loopback address of the test's
    /// choosing).
    pub fn start_on(listener: TcpListener, behaviour: Behaviour) -> TestServer {
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                requests: Vec::new(),
                accepted: 0,
                open: 0,
                stopping: false,
            }),
            changed: Condvar::new(),
            streams: Mutex::new(HashMap::new()),
            handles: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::Builder::new()
            .name(format!("support-accept-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_shared, behaviour))
            .expect("spawn accept thread");
        TestServer {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    /// `Behaviour::Respond` server from a closure.
    pub fn respond(f: impl Fn(&RecordedRequest) -> Vec<u8> + Send + Sync + 'static) -> TestServer {
        TestServer::start(Behaviour::respond(f))
    }

    /// Answers every request with its target, `/slow` only after `delay`:
    /// a connection kept busy for as long as a test needs.
    pub fn echo_slow_after(delay: Duration) -> TestServer {
        TestServer::respond(move |request| {
            if request.target == "/slow" {
                std::thread::sleep(delay);
            }
            ok(&request.target)
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/path` (a missing leading `/` is added).
    pub fn url(&self, path: &str) -> String {
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("http://{}{slash}{path}", self.addr)
    }

    /// `127.0.0.1:PORT`, as for a `Host` header.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    pub fn connections_accepted(&self) -> usize {
        lock(&self.shared.state).accepted
    }

    /// Accepted connections not yet closed by either side: a connection stops
    /// counting once its server thread has seen EOF or an error, or has
    /// closed (FIN sent) or reset it.
    pub fn connections_open(&self) -> usize {
        lock(&self.shared.state).open
    }

    /// Every request recorded so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.state).requests.clone()
    }

    /// Block until at least `n` requests are recorded; false on timeout.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.shared.wait_until(timeout, |s| s.requests.len() >= n)
    }

    /// Block until at least `n` connections were accepted; false on timeout.
    pub fn wait_for_accepted(&self, n: usize, timeout: Duration) -> bool {
        self.shared.wait_until(timeout, |s| s.accepted >= n)
    }

    /// Block until exactly `n` connections are open; false on timeout. E.g.
    /// `wait_for_open(0, ..)` to see that the client closed its connection.
    pub fn wait_for_open(&self, n: usize, timeout: Duration) -> bool {
        self.shared.wait_until(timeout, |s| s.open == n)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        lock(&self.shared.state).stopping = true;
        self.shared.changed.notify_all();
        // Wake the accept loop; it sees the flag and exits, dropping the
        // listener.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
        // No new connections can be registered now.
        for stream in lock(&self.shared.streams).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        self.shared.changed.notify_all();
        let handles = std::mem::take(&mut *lock(&self.shared.handles));
        for h in handles {
            // A panicking user closure must not turn into a panic in drop.
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, behaviour: Behaviour) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) => {
                if shared.stopping() {
                    return;
                }
                // e.g. EMFILE; don't spin.
                thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        let index = {
            let mut state = lock(&shared.state);
            if state.stopping {
                return;
            }
            state.accepted += 1;
            state.open += 1;
            state.accepted - 1
        };
        shared.changed.notify_all();
        if let Ok(clone) = stream.try_clone() {
            lock(&shared.streams).insert(index, clone);
        }
        let conn = Conn {
            shared: Arc::clone(&shared),
            index,
            closed: false,
        };
        let b = behaviour.clone();
        // If spawning fails the closure (and the Conn) is dropped, which
        // closes the socket and fixes the counts.
        if let Ok(h) = thread::Builder::new()
            .name(format!("support-conn-{index}"))
            .spawn(move || {
                let mut conn = conn;
                run(&b, &mut conn, stream);
            })
        {
            let mut handles = lock(&shared.handles);
            // Join the threads of connections that have ended, so a
            // long-running server (the soak test) does not keep the stacks
            // of thousands of finished threads until it is dropped.
            let (finished, running): (Vec<_>, Vec<_>) =
                handles.drain(..).partition(|h| h.is_finished());
            *handles = running;
            handles.push(h);
            drop(handles);
            for handle in finished {
                let _ = handle.join();
            }
        }
    }
}

/// Send FIN, count the connection closed, then read until the client closes
/// (bounded) so unread client bytes don't turn the close into a RST that
/// could destroy the response in flight.
fn close_gracefully(conn: &mut Conn, mut stream: TcpStream) {
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    conn.mark_closed();
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    drain(&mut stream);
}

/// Read one request and record it; None if none arrived.
fn read_one(
    conn: &Conn,
    reader: &mut RequestReader,
    stream: &mut TcpStream,
) -> Option<RecordedRequest> {
    match reader.read_request(stream) {
        Ok(req) => {
            conn.shared.record(req.clone());
            Some(req)
        }
        Err(_) => None,
    }
}

fn run(behaviour: &Behaviour, conn: &mut Conn, mut stream: TcpStream) {
    let mut reader = RequestReader::new(conn.index);
    match behaviour {
        Behaviour::Respond(f) => loop {
            let Some(req) = read_one(conn, &mut reader, &mut stream) else {
                return;
            };
            let bytes = f(&req);
            if stream.write_all(&bytes).is_err() {
                return;
            }
            if req.wants_close() || response_closes(&bytes) {
                return close_gracefully(conn, stream);
            }
        },
        Behaviour::RespondThenClose(f) => {
            let Some(req) = read_one(conn, &mut reader, &mut stream) else {
                return;
            };
            let bytes = f(&req);
            if stream.write_all(&bytes).is_ok() {
                close_gracefully(conn, stream);
            }
        }
        Behaviour::NeverAnswer => loop {
            match reader.read_request(&mut stream) {
                Ok(req) => conn.shared.record(req),
                Err(ReadEnd::Invalid) => return drain(&mut stream),
                Err(_) => return,
            }
        },
        Behaviour::SendThenStall(bytes) => {
            if read_one(conn, &mut reader, &mut stream).is_none() {
                return;
            }
            if stream.write_all(bytes).is_ok() {
                drain(&mut stream);
            }
        }
        Behaviour::Trickle {
            bytes,
            interval,
            then_stall,
        } => {
            if read_one(conn, &mut reader, &mut stream).is_none() {
                return;
            }
            for (i, b) in bytes.iter().enumerate() {
                if i > 0 && !conn.shared.sleep(*interval) {
                    return;
                }
                if stream.write_all(&[*b]).is_err() {
                    return;
                }
            }
            if *then_stall {
                drain(&mut stream);
            } else {
                close_gracefully(conn, stream);
            }
        }
        Behaviour::SendThenClose(bytes) => {
            if read_one(conn, &mut reader, &mut stream).is_none() {
                return;
            }
            if stream.write_all(bytes).is_ok() {
                close_gracefully(conn, stream);
            }
        }
        Behaviour::Reset => reset(conn, stream),
        Behaviour::Custom(f) => f(stream, conn.index),
        Behaviour::PerConnection(choose) => {
            let chosen = choose(conn.index);
            run(&chosen, conn, stream);
        }
    }
}

fn reset(conn: &mut Conn, stream: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.peek(&mut buf) {
            Ok(0) => return, // EOF before any data: nothing to reset.
            Ok(n) => match parse_request(&buf[..n], conn.index) {
                Parsed::Complete(req, _) => {
                    conn.shared.record(req);
                    break;
                }
                Parsed::Incomplete if n < buf.len() => {
                    // Data is there but not a whole request yet; peek would
                    // not block, so wait a little for more.
                    if !conn.shared.sleep(Duration::from_millis(1)) {
                        break;
                    }
                }
                _ => break,
            },
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
    // Close both handles (this one and the server's clone, in Conn's drop)
    // with the bytes unread: the kernel sends RST.
    drop(stream);
}

/// Relays bytes both ways between `a` and `b` (a proxy double's client
/// and its upstream): `copy(from, to)` each way, the one from `a` on a
/// thread of its own, each way's writing side ended (`Shutdown::Write`)
/// when its `copy` returns. Returns once both ways have ended.
pub fn relay<F>(a: TcpStream, b: TcpStream, copy: F)
where
    F: Fn(&mut TcpStream, &mut TcpStream) + Clone + Send + 'static,
{
    let (Ok(mut a_in), Ok(mut b_out)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let upstream = {
        let copy = copy.clone();
        thread::spawn(move || {
            copy(&mut a_in, &mut b_out);
            let _ = b_out.shutdown(Shutdown::Write);
        })
    };
    let (mut b_in, mut a_out) = (b, a);
    copy(&mut b_in, &mut a_out);
    let _ = a_out.shutdown(Shutdown::Write);
    let _ = upstream.join();
}

/// [`relay`]'s plain copy: everything, as it comes, until either side
/// ends.
pub fn copy_all(from: &mut TcpStream, to: &mut TcpStream) {
    let _ = io::copy(from, to);
}

/// An address nothing listens on, for the rest of the process: a socket
/// bound to 127.0.0.1:0 and never listening, kept open (leaked), so that
/// connecting gets `ConnectionRefused` for as long as a test may try. A
/// listener bound and dropped would free its port for the next `bind` to
/// port 0 — a server of a test running in parallel — or for a connect's
/// own local port (a connection to itself). Bound without `SO_REUSEADDR`,
/// the socket keeps every other socket off the port.
pub fn refused_addr() -> SocketAddr {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a TCP socket");
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    socket.bind(&any_port.into()).expect("bind 127.0.0.1:0");
    let addr = socket
        .local_addr()
        .expect("local_addr")
        .as_socket()
        .expect("an IP address");
    // A descriptor per call: a few per test binary.
    std::mem::forget(socket);
    addr
}

/// How long a test's own server waits for the client to connect, and
/// then for each read from it ([`accept_in_time`]): far longer than any
/// connect or pause on loopback.
pub const ACCEPT_LIMIT: Duration = Duration::from_secs(30);

/// The next connection to `listener`, waited for [`ACCEPT_LIMIT`] at the
/// most, and read from with that limit too: a client that never connects,
/// or stops sending, fails the test (the server's thread panics, and its
/// join with it) rather than hanging the run on a blocking `accept` or
/// `read`. See [`accept_within`].
pub fn accept_in_time(listener: &TcpListener) -> TcpStream {
    accept_within(listener, ACCEPT_LIMIT)
}

/// [`accept_in_time`] with a limit of the caller's. The limit is the
/// listener's receive timeout (`SO_RCVTIMEO`) for one blocking `accept`
/// (Linux, where the tests run, times an accept out with it; BSDs and
/// macOS may not), put back as it was after, so a
/// later plain `accept` on the listener waits as before; and it is the
/// accepted socket's read timeout (a caller may set another). That one is
/// set here: a socket inherits the listener's timeout when its handshake
/// completes, which may be before this call.
pub fn accept_within(listener: &TcpListener, limit: Duration) -> TcpStream {
    let socket = socket2::SockRef::from(listener);
    let before = socket.read_timeout().expect("the listener's read timeout");
    socket
        .set_read_timeout(Some(limit))
        .expect("a read timeout on the listener");
    let accepted = loop {
        match listener.accept() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            accepted => break accepted,
        }
    };
    socket
        .set_read_timeout(before)
        .expect("the listener's read timeout put back");
    match accepted {
        Ok((stream, _)) => {
            stream
                .set_read_timeout(Some(limit))
                .expect("a read timeout on the accepted socket");
            stream
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => panic!(
            "no client connected to {:?} within {limit:?}",
            listener.local_addr()
        ),
        Err(e) => panic!("accept: {e}"),
    }
}

/// A listener on 127.0.0.1:0 that never accepts. Connections complete the
/// handshake (they sit in the backlog) and nothing ever answers. After
/// [`UnacceptingListener::fill_backlog`], further SYNs are dropped, so a
/// connect to [`UnacceptingListener::addr`] hangs until the client's own
/// connect timeout — a local stand-in for a blackholed address.
pub struct UnacceptingListener {
    listener: TcpListener,
    fillers: Vec<TcpStream>,
}

impl UnacceptingListener {
    pub fn new() -> UnacceptingListener {
        UnacceptingListener {
            listener: TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"),
            fillers: Vec::new(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("local_addr")
    }

    /// Connect (and hold) until a connect times out, i.e. the accept queue
    /// is full. Returns false if that did not happen within `max`
    /// connections or a connect failed otherwise.
    pub fn fill_backlog(&mut self, max: usize) -> bool {
        let addr = self.addr();
        for _ in 0..max {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => self.fillers.push(s),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        false
    }

    /// [`fill_backlog`](Self::fill_backlog) for a test that needs it: on
    /// Linux, where the kernel always lets an accept queue fill, failing to
    /// fill it fails the test rather than letting it skip its assertions.
    pub fn backlog_filled(&mut self, max: usize) -> bool {
        let filled = self.fill_backlog(max);
        assert!(
            filled || !cfg!(target_os = "linux"),
            "the accept queue did not fill"
        );
        filled
    }
}

impl Default for UnacceptingListener {
    fn default() -> Self {
        UnacceptingListener::new()
    }
}
