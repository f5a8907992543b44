//! The built-in loopback servers.
//!
//! [`Server`] is the one of `benches/http.rs`, with this benchmark's routes:
//! std threads, one per accepted connection, keep-alive, `TCP_NODELAY`. It
//! reads request heads (no request bodies), looks only at the target, and
//! answers
//!
//! * `/small`: `Hello, world!` (13 bytes) with `Content-Length`;
//! * `/1mib`: 1 MiB with `Content-Length`, one `write_all`;
//! * `/64k-chunked`: 64 KiB with `Transfer-Encoding: chunked`, 16 chunks of
//!   4 KiB, each its own `write` (so a client sees the body arrive in
//!   pieces, as from a server that streams it);
//! * `/never`: nothing, ever: the connection is held open and read until
//!   the client closes it;
//! * anything else: `404`.
//!
//! Each connection thread, when it ends, adds its own CPU time and context
//! switches (`getrusage(RUSAGE_THREAD)`) and the number of requests it
//! answered to running totals. [`Server::reap`], called after each run once
//! the client is gone, shuts the run's connections down, joins their
//! threads and returns the totals, so they are exact for that run.
//!
//! [`SilentServer`] is `tick-lag --end-to-end`'s: a listener with a backlog
//! as deep as the kernel allows that accepts whatever is queued every
//! millisecond and never reads or answers, for the lateness bursts.

use crate::measure::{self, Usage};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub const SMALL_BODY: &[u8] = b"Hello, world!";
pub const BIG_LEN: usize = 1 << 20;
pub const CHUNKED_LEN: usize = 64 * 1024;
pub const CHUNK: usize = 4 * 1024;

const NOT_FOUND: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";

/// The body bytes of the 1 MiB and chunked routes: `a`..`z` repeated.
fn filler(len: usize) -> impl Iterator<Item = u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8)
}

struct Shared {
    stopping: AtomicBool,
    accepted: AtomicUsize,
    served: AtomicU64,
    cpu_ns: AtomicU64,
    switches: AtomicU64,
    cpu_known: AtomicBool,
    connections: Mutex<Vec<(TcpStream, JoinHandle<()>)>>,
    small: Vec<u8>,
    big: Vec<u8>,
    /// Head, then each chunk (size line, data, CRLF), then the last chunk.
    chunked: Vec<Vec<u8>>,
}

/// What the connections of one run did.
#[derive(Debug, Clone, Copy)]
pub struct Totals {
    pub accepted: usize,
    pub served: u64,
    /// CPU and context switches of the connection threads, if every one
    /// could read its own.
    pub usage: Option<Usage>,
}

pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start() -> io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let small = [
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                SMALL_BODY.len()
            )
            .as_bytes(),
            SMALL_BODY,
        ]
        .concat();
        let mut big = format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG_LEN}\r\n\r\n").into_bytes();
        big.extend(filler(BIG_LEN));
        let mut chunked = vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec()];
        let body: Vec<u8> = filler(CHUNKED_LEN).collect();
        for piece in body.chunks(CHUNK) {
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece);
            chunk.extend_from_slice(b"\r\n");
            chunked.push(chunk);
        }
        chunked.push(b"0\r\n\r\n".to_vec());
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            cpu_known: AtomicBool::new(true),
            connections: Mutex::new(Vec::new()),
            small,
            big,
            chunked,
        });
        let accept_shared = shared.clone();
        let acceptor = thread::Builder::new()
            .name("peers-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(Server {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shuts every connection down, joins their threads, and returns what
    /// they did since the last call. Call it once the client is gone.
    pub fn reap(&self) -> Totals {
        let connections = std::mem::take(&mut *lock(&self.shared.connections));
        for (stream, thread) in connections {
            let _ = stream.shutdown(Shutdown::Both);
            thread.join().expect("a server connection thread panicked");
        }
        let s = &self.shared;
        let accepted = s.accepted.swap(0, Ordering::SeqCst);
        let served = s.served.swap(0, Ordering::SeqCst);
        let cpu_ns = s.cpu_ns.swap(0, Ordering::SeqCst);
        let switches = s.switches.swap(0, Ordering::SeqCst);
        let known = s.cpu_known.swap(true, Ordering::SeqCst);
        Totals {
            accepted,
            served,
            usage: known.then(|| Usage {
                cpu: Duration::from_nanos(cpu_ns),
                switches,
            }),
        }
    }

    pub fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the acceptor
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.reap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let _ = stream.set_nodelay(true);
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let conn_shared = shared.clone();
        let thread = thread::Builder::new()
            .name("peers-conn".into())
            .spawn(move || {
                let served = serve(stream, &conn_shared);
                conn_shared.served.fetch_add(served, Ordering::SeqCst);
                match measure::this_thread() {
                    Some(usage) => {
                        conn_shared
                            .cpu_ns
                            .fetch_add(measure::ns(usage.cpu), Ordering::SeqCst);
                        conn_shared
                            .switches
                            .fetch_add(usage.switches, Ordering::SeqCst);
                    }
                    None => conn_shared.cpu_known.store(false, Ordering::SeqCst),
                }
            })
            .expect("spawn a server connection thread");
        lock(&shared.connections).push((handle, thread));
    }
}

fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Answers requests on one connection until the peer closes it; returns how
/// many it answered.
fn serve(mut stream: TcpStream, shared: &Shared) -> u64 {
    let mut buf = vec![0u8; 16 * 1024];
    let (mut len, mut served) = (0, 0);
    loop {
        let mut start = 0;
        while let Some(end) = head_end(&buf[start..len]) {
            let target = buf[start..start + end].split(|&b| b == b' ').nth(1);
            let written = match target {
                Some(b"/small") => stream.write_all(&shared.small),
                Some(b"/1mib") => stream.write_all(&shared.big),
                Some(b"/64k-chunked") => shared
                    .chunked
                    .iter()
                    .try_for_each(|piece| stream.write_all(piece)),
                Some(b"/never") => {
                    // Hold the connection, answer nothing, until it closes.
                    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
                    return served;
                }
                _ => stream.write_all(NOT_FOUND),
            };
            if written.is_err() {
                return served;
            }
            served += 1;
            start += end;
        }
        buf.copy_within(start..len, 0);
        len -= start;
        if len == buf.len() {
            return served; // a head larger than the buffer: give up
        }
        match stream.read(&mut buf[len..]) {
            Ok(0) | Err(_) => return served,
            Ok(n) => len += n,
        }
    }
}

/// Accepts every connection and never answers; holds the sockets until
/// stopped (`tick-lag --end-to-end`'s server). It accepts whatever is
/// queued, then sleeps a millisecond: the kernel completes each handshake
/// without it, so a burst costs no wake-up of this thread per connection.
pub struct SilentServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl SilentServer {
    pub fn start() -> io::Result<SilentServer> {
        // A backlog as deep as the kernel allows (std's is 128): connects
        // beyond it would wait for SYN retransmits, a second away.
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
        socket.listen(65535)?;
        socket.set_nonblocking(true)?;
        let listener: TcpListener = socket.into();
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            thread::Builder::new()
                .name("peers-silent".to_owned())
                .spawn(move || {
                    let mut accepted: Vec<TcpStream> = Vec::new();
                    while !stop.load(Ordering::Acquire) {
                        match listener.accept() {
                            Ok((stream, _)) => accepted.push(stream),
                            Err(_) => thread::sleep(Duration::from_millis(1)),
                        }
                    }
                })?
        };
        Ok(SilentServer { addr, stop, thread })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and closes every accepted socket.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}
