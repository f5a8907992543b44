//! Heap bytes per idle pooled connection and per in-flight exchange:
//! tickless against hyper (hyper-util's legacy client), reqwest (async) and
//! ureq, HTTP/1.1 on loopback, the runs interleaved in one process.
//!
//! ```sh
//! cargo run --release --manifest-path bench-peers/Cargo.toml --bin memory
//! cargo run --release --manifest-path bench-peers/Cargo.toml --bin memory -- --runs 5 --connections 500
//! ```
//!
//! A counting global allocator keeps the process's live heap bytes. The
//! server is this binary run again as a child process (`--serve`), so none
//! of its memory is counted. Each run, for each client in turn:
//!
//! 1. build the client (and its tokio runtime), send one request and read
//!    its body, so that lazy state exists: `base` = live bytes;
//! 2. send N requests to `/gate/N`, which the server answers only once N of
//!    them are waiting — so they need N connections — read every body, let
//!    the connections go back to the pool (200 ms), then `idle` = live
//!    bytes; **per idle connection** = (`idle` − `base`) / the connections
//!    the server accepted in this step;
//! 3. send N requests to `/hold`, which the server reads and never answers,
//!    on those pooled connections; once the server holds all N, `busy` =
//!    live bytes; **per in-flight exchange** = (`busy` − `idle`) / N: what
//!    a request costs beyond its connection (its future or task, its state,
//!    buffers). `new conns` says if a client opened connections for it
//!    rather than reuse its idle ones;
//! 4. the server closes the held connections, the client is dropped.
//!
//! How each client is driven: tickless holds its `ResponseFuture`s (a
//! request runs on the client's loops without being polled); hyper and
//! reqwest spawn one task per request on a 2-worker tokio runtime (their
//! runtime's own memory is in `base`); ureq, blocking only, sends each
//! request from a thread of its own — its in-flight figure is the heap
//! only, each thread's stack is on top. Pools are unlimited (ureq's raised
//! to N). Kernel socket buffers are the same for every client and not
//! counted.

#[path = "../child.rs"]
mod child;
#[path = "../../../examples/common/unicode_args.rs"]
mod unicode_args;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[path = "../../../tests/support/counting_alloc.rs"]
mod counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

fn live() -> isize {
    counting_alloc::live_bytes()
}

const SETTLE: Duration = Duration::from_millis(200);

const USAGE: &str =
    "usage: memory [--runs N] [--connections N] [--only tickless|hyper|reqwest|ureq]";

fn main() {
    let args: Vec<String> = unicode_args::or_exit("memory", USAGE).collect();
    if child::is_server(&args) {
        serve();
        return;
    }
    let mut runs = 3;
    let mut connections = 200;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse::<usize>().ok());
        match arg.as_str() {
            "--runs" => runs = value().expect("--runs N"),
            "--connections" => connections = value().expect("--connections N"),
            "--only" => only = it.next().cloned(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => panic!("unknown argument {other:?}"),
        }
    }
    let child = child::ChildServer::start();
    let server = Control(child.addr);

    type Measure = fn(&Control, usize) -> Result<Sample, String>;
    let mut clients: Vec<(&str, Measure, Vec<Sample>)> = vec![
        ("tickless", tickless, Vec::new()),
        ("hyper", hyper, Vec::new()),
        ("reqwest", reqwest, Vec::new()),
        ("ureq", ureq, Vec::new()),
    ];
    clients.retain(|(name, _, _)| only.as_deref().is_none_or(|only| only == *name));
    for _ in 0..runs {
        for (name, measure, samples) in &mut clients {
            match measure(&server, connections) {
                Ok(sample) => samples.push(sample),
                Err(err) => eprintln!("{name}: {err}"),
            }
            server.release();
        }
    }
    drop(child);

    println!(
        "{} connections, median of {runs} runs (spread = (max - min) / median)",
        connections
    );
    println!(
        "{:<10} {:>18} {:>8} {:>20} {:>8} {:>10}",
        "client", "bytes/idle conn", "spread", "bytes/in-flight req", "spread", "new conns"
    );
    for (name, _, samples) in &clients {
        if samples.is_empty() {
            continue;
        }
        let (idle, idle_spread) = median(samples.iter().map(|s| s.idle_per_connection));
        let (busy, busy_spread) = median(samples.iter().map(|s| s.per_in_flight));
        let new = samples.iter().map(|s| s.new_connections).max().unwrap_or(0);
        println!(
            "{name:<10} {idle:>18.0} {:>7.1}% {busy:>20.0} {:>7.1}% {new:>10}",
            idle_spread * 100.0,
            busy_spread * 100.0
        );
    }
}

/// One run of one client.
struct Sample {
    idle_per_connection: f64,
    per_in_flight: f64,
    /// Connections opened while the held requests were sent.
    new_connections: usize,
}

fn median(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let spread = (values[values.len() - 1] - values[0]) / median.abs().max(1.0);
    (median, spread)
}

/// The steps every client goes through, around the calls that are its own.
struct Steps<'a> {
    server: &'a Control,
    n: usize,
    base: isize,
    accepted: usize,
}

impl<'a> Steps<'a> {
    /// After the first request, its body read.
    fn begin(server: &'a Control, n: usize) -> Steps<'a> {
        Steps {
            server,
            n,
            base: live(),
            accepted: server.counts().0,
        }
    }

    /// After the gated requests, their bodies read.
    fn pooled(&self) -> Pooled {
        std::thread::sleep(SETTLE);
        let idle = live();
        let accepted = self.server.counts().0;
        let opened = accepted.saturating_sub(self.accepted).max(1);
        Pooled {
            idle,
            per_connection: (idle - self.base) as f64 / opened as f64,
            accepted,
        }
    }

    /// Once the held requests are sent: waits for the server to hold them
    /// all, then measures.
    fn held(&self, pooled: &Pooled) -> Result<Sample, String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (accepted, holding) = self.server.counts();
            if holding >= self.n {
                std::thread::sleep(SETTLE);
                return Ok(Sample {
                    idle_per_connection: pooled.per_connection,
                    per_in_flight: (live() - pooled.idle) as f64 / self.n as f64,
                    new_connections: accepted - pooled.accepted,
                });
            }
            if Instant::now() > deadline {
                return Err(format!("the server holds {holding} of {} requests", self.n));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The client with its connections idle in its pool.
struct Pooled {
    idle: isize,
    per_connection: f64,
    accepted: usize,
}

fn tickless(server: &Control, n: usize) -> Result<Sample, String> {
    let client = tickless::Client::builder()
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .build()
        .map_err(|e| e.to_string())?;
    let get = |path: &str| client.get(server.url(path)).send();
    let body = |response: tickless::ResponseFuture| -> Result<(), String> {
        let response = response.wait().map_err(|e| e.to_string())?;
        response.bytes().wait().map_err(|e| e.to_string())?;
        Ok(())
    };
    body(get("/small"))?;
    let steps = Steps::begin(server, n);
    let gated: Vec<_> = (0..n).map(|_| get(&format!("/gate/{n}"))).collect();
    gated.into_iter().try_for_each(body)?;
    let pooled = steps.pooled();
    let held: Vec<_> = (0..n).map(|_| get("/hold")).collect();
    let sample = steps.held(&pooled);
    drop(held);
    sample
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// hyper and reqwest alike: a task per request on `runtime`.
fn on_tokio<F>(
    server: &Control,
    n: usize,
    runtime: tokio::runtime::Runtime,
    get: impl Fn(String) -> F,
) -> Result<Sample, String>
where
    F: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    runtime.block_on(get(server.url("/small")))?;
    let steps = Steps::begin(server, n);
    let gated: Vec<_> = (0..n)
        .map(|_| runtime.spawn(get(server.url(&format!("/gate/{n}")))))
        .collect();
    for task in gated {
        runtime.block_on(task).map_err(|e| e.to_string())??;
    }
    let pooled = steps.pooled();
    let held: Vec<_> = (0..n)
        .map(|_| runtime.spawn(get(server.url("/hold"))))
        .collect();
    let sample = steps.held(&pooled);
    held.iter().for_each(|task| task.abort());
    runtime.shutdown_timeout(Duration::from_secs(2));
    sample
}

fn hyper(server: &Control, n: usize) -> Result<Sample, String> {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::{connect::HttpConnector, Client};
    let runtime = runtime()?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Empty<bytes::Bytes>> =
        Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    on_tokio(server, n, runtime, move |url| {
        let client = client.clone();
        async move {
            let uri: hyper::Uri = url.parse().map_err(|e| format!("{e}"))?;
            let response = client.get(uri).await.map_err(|e| e.to_string())?;
            response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
    })
}

fn reqwest(server: &Control, n: usize) -> Result<Sample, String> {
    let runtime = runtime()?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| e.to_string())?;
    on_tokio(server, n, runtime, move |url| {
        let client = client.clone();
        async move {
            let response = client.get(url).send().await.map_err(|e| e.to_string())?;
            response.bytes().await.map_err(|e| e.to_string())?;
            Ok(())
        }
    })
}

fn ureq(server: &Control, n: usize) -> Result<Sample, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .proxy(None)
        .max_idle_connections(n)
        .max_idle_connections_per_host(n)
        .build()
        .into();
    let get = |agent: &ureq::Agent, url: String| -> Result<(), String> {
        let mut response = agent.get(&url).call().map_err(|e| e.to_string())?;
        response
            .body_mut()
            .read_to_vec()
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    get(&agent, server.url("/small"))?;
    let steps = Steps::begin(server, n);
    std::thread::scope(|scope| {
        let gated: Vec<_> = (0..n)
            .map(|_| scope.spawn(|| get(&agent, server.url(&format!("/gate/{n}")))))
            .collect();
        gated
            .into_iter()
            .try_for_each(|thread| thread.join().map_err(|_| "a thread panicked".to_owned())?)
    })?;
    let pooled = steps.pooled();
    std::thread::scope(|scope| {
        for _ in 0..n {
            // Ends with an error once the server closes the held connections.
            scope.spawn(|| get(&agent, server.url("/hold")));
        }
        let sample = steps.held(&pooled);
        server.release();
        sample
    })
}

/// The child server, from the parent's side: its base URL, and its
/// `/count` and `/release` routes on connections of their own.
struct Control(SocketAddr);

impl Control {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.0)
    }

    fn ask(&self, path: &str) -> String {
        let mut stream = TcpStream::connect(self.0).expect("the server");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("a request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("its answer");
        answer.rsplit("\r\n\r\n").next().unwrap_or("").to_owned()
    }

    /// (connections accepted for requests, requests held now).
    fn counts(&self) -> (usize, usize) {
        let answer = self.ask("/count");
        let mut numbers = answer.split_whitespace().map(|n| n.parse().unwrap_or(0));
        (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
    }

    /// Closes every held connection.
    fn release(&self) {
        self.ask("/release");
    }
}

/// What the server's connection threads share.
#[derive(Default)]
struct ServerState {
    /// Connections that sent a request other than `/count` or `/release`.
    accepted: usize,
    /// Requests waiting at each gate size.
    gates: std::collections::HashMap<usize, usize>,
    /// Connections holding a `/hold` request.
    held: Vec<TcpStream>,
}

/// The child: `/small`, `/gate/N`, `/hold`, `/count`, `/release`, each
/// connection on a thread of its own, keep-alive.
fn serve() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    println!("{}", listener.local_addr().expect("its address"));
    let state = Arc::new((Mutex::new(ServerState::default()), Condvar::new()));
    for stream in listener.incoming().flatten() {
        let state = state.clone();
        std::thread::spawn(move || connection(stream, &state));
    }
}

const SMALL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, world!";

fn connection(stream: TcpStream, state: &(Mutex<ServerState>, Condvar)) {
    let _ = stream.set_nodelay(true);
    let (lock, gate_opened) = state;
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut counted = false;
    loop {
        let mut target = None;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).map_or(true, |n| n == 0) {
                return;
            }
            if target.is_none() {
                target = line.split_whitespace().nth(1).map(str::to_owned);
            } else if line == "\r\n" {
                break;
            }
        }
        let target = target.unwrap_or_default();
        let answer: Vec<u8> = match target.as_str() {
            "/count" => {
                let state = lock.lock().unwrap();
                let body = format!("{} {}", state.accepted, state.held.len());
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes()
            }
            "/release" => {
                for held in lock.lock().unwrap().held.drain(..) {
                    let _ = held.shutdown(std::net::Shutdown::Both);
                }
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            }
            _ => {
                if !counted {
                    counted = true;
                    lock.lock().unwrap().accepted += 1;
                }
                if target == "/hold" {
                    if let Ok(held) = writer.try_clone() {
                        lock.lock().unwrap().held.push(held);
                    }
                    let mut sink = [0; 1024];
                    while reader.read(&mut sink).is_ok_and(|n| n > 0) {}
                    return;
                }
                if let Some(size) = target.strip_prefix("/gate/").and_then(|n| n.parse().ok()) {
                    let mut state = lock.lock().unwrap();
                    *state.gates.entry(size).or_default() += 1;
                    gate_opened.notify_all();
                    while state.gates[&size] % size != 0 {
                        state = gate_opened.wait(state).unwrap();
                    }
                }
                SMALL.to_vec()
            }
        };
        if writer.write_all(&answer).is_err() || matches!(target.as_str(), "/count" | "/release") {
            return;
        }
    }
}
