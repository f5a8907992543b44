//! Heap allocations per request, 64 requests in flight over one HTTP/2
//! connection (cleartext, prior knowledge): tickless and hyper's HTTP/2
//! client, in the shape of `h2-in-flight` (the same server, the same
//! windows), counted by a counting global allocator. Unlike a time, the
//! count does not depend on the machine's load, so it measures per-request
//! work without noise.
//!
//! ```sh
//! cargo run --release --manifest-path bench-peers/Cargo.toml --bin h2-allocs
//! cargo run --release --manifest-path bench-peers/Cargo.toml --bin h2-allocs -- \
//!     --requests 100000 --in-flight 64
//! ```
//!
//! The server runs in a child process (this binary, `--serve`), so only
//! the client's allocations are counted: every thread of this process's,
//! the event loop's (tickless) or the runtime's (hyper) included. Each
//! client warms up with as many requests as it then measures. `--bare`:
//! tickless sends no `User-Agent` and no `Accept-Encoding`, as hyper's
//! requests (see `h2-in-flight`).

#[path = "../child.rs"]
mod child;
#[path = "../../../tests/support/counting_alloc.rs"]
mod counting_alloc;
#[path = "../h2_sides.rs"]
mod h2_sides;
#[path = "../../../examples/common/unicode_args.rs"]
mod unicode_args;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage: h2-allocs [--requests N] [--in-flight N] [--bare]";

fn main() {
    let args: Vec<String> = unicode_args::or_exit("h2-allocs", USAGE).collect();
    if child::is_server(&args) {
        h2_sides::serve();
        return;
    }
    let mut requests = 50_000u64;
    let mut in_flight = 64;
    let mut bare = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse::<u64>().ok());
        match arg.as_str() {
            "--requests" => requests = value().expect("--requests N"),
            "--in-flight" => in_flight = value().expect("--in-flight N") as usize,
            "--bare" => bare = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => panic!("unknown argument {other:?}"),
        }
    }
    let server = child::ChildServer::start();
    println!(
        "h2-allocs: {in_flight} requests in flight on one HTTP/2 connection, {requests} measured"
    );
    println!("{:<10} {:>12}", "client", "allocs/req");
    let per_request = tickless(server.addr, in_flight, requests, bare);
    println!("{:<10} {:>12.2}", "tickless", per_request);
    let per_request = hyper(server.addr, in_flight, requests);
    println!("{:<10} {:>12.2}", "hyper", per_request);
}

/// Allocations per request over `requests` requests, after as many to warm up.
fn tickless(addr: SocketAddr, in_flight: usize, requests: u64, bare: bool) -> f64 {
    let mut window = h2_sides::TicklessWindow::new(addr, in_flight, bare);
    for _ in 0..requests {
        window.one();
    }
    let before = counting_alloc::allocations();
    for _ in 0..requests {
        window.one();
    }
    let per_request = (counting_alloc::allocations() - before) as f64 / requests as f64;
    window.finish();
    per_request
}

/// As [`tickless`], for hyper: the tasks stop after the measured requests.
fn hyper(addr: SocketAddr, in_flight: usize, requests: u64) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let sender = h2_sides::hyper_sender(&runtime, addr);
    let uri: hyper::Uri = format!("http://{addr}/small").parse().unwrap();
    let total = 2 * requests + in_flight as u64;
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let (mut sender, uri, done) = (sender.clone(), uri.clone(), done.clone());
        tasks.push(runtime.spawn(async move {
            while done.load(Ordering::Relaxed) < total {
                h2_sides::hyper_one(&mut sender, &uri).await.unwrap();
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let wait_for = |n: u64| {
        while done.load(Ordering::Relaxed) < n {
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    wait_for(requests);
    let (before, from) = (counting_alloc::allocations(), done.load(Ordering::Relaxed));
    wait_for(2 * requests);
    let (after, to) = (counting_alloc::allocations(), done.load(Ordering::Relaxed));
    for task in tasks {
        let _ = runtime.block_on(task);
    }
    drop(sender);
    runtime.shutdown_timeout(Duration::from_secs(2));
    (after - before) as f64 / (to - from) as f64
}
