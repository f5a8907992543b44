//! 64 requests in flight over one HTTP/2 connection (cleartext, prior
//! knowledge): tickless against hyper's HTTP/2 client
//! (`hyper::client::conn::http2` on a tokio multi-thread runtime), the runs
//! interleaved in one process.
//!
//! ```sh
//! cargo run --release --manifest-path bench-peers/Cargo.toml --bin h2-in-flight
//! cargo run --release --manifest-path bench-peers/Cargo.toml --bin h2-in-flight -- \
//!     --runs 5 --seconds 3 --in-flight 64
//! ```
//!
//! The server is this binary run again as a child process (`--serve`): the
//! `h2` crate's server on a one-worker tokio runtime, answering every stream
//! `200` with `Hello, world!` (13 bytes). Being another process, its CPU is
//! not in the client's: `cpu_us/req` is this process's user + system time
//! (`getrusage(RUSAGE_SELF)`) over the measured part, divided by the requests
//! completed in it. Each run builds a fresh client and one connection, warms
//! up for 300 ms, measures for `--seconds`, and drops the client. The table
//! gives, per client, the median run by req/s, and the spread (fastest −
//! slowest) / median.
//!
//! * tickless: `http2_prior_knowledge()`, no timeouts, one thread keeping a
//!   window of N `ResponseFuture`s (waits on the oldest, submits one in its
//!   place), bodies read whole. The URI is parsed once and cloned for each
//!   request, as on hyper's side (until 2026-12-01 it was parsed from a
//!   string for every request, which hyper's side never did). By default
//!   its requests carry its default `User-Agent` and `Accept-Encoding`;
//!   with `--bare` they do not (`no_user_agent()`, `no_decompress()`): the
//!   same request on the wire as hyper's, pseudo-headers alone.
//! * hyper: one `http2::handshake` connection, its task spawned on the
//!   runtime, N tasks each sending one request after another on a clone of
//!   the `SendRequest`, bodies `collect()`ed.

#[path = "../child.rs"]
mod child;
#[path = "../h2_sides.rs"]
mod h2_sides;
#[path = "../../../examples/common/unicode_args.rs"]
mod unicode_args;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WARMUP: Duration = Duration::from_millis(300);

const USAGE: &str =
    "usage: h2-in-flight [--runs N] [--seconds S] [--in-flight N] [--only tickless|hyper] [--bare]";

fn main() {
    let args: Vec<String> = unicode_args::or_exit("h2-in-flight", USAGE).collect();
    if child::is_server(&args) {
        h2_sides::serve();
        return;
    }
    let mut runs = 3;
    let mut seconds = 2.0f64;
    let mut in_flight = 64;
    let mut only: Option<String> = None;
    let mut bare = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse::<f64>().ok());
        match arg.as_str() {
            "--runs" => runs = value().expect("--runs N") as usize,
            "--seconds" => seconds = value().expect("--seconds S"),
            "--in-flight" => in_flight = value().expect("--in-flight N") as usize,
            "--only" => only = it.next().cloned(),
            "--bare" => bare = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => panic!("unknown argument {other:?}"),
        }
    }
    let measure = Duration::from_secs_f64(seconds);
    let server = child::ChildServer::start();
    let addr = server.addr;

    let mut results: Vec<(&str, Vec<Sample>)> =
        vec![("tickless", Vec::new()), ("hyper", Vec::new())];
    results.retain(|(name, _)| only.as_deref().is_none_or(|only| only == *name));
    for _ in 0..runs {
        for (name, samples) in &mut results {
            samples.push(match *name {
                "tickless" => tickless(addr, in_flight, measure, bare),
                _ => hyper(addr, in_flight, measure),
            });
        }
    }
    drop(server);

    println!(
        "h2-in-flight: {in_flight} requests in flight on one HTTP/2 connection, {runs} interleaved runs of {seconds} s"
    );
    println!(
        "{:<10} {:>10} {:>10} {:>12}",
        "client", "req/s", "spread_%", "cpu_us/req"
    );
    for (name, mut samples) in results {
        samples.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
        let median = &samples[samples.len() / 2];
        let spread = (samples.last().unwrap().rate() - samples[0].rate()) / median.rate() * 100.0;
        println!(
            "{name:<10} {:>10.0} {:>10.1} {:>12.1}",
            median.rate(),
            spread,
            median.cpu_us_per_request()
        );
    }
}

/// One measured run.
struct Sample {
    requests: u64,
    wall: Duration,
    cpu: Duration,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }

    fn cpu_us_per_request(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }
}

/// This process's user + system time.
fn cpu_now() -> Duration {
    // SAFETY: getrusage writes a `rusage` into the zeroed one it is given,
    // which lives for the call.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn tickless(addr: SocketAddr, in_flight: usize, measure: Duration, bare: bool) -> Sample {
    let mut window = h2_sides::TicklessWindow::new(addr, in_flight, bare);
    let warm_until = Instant::now() + WARMUP;
    while Instant::now() < warm_until {
        window.one();
    }
    let (start, cpu) = (Instant::now(), cpu_now());
    let mut requests = 0;
    // The clock is looked at every 64 requests, not for each (hyper's
    // side reads it twice in all).
    while start.elapsed() < measure {
        for _ in 0..64 {
            window.one();
        }
        requests += 64;
    }
    let sample = Sample {
        requests,
        wall: start.elapsed(),
        cpu: cpu_now() - cpu,
    };
    window.finish();
    sample
}

fn hyper(addr: SocketAddr, in_flight: usize, measure: Duration) -> Sample {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sender = h2_sides::hyper_sender(&runtime, addr);
    let uri: hyper::Uri = format!("http://{addr}/small").parse().unwrap();
    for _ in 0..in_flight {
        let (mut sender, uri, done, stop) =
            (sender.clone(), uri.clone(), done.clone(), stop.clone());
        runtime.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                // An error only as the runtime shuts down: the task ends.
                if h2_sides::hyper_one(&mut sender, &uri).await.is_err() {
                    return;
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    std::thread::sleep(WARMUP);
    let (start, cpu, before) = (Instant::now(), cpu_now(), done.load(Ordering::Relaxed));
    std::thread::sleep(measure);
    let sample = Sample {
        requests: done.load(Ordering::Relaxed) - before,
        wall: start.elapsed(),
        cpu: cpu_now() - cpu,
    };
    stop.store(true, Ordering::Relaxed);
    drop(sender);
    runtime.shutdown_timeout(Duration::from_secs(2));
    sample
}
