//! Request encoding: the head and chunked body framing.

use http::header::{CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

use super::error::EncodeError;

/// Framing of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody {
    /// No body. POST, PUT and PATCH still get `Content-Length: 0`.
    Empty,
    /// A body of exactly this many bytes (`Content-Length`); the caller
    /// writes the bytes after the head, as they are.
    Length(u64),
    /// A body of unknown length (`Transfer-Encoding: chunked`); the caller
    /// frames it with [`encode_chunk`] and ends it with [`encode_last_chunk`].
    Chunked,
}

/// The form of the request-target (RFC 9112 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestTarget {
    /// `/path?query`: to the origin itself.
    #[default]
    Origin,
    /// `http://host[:port]/path?query` (user info dropped): to an HTTP proxy
    /// that forwards the request.
    Absolute,
}

/// Writes the request head into `out`, with an origin-form target (see
/// [`encode_request_head_as`]).
pub fn encode_request_head(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: RequestBody,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_request_head_as(method, uri, headers, body, RequestTarget::Origin, out)
}

/// Writes the request head into `out`.
///
/// Writes `METHOD origin-form HTTP/1.1\r\n`, a `Host` header from the URI
/// authority (user info dropped, and a port that is the scheme's default)
/// unless `headers` has one, the caller's
/// headers, `Content-Length: n` for [`RequestBody::Length`] (and
/// `Content-Length: 0` for [`RequestBody::Empty`] when the method is POST,
/// PUT or PATCH), `Transfer-Encoding: chunked` for [`RequestBody::Chunked`],
/// then the empty line. A framing header the caller already set with the same
/// meaning is not repeated.
///
/// The request-target is `form`: the path and query of `uri` (`/` if
/// empty), after the scheme and authority for [`RequestTarget::Absolute`].
///
/// # Errors
///
/// [`EncodeError::InvalidUri`] unless `uri` is absolute with scheme `http` or
/// `https` and a host, and its path and query are ASCII (`http` takes
/// UTF-8 there: percent-encode it first); [`EncodeError::ConflictingContentLength`] or
/// [`EncodeError::ConflictingTransferEncoding`] if `headers` hold a framing
/// header that disagrees with `body`, or a `Content-Length` twice;
/// [`EncodeError::DuplicateHost`] for a `Host` twice. Nothing is written on
/// error.
pub fn encode_request_head_as(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: RequestBody,
    form: RequestTarget,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_request_head_with(method, uri, headers, &[], body, form, out)
}

/// Writes the request head into `out`, as [`encode_request_head_as`] does,
/// with `extra` fields written after the map's and before the framing
/// header the encoder adds: fields the caller keeps out of the map (a
/// client's `Cookie` from its store, not copied into headers it shares).
///
/// An extra field is written as it is, unchecked: it is never `Host`,
/// `Content-Length` or `Transfer-Encoding`, which are checked against the
/// map and the body and belong in `headers` (`Host` comes first, RFC 9110
/// §7.2). Debug builds assert this.
///
/// # Errors
///
/// Those of [`encode_request_head_as`]. Nothing is written on error.
pub fn encode_request_head_with(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    extra: &[(&HeaderName, &HeaderValue)],
    body: RequestBody,
    form: RequestTarget,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    debug_assert!(
        extra
            .iter()
            .all(|(name, _)| ![HOST, CONTENT_LENGTH, TRANSFER_ENCODING].contains(name)),
        "an extra field is never Host or a framing field"
    );
    let Checked {
        scheme,
        host,
        has_host_field,
        framing,
    } = checked(method, uri, headers, body)?;
    let target = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let target = if target.is_empty() { "/" } else { target };
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    if form == RequestTarget::Absolute {
        out.extend_from_slice(scheme.to_ascii_lowercase().as_bytes());
        out.extend_from_slice(b"://");
        out.extend_from_slice(host.as_bytes());
        write_port(uri, scheme, host, out);
    }
    if !target.starts_with('/') {
        // `http` yields e.g. "?q" for "http://h?q"; origin-form needs the slash.
        out.push(b'/');
    }
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");

    if !has_host_field {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(host.as_bytes());
        write_port(uri, scheme, host, out);
        out.extend_from_slice(b"\r\n");
    }
    encode_fields(headers, out);
    for (name, value) in extra {
        encode_field(name, value, out);
    }
    match framing {
        Some(Framing::Length(n)) => {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(Decimal::of(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Some(Framing::Chunked) => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        None => {}
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// The host of `uri`, as [`Uri::host`] finds it in the authority (after
/// the last `@`; a bracketed literal with its brackets, or up to the first
/// `:`), found with byte searches: `http` sets up a string searcher for
/// each of the two, which cost some 400 instructions a request. Where
/// `http` would panic (an authority ending in `@`, a `[` never closed,
/// which its parser refuses) this gives the empty or whole rest.
fn host_of(uri: &Uri) -> Option<&str> {
    let authority = uri.authority()?.as_str();
    let after_userinfo = authority
        .bytes()
        .rposition(|b| b == b'@')
        .map_or(0, |at| at + 1);
    let host_port = &authority[after_userinfo..];
    let end = if host_port.starts_with('[') {
        host_port.bytes().position(|b| b == b']').map(|i| i + 1)
    } else {
        host_port.bytes().position(|b| b == b':')
    };
    Some(&host_port[..end.unwrap_or(host_port.len())])
}

/// Writes `:` and the port of `uri` ([`Uri::port_u16`]) after its `host`,
/// if it has one other than `scheme`'s default (80 for http, 443 for
/// https): a default port written out goes unsaid, as the URL standard
/// drops it and curl and the browsers send it (`Host: h`, not `h:80`,
/// which a server's virtual hosts or a request signature may not take).
/// Most often the port is what follows the host in the authority, written
/// as it is; asking `http` reads the authority again (some 300
/// instructions).
fn write_port(uri: &Uri, scheme: &str, host: &str, out: &mut Vec<u8>) {
    let (default, default_written) = if scheme.eq_ignore_ascii_case("https") {
        (443, ":443")
    } else {
        (80, ":80")
    };
    match port_as_written(uri, host) {
        Some(written) if written == default_written => {}
        Some(written) => out.extend_from_slice(written.as_bytes()),
        None => {
            if let Some(port) = uri.port_u16().filter(|&port| port != default) {
                out.push(b':');
                out.extend_from_slice(Decimal::of(port.into()).as_bytes());
            }
        }
    }
}

/// What follows `host` (a slice of `uri`'s authority, as [`Uri::host`]
/// gives it) in the authority, when that is what [`Uri::port_u16`] says
/// written as the encoder writes it: nothing, when nothing follows (then
/// the authority's last colon, if any, is in the userinfo or the IPv6
/// literal, and there is no port), or `:` and the port in decimal with no
/// sign or leading zero (then that colon is the authority's last, and the
/// digits its port). `None` when it is anything else (`:080`, `:`,
/// `:70000`): for `port_u16` to read.
fn port_as_written<'u>(uri: &'u Uri, host: &str) -> Option<&'u str> {
    let authority = uri.authority()?.as_str();
    let start = (host.as_ptr() as usize).checked_sub(authority.as_ptr() as usize)?;
    let after = authority.get(start.checked_add(host.len())?..)?;
    if after.is_empty() {
        return Some(after);
    }
    let digits = after.strip_prefix(':')?;
    let canonical = matches!(digits.as_bytes(), [b'0'] | [b'1'..=b'9', ..])
        && digits.len() <= 5
        && digits.bytes().all(|b| b.is_ascii_digit());
    (canonical && digits.parse::<u16>().is_ok()).then_some(after)
}

/// Checks a request head as [`encode_request_head_as`] would, without
/// writing it: the same errors, for a request whose head goes another way
/// (HTTP/2 encodes its own).
///
/// # Errors
///
/// Those of [`encode_request_head_as`].
pub fn check_request_head(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: RequestBody,
) -> Result<(), EncodeError> {
    checked(method, uri, headers, body).map(|_| ())
}

/// What a head that passed its checks is written with.
struct Checked<'a> {
    scheme: &'a str,
    host: &'a str,
    /// Whether `headers` hold a `Host` field (one: two are refused).
    has_host_field: bool,
    framing: Option<Framing>,
}

/// The framing header still to write.
enum Framing {
    Length(u64),
    Chunked,
}

/// The checks of a request head (see [`encode_request_head_as`]).
fn checked<'a>(
    method: &Method,
    uri: &'a Uri,
    headers: &HeaderMap,
    body: RequestBody,
) -> Result<Checked<'a>, EncodeError> {
    let scheme = uri.scheme_str().ok_or(EncodeError::InvalidUri)?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(EncodeError::InvalidUri);
    }
    let host = match host_of(uri) {
        Some(h) if !h.is_empty() => h,
        _ => return Err(EncodeError::InvalidUri),
    };
    // `http` takes UTF-8 in a path and query; a request-target is ASCII
    // (RFC 9112 §3.2), and a server may read those bytes as anything.
    if !uri
        .path_and_query()
        .is_none_or(|target| target.as_str().is_ascii())
    {
        return Err(EncodeError::InvalidUri);
    }
    if method == Method::CONNECT {
        return Err(EncodeError::Connect);
    }
    if method == Method::TRACE && !matches!(body, RequestBody::Empty | RequestBody::Length(0)) {
        return Err(EncodeError::TraceBody);
    }
    let fields = CheckedFields::of(headers);
    let framing = framing_header(method, &fields, body)?;
    // One Host field, or none (then it is the URI's): a server cannot tell
    // which of two is meant (RFC 9112 §3.2).
    if fields.host.count > 1 {
        return Err(EncodeError::DuplicateHost);
    }
    Ok(Checked {
        scheme,
        host,
        has_host_field: fields.host.count == 1,
        framing,
    })
}

/// The fields of the caller's headers the checks read, found in one pass
/// over them: a request's few fields are passed over for less than the
/// three lookups by name cost (some 300 instructions a request).
#[derive(Default)]
struct CheckedFields<'h> {
    host: Field<'h>,
    length: Field<'h>,
    coding: Field<'h>,
}

/// How many fields of one name a head holds, and the first one's value,
/// trimmed.
#[derive(Default)]
struct Field<'h> {
    count: usize,
    first: Option<&'h [u8]>,
}

impl<'h> Field<'h> {
    fn add(&mut self, value: &'h HeaderValue) {
        self.count += 1;
        self.first
            .get_or_insert_with(|| value.as_bytes().trim_ascii());
    }
}

impl<'h> CheckedFields<'h> {
    fn of(headers: &'h HeaderMap) -> CheckedFields<'h> {
        let mut fields = CheckedFields::default();
        for (name, value) in headers {
            if name == HOST {
                fields.host.add(value);
            } else if name == CONTENT_LENGTH {
                fields.length.add(value);
            } else if name == TRANSFER_ENCODING {
                fields.coding.add(value);
            }
        }
        fields
    }
}

/// Checks the caller's framing headers against `body` and returns the framing
/// header still to write, if any.
fn framing_header(
    method: &Method,
    fields: &CheckedFields<'_>,
    body: RequestBody,
) -> Result<Option<Framing>, EncodeError> {
    // One Content-Length field, or none: two, though they agree, make the
    // list `5, 5`, which is not a length (RFC 9110 §8.6) and which a
    // server may refuse (Node's parser does) — as it is refused here
    // written in one field.
    if fields.length.count > 1 {
        return Err(EncodeError::ConflictingContentLength);
    }
    let length = fields.length.first;
    match body {
        RequestBody::Empty | RequestBody::Length(_) => {
            if fields.coding.count > 0 {
                return Err(EncodeError::ConflictingTransferEncoding);
            }
            let n = match body {
                RequestBody::Length(n) => n,
                _ => 0,
            };
            let no_length = length.is_none();
            if length.is_some_and(|v| v != Decimal::of(n).as_bytes()) {
                return Err(EncodeError::ConflictingContentLength);
            }
            let needs_length = matches!(body, RequestBody::Length(_))
                || *method == Method::POST
                || *method == Method::PUT
                || *method == Method::PATCH;
            if no_length && needs_length {
                return Ok(Some(Framing::Length(n)));
            }
            Ok(None)
        }
        RequestBody::Chunked => {
            if length.is_some() {
                return Err(EncodeError::ConflictingContentLength);
            }
            // Exactly one "chunked", or none (then it is added): twice
            // would say the body was chunked twice.
            let Some(first) = fields.coding.first else {
                return Ok(Some(Framing::Chunked));
            };
            if fields.coding.count > 1 || !first.eq_ignore_ascii_case(b"chunked") {
                return Err(EncodeError::ConflictingTransferEncoding);
            }
            Ok(None)
        }
    }
}

/// A number in decimal, on the stack.
struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    fn of(mut n: u64) -> Decimal {
        let mut digits = [0; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// Writes one chunk of a chunked body: the size in hex, CRLF, `data`, CRLF.
/// Empty `data` writes nothing (an empty chunk would end the body).
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Writes the end of a chunked body: the last chunk and an empty trailer
/// section, `0\r\n\r\n`.
pub fn encode_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

/// Writes the end of a chunked body with `trailers` as its trailer section
/// (RFC 9112 §7.1.2): the last chunk, a line per field, the empty line.
/// Which fields may be trailers is the caller's to check.
pub fn encode_last_chunk_with(trailers: &HeaderMap, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    encode_fields(trailers, out);
    out.extend_from_slice(b"\r\n");
}

/// Writes a line per field of `fields`, `name: value` and CRLF (a
/// `HeaderValue` holds no CR or LF: none ends a section early).
fn encode_fields(fields: &HeaderMap, out: &mut Vec<u8>) {
    for (name, value) in fields {
        encode_field(name, value, out);
    }
}

/// Writes one field, `name: value` and CRLF.
fn encode_field(name: &HeaderName, value: &HeaderValue, out: &mut Vec<u8>) {
    out.extend_from_slice(name.as_str().as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}
