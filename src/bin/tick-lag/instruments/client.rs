//! The end-to-end instruments (`--end-to-end`): whole requests through the
//! client, against a loopback server that accepts and never answers.
//!
//! Every request of the burst is sent at once with the burst's deadline as
//! its request timeout; its lag is the moment its exchange ended (the
//! client reports the failure on the thread that ends it, just before the
//! future is woken) minus its deadline. The deadline is taken from the
//! clock just before `send`, a few hundred nanoseconds before the client
//! fixes its own, so lags are over-stated by that much, never under-stated.
//!
//! * `client-wheel-5ms`, `client-wheel-1ms`: the default mode, timeouts on
//!   the client's hashed wheel with that tick;
//! * `client-event-loop`: `use_event_loop_timeouts` with that mode's
//!   defaults, timeouts on the loop that owns each connection. Until its
//!   connect succeeds a request has no loop, and its timeout rides the
//!   wheel, which in this mode ticks every 250 µs. Opening a loopback
//!   connection and sending its request costs the kernel about 25 µs
//!   (measured on the 2-core VM of the README), so a burst of two thousand
//!   keeps two cores busy for longer than 20 ms, and at that deadline part
//!   of the burst has not connected yet: the run counts those (by the
//!   identity of the thread that ended them) and prints the count as a
//!   note under the table.
//!
//! With `--warm` the server answers the first request on each connection
//! once `count` are open (and nothing after), and `count` requests are
//! made at once and answered before the burst: the burst then goes out on pooled connections, each request's
//! timeout armed where its connection lives from the start — in event-loop
//! mode, its loop. No request of a warm burst connects.
//!
//! With `--under-load` the same client keeps a throughput load going while
//! the burst runs (see [`super::load`]): 64 requests in flight to a server
//! that answers at once, on connections of their own, sharing the loops
//! that own the burst's timeouts.
//!
//! With `--http2` the requests are HTTP/2 streams (prior knowledge) spread
//! over [`H2_SERVERS`] silent servers, one connection each: per connection
//! the first request opens it and the others wait for it (their timeouts on
//! the wheel), then become its streams, their timeouts moved onto its loop.
//! The server never sends its SETTINGS, and until they come `h2` lets a
//! client open any number of streams: every request of the burst is a
//! stream at once.

use super::load::Load;
use super::{Burst, Fired, Recorder, Split};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};
use tickless::{Client, Error, EventListener};

/// `client-wheel-5ms`.
pub fn wheel_5ms(burst: &Burst) -> io::Result<Fired> {
    run(burst, Mode::Wheel(Duration::from_millis(5)))
}

/// `client-wheel-1ms`.
pub fn wheel_1ms(burst: &Burst) -> io::Result<Fired> {
    run(burst, Mode::Wheel(Duration::from_millis(1)))
}

/// `client-event-loop`.
pub fn event_loop(burst: &Burst) -> io::Result<Fired> {
    run(burst, Mode::EventLoop)
}

/// Where the client under measurement arms its timeouts.
#[derive(Clone, Copy)]
enum Mode {
    /// The default mode, on a wheel with this tick.
    Wheel(Duration),
    /// `use_event_loop_timeouts`, with that mode's defaults.
    EventLoop,
}

/// Grows the process's file table to hold `count` descriptors at once.
///
/// The kernel doubles the table as descriptors run out, and in a process
/// with more than one thread each doubling waits for an RCU grace period,
/// milliseconds long, inside the `socket` or `accept` call that needed it,
/// that is on an event loop (traced: single connect tasks of 2 to 12 ms).
/// The table never shrinks, so holding `count` duplicates of one descriptor
/// for a moment pays for every doubling up front; whichever instrument opened
/// the most sockets first would otherwise carry the stalls. Best effort: it
/// stops at the descriptor limit, where the burst would fail anyway.
pub fn grow_file_table(count: usize) {
    let Ok(file) = std::fs::File::open("/dev/null") else {
        return;
    };
    let copies: Vec<std::fs::File> = (0..count).map_while(|_| file.try_clone().ok()).collect();
    drop(copies);
}

/// Opens `count` loopback connections from one thread, one after another,
/// and writes a small request on each: what the kernel alone charges for a
/// burst like the instruments' (closing them is not timed). The loops can
/// only share this work among the cores, so a deadline shorter than this
/// time divided by the cores falls while part of a burst is still
/// connecting.
pub fn connect_floor(count: usize) -> io::Result<Duration> {
    let server = SilentServer::start(None)?;
    let request = format!("GET / HTTP/1.1\r\nhost: {}\r\n\r\n", server.addr);
    let mut streams = Vec::with_capacity(count);
    let started = Instant::now();
    for _ in 0..count {
        let mut stream = TcpStream::connect(server.addr)?;
        stream.set_nodelay(true)?;
        stream.write_all(request.as_bytes())?;
        streams.push(stream);
    }
    let took = started.elapsed();
    drop(streams);
    drop(server);
    Ok(took)
}

/// Records the lag of one request when it times out, and marks those
/// delivered on the client's wheel thread (told by identity); a request
/// that fails otherwise is counted as failed, its error kept if first.
struct LagListener {
    recorder: Arc<Recorder>,
    index: usize,
    deadline: Instant,
    wheel_thread: Option<ThreadId>,
    on_wheel: Arc<[AtomicBool]>,
}

impl EventListener for LagListener {
    fn on_failed(&self, _request: &tickless::RequestInfo, error: &Error) {
        if error.is_timeout() {
            // Where it fired first: the record may wake the thread that
            // counts both, once the last timeout is in.
            if Some(thread::current().id()) == self.wheel_thread {
                self.on_wheel[self.index].store(true, Ordering::Relaxed);
            }
            self.recorder.record(self.index, self.deadline);
        } else {
            self.recorder
                .fail(|| tickless::WithCauses(error).to_string());
        }
    }
}

/// Servers (so connections) an HTTP/2 burst is spread over.
pub const H2_SERVERS: usize = 4;

fn run(burst: &Burst, mode: Mode) -> io::Result<Fired> {
    let servers = if burst.http2 { H2_SERVERS } else { 1 };
    let servers: Vec<SilentServer> = (0..servers)
        .map(|_| SilentServer::start(burst.warm.then_some(burst.count)))
        .collect::<io::Result<_>>()?;
    let mut builder = Client::builder()
        .request_timeout(burst.deadline)
        .read_timeout(Duration::ZERO)
        .event_loop_spin(burst.loop_spin);
    if burst.unpinned {
        builder = builder.pin_event_loops(false);
    }
    if burst.http2 {
        builder = builder.http2_prior_knowledge();
    }
    let client = match mode {
        Mode::Wheel(tick) => builder.wheel_tick(tick),
        Mode::EventLoop => builder.use_event_loop_timeouts(true),
    }
    .build()?;
    let urls: Vec<String> = servers
        .iter()
        .map(|server| format!("http://{}/", server.addr))
        .collect();
    if burst.warm {
        warm_up(&client, &urls[0], burst.count)?;
    }
    let load = burst.under_load.then(|| Load::start(&client)).transpose()?;
    let recorder = Recorder::new(burst.count);
    let wheel_thread = client.wheel_thread_id();
    let on_wheel: Arc<[AtomicBool]> = (0..burst.count).map(|_| AtomicBool::new(false)).collect();
    let started = Instant::now();
    let futures: Vec<_> = (0..burst.count)
        .map(|index| {
            let deadline = Instant::now() + burst.deadline;
            let listener = Arc::new(LagListener {
                recorder: recorder.clone(),
                index,
                deadline,
                wheel_thread,
                on_wheel: on_wheel.clone(),
            });
            let url = &urls[index % urls.len()];
            client.get(url.as_str()).listener(listener).send()
        })
        .collect();
    recorder.wait(started + burst.ceiling());
    let mut fired = recorder.fired();
    fired.load_rate = load.map(Load::finish).transpose()?;
    if let Mode::EventLoop = mode {
        let mut split = Split {
            on_wheel: 0,
            on_loops_ns: Vec::new(),
        };
        for (index, on_wheel) in on_wheel.iter().enumerate() {
            match (on_wheel.load(Ordering::Relaxed), recorder.lag(index)) {
                (true, _) => split.on_wheel += 1,
                (false, Some(lag)) => split.on_loops_ns.push(lag),
                (false, None) => {}
            }
        }
        fired.split = Some(split);
    }
    drop(futures);
    client.close();
    drop(servers);
    Ok(fired)
}

/// Opens and pools `count` connections to `url`: as many requests at once,
/// each answered (by a warm server) and read to its end.
fn warm_up(client: &Client, url: &str, count: usize) -> io::Result<()> {
    let futures: Vec<_> = (0..count)
        .map(|_| {
            client
                .get(url)
                .request_timeout(Duration::from_secs(30))
                .send()
        })
        .collect();
    for future in futures {
        let response = future.wait().map_err(io::Error::other)?;
        response.bytes().wait().map_err(io::Error::other)?;
    }
    let idle = client.stats().idle_connections;
    if idle != count {
        return Err(io::Error::other(format!(
            "warm-up pooled {idle} connections, not {count}"
        )));
    }
    Ok(())
}

/// Accepts every connection and never answers — or, warm for `n`, answers
/// the first request on each once `n` connections are open (so that a
/// client sending `n` at once opens `n`, none reused early), and nothing
/// after; holds the sockets until stopped.
///
/// It accepts whatever is queued, then sleeps a millisecond: the kernel
/// completes each handshake without it (the backlog holds them), so the
/// client sees the same connects, and a burst costs no wake-up of this
/// thread per connection, which would take the cores from the loops under
/// measurement. After [`NAPS_BEFORE_DOZING`] naps with nothing to do it
/// naps [`DOZE`] at a time, so that while the burst's timeouts run it
/// hardly wakes.
///
/// Dropped, it stops and closes every socket it accepted — on a burst's
/// error path too, or the instruments after it would run short of
/// descriptors while its thread held them.
struct SilentServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SilentServer {
    fn start(warm: Option<usize>) -> io::Result<SilentServer> {
        // A backlog as deep as the kernel allows (std's is 128): a burst of
        // connects beyond it would wait for SYN retransmits, a second away,
        // and measure the listener rather than the timeouts.
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
                .name("tick-lag-server".to_owned())
                .spawn(move || {
                    let mut accepted: Vec<TcpStream> = Vec::new();
                    // Warm: accepted, first request not answered yet.
                    let mut unanswered: Vec<(TcpStream, Vec<u8>)> = Vec::new();
                    let mut idle_naps = 0;
                    while !stop.load(Ordering::Acquire) {
                        match listener.accept() {
                            Ok((stream, _)) if warm.is_some() => {
                                idle_naps = 0;
                                let _ = stream.set_nonblocking(true);
                                unanswered.push((stream, Vec::new()));
                            }
                            Ok((stream, _)) => {
                                idle_naps = 0;
                                accepted.push(stream);
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                let all_open =
                                    warm.is_some_and(|n| unanswered.len() + accepted.len() >= n);
                                if !all_open
                                    || !answer_first_requests(&mut unanswered, &mut accepted)
                                {
                                    // Quiet for a while: longer naps, not a
                                    // thousand wake-ups a second on the cores
                                    // the loops under measurement run on.
                                    idle_naps += 1;
                                    let nap = if idle_naps < NAPS_BEFORE_DOZING {
                                        Duration::from_millis(1)
                                    } else {
                                        DOZE
                                    };
                                    thread::sleep(nap);
                                }
                            }
                            // Out of descriptors, say: what is queued waits.
                            Err(_) => thread::sleep(Duration::from_millis(1)),
                        }
                    }
                })?
        };
        Ok(SilentServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Naps of a millisecond with nothing accepted (nor a warm request to
/// answer) before the server naps [`DOZE`] at a time.
const NAPS_BEFORE_DOZING: u32 = 10;

/// A quiet server's nap: connections that come meanwhile wait in the
/// backlog, their handshakes done by the kernel.
const DOZE: Duration = Duration::from_millis(50);

/// Answers the first request of each `unanswered` connection whose head has
/// come (an empty `200`), moving it to `answered`; whether any byte came.
fn answer_first_requests(
    unanswered: &mut Vec<(TcpStream, Vec<u8>)>,
    answered: &mut Vec<TcpStream>,
) -> bool {
    use std::io::Read;
    let mut progressed = false;
    let mut i = 0;
    while i < unanswered.len() {
        let (stream, head) = &mut unanswered[i];
        let mut buf = [0u8; 1024];
        match stream.read(&mut buf) {
            Ok(n) if n > 0 => {
                progressed = true;
                head.extend_from_slice(&buf[..n]);
                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let (mut stream, _) = unanswered.swap_remove(i);
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                    answered.push(stream);
                    continue;
                }
            }
            Ok(_) => {
                // Closed before its request: nothing to hold.
                unanswered.swap_remove(i);
                continue;
            }
            Err(_) => {}
        }
        i += 1;
    }
    progressed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Dropped without more ado — as on a burst's error path, `?` — the
    /// server stops and closes what it accepted, or queued: the client end
    /// reads the end of the stream (or a reset), never waits on a socket
    /// the server's thread still holds.
    #[test]
    fn a_dropped_server_closes_its_connections() {
        let server = SilentServer::start(None).unwrap();
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        drop(server);
        // A bound, not a measurement: only a leaked socket waits this long.
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        match stream.read(&mut [0u8; 16]) {
            Ok(0) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            other => panic!("the connection is still held: {other:?}"),
        }
    }
}
