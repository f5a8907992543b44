//! Tests of the real servers in tests/support/real.rs: each starts, speaks
//! its protocol and stops, with no client of ours in the way — hand-written
//! HTTP/1.1, HTTP/2 frames and SOCKS5 over `std::net::TcpStream`, and rustls
//! for TLS. `scripts/test` installs the servers; without them these fail
//! with a message saying so.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::real::{basic_auth, Httpbin, Hypercorn, Microsocks, Nginx, PemFiles, Tinyproxy};
use support::{ok, tls, TestServer};

/// Bound on every read: generous, for a loaded 2-core machine.
const IO_WAIT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------ HTTP/1.1 ---

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 connection over any stream, keep-alive capable: responses
/// are framed by Content-Length or chunked, else read to EOF.
struct Http1<S> {
    stream: S,
    buf: Vec<u8>,
}

impl<S: Read + Write> Http1<S> {
    fn new(stream: S) -> Self {
        Http1 {
            stream,
            buf: Vec::new(),
        }
    }

    fn send(&mut self, request: &[u8]) -> Response {
        self.stream.write_all(request).expect("write request");
        self.stream.flush().expect("flush request");
        self.read_response()
    }

    /// Read more into the buffer; false at EOF.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) => panic!("read response: {e}"),
        }
    }

    fn read_head(&mut self) -> (u16, Vec<(String, String)>) {
        let end = loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                break end;
            }
            assert!(
                self.fill(),
                "EOF before the end of the head: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("UTF-8 head");
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
            .collect();
        (status, headers)
    }

    fn read_response(&mut self) -> Response {
        let (status, headers) = self.read_head();
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let chunked = response
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let length = response
            .header("content-length")
            .map(|v| v.parse::<usize>().expect("Content-Length"));
        if status == 204 || status == 304 {
            return response;
        }
        if chunked {
            response.body = self.read_chunked();
        } else if let Some(length) = length {
            while self.buf.len() < length {
                assert!(
                    self.fill(),
                    "EOF {} bytes into a body of {length}",
                    self.buf.len()
                );
            }
            response.body = self.buf.drain(..length).collect();
        } else {
            while self.fill() {}
            response.body = std::mem::take(&mut self.buf);
        }
        response
    }

    fn read_line(&mut self) -> String {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8(self.buf[..end].to_vec()).expect("UTF-8 line");
                self.buf.drain(..end + 2);
                return line;
            }
            assert!(self.fill(), "EOF inside a chunked body");
        }
    }

    fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line();
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
            if size == 0 {
                // Trailers, up to the blank line.
                while !self.read_line().is_empty() {}
                return body;
            }
            while self.buf.len() < size + 2 {
                assert!(self.fill(), "EOF inside a chunk");
            }
            body.extend(self.buf.drain(..size));
            assert_eq!(self.buf.drain(..2).collect::<Vec<_>>(), b"\r\n");
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, IO_WAIT).expect("connect");
    stream.set_read_timeout(Some(IO_WAIT)).unwrap();
    stream.set_write_timeout(Some(IO_WAIT)).unwrap();
    stream
}

fn get(addr: SocketAddr, path: &str, extra: &str) -> Response {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
    Http1::new(connect(addr)).send(request.as_bytes())
}

// -------------------------------------------------------------- HTTP/2 ---

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn read_frame(stream: &mut impl Read) -> (u8, u8, u32, Vec<u8>) {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).expect("read frame header");
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).expect("read frame payload");
    (head[3], head[4], id, payload)
}

/// An HPACK literal without indexing, name from the static table, value
/// as is (no Huffman; values under 127 bytes).
fn literal(name_index: u8, value: &str) -> Vec<u8> {
    assert!(value.len() < 127);
    let mut out = vec![name_index, value.len() as u8];
    out.extend_from_slice(value.as_bytes());
    out
}

/// `:status` from the first field of a response header block: an indexed
/// static entry (what nginx and Python's hpack send for these codes) or a
/// literal with the `:status` name and a plain value.
fn status_of(block: &[u8]) -> u16 {
    match block[0] {
        0x88 => 200,
        0x89 => 204,
        0x8a => 206,
        0x8b => 304,
        0x8c => 400,
        0x8d => 404,
        0x8e => 500,
        0x08 | 0x18 | 0x48 if block[1] & 0x80 == 0 => {
            let len = block[1] as usize;
            std::str::from_utf8(&block[2..2 + len])
                .expect("status digits")
                .parse()
                .expect("status")
        }
        other => panic!("unexpected first header field 0x{other:02x} in {block:02x?}"),
    }
}

/// Speak HTTP/2 on a fresh stream (cleartext prior knowledge, or TLS with h2
/// negotiated): preface, check that the server's first frame is SETTINGS,
/// then GET `path` on stream 1. Returns the status and the body.
fn h2_get(
    stream: &mut (impl Read + Write),
    scheme: &str,
    authority: &str,
    path: &str,
) -> (u16, Vec<u8>) {
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    let mut block = vec![0x82, if scheme == "https" { 0x87 } else { 0x86 }];
    block.extend(literal(0x04, path));
    block.extend(literal(0x01, authority));
    out.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &block));
    stream.write_all(&out).expect("write preface and request");
    stream.flush().expect("flush");

    let (kind, flags, id, _) = read_frame(stream);
    assert_eq!(
        (kind, id),
        (SETTINGS, 0),
        "the server's preface is a SETTINGS frame"
    );
    assert_eq!(flags & ACK, 0, "the server's first SETTINGS is not an ACK");
    stream
        .write_all(&frame(SETTINGS, ACK, 0, &[]))
        .expect("ack settings");

    let mut status = None;
    let mut body = Vec::new();
    loop {
        let (kind, flags, id, payload) = read_frame(stream);
        match kind {
            HEADERS if id == 1 => {
                let mut block = &payload[..];
                if flags & PADDED != 0 {
                    let pad = block[0] as usize;
                    block = &block[1..block.len() - pad];
                }
                if flags & PRIORITY != 0 {
                    block = &block[5..];
                }
                assert!(flags & END_HEADERS != 0, "headers in one frame");
                status.get_or_insert_with(|| status_of(block));
                if flags & END_STREAM != 0 {
                    break;
                }
            }
            DATA if id == 1 => {
                let mut data = &payload[..];
                if flags & PADDED != 0 {
                    let pad = data[0] as usize;
                    data = &data[1..data.len() - pad];
                }
                body.extend_from_slice(data);
                if flags & END_STREAM != 0 {
                    break;
                }
            }
            RST_STREAM | GOAWAY => {
                panic!("the server ended the exchange: frame {kind}, {payload:02x?}")
            }
            // SETTINGS ACK, WINDOW_UPDATE, PING, …
            _ => {}
        }
    }
    (status.expect("a HEADERS frame"), body)
}

// ----------------------------------------------------------------- TLS ---

/// A TLS client stream to `addr` trusting the test CA, offering `alpn`,
/// with the handshake done.
fn tls_connect(
    addr: SocketAddr,
    alpn: &[&[u8]],
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            tls::certs().ca_der.clone(),
        ))
        .expect("add CA");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client connection");
    let mut tls = rustls::StreamOwned::new(conn, connect(addr));
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .expect("TLS handshake with the test certificate");
    }
    tls
}

fn alpn(tls: &rustls::StreamOwned<rustls::ClientConnection, TcpStream>) -> Option<String> {
    tls.conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned())
}

/// Poll `f` until it holds or `IO_WAIT` passes.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + IO_WAIT;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes whose process group is `pgid` (from /proc).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces and parens.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) {
            members.push(pid);
        }
    }
    members
}

// --------------------------------------------------------------- nginx ---

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz";

fn big_text() -> Vec<u8> {
    (0..2000)
        .flat_map(|i| format!("line {i} of a file nginx serves\n").into_bytes())
        .collect()
}

#[test]
fn nginx_serves_files_plain_gzip_and_chunked_over_http1() {
    let nginx = Nginx::start();
    nginx.write_file("hello.txt", "hello from nginx\n");
    let big = big_text();
    nginx.write_file("dir/big.txt", &big);
    let addr = nginx.http_addr();

    let hello = get(addr, "/hello.txt", "");
    assert_eq!(hello.status, 200);
    assert_eq!(hello.text(), "hello from nginx\n");
    assert_eq!(hello.header("content-length"), Some("17"));
    assert_eq!(hello.header("content-type"), Some("text/plain"));

    assert_eq!(get(addr, "/missing.txt", "").status, 404);

    let gzip = get(addr, "/gzip/dir/big.txt", "Accept-Encoding: gzip\r\n");
    assert_eq!(gzip.status, 200);
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
    assert_eq!(gzip.header("transfer-encoding"), Some("chunked"));
    assert!(gzip.body.starts_with(&[0x1f, 0x8b]), "a gzip stream");
    assert!(
        gzip.body.len() < big.len() / 4,
        "compressed: {} bytes",
        gzip.body.len()
    );

    // Without Accept-Encoding, the same location sends identity.
    let identity = get(addr, "/gzip/dir/big.txt", "");
    assert_eq!(identity.header("content-encoding"), None);
    assert_eq!(identity.body, big);

    let chunked = get(addr, "/chunked/dir/big.txt", "");
    assert_eq!(chunked.status, 200);
    assert_eq!(chunked.header("transfer-encoding"), Some("chunked"));
    assert_eq!(chunked.header("content-length"), None);
    assert_eq!(chunked.body, big, "the chunked body decodes to the file");

    let slow = get(addr, "/slow/hello.txt", "");
    assert_eq!(
        (slow.status, slow.text().as_str()),
        (200, "hello from nginx\n")
    );

    // Keep-alive: two requests on one connection, and the access log says so.
    let mut conn = Http1::new(connect(addr));
    let host = format!("Host: {addr}\r\n");
    let first = conn.send(format!("GET /hello.txt HTTP/1.1\r\n{host}\r\n").as_bytes());
    let second = conn.send(format!("GET /dir/big.txt HTTP/1.1\r\n{host}\r\n").as_bytes());
    assert_eq!((first.status, second.status), (200, 200));
    assert_eq!(second.body, big);
    let reused = |log: &str| {
        let lines: Vec<Vec<&str>> = log
            .lines()
            .map(|l| l.split(' ').collect())
            .filter(|f: &Vec<&str>| f.get(4) == Some(&"/dir/big.txt") && f[1] == "2")
            .collect();
        !lines.is_empty()
    };
    assert!(
        eventually(|| reused(&nginx.access_log())),
        "the access log shows /dir/big.txt as the 2nd request of a connection:\n{}",
        nginx.access_log()
    );
}

#[test]
fn nginx_speaks_h2c_with_prior_knowledge() {
    let nginx = Nginx::start();
    nginx.write_file("hello.txt", "hello over h2c\n");
    let addr = nginx.h2c_addr();

    let (status, body) = h2_get(&mut connect(addr), "http", &addr.to_string(), "/hello.txt");
    assert_eq!(status, 200);
    assert_eq!(body, b"hello over h2c\n");

    let (status, _) = h2_get(&mut connect(addr), "http", &addr.to_string(), "/missing");
    assert_eq!(status, 404);

    assert!(
        eventually(|| nginx.access_log().contains("HTTP/2.0 GET /hello.txt 200")),
        "access log: {}",
        nginx.access_log()
    );
}

#[test]
fn nginx_tls_negotiates_h2_or_http1_by_alpn() {
    let pem = PemFiles::of(&tls::certs().valid);
    let nginx = Nginx::start_tls(&pem.cert(), &pem.key());
    drop(pem); // read at start
    nginx.write_file("hello.txt", "hello over TLS\n");
    let addr = nginx.tls_addr();

    let mut h2 = tls_connect(addr, &[b"h2", b"http/1.1"]);
    assert_eq!(alpn(&h2).as_deref(), Some("h2"));
    let (status, body) = h2_get(&mut h2, "https", "localhost", "/hello.txt");
    assert_eq!((status, body.as_slice()), (200, &b"hello over TLS\n"[..]));

    let h1 = tls_connect(addr, &[b"http/1.1"]);
    assert_eq!(alpn(&h1).as_deref(), Some("http/1.1"));
    let response = Http1::new(h1)
        .send(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "hello over TLS\n");

    // The plain port is still HTTP/1.1.
    assert_eq!(get(nginx.http_addr(), "/hello.txt", "").status, 200);
}

// ----------------------------------------------------------- tinyproxy ---

/// An origin that says which target it was asked for, and whether a Via
/// header came with it.
fn origin() -> TestServer {
    TestServer::respond(|request| {
        let via = request.header("via").unwrap_or("none");
        ok(&format!(
            "origin: {} {} via={via}",
            request.method, request.target
        ))
    })
}

/// Send CONNECT to `proxy` for `target`; the proxy's answer head, and the
/// stream (a tunnel on 200).
fn connect_through(proxy: SocketAddr, target: SocketAddr, extra: &str) -> (u16, Http1<TcpStream>) {
    let mut conn = Http1::new(connect(proxy));
    let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n");
    conn.stream
        .write_all(request.as_bytes())
        .expect("write CONNECT");
    let (status, _) = conn.read_head();
    (status, conn)
}

#[test]
fn tinyproxy_forwards_absolute_form_and_tunnels_connect() {
    let origin = origin();
    let proxy = Tinyproxy::start();
    let target = origin.addr();

    let forwarded = get(proxy.addr(), &format!("http://{target}/through-proxy"), "");
    assert_eq!(forwarded.status, 200, "{}", forwarded.text());
    let text = forwarded.text();
    assert!(
        text.starts_with("origin: GET /through-proxy via="),
        "{text}"
    );
    assert!(
        text.contains("tinyproxy"),
        "tinyproxy adds its Via header: {text}"
    );

    let (status, mut tunnel) = connect_through(proxy.addr(), target, "");
    assert_eq!(status, 200);
    let tunnelled = tunnel.send(
        format!("GET /tunnelled HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(tunnelled.status, 200);
    assert_eq!(tunnelled.text(), "origin: GET /tunnelled via=none");

    let seen: Vec<String> = origin.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(seen, ["/through-proxy", "/tunnelled"]);
}

#[test]
fn tinyproxy_basic_auth_answers_407_without_credentials_401_with_wrong_ones() {
    let origin = origin();
    let proxy = Tinyproxy::with_basic_auth("tester", "s3cret");
    let url = format!("http://{}/private", origin.addr());

    let denied = get(proxy.addr(), &url, "");
    assert_eq!(denied.status, 407, "{}", denied.text());
    assert!(
        denied
            .header("proxy-authenticate")
            .is_some_and(|v| v.starts_with("Basic")),
        "{:?}",
        denied.headers
    );
    // tinyproxy 1.11 answers wrong credentials with 401, not 407.
    let wrong = format!("Proxy-Authorization: {}\r\n", basic_auth("tester", "wrong"));
    assert_eq!(get(proxy.addr(), &url, &wrong).status, 401);

    let right = format!(
        "Proxy-Authorization: {}\r\n",
        basic_auth("tester", "s3cret")
    );
    let allowed = get(proxy.addr(), &url, &right);
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    assert!(allowed.text().starts_with("origin: GET /private"));

    let (status, _) = connect_through(proxy.addr(), origin.addr(), "");
    assert_eq!(status, 407);
    let (status, _) = connect_through(proxy.addr(), origin.addr(), &right);
    assert_eq!(status, 200);
}

// ---------------------------------------------------------- microsocks ---

fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    stream.read_exact(&mut buf).expect("read SOCKS reply");
    buf
}

/// SOCKS5 CONNECT (RFC 1928) to an IPv4 target on an authenticated (or
/// auth-free) stream; the reply code.
fn socks_connect(stream: &mut TcpStream, target: SocketAddr) -> u8 {
    let SocketAddr::V4(v4) = target else {
        panic!("IPv4 target")
    };
    let mut request = vec![5, 1, 0, 1];
    request.extend_from_slice(&v4.ip().octets());
    request.extend_from_slice(&v4.port().to_be_bytes());
    stream.write_all(&request).expect("write SOCKS request");
    let reply = read_n(stream, 10);
    assert_eq!(
        (reply[0], reply[3]),
        (5, 1),
        "a SOCKS5 reply with an IPv4 address"
    );
    reply[1]
}

#[test]
fn microsocks_connects_without_auth() {
    let origin = origin();
    let socks = Microsocks::start();

    let mut stream = connect(socks.addr());
    stream.write_all(&[5, 1, 0]).unwrap();
    assert_eq!(read_n(&mut stream, 2), [5, 0], "no authentication required");
    assert_eq!(socks_connect(&mut stream, origin.addr()), 0, "succeeded");
    let response = Http1::new(stream).send(
        format!(
            "GET /over-socks HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            origin.addr()
        )
        .as_bytes(),
    );
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "origin: GET /over-socks via=none");
}

#[test]
fn microsocks_checks_username_and_password() {
    let origin = origin();
    let socks = Microsocks::with_auth("tester", "s3cret");

    // Offering only "no authentication": refused (0xFF, no acceptable method).
    let mut stream = connect(socks.addr());
    stream.write_all(&[5, 1, 0]).unwrap();
    assert_eq!(read_n(&mut stream, 2), [5, 0xff]);

    let login = |password: &str| {
        let mut stream = connect(socks.addr());
        stream.write_all(&[5, 1, 2]).unwrap();
        assert_eq!(read_n(&mut stream, 2), [5, 2], "username/password chosen");
        let mut auth = vec![1, 6];
        auth.extend_from_slice(b"tester");
        auth.push(password.len() as u8);
        auth.extend_from_slice(password.as_bytes());
        stream.write_all(&auth).unwrap();
        let reply = read_n(&mut stream, 2);
        assert_eq!(reply[0], 1, "RFC 1929 reply version");
        (reply[1], stream)
    };
    let (status, _) = login("wrong");
    assert_ne!(status, 0, "a wrong password fails");

    let (status, mut stream) = login("s3cret");
    assert_eq!(status, 0, "the right password succeeds");
    assert_eq!(socks_connect(&mut stream, origin.addr()), 0);
    let response = Http1::new(stream).send(
        format!(
            "GET /authed HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            origin.addr()
        )
        .as_bytes(),
    );
    assert_eq!(response.text(), "origin: GET /authed via=none");
}

// ------------------------------------------------------------- httpbin ---

#[test]
fn httpbin_redirects_codings_cookies_and_bodies() {
    let httpbin = Httpbin::start();
    let addr = httpbin.addr();

    // Follow /redirect/2 by hand: two hops, then /get.
    let mut path = "/redirect/2".to_string();
    let mut hops = 0;
    let last = loop {
        let response = get(addr, &path, "");
        if response.status != 302 {
            break response;
        }
        hops += 1;
        assert!(hops <= 5, "too many redirects");
        let location = response.header("location").expect("Location").to_string();
        path = match location.strip_prefix(&format!("http://{addr}")) {
            Some(rest) => rest.to_string(),
            None => location,
        };
        assert!(
            path.starts_with('/'),
            "a redirect on the same server: {path}"
        );
    };
    assert_eq!(hops, 2);
    assert_eq!(last.status, 200);
    assert!(
        last.text().contains("\"url\": \"http://"),
        "{}",
        last.text()
    );

    let gzip = get(addr, "/gzip", "Accept-Encoding: gzip\r\n");
    assert_eq!(gzip.status, 200);
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
    assert!(gzip.body.starts_with(&[0x1f, 0x8b]));

    let set = get(addr, "/cookies/set?flavour=oat", "");
    assert_eq!(set.status, 302);
    let cookie = set.header("set-cookie").expect("Set-Cookie");
    assert!(cookie.starts_with("flavour=oat;"), "{cookie}");
    let cookies = get(addr, "/cookies", "Cookie: flavour=oat\r\n");
    assert!(
        cookies.text().contains("\"flavour\": \"oat\""),
        "{}",
        cookies.text()
    );

    assert_eq!(get(addr, "/status/418", "").status, 418);

    // Keep-alive (gthread worker): a POST and a GET on one connection.
    let mut conn = Http1::new(connect(addr));
    let post = conn.send(
        format!(
            "POST /post HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
        )
        .as_bytes(),
    );
    assert_eq!(post.status, 200);
    assert!(
        post.text().contains("\"data\": \"hello\""),
        "{}",
        post.text()
    );
    let bytes = conn.send(format!("GET /bytes/64 HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes());
    assert_eq!((bytes.status, bytes.body.len()), (200, 64));
}

// ----------------------------------------------------------- hypercorn ---

#[test]
fn hypercorn_routes_over_http1() {
    let hypercorn = Hypercorn::start();
    let addr = hypercorn.plain_addr();

    let root = get(addr, "/", "");
    assert_eq!(root.status, 200);
    assert_eq!(root.text(), "hello from hypercorn\n");
    assert_eq!(root.header("x-http-version"), Some("1.1"));

    let bytes = get(addr, "/bytes/60", "");
    assert_eq!(
        bytes.body,
        ALPHABET
            .iter()
            .cycle()
            .take(60)
            .copied()
            .collect::<Vec<u8>>()
    );

    let delayed = get(addr, "/delay/50", "");
    assert_eq!(delayed.text(), "delayed 50 ms\n");

    let stream = get(addr, "/stream/3", "");
    assert_eq!(stream.header("transfer-encoding"), Some("chunked"));
    assert_eq!(stream.text(), "chunk 0\nchunk 1\nchunk 2\n");

    let echo = Http1::new(connect(addr)).send(
        format!(
            "POST /echo HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/x-ping\r\nContent-Length: 4\r\nConnection: close\r\n\r\nping"
        )
        .as_bytes(),
    );
    assert_eq!(echo.text(), "ping");
    assert_eq!(echo.header("content-type"), Some("text/x-ping"));

    assert_eq!(get(addr, "/status/503", "").status, 503);
    assert_eq!(get(addr, "/nowhere", "").status, 404);

    // /stall sends nothing: not even a head within a second.
    let mut stall = connect(addr);
    stall
        .write_all(format!("GET /stall HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    stall
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut byte = [0u8; 1];
    match stall.read(&mut byte) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("/stall answered: {other:?}"),
    }
}

#[test]
fn hypercorn_speaks_h2c_and_h2_over_tls() {
    let pem = PemFiles::of(&tls::certs().valid);
    let hypercorn = Hypercorn::start_tls(&pem.cert(), &pem.key());
    let plain = hypercorn.plain_addr();

    let (status, body) = h2_get(
        &mut connect(plain),
        "http",
        &plain.to_string(),
        "/bytes/100",
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        ALPHABET
            .iter()
            .cycle()
            .take(100)
            .copied()
            .collect::<Vec<u8>>()
    );

    let mut h2 = tls_connect(hypercorn.tls_addr(), &[b"h2", b"http/1.1"]);
    assert_eq!(alpn(&h2).as_deref(), Some("h2"));
    let (status, body) = h2_get(&mut h2, "https", "localhost", "/stream/4");
    assert_eq!(status, 200);
    assert_eq!(body, b"chunk 0\nchunk 1\nchunk 2\nchunk 3\n");

    let h1 = tls_connect(hypercorn.tls_addr(), &[b"http/1.1"]);
    assert_eq!(alpn(&h1).as_deref(), Some("http/1.1"));
    let response =
        Http1::new(h1).send(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("x-http-version"), Some("1.1"));
}

// ------------------------------------------------------------ teardown ---

#[test]
fn dropping_a_server_leaves_no_process_behind() {
    // gunicorn: a master and its worker, in the server's process group.
    let httpbin = Httpbin::start();
    let pgid = httpbin.pid();
    let members = group_members(pgid);
    assert!(members.len() >= 2, "master and worker: {members:?}");
    drop(httpbin);
    assert_eq!(
        group_members(pgid),
        Vec::<u32>::new(),
        "all of gunicorn is gone"
    );

    let nginx = Nginx::start();
    let pid = nginx.pid();
    let addr = nginx.http_addr();
    assert_eq!(group_members(pid), [pid], "one nginx process");
    drop(nginx);
    assert_eq!(group_members(pid), Vec::<u32>::new());
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "the port is closed"
    );

    let proxy = Tinyproxy::start();
    let socks = Microsocks::start();
    let hypercorn = Hypercorn::start();
    let pids = [proxy.pid(), socks.pid(), hypercorn.pid()];
    drop((proxy, socks, hypercorn));
    for pid in pids {
        assert_eq!(group_members(pid), Vec::<u32>::new());
    }
}
