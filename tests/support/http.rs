//! Minimal HTTP/1.1 request parsing and response building (test code, std only).

use std::io::{self, Read};
use std::net::TcpStream;

/// Largest request head the parser accepts before calling the request invalid.
const MAX_HEAD: usize = 1 << 20;

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub target: String,
    /// e.g. "HTTP/1.1".
    pub version: String,
    /// In arrival order, names as sent (compare with [`RecordedRequest::header`]).
    pub headers: Vec<(String, String)>,
    /// Decoded body (chunked framing removed).
    pub body: Vec<u8>,
    /// Trailer fields of a chunked body, if any.
    pub trailers: Vec<(String, String)>,
    /// 0-based index of the connection (in accept order) the request came on.
    pub connection_index: usize,
}

impl RecordedRequest {
    /// First header with this name, case-insensitive.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Every value of headers with this name, case-insensitive, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The head as the server got it, a line each: the request line, then
    /// `name: value` per field in arrival order, those `but` names
    /// (case-insensitive) left out.
    pub fn head_lines(&self, but: &[&str]) -> Vec<String> {
        let request_line = format!("{} {} {}", self.method, self.target, self.version);
        let fields = self
            .headers
            .iter()
            .filter(|(name, _)| !but.iter().any(|left| name.eq_ignore_ascii_case(left)))
            .map(|(name, value)| format!("{name}: {value}"));
        std::iter::once(request_line).chain(fields).collect()
    }

    /// True if the request asks for the connection to be closed after the
    /// response (`Connection: close`, or HTTP/1.0 without `keep-alive`).
    pub fn wants_close(&self) -> bool {
        let tokens: Vec<String> = self
            .header_all("connection")
            .iter()
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect();
        if tokens.iter().any(|t| t == "close") {
            return true;
        }
        self.version.eq_ignore_ascii_case("HTTP/1.0") && !tokens.iter().any(|t| t == "keep-alive")
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Result of trying to parse one request from the front of a buffer.
#[derive(Debug)]
pub enum Parsed {
    /// A whole request, and how many bytes of the buffer it used.
    Complete(RecordedRequest, usize),
    /// More bytes are needed.
    Incomplete,
    /// The bytes are not an HTTP/1.x request the kit understands.
    Invalid,
}

/// Position just past the blank line ending a head ("\r\n\r\n" or "\n\n"),
/// and the head's length without it.
fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some((i, i + 2));
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some((i, i + 3));
            }
        }
        i += 1;
    }
    None
}

/// Next line (without its "\r\n" or "\n") starting at `pos`, and the position after it.
fn line_at(buf: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(pos..)?;
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let line = &rest[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Some((line, pos + nl + 1))
}

fn parse_fields(text: &str) -> Option<Vec<(String, String)>> {
    let mut fields = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once(':')?;
        if name.is_empty() || name.trim() != name {
            return None;
        }
        fields.push((name.to_string(), value.trim().to_string()));
    }
    Some(fields)
}

/// Parse one request (head and body) from the front of `buf`.
pub fn parse_request(buf: &[u8], connection_index: usize) -> Parsed {
    // Tolerate blank lines before a request line (RFC 9112 §2.2).
    let mut start = 0;
    while buf[start..].starts_with(b"\r\n") || buf[start..].starts_with(b"\n") {
        start += if buf[start] == b'\r' { 2 } else { 1 };
    }
    let buf_from = &buf[start..];
    let Some((head_len, body_start)) = head_end(buf_from) else {
        return if buf_from.len() > MAX_HEAD {
            Parsed::Invalid
        } else {
            Parsed::Incomplete
        };
    };
    let Ok(head) = std::str::from_utf8(&buf_from[..head_len]) else {
        return Parsed::Invalid;
    };
    let (request_line, rest) = head.split_once('\n').unwrap_or((head, ""));
    let mut parts = request_line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Invalid;
    };
    if method.is_empty() || target.is_empty() || !version.starts_with("HTTP/1.") {
        return Parsed::Invalid;
    }
    let Some(headers) = parse_fields(rest) else {
        return Parsed::Invalid;
    };
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding")
            && v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("chunked"))
    });
    let mut request = RecordedRequest {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body: Vec::new(),
        trailers: Vec::new(),
        connection_index,
    };
    let body_buf = &buf_from[body_start..];
    let used = if chunked {
        match parse_chunked(body_buf) {
            Parsed2::Complete(body, trailers, used) => {
                request.body = body;
                request.trailers = trailers;
                used
            }
            Parsed2::Incomplete => return Parsed::Incomplete,
            Parsed2::Invalid => return Parsed::Invalid,
        }
    } else if let Some(len) = find_header(&request.headers, "content-length") {
        let Ok(len) = len.parse::<usize>() else {
            return Parsed::Invalid;
        };
        if body_buf.len() < len {
            return Parsed::Incomplete;
        }
        request.body = body_buf[..len].to_vec();
        len
    } else {
        0
    };
    Parsed::Complete(request, start + body_start + used)
}

enum Parsed2 {
    Complete(Vec<u8>, Vec<(String, String)>, usize),
    Incomplete,
    Invalid,
}

fn parse_chunked(buf: &[u8]) -> Parsed2 {
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        let Some((line, next)) = line_at(buf, pos) else {
            return if buf.len() - pos > MAX_HEAD {
                Parsed2::Invalid
            } else {
                Parsed2::Incomplete
            };
        };
        let size_text = line.split(|&b| b == b';').next().unwrap_or(b"");
        let Ok(size_text) = std::str::from_utf8(size_text) else {
            return Parsed2::Invalid;
        };
        let Ok(size) = usize::from_str_radix(size_text.trim(), 16) else {
            return Parsed2::Invalid;
        };
        pos = next;
        if size == 0 {
            break;
        }
        let Some(end) = pos.checked_add(size).filter(|e| e.checked_add(2).is_some()) else {
            return Parsed2::Invalid;
        };
        if buf.len() < end + 2 {
            return Parsed2::Incomplete;
        }
        body.extend_from_slice(&buf[pos..end]);
        let crlf = &buf[end..];
        pos = if crlf.starts_with(b"\r\n") {
            end + 2
        } else if crlf.starts_with(b"\n") {
            end + 1
        } else {
            return Parsed2::Invalid;
        };
    }
    // Trailer section, ended by an empty line.
    let mut trailers_text = String::new();
    loop {
        let Some((line, next)) = line_at(buf, pos) else {
            return Parsed2::Incomplete;
        };
        pos = next;
        if line.is_empty() {
            break;
        }
        let Ok(line) = std::str::from_utf8(line) else {
            return Parsed2::Invalid;
        };
        trailers_text.push_str(line);
        trailers_text.push('\n');
    }
    match parse_fields(&trailers_text) {
        Some(trailers) => Parsed2::Complete(body, trailers, pos),
        None => Parsed2::Invalid,
    }
}

/// Reads requests off a stream, keeping leftover bytes (pipelining) between calls.
/// Usable from a `Behaviour::Custom` closure.
pub struct RequestReader {
    buf: Vec<u8>,
    connection_index: usize,
}

/// Why [`RequestReader::read_request`] produced no request.
#[derive(Debug)]
pub enum ReadEnd {
    /// The peer closed (EOF) with no partial request buffered.
    Eof,
    /// The peer closed in the middle of a request.
    Truncated,
    /// The bytes could not be parsed.
    Invalid,
    /// A read error (including the server's shutdown on drop).
    Io(io::Error),
}

impl RequestReader {
    pub fn new(connection_index: usize) -> RequestReader {
        RequestReader {
            buf: Vec::new(),
            connection_index,
        }
    }

    /// Bytes read but not yet consumed by a parsed request.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Read until one whole request is buffered; return it and keep the rest.
    pub fn read_request(&mut self, stream: &mut impl Read) -> Result<RecordedRequest, ReadEnd> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if !self.buf.is_empty() {
                match parse_request(&self.buf, self.connection_index) {
                    Parsed::Complete(request, used) => {
                        self.buf.drain(..used);
                        return Ok(request);
                    }
                    Parsed::Invalid => return Err(ReadEnd::Invalid),
                    Parsed::Incomplete => {}
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) if self.buf.iter().all(|b| b.is_ascii_whitespace()) => {
                    return Err(ReadEnd::Eof)
                }
                Ok(0) => return Err(ReadEnd::Truncated),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadEnd::Io(e)),
            }
        }
    }
}

/// Reads a request head (up to the empty line) off `stream`, byte by byte
/// so nothing after it is taken; `None` if the stream ends or fails first.
pub fn read_head(stream: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// The `Content-Length` of a head [`read_head`] returned (0 without one).
pub fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or(0)
}

/// Read and discard until EOF or error. Returns when the peer closes or the
/// server shuts the socket down.
pub fn drain(stream: &mut TcpStream) {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Reads `stream` until the last chunk of a chunked body (a chunk's CRLF,
/// then `0\r\n\r\n`: no trailers), its end or a failure, `tail` being
/// what was read of the body before: the bytes read here, and whether the
/// last chunk came. Keeps only the body's last bytes, however long.
pub fn read_to_last_chunk(stream: &mut impl Read, mut tail: Vec<u8>) -> (usize, bool) {
    const LAST_CHUNK: &[u8] = b"\r\n0\r\n\r\n";
    let mut buf = vec![0; 64 * 1024];
    let mut read = 0;
    while !tail.ends_with(LAST_CHUNK) {
        match stream.read(&mut buf) {
            Ok(n @ 1..) => {
                read += n;
                tail.extend_from_slice(&buf[..n]);
                tail.drain(..tail.len().saturating_sub(LAST_CHUNK.len()));
            }
            _ => return (read, false),
        }
    }
    (read, true)
}

/// Standard reason phrase for common status codes ("" otherwise).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

fn status_line(status: u16) -> String {
    format!("HTTP/1.1 {status} {}\r\n", reason(status))
}

/// `HTTP/1.1 200 OK` with `Content-Length` and the body.
pub fn ok(body: &str) -> Vec<u8> {
    response(200, &[], body.as_bytes())
}

/// A response with the given headers and body. Adds `Content-Length: <len>`
/// unless `headers` already has a `Transfer-Encoding` or `Content-Length`
/// (so deliberately wrong framing can be built), or the status is 1xx, 204 or
/// 304 with an empty body. The body is appended as is.
pub fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = status_line(status);
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    let framed = headers.iter().any(|(n, _)| {
        n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
    });
    let bodiless = (100..200).contains(&status) || status == 204 || status == 304;
    let skip = framed || (bodiless && body.is_empty());
    if !skip {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A `Transfer-Encoding: chunked` response: one chunk per non-empty slice
/// (empty slices are skipped so they cannot end the body early), the last
/// chunk, then the trailers.
pub fn chunked(status: u16, chunks: &[&[u8]], trailers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = status_line(status).into_bytes();
    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
    for chunk in chunks.iter().filter(|c| !c.is_empty()) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `bytes` gzipped, for a `Content-Encoding: gzip` body, at the default
/// level: as a server's, and as tight as a bomb needs (64 MiB of zeros in
/// 64 KiB, where the fastest level takes several times that).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// True if the head of `bytes` (up to the first blank line) has a
/// `Connection` header with the `close` token.
pub fn response_closes(bytes: &[u8]) -> bool {
    let head = match head_end(bytes) {
        Some((len, _)) => &bytes[..len],
        None => bytes,
    };
    String::from_utf8_lossy(head).lines().skip(1).any(|line| {
        line.split_once(':').is_some_and(|(n, v)| {
            n.trim().eq_ignore_ascii_case("connection")
                && v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
        })
    })
}

/// A listener whose connections buffer little: a receive buffer of 16 KiB
/// and segments of 536 bytes (loopback's are 64 KiB, and a sender's buffer
/// grows with them to megabytes), both inherited by what it accepts. A
/// client writing more than its own send buffer holds then waits on the
/// server from its first few dozen KiB, and its socket signals room often.
pub fn small_buffered_listener() -> std::net::TcpListener {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let socket = socket2::SockRef::from(&listener);
    socket.set_recv_buffer_size(16 << 10).unwrap();
    socket.set_tcp_mss(536).unwrap();
    listener
}
