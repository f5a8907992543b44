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

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if child::is_server(&args) {
        serve();
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
                println!("usage: h2-allocs [--requests N] [--in-flight N] [--bare]");
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
    let mut builder = tickless::Client::builder()
        .http2_prior_knowledge()
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO);
    if bare {
        builder = builder.no_user_agent().no_decompress();
    }
    let client = builder.build().unwrap();
    // Parsed once, as hyper's side does: each request clones it.
    let uri: http::Uri = format!("http://{addr}/small").parse().unwrap();
    let get = || client.get(uri.clone()).send();
    let mut window: VecDeque<_> = (0..in_flight).map(|_| get()).collect();
    let one = |window: &mut VecDeque<tickless::ResponseFuture>| {
        let future = window.pop_front().unwrap();
        let body = future.wait().unwrap().bytes().wait().unwrap();
        assert_eq!(body.len(), 13);
        window.push_back(get());
    };
    for _ in 0..requests {
        one(&mut window);
    }
    let before = counting_alloc::allocations();
    for _ in 0..requests {
        one(&mut window);
    }
    let per_request = (counting_alloc::allocations() - before) as f64 / requests as f64;
    for future in window {
        let _ = future.wait().map(|r| r.bytes().wait());
    }
    client.close();
    per_request
}

/// As [`tickless`], for hyper: the tasks stop after the measured requests.
fn hyper(addr: SocketAddr, in_flight: usize, requests: u64) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let sender = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .unwrap();
        tokio::spawn(conn);
        sender
    });
    let uri: hyper::Uri = format!("http://{addr}/small").parse().unwrap();
    let total = 2 * requests + in_flight as u64;
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let (mut sender, uri, done) = (sender.clone(), uri.clone(), done.clone());
        tasks.push(runtime.spawn(async move {
            while done.load(Ordering::Relaxed) < total {
                let request = hyper::Request::get(uri.clone())
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                let body = response.into_body().collect().await.unwrap();
                assert_eq!(body.to_bytes().len(), 13);
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

/// The server of `h2-in-flight`: prints its address, then answers every
/// stream `200` with `Hello, world!`.
fn serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let _ = socket.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((_request, mut respond))) = conn.accept().await {
                    let response = http::Response::builder().status(200).body(()).unwrap();
                    if let Ok(mut send) = respond.send_response(response, false) {
                        let _ = send.send_data(Bytes::from_static(b"Hello, world!"), true);
                    }
                }
            });
        }
    });
}
