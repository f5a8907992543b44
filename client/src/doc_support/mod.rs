//! Loopback servers for the rustdoc examples, so that each example runs as
//! a doctest against a server it starts itself. Not part of the API: hidden
//! from the documentation, and free to change.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "http2")]
mod http2;
#[cfg(feature = "http2")]
pub use http2::serve_h2;

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

/// A forward HTTP proxy on `127.0.0.1` for plain `http://` requests (the
/// absolute form a client sends a proxy): each request goes to its origin
/// in origin form, and the answer comes back with `Via: 1.1 doc-proxy`
/// added; keep-alive on both sides. Returns its URL, `http://127.0.0.1:PORT`.
pub fn forward_proxy() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = relay(client);
            });
        }
    });
    url
}

/// One head (up to its blank line) and the body its `Content-Length` says.
fn read_message(reader: &mut impl BufRead) -> std::io::Result<Option<(Vec<String>, Vec<u8>)>> {
    let mut lines = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        lines.push(line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some((lines, body)))
}

fn relay(client: TcpStream) -> std::io::Result<()> {
    let mut to_client = client.try_clone()?;
    let mut from_client = BufReader::new(client);
    while let Some((mut head, body)) = read_message(&mut from_client)? {
        // `GET http://host:port/path HTTP/1.1` → to host:port, `GET /path`.
        let request_line = head[0].clone();
        let mut parts = request_line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let rest = target.strip_prefix("http://").unwrap_or(target);
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let path = if path.is_empty() { "/" } else { path };
        head[0] = format!("{method} {path} HTTP/1.1");
        head.retain(|line| !line.to_ascii_lowercase().starts_with("proxy-"));
        let origin = TcpStream::connect(authority)?;
        let mut to_origin = origin.try_clone()?;
        to_origin.write_all(format!("{}\r\n\r\n", head.join("\r\n")).as_bytes())?;
        to_origin.write_all(&body)?;
        let Some((mut answer, answer_body)) = read_message(&mut BufReader::new(origin))? else {
            return Ok(());
        };
        answer.insert(1, "Via: 1.1 doc-proxy".to_owned());
        to_client.write_all(format!("{}\r\n\r\n", answer.join("\r\n")).as_bytes())?;
        to_client.write_all(&answer_body)?;
    }
    Ok(())
}
