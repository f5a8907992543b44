//! How long a response body is, rule by rule of RFC 9112 §6.3, read as a
//! stream: each body is taken through `Read` a few bytes at a time, and
//! each case checks whether the connection is reused after it — the proof
//! that the client found the body's end where the rule puts it.
//!
//! Rule 2 (a 2xx answer to CONNECT is a tunnel) comes with proxies; the
//! malformed cases of rules 3 and 5 are also in `hostile_servers.rs`, with
//! the decoder's error for each.

mod support;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tickless::{Client, Error, Response};

const WAIT: Duration = Duration::from_secs(10);

fn client(event_loop_timeouts: bool) -> Client {
    Client::builder()
        .event_loops(1)
        .use_event_loop_timeouts(event_loop_timeouts)
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The body of `response`, read through `Read` seven bytes at a time.
fn read_in_pieces(response: Response) -> std::io::Result<Vec<u8>> {
    let mut body = response.into_body();
    let mut all = Vec::new();
    let mut piece = [0; 7];
    loop {
        match body.read(&mut piece)? {
            0 => return Ok(all),
            n => all.extend_from_slice(&piece[..n]),
        }
    }
}

/// A server whose first answer on every connection is `first` (for a
/// request to `/first`), and `next` afterwards; it reads the next request
/// on the same connection unless `first` says `Connection: close`.
fn first_then_ok(first: Vec<u8>) -> TestServer {
    TestServer::respond(move |request| {
        if request.target == "/first" {
            first.clone()
        } else {
            ok("next")
        }
    })
}

/// Sends `method /first`, reads its body in pieces, then a GET `/next`, and
/// returns the first status and body and how many connections the two took.
fn first_and_next(
    client: &Client,
    server: &TestServer,
    method: http::Method,
) -> (u16, Vec<u8>, usize) {
    let first = client
        .request(method, server.url("/first"))
        .send()
        .wait()
        .unwrap();
    let status = first.status().as_u16();
    let body = read_in_pieces(first).unwrap();
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.text().wait().unwrap(), "next");
    (status, body, server.connections_accepted())
}

/// A response to a request: its name, the request's method, the bytes the
/// server sends, and the status and body the client should read from them.
type Case = (&'static str, http::Method, Vec<u8>, u16, &'static [u8]);

/// Runs each case, in both timeout modes, then a second request, and checks
/// the status and body read and that the two took `connections`.
fn assert_cases(cases: &[Case], connections: usize) {
    for event_loop_timeouts in [false, true] {
        let client = client(event_loop_timeouts);
        for (name, method, bytes, status, body) in cases {
            let server = first_then_ok(bytes.clone());
            let (got, got_body, took) = first_and_next(&client, &server, method.clone());
            assert_eq!(got, *status, "{name}");
            assert_eq!(got_body, *body, "{name}");
            assert_eq!(took, connections, "{name}: connections taken");
        }
        assert_settles(&client, WAIT);
        client.close();
    }
}

#[test]
fn rule_1_head_1xx_204_and_304_have_no_body_whatever_their_headers_say() {
    let cases: Vec<Case> = vec![
        (
            "HEAD with a length",
            http::Method::HEAD,
            response(200, &[("Content-Length", "1234")], b""),
            200,
            b"",
        ),
        (
            "HEAD with chunked",
            http::Method::HEAD,
            response(200, &[("Transfer-Encoding", "chunked")], b""),
            200,
            b"",
        ),
        (
            "204 with a length",
            http::Method::DELETE,
            response(204, &[("Content-Length", "10")], b""),
            204,
            b"",
        ),
        (
            "304 with the length of what it stands for",
            http::Method::GET,
            response(304, &[("Content-Length", "5000"), ("ETag", "\"x\"")], b""),
            304,
            b"",
        ),
        (
            "1xx before the final answer",
            http::Method::GET,
            [
                response(103, &[("Link", "</s.css>")], b""),
                response(102, &[], b""),
                ok("final"),
            ]
            .concat(),
            200,
            b"final",
        ),
    ];
    assert_cases(&cases, 1);
}

#[test]
fn rule_3_length_and_chunked_together_is_an_error_and_the_connection_goes() {
    let bytes =
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            .to_vec();
    let server = first_then_ok(bytes);
    let client = client(false);
    let error = client.get(server.url("/first")).send().wait().unwrap_err();
    assert!(matches!(error, Error::Protocol { .. }), "{error:?}");
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.text().wait().unwrap(), "next");
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

#[test]
fn rule_4_chunked_last_is_chunked_and_the_connection_is_reused() {
    let cases: Vec<Case> = vec![
        (
            "chunked",
            http::Method::GET,
            chunked(200, &[b"one ", b"two ", b"three"], &[]),
            200,
            b"one two three",
        ),
        (
            "chunked spelled in capitals, with extensions and trailers",
            http::Method::GET,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\n\r\n\
              4;ext=1\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n0\r\nX-Sum: 13\r\n\r\n"
                .to_vec(),
            200,
            b"one two three",
        ),
    ];
    assert_cases(&cases, 1);
}

#[test]
fn rule_4_codings_not_ending_in_chunked_are_read_until_the_server_closes() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::per_connection(|index| match index {
            0 => Behaviour::SendThenClose(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: x-custom\r\n\r\nraw bytes, then FIN"
                    .to_vec(),
            ),
            _ => Behaviour::respond(|_| ok("next")),
        }));
        let client = client(event_loop_timeouts);
        let first = client.get(server.url("/first")).send().wait().unwrap();
        assert_eq!(read_in_pieces(first).unwrap(), b"raw bytes, then FIN");
        let next = client.get(server.url("/next")).send().wait().unwrap();
        assert_eq!(next.text().wait().unwrap(), "next");
        assert_eq!(server.connections_accepted(), 2);
        client.close();
    }
}

#[test]
fn rule_5_an_invalid_or_conflicting_length_is_an_error_and_the_connection_goes() {
    let cases: [&[u8]; 4] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello",
    ];
    let client = client(true);
    for bytes in cases {
        let name = String::from_utf8_lossy(bytes).into_owned();
        let server = first_then_ok(bytes.to_vec());
        let error = client.get(server.url("/first")).send().wait().unwrap_err();
        assert!(matches!(error, Error::Protocol { .. }), "{name}: {error:?}");
        let next = client.get(server.url("/next")).send().wait().unwrap();
        assert_eq!(next.text().wait().unwrap(), "next");
        assert_eq!(server.connections_accepted(), 2, "{name}");
    }
    client.close();
}

#[test]
fn rule_6_a_valid_length_is_the_body_and_the_connection_is_reused() {
    let cases: Vec<Case> = vec![
        (
            "a length",
            http::Method::GET,
            response(200, &[], b"exactly this"),
            200,
            b"exactly this",
        ),
        (
            "the same length twice",
            http::Method::GET,
            response(
                200,
                &[("Content-Length", "4"), ("Content-Length", "4")],
                b"four",
            ),
            200,
            b"four",
        ),
        (
            "the same length listed twice",
            http::Method::GET,
            response(200, &[("Content-Length", "4, 4")], b"four"),
            200,
            b"four",
        ),
        (
            "length zero",
            http::Method::GET,
            response(200, &[("Content-Length", "0")], b""),
            200,
            b"",
        ),
    ];
    assert_cases(&cases, 1);
}

#[test]
fn rule_8_no_framing_at_all_is_read_until_the_server_closes() {
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::SendThenClose(
            b"HTTP/1.1 200 OK\r\nX-Framing: none\r\n\r\nto the end".to_vec(),
        ),
        _ => Behaviour::respond(|_| ok("next")),
    }));
    let client = client(false);
    let first = client.get(server.url("/first")).send().wait().unwrap();
    assert_eq!(read_in_pieces(first).unwrap(), b"to the end");
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.text().wait().unwrap(), "next");
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

#[test]
fn http_1_0_keeps_the_connection_only_with_keep_alive_and_a_length() {
    let kept: Vec<Case> = vec![(
        "1.0 with keep-alive and a length",
        http::Method::GET,
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc".to_vec(),
        200,
        b"abc",
    )];
    assert_cases(&kept, 1);
    let closed: Vec<Case> = vec![
        (
            "1.0 with a length but no keep-alive",
            http::Method::GET,
            b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc".to_vec(),
            200,
            b"abc",
        ),
        // Transfer-Encoding is not HTTP/1.0's: whoever sent it may not
        // have framed the body the way it says, so the connection goes
        // whatever `keep-alive` says (RFC 9112 §6.1).
        (
            "1.0 with keep-alive and chunked",
            http::Method::GET,
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\n"
                .to_vec(),
            200,
            b"abc",
        ),
    ];
    assert_cases(&closed, 2);
}

/// A server that sends `head` and `first`, waits until the test says the
/// client has read `first`, then sends `rest` (and closes, if `close`).
fn in_two_parts(
    head: &'static str,
    first: &'static [u8],
    rest: &'static [u8],
    close: bool,
) -> (TestServer, mpsc::Sender<()>) {
    let (go_on, wait) = mpsc::channel::<()>();
    let wait = Arc::new(Mutex::new(wait));
    let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
        let mut reader = RequestReader::new(0);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(first);
        if wait.lock().unwrap().recv_timeout(WAIT).is_err() {
            return;
        }
        let _ = stream.write_all(rest);
        if !close {
            drain(&mut stream);
        }
    }));
    (server, go_on)
}

/// A response in two parts: its name, head, first bytes, the rest, and
/// whether the server closes after the rest.
type Parts = (
    &'static str,
    &'static str,
    &'static [u8],
    &'static [u8],
    bool,
);

#[test]
fn every_framing_gives_its_first_bytes_before_the_rest_is_sent() {
    let cases: [Parts; 4] = [
        (
            "length",
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
            b"first",
            b"-rest",
            false,
        ),
        (
            "chunked",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"5\r\nfirst\r\n",
            b"5\r\n-rest\r\n0\r\n\r\n",
            false,
        ),
        (
            "a coding not ending in chunked",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: x-custom\r\n\r\n",
            b"first",
            b"-rest",
            true,
        ),
        (
            "until close",
            "HTTP/1.1 200 OK\r\n\r\n",
            b"first",
            b"-rest",
            true,
        ),
    ];
    for event_loop_timeouts in [false, true] {
        let client = client(event_loop_timeouts);
        for (name, head, first, rest, close) in cases {
            let (server, go_on) = in_two_parts(head, first, rest, close);
            let mut response = client.get(server.url("/")).send().wait().unwrap();
            let chunk = response.chunk().wait().unwrap().expect("a first chunk");
            assert_eq!(&chunk[..], b"first", "{name}");
            go_on.send(()).unwrap();
            assert_eq!(read_in_pieces(response).unwrap(), b"-rest", "{name}");
        }
        client.close();
    }
}

#[test]
fn bytes_past_a_complete_response_do_not_void_it_but_close_its_connection() {
    let cases: Vec<Case> = vec![
        (
            "a 304 followed by the body its length announced",
            http::Method::GET,
            [
                response(304, &[("Content-Length", "5")], b""),
                b"stale".to_vec(),
            ]
            .concat(),
            304,
            b"",
        ),
        (
            "a HEAD answer followed by its body",
            http::Method::HEAD,
            [
                response(200, &[("Content-Length", "5")], b""),
                b"hello".to_vec(),
            ]
            .concat(),
            200,
            b"",
        ),
        (
            "a 204 followed by bytes",
            http::Method::DELETE,
            [response(204, &[], b""), b"junk".to_vec()].concat(),
            204,
            b"",
        ),
        (
            "extra bytes after a length-delimited body",
            http::Method::GET,
            [response(200, &[], b"body"), b"extra".to_vec()].concat(),
            200,
            b"body",
        ),
        (
            "extra bytes after a chunked body",
            http::Method::GET,
            [chunked(200, &[b"body"], &[]), b"extra".to_vec()].concat(),
            200,
            b"body",
        ),
    ];
    // The second request needs a connection of its own.
    assert_cases(&cases, 2);
}
