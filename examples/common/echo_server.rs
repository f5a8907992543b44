//! The loopback server the examples start for themselves, so they run as
//! they are: keep-alive HTTP/1.1 on 127.0.0.1, a thread per connection,
//! answering every request with its path (without the leading `/`), and
//! `/slow` only after a second. Requests are assumed to have no body (the
//! examples send only GETs).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A running server.
pub struct EchoServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Connections it has accepted.
    pub opened: Arc<AtomicUsize>,
}

/// Starts the server on a port of its own.
pub fn start() -> std::io::Result<EchoServer> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let opened = Arc::new(AtomicUsize::new(0));
    let counter = opened.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || serve(stream));
        }
    });
    Ok(EchoServer { addr, opened })
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
        // Skip the headers up to the blank line.
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        if path == "/slow" {
            std::thread::sleep(Duration::from_secs(1));
        }
        let body = path.trim_start_matches('/');
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
