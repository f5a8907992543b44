//! HTTP/2 fan-out: many requests at once, multiplexed as streams of one
//! connection, against a loopback HTTP/2 server the example starts itself
//! (the `h2` crate's server side on a tokio runtime of its own thread — the
//! client needs none). Prints how many answered, how long they took, the
//! protocol, and how many connections the server saw.
//!
//! ```sh
//! cargo run --release --example http2_fanout -- --requests 1000
//! ```
//!
//! The client reaches the cleartext server with prior knowledge
//! (`http2_prior_knowledge`); over TLS, ALPN would pick HTTP/2 by itself.

#[path = "common/unicode_args.rs"]
mod unicode_args;

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickless::WithCauses;

/// Serves every stream `path` back as its body; counts connections.
fn serve() -> std::io::Result<(String, Arc<AtomicUsize>)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}", listener.local_addr()?);
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("a tokio runtime for the server");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("the listener");
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let Ok(mut connection) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((request, mut respond))) = connection.accept().await {
                        let body = bytes::Bytes::from(request.uri().path().to_owned());
                        let response = http::Response::new(());
                        if let Ok(mut send) = respond.send_response(response, false) {
                            let _ = send.send_data(body, true);
                        }
                    }
                });
            }
        });
    });
    Ok((url, connections))
}

const USAGE: &str = "usage: http2_fanout [--requests N]";

fn main() -> ExitCode {
    let mut requests = 200usize;
    let mut args = unicode_args::or_exit("http2_fanout", USAGE);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--requests", Some(n)) => requests = n,
            _ => {
                eprintln!("http2_fanout: bad argument {arg:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(requests) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("http2_fanout: {}", WithCauses(&*error));
            ExitCode::from(1)
        }
    }
}

fn run(requests: usize) -> Result<bool, Box<dyn std::error::Error>> {
    let (url, connections) = serve()?;
    let client = tickless::Client::builder()
        .http2_prior_knowledge()
        .request_timeout(Duration::from_secs(10))
        .use_event_loop_timeouts(true)
        .build()?;
    let started = Instant::now();
    // All in flight at once: one connection, one stream each.
    let futures: Vec<_> = (0..requests)
        .map(|i| client.get(format!("{url}/{i}")).send())
        .collect();
    let mut answered = 0;
    let mut version = None;
    for (i, future) in futures.into_iter().enumerate() {
        let response = future.wait()?;
        version = Some(response.version());
        if response.text().wait()? == format!("/{i}") {
            answered += 1;
        }
    }
    let elapsed = started.elapsed();
    client.close();
    println!("{answered}/{requests} answered in {elapsed:.2?} over {version:?}");
    println!(
        "{} connection(s) opened",
        connections.load(Ordering::Relaxed)
    );
    Ok(answered == requests)
}
