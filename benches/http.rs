//! End-to-end HTTP/1.1 throughput and CPU cost of the tickless client over
//! loopback: `cargo bench --bench http`.
//!
//! # The server
//!
//! The benchmark starts its own server on `127.0.0.1:0`: std threads, one
//! thread per accepted connection, keep-alive, `TCP_NODELAY`. It reads
//! request heads (GET only: request bodies are not supported), looks only
//! at the request target, and answers `/small` with the fixed response
//! `HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok` and `/big` with a 1 MiB
//! body. It counts the connections it accepts, and each connection thread,
//! when it ends, adds its own CPU time (`getrusage(RUSAGE_THREAD)`) and the
//! number of requests it answered to running totals. At the end of every run
//! the benchmark closes the client, shuts the run's connections down and
//! joins their threads, so both totals are exact for that run.
//!
//! # Scenarios
//!
//! * `raw-floor`: a bare `std::net::TcpStream` on one keep-alive connection,
//!   writing a request and reading until the response is complete, one
//!   small GET after another. Nothing a client could do costs less: the floor.
//! * `tickless-seq`: sequential small GETs through the client with
//!   `.send().wait()` (default timeouts: 60 s request and read timeouts on
//!   the client's hashed wheel). Exactly one connection is opened; the
//!   benchmark asserts it.
//! * `tickless-seq-no-timeout`: the same with `request_timeout` and
//!   `read_timeout` set to zero (disabled). `tickless-seq` minus this is
//!   what arming and disarming the per-request timeouts costs.
//! * `tickless-seq-event-loop-timeouts`: `tickless-seq` with
//!   `use_event_loop_timeouts(true)` (timeouts on the owning loop's heap).
//! * `tickless-64-in-flight`: a window of 64 `ResponseFuture`s: 64 are
//!   submitted, then the oldest is waited on and a new one submitted in its
//!   place, until the total is reached. The client opens as many
//!   connections as it wants (reported).
//! * `tickless-1mib`: sequential GETs of the 1 MiB body; MiB/s is reported.
//! * `raw-floor-1mib` (only with `--scenario`): the raw loop on `/big`, the
//!   floor for `tickless-1mib`.
//! * `tickless-drop-16k` (only with `--scenario`): sequential GETs of a
//!   16 KiB body (`/16k`), each response dropped right after its head: the
//!   connection drains the rest and goes back to the pool (a request may
//!   open a second connection while the first still drains).
//! * `tickless-drop-16k-reconnect` (only with `--scenario`): the same with
//!   `keep_alive(false)`, a new connection per request — what closing on
//!   every dropped body would cost instead.
//! * `raw-floor-tls`: `raw-floor` over TLS — a blocking rustls
//!   `StreamOwned` on one connection to the HTTPS twin of the server. Its
//!   CPU per request minus `raw-floor`'s is what the encryption itself
//!   costs (client and server side).
//! * `tickless-https-seq`: `tickless-seq` over one TLS connection to the
//!   HTTPS twin. Its CPU per request minus `tickless-seq`'s is what TLS
//!   costs the client; the target is no more than `raw-floor-tls` minus
//!   `raw-floor` (printed after the table).
//!
//! The HTTPS twin is the same server with rustls (ring provider) on each
//! accepted connection, serving a certificate for 127.0.0.1 signed by a CA
//! made with rcgen when the benchmark starts (no key is committed); both
//! clients trust that CA. TLS 1.3, ALPN `http/1.1`, one handshake per run
//! (in the warm-up, outside the measurement).
//!
//! # What is measured
//!
//! Every run of a scenario starts a fresh client (or raw connection), warms
//! up with a few hundred requests (a few for `/big`) outside the
//! measurement, then times the measured requests with a monotonic clock and
//! takes the process CPU time (user + system, `getrusage(RUSAGE_SELF)`)
//! before and after. Process CPU includes the server's threads and all the
//! client's threads (event loops, wheel, resolver). The server's share is
//! measured on its own from the per-thread totals above (warm-up requests
//! included, so it is a per-request average over the run's connections), and
//! the client's share is the difference. `ctx_sw_per_req` is the process's
//! context switches (voluntary + involuntary, same `getrusage`) per request:
//! each time a thread blocks and is woken counts one. The `raw-floor` row shows the same
//! split for the simplest possible client, so `raw-floor`'s server CPU per
//! request is the server's cost in every row.
//!
//! Each scenario runs `--runs` times (default 3), the runs of all scenarios
//! interleaved round-robin so that slow drift of the machine spreads over
//! all of them; the row shows the median run by wall time per request, and
//! `spread` is (slowest − fastest) / median over the runs. After the table:
//! `tickless-seq`'s wall time per request over `raw-floor`'s (target ≤ 1.3x)
//! and the timeout cost, `tickless-seq` over `tickless-seq-no-timeout`
//! (target < 2 %).
//!
//! # Noise
//!
//! Every small request is a chain of blocking hand-offs between threads, so
//! its time depends on where the scheduler puts them. On a small VM the
//! unpinned runs are bimodal: threads ping-ponging on one CPU are fast,
//! wake-ups across CPUs (an idle vCPU woken out of halt) are several times
//! slower, and which one a run gets changes from run to run — watch
//! `spread_pct`. For comparisons that must be stable (the timeout cost),
//! pin the process: `taskset -c 0 cargo bench --bench http` (every thread
//! inherits the mask; `tickless-64-in-flight` and `tickless-1mib` then use
//! one core).
//!
//! # Options
//!
//! `--requests N` (small requests per measured run; by default 200 000 for
//! `raw-floor`, 100 000 for `raw-floor-tls`, 40 000 for the sequential
//! tickless scenarios (http and https) and 150 000
//! for `tickless-64-in-flight`, about 2–3 s each on a 2-core machine),
//! `--big-requests N` (1 MiB requests per measured run; default 8 000,
//! 10 000 for `raw-floor-1mib`),
//! `--runs N` (default 3), `--scenario NAME` (repeatable; default all but
//! `raw-floor-1mib`), `--format table|csv`. The `--bench` flag cargo passes
//! is ignored.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickless::WithCauses;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

#[path = "../examples/common/unicode_args.rs"]
mod unicode_args;

const SMALL_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const NOT_FOUND: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
const SMALL_BODY: &[u8] = b"ok";
const BIG_LEN: usize = 1 << 20;
const DROPPED_LEN: usize = 16 * 1024;
const WINDOW: usize = 64;
const WARMUP_SMALL: u64 = 500;
const WARMUP_BIG: u64 = 20;

// ---------------------------------------------------------------------------
// CPU clocks

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
}

/// CPU time (user + system) and context switches (voluntary + involuntary).
fn rusage(who: libc::c_int) -> Option<(Duration, u64)> {
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero
    // bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` that outlives the call,
    // and `who` is one of the RUSAGE_* constants.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    (rc == 0).then(|| {
        (
            timeval(usage.ru_utime) + timeval(usage.ru_stime),
            (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
        )
    })
}

/// User + system CPU time and context switches of the whole process, every
/// thread included.
fn process_cpu() -> (Duration, u64) {
    rusage(libc::RUSAGE_SELF).expect("getrusage(RUSAGE_SELF)")
}

/// User + system CPU time of the calling thread.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn thread_cpu() -> Option<Duration> {
    rusage(libc::RUSAGE_THREAD).map(|(cpu, _)| cpu)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn thread_cpu() -> Option<Duration> {
    None
}

// ---------------------------------------------------------------------------
// The server

/// What the server's threads share.
struct ServerShared {
    stopping: AtomicBool,
    accepted: AtomicUsize,
    /// Requests answered by connection threads that have ended.
    served: AtomicU64,
    /// CPU time (ns) of connection threads that have ended.
    cpu_ns: AtomicU64,
    /// False once a thread could not read its own CPU time.
    cpu_known: AtomicBool,
    connections: Mutex<Vec<Connection>>,
    big_response: Vec<u8>,
    dropped_response: Vec<u8>,
    /// Set for the HTTPS twin: every connection speaks TLS.
    tls: Option<Arc<rustls::ServerConfig>>,
}

struct Connection {
    stream: TcpStream,
    thread: JoinHandle<()>,
}

/// Requests answered and CPU spent by the connections of one run.
struct ServerTotals {
    served: u64,
    cpu: Option<Duration>,
}

struct Server {
    addr: SocketAddr,
    shared: Arc<ServerShared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let mut big_response =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG_LEN}\r\n\r\n").into_bytes();
        big_response.extend((0..BIG_LEN).map(|i| b'a' + (i % 26) as u8));
        let mut dropped_response =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {DROPPED_LEN}\r\n\r\n").into_bytes();
        dropped_response.extend_from_slice(&big_response[big_response.len() - DROPPED_LEN..]);
        let shared = Arc::new(ServerShared {
            stopping: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            cpu_known: AtomicBool::new(true),
            connections: Mutex::new(Vec::new()),
            big_response,
            dropped_response,
            tls,
        });
        let accept_shared = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("bench-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(Server {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Shuts every connection down, joins their threads, and returns what
    /// they did since the last call. Call it once the client is closed.
    fn reap(&self) -> ServerTotals {
        let connections = std::mem::take(&mut *lock(&self.shared.connections));
        for connection in connections {
            let _ = connection.stream.shutdown(Shutdown::Both);
            connection
                .thread
                .join()
                .expect("a server connection thread panicked");
        }
        let served = self.shared.served.swap(0, Ordering::SeqCst);
        let cpu_ns = self.shared.cpu_ns.swap(0, Ordering::SeqCst);
        let known = self.shared.cpu_known.swap(true, Ordering::SeqCst);
        ServerTotals {
            served,
            cpu: known.then(|| Duration::from_nanos(cpu_ns)),
        }
    }

    fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            acceptor
                .join()
                .expect("the server's accept thread panicked");
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

fn accept_loop(listener: TcpListener, shared: Arc<ServerShared>) {
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
        let thread = std::thread::Builder::new()
            .name("bench-conn".into())
            .spawn(move || {
                let served = match &conn_shared.tls {
                    None => serve(stream, &conn_shared),
                    Some(config) => match rustls::ServerConnection::new(config.clone()) {
                        Ok(tls) => serve(rustls::StreamOwned::new(tls, stream), &conn_shared),
                        Err(_) => 0,
                    },
                };
                conn_shared.served.fetch_add(served, Ordering::SeqCst);
                match thread_cpu() {
                    Some(cpu) => {
                        conn_shared
                            .cpu_ns
                            .fetch_add(cpu.as_nanos() as u64, Ordering::SeqCst);
                    }
                    None => conn_shared.cpu_known.store(false, Ordering::SeqCst),
                }
            })
            .expect("spawn a server connection thread");
        lock(&shared.connections).push(Connection {
            stream: handle,
            thread,
        });
    }
}

/// Position just past the first `\r\n\r\n` in `buf`.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Answers requests on one connection until the peer closes it; returns how
/// many it answered.
fn serve(mut stream: impl Read + Write, shared: &ServerShared) -> u64 {
    let mut buf = vec![0u8; 16 * 1024];
    let (mut len, mut served) = (0, 0);
    loop {
        let mut start = 0;
        while let Some(end) = head_end(&buf[start..len]) {
            let target = buf[start..start + end].split(|&b| b == b' ').nth(1);
            let response = match target {
                Some(b"/small") => SMALL_RESPONSE,
                Some(b"/big") => &shared.big_response[..],
                Some(b"/16k") => &shared.dropped_response[..],
                _ => NOT_FOUND,
            };
            if stream.write_all(response).is_err() {
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

/// The plain server, its HTTPS twin, and the certificates.
struct Servers {
    http: Server,
    https: Server,
    tls: BenchTls,
}

// ---------------------------------------------------------------------------
// The raw floor

/// One keep-alive connection driven by hand.
struct RawClient {
    stream: Box<dyn RawStream>,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl RawClient {
    /// Plain TCP, or TLS with `tls`.
    fn connect(
        addr: SocketAddr,
        path: &str,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> io::Result<RawClient> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn RawStream> = match tls {
            None => Box::new(tcp),
            Some(config) => {
                let name = ServerName::from(addr.ip());
                let conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(io::Error::other)?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes();
        Ok(RawClient {
            stream,
            request,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Sends the request and reads the whole response; returns the body length.
    fn get(&mut self) -> io::Result<usize> {
        self.stream.write_all(&self.request)?;
        let mut len = 0;
        let head = loop {
            let n = self.stream.read(&mut self.buf[len..])?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            len += n;
            if let Some(head) = head_end(&self.buf[..len]) {
                break head;
            }
            if len == self.buf.len() {
                return Err(io::Error::other("response head too large"));
            }
        };
        let body_len = content_length(&self.buf[..head])
            .ok_or_else(|| io::Error::other("no Content-Length"))?;
        let mut have = len - head;
        while have < body_len {
            let want = (body_len - have).min(self.buf.len());
            let n = self.stream.read(&mut self.buf[..want])?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            have += n;
        }
        Ok(body_len)
    }
}

/// What the raw client drives: a TCP stream, or rustls over one.
trait RawStream: Read + Write {}
impl<T: Read + Write> RawStream for T {}

// ---------------------------------------------------------------------------
// Certificates for the HTTPS twin

/// The HTTPS twin's server config and what its clients trust.
struct BenchTls {
    server: Arc<rustls::ServerConfig>,
    /// For the raw TLS client: the CA as its only root.
    client: Arc<rustls::ClientConfig>,
    /// For tickless: `add_root_certificate`.
    ca_pem: String,
}

fn bench_tls() -> BenchTls {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("server params");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).expect("CA root");
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    BenchTls {
        server: Arc::new(server),
        client: Arc::new(client),
        ca_pem: ca.pem(),
    }
}

fn content_length(head: &[u8]) -> Option<usize> {
    let head = std::str::from_utf8(head).ok()?;
    head.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

// ---------------------------------------------------------------------------
// Scenarios

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    RawFloor,
    TicklessSeq,
    TicklessSeqNoTimeout,
    TicklessSeqEventLoopTimeouts,
    Tickless64InFlight,
    Tickless1Mib,
    RawFloor1Mib,
    RawFloorTls,
    TicklessHttpsSeq,
    TicklessDrop16k,
    TicklessDrop16kReconnect,
}

const ALL_SCENARIOS: [Scenario; 11] = [
    Scenario::RawFloor,
    Scenario::RawFloorTls,
    Scenario::TicklessSeq,
    Scenario::TicklessHttpsSeq,
    Scenario::TicklessSeqNoTimeout,
    Scenario::TicklessSeqEventLoopTimeouts,
    Scenario::Tickless64InFlight,
    Scenario::Tickless1Mib,
    Scenario::RawFloor1Mib,
    Scenario::TicklessDrop16k,
    Scenario::TicklessDrop16kReconnect,
];

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::RawFloor => "raw-floor",
            Scenario::TicklessSeq => "tickless-seq",
            Scenario::TicklessSeqNoTimeout => "tickless-seq-no-timeout",
            Scenario::TicklessSeqEventLoopTimeouts => "tickless-seq-event-loop-timeouts",
            Scenario::Tickless64InFlight => "tickless-64-in-flight",
            Scenario::Tickless1Mib => "tickless-1mib",
            Scenario::RawFloor1Mib => "raw-floor-1mib",
            Scenario::RawFloorTls => "raw-floor-tls",
            Scenario::TicklessHttpsSeq => "tickless-https-seq",
            Scenario::TicklessDrop16k => "tickless-drop-16k",
            Scenario::TicklessDrop16kReconnect => "tickless-drop-16k-reconnect",
        }
    }

    fn from_name(name: &str) -> Option<Scenario> {
        ALL_SCENARIOS.into_iter().find(|s| s.name() == name)
    }

    /// Whether the scenario talks to the HTTPS twin.
    fn is_tls(self) -> bool {
        matches!(self, Scenario::RawFloorTls | Scenario::TicklessHttpsSeq)
    }

    fn is_big(self) -> bool {
        matches!(self, Scenario::Tickless1Mib | Scenario::RawFloor1Mib)
    }

    /// Measured requests per run without `--requests`/`--big-requests`:
    /// about 2–3 s each on a 2-core machine.
    fn default_requests(self) -> u64 {
        match self {
            Scenario::RawFloor => 200_000,
            Scenario::RawFloorTls => 100_000,
            Scenario::TicklessSeq
            | Scenario::TicklessHttpsSeq
            | Scenario::TicklessSeqNoTimeout
            | Scenario::TicklessSeqEventLoopTimeouts => 40_000,
            Scenario::Tickless64InFlight => 150_000,
            Scenario::Tickless1Mib => 8_000,
            Scenario::RawFloor1Mib => 10_000,
            Scenario::TicklessDrop16k => 20_000,
            Scenario::TicklessDrop16kReconnect => 5_000,
        }
    }

    /// Whether the scenario must use exactly one connection.
    fn single_connection(self) -> bool {
        !matches!(
            self,
            Scenario::Tickless64InFlight
                | Scenario::TicklessDrop16k
                | Scenario::TicklessDrop16kReconnect
        )
    }

    /// Whether each response is dropped after its head, body unread.
    fn drops_bodies(self) -> bool {
        matches!(
            self,
            Scenario::TicklessDrop16k | Scenario::TicklessDrop16kReconnect
        )
    }
}

/// One measured run.
#[derive(Clone, Debug)]
struct Run {
    requests: u64,
    wall: Duration,
    cpu: Duration,
    /// Context switches of the whole process.
    switches: u64,
    /// Server CPU per request answered, over the run's connections.
    server_cpu_per_request: Option<Duration>,
    connections: usize,
}

impl Run {
    fn wall_per_request(&self) -> Duration {
        self.wall / self.requests as u32
    }
}

fn expect_response(result: Result<tickless::Response, tickless::Error>, body_len: usize) {
    match result {
        Ok(response) => {
            assert_eq!(response.status(), 200, "unexpected status");
            let body = response.bytes().wait().expect("the body");
            assert_eq!(body.len(), body_len, "unexpected body length");
            if body_len == SMALL_BODY.len() {
                assert_eq!(body, SMALL_BODY);
            }
        }
        // With its causes: a client error's message says its own level
        // only (`connect to … failed`), the why is its `source()`.
        Err(error) => panic!("request failed: {}", WithCauses(&error)),
    }
}

fn build_client(scenario: Scenario, tls: &BenchTls) -> tickless::Client {
    let builder = tickless::Client::builder();
    let builder = match scenario {
        Scenario::TicklessHttpsSeq => builder.add_root_certificate(&tls.ca_pem),
        Scenario::TicklessSeqNoTimeout => builder
            .request_timeout(Duration::ZERO)
            .read_timeout(Duration::ZERO),
        Scenario::TicklessSeqEventLoopTimeouts => builder.use_event_loop_timeouts(true),
        Scenario::TicklessDrop16kReconnect => builder.keep_alive(false),
        _ => builder,
    };
    builder.build().expect("start the client")
}

fn tickless_sequential(client: &tickless::Client, url: &str, n: u64, body_len: usize) {
    for _ in 0..n {
        expect_response(client.get(url).send().wait(), body_len);
    }
}

fn tickless_dropping(client: &tickless::Client, url: &str, n: u64) {
    for _ in 0..n {
        let response = client.get(url).send().wait().expect("request failed");
        assert_eq!(response.status(), 200, "unexpected status");
    }
}

fn tickless_window(client: &tickless::Client, url: &str, n: u64) {
    let mut window = VecDeque::with_capacity(WINDOW);
    let mut submitted = 0;
    while submitted < n && window.len() < WINDOW {
        window.push_back(client.get(url).send());
        submitted += 1;
    }
    while let Some(future) = window.pop_front() {
        expect_response(future.wait(), SMALL_BODY.len());
        if submitted < n {
            window.push_back(client.get(url).send());
            submitted += 1;
        }
    }
}

fn raw_sequential(raw: &mut RawClient, n: u64, body_len: usize) {
    for _ in 0..n {
        let got = raw.get().expect("raw request");
        assert_eq!(got, body_len, "unexpected body length");
    }
}

fn run_once(servers: &Servers, scenario: Scenario, n: u64) -> Run {
    let server = if scenario.is_tls() {
        &servers.https
    } else {
        &servers.http
    };
    let (path, body_len, warmup) = if scenario.is_big() {
        ("/big", BIG_LEN, WARMUP_BIG)
    } else if scenario.drops_bodies() {
        ("/16k", DROPPED_LEN, WARMUP_SMALL)
    } else {
        ("/small", SMALL_BODY.len(), WARMUP_SMALL)
    };
    let scheme = if scenario.is_tls() { "https" } else { "http" };
    let url = format!("{scheme}://{}{path}", server.addr);
    let accepted_before = server.accepted();
    let (wall, cpu, switches) = match scenario {
        Scenario::RawFloor | Scenario::RawFloor1Mib | Scenario::RawFloorTls => {
            let tls = scenario.is_tls().then_some(&servers.tls.client);
            let mut raw = RawClient::connect(server.addr, path, tls).expect("connect");
            raw_sequential(&mut raw, warmup, body_len);
            let (cpu0, t0) = (process_cpu(), Instant::now());
            raw_sequential(&mut raw, n, body_len);
            let (wall, cpu1) = (t0.elapsed(), process_cpu());
            drop(raw);
            (wall, cpu1.0.saturating_sub(cpu0.0), cpu1.1 - cpu0.1)
        }
        _ => {
            let client = build_client(scenario, &servers.tls);
            let run = |n| match scenario {
                Scenario::Tickless64InFlight => tickless_window(&client, &url, n),
                _ if scenario.drops_bodies() => tickless_dropping(&client, &url, n),
                _ => tickless_sequential(&client, &url, n, body_len),
            };
            run(warmup);
            let (cpu0, t0) = (process_cpu(), Instant::now());
            run(n);
            let (wall, cpu1) = (t0.elapsed(), process_cpu());
            client.close();
            drop(client);
            (wall, cpu1.0.saturating_sub(cpu0.0), cpu1.1 - cpu0.1)
        }
    };
    let totals = server.reap();
    let connections = server.accepted() - accepted_before;
    if scenario.single_connection() {
        assert_eq!(
            connections,
            1,
            "{} opened {connections} connections, expected 1",
            scenario.name()
        );
    }
    let server_cpu_per_request = totals
        .cpu
        .filter(|_| totals.served > 0)
        .map(|cpu| cpu / totals.served as u32);
    Run {
        requests: n,
        wall,
        cpu,
        switches,
        server_cpu_per_request,
        connections,
    }
}

// ---------------------------------------------------------------------------
// Reporting

struct Row {
    scenario: Scenario,
    median: Run,
    spread: f64,
}

impl Row {
    fn new(scenario: Scenario, mut runs: Vec<Run>) -> Row {
        runs.sort_by_key(Run::wall_per_request);
        let median = runs[runs.len() / 2].clone();
        let fastest = runs[0].wall_per_request().as_secs_f64();
        let slowest = runs[runs.len() - 1].wall_per_request().as_secs_f64();
        let spread = (slowest - fastest) / median.wall_per_request().as_secs_f64();
        Row {
            scenario,
            median,
            spread,
        }
    }

    fn us_per_request(&self) -> f64 {
        self.median.wall.as_secs_f64() * 1e6 / self.median.requests as f64
    }

    fn cpu_us_per_request(&self) -> f64 {
        self.median.cpu.as_secs_f64() * 1e6 / self.median.requests as f64
    }

    fn server_cpu_us_per_request(&self) -> Option<f64> {
        self.median
            .server_cpu_per_request
            .map(|d| d.as_secs_f64() * 1e6)
    }

    fn requests_per_second(&self) -> f64 {
        self.median.requests as f64 / self.median.wall.as_secs_f64()
    }

    fn mib_per_second(&self) -> Option<f64> {
        self.scenario.is_big().then(|| {
            self.median.requests as f64 * (BIG_LEN as f64 / (1 << 20) as f64)
                / self.median.wall.as_secs_f64()
        })
    }

    /// Fields in column order, formatted.
    fn fields(&self) -> Vec<String> {
        let server = self.server_cpu_us_per_request();
        let opt = |v: Option<f64>, prec: usize| match v {
            Some(v) => format!("{v:.prec$}"),
            None => "-".to_string(),
        };
        vec![
            self.scenario.name().to_string(),
            self.median.requests.to_string(),
            format!("{:.3}", self.median.wall.as_secs_f64()),
            format!("{:.0}", self.requests_per_second()),
            format!("{:.2}", self.us_per_request()),
            format!("{:.2}", self.cpu_us_per_request()),
            opt(server, 2),
            opt(server.map(|s| self.cpu_us_per_request() - s), 2),
            format!(
                "{:.2}",
                self.median.switches as f64 / self.median.requests as f64
            ),
            self.median.connections.to_string(),
            opt(self.mib_per_second(), 1),
            format!("{:.1}", self.spread * 100.0),
        ]
    }
}

const COLUMNS: [&str; 12] = [
    "scenario",
    "requests",
    "wall_s",
    "req_per_s",
    "us_per_req",
    "cpu_us_per_req",
    "server_cpu_us_per_req",
    "client_cpu_us_per_req",
    "ctx_sw_per_req",
    "connections",
    "mib_per_s",
    "spread_pct",
];

fn print_table(rows: &[Row]) {
    let cells: Vec<Vec<String>> = rows.iter().map(Row::fields).collect();
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].len())
                .chain([COLUMNS[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |fields: Vec<&str>| {
        let parts: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if i == 0 {
                    format!("{f:<w$}", w = widths[i])
                } else {
                    format!("{f:>w$}", w = widths[i])
                }
            })
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(COLUMNS.to_vec());
    for row in &cells {
        line(row.iter().map(String::as_str).collect());
    }
}

fn print_csv(rows: &[Row]) {
    println!("{}", COLUMNS.join(","));
    for row in rows {
        println!("{}", row.fields().join(","));
    }
}

fn summary(rows: &[Row]) -> Vec<String> {
    let find = |s: Scenario| rows.iter().find(|r| r.scenario == s);
    let mut lines = Vec::new();
    if let (Some(seq), Some(raw)) = (find(Scenario::TicklessSeq), find(Scenario::RawFloor)) {
        lines.push(format!(
            "tickless-seq / raw-floor, wall time per request: {:.2}x (target <= 1.3x)",
            seq.us_per_request() / raw.us_per_request()
        ));
        lines.push(format!(
            "tickless-seq / raw-floor, process CPU per request: {:.2}x",
            seq.cpu_us_per_request() / raw.cpu_us_per_request()
        ));
    }
    if let (Some(seq), Some(none)) = (
        find(Scenario::TicklessSeq),
        find(Scenario::TicklessSeqNoTimeout),
    ) {
        lines.push(format!(
            "timeout cost, tickless-seq vs tickless-seq-no-timeout: {:+.1} % wall, {:+.1} % CPU (target < 2 %)",
            (seq.us_per_request() / none.us_per_request() - 1.0) * 100.0,
            (seq.cpu_us_per_request() / none.cpu_us_per_request() - 1.0) * 100.0,
        ));
    }
    if let (Some(seq), Some(https), Some(raw), Some(raw_tls)) = (
        find(Scenario::TicklessSeq),
        find(Scenario::TicklessHttpsSeq),
        find(Scenario::RawFloor),
        find(Scenario::RawFloorTls),
    ) {
        let cpu = |row: &Row| row.cpu_us_per_request();
        let client = |row: &Row| row.server_cpu_us_per_request().map(|s| cpu(row) - s);
        lines.push(format!(
            "TLS cost, process CPU per request: tickless {:.2} -> {:.2} us ({:+.2}), raw {:.2} -> {:.2} us ({:+.2}) (target: tickless's increase <= raw's)",
            cpu(seq),
            cpu(https),
            cpu(https) - cpu(seq),
            cpu(raw),
            cpu(raw_tls),
            cpu(raw_tls) - cpu(raw),
        ));
        if let (Some(a), Some(b), Some(c), Some(d)) =
            (client(seq), client(https), client(raw), client(raw_tls))
        {
            lines.push(format!(
                "TLS cost, client CPU per request: tickless {a:.2} -> {b:.2} us ({:+.2}), raw {c:.2} -> {d:.2} us ({:+.2})",
                b - a,
                d - c
            ));
        }
        lines.push(format!(
            "tickless-https-seq / raw-floor-tls, wall time per request: {:.2}x",
            https.us_per_request() / raw_tls.us_per_request()
        ));
    }
    if let Some(raw) = find(Scenario::RawFloor) {
        if let Some(server) = raw.server_cpu_us_per_request() {
            lines.push(format!(
                "server share: {server:.2} us CPU per small request (its own threads' getrusage; included in cpu_us_per_req of every row)"
            ));
        }
    }
    lines
}

// ---------------------------------------------------------------------------
// The machine

fn machine() -> Vec<(&'static str, String)> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let logical = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let available = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = format!(
        "{} {}",
        read("/proc/sys/kernel/ostype").trim(),
        read("/proc/sys/kernel/osrelease").trim()
    );
    vec![
        ("date", utc_now()),
        (
            "cores",
            format!("{available} available ({logical} in /proc/cpuinfo)"),
        ),
        ("cpu", model),
        ("kernel", kernel.trim().to_string()),
        ("arch", std::env::consts::ARCH.to_string()),
    ]
}

/// The current time in UTC, `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// ---------------------------------------------------------------------------
// Command line

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Csv,
}

struct Options {
    requests: Option<u64>,
    big_requests: Option<u64>,
    runs: usize,
    scenarios: Vec<Scenario>,
    format: Format,
}

const USAGE: &str = "usage: cargo bench --bench http -- [--requests N] [--big-requests N] \
[--runs N] [--scenario NAME]... [--format table|csv]";

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        requests: None,
        big_requests: None,
        runs: 3,
        scenarios: Vec::new(),
        format: Format::Table,
    };
    let mut args = unicode_args::or_exit("http", USAGE);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.into())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{flag}: not a positive number: {v}"))
        };
        match flag.as_str() {
            "--bench" => {}
            "--requests" => options.requests = Some(number(value()?)?),
            "--big-requests" => options.big_requests = Some(number(value()?)?),
            "--runs" => options.runs = number(value()?)? as usize,
            "--scenario" => {
                let name = value()?;
                let scenario = Scenario::from_name(&name).ok_or_else(|| {
                    let names: Vec<_> = ALL_SCENARIOS.iter().map(|s| s.name()).collect();
                    format!("unknown scenario {name}; one of: {}", names.join(", "))
                })?;
                if !options.scenarios.contains(&scenario) {
                    options.scenarios.push(scenario);
                }
            }
            "--format" => {
                options.format = match value()?.as_str() {
                    "table" => Format::Table,
                    "csv" => Format::Csv,
                    other => return Err(format!("unknown format {other}")),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if options.scenarios.is_empty() {
        // Every scenario but the 1 MiB raw floor and the dropped bodies,
        // which run only when named.
        options.scenarios = ALL_SCENARIOS
            .into_iter()
            .filter(|s| !matches!(s, Scenario::RawFloor1Mib) && !s.drops_bodies())
            .collect();
    }
    Ok(options)
}

fn main() {
    let options = match parse_args() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("{error}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let prefix = match options.format {
        Format::Table => "",
        Format::Csv => "# ",
    };
    for (key, value) in machine() {
        println!("{prefix}{key:<7} {value}");
    }
    println!(
        "{prefix}runs    {} per scenario (median shown), interleaved; warm-up {WARMUP_SMALL} small / {WARMUP_BIG} big requests per run",
        options.runs
    );
    println!("{prefix}");

    let tls = bench_tls();
    let mut servers = Servers {
        http: Server::start(None).expect("start the loopback server"),
        https: Server::start(Some(tls.server.clone())).expect("start the HTTPS twin"),
        tls,
    };
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); options.scenarios.len()];
    for round in 0..options.runs {
        for (i, &scenario) in options.scenarios.iter().enumerate() {
            let n = if scenario.is_big() {
                options.big_requests
            } else {
                options.requests
            }
            .unwrap_or_else(|| scenario.default_requests());
            eprint!("run {}/{} {:<34}", round + 1, options.runs, scenario.name());
            let run = run_once(&servers, scenario, n);
            eprintln!(
                "{:>9.2} us/req  {:>3} connection(s)",
                run.wall.as_secs_f64() * 1e6 / n as f64,
                run.connections
            );
            runs[i].push(run);
        }
    }
    servers.http.stop();
    servers.https.stop();

    let rows: Vec<Row> = options
        .scenarios
        .iter()
        .zip(runs)
        .map(|(&scenario, runs)| Row::new(scenario, runs))
        .collect();
    match options.format {
        Format::Table => print_table(&rows),
        Format::Csv => print_csv(&rows),
    }
    println!("{prefix}");
    for line in summary(&rows) {
        println!("{prefix}{line}");
    }
}
