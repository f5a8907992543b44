//! The throughput load of `--under-load`: while a burst's timeouts run, the
//! same client keeps [`IN_FLIGHT`] requests in flight to a loopback server
//! that answers each at once, so the loops that own the burst's timeouts
//! are busy with other connections when the deadlines come.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use tickless::Client;

/// Requests the load keeps in flight.
pub const IN_FLIGHT: usize = 64;

/// The load's requests time out only if the machine stops: never the
/// burst's deadline, which the client was built with.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A running load: its server, its driver thread, what it has done.
pub struct Load {
    stop: Arc<AtomicBool>,
    completed: Arc<AtomicU64>,
    driver: JoinHandle<io::Result<()>>,
    server: AnsweringServer,
    /// Requests completed when the load was under way, and when.
    under_way: (u64, Instant),
}

impl Load {
    /// Starts the server and the window of requests on `client`; returns
    /// once the window is full and answers flow (the rate
    /// [`finish`](Self::finish) gives is counted from then).
    pub fn start(client: &Client) -> io::Result<Load> {
        let server = AnsweringServer::start()?;
        let url = format!("http://{}/", server.addr);
        let stop = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicU64::new(0));
        let driver = {
            let (client, stop, completed) = (client.clone(), stop.clone(), completed.clone());
            thread::Builder::new()
                .name("tick-lag-load".to_owned())
                .spawn(move || drive(&client, &url, &stop, &completed))?
        };
        let ready = Instant::now() + Duration::from_secs(10);
        while completed.load(Ordering::Relaxed) < IN_FLIGHT as u64 * 4 {
            if Instant::now() > ready || driver.is_finished() {
                // Not left running beside the instruments that follow:
                // stopped (its window ends within LOAD_TIMEOUT), and
                // what ended it, if anything did, told.
                stop.store(true, Ordering::Relaxed);
                let why = match driver.join() {
                    Ok(Err(err)) => format!(": {}", tickless::WithCauses(&err)),
                    Ok(Ok(())) => String::new(),
                    Err(_) => ": its thread panicked".to_owned(),
                };
                return Err(io::Error::other(format!("the load did not get going{why}")));
            }
            thread::sleep(Duration::from_millis(1));
        }
        let under_way = (completed.load(Ordering::Relaxed), Instant::now());
        Ok(Load {
            stop,
            completed,
            driver,
            server,
            under_way,
        })
    }

    /// Stops the load; the requests it answered per second since it was
    /// under way.
    pub fn finish(self) -> io::Result<f64> {
        let (before, since) = self.under_way;
        let rate = (self.completed.load(Ordering::Relaxed) - before) as f64
            / since.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::Relaxed);
        let driven = self
            .driver
            .join()
            .map_err(|_| io::Error::other("the load's thread panicked"))?;
        drop(self.server);
        driven.map(|()| rate)
    }
}

/// A window of [`IN_FLIGHT`] futures: waits on the oldest, reads its body,
/// sends one in its place; until `stop`.
fn drive(client: &Client, url: &str, stop: &AtomicBool, completed: &AtomicU64) -> io::Result<()> {
    let send = || client.get(url).request_timeout(LOAD_TIMEOUT).send();
    let mut window: VecDeque<_> = (0..IN_FLIGHT).map(|_| send()).collect();
    while let Some(oldest) = window.pop_front() {
        let response = oldest.wait().map_err(io::Error::other)?;
        response.bytes().wait().map_err(io::Error::other)?;
        completed.fetch_add(1, Ordering::Relaxed);
        if !stop.load(Ordering::Relaxed) {
            window.push_back(send());
        }
    }
    Ok(())
}

/// Answers every request head with a 13-byte `200`, keep-alive; a thread
/// per connection. Dropped, it stops accepting (each connection's thread
/// ends when its client closes it).
struct AnsweringServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl AnsweringServer {
    fn start() -> io::Result<AnsweringServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let stop = stop.clone();
            thread::Builder::new()
                .name("tick-lag-answer".to_owned())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match listener.accept() {
                            Ok((stream, _)) => {
                                let _ = thread::Builder::new()
                                    .name("tick-lag-answer".to_owned())
                                    .spawn(move || answer(stream));
                            }
                            Err(_) => thread::sleep(Duration::from_millis(1)),
                        }
                    }
                })?
        };
        Ok(AnsweringServer {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }
}

impl Drop for AnsweringServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// One answer per `\r\n\r\n` (the load sends heads only), until the client
/// closes.
fn answer(mut stream: TcpStream) {
    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, world!";
    let _ = stream.set_nodelay(true);
    let _ = stream.set_nonblocking(false);
    let mut buf = [0u8; 4096];
    // What came, less what was counted but its last three bytes: a
    // terminator split across two reads is counted once it is whole.
    let mut carry: Vec<u8> = Vec::with_capacity(4096 + 3);
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        carry.extend_from_slice(&buf[..n]);
        let heads = carry.windows(4).filter(|w| w == b"\r\n\r\n").count();
        let keep = carry.len().saturating_sub(3);
        carry.drain(..keep);
        for _ in 0..heads {
            if stream.write_all(ANSWER).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropped — as when the load does not get going — the server stops
    /// accepting: its listener is closed, not held by a thread left behind.
    #[test]
    fn a_dropped_server_stops_accepting() {
        let server = AnsweringServer::start().unwrap();
        let addr = server.addr;
        drop(server);
        let err = TcpStream::connect(addr).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
    }
}
