//! HTTP/1.1 round trips against loopback servers: methods, bodies and their
//! framing (length, chunked with trailers, close-delimited), interim 1xx,
//! HEAD and 204, `http` interop, streaming, invalid input, refused connects.

mod support;

use std::sync::Arc;
use std::time::Duration;
use support::*;
use tickless::{Client, Error, InvalidRequest};

const WAIT: Duration = Duration::from_secs(5);

fn client() -> Client {
    Client::builder()
        .event_loops(2)
        .request_timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Echoes `METHOD TARGET BODY` back with the request's `X-Test` header.
fn echo_server() -> TestServer {
    TestServer::respond(|request| {
        let body = format!(
            "{} {} {}",
            request.method,
            request.target,
            String::from_utf8_lossy(&request.body)
        );
        let x_test = request.header("x-test").unwrap_or("-").to_owned();
        response(200, &[("X-Echo", &x_test)], body.as_bytes())
    })
}

#[test]
fn get_round_trip_sends_host_and_headers() {
    let server = echo_server();
    let client = client();
    let response = client
        .get(server.url("/path?q=1"))
        .header("X-Test", "hello")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_11);
    assert_eq!(response.headers()["x-echo"], "hello");
    assert_eq!(response.remote_addr(), server.addr());
    assert_eq!(response.text().wait().unwrap(), "GET /path?q=1 ");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].version, "HTTP/1.1");
    assert_eq!(
        requests[0].header("host"),
        Some(server.authority().as_str())
    );
    assert!(requests[0].body.is_empty());
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn post_round_trip_sends_the_body_with_its_length() {
    let server = echo_server();
    let client = client();
    let body = "a=1&b=two".repeat(1000);
    let response = client
        .post(server.url("/submit"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().wait().unwrap(),
        format!("POST /submit {body}")
    );
    let request = &server.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.header("content-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(
        request.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(request.body, body.as_bytes());
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn chunked_request_body_when_asked_for() {
    let server = echo_server();
    let client = client();
    let response = client
        .post(server.url("/c"))
        .header("Transfer-Encoding", "chunked")
        .body("chunky")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "POST /c chunky");
    let request = &server.requests()[0];
    assert_eq!(request.header("transfer-encoding"), Some("chunked"));
    assert_eq!(request.header("content-length"), None);
    client.close();
}

#[test]
fn chunked_response_body_is_reassembled() {
    let server = TestServer::respond(|_| chunked(200, &[b"hello, ", b"chunked ", b"world"], &[]));
    let client = client();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    std::io::Read::read_to_string(response.body_mut(), &mut text).unwrap();
    assert_eq!(text, "hello, chunked world");
    assert!(response.trailers().is_none_or(|t| t.is_empty()));
    // The chunked body was framed: the connection is reused.
    let again = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(again.text().wait().unwrap(), "hello, chunked world");
    assert_eq!(server.connections_accepted(), 1);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn chunked_trailers_are_exposed() {
    let server = TestServer::respond(|_| {
        chunked(
            200,
            &[b"body"],
            &[("X-Checksum", "abc123"), ("X-Other", "2")],
        )
    });
    let client = client();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(response.body_mut(), &mut text).unwrap();
    assert_eq!(text, "body");
    let trailers = response.trailers().expect("trailers");
    assert_eq!(trailers["x-checksum"], "abc123");
    assert_eq!(trailers["x-other"], "2");
    // Trailers are not headers.
    assert!(response.headers().get("x-checksum").is_none());
    client.close();
}

#[test]
fn response_without_trailers_has_none() {
    let server = TestServer::respond(|_| ok("plain"));
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert!(response.trailers().is_none());
    client.close();
}

#[test]
fn close_delimited_body_reads_to_eof() {
    let mut bytes = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    bytes.extend_from_slice(&body);
    let server = TestServer::start(Behaviour::SendThenClose(bytes));
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().wait().unwrap(), &body[..]);
    // The connection ended with the body: nothing went back to the pool.
    assert!(server.wait_for_open(0, WAIT));
    let stats = client.stats();
    assert_eq!(stats.idle_connections, 0, "{stats:?}");
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn close_delimited_body_without_connection_close_header() {
    // No Content-Length, no chunked, no `Connection: close`: HTTP/1.1 still
    // delimits the body by the close.
    let server = TestServer::start(Behaviour::SendThenClose(
        b"HTTP/1.1 200 OK\r\nX-A: b\r\n\r\nuntil the end".to_vec(),
    ));
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "until the end");
    assert_eq!(client.stats().idle_connections, 0);
    client.close();
}

#[test]
fn interim_100_continue_is_skipped() {
    let server = TestServer::respond(|request| {
        let mut bytes = response(100, &[], b"");
        bytes.extend(response(201, &[("X-Final", "yes")], &request.body));
        bytes
    });
    let client = client();
    let response = client
        .post(server.url("/upload"))
        .body("payload")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["x-final"], "yes");
    assert_eq!(response.text().wait().unwrap(), "payload");
    // The connection is still in step: the next request reuses it.
    let again = client
        .post(server.url("/upload"))
        .body("second")
        .send()
        .wait()
        .unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.text().wait().unwrap(), "second");
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

#[test]
fn several_interim_responses_are_skipped() {
    let server = TestServer::respond(|_| {
        let mut bytes = response(100, &[], b"");
        bytes.extend(response(103, &[("Link", "</a.css>; rel=preload")], b""));
        bytes.extend(ok("final"));
        bytes
    });
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("link").is_none());
    assert_eq!(response.text().wait().unwrap(), "final");
    client.close();
}

#[test]
fn head_with_content_length_has_no_body() {
    let server = TestServer::respond(|request| {
        if request.method == "HEAD" {
            // The length of the body a GET would get; no body follows.
            response(200, &[("Content-Length", "1234")], b"")
        } else {
            ok("after head")
        }
    });
    let client = client();
    let response = client
        .request(http::Method::HEAD, server.url("/"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "1234");
    assert!(response.bytes().wait().unwrap().is_empty());
    // Had the client waited for 1234 bytes it would not get here; had it
    // taken the next response as a body, this would fail.
    let next = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(next.text().wait().unwrap(), "after head");
    assert_eq!(server.connections_accepted(), 1);
    assert_settles(&client, WAIT);
    client.close();
}

/// A HEAD or 304 answer has no body whatever its `Content-Length` fields
/// say, so differing ones do not fail it; but they show a broken sender,
/// so its connection is not reused.
#[test]
fn bodiless_answers_with_conflicting_lengths_succeed_on_a_connection_not_reused() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/cached" => response(304, &[("Content-Length", "5, 7")], b""),
        _ if request.method == "HEAD" => response(
            200,
            &[("Content-Length", "5"), ("Content-Length", "7")],
            b"",
        ),
        _ => ok("after"),
    });
    let client = client();
    let head = client
        .request(http::Method::HEAD, server.url("/"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(head.status(), 200);
    assert!(head.bytes().wait().unwrap().is_empty());
    let not_modified = client.get(server.url("/cached")).send().wait().unwrap();
    assert_eq!(not_modified.status(), 304);
    assert!(not_modified.bytes().wait().unwrap().is_empty());
    assert_eq!(get_bytes(&client, &server.url("/")), "after");
    // Each answer with conflicting lengths closed its connection.
    assert_eq!(server.connections_accepted(), 3);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn no_content_204_has_no_body_and_keeps_the_connection() {
    let server = TestServer::respond(|request| {
        if request.target == "/empty" {
            response(204, &[("X-Kind", "nothing")], b"")
        } else {
            ok("something")
        }
    });
    let client = client();
    let response = client
        .request(http::Method::DELETE, server.url("/empty"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 204);
    assert_eq!(response.headers()["x-kind"], "nothing");
    assert!(response.bytes().wait().unwrap().is_empty());
    let next = client.get(server.url("/full")).send().wait().unwrap();
    assert_eq!(next.text().wait().unwrap(), "something");
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

#[test]
fn execute_sends_an_http_request_as_it_is() {
    let server = echo_server();
    let client = client();
    let request = http::Request::builder()
        .method(http::Method::PUT)
        .uri(server.url("/resource/7"))
        .header("X-Test", "from-http")
        .header("X-Multi", "1")
        .header("X-Multi", "2")
        .body(b"new contents".to_vec())
        .unwrap();
    let response = client.execute(request).wait().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-echo"], "from-http");
    assert_eq!(
        response.text().wait().unwrap(),
        "PUT /resource/7 new contents"
    );
    let recorded = &server.requests()[0];
    assert_eq!(recorded.header_all("x-multi"), vec!["1", "2"]);
    assert_eq!(recorded.body, b"new contents");
    client.close();
}

/// A request's version is not the protocol spoken, which the client and
/// the server choose: one the client never speaks fails the request, not
/// sent as HTTP/1.1 (a caller who asked for HTTP/1.0 framing would get
/// another); HTTP/1.1 and HTTP/2 leave it to them.
#[test]
fn execute_refuses_a_version_the_client_never_speaks() {
    let server = echo_server();
    let client = client();
    let request = |version| {
        http::Request::builder()
            .version(version)
            .uri(server.url("/v"))
            .body(Vec::new())
            .unwrap()
    };
    for version in [
        http::Version::HTTP_09,
        http::Version::HTTP_10,
        http::Version::HTTP_3,
    ] {
        let error = client.execute(request(version)).wait().unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest(InvalidRequest::Version(v)) if v == version),
            "{version:?}: {error:?}"
        );
    }
    assert!(server.requests().is_empty());
    for version in [http::Version::HTTP_11, http::Version::HTTP_2] {
        let response = client.execute(request(version)).wait().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_11, "{version:?}");
        assert_eq!(response.text().wait().unwrap(), "GET /v ");
    }
    client.close();
}

#[test]
fn execute_with_an_invalid_uri_fails_without_panicking() {
    let client = client();
    let request = http::Request::builder()
        .uri("/relative/only")
        .body(Vec::new())
        .unwrap();
    let error = client
        .execute(request)
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidRequest(InvalidRequest::Scheme(_))),
        "{error:?}"
    );
    client.close();
}

/// A request-target is ASCII, and holds no space, `<` or `>` (RFC 9112
/// §3.2, RFC 3986): what a URL's path or query has of those goes
/// percent-encoded in UTF-8, as a WHATWG URL parser (reqwest, browsers)
/// encodes it — `http` takes text that is not ASCII as it is, and would
/// have it go raw. So do the `"`, `{`, `}` of a path and the `'` of a
/// query, which `http` takes and that parser encodes. The fragment is
/// never sent, and the rest goes as written, the way it goes in a URL with
/// nothing to encode.
#[test]
fn a_path_and_query_go_percent_encoded_where_a_request_target_cannot_hold_them() {
    let server = echo_server();
    let client = client();
    for (path, sent) in [
        ("/\u{e4}?q=\u{e9}", "/%C3%A4?q=%C3%A9"),
        ("/\u{e4} b#fragment \u{e9}", "/%C3%A4%20b"),
        (
            "/a b/<c>`d`?q=a b&r=\"<x>\"#f g",
            "/a%20b/%3Cc%3E%60d%60?q=a%20b&r=%22%3Cx%3E%22",
        ),
        // What `http` takes and a URL parser encodes, in a URL `http`
        // refuses or takes as it is.
        (
            "/a/../b{\"c\"}/%41?q='x'&y=%41\u{1F600}",
            "/a/../b%7B%22c%22%7D/%41?q=%27x%27&y=%41%F0%9F%98%80",
        ),
        (
            "/a/../b{\"c\"}/%41?q='x'&y=%41",
            "/a/../b%7B%22c%22%7D/%41?q=%27x%27&y=%41",
        ),
        (
            "/\"{}<>` |\\^?\"{}<>` |\\^'",
            "/%22%7B%7D%3C%3E%60%20|\\^?%22{}%3C%3E`%20|\\^%27",
        ),
        // As written: dot segments, escapes, what a URL parser does not
        // encode either.
        ("/a/../%41|^\\?`{|}^\\%", "/a/../%41|^\\?`{|}^\\%"),
    ] {
        let url = server.url(path);
        let uri = http::Uri::try_from(url.as_str()).ok();
        let request = http::Request::get(url.as_str()).body(Vec::new());
        let mut responses = vec![
            client.get(url.as_str()).send(),
            client.get(url.clone()).send(),
            client.get(url.as_bytes()).send(),
        ];
        // An `http::Uri` (`http` takes one that is not ASCII), given or
        // in an `http::Request`.
        if let (Some(uri), Ok(request)) = (uri, request) {
            responses.push(client.get(&uri).send());
            responses.push(client.get(uri).send());
            responses.push(client.execute(request));
        }
        for response in responses {
            let response = response.wait().unwrap_or_else(|e| panic!("{path:?}: {e}"));
            assert_eq!(response.text().wait().unwrap(), format!("GET {sent} "));
        }
    }
    client.close();
}

/// A `Location` with raw UTF-8 (which servers send) is followed to the
/// same encoded target a request's own URL would go to.
#[test]
fn a_location_that_is_not_ascii_is_followed_percent_encoded() {
    let server = TestServer::respond(|request| {
        if request.target == "/start" {
            response(302, &[("Location", "/\u{e4} b?q=\u{e9}#f")], b"")
        } else {
            ok(&format!("{} {}", request.method, request.target))
        }
    });
    let client = client();
    let response = client.get(server.url("/start")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "GET /%C3%A4%20b?q=%C3%A9");
    let targets: Vec<_> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/start", "/%C3%A4%20b?q=%C3%A9"]);
    client.close();
}

#[test]
fn a_reason_phrase_other_than_the_canonical_one_is_kept_as_sent() {
    use tickless::ReasonPhrase;
    let server = TestServer::respond(|request| {
        let line: &[u8] = match request.target.as_str() {
            "/fine" => b"HTTP/1.1 200 Fine Thanks",
            "/empty" => b"HTTP/1.1 200",
            "/latin1" => b"HTTP/1.1 404 Introuvable \xe9",
            _ => b"HTTP/1.1 200 OK",
        };
        [line, b"\r\nContent-Length: 2\r\n\r\nok"].concat()
    });
    let client = client();
    let reason = |path: &str| {
        let response = client.get(server.url(path)).send().wait().unwrap();
        let kept = response.extensions().get::<ReasonPhrase>().cloned();
        // Carried into the `http::Response` it converts to.
        let converted: http::Response<tickless::Body> = response.into();
        assert_eq!(converted.extensions().get::<ReasonPhrase>(), kept.as_ref());
        kept.map(|reason| reason.as_bytes().to_vec())
    };
    assert_eq!(reason("/ok"), None, "the canonical one is not kept");
    assert_eq!(reason("/fine").as_deref(), Some(&b"Fine Thanks"[..]));
    assert_eq!(reason("/empty").as_deref(), Some(&b""[..]));
    assert_eq!(reason("/latin1").as_deref(), Some(&b"Introuvable \xe9"[..]));
    client.close();
}

#[test]
fn response_converts_into_an_http_response() {
    let server = TestServer::respond(|_| {
        response(
            202,
            &[("X-One", "1"), ("Content-Type", "text/plain")],
            b"accepted",
        )
    });
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    let converted: http::Response<tickless::Body> = response.into();
    assert_eq!(converted.status(), http::StatusCode::ACCEPTED);
    assert_eq!(converted.version(), http::Version::HTTP_11);
    assert_eq!(converted.headers()["x-one"], "1");
    assert_eq!(converted.headers()["content-type"], "text/plain");
    assert_eq!(converted.headers()["content-length"], "8");
    let mut body = converted.into_body();
    let mut read = Vec::new();
    std::io::Read::read_to_end(&mut body, &mut read).unwrap();
    assert_eq!(read, b"accepted");
    client.close();
}

#[test]
fn a_large_body_arrives_in_chunks_byte_for_byte() {
    const SIZE: usize = 1 << 20;
    let body: Arc<Vec<u8>> = Arc::new((0..SIZE).map(|i| (i * 7 % 256) as u8).collect());
    let server_body = body.clone();
    let server = TestServer::respond(move |_| response(200, &[], &server_body));
    let client = client();
    let mut response = client.get(server.url("/big")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    let mut received = Vec::with_capacity(SIZE);
    let mut pieces = 0;
    while let Some(chunk) = response.chunk().wait().unwrap() {
        received.extend_from_slice(&chunk);
        pieces += 1;
    }
    assert_eq!(received.len(), SIZE);
    assert!(received == *body, "streamed bytes differ");
    assert!(pieces > 1, "1 MiB arrived in {pieces} piece(s)");
    assert!(
        response.chunk().wait().unwrap().is_none(),
        "read past the end"
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_chunked_body_streams_and_then_its_trailers() {
    let server = TestServer::respond(|_| chunked(200, &[b"ab", b"cd", b"ef"], &[("X-T", "1")]));
    let client = client();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    assert!(response.trailers().is_none(), "trailers before the end");
    let mut read = String::new();
    std::io::Read::read_to_string(response.body_mut(), &mut read).unwrap();
    assert_eq!(read, "abcdef");
    assert_eq!(response.trailers().unwrap()["x-t"], "1");
    client.close();
}

fn assert_invalid(future: tickless::ResponseFuture, expected: fn(&InvalidRequest) -> bool) {
    assert!(future.is_done(), "invalid input must fail at once");
    match future.wait() {
        Err(Error::InvalidRequest(invalid)) => {
            assert!(expected(&invalid), "unexpected variant {invalid:?}")
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

#[test]
fn invalid_input_fails_with_invalid_request_and_no_panic() {
    let server = echo_server();
    let client = client();
    assert_invalid(client.get("http://exa mple.com/").send(), |i| {
        matches!(i, InvalidRequest::Uri { .. })
    });
    assert_invalid(client.get("ftp://127.0.0.1/file").send(), |i| {
        matches!(i, InvalidRequest::Scheme(_))
    });
    assert_invalid(client.get("/relative/path").send(), |i| {
        matches!(i, InvalidRequest::Scheme(_))
    });
    // Not port 80: a port that does not fit in 16 bits is refused.
    assert_invalid(client.get("http://127.0.0.1:65536/").send(), |i| {
        matches!(i, InvalidRequest::Port(_))
    });
    assert_invalid(
        client
            .get(server.url("/"))
            .header("bad header name", "v")
            .send(),
        |i| matches!(i, InvalidRequest::Header { .. }),
    );
    assert_invalid(
        client
            .get(server.url("/"))
            .header("X-Ok", "bad\nvalue")
            .send(),
        |i| matches!(i, InvalidRequest::Header { .. }),
    );
    // CONNECT asks a proxy for a tunnel (the client makes its own), and a
    // TRACE has no body (RFC 9110 §9.3.6, §9.3.8).
    assert_invalid(
        client
            .request(http::Method::CONNECT, server.url("/"))
            .send(),
        |i| {
            matches!(
                i,
                InvalidRequest::Encode(tickless::h1::EncodeError::Connect)
            )
        },
    );
    assert_invalid(
        client
            .request(http::Method::TRACE, server.url("/"))
            .body("echo me")
            .send(),
        |i| {
            matches!(
                i,
                InvalidRequest::Encode(tickless::h1::EncodeError::TraceBody)
            )
        },
    );
    // The message names the problem; the io::Error kind is InvalidInput.
    let error = client
        .get("ftp://127.0.0.1/")
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(error.to_string().contains("ftp://127.0.0.1/"), "{error}");
    assert!(!error.is_timeout());
    let io = std::io::Error::from(error);
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    // Nothing reached the server, nothing is in flight, and the client
    // still works.
    assert!(server.requests().is_empty());
    assert_eq!(server.connections_accepted(), 0);
    assert_eq!(client.stats().in_flight, 0);
    let fine = client.get(server.url("/ok")).send().wait().unwrap();
    assert_eq!(fine.text().wait().unwrap(), "GET /ok ");
    client.close();
}

/// The message of the error `future` fails with at once, with its causes
/// (the parser's reason is the source).
fn invalid_message(future: tickless::ResponseFuture) -> String {
    assert!(future.is_done(), "invalid input must fail at once");
    chain_text(&future.wait().unwrap_err())
}

#[test]
fn invalid_input_errors_name_what_was_bad_but_no_secret() {
    let client = client();
    // The URI as given, owned or borrowed, and the parser's reason.
    for message in [
        invalid_message(client.get("http://exa mple.com/").send()),
        invalid_message(client.get(String::from("http://exa mple.com/")).send()),
    ] {
        assert_eq!(
            message,
            r#"invalid URI "http://exa mple.com/": invalid uri character"#
        );
    }
    // Without a scheme the parser says only "invalid format".
    let message = invalid_message(client.get("127.0.0.1:8080/x").send());
    assert!(message.contains(r#""127.0.0.1:8080/x""#), "{message}");
    assert!(message.contains("http:// or https://"), "{message}");
    // A password in the URI is not shown.
    let message = invalid_message(client.get("http://me:hunter2@exa mple.com/").send());
    assert_eq!(
        message,
        r#"invalid URI "http://***@exa mple.com/": invalid uri character"#
    );
    // Nor where the text does not start with a valid `scheme://`: pasted
    // with a space, a slash missing, scheme-relative.
    for text in [
        " http://me:hunter2@example.com/",
        "http:/me:hunter2@example.com/ x",
        "//me:hunter2@example.com/ x",
    ] {
        let message = invalid_message(client.get(text).send());
        assert!(!message.contains("hunter2"), "{message}");
        assert!(message.contains("***@example.com/"), "{message}");
    }
    // A header is named, its value (maybe a secret) never shown.
    let message = invalid_message(client.get("http://127.0.0.1/").header("X Bad", "v").send());
    assert_eq!(
        message,
        r#"invalid header "X Bad": invalid HTTP header name"#
    );
    for request in [
        client
            .get("http://127.0.0.1/")
            .header("Authorization", "Bearer sec\nret"),
        client.get("http://127.0.0.1/").bearer_auth("sec\nret"),
    ] {
        let message = invalid_message(request.send());
        assert!(
            message.starts_with(r#"invalid header "authorization": "#),
            "{message}"
        );
        assert!(!message.contains("sec"), "{message}");
    }
    // A whole header line passed as the name is shown up to its colon.
    let message = invalid_message(
        client
            .get("http://127.0.0.1/")
            .header("Authorization: Bearer hunter2", "v")
            .send(),
    );
    assert_eq!(
        message,
        r#"invalid header "Authorization: …": invalid HTTP header name"#
    );
    // A very long URI is cut, its length said.
    let long = format!("http://exa mple.com/{}", "x".repeat(70_000));
    let message = invalid_message(client.get(long.as_str()).send());
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(message.contains("70020 bytes in all"), "{message}");
    client.close();
}

#[test]
fn connection_refused_fails_with_connect() {
    let addr = refused_addr();
    let (client, recorder) = recorded_client();
    let error = client
        .get(format!("http://{addr}/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    match &error {
        Error::Connect { remote, source } => {
            assert_eq!(remote, &format!("127.0.0.1/{addr}"));
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    assert!(!error.is_timeout());
    assert_eq!(tickless::timeout_kind(&error), None);
    let events = recorder.events();
    assert!(events
        .iter()
        .any(|(e, _)| matches!(e, Event::ConnectFailure(a, std::io::ErrorKind::ConnectionRefused) if *a == addr)));
    // The failed connect gave its permit back.
    assert!(
        eventually(WAIT, || client.stats().open_connections == 0),
        "{:?}",
        client.stats()
    );
    assert_settles(&client, WAIT);
    client.close();
}
