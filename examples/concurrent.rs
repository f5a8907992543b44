//! Sends many requests at once against a loopback server it starts itself,
//! then prints how many succeeded, how long they took, and how many
//! connections the server saw opened.
//!
//! ```sh
//! cargo run --release --example concurrent
//! cargo run --release --example concurrent -- --requests 5000 --connections 100
//! ```
//!
//! `--connections` caps the client's connections to the server
//! (`max_connections_per_host`, default 64): requests beyond it wait for a
//! connection to come back to the pool, within their request timeout. The
//! cap keeps the example within the usual limit of 1024 open files, since
//! both ends of every connection live in this one process.

#[path = "common/echo_server.rs"]
mod echo_server;

#[path = "common/unicode_args.rs"]
mod unicode_args;

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tickless::WithCauses;

const USAGE: &str = "usage: concurrent [--requests N] [--connections N]";

fn main() -> ExitCode {
    let (requests, connections) = match parse_args() {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("concurrent: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(requests, connections) {
        Ok(all_ok) if all_ok => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(error) => {
            eprintln!("concurrent: {}", WithCauses(&*error));
            ExitCode::from(1)
        }
    }
}

fn parse_args() -> Result<(usize, usize), String> {
    let (mut requests, mut connections) = (1000, 64);
    let mut args = unicode_args::or_exit("concurrent", USAGE);
    while let Some(arg) = args.next() {
        let target = match arg.as_str() {
            "--requests" => &mut requests,
            "--connections" => &mut connections,
            other => return Err(format!("unknown argument {other:?}")),
        };
        let value = args.next().ok_or(format!("{arg} needs a number"))?;
        *target = value
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!("{arg}: not a positive number: {value:?}"))?;
    }
    Ok((requests, connections))
}

fn run(requests: usize, connections: usize) -> Result<bool, Box<dyn std::error::Error>> {
    let server = echo_server::start()?;
    let addr = server.addr;
    let client = tickless::Client::builder()
        .max_connections_per_host(connections)
        .request_timeout(Duration::from_secs(30))
        .build()?;

    let started = Instant::now();
    // Every request is in flight before the first is waited for.
    let futures: Vec<_> = (0..requests)
        .map(|i| client.get(format!("http://{addr}/{i}")).send())
        .collect();
    let mut succeeded = 0;
    let mut failures = Vec::new();
    for (i, future) in futures.into_iter().enumerate() {
        let outcome = future
            .wait()
            .and_then(|response| Ok((response.status(), response.text().wait()?)));
        match outcome {
            Ok((status, text)) if status == 200 && text == i.to_string() => succeeded += 1,
            Ok((status, text)) => {
                failures.push(format!("request {i}: unexpected {status} {text:?}"))
            }
            Err(error) => failures.push(format!("request {i}: {}", WithCauses(&error))),
        }
    }
    let elapsed = started.elapsed();
    client.close();

    println!("{succeeded}/{requests} succeeded in {elapsed:.2?}");
    println!(
        "{} connections opened (limit {connections})",
        server.opened.load(Ordering::Relaxed)
    );
    for failure in failures.iter().take(10) {
        eprintln!("{failure}");
    }
    Ok(succeeded == requests)
}
