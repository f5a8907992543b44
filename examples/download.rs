//! Downloads a body to a file as it arrives, in bounded memory, from a
//! loopback server it starts itself (or from `--url URL`), and prints how
//! many bytes came and how fast.
//!
//! ```sh
//! cargo run --release --example download -- --mib 256 --output /tmp/body.bin
//! cargo run --release --example download -- --url http://127.0.0.1:8080/big --output big.bin
//! ```
//!
//! Without `--output` the file goes to the temporary directory and is
//! removed once counted. The request timeout is off (a download takes as long as it takes); the
//! read timeout (5 s) catches a server that stops sending.

#[path = "common/unicode_args.rs"]
mod unicode_args;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickless::WithCauses;

/// Serves `mib` MiB of zeros, with a Content-Length, on 127.0.0.1.
fn serve(mib: u64) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/download", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let mut writer = &stream;
            let length = mib << 20;
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n");
            let chunk = vec![0u8; 1 << 20];
            let _ = writer.write_all(head.as_bytes());
            for _ in 0..mib {
                if writer.write_all(&chunk).is_err() {
                    break;
                }
            }
        }
    });
    Ok(url)
}

const USAGE: &str = "usage: download [--url URL | --mib N] [--output FILE]";

fn main() -> ExitCode {
    let (mut url, mut mib, mut output) = (None, 64u64, None);
    let mut args = unicode_args::or_exit("download", USAGE);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--url", Some(value)) => url = Some(value),
            ("--mib", Some(value)) => match value.parse() {
                Ok(n) => mib = n,
                Err(_) => return usage(&format!("--mib: not a number: {value:?}")),
            },
            ("--output", Some(value)) => output = Some(value),
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    match run(url, mib, output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("download: {}", WithCauses(&*error));
            ExitCode::from(1)
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("download: {message}\n{USAGE}");
    ExitCode::from(2)
}

fn run(
    url: Option<String>,
    mib: u64,
    output: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let url = match url {
        Some(url) => url,
        None => serve(mib)?,
    };
    let keep = output.is_some();
    let path = output.unwrap_or_else(|| {
        std::env::temp_dir()
            .join(format!("tickless-download-{}.bin", std::process::id()))
            .display()
            .to_string()
    });
    let client = tickless::Client::builder()
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::from_secs(5))
        .build()?;
    let started = Instant::now();
    let mut response = client.get(url.as_str()).send().wait()?.error_for_status()?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    // The body is a std::io::Read: copied as it arrives, a window at a time.
    let bytes = std::io::copy(response.body_mut(), &mut file)?;
    file.flush()?;
    let elapsed = started.elapsed();
    client.close();
    println!(
        "{bytes} bytes to {path} in {elapsed:.2?} ({:.0} MiB/s)",
        bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()
    );
    if !keep {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
