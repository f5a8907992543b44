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
//! * `client-event-loop`: `use_event_loop_timeouts`, timeouts on the loop
//!   that owns each connection. Until its connect succeeds a request has no
//!   loop, and its timeout rides the wheel, here with a 1 ms tick: a burst
//!   of two thousand connects keeps two cores busy for longer than 20 ms, so
//!   at that deadline part of the burst is still connecting.

use super::{Burst, Fired, Recorder};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use tickless::{Client, Error, EventListener};

/// `client-wheel-5ms`.
pub fn wheel_5ms(burst: &Burst) -> io::Result<Fired> {
    run(burst, Duration::from_millis(5), false)
}

/// `client-wheel-1ms`.
pub fn wheel_1ms(burst: &Burst) -> io::Result<Fired> {
    run(burst, Duration::from_millis(1), false)
}

/// `client-event-loop`.
pub fn event_loop(burst: &Burst) -> io::Result<Fired> {
    run(burst, Duration::from_millis(1), true)
}

/// Records the lag of one request when it fails.
struct LagListener {
    recorder: Arc<Recorder>,
    index: usize,
    deadline: Instant,
}

impl EventListener for LagListener {
    fn on_failed(&self, error: &Error) {
        if error.is_timeout() {
            self.recorder.record(self.index, self.deadline);
        }
    }
}

fn run(burst: &Burst, wheel_tick: Duration, on_event_loop: bool) -> io::Result<Fired> {
    let server = SilentServer::start()?;
    let client = Client::builder()
        .request_timeout(burst.deadline)
        .read_timeout(Duration::ZERO)
        .wheel_tick(wheel_tick)
        .use_event_loop_timeouts(on_event_loop)
        .event_loop_spin(burst.loop_spin)
        .build()?;
    let recorder = Recorder::new(burst.count);
    let url = format!("http://{}/", server.addr);
    let started = Instant::now();
    let futures: Vec<_> = (0..burst.count)
        .map(|index| {
            let deadline = Instant::now() + burst.deadline;
            let listener = Arc::new(LagListener {
                recorder: recorder.clone(),
                index,
                deadline,
            });
            client.get(url.as_str()).listener(listener).send()
        })
        .collect();
    recorder.wait(started + burst.ceiling());
    let fired = recorder.fired();
    drop(futures);
    client.close();
    server.stop();
    Ok(fired)
}

/// Accepts every connection and never answers; holds the sockets until stopped.
struct SilentServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<Mutex<Vec<TcpStream>>>,
    thread: JoinHandle<()>,
}

impl SilentServer {
    fn start() -> io::Result<SilentServer> {
        // A backlog as deep as the kernel allows (std's is 128): a burst of
        // connects beyond it would wait for SYN retransmits, a second away,
        // and measure the listener rather than the timeouts.
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
        socket.listen(65535)?;
        let listener: TcpListener = socket.into();
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, accepted) = (stop.clone(), accepted.clone());
            thread::Builder::new()
                .name("tick-lag-server".to_owned())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::Acquire) {
                            return;
                        }
                        if let Ok(stream) = stream {
                            accepted
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(stream);
                        }
                    }
                })?
        };
        Ok(SilentServer {
            addr,
            stop,
            accepted,
            thread,
        })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        let _ = self.thread.join();
        self.accepted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
