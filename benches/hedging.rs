//! Hedged requests against a heavy tail: `cargo bench --bench hedging`.
//!
//! The benchmark starts a loopback server (std threads, one per
//! connection, keep-alive) whose answers have a heavy tail: one request in
//! twenty (a fixed pseudo-random sequence, 5 %) is answered after 200 ms,
//! the others after 1 ms. The client (two loops, event-loop timeouts, a
//! 5 s request timeout) sends `--requests` GETs from `--concurrency`
//! threads, each sequentially, three ways:
//!
//! * `off`: no hedging;
//! * `after-p90`: `hedge::Policy::after(d)` with `d` the p90 of this run's
//!   `off` latencies (a fixed delay; their p95 is no use here: with 5 % of
//!   answers slow, it lands on the slow ones);
//! * `percentile-95`: `hedge::Policy::percentile(95.0, 5 ms)`, the client
//!   tracking the origin's p95 itself.
//!
//! For each it prints p50, p99 and p99.9 of the latency (send to head),
//! and the extra load: requests the server received beyond one per
//! request, in percent. `--runs N` repeats everything and prints the
//! median of each cell. The retry budget is left at its default (20 %).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use tickless::{hedge, Client};

#[path = "../examples/common/unicode_args.rs"]
mod unicode_args;

const USAGE: &str =
    "usage: cargo bench --bench hedging -- [--requests N] [--concurrency N] [--runs N]";

const SLOW: Duration = Duration::from_millis(200);
const FAST: Duration = Duration::from_millis(1);

/// The server: counts requests; request number `n` (over the whole run)
/// is slow when a fixed hash of `n` falls in the lowest 5 %.
fn serve(listener: TcpListener, received: Arc<AtomicU64>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { return };
        let received = received.clone();
        thread::spawn(move || connection(stream, &received));
    }
}

fn connection(stream: TcpStream, received: &AtomicU64) {
    let _ = stream.set_nodelay(true);
    let mut writer = match stream.try_clone() {
        Ok(writer) => writer,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        // The request head, up to its blank line (GETs: no body).
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let n = received.fetch_add(1, Ordering::SeqCst);
        let hash = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        thread::sleep(if hash % 100 < 5 { SLOW } else { FAST });
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

struct Args {
    requests: usize,
    concurrency: usize,
    runs: usize,
}

fn args() -> Args {
    let mut args = Args {
        requests: 4000,
        concurrency: 16,
        runs: 3,
    };
    let mut it = unicode_args::or_exit("hedging", USAGE);
    while let Some(arg) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse().ok()).expect("a number");
        match arg.as_str() {
            "--requests" => args.requests = value(),
            "--concurrency" => args.concurrency = value(),
            "--runs" => args.runs = value(),
            // cargo bench passes --bench.
            _ => {}
        }
    }
    args
}

/// One way of sending: latencies (sorted) and the extra load in percent.
fn run(args: &Args, policy: hedge::Policy) -> (Vec<Duration>, f64) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let received = Arc::new(AtomicU64::new(0));
    let counted = received.clone();
    thread::spawn(move || serve(listener, counted));
    let client = Client::builder()
        .event_loops(2)
        .use_event_loop_timeouts(true)
        .request_timeout(Duration::from_secs(5))
        .hedge(policy)
        .build()
        .unwrap();
    let per_thread = args.requests / args.concurrency;
    let threads: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let client = client.clone();
            let url = url.clone();
            thread::spawn(move || {
                let mut latencies = Vec::with_capacity(per_thread);
                for _ in 0..per_thread {
                    let start = Instant::now();
                    let response = client.get(url.as_str()).send().wait().unwrap();
                    latencies.push(start.elapsed());
                    response.bytes().wait().unwrap();
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let sent = latencies.len() as f64;
    client.close();
    latencies.sort();
    let extra = (received.load(Ordering::SeqCst) as f64 - sent) / sent * 100.0;
    (latencies, extra)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args = args();
    let names = ["off", "after-p90", "percentile-95"];
    // Per scenario: p50, p99, p99.9 (ms) and extra load (%), per run.
    let mut cells: Vec<[Vec<f64>; 4]> = (0..names.len()).map(|_| Default::default()).collect();
    for _ in 0..args.runs {
        let (off, off_extra) = run(&args, hedge::Policy::none());
        let p90 = percentile(&off, 90.0);
        let after = run(&args, hedge::Policy::after(p90));
        let adaptive = run(
            &args,
            hedge::Policy::percentile(95.0, Duration::from_millis(5)),
        );
        for (cell, (latencies, extra)) in cells.iter_mut().zip([(off, off_extra), after, adaptive])
        {
            for (i, p) in [50.0, 99.0, 99.9].into_iter().enumerate() {
                cell[i].push(percentile(&latencies, p).as_secs_f64() * 1e3);
            }
            cell[3].push(extra);
        }
        eprintln!("run done (p90 of off: {p90:?})");
    }
    println!(
        "requests {} x {} runs, concurrency {}, 5% answered after 200 ms, the rest after 1 ms",
        args.requests, args.runs, args.concurrency
    );
    println!("scenario       p50_ms  p99_ms  p99.9_ms  extra_requests_%");
    for (name, cell) in names.iter().zip(cells) {
        let [p50, p99, p999, extra] = cell.map(median);
        println!("{name:<14} {p50:>6.2} {p99:>7.2} {p999:>9.2} {extra:>17.1}");
    }
}
