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

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let (requests, connections) = match parse_args() {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("concurrent: {message}\nusage: concurrent [--requests N] [--connections N]");
            return ExitCode::from(2);
        }
    };
    match run(requests, connections) {
        Ok(all_ok) if all_ok => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(error) => {
            eprintln!("concurrent: {error}");
            ExitCode::from(1)
        }
    }
}

fn parse_args() -> Result<(usize, usize), String> {
    let (mut requests, mut connections) = (1000, 64);
    let mut args = std::env::args().skip(1);
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
    let opened = Arc::new(AtomicUsize::new(0));
    let addr = start_server(opened.clone())?;
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
        match future.wait() {
            Ok(response) if response.status() == 200 && response.text() == i.to_string() => {
                succeeded += 1
            }
            Ok(response) => failures.push(format!("request {i}: unexpected {response:?}")),
            Err(error) => failures.push(format!("request {i}: {error}")),
        }
    }
    let elapsed = started.elapsed();
    client.close();

    println!("{succeeded}/{requests} succeeded in {elapsed:.2?}");
    println!(
        "{} connections opened (limit {connections})",
        opened.load(Ordering::Relaxed)
    );
    for failure in failures.iter().take(10) {
        eprintln!("{failure}");
    }
    Ok(succeeded == requests)
}

/// A tiny keep-alive HTTP/1.1 server on 127.0.0.1, one thread per
/// connection, answering every request with its path (without the leading
/// `/`). Counts the connections it accepts. Requests are assumed to have
/// no body (this example sends only GETs).
fn start_server(opened: Arc<AtomicUsize>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            opened.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || serve(stream));
        }
    });
    Ok(addr)
}

fn serve(stream: TcpStream) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        let body = path.trim_start_matches('/');
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
