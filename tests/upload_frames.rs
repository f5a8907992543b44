//! The frames of an async upload (`Upload::from_stream`), over HTTP/1.1
//! and HTTP/2: a body always ready with empty frames does not hold its
//! loop from the other connections and timeouts on it; its trailers go
//! (chunked trailers, a trailing HEADERS frame) when it has no length,
//! and are dropped when it has one; its small frames go gathered, whole
//! and in order.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use support::h2_server::*;
use support::*;
use tickless::http_body::{Body, Frame};
use tickless::{Bytes, Client, Error, Upload};

/// Far past anything the tests wait for on a loop that is not held.
const CEILING: Duration = Duration::from_secs(20);

/// An upload always ready with an empty frame, until `stop` is set (then
/// it fails). Counts its polls.
struct EmptyForever {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicU64>,
}

impl Body for EmptyForever {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.stop.load(Ordering::SeqCst) {
            return Poll::Ready(Some(Err(std::io::Error::other("stopped"))));
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::new()))))
    }
}

/// Sets its flag when dropped: an [`EmptyForever`] stops even when the
/// test fails, so that its loop (held, before the fix) can be closed.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// On one loop: an upload of empty frames to `spinning_url`, with a
/// request timeout; then a GET to `other_url`, which completes while the
/// upload goes on (its body was polled meanwhile), and the upload's
/// timeout fires (not before its time).
fn empty_frames_leave_the_loop_to_others(
    client: &Client,
    spinning_url: String,
    other_url: String,
    version: &str,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(stop.clone());
    let polls = Arc::new(AtomicU64::new(0));
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let upload = client
        .post(spinning_url)
        .request_timeout(timeout)
        .body(Upload::from_stream(EmptyForever {
            stop: stop.clone(),
            polls: polls.clone(),
        }))
        .send();
    assert!(
        eventually(CEILING, || polls.load(Ordering::SeqCst) > 0),
        "{version}: the upload's body was never polled"
    );
    let other = client.get(other_url).send();
    let text = within(&format!("{version}: the other request"), CEILING, || {
        other.wait().unwrap().text().wait().unwrap()
    });
    assert_eq!(text, "other", "{version}");
    let error = within(&format!("{version}: the upload's timeout"), CEILING, || {
        upload.wait().unwrap_err()
    });
    assert!(
        matches!(error, Error::RequestTimeout(_)),
        "{version}: {error:?}"
    );
    assert!(started.elapsed() >= timeout, "{version}: fired early");
    client.close();
}

#[test]
fn an_upload_of_empty_frames_leaves_its_loop_to_others_over_http1() {
    let spinning = TestServer::start(Behaviour::NeverAnswer);
    let other = TestServer::respond(|_| ok("other"));
    for event_loop_timeouts in [true, false] {
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        empty_frames_leave_the_loop_to_others(
            &client,
            spinning.url("/"),
            other.url("/"),
            &format!("HTTP/1.1, loop timeouts {event_loop_timeouts}"),
        );
    }
}

#[test]
fn an_upload_of_empty_frames_leaves_its_loop_to_others_over_http2() {
    // Streams on one connection: the upload never ends (nor is answered),
    // the other is answered at once.
    let server = H2Server::start(|stream| async move {
        if stream.request.uri().path() == "/other" {
            return answer(stream, 200, b"other").await;
        }
        let mut body = stream.request.into_body();
        while let Some(Ok(_)) = body.data().await {}
    });
    for event_loop_timeouts in [true, false] {
        let client = Client::builder()
            .event_loops(1)
            .http2_prior_knowledge()
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        empty_frames_leave_the_loop_to_others(
            &client,
            server.url("/spinning"),
            server.url("/other"),
            &format!("HTTP/2, loop timeouts {event_loop_timeouts}"),
        );
    }
}

/// An upload of `data` then `trailers`, its length an exact size hint if
/// `sized` (chunked otherwise).
struct WithTrailers {
    data: Option<Bytes>,
    trailers: Option<http::HeaderMap>,
    sized: bool,
}

impl Body for WithTrailers {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn size_hint(&self) -> tickless::http_body::SizeHint {
        match (&self.data, self.sized) {
            (Some(data), true) => tickless::http_body::SizeHint::with_exact(data.len() as u64),
            (None, true) => tickless::http_body::SizeHint::with_exact(0),
            (_, false) => tickless::http_body::SizeHint::default(),
        }
    }
}

fn with_trailers(fields: &[(&'static str, &'static str)], sized: bool) -> Upload {
    let mut trailers = http::HeaderMap::new();
    for (name, value) in fields {
        trailers.append(*name, http::HeaderValue::from_static(value));
    }
    Upload::from_stream(WithTrailers {
        data: Some(Bytes::from_static(b"the body")),
        trailers: Some(trailers),
        sized,
    })
}

/// Answers with the body it got, its framing and its trailers.
fn trailers_echo() -> TestServer {
    TestServer::respond(|request| {
        let framing = match request.header("content-length") {
            Some(length) => format!("length {length}"),
            None => request.header("transfer-encoding").unwrap_or("").to_owned(),
        };
        let trailers: Vec<String> = request
            .trailers
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let body = String::from_utf8_lossy(&request.body);
        ok(&format!("{framing}|{body}|{}", trailers.join(",")))
    })
}

/// A one-loop client for each protocol, with its server's URL: HTTP/1.1
/// to `http1`, HTTP/2 (prior knowledge) to `http2`.
fn over_both_protocols(http1: String, http2: String) -> [(Client, String); 2] {
    let http2_client = Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    [
        (Client::builder().event_loops(1).build().unwrap(), http1),
        (http2_client, http2),
    ]
}

fn post_text(client: &Client, url: String, body: Upload) -> Result<String, Error> {
    client.post(url).body(body).send().wait()?.text().wait()
}

#[test]
fn an_upload_s_trailers_go_after_its_last_chunk_over_http1() {
    let server = trailers_echo();
    let client = Client::builder().event_loops(1).build().unwrap();
    let fields = [("x-checksum", "abc123"), ("x-rows", "1"), ("x-rows", "2")];
    let text = post_text(&client, server.url("/"), with_trailers(&fields, false)).unwrap();
    assert_eq!(text, "chunked|the body|x-checksum=abc123,x-rows=1,x-rows=2");
    // With a length, there is no room for them: the body alone goes.
    let text = post_text(&client, server.url("/"), with_trailers(&fields, true)).unwrap();
    assert_eq!(text, "length 8|the body|");
    client.close();
}

#[test]
fn an_upload_s_trailers_that_may_not_be_trailers_fail_it_over_both_protocols() {
    let http1 = trailers_echo();
    let http2 = H2Server::start(|stream| async move {
        let mut respond = stream.respond;
        let _ = respond.send_response(http::Response::new(()), true);
    });
    let clients = over_both_protocols(http1.url("/"), http2.url("/"));
    for (client, url) in &clients {
        for name in ["content-length", "transfer-encoding", "connection", "te"] {
            let body = with_trailers(&[("x-fine", "yes"), (name, "0")], false);
            let error = post_text(client, url.clone(), body).unwrap_err();
            assert!(
                matches!(error, Error::RequestBody { .. }),
                "{url} {name}: {error:?}"
            );
            let text = chain_text(&error);
            assert!(text.contains(name), "{url} {name}: {text}");
        }
        client.close();
    }
}

/// An origin's credentials in an upload's trailers (`Authorization`,
/// `Cookie`) fail it too: a streamed body that waited for `100 Continue`
/// and was answered with a redirect goes whole to where it leads, and a
/// redirect to another origin drops those headers (they were meant for
/// the first) — in trailers they went along. The second origin gets no
/// request; the first never asked for the body.
#[test]
fn an_upload_s_credential_trailers_fail_it_and_never_follow_a_redirect() {
    let elsewhere = trailers_echo();
    let landed = elsewhere.url("/landed");
    // Answers the head at once, before any `100 Continue`: the body waits.
    let redirecting = TestServer::start(Behaviour::custom(move |mut stream, _| {
        use std::io::Write;
        if read_head(&mut stream).is_some() {
            let redirect = response(307, &[("Location", &landed), ("Connection", "close")], b"");
            let _ = stream.write_all(&redirect);
        }
    }));
    let client = Client::builder()
        .event_loops(1)
        .no_proxy()
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let secret = "Bearer for-the-first-origin";
    for name in ["authorization", "cookie"] {
        let body = with_trailers(&[("x-checksum", "abc123"), (name, secret)], false);
        let sent = client
            .post(redirecting.url("/upload"))
            .header("authorization", secret)
            .expect_continue(true)
            .body(body)
            .send()
            .wait()
            .and_then(|response| response.text().wait());
        let error = sent.unwrap_err();
        assert!(
            matches!(error, Error::RequestBody { .. }),
            "{name}: {error:?}"
        );
        let text = chain_text(&error);
        assert!(text.contains(name), "{name}: {text}");
        assert!(!text.contains(secret), "{name}: {text}");
    }
    for request in elsewhere.requests() {
        let credentials = request
            .trailers
            .iter()
            .chain(&request.headers)
            .filter(|(name, _)| {
                name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("cookie")
            });
        assert_eq!(credentials.count(), 0, "{request:?}");
    }
    client.close();
}

/// A proxy's credentials in an upload's trailers fail it, as the fields
/// that frame the message do: `Proxy-Authorization` authenticates the
/// request to a proxy before its content (RFC 9110 §6.5.1), and no proxy
/// reads it from a trailer section. Through a tunnel (SOCKS5 here) it
/// would have gone to the origin, where a credential of the proxy must
/// never go (see `tickless::Proxy`).
#[test]
fn an_upload_s_proxy_authorization_trailer_fails_it_and_never_reaches_an_origin() {
    let origin = trailers_echo();
    let socks = support::real::Microsocks::start();
    let client = Client::builder()
        .event_loops(1)
        .no_proxy()
        .proxy(tickless::Proxy::all(&socks.url()).unwrap())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let credentials = "Basic cHJveHk6c2VjcmV0";
    let fine = with_trailers(&[("x-checksum", "abc123")], false);
    let text = post_text(&client, origin.url("/"), fine).unwrap();
    assert_eq!(
        text, "chunked|the body|x-checksum=abc123",
        "through the tunnel"
    );
    let body = with_trailers(
        &[
            ("x-checksum", "abc123"),
            ("proxy-authorization", credentials),
        ],
        false,
    );
    let error = post_text(&client, origin.url("/"), body).unwrap_err();
    assert!(matches!(error, Error::RequestBody { .. }), "{error:?}");
    let text = chain_text(&error);
    assert!(text.contains("proxy-authorization"), "{text}");
    assert!(!text.contains(credentials), "{text}");
    client.close();
    assert_no_proxy_credentials_reached(&origin);
    // Over HTTP/2 as well: the same check, before either frames them.
    let http2 = H2Server::start(|stream| async move {
        let mut respond = stream.respond;
        let _ = respond.send_response(http::Response::new(()), true);
    });
    let clients = over_both_protocols(origin.url("/"), http2.url("/"));
    for (client, url) in &clients {
        let body = with_trailers(&[("proxy-authorization", credentials)], false);
        let error = post_text(client, url.clone(), body).unwrap_err();
        assert!(
            matches!(error, Error::RequestBody { .. }),
            "{url}: {error:?}"
        );
        client.close();
    }
    assert_no_proxy_credentials_reached(&origin);
}

/// No request `origin` recorded carried a `Proxy-Authorization` trailer.
fn assert_no_proxy_credentials_reached(origin: &TestServer) {
    for request in origin.requests() {
        let sent = request.trailers.iter();
        let credentials = sent.filter(|(name, _)| name.eq_ignore_ascii_case("proxy-authorization"));
        assert_eq!(credentials.count(), 0, "{request:?}");
    }
}

#[test]
fn an_upload_s_trailers_go_as_trailing_headers_over_http2() {
    let server = H2Server::start(|stream| async move {
        let H2Stream {
            request,
            mut respond,
            ..
        } = stream;
        let length = request
            .headers()
            .get("content-length")
            .map(|v| v.to_str().unwrap().to_owned());
        let mut body = request.into_body();
        let mut data = Vec::new();
        while let Some(Ok(piece)) = body.data().await {
            let _ = body.flow_control().release_capacity(piece.len());
            data.extend_from_slice(&piece);
        }
        let trailers = match body.trailers().await {
            Ok(Some(trailers)) => trailers
                .iter()
                .map(|(name, value)| format!("{name}={}", value.to_str().unwrap()))
                .collect::<Vec<_>>()
                .join(","),
            Ok(None) => String::new(),
            Err(error) => format!("error {error}"),
        };
        let text = format!(
            "{}|{}|{trailers}",
            length.map_or("no length".to_owned(), |l| format!("length {l}")),
            String::from_utf8_lossy(&data)
        );
        let mut send = respond
            .send_response(http::Response::new(()), false)
            .unwrap();
        let _ = send.send_data(Bytes::from(text), true);
    });
    let client = Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let fields = [("x-checksum", "abc123"), ("grpc-status", "0")];
    let text = post_text(&client, server.url("/"), with_trailers(&fields, false)).unwrap();
    assert_eq!(text, "no length|the body|x-checksum=abc123,grpc-status=0");
    let text = post_text(&client, server.url("/"), with_trailers(&fields, true)).unwrap();
    assert_eq!(text, "length 8|the body|");
    // Values padded with whitespace go trimmed, as in the head: HTTP/2
    // forbids the padding (RFC 9113 §8.2.1).
    let padded = [("x-checksum", " abc123\t"), ("grpc-status", "0 ")];
    let text = post_text(&client, server.url("/"), with_trailers(&padded, false)).unwrap();
    assert_eq!(text, "no length|the body|x-checksum=abc123,grpc-status=0");
    client.close();
}

/// An upload of `left` one-byte frames, always ready.
struct OneByteFrames {
    left: usize,
}

impl Body for OneByteFrames {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
    }
}

/// One-byte pieces of an upload, as many as fit one HTTP/2 stream's
/// initial window (the server below grants no more).
const ONE_BYTE_PIECES: usize = 50_000;

/// The pieces an async body gives, each as small as a line or a record,
/// are sent gathered while it has more at once: not a chunk (HTTP/1.1)
/// or a DATA frame (HTTP/2) each. Before, each went alone — over HTTP/1.1
/// a chunk of three writes (its size, its byte, its CRLF), over HTTP/2 a
/// frame queued in `h2`, which bounds what it holds by data bytes alone:
/// against a server that took the window but read nothing more, an upload
/// of one-byte pieces held hundreds of thousands of frames, some 340
/// bytes of memory for each byte of the body.
#[test]
fn an_upload_of_small_pieces_goes_in_few_chunks_and_frames() {
    // HTTP/1.1: the chunked body's bytes on the wire, framing and all.
    let http1 = TestServer::start(Behaviour::custom(|mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        let (read, whole) = read_to_last_chunk(&mut stream, Vec::new());
        let _ = std::io::Write::write_all(&mut stream, &ok(&format!("{read} {whole}")));
        drain(&mut stream);
    }));
    let client = Client::builder().event_loops(1).build().unwrap();
    let text = client
        .post(http1.url("/"))
        .body(Upload::from_stream(OneByteFrames {
            left: ONE_BYTE_PIECES,
        }))
        .request_timeout(CEILING)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    let (read, whole) = text.split_once(' ').unwrap();
    assert_eq!(whole, "true");
    let read: usize = read.parse().unwrap();
    assert!(
        (ONE_BYTE_PIECES..ONE_BYTE_PIECES + ONE_BYTE_PIECES / 10).contains(&read),
        "{read} bytes on the wire for {ONE_BYTE_PIECES} bytes of body"
    );
    client.close();

    // HTTP/2: the DATA frames that carry the body.
    // Counted here, asserted by the test: a panic in the server's script
    // would not reach it.
    let frames = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let (counted, received_there) = (frames.clone(), received.clone());
    let http2 = RawH2Server::start(move |mut conn| {
        while let Some(frame) = conn.read_frame() {
            match frame.kind {
                SETTINGS if frame.flags & ACK == 0 => conn.send(&settings_ack()),
                DATA => {
                    received_there.fetch_add(frame.payload.len() as u64, Ordering::SeqCst);
                    if !frame.payload.is_empty() {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                    if frame.flags & END_STREAM != 0 {
                        conn.send(&ok_headers(frame.stream));
                    }
                }
                _ => {}
            }
        }
    });
    let client = Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = client
        .post(http2.url("/"))
        .body(Upload::from_stream(OneByteFrames {
            left: ONE_BYTE_PIECES,
        }))
        .request_timeout(CEILING)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    // The answer came at the body's end, every byte of it counted.
    assert_eq!(received.load(Ordering::SeqCst), ONE_BYTE_PIECES as u64);
    let frames = frames.load(Ordering::SeqCst);
    assert!(
        frames <= (ONE_BYTE_PIECES / 100) as u64,
        "{frames} DATA frames for {ONE_BYTE_PIECES} one-byte pieces"
    );
    client.close();
}

/// An async body of `pieces`, each ready at once, of exactly their length
/// (`sized`) or of none.
struct Pieces {
    pieces: std::collections::VecDeque<Bytes>,
    sized: bool,
}

impl Body for Pieces {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.pieces.pop_front().map(|piece| Ok(Frame::data(piece))))
    }

    fn size_hint(&self) -> tickless::http_body::SizeHint {
        let length = self.pieces.iter().map(|piece| piece.len() as u64).sum();
        match self.sized {
            true => tickless::http_body::SizeHint::with_exact(length),
            false => tickless::http_body::SizeHint::default(),
        }
    }
}

/// Pieces gathered and pieces too large to gather, in every order, with a
/// length or without: each body arrives whole and in order. A piece that
/// ends the gathering goes next — with a length, also the one that makes
/// the body whole, which is not taken for sent.
#[test]
fn small_pieces_gathered_and_large_ones_go_whole_and_in_order() {
    let http1 = TestServer::respond(|request| ok(&String::from_utf8_lossy(&request.body)));
    let http2 = H2Server::start(|mut stream| async move {
        let body = stream.request.body_mut();
        let mut got = Vec::new();
        while let Some(Ok(data)) = body.data().await {
            let _ = body.flow_control().release_capacity(data.len());
            got.extend_from_slice(&data);
        }
        let response = http::Response::builder().status(200).body(()).unwrap();
        if let Ok(mut send) = stream.respond.send_response(response, false) {
            let _ = send.send_data(Bytes::from(got), true);
        }
    });
    let clients = over_both_protocols(http1.url("/"), http2.url("/"));
    let piece = |byte: u8, len: usize| Bytes::from(vec![byte; len]);
    let bodies = [
        vec![piece(b'a', 1), piece(b'b', 20_000)],
        vec![piece(b'a', 1), piece(b'b', 20_000), piece(b'c', 1)],
        vec![piece(b'a', 20_000), piece(b'b', 1), piece(b'c', 2)],
        vec![
            piece(b'a', 10_000),
            piece(b'b', 10_000),
            piece(b'c', 10_000),
        ],
        vec![piece(b'a', 1); 3],
    ];
    for (client, url) in &clients {
        for pieces in &bodies {
            let sent: Vec<u8> = pieces.concat();
            for sized in [true, false] {
                let body = Upload::from_stream(Pieces {
                    pieces: pieces.iter().cloned().collect(),
                    sized,
                });
                let what = format!("{url} {} bytes, sized {sized}", sent.len());
                let text = client
                    .post(url.clone())
                    .body(body)
                    .request_timeout(CEILING)
                    .send()
                    .wait()
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"))
                    .text()
                    .wait()
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"));
                assert!(text.as_bytes() == sent, "{what}: {} bytes back", text.len());
            }
        }
        client.close();
    }
}
