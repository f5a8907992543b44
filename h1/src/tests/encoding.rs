//! Request encoding: heads, framing headers and chunks.

use super::*;

fn encode(
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: RequestBody,
) -> Result<String, EncodeError> {
    let uri: Uri = uri.parse().unwrap();
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    let mut out = b"prefix:".to_vec();
    let result = encode_request_head(&method, &uri, &map, body, &mut out);
    // The check alone says what the encoding says.
    assert_eq!(
        check_request_head(&method, &uri, &map, body),
        result.clone(),
        "check_request_head and encode_request_head disagree"
    );
    let out = String::from_utf8(out).unwrap();
    let written = out.strip_prefix("prefix:").unwrap().to_owned();
    match result {
        Ok(()) => Ok(written),
        Err(e) => {
            assert_eq!(written, "", "nothing is written on error");
            Err(e)
        }
    }
}

#[test]
fn encodes_get_with_query() {
    assert_eq!(
        encode(
            Method::GET,
            "http://example.com/a/b?x=1&y",
            &[("accept", "*/*")],
            RequestBody::Empty
        )
        .unwrap(),
        "GET /a/b?x=1&y HTTP/1.1\r\nHost: example.com\r\naccept: */*\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::GET,
            "https://example.com:8443",
            &[],
            RequestBody::Empty
        )
        .unwrap(),
        "GET / HTTP/1.1\r\nHost: example.com:8443\r\n\r\n"
    );
    assert_eq!(
        encode(Method::GET, "http://example.com?q", &[], RequestBody::Empty).unwrap(),
        "GET /?q HTTP/1.1\r\nHost: example.com\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::GET,
            "http://user:pw@[::1]:8080/",
            &[],
            RequestBody::Empty
        )
        .unwrap(),
        "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"
    );
    // No Content-Length for a bodiless GET or DELETE.
    assert_eq!(
        encode(Method::DELETE, "http://h/x", &[], RequestBody::Empty).unwrap(),
        "DELETE /x HTTP/1.1\r\nHost: h\r\n\r\n"
    );
}

#[test]
fn encodes_post_with_length() {
    assert_eq!(
        encode(
            Method::POST,
            "http://h/submit",
            &[("content-type", "text/plain")],
            RequestBody::Length(5)
        )
        .unwrap(),
        "POST /submit HTTP/1.1\r\nHost: h\r\ncontent-type: text/plain\r\nContent-Length: 5\r\n\r\n"
    );
    for method in [Method::POST, Method::PUT, Method::PATCH] {
        let head = encode(method.clone(), "http://h/", &[], RequestBody::Empty).unwrap();
        assert_eq!(
            head,
            format!("{method} / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        );
    }
    // A matching caller header is kept and not repeated.
    assert_eq!(
        encode(
            Method::PUT,
            "http://h/",
            &[("content-length", "5")],
            RequestBody::Length(5)
        )
        .unwrap(),
        "PUT / HTTP/1.1\r\nHost: h\r\ncontent-length: 5\r\n\r\n"
    );
}

#[test]
fn encodes_chunked() {
    assert_eq!(
        encode(Method::POST, "http://h/up", &[], RequestBody::Chunked).unwrap(),
        "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::POST,
            "http://h/up",
            &[("transfer-encoding", "chunked")],
            RequestBody::Chunked
        )
        .unwrap(),
        "POST /up HTTP/1.1\r\nHost: h\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let mut out = Vec::new();
    encode_chunk(b"hello", &mut out);
    encode_chunk(b"", &mut out);
    encode_chunk(&[b'x'; 26], &mut out);
    encode_last_chunk(&mut out);
    let expected = [&b"5\r\nhello\r\n1a\r\n"[..], &[b'x'; 26], b"\r\n0\r\n\r\n"].concat();
    assert_eq!(out, expected);
    let mut out = Vec::new();
    encode_chunk(b"", &mut out);
    assert!(out.is_empty());
    // The last chunk with a trailer section: a line per field, then the
    // empty line; with no fields, the plain last chunk.
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
    trailers.append("x-note", http::HeaderValue::from_static("1"));
    let mut out = Vec::new();
    encode_last_chunk_with(&trailers, &mut out);
    assert_eq!(out, b"0\r\nx-checksum: abc\r\nx-note: 1\r\n\r\n");
    let mut out = Vec::new();
    encode_last_chunk_with(&http::HeaderMap::new(), &mut out);
    assert_eq!(out, b"0\r\n\r\n");
}

#[test]
fn host_header_present_or_absent() {
    assert_eq!(
        encode(
            Method::GET,
            "http://example.com/",
            &[("host", "other.example")],
            RequestBody::Empty
        )
        .unwrap(),
        "GET / HTTP/1.1\r\nhost: other.example\r\n\r\n"
    );
    assert_eq!(
        encode(Method::GET, "http://example.com/", &[], RequestBody::Empty).unwrap(),
        "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
    );
}

/// Header (name, value) pairs for a request.
type Headers<'a> = &'a [(&'a str, &'a str)];

#[test]
fn framing_conflicts() {
    use EncodeError::*;
    let cases: [(Headers<'_>, RequestBody, EncodeError); 12] = [
        // Twice, the same length: the list `5, 5` is not a length.
        (
            &[("content-length", "5"), ("content-length", "5")],
            RequestBody::Length(5),
            ConflictingContentLength,
        ),
        (
            &[("content-length", "0"), ("content-length", "0")],
            RequestBody::Empty,
            ConflictingContentLength,
        ),
        (
            &[("content-length", "6")],
            RequestBody::Length(5),
            ConflictingContentLength,
        ),
        (
            &[("content-length", "5"), ("content-length", "6")],
            RequestBody::Length(5),
            ConflictingContentLength,
        ),
        (
            &[("content-length", "3")],
            RequestBody::Empty,
            ConflictingContentLength,
        ),
        (
            &[("content-length", "3")],
            RequestBody::Chunked,
            ConflictingContentLength,
        ),
        (
            &[("transfer-encoding", "chunked")],
            RequestBody::Length(5),
            ConflictingTransferEncoding,
        ),
        (
            &[("transfer-encoding", "chunked")],
            RequestBody::Empty,
            ConflictingTransferEncoding,
        ),
        (
            &[("transfer-encoding", "gzip, chunked")],
            RequestBody::Chunked,
            ConflictingTransferEncoding,
        ),
        (
            &[
                ("transfer-encoding", "chunked"),
                ("transfer-encoding", "chunked"),
            ],
            RequestBody::Chunked,
            ConflictingTransferEncoding,
        ),
        (
            &[("host", "a.example"), ("host", "b.example")],
            RequestBody::Empty,
            DuplicateHost,
        ),
        (
            &[("host", "a.example"), ("host", "a.example")],
            RequestBody::Length(1),
            DuplicateHost,
        ),
    ];
    for (headers, body, expected) in cases {
        assert_eq!(
            encode(Method::POST, "http://h/", headers, body),
            Err(expected),
            "{headers:?} {body:?}"
        );
    }
}

#[test]
fn connect_and_a_traces_body_are_refused() {
    let uri = "http://h/x";
    assert_eq!(
        encode(Method::CONNECT, uri, &[], RequestBody::Empty),
        Err(EncodeError::Connect)
    );
    for body in [RequestBody::Length(3), RequestBody::Chunked] {
        assert_eq!(
            encode(Method::TRACE, uri, &[], body),
            Err(EncodeError::TraceBody),
            "{body:?}"
        );
    }
    for body in [RequestBody::Empty, RequestBody::Length(0)] {
        assert!(encode(Method::TRACE, uri, &[], body).is_ok(), "{body:?}");
    }
}

#[test]
fn invalid_uris() {
    // The last two `http` takes: UTF-8 in a path or a query.
    for uri in [
        "/relative",
        "ftp://h/file",
        "example.com:80",
        "*",
        "http://h/\u{e4}",
        "http://h/?q=\u{e9}",
    ] {
        assert_eq!(
            encode(Method::GET, uri, &[], RequestBody::Empty),
            Err(EncodeError::InvalidUri),
            "{uri}"
        );
    }
}

#[test]
fn request_and_response_exchange() {
    // The decoder reads a response the way a client loop does, after the encoder wrote a request.
    let mut out = Vec::new();
    let uri: Uri = "http://h/".parse().unwrap();
    encode_request_head(
        &Method::HEAD,
        &uri,
        &HeaderMap::new(),
        RequestBody::Empty,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
    let (head, body, _, keep_alive) = decode_all(
        limits(),
        true,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    )
    .unwrap();
    assert_eq!(head.status, 200);
    assert!(body.is_empty() && keep_alive);
}

/// A GET of `uri`, with no fields, in absolute form (to a proxy).
fn absolute_form(uri: &Uri) -> String {
    let mut out = Vec::new();
    encode_request_head_as(
        &Method::GET,
        uri,
        &HeaderMap::new(),
        RequestBody::Empty,
        RequestTarget::Absolute,
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

/// The scheme's default port, written out in the URI (`:80` for http,
/// `:443` for https, in any spelling `http` reads as it), is not sent: the
/// URL standard drops it when it parses, and curl, the browsers and
/// clients on a URL parser send `Host: h` — what a server, a virtual host
/// table or a request signature (AWS SigV4 signs the `Host`) expects.
/// The other scheme's default is a port like any other.
#[test]
fn a_default_port_written_out_is_not_sent() {
    for (uri, host) in [
        ("http://h:80/p", "h"),
        ("https://h:443/p", "h"),
        ("HTTP://h:080/p", "h"),
        ("https://u:p@h:0443/p", "h"),
        ("http://[::1]:80/p", "[::1]"),
        ("http://h:443/p", "h:443"),
        ("https://h:80/p", "h:80"),
        ("http://h:8080/p", "h:8080"),
    ] {
        assert_eq!(
            encode(Method::GET, uri, &[], RequestBody::Empty),
            Ok(format!("GET /p HTTP/1.1\r\nHost: {host}\r\n\r\n")),
            "{uri}"
        );
        let scheme = &uri[..uri.find(':').unwrap()].to_ascii_lowercase();
        assert_eq!(
            absolute_form(&uri.parse().unwrap()),
            format!("GET {scheme}://{host}/p HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            "{uri}"
        );
    }
}

#[test]
fn absolute_form_for_a_proxy_keeps_scheme_authority_and_path_without_userinfo() {
    let encode_to = |uri: &str| absolute_form(&uri.parse().unwrap());
    assert_eq!(
        encode_to("HTTP://user:pw@example.com:8080/a?q=1"),
        "GET http://example.com:8080/a?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"
    );
    assert_eq!(
        encode_to("http://[::1]"),
        "GET http://[::1]/ HTTP/1.1\r\nHost: [::1]\r\n\r\n"
    );
}

#[test]
fn lengths_and_ports_are_written_in_decimal_whole() {
    assert_eq!(
        encode(
            Method::PUT,
            "http://h:65535/",
            &[],
            RequestBody::Length(u64::MAX)
        )
        .unwrap(),
        "PUT / HTTP/1.1\r\nHost: h:65535\r\nContent-Length: 18446744073709551615\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::POST,
            "http://h:0/",
            &[("content-length", "0")],
            RequestBody::Empty
        )
        .unwrap(),
        "POST / HTTP/1.1\r\nHost: h:0\r\ncontent-length: 0\r\n\r\n"
    );
    // The caller's length must be the body's in the same digits.
    assert_eq!(
        encode(
            Method::POST,
            "http://h/",
            &[("content-length", "010")],
            RequestBody::Length(10)
        ),
        Err(EncodeError::ConflictingContentLength)
    );
}

/// [`encode`] with `extra` fields after `headers`
/// ([`encode_request_head_with`]), to `http://h/x`.
fn encode_with(
    method: Method,
    headers: &[(&str, &str)],
    extra: &[(&str, &str)],
    body: RequestBody,
) -> String {
    let uri: Uri = "http://h/x".parse().unwrap();
    let field = |&(name, value): &(&str, &str)| {
        (
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        )
    };
    let map: HeaderMap = headers.iter().map(field).collect();
    let owned: Vec<_> = extra.iter().map(field).collect();
    let extra: Vec<_> = owned.iter().map(|(name, value)| (name, value)).collect();
    let mut out = Vec::new();
    let form = RequestTarget::Origin;
    encode_request_head_with(&method, &uri, &map, &extra, body, form, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Extra fields go after the map's (so after `Host`, first), before the
/// framing header the encoder adds; without one, last.
#[test]
fn extra_fields_are_written_after_the_maps_before_the_framing_header() {
    assert_eq!(
        encode_with(
            Method::POST,
            &[("accept", "*/*")],
            &[("cookie", "a=1; b=2")],
            RequestBody::Length(5)
        ),
        "POST /x HTTP/1.1\r\nHost: h\r\naccept: */*\r\ncookie: a=1; b=2\r\n\
         Content-Length: 5\r\n\r\n"
    );
    assert_eq!(
        encode_with(
            Method::POST,
            &[("host", "v")],
            &[("cookie", "a=1"), ("x-two", "2")],
            RequestBody::Chunked
        ),
        "POST /x HTTP/1.1\r\nhost: v\r\ncookie: a=1\r\nx-two: 2\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    assert_eq!(
        encode_with(Method::GET, &[], &[("cookie", "a=1")], RequestBody::Empty),
        "GET /x HTTP/1.1\r\nHost: h\r\ncookie: a=1\r\n\r\n"
    );
}

/// An extra field is never `Host` or a framing field: those are checked
/// in the map, and an extra one would go unchecked.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "never Host or a framing field")]
fn an_extra_host_is_a_callers_error() {
    encode_with(Method::GET, &[], &[("host", "v")], RequestBody::Empty);
}

/// The host and port in `Host` and in an absolute target are what `http`
/// reads in the authority (`Uri::host`, `Uri::port_u16`), however they are
/// written: the encoder finds the host itself, and writes what follows it
/// as it is only when that says the same as `port_u16`. Each authority
/// here is one `http` reads: one it refused would fail the test, not go
/// untested.
#[test]
fn the_host_and_port_written_are_the_ones_http_reads() {
    let mut authorities: Vec<String> = [
        "h",
        "h:",
        "h:0",
        "h:00",
        "h:080",
        "h:8080",
        "h:65535",
        "h:65536",
        "h:99999",
        "h:123456",
        "u@h",
        "u:p@h",
        "u:80@h",
        "u:80@h:81",
        "u@h:081",
        "[::1]",
        "[::80]",
        "[::1]:",
        "[::1]:8080",
        "[::1]:08080",
        "u:8@[::1]",
        "127.0.0.1:1",
        "a@b@h:1",
        "a:@h",
        "[::1]@h:2",
        "u@[::1]:3",
        "H.Example:4",
    ]
    .map(str::to_owned)
    .to_vec();
    for port in (0..1100).chain(65530..65540) {
        authorities.push(format!("h:{port}"));
        authorities.push(format!("h:0{port}"));
    }
    for authority in authorities {
        let uri: Uri = format!("http://{authority}/p")
            .parse()
            .unwrap_or_else(|e| panic!("http reads no URI of {authority}: {e}"));
        // Port 80, http's default, goes unsaid (see
        // `a_default_port_written_out_is_not_sent`).
        let port = uri
            .port_u16()
            .filter(|&port| port != 80)
            .map(|p| format!(":{p}"))
            .unwrap_or_default();
        let host = format!("{}{port}", uri.host().unwrap());
        assert_eq!(
            absolute_form(&uri),
            format!("GET http://{host}/p HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            "{authority}"
        );
    }
}
