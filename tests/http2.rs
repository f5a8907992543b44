//! HTTP/2 against the `h2` crate's server side (tests/support/h2_server.rs),
//! cleartext with prior knowledge: the version, one connection shared by
//! many streams, streaming bodies and flow control both ways, cancel,
//! closing the client with streams in flight, and 503s retried (each let
//! go as its retry is decided).

mod support;

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::h2_server::{
    answer, await_reset, frame, ok_headers, settings_ack, H2Server, H2Stream, RawH2Server, ACK,
    DATA, END_HEADERS, END_STREAM, HEADERS, SETTINGS,
};
use support::*;
use tickless::{Client, ClientBuilder, Error, Upload};

const CEILING: Duration = Duration::from_secs(20);

fn h2c() -> ClientBuilder {
    Client::builder().event_loops(2).http2_prior_knowledge()
}

/// Reads the request body whole, then answers it back.
async fn echo(mut stream: H2Stream) {
    let body = stream.request.body_mut();
    let mut got = Vec::new();
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
        got.extend_from_slice(&data);
    }
    let response = http::Response::builder().status(200).body(()).unwrap();
    if let Ok(mut send) = stream.respond.send_response(response, false) {
        let _ = send.send_data(Bytes::from(got), true);
        let _ = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
    }
}

#[test]
fn a_prior_knowledge_request_is_answered_over_http2() {
    let server = H2Server::start(|stream| answer(stream, 200, b"hello over h2"));
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    // The events say so, in order: the protocol, then the stream (the
    // client's first stream is 1).
    let told: Vec<_> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::ProtocolNegotiated(_, version) => Some(format!("{version:?}")),
            Event::StreamOpened(_, id) => Some(format!("stream {id}")),
            Event::RequestSent(_) => Some("sent".to_string()),
            Event::Status(status) => Some(status.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(told, ["HTTP/2.0", "stream 1", "sent", "200 OK"]);
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.bytes().wait().unwrap(), "hello over h2");
    // The stream is counted, and has closed.
    let stats = client.stats();
    assert_eq!(stats.http2_streams_opened, 1);
    assert!(eventually(CEILING, || client.stats().http2_streams_open == 0));
    client.close();
}

/// Connection-specific fields stay off HTTP/2 (`h2` refuses to send any
/// of them), but for `TE: trailers`, the one RFC 9113 §8.2.2 keeps: a
/// caller asking for trailers asks over HTTP/2 too (gRPC servers want it,
/// hypercorn sends trailers only then). A `TE` that does not list
/// `trailers` stays off, and one that lists more goes as `trailers` alone.
/// A field the `Connection` header names is the connection's too, and
/// stays off with it.
#[test]
fn connection_specific_headers_stay_off_http2_and_the_others_go() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = H2Server::start({
        let seen = seen.clone();
        move |stream| {
            let mut fields: Vec<String> = stream
                .request
                .headers()
                .iter()
                .map(|(name, value)| match name.as_str() {
                    "te" => format!("te: {}", value.to_str().unwrap_or("?")),
                    name => name.to_string(),
                })
                .collect();
            fields.sort();
            seen.lock().unwrap().push(fields);
            answer(stream, 200, b"ok")
        }
    });
    let client = h2c().build().unwrap();
    // Without such headers (copied whole), then with each of them
    // (filtered).
    let plain = client.get(server.url("/")).header("x-one", "1");
    assert_eq!(plain.send().wait().unwrap().status(), 200);
    let mixed = |te: &str| {
        client
            .get(server.url("/"))
            .header("x-one", "1")
            .header("connection", "keep-alive, X-Hop")
            .header("x-hop", "for the next hop only")
            .header("keep-alive", "timeout=5")
            .header("proxy-connection", "keep-alive")
            .header("transfer-encoding", "chunked")
            .header("upgrade", "websocket")
            .header("host", "elsewhere.test")
            .header("te", te)
            .header("x-two", "2")
    };
    for te in ["trailers", "gzip", "gzip;q=0.5, Trailers"] {
        assert_eq!(mixed(te).send().wait().unwrap().status(), 200);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    let others = ["x-one", "x-two", "user-agent", "accept-encoding"];
    for (i, fields) in seen.iter().enumerate() {
        let te = i == 1 || i == 3;
        assert!(
            fields
                .iter()
                .all(|field| others.contains(&field.as_str()) || te && field == "te: trailers"),
            "{fields:?}"
        );
        assert_eq!(
            fields.iter().any(|field| field == "te: trailers"),
            te,
            "{fields:?}"
        );
        assert!(fields.contains(&"x-one".to_string()), "{fields:?}");
    }
    assert!(seen[1].contains(&"x-two".to_string()), "{seen:?}");
    client.close();
}

/// A field value the caller padded with whitespace goes trimmed, as
/// HTTP/1.1's server reads it (RFC 9110 §5.5: the padding is not part of
/// the value): HTTP/2 forbids it (RFC 9113 §8.2.1), and a server that
/// checks ends the whole connection for it (`tests/http2_real.rs`). A
/// padded `Host` is the stream's `:authority`, trimmed, as an unpadded one
/// is.
#[test]
fn field_values_padded_with_whitespace_go_trimmed() {
    let server = H2Server::start(|stream| async move {
        let request = &stream.request;
        let field = |name: &str| {
            let value = request.headers().get(name);
            format!("{:?}", value.map(|v| String::from_utf8_lossy(v.as_bytes())))
        };
        let seen = format!(
            "{} {} {} {}",
            request.uri().authority().map_or("-", |a| a.as_str()),
            field("x-pad"),
            field("x-tab"),
            field("authorization"),
        );
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut stream = stream;
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(Bytes::from(seen), true);
        }
    });
    let client = h2c().build().unwrap();
    let seen =
        |request: tickless::RequestBuilder| request.send().wait().unwrap().text().wait().unwrap();
    // With no connection-specific field beside it.
    let padded = client.get(server.url("/")).header("x-pad", "  padded  ");
    assert_eq!(
        seen(padded),
        format!("{} Some(\"padded\") None None", server.addr())
    );
    // With them.
    let all = client
        .get(server.url("/"))
        .header("x-pad", "  padded  ")
        .header("x-tab", "\tin the middle\t stays\t")
        .header("authorization", " Bearer t ")
        .header("host", " virtual.example ")
        .header("connection", "keep-alive");
    assert_eq!(
        seen(all),
        "virtual.example Some(\"padded\") Some(\"in the middle\\t stays\") Some(\"Bearer t\")"
    );
    client.close();
}

/// A POST, PUT or PATCH with an empty body says `content-length: 0`, as
/// over HTTP/1.1 (RFC 9110 §8.6: a user agent normally sends it for a
/// POST even when it is 0): IIS (`http.sys`) answers such a request
/// without it `411 Length Required`, over HTTP/2 too. Other methods with
/// no body say nothing of a length, as over HTTP/1.1.
#[test]
fn an_empty_post_put_or_patch_says_its_length_is_zero() {
    let server = H2Server::start(|stream| async move {
        let length = stream
            .request
            .headers()
            .get_all(http::header::CONTENT_LENGTH)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(",");
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut stream = stream;
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(Bytes::from(length), true);
        }
    });
    let client = h2c().build().unwrap();
    let length = |method: http::Method, body: Option<&'static str>| {
        let mut request = client.request(method, server.url("/"));
        if let Some(body) = body {
            request = request.body(body);
        }
        request.send().wait().unwrap().text().wait().unwrap()
    };
    for method in [http::Method::POST, http::Method::PUT, http::Method::PATCH] {
        assert_eq!(length(method.clone(), Some("")), "0", "{method}");
        assert_eq!(length(method.clone(), None), "0", "{method}");
        assert_eq!(length(method.clone(), Some("abc")), "3", "{method}");
    }
    for method in [
        http::Method::GET,
        http::Method::DELETE,
        http::Method::OPTIONS,
    ] {
        assert_eq!(length(method.clone(), None), "", "{method}");
    }
    client.close();
}

/// `Expect: 100-continue` is HTTP/1.1's: over HTTP/2 the header is not
/// sent and the body goes at once — not after `expect_continue_timeout`,
/// here longer than the request may take.
#[test]
fn over_http2_an_expectation_is_not_sent_and_the_body_goes_at_once() {
    let expects = Arc::new(Mutex::new(Vec::new()));
    let server = H2Server::start({
        let expects = expects.clone();
        move |stream| {
            let expect = stream.request.headers().get("expect").cloned();
            expects.lock().unwrap().push(expect);
            echo(stream)
        }
    });
    let client = h2c()
        .expect_continue_timeout(Duration::from_secs(600))
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let response = client
        .post(server.url("/"))
        .body("sent at once")
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.bytes().wait().unwrap(), "sent at once");
    assert_eq!(*expects.lock().unwrap(), [None]);
    client.close();
}

/// Nor does a `307` wait for anything there: a streamed body has begun to
/// go (HTTP/2 sends it with the request, as it sends no `Expect`) when the
/// server answers its HEADERS with a `307`, so that `307` is the response,
/// as for any streamed body that began to go — not followed with a body
/// cut short or empty.
#[test]
fn over_http2_a_307_to_a_streamed_body_that_expected_continue_is_the_response() {
    let paths = Arc::new(Mutex::new(Vec::new()));
    let server = H2Server::start({
        let paths = paths.clone();
        move |stream| {
            paths
                .lock()
                .unwrap()
                .push(stream.request.uri().path().to_string());
            async move {
                let mut respond = stream.respond;
                let moved = http::Response::builder()
                    .status(307)
                    .header("location", "/to")
                    .body(())
                    .unwrap();
                let _ = respond.send_response(moved, true);
            }
        }
    });
    let client = h2c()
        .expect_continue_timeout(Duration::from_secs(600))
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let reader = std::io::Cursor::new(vec![b'r'; 100_000]);
    let response = client
        .put(server.url("/from"))
        .body(Upload::from_reader(reader, None))
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), 307);
    assert_eq!(*paths.lock().unwrap(), ["/from"]);
    client.close();
}

#[test]
fn a_hundred_concurrent_requests_share_one_connection() {
    let server = H2Server::start(|stream| async move {
        // Held a little, so that they are in flight together.
        tokio::time::sleep(Duration::from_millis(50)).await;
        answer(stream, 200, b"ok").await
    });
    let client = h2c().build().unwrap();
    let futures: Vec<_> = (0..100)
        .map(|i| client.get(server.url(&format!("/{i}"))).send())
        .collect();
    for future in futures {
        let response = future.wait().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.bytes().wait().unwrap(), "ok");
    }
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert_eq!(server.stats.streams.load(Ordering::SeqCst), 100);
    assert!(
        server.stats.max_open.load(Ordering::SeqCst) > 1,
        "the streams were not multiplexed"
    );
    assert_eq!(client.stats().http2_streams_opened, 100);
    assert_eq!(client.stats().open_connections, 1);
    client.close();
}

#[test]
fn requests_beyond_the_servers_stream_limit_wait_for_a_stream() {
    let server = H2Server::start_with(
        |builder| {
            builder.max_concurrent_streams(4);
        },
        |stream| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            answer(stream, 200, b"ok").await
        },
    );
    let client = h2c().build().unwrap();
    let futures: Vec<_> = (0..20)
        .map(|_| client.get(server.url("/")).send())
        .collect();
    for future in futures {
        assert_eq!(future.wait().unwrap().bytes().wait().unwrap(), "ok");
    }
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert!(server.stats.max_open.load(Ordering::SeqCst) <= 4);
    client.close();
}

#[test]
fn an_upload_in_memory_and_a_streamed_one_are_echoed() {
    let server = H2Server::start(echo);
    let client = h2c().build().unwrap();
    let small = client
        .post(server.url("/echo"))
        .body("in memory")
        .send()
        .wait()
        .unwrap();
    assert_eq!(small.bytes().wait().unwrap(), "in memory");
    // Larger than every window on the way: flow control has to move.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let reader = std::io::Cursor::new(big.clone());
    let response = client
        .post(server.url("/echo"))
        .body(Upload::from_reader(reader, Some(big.len() as u64)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.bytes().wait().unwrap(), big);
    client.close();
}

/// An async body made in a tokio runtime that paces itself with tokio's
/// timer goes whole over HTTP/2 too: it is polled inside that runtime, on
/// the client's loop (`tests/streaming_bodies.rs` has it over HTTP/1.1).
/// Before 2026-12-07 tokio panicked there, and the request failed with
/// `Error::RequestBody`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_from_an_async_body_of_the_callers_tokio_runtime_is_echoed() {
    let server = H2Server::start(echo);
    let client = h2c().build().unwrap();
    let body = Upload::from_stream(support::bodies::Throttled::new(5));
    let response = client.post(server.url("/echo")).body(body).send().await;
    let echoed = response.unwrap().bytes().await.unwrap();
    assert_eq!(echoed, "tick;".repeat(5));
    client.close();
}

#[test]
fn an_upload_piece_of_4_gib_and_more_keeps_asking_for_window() {
    // `h2` takes the capacity asked for as a `u32`: a piece of 4 GiB and
    // 100 bytes once asked for 100 bytes, then, at 4 GiB left, for none,
    // and its stream waited for capacity for ever. The zeroes are never
    // written (`vec!` of zeroes maps them lazily): reading them costs no
    // memory, and the server needs only a few MiB to tell.
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = received.clone();
    let server = H2Server::start(move |mut stream| {
        let received = counted.clone();
        async move {
            let body = stream.request.body_mut();
            while let Some(Ok(data)) = body.data().await {
                let _ = body.flow_control().release_capacity(data.len());
                received.fetch_add(data.len(), Ordering::SeqCst);
            }
        }
    });
    let client = h2c().build().unwrap();
    let huge = Bytes::from(vec![0u8; (1 << 32) + 100]);
    let future = client.post(server.url("/huge")).body(huge).send();
    assert!(
        eventually(CEILING, || received.load(Ordering::SeqCst) > 4 << 20),
        "the server got {} bytes",
        received.load(Ordering::SeqCst)
    );
    assert!(future.cancel());
    client.close();
}

/// An async body of the given pieces, in order (empty ones included).
struct Pieces(std::collections::VecDeque<&'static str>);

impl tickless::http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        let piece = self.0.pop_front();
        std::task::Poll::Ready(
            piece.map(|piece| Ok(tickless::http_body::Frame::data(piece.into()))),
        )
    }
}

#[test]
fn an_empty_piece_of_a_streamed_upload_does_not_end_it() {
    // An empty data frame is no end (`http_body` allows it; HTTP/1.1
    // skips it): the rest of the body still goes.
    let server = H2Server::start(echo);
    let client = h2c().build().unwrap();
    for pieces in [vec!["first", "", "second"], vec!["", "whole"]] {
        let whole: String = pieces.concat();
        let response = client
            .post(server.url("/echo"))
            .body(Upload::from_stream(Pieces(pieces.into())))
            .request_timeout(CEILING)
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.bytes().wait().unwrap(), whole.as_bytes());
    }
    client.close();
}

/// An async body of a declared length that gives it, then never ends.
struct WholeThenPending(Option<&'static str>);

impl tickless::http_body::Body for WholeThenPending {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        match self.0.take() {
            Some(piece) => {
                std::task::Poll::Ready(Some(Ok(tickless::http_body::Frame::data(piece.into()))))
            }
            None => std::task::Poll::Pending,
        }
    }

    fn size_hint(&self) -> tickless::http_body::SizeHint {
        tickless::http_body::SizeHint::with_exact(5)
    }
}

#[test]
fn a_streamed_upload_that_gave_its_length_ends_though_its_source_never_does() {
    // As over HTTP/1.1, where the server has the body whole once its
    // Content-Length has come: the stream ends then, not when (if ever)
    // the source says so.
    let server = H2Server::start(echo);
    let client = h2c().build().unwrap();
    let response = client
        .post(server.url("/echo"))
        .body(Upload::from_stream(WholeThenPending(Some("whole"))))
        .request_timeout(CEILING)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "whole");
    client.close();
}

/// An async body that panics when first polled.
struct PanickingBody;

impl tickless::http_body::Body for PanickingBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<tickless::http_body::Frame<Bytes>, Self::Error>>> {
        panic!("the upload's body panics");
    }
}

#[test]
fn an_upload_body_that_panics_fails_its_own_stream_only() {
    // The caller's code that panics on a loop ends at most its own
    // exchange (tests/panicking_callbacks.rs): not the other streams of
    // the connection it shares.
    let (seen_tx, seen) = std::sync::mpsc::channel::<()>();
    let seen_tx = Mutex::new(seen_tx);
    let answer_now = Arc::new(tokio::sync::Notify::new());
    let release = answer_now.clone();
    let server = H2Server::start(move |stream| {
        let waiting = stream.request.uri().path() == "/waits";
        if waiting {
            let _ = seen_tx.lock().unwrap().send(());
        }
        let release = release.clone();
        async move {
            if waiting {
                release.notified().await;
            }
            answer(stream, 200, b"answered").await
        }
    });
    let client = h2c().build().unwrap();
    let waits = client
        .get(server.url("/waits"))
        .request_timeout(CEILING)
        .send();
    seen.recv_timeout(CEILING)
        .expect("the first stream is open");
    let error = client
        .post(server.url("/upload"))
        .body(Upload::from_stream(PanickingBody))
        .request_timeout(CEILING)
        .send()
        .wait()
        .unwrap_err();
    assert!(matches!(error, Error::RequestBody { .. }), "{error:?}");
    answer_now.notify_one();
    let response = waits.wait().unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "answered");
    client.close();
}

/// What a server saw of a request's body on one stream: its DATA bytes,
/// and whether a DATA frame ended the stream.
#[derive(Debug, Default, Clone, Copy)]
struct BodySeen {
    data: usize,
    ended: bool,
}

#[test]
fn a_streamed_upload_that_gives_more_or_fewer_bytes_than_its_length_fails_unsent() {
    // As over HTTP/1.1: the request fails with `Error::RequestBody`, and
    // the server never sees a body that passes for whole, nor a byte past
    // its length. (The server answers a body that ends, so that a client
    // sending one fails the test rather than hanging it.)
    let seen: Arc<Mutex<HashMap<u32, BodySeen>>> = Arc::default();
    let record = seen.clone();
    let server = RawH2Server::start(move |mut conn| {
        while let Some(frame) = conn.read_frame() {
            match frame.kind {
                SETTINGS if frame.flags & ACK == 0 => conn.send(&settings_ack()),
                DATA => {
                    let ended = frame.flags & END_STREAM != 0;
                    let mut seen = record.lock().unwrap();
                    let body = seen.entry(frame.stream).or_default();
                    body.data += frame.payload.len();
                    body.ended |= ended;
                    drop(seen);
                    if ended {
                        conn.send(&ok_headers(frame.stream));
                    }
                }
                _ => {}
            }
        }
    });
    let client = h2c().build().unwrap();
    for (bytes, declared) in [(10usize, 20u64), (30, 20)] {
        let result = client
            .post(server.url("/"))
            .body(Upload::from_reader(
                std::io::Cursor::new(vec![b'z'; bytes]),
                Some(declared),
            ))
            .request_timeout(CEILING)
            .send()
            .wait();
        assert!(
            matches!(result, Err(Error::RequestBody { .. })),
            "{bytes} for {declared}: {result:?}"
        );
    }
    client.close();
    drop(server);
    for (stream, body) in seen.lock().unwrap().iter() {
        assert!(
            !body.ended && body.data <= 20,
            "stream {stream}: the server saw {body:?}"
        );
    }
}

/// Answers `stream` with `len` bytes of 7s, sent as the client's window
/// allows.
async fn stream_sevens(mut stream: H2Stream, len: usize) {
    let response = http::Response::builder().status(200).body(()).unwrap();
    let Ok(mut send) = stream.respond.send_response(response, false) else {
        return;
    };
    let chunk = Bytes::from(vec![7u8; 16 * 1024]);
    let mut sent = 0;
    while sent < len {
        send.reserve_capacity(chunk.len());
        match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(n)) if n > 0 => {
                let n = n.min(chunk.len()).min(len - sent);
                let _ = send.send_data(chunk.slice(..n), sent + n >= len);
                sent += n;
            }
            Some(Ok(_)) => {}
            _ => return,
        }
    }
    let _ = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
}

#[test]
fn bodies_read_one_after_another_do_not_starve_each_other_of_the_connection_window() {
    // Eight responses of 2 MiB at once, their bodies read in order: each
    // waiting body holds its pipe's window and its stream's window, and
    // those must not take the connection's window from the one being read.
    const LEN: usize = 2 << 20;
    let server = H2Server::start(|stream| stream_sevens(stream, LEN));
    let client = h2c()
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let futures: Vec<_> = (0..8)
        .map(|i| client.get(server.url(&format!("/{i}"))).send())
        .collect();
    let responses: Vec<_> = futures.into_iter().map(|f| f.wait().unwrap()).collect();
    // Until every waiting body has taken what its windows let in.
    assert!(eventually(CEILING, || client.stats().buffered_body_bytes
        >= 7 * 256 * 1024));
    for (i, response) in responses.into_iter().enumerate() {
        let body = response
            .bytes()
            .wait()
            .unwrap_or_else(|e| panic!("body {i}: {e}"));
        assert_eq!(body.len(), LEN, "body {i}");
    }
    client.close();
}

/// A body with no declared length that grows past `max_body_bytes` gives
/// a streaming reader every byte up to the limit, then `BodyTooLarge`, as
/// one read to the close does over HTTP/1.1: the small DATA frames within
/// it (which the client gathers before it hands them over) and the part
/// of the frame that passes it within it, all come in one burst here.
#[test]
fn a_body_growing_past_the_limit_gives_every_byte_within_it_first() {
    let server = RawH2Server::start(|mut conn| {
        let id = conn.read_requests(1)[0];
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        for piece in [&b"abc"[..], b"def", b"ghijkl"] {
            out.extend(frame(DATA, 0, id, piece));
        }
        conn.send(&out);
        conn.drain(CEILING);
    });
    let client = h2c().max_body_bytes(8).build().unwrap();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut read = Vec::new();
    let error = loop {
        match response.chunk().wait() {
            Ok(Some(chunk)) => read.extend_from_slice(&chunk),
            Ok(None) => panic!("read whole: {read:?}"),
            Err(error) => break error,
        }
    };
    assert!(
        matches!(error, Error::BodyTooLarge { limit: 8, .. }),
        "{error:?}"
    );
    assert_eq!(read, b"abcdefgh");
    client.close();
}

#[test]
fn max_body_bytes_bounds_an_http2_body_as_it_does_an_http1_one() {
    const LEN: usize = 4 << 20;
    const LIMIT: u64 = 1 << 20;
    // No content-length: counted as it comes; with one: the head delivered
    // and the body refused at once — unless no body can follow it (a
    // HEAD's answer, a 304).
    let server = H2Server::start(|stream| async move {
        let path = stream.request.uri().path().to_owned();
        if path == "/declared" || path == "/not-modified" {
            let bodiless = stream.request.method() == http::Method::HEAD || path == "/not-modified";
            let response = http::Response::builder()
                .status(if path == "/declared" { 200 } else { 304 })
                .header("content-length", LEN.to_string())
                .body(())
                .unwrap();
            let mut respond = stream.respond;
            if let Ok(mut send) = respond.send_response(response, bodiless) {
                let _ = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
            }
        } else if stream.request.uri().path() == "/small" {
            stream_sevens(stream, 10).await;
        } else {
            stream_sevens(stream, LEN).await;
        }
    });
    let client = h2c().max_body_bytes(LIMIT).build().unwrap();
    let whole = client.get(server.url("/")).send().wait().unwrap();
    let error = whole.bytes().wait().unwrap_err();
    assert!(
        matches!(error, Error::BodyTooLarge { limit: LIMIT, .. }),
        "{error:?}"
    );
    let mut streamed = client.get(server.url("/")).send().wait().unwrap();
    let mut got = 0;
    let error = loop {
        match streamed.body_mut().chunk().wait() {
            Ok(Some(chunk)) => got += chunk.len(),
            Ok(None) => panic!("the whole body came: {got} bytes"),
            Err(error) => break error,
        }
    };
    assert!(got as u64 <= LIMIT, "{got} bytes handed out");
    assert!(matches!(error, Error::BodyTooLarge { .. }), "{error:?}");
    let declared = client.get(server.url("/declared")).send().wait().unwrap();
    assert_eq!(declared.status(), 200);
    let error = declared.bytes().wait().unwrap_err();
    assert!(matches!(error, Error::BodyTooLarge { .. }), "{error:?}");
    let head = client.head(server.url("/declared")).send().wait().unwrap();
    assert_eq!(head.status(), 200);
    assert!(head.bytes().wait().unwrap().is_empty());
    let not_modified = client
        .get(server.url("/not-modified"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(not_modified.status(), 304);
    assert!(not_modified.bytes().wait().unwrap().is_empty());
    // The client goes on.
    let small = client.get(server.url("/small")).send().wait().unwrap();
    assert_eq!(small.bytes().wait().unwrap().len(), 10);
    client.close();
}

#[test]
fn a_large_response_streams_through_a_small_window() {
    const LEN: usize = 4 << 20;
    let server = H2Server::start(|stream| stream_sevens(stream, LEN));
    let client = h2c()
        .body_window(64 * 1024)
        .http2_initial_stream_window_size(64 * 1024)
        .build()
        .unwrap();
    let mut response = client.get(server.url("/big")).send().wait().unwrap();
    // Nobody reads for a while: the client fills its window, and buffers no
    // more than its windows.
    assert!(eventually(CEILING, || client.stats().buffered_body_bytes >= 48 * 1024));
    std::thread::sleep(Duration::from_millis(300));
    let buffered = client.stats().buffered_body_bytes;
    assert!(buffered <= 64 * 1024 + 16 * 1024, "buffered {buffered}");
    let mut total = 0;
    let body = response.body_mut();
    while let Some(chunk) = body.chunk().wait().unwrap() {
        total += chunk.len();
    }
    assert_eq!(total, LEN);
    client.close();
}

#[test]
fn windows_set_past_what_http2_allows_are_taken_as_its_largest() {
    // A window is at most 2^31 - 1 (RFC 9113 §6.9.1). Asked for more, a
    // stream window went in SETTINGS as it was — the server refused the
    // connection, and every request failed — and a connection window
    // panicked in `h2`, on the loop.
    fetch_mib_with_windows(&[(Some(u32::MAX), None), (None, Some(1 << 31))]);
}

/// Fetches 1 MiB with each pair of (stream, connection) receive windows
/// set as given (`None`: the default), on a client of its own, within
/// [`CEILING`], and asserts it came whole.
fn fetch_mib_with_windows(windows: &[(Option<u32>, Option<u32>)]) {
    const LEN: usize = 1 << 20;
    let server = H2Server::start(|stream| stream_sevens(stream, LEN));
    for &(stream_window, connection_window) in windows {
        let mut builder = h2c().request_timeout(CEILING);
        if let Some(window) = stream_window {
            builder = builder.http2_initial_stream_window_size(window);
        }
        if let Some(window) = connection_window {
            builder = builder.http2_initial_connection_window_size(window);
        }
        let client = builder.build().unwrap();
        let body = client
            .get(server.url("/"))
            .send()
            .wait()
            .and_then(|response| response.bytes().wait())
            .unwrap_or_else(|e| panic!("windows {stream_window:?}, {connection_window:?}: {e}"));
        assert_eq!(body.len(), LEN);
        client.close();
    }
}

/// Receive windows too small to use are raised to 16 KiB: the client gives
/// a window back as the body's reader takes its bytes, so with a stream
/// window of 0 no byte of any body came, with a connection window of 0
/// none past the first 64 KiB (HTTP/2's initial window, which `h2` never
/// topped up to a target of 0), and with a window of 1 a byte a round
/// trip — every response hung, or crawled, until its timeout. The bound
/// is generous: 1 MiB on loopback takes milliseconds.
#[test]
fn receive_windows_too_small_to_use_are_raised_to_a_floor() {
    fetch_mib_with_windows(&[
        (Some(0), None),
        (Some(1), None),
        (None, Some(0)),
        (None, Some(1)),
        (Some(0), Some(0)),
    ]);
}

#[test]
fn a_server_that_stops_reading_an_upload_holds_the_pump_back() {
    let (seen_tx, seen_rx) = std::sync::mpsc::channel::<()>();
    let seen_tx = std::sync::Mutex::new(seen_tx);
    let server = H2Server::start_with(
        |builder| {
            builder.initial_window_size(16 * 1024);
        },
        move |mut stream| {
            let seen = seen_tx.lock().unwrap().clone();
            async move {
                // Takes one frame, then reads nothing more for ever.
                let _ = stream.request.body_mut().data().await;
                let _ = seen.send(());
                await_reset(&mut stream.respond, &stream.stats, Duration::from_secs(30)).await;
            }
        },
    );
    let client = h2c().body_window(64 * 1024).build().unwrap();
    let produced = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    struct Counting(Arc<std::sync::atomic::AtomicUsize>);
    impl std::io::Read for Counting {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(8 * 1024);
            buf[..n].fill(1);
            self.0.fetch_add(n, Ordering::SeqCst);
            Ok(n)
        }
    }
    let future = client
        .post(server.url("/upload"))
        .body(Upload::from_reader(Counting(produced.clone()), None))
        .request_timeout(Duration::from_secs(30))
        .send();
    seen_rx
        .recv_timeout(CEILING)
        .expect("the server saw the upload");
    std::thread::sleep(Duration::from_millis(300));
    let first = produced.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    let second = produced.load(Ordering::SeqCst);
    // Bounded: the windows and the pipe, not the whole (endless) body.
    assert!(first < 1 << 20, "the pump read {first} bytes");
    assert_eq!(
        first, second,
        "the pump went on while the server read nothing"
    );
    assert!(future.cancel());
    assert!(matches!(future.wait().unwrap_err(), Error::Cancelled));
    client.close();
}

#[test]
fn a_cancel_mid_stream_resets_that_stream_only() {
    let server = H2Server::start(|mut stream| async move {
        if stream.request.uri().path() == "/stall" {
            await_reset(&mut stream.respond, &stream.stats, Duration::from_secs(30)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            answer(stream, 200, b"fine").await
        }
    });
    let client = h2c().build().unwrap();
    let other = client.get(server.url("/ok")).send();
    let stalled = client.get(server.url("/stall")).send();
    assert!(eventually(CEILING, || server
        .stats
        .streams
        .load(Ordering::SeqCst)
        == 2));
    assert!(stalled.cancel());
    assert!(matches!(stalled.wait().unwrap_err(), Error::Cancelled));
    assert!(eventually(CEILING, || server.stats.resets() == vec![0x8]));
    assert_eq!(other.wait().unwrap().bytes().wait().unwrap(), "fine");
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    client.close();
}

#[test]
fn dropping_a_body_mid_stream_resets_the_stream() {
    let server = H2Server::start(|mut stream| async move {
        let response = http::Response::builder().status(200).body(()).unwrap();
        let Ok(mut send) = stream.respond.send_response(response, false) else {
            return;
        };
        let _ = send.send_data(Bytes::from_static(b"first part"), false);
        let reason = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
        if let Ok(reason) = reason {
            stream.stats.record_reset(reason);
        }
    });
    let client = h2c().build().unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    drop(response);
    assert!(eventually(CEILING, || server.stats.resets() == vec![0x8]));
    // The connection goes on.
    let server_ok = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(server_ok.status(), 200);
    client.close();
}

#[test]
fn closing_the_client_with_streams_in_flight_ends_every_future() {
    let server = H2Server::start(|mut stream| async move {
        await_reset(&mut stream.respond, &stream.stats, Duration::from_secs(30)).await;
    });
    let client = h2c()
        .use_event_loop_timeouts(true)
        .request_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let futures: Vec<_> = (0..10)
        .map(|_| client.get(server.url("/")).send())
        .collect();
    assert!(eventually(CEILING, || server
        .stats
        .streams
        .load(Ordering::SeqCst)
        == 10));
    assert_close_ends(&client, futures);
}

#[test]
fn a_response_whose_body_has_all_come_completes_even_if_dropped_at_once() {
    // HEADERS with END_STREAM: the body is empty and ended with the head.
    // A caller that drops the response at once has cancelled nothing: the
    // exchange completes, whichever of the drop and the end the loop sees
    // first.
    let server = H2Server::start(|stream| answer(stream, 204, b""));
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    for _ in 0..200 {
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.status(), 204);
        drop(response);
    }
    assert!(eventually(CEILING, || client.stats().in_flight == 0));
    let failed: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|(event, _)| matches!(event, Event::Failed(..)))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(server.stats.resets(), Vec::<u32>::new());
    client.close();
}

#[test]
fn a_connection_past_its_time_to_live_finishes_its_streams_and_takes_no_new_one() {
    let server = H2Server::start(|stream| async move {
        if stream.request.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
        answer(stream, 200, b"ok").await
    });
    let client = h2c()
        .connection_ttl(Duration::from_millis(200))
        .build()
        .unwrap();
    let slow = client.get(server.url("/slow")).send();
    assert!(eventually(CEILING, || server
        .stats
        .streams
        .load(Ordering::SeqCst)
        == 1));
    std::thread::sleep(Duration::from_millis(400));
    // Past the first connection's time to live: a new one.
    let fresh = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(fresh.bytes().wait().unwrap(), "ok");
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 2);
    // The stream in flight on the old one finishes there.
    assert_eq!(slow.wait().unwrap().bytes().wait().unwrap(), "ok");
    // And both close once their last stream has ended, each past its time
    // to live (not by the idle timeout: a minute by default).
    assert!(eventually(CEILING, || client.stats().open_connections == 0));
    client.close();
}

/// Requests with bodies past the server's stream limit (one stream at a
/// time): each waits in `h2` to open and then sends its body — `h2` tells
/// the connection, not the stream, when it opens, and the stream is polled
/// then too. Each is answered with its own body, before the timeout.
#[test]
fn posts_past_the_servers_stream_limit_send_their_bodies() {
    let server = H2Server::start_with(
        |builder| {
            builder.max_concurrent_streams(1);
        },
        echo,
    );
    let client = h2c()
        .event_loops(1)
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // The connection knows the server's limit before the burst.
    let warm = client
        .post(server.url("/"))
        .body("warm")
        .send()
        .wait()
        .unwrap();
    assert_eq!(warm.bytes().wait().unwrap(), "warm");
    let futures: Vec<_> = (0..3)
        .map(|i| {
            client
                .post(server.url("/"))
                .body(format!("body {i}"))
                .send()
        })
        .collect();
    for (i, future) in futures.into_iter().enumerate() {
        let response = future.wait().unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(response.bytes().wait().unwrap(), format!("body {i}"));
    }
    client.close();
}

/// Holds the loop in `on_connection_pooled` — as the request is handed to
/// the shared connection, before it waits there — past the connection's
/// idle timeout.
struct SlowToTake;

impl tickless::EventListener for SlowToTake {
    fn on_connection_pooled(&self, _: &tickless::RequestInfo, _: &tickless::ConnectionInfo) {
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A request handed to an idle connection in the turn its idle timeout
/// falls due is not lost with it: the connection is not idle any more.
#[test]
fn a_request_taken_as_the_idle_timeout_falls_due_is_answered() {
    let server = H2Server::start(|stream| answer(stream, 200, b"ok"));
    let client = h2c()
        .event_loops(1)
        .pooled_connection_idle_timeout(Duration::from_millis(150))
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let first = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(first.bytes().wait().unwrap(), "ok");
    let second = client
        .get(server.url("/"))
        .listener(Arc::new(SlowToTake))
        .send()
        .wait()
        .unwrap_or_else(|e| panic!("the request on the idle connection: {e}"));
    assert_eq!(second.bytes().wait().unwrap(), "ok");
    client.close();
}

#[test]
fn a_host_header_of_the_callers_is_the_streams_authority() {
    // The server answers with the authority it was given, and how many
    // Host fields came with it.
    let server = H2Server::start(|stream| async move {
        let request = &stream.request;
        let seen = format!(
            "{} host={}",
            request.uri().authority().map_or("-", |a| a.as_str()),
            request.headers().get_all(http::header::HOST).iter().count()
        );
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut stream = stream;
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(Bytes::from(seen), true);
        }
    });
    let client = h2c().build().unwrap();
    // What the server saw of a request with `host` for its Host header.
    let seen = |host: Option<&str>| {
        let mut request = client.get(server.url("/"));
        if let Some(host) = host {
            request = request.header("Host", host);
        }
        request.send().wait().unwrap().text().wait().unwrap()
    };
    // As over HTTP/1.1, where it is the Host line sent (and as curl does
    // over HTTP/2): not dropped for the URI's.
    assert_eq!(
        seen(Some("virtual.example:8443")),
        "virtual.example:8443 host=0"
    );
    // Userinfo has no place in `:authority`: the URI's goes.
    let uris = format!("{} host=0", server.addr());
    assert_eq!(seen(Some("me@virtual.example")), uris);
    assert_eq!(seen(None), uris);
    client.close();
}

/// A URL's port that is its scheme's default (`http://h:80/`) is not in
/// the stream's `:authority`, as it is not in HTTP/1.1's `Host`: the URL
/// standard drops it, and curl and the browsers send `h`. (The server is
/// reached by an override of the name at port 80.)
#[test]
fn a_default_port_written_out_is_not_in_the_streams_authority() {
    let server = H2Server::start(|stream| async move {
        let seen = stream
            .request
            .uri()
            .authority()
            .map_or("-", |a| a.as_str())
            .to_owned();
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut stream = stream;
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(Bytes::from(seen), true);
        }
    });
    let client = h2c()
        .resolve_port("default.test", 80, &[server.addr()])
        .resolve_port("default.test", 443, &[server.addr()])
        .build()
        .unwrap();
    let seen = |url: &str| {
        client
            .get(url)
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap()
    };
    assert_eq!(seen("http://default.test:80/"), "default.test");
    assert_eq!(seen("http://default.test:080/x"), "default.test");
    // Another scheme's default is a port like any other.
    assert_eq!(seen("http://default.test:443/"), "default.test:443");
    client.close();
}

/// `:path` is a request-target as HTTP/1.1's is (RFC 9113 §8.3.1): what a
/// URL's path or query holds that is not ASCII, or a space, or a `"{}` in
/// a path, `'` in a query, goes percent-encoded in UTF-8 there too, as
/// reqwest sends it.
#[test]
fn a_path_that_is_not_ascii_goes_percent_encoded_as_the_streams_path() {
    let server = H2Server::start(|stream| async move {
        let seen = stream
            .request
            .uri()
            .path_and_query()
            .map_or("-", |target| target.as_str())
            .to_owned();
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut stream = stream;
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(Bytes::from(seen), true);
        }
    });
    let client = h2c().build().unwrap();
    for (path, sent) in [
        ("/\u{e4}?q=\u{e9}#f", "/%C3%A4?q=%C3%A9"),
        ("/a b?q=c d", "/a%20b?q=c%20d"),
        // What `http` takes and a URL parser encodes.
        ("/{\"a\"}?'b'", "/%7B%22a%22%7D?%27b%27"),
    ] {
        let response = client.get(server.url(path)).send().wait().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.text().wait().unwrap(), sent, "{path:?}");
    }
    client.close();
}

/// Over HTTP/2 too, four requests sent at once and waited on in order,
/// the first attempt of each answered 503 with a 4 MiB body (past the
/// body window) and retried once: each is answered 200. The 503 retried
/// is let go at once (its stream holds no connection the retry waits
/// for); the 503s not yet waited on hold their streams' windows only.
#[test]
fn a_batch_retried_for_503s_with_large_bodies_is_answered_over_http2() {
    let answered = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let server = H2Server::start(move |mut stream| {
        let path = stream.request.uri().path().to_string();
        let first = answered.lock().unwrap().insert(path.clone());
        async move {
            let (status, body) = if first {
                (503, Bytes::from(vec![b'x'; 4 << 20]))
            } else {
                (200, Bytes::from(format!("done {path}")))
            };
            let response = http::Response::builder().status(status).body(()).unwrap();
            let Ok(mut send) = stream.respond.send_response(response, false) else {
                return;
            };
            let _ = send.send_data(body, true);
            let _ = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
        }
    });
    let policy = tickless::retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .jitter(false);
    let client = h2c()
        .max_connections_per_host(1)
        .request_timeout(Duration::from_secs(10))
        .retry(policy)
        .build()
        .unwrap();
    let futures: Vec<_> = (0..4)
        .map(|index| client.get(server.url(&format!("/{index}"))).send())
        .collect();
    each_answered_in_order("over HTTP/2", futures, |index| format!("done /{index}"));
    client.close();
}

/// Over HTTP/2 the 503 a retry follows is let go as soon as the retry is
/// decided — its stream reset while the backoff runs — not kept until
/// the retry is sent, as an HTTP/1.1 one keeps its connection: a stream
/// holds no connection the retry waits for.
#[test]
fn a_503_retried_over_http2_is_let_go_before_its_backoff_ends() {
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = H2Server::start(move |stream| {
        let first = answered.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                static LARGE: std::sync::LazyLock<Vec<u8>> =
                    std::sync::LazyLock::new(|| vec![b'x'; 4 << 20]);
                answer(stream, 503, &LARGE).await
            } else {
                answer(stream, 200, b"done").await
            }
        }
    });
    let clock = tickless::timer::ManualClock::new();
    let policy = tickless::retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::from_secs(1), Duration::from_secs(1))
        .jitter(false);
    let recorder = Recorder::new();
    let client = h2c()
        .listener(recorder.clone())
        .clock(Arc::new(clock.clone()))
        .retry(policy)
        .build()
        .unwrap();
    let future = client.get(server.url("/")).send();
    let waiter = std::thread::spawn(move || future.wait());
    let retried = || {
        recorder
            .events()
            .iter()
            .any(|(event, _)| matches!(event, Event::Retry(..)))
    };
    assert!(eventually(CEILING, retried));
    assert!(
        eventually(CEILING, || client.stats().http2_streams_open == 0),
        "the 503's stream is still open during the backoff"
    );
    assert_eq!(client.stats().http2_streams_opened, 1, "no retry yet");
    clock.advance(Duration::from_secs(1));
    let response = waiter.join().unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "done");
    client.close();
}
