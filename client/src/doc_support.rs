//! Loopback servers for the rustdoc examples, so that each example runs as
//! a doctest against a server it starts itself. Not part of the API: hidden
//! from the documentation, and free to change.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// What a server answers a request with, from its method, target and body.
type Responder = dyn Fn(&str, &str, &[u8]) -> Vec<u8> + Send + Sync;

/// A server on `127.0.0.1` that answers every request with
/// `respond(method, target, body)` (a whole HTTP/1.1 response), keep-alive;
/// returns its base URL, `http://127.0.0.1:PORT`. Its threads live as long
/// as the process.
pub fn serve(respond: impl Fn(&str, &str, &[u8]) -> Vec<u8> + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let respond = Arc::new(respond);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let respond = respond.clone();
            std::thread::spawn(move || answer(stream, &*respond));
        }
    });
    url
}

/// [`serve`] with a `200 OK` whose body is `text`, for every request.
pub fn serve_text(text: &'static str) -> String {
    serve(move |_, _, _| ok(text))
}

/// A server that accepts and reads requests and never answers.
pub fn silent() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut sink = [0; 1024];
                while stream.read(&mut sink).is_ok_and(|n| n > 0) {}
            });
        }
    });
    url
}

/// `200 OK` with `text` as its body.
pub fn ok(text: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

fn answer(stream: TcpStream, respond: &Responder) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut writer = match stream.try_clone() {
        Ok(writer) => writer,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).map_or(true, |n| n == 0) {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("").to_owned();
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).map_or(true, |n| n == 0) {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if writer.write_all(&respond(&method, &target, &body)).is_err() {
            return;
        }
    }
}
