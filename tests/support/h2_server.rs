//! HTTP/2 servers for the tests: [`H2Server`] on the `h2` crate's server
//! side (scripted per stream: stall, answer slowly, stop reading an upload,
//! reset), run by a tokio runtime on a thread of its own — the test's, not
//! the client's, which has none — and [`RawH2Server`], frames written by
//! hand for what a well-behaved server never sends (GOAWAY at a chosen
//! point, REFUSED_STREAM, bad frames).
//!
//! Both listen on 127.0.0.1:0, cleartext: the client reaches them with
//! prior knowledge. Dropping one stops it and joins its thread.

use bytes::Bytes;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// One stream as the handler gets it.
pub struct H2Stream {
    pub request: http::Request<h2::RecvStream>,
    pub respond: h2::server::SendResponse<Bytes>,
    /// Which connection (0 for the first accepted), and which stream of it.
    pub connection: usize,
    pub index: usize,
    pub stats: Arc<H2Stats>,
}

/// What the server saw.
#[derive(Default)]
pub struct H2Stats {
    pub connections: AtomicUsize,
    pub streams: AtomicUsize,
    /// Streams the client reset, with the reason code.
    resets: Mutex<Vec<u32>>,
    /// When each of `resets` was seen.
    reset_at: Mutex<Vec<Instant>>,
    /// Streams open on the server now.
    pub open: AtomicUsize,
    /// The most open at once.
    pub max_open: AtomicUsize,
}

impl H2Stats {
    pub fn resets(&self) -> Vec<u32> {
        self.resets.lock().unwrap().clone()
    }

    /// The client reset a stream with `reason`.
    pub fn record_reset(&self, reason: h2::Reason) {
        self.resets.lock().unwrap().push(reason.into());
        self.reset_at.lock().unwrap().push(Instant::now());
    }

    /// From the first reset seen to the last.
    pub fn reset_spread(&self) -> Duration {
        let at = self.reset_at.lock().unwrap();
        match (at.iter().min(), at.iter().max()) {
            (Some(first), Some(last)) => *last - *first,
            _ => Duration::ZERO,
        }
    }
}

type Handler = Arc<dyn Fn(H2Stream) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A server on the `h2` crate. See the [module documentation](self).
pub struct H2Server {
    addr: SocketAddr,
    pub stats: Arc<H2Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl H2Server {
    /// Runs `handler` for every stream, with the server's default settings.
    pub fn start<F, Fut>(handler: F) -> H2Server
    where
        F: Fn(H2Stream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        H2Server::start_with(|_| {}, handler)
    }

    /// As [`start`](Self::start), with `settings` applied to each
    /// connection's builder (`max_concurrent_streams`, windows).
    pub fn start_with<S, F, Fut>(settings: S, handler: F) -> H2Server
    where
        S: Fn(&mut h2::server::Builder) + Send + Sync + 'static,
        F: Fn(H2Stream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |stream| Box::pin(handler(stream)));
        let settings = Arc::new(settings);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(H2Stats::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread_stats = stats.clone();
        let thread = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let Ok((socket, _)) = listener.accept().await else {
                            continue;
                        };
                        let _ = socket.set_nodelay(true);
                        let connection = thread_stats.connections.fetch_add(1, Ordering::SeqCst);
                        let (handler, settings, stats) =
                            (handler.clone(), settings.clone(), thread_stats.clone());
                        tokio::spawn(async move {
                            let mut builder = h2::server::Builder::new();
                            settings(&mut builder);
                            let Ok(mut conn) = builder.handshake::<_, Bytes>(socket).await else {
                                return;
                            };
                            let mut index = 0;
                            while let Some(Ok((request, respond))) = conn.accept().await {
                                stats.streams.fetch_add(1, Ordering::SeqCst);
                                let open = stats.open.fetch_add(1, Ordering::SeqCst) + 1;
                                stats.max_open.fetch_max(open, Ordering::SeqCst);
                                let stream = H2Stream {
                                    request,
                                    respond,
                                    connection,
                                    index,
                                    stats: stats.clone(),
                                };
                                index += 1;
                                let (handler, stats) = (handler.clone(), stats.clone());
                                tokio::spawn(async move {
                                    handler(stream).await;
                                    stats.open.fetch_sub(1, Ordering::SeqCst);
                                });
                            }
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        });
        H2Server {
            addr,
            stats,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for H2Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers `stream` with `status` and `body`, in one DATA frame.
pub async fn answer(mut stream: H2Stream, status: u16, body: &'static [u8]) {
    let response = http::Response::builder().status(status).body(()).unwrap();
    let Ok(mut send) = stream.respond.send_response(response, body.is_empty()) else {
        return;
    };
    if !body.is_empty() {
        let _ = send.send_data(Bytes::from_static(body), true);
    }
    // Queued frames go out after the handles are dropped.
}

/// Waits for the client to reset `stream` (or for `limit`), and records
/// the reason.
pub async fn await_reset(
    respond: &mut h2::server::SendResponse<Bytes>,
    stats: &H2Stats,
    limit: Duration,
) {
    if let Ok(Ok(reason)) =
        tokio::time::timeout(limit, std::future::poll_fn(|cx| respond.poll_reset(cx))).await
    {
        stats.record_reset(reason);
    }
}

// ------------------------------------------------------------ raw frames ---

/// Frame types (RFC 9113 §6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;

/// One frame, as read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// A frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// HEADERS `:status 200` (HPACK static table entry 8), ending the stream.
pub fn ok_headers(stream: u32) -> Vec<u8> {
    frame(HEADERS, END_HEADERS | END_STREAM, stream, &[0x88])
}

/// HEADERS `:status 103` (`:status` by its static index, a literal value)
/// on `stream`, not ending it: an interim head.
pub fn early_hints(stream: u32) -> Vec<u8> {
    frame(
        HEADERS,
        END_HEADERS,
        stream,
        &[0x08, 0x03, b'1', b'0', b'3'],
    )
}

/// As [`early_hints`], with `x-send: <mark>` (a literal field, not
/// indexed: HPACK's state stays empty) to tell one stream's `103` from
/// another's.
pub fn marked_early_hints(stream: u32, mark: &str) -> Vec<u8> {
    let mut block = vec![0x08, 0x03, b'1', b'0', b'3', 0x00, 0x06];
    block.extend_from_slice(b"x-send");
    block.push(mark.len() as u8);
    block.extend_from_slice(mark.as_bytes());
    frame(HEADERS, END_HEADERS, stream, &block)
}

/// GOAWAY with `last_stream` and `code`.
pub fn goaway(last_stream: u32, code: u32) -> Vec<u8> {
    let mut payload = last_stream.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    frame(GOAWAY, 0, 0, &payload)
}

/// RST_STREAM with `code`.
pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

/// The next frame read from `from` (`None` at the end or on error).
pub fn read_frame(from: &mut impl Read) -> Option<Frame> {
    let mut head = [0u8; 9];
    from.read_exact(&mut head).ok()?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let mut payload = vec![0; len];
    from.read_exact(&mut payload).ok()?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some(Frame {
        kind: head[3],
        flags: head[4],
        stream,
        payload,
    })
}

/// Writes `bytes` to `conn`, and flushes them. An error is the client's
/// having gone: what the script expects of it is told by what it reads.
fn send(conn: &mut impl Write, bytes: &[u8]) {
    let _ = conn.write_all(bytes);
    let _ = conn.flush();
}

/// Reads from `conn` (a client's connection after its preface, cleartext
/// or TLS) until `n` request HEADERS have come; returns their stream ids,
/// fewer if the client closed first. Acknowledges the client's SETTINGS on
/// the way.
pub fn read_requests(conn: &mut (impl Read + Write), n: usize) -> Vec<u32> {
    let mut ids = Vec::new();
    while ids.len() < n {
        let Some(frame) = read_frame(conn) else {
            break;
        };
        match frame.kind {
            HEADERS => ids.push(frame.stream),
            SETTINGS if frame.flags & ACK == 0 => send(conn, &settings_ack()),
            _ => {}
        }
    }
    ids
}

/// Answers every request on `conn` `:status 200` (no body), until the
/// client closes.
pub fn answer_all(conn: &mut (impl Read + Write)) {
    while let Some(&id) = read_requests(conn, 1).first() {
        send(conn, &ok_headers(id));
    }
}

/// A connection of a [`RawH2Server`], after the preface.
pub struct RawConn {
    pub stream: TcpStream,
    pub index: usize,
}

impl RawConn {
    /// The next frame from the client (`None` at the end or on error).
    pub fn read_frame(&mut self) -> Option<Frame> {
        read_frame(&mut self.stream)
    }

    /// See [`read_requests`].
    pub fn read_requests(&mut self, n: usize) -> Vec<u32> {
        read_requests(&mut self.stream, n)
    }

    /// See [`answer_all`].
    pub fn answer_all(&mut self) {
        answer_all(&mut self.stream)
    }

    pub fn send(&mut self, bytes: &[u8]) {
        send(&mut self.stream, bytes)
    }

    /// Reads and drops frames until the client closes (or `limit`).
    pub fn drain(&mut self, limit: Duration) -> Vec<Frame> {
        let _ = self.stream.set_read_timeout(Some(limit));
        let mut frames = Vec::new();
        while let Some(frame) = self.read_frame() {
            frames.push(frame);
        }
        frames
    }
}

/// A SETTINGS acknowledgement.
pub fn settings_ack() -> Vec<u8> {
    frame(SETTINGS, ACK, 0, &[])
}

/// SETTINGS with `SETTINGS_MAX_CONCURRENT_STREAMS` = `n`.
pub fn max_streams(n: u32) -> Vec<u8> {
    let mut payload = 3u16.to_be_bytes().to_vec();
    payload.extend_from_slice(&n.to_be_bytes());
    frame(SETTINGS, 0, 0, &payload)
}

/// SETTINGS with `SETTINGS_MAX_HEADER_LIST_SIZE` = `n`.
pub fn max_header_list_size(n: u32) -> Vec<u8> {
    let mut payload = 6u16.to_be_bytes().to_vec();
    payload.extend_from_slice(&n.to_be_bytes());
    frame(SETTINGS, 0, 0, &payload)
}

/// A server that reads the client's preface, sends its own SETTINGS, and
/// hands each connection to a script. See the [module documentation](self).
pub struct RawH2Server {
    addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl RawH2Server {
    pub fn start(script: impl Fn(RawConn) + Send + Sync + 'static) -> RawH2Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let script = Arc::new(script);
        let (thread_connections, thread_stop, thread_open) =
            (connections.clone(), stop.clone(), open.clone());
        let thread = thread::spawn(move || {
            let mut workers = Vec::new();
            for socket in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut socket) = socket else { continue };
                let index = thread_connections.fetch_add(1, Ordering::SeqCst);
                if let Ok(clone) = socket.try_clone() {
                    thread_open.lock().unwrap().push(clone);
                }
                let script = script.clone();
                workers.push(thread::spawn(move || {
                    let _ = socket.set_read_timeout(Some(Duration::from_secs(30)));
                    let mut preface = [0u8; 24];
                    if socket.read_exact(&mut preface).is_err() {
                        return;
                    }
                    let _ = socket.write_all(&frame(SETTINGS, 0, 0, &[]));
                    script(RawConn {
                        stream: socket,
                        index,
                    });
                }));
            }
            for worker in workers {
                let _ = worker.join();
            }
        });
        RawH2Server {
            addr,
            connections,
            thread: Some(thread),
            stop,
            open,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for RawH2Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for socket in self.open.lock().unwrap().drain(..) {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
