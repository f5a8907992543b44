//! Uploads a file as a streamed request body to a loopback server it starts
//! itself (or to `--url URL`), which answers with the number of bytes it
//! read; prints that and how fast.
//!
//! ```sh
//! cargo run --release --example upload -- --mib 256
//! cargo run --release --example upload -- --file big.bin --url http://127.0.0.1:8080/put
//! ```
//!
//! Without `--file`, a file of `--mib` MiB is written to the temporary
//! directory first (and removed after). The body goes with its
//! `Content-Length`, from a pump thread of its own, never more than a
//! window ahead of the socket.

#[path = "common/unicode_args.rs"]
mod unicode_args;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickless::WithCauses;

/// Reads each request's body (by its Content-Length) and answers with the
/// number of bytes read.
fn serve() -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/upload", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut length = 0u64;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                line.clear();
            }
            let read = std::io::copy(&mut reader.take(length), &mut std::io::sink()).unwrap_or(0);
            let body = read.to_string();
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = (&stream).write_all(answer.as_bytes());
        }
    });
    Ok(url)
}

const USAGE: &str = "usage: upload [--url URL] [--file FILE | --mib N]";

fn main() -> ExitCode {
    let (mut url, mut mib, mut file) = (None, 64u64, None);
    let mut args = unicode_args::or_exit("upload", USAGE);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--url", Some(value)) => url = Some(value),
            ("--file", Some(value)) => file = Some(value),
            ("--mib", Some(value)) => match value.parse() {
                Ok(n) => mib = n,
                Err(_) => return usage(&format!("--mib: not a number: {value:?}")),
            },
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    match run(url, mib, file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("upload: {}", WithCauses(&*error));
            ExitCode::from(1)
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("upload: {message}\n{USAGE}");
    ExitCode::from(2)
}

/// A file of `mib` MiB in the temporary directory, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run(
    url: Option<String>,
    mib: u64,
    file: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let url = match url {
        Some(url) => url,
        None => serve()?,
    };
    let (path, _scratch) = match file {
        Some(path) => (std::path::PathBuf::from(path), None),
        None => {
            let path =
                std::env::temp_dir().join(format!("tickless-upload-{}.bin", std::process::id()));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
            let chunk = vec![7u8; 1 << 20];
            for _ in 0..mib {
                out.write_all(&chunk)?;
            }
            out.flush()?;
            (path.clone(), Some(Scratch(path)))
        }
    };
    let client = tickless::Client::builder()
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::from_secs(5))
        .build()?;
    let started = Instant::now();
    let body = tickless::Upload::from_file(std::fs::File::open(&path)?)?;
    let length = body.length().unwrap_or(0);
    let answer = client
        .put(url.as_str())
        .body(body)
        .send()
        .wait()?
        .error_for_status()?;
    let text = answer.text().wait()?;
    let elapsed = started.elapsed();
    client.close();
    println!(
        "{length} bytes sent, the server read {text}, in {elapsed:.2?} ({:.0} MiB/s)",
        length as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()
    );
    if text != length.to_string() {
        return Err(format!("the server read {text} bytes of {length}").into());
    }
    Ok(())
}
