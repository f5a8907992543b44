//! Decompression end to end: each coding this build has, its bytes written
//! at odd splits (Content-Length and chunked framing), stacked codings, a
//! bomb stopped at `max_body_bytes` (at once, even when the server says
//! nothing more; a body of exactly the limit whole), bodies that lie about
//! their coding, responses that have no body to decode, turning it off,
//! the same over HTTP/2, and a real server (httpbin) choosing what we
//! accept.
//!
//! gzip and deflate are in the default build; `br` and `zstd` are tested
//! with `--features brotli,zstd` (scripts/test runs both).

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;
use support::h2_server::{H2Server, H2Stream};
use support::real::Httpbin;
use support::*;
use tickless::{Bytes, Client, Error};

fn client() -> Client {
    Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Text that compresses well but not to nothing: 200 KiB, longer than one
/// read buffer and one decoded chunk.
fn original() -> Vec<u8> {
    let mut text = Vec::new();
    let mut n = 0u64;
    while text.len() < 200 * 1024 {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        writeln!(text, "line {} of the body, {:x}", text.len(), n >> 40).unwrap();
    }
    text
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn raw_deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

#[cfg(feature = "brotli")]
fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        encoder.write_all(data).unwrap();
    }
    out
}

#[cfg(feature = "zstd")]
fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(data, 3).unwrap()
}

/// Writes `bytes` in pieces of 1, 2, 3, 5, 7, 11, 13 bytes then larger
/// ones, each flushed, so the client's reads split the stream anywhere.
fn dribble(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let small = [1, 2, 3, 5, 7, 11, 13];
    let mut at = 0;
    let mut piece = 0;
    while at < bytes.len() {
        let len = small.get(piece).copied().unwrap_or(4093 + piece % 7);
        let end = (at + len).min(bytes.len());
        stream.write_all(&bytes[at..end])?;
        stream.flush()?;
        if piece < small.len() {
            thread::sleep(Duration::from_millis(1));
        }
        at = end;
        piece += 1;
    }
    Ok(())
}

/// A server that answers every request on a connection with
/// `respond(request)`, dribbled.
fn dribbling(respond: impl Fn(&RecordedRequest) -> Vec<u8> + Send + Sync + 'static) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        while let Ok(request) = reader.read_request(&mut stream) {
            if dribble(&mut stream, &respond(&request)).is_err() {
                return;
            }
        }
    }))
}

/// The body encoded as `coding` names it, sent with Content-Length
/// (`/length`) or chunked in 1000-byte chunks (`/chunked`).
fn encoded_server(coding: &'static str, encoded: Vec<u8>) -> TestServer {
    dribbling(move |request| {
        let headers = [("Content-Encoding", coding)];
        if request.target == "/chunked" {
            let chunks: Vec<&[u8]> = encoded.chunks(1000).collect();
            let mut out = chunked(200, &chunks, &[]);
            // The coding header goes in the head, before the framing.
            let at = out.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
            out.splice(
                at..at,
                format!("Content-Encoding: {coding}\r\n").into_bytes(),
            );
            out
        } else {
            response(200, &headers, &encoded)
        }
    })
}

fn round_trip(coding: &'static str, encoded: Vec<u8>) {
    let expected = original();
    let server = encoded_server(coding, encoded);
    let client = client();
    for path in ["/length", "/chunked"] {
        let response = client.get(server.url(path)).send().wait().unwrap();
        assert_eq!(response.status(), 200);
        let headers = response.headers();
        assert!(headers.get("content-encoding").is_none(), "{coding} {path}");
        assert!(headers.get("content-length").is_none(), "{coding} {path}");
        let body = response.bytes().wait().unwrap();
        assert!(body == expected, "{coding} {path}: {} bytes", body.len());
    }
    client.close();
}

#[test]
fn gzip_at_odd_splits() {
    round_trip("gzip", gzip(&original()));
}

#[test]
fn deflate_zlib_wrapped_and_raw() {
    round_trip("deflate", zlib(&original()));
    round_trip("deflate", raw_deflate(&original()));
}

#[test]
fn stacked_codings_are_undone_in_reverse() {
    // `deflate, gzip`: deflated first, then gzipped.
    round_trip("deflate, gzip", gzip(&zlib(&original())));
}

#[cfg(feature = "brotli")]
#[test]
fn brotli_at_odd_splits() {
    round_trip("br", brotli(&original()));
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_at_odd_splits() {
    round_trip("zstd", zstd(&original()));
}

#[test]
fn accept_encoding_names_the_codings_this_build_has() {
    let server = TestServer::respond(|_| ok(""));
    let client = client();
    client.get(server.url("/")).send().wait().unwrap();
    let accepted = server.requests()[0]
        .header("accept-encoding")
        .unwrap()
        .to_owned();
    let codings: Vec<&str> = accepted.split(',').map(str::trim).collect();
    assert!(codings.contains(&"gzip") && codings.contains(&"deflate"));
    assert_eq!(codings.contains(&"br"), cfg!(feature = "brotli"));
    assert_eq!(codings.contains(&"zstd"), cfg!(feature = "zstd"));
    // The caller's own value is kept.
    client
        .get(server.url("/"))
        .header("accept-encoding", "identity")
        .send()
        .wait()
        .unwrap();
    assert_eq!(
        server.requests()[1].header("accept-encoding"),
        Some("identity")
    );
    client.close();
}

#[test]
fn a_flushed_piece_of_a_stream_is_read_whole_before_the_server_sends_more() {
    // A gzip stream (as events or a long poll send): a piece that decodes
    // to several decoded chunks, flushed, then nothing until the client has
    // read it all — the rest of the stream waits for the client's word.
    for size in [40_000usize, 200_000, 1 << 20] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let (read_all, client_read) = mpsc::channel::<()>();
        let server = thread::spawn(move || {
            let mut stream = accept_in_time(&listener);
            read_head(&mut stream).unwrap();
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(&vec![b'a'; size]).unwrap();
            encoder.flush().unwrap(); // Z_SYNC_FLUSH: decodable so far
            let flushed = std::mem::take(encoder.get_mut());
            let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\
                        Transfer-Encoding: chunked\r\n\r\n";
            let chunk = |bytes: &[u8]| {
                [format!("{:x}\r\n", bytes.len()).as_bytes(), bytes, b"\r\n"].concat()
            };
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(&chunk(&flushed)).unwrap();
            if client_read.recv_timeout(Duration::from_secs(30)).is_err() {
                return;
            }
            encoder.write_all(b"the end").unwrap();
            let last = encoder.finish().unwrap();
            let _ = stream.write_all(&[chunk(&last), b"0\r\n\r\n".to_vec()].concat());
        });
        // A read timeout: a piece held back waits for bytes that come only
        // after it has been read whole.
        let client = Client::builder()
            .event_loops(1)
            .read_timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let mut response = client.get(&url).send().wait().unwrap();
        let mut got = 0;
        while got < size {
            let chunk = response.chunk().wait();
            let chunk = chunk.unwrap_or_else(|e| panic!("{size}: after {got} bytes: {e}"));
            got += chunk.expect("more of the piece").len();
        }
        assert_eq!(got, size);
        read_all.send(()).unwrap();
        assert_eq!(response.bytes().wait().unwrap(), "the end");
        server.join().unwrap();
        client.close();
    }
}

#[test]
fn a_bomb_stops_at_max_body_bytes() {
    // 64 MiB of zeros: 64 KiB on the wire.
    let bomb = gzip(&vec![0; 64 << 20]);
    assert!(bomb.len() < 128 * 1024);
    let server =
        TestServer::respond(move |_| response(200, &[("Content-Encoding", "gzip")], &bomb));
    let client = Client::builder()
        .event_loops(1)
        .max_body_bytes(1 << 20)
        .build()
        .unwrap();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap_err();
    match error {
        Error::BodyTooLarge { limit, .. } => assert_eq!(limit, 1 << 20),
        other => panic!("expected BodyTooLarge, got {other:?}"),
    }
    // Read as a stream, no more than the limit comes out before the error.
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut decoded = 0;
    let error = loop {
        match response.chunk().wait() {
            Ok(Some(chunk)) => decoded += chunk.len(),
            Ok(None) => panic!("the bomb decoded whole"),
            Err(error) => break error,
        }
    };
    assert!(matches!(error, Error::BodyTooLarge { .. }), "{error:?}");
    assert!(decoded <= 1 << 20, "{decoded} bytes decoded past the limit");
    client.close();
}

#[test]
fn a_body_that_lies_about_its_coding_is_a_decode_error() {
    let gzipped = gzip(&original());
    let cut = gzipped[..gzipped.len() / 2].to_vec();
    let mut trailing = gzipped.clone();
    trailing.extend_from_slice(b"garbage after the stream");
    let server = TestServer::respond(move |request| {
        let body: &[u8] = match request.target.as_str() {
            "/plain" => b"this was never gzipped",
            "/cut" => &cut,
            _ => &trailing,
        };
        response(200, &[("Content-Encoding", "gzip")], body)
    });
    let client = client();
    for path in ["/plain", "/cut", "/trailing"] {
        let response = client.get(server.url(path)).send().wait().unwrap();
        assert_eq!(response.status(), 200, "the head is fine");
        let error = response.bytes().wait().unwrap_err();
        match error {
            Error::Decode { remote, .. } => {
                assert!(remote.ends_with(&server.authority()), "{path}: {remote}")
            }
            other => panic!("{path}: expected Error::Decode, got {other:?}"),
        }
    }
    client.close();
}

#[test]
fn a_body_that_failed_to_decode_lets_its_connection_go_though_it_is_kept() {
    // Far longer than the body's window: a connection that went on reading
    // for a reader that will never take again would stop at the window and
    // hold the exchange until its request timeout.
    let garbage = vec![0xa5; 8 << 20];
    let server =
        TestServer::respond(move |_| response(200, &[("Content-Encoding", "gzip")], &garbage));
    let client = client();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let error = response.chunk().wait().unwrap_err();
    assert!(matches!(error, Error::Decode { .. }), "{error:?}");
    // The failed body is kept (`response` lives on): nobody reads it
    // again, and the exchange ends without waiting for its drop.
    assert_settles(&client, Duration::from_secs(10));
    assert!(
        response.chunk().wait().is_err(),
        "a failed body fails again"
    );
    drop(response);
    client.close();
}

#[test]
fn an_unknown_coding_is_left_as_it_came() {
    let server =
        TestServer::respond(|_| response(200, &[("Content-Encoding", "x-custom")], b"opaque"));
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.headers()["content-encoding"], "x-custom");
    assert_eq!(response.headers()["content-length"], "6");
    assert_eq!(&response.bytes().wait().unwrap()[..], b"opaque");
    client.close();
}

/// More codings stacked than are decoded (`MAX_CODINGS`, 4, as curl): the
/// response fails with a typed error, as curl fails it, rather than come
/// still encoded to a caller who asked for it decoded (the default) — its
/// connection let go. Four, even over two field lines, decode; with
/// decompression off the body comes as sent, `Content-Encoding` and all.
#[test]
fn more_stacked_codings_than_are_decoded_fail_unless_decompression_is_off() {
    let plain = b"gzipped over and over".to_vec();
    let four = gzip(&gzip(&gzip(&gzip(&plain))));
    let five = gzip(&four);
    let (four_sent, five_sent) = (four.clone(), five.clone());
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/five" => response(
            200,
            &[("Content-Encoding", "gzip, gzip, gzip, gzip, gzip")],
            &five_sent,
        ),
        _ => response(
            200,
            &[
                ("Content-Encoding", "gzip, gzip"),
                ("Content-Encoding", "gzip, gzip"),
            ],
            &four_sent,
        ),
    });
    let client = client();
    let error = client.get(server.url("/five")).send().wait().unwrap_err();
    assert!(
        matches!(error, Error::TooManyCodings { count: 5, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("stacks 5 content codings (at most 4 are decoded)"),
        "{message}"
    );
    assert_settles(&client, Duration::from_secs(10));
    let response = client.get(server.url("/four")).send().wait().unwrap();
    assert!(response.headers().get("content-encoding").is_none());
    assert_eq!(&response.bytes().wait().unwrap()[..], &plain[..]);
    let response = client
        .get(server.url("/five"))
        .decompress(false)
        .send()
        .wait()
        .unwrap();
    assert_eq!(
        response.headers()["content-encoding"],
        "gzip, gzip, gzip, gzip, gzip"
    );
    assert_eq!(&response.bytes().wait().unwrap()[..], &five[..]);
    client.close();
}

/// A response refused for its codings is never read: its connection goes
/// at once — here, with the body yet to come, closed — whether the future
/// is waited for or polled, rather than held until a timeout.
#[test]
fn a_response_refused_for_its_codings_lets_its_connection_go() {
    let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip, gzip, gzip, gzip, gzip\r\n\
        Content-Length: 1000000\r\n\r\n";
    let client = client();
    for polled in [false, true] {
        // The server stalls after the head: only the client can close.
        let server = TestServer::start(Behaviour::SendThenStall(head.as_bytes().to_vec()));
        let future = client.get(server.url("/")).send();
        let error = match polled {
            false => future.wait().unwrap_err(),
            true => block_on(future).unwrap_err(),
        };
        assert!(matches!(error, Error::TooManyCodings { .. }), "{error:?}");
        assert!(
            server.wait_for_open(0, Duration::from_secs(10)),
            "polled: {polled}: the connection was kept"
        );
        assert_settles(&client, Duration::from_secs(10));
    }
    client.close();
}

#[test]
fn head_204_and_304_are_never_decoded() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/204" => response(204, &[("Content-Encoding", "gzip")], b""),
        "/304" => response(304, &[("Content-Encoding", "gzip")], b""),
        // An answer to HEAD: the length of the body a GET would get.
        _ => response(
            200,
            &[("Content-Encoding", "gzip"), ("Content-Length", "1234")],
            b"",
        ),
    });
    let client = client();
    let response = client.head(server.url("/head")).send().wait().unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(response.headers()["content-length"], "1234");
    assert!(response.bytes().wait().unwrap().is_empty());
    for path in ["/204", "/304"] {
        let response = client.get(server.url(path)).send().wait().unwrap();
        assert_eq!(response.headers()["content-encoding"], "gzip", "{path}");
        assert!(response.bytes().wait().unwrap().is_empty());
    }
    client.close();
}

/// A 206 of an encoded body (a file stored gzipped, as S3 and most static
/// servers keep `Content-Encoding: gzip` objects, asked for by range to
/// resume a download) is a slice of the encoded bytes: it comes as it was
/// sent, its offsets those of `Content-Range`, whatever the slice holds.
#[test]
fn a_partial_content_answer_is_never_decoded() {
    let gzipped = gzip(&original());
    let served = gzipped.clone();
    let server = TestServer::respond(move |request| {
        let (from, to) = match request.target.as_str() {
            "/head-of-it" => (0, 99),
            _ => (100, served.len() - 1),
        };
        let range = format!("bytes {from}-{to}/{}", served.len());
        response(
            206,
            &[("Content-Encoding", "gzip"), ("Content-Range", &range)],
            &served[from..=to],
        )
    });
    let client = client();
    for (path, range, slice) in [
        ("/rest-of-it", "bytes=100-", &gzipped[100..]),
        ("/head-of-it", "bytes=0-99", &gzipped[..100]),
    ] {
        let response = client
            .get(server.url(path))
            .header("range", range)
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 206);
        assert_eq!(response.headers()["content-encoding"], "gzip", "{path}");
        let length = slice.len().to_string();
        assert_eq!(response.headers()["content-length"], length.as_str());
        let body = response.bytes().wait();
        assert_eq!(body.ok().as_deref(), Some(slice), "{path}");
    }
    client.close();
}

#[test]
fn with_decompression_off_the_body_comes_as_it_was_sent() {
    let gzipped = gzip(b"still compressed");
    let served = gzipped.clone();
    let server =
        TestServer::respond(move |_| response(200, &[("Content-Encoding", "gzip")], &served));
    let off = Client::builder()
        .event_loops(1)
        .no_decompress()
        .build()
        .unwrap();
    let response = off.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(response.bytes().wait().unwrap(), gzipped);
    assert_eq!(server.requests()[0].header("accept-encoding"), None);
    off.close();
    // Per request, over the client's setting.
    let on = client();
    let response = on
        .get(server.url("/"))
        .decompress(false)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.bytes().wait().unwrap(), gzipped);
    assert_eq!(server.requests()[1].header("accept-encoding"), None);
    on.close();
}

#[test]
fn httpbin_serves_what_we_accept() {
    let httpbin = Httpbin::start();
    let client = client();
    let mut routes = vec![("/gzip", "gzipped"), ("/deflate", "deflated")];
    if cfg!(feature = "brotli") {
        routes.push(("/brotli", "brotli"));
    }
    for (path, flag) in routes {
        let response = client.get(httpbin.url(path)).send().wait().unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(response.headers().get("content-encoding").is_none());
        let text = response.text().wait().unwrap();
        assert!(
            text.contains(&format!("\"{flag}\": true")),
            "{path}: {text}"
        );
    }
    client.close();
}

/// A server that sends the head of a chunked body in `coding` and one
/// piece of it, `piece`, then holds the connection open, silent, until
/// `done` says (or 30 s pass): a stream (events, a long poll) that has more
/// to say later.
fn sends_a_piece_then_waits(
    coding: &'static str,
    piece: Vec<u8>,
    done: mpsc::Receiver<()>,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    thread::spawn(move || {
        let mut stream = accept_in_time(&listener);
        read_head(&mut stream).unwrap();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\n\
             Transfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            piece.len()
        );
        stream
            .write_all(&[head.as_bytes(), &piece, b"\r\n"].concat())
            .unwrap();
        let _ = done.recv_timeout(Duration::from_secs(30));
    });
    url
}

/// Reads the body `piece` (in `coding`) begins, from a server that then
/// says nothing more, under a limit of `limit` decoded bytes: it must fail
/// with `BodyTooLarge` at once — the error is known, and the server's next
/// bytes, which would not be decoded anyway, may be long to come (here,
/// never: the request timeout would fail the body instead).
fn assert_too_large_without_more_of_the_stream(coding: &'static str, piece: &[u8], limit: u64) {
    for whole in [false, true] {
        let (done, wait) = mpsc::channel();
        let url = sends_a_piece_then_waits(coding, piece.to_vec(), wait);
        let client = Client::builder()
            .event_loops(1)
            .max_body_bytes(limit)
            .request_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let mut response = client.get(&url).send().wait().unwrap();
        let (error, decoded) = if whole {
            (response.bytes().wait().unwrap_err(), 0)
        } else {
            let mut decoded = 0;
            let error = loop {
                match response.chunk().wait() {
                    Ok(Some(chunk)) => decoded += chunk.len() as u64,
                    Ok(None) => panic!("{coding}: the piece decoded whole"),
                    Err(error) => break error,
                }
            };
            (error, decoded)
        };
        assert!(
            matches!(error, Error::BodyTooLarge { limit: l, .. } if l == limit),
            "{coding}, whole: {whole}: {error:?}"
        );
        assert!(decoded <= limit, "{decoded} bytes decoded past the limit");
        done.send(()).unwrap();
        client.close();
    }
}

#[test]
fn a_piece_that_inflates_past_the_limit_fails_without_waiting_for_more_of_the_stream() {
    // 20 000 bytes from a few dozen on the wire, against a limit of 1000:
    // the decoder stops at the limit with the rest of the piece inside it.
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&[b'a'; 20_000]).unwrap();
    encoder.flush().unwrap(); // Z_SYNC_FLUSH: decodable so far
    assert_too_large_without_more_of_the_stream("gzip", encoder.get_ref(), 1000);
}

#[test]
fn an_inner_coding_past_the_limit_fails_without_waiting_for_more_of_the_stream() {
    // `deflate, gzip`: 104 170 bytes stored in a zlib stream (104 196
    // bytes), gzipped to under 200. The zlib stream between the two
    // codings passes its own bound (the limit and a little slack: 104 193)
    // in its last bytes, when under 100 000 bytes have been decoded, and
    // just as the piece runs out.
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::none());
    zlib.write_all(&[b'a'; 104_170]).unwrap();
    let piece = gzip(&zlib.finish().unwrap());
    assert!(piece.len() < 1000);
    assert_too_large_without_more_of_the_stream("deflate, gzip", &piece, 100_000);
}

#[test]
fn a_body_that_inflates_to_exactly_the_limit_is_whole() {
    let exact = gzip(&[b'b'; 1000]);
    let server =
        TestServer::respond(move |_| response(200, &[("Content-Encoding", "gzip")], &exact));
    let client = Client::builder()
        .event_loops(1)
        .max_body_bytes(1000)
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let body = client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait();
    assert_eq!(body.unwrap(), vec![b'b'; 1000]);
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut decoded = 0;
    while let Some(chunk) = response.chunk().wait().unwrap() {
        decoded += chunk.len();
    }
    assert_eq!(decoded, 1000);
    client.close();
}

/// An HTTP/2 answer of `body` in 1000-byte DATA frames, with
/// `content-encoding: gzip` and the `extra` fields, ended by a trailer
/// `x-trailer: t` if `trailers`.
async fn answer_gzip_over_h2(
    mut stream: H2Stream,
    body: Vec<u8>,
    extra: Vec<(&'static str, String)>,
    trailers: bool,
) {
    let mut head = http::Response::builder()
        .status(200)
        .header("content-encoding", "gzip");
    for (name, value) in extra {
        head = head.header(name, value);
    }
    let ends_at_head = body.is_empty() && !trailers;
    let Ok(mut send) = stream
        .respond
        .send_response(head.body(()).unwrap(), ends_at_head)
    else {
        return;
    };
    let frames = body.chunks(1000).count();
    for (i, piece) in body.chunks(1000).enumerate() {
        let last = i + 1 == frames && !trailers;
        let _ = send.send_data(Bytes::copy_from_slice(piece), last);
    }
    if trailers {
        let mut fields = http::HeaderMap::new();
        fields.insert("x-trailer", http::HeaderValue::from_static("t"));
        let _ = send.send_trailers(fields);
    }
    // Queued frames go out while the stream lives.
    let _ = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
}

/// Over HTTP/2 as over HTTP/1.1 (the decoding is the reader's, whatever
/// the protocol): a gzip body comes decoded, its `Content-Encoding` and
/// `Content-Length` gone, read through `Read` to its trailers; an empty
/// one (the stream ended at its head) is empty; one cut short is a decode
/// error; a bomb stops at `max_body_bytes`; an answer to HEAD is not
/// decoded; and the shared connection serves on after all of them.
#[test]
fn over_http2_bodies_are_decoded_as_over_http1() {
    let expected = original();
    let gzipped = gzip(&expected);
    let bomb = gzip(&vec![0; 64 << 20]);
    let server = H2Server::start(move |stream| {
        let (body, extra, trailers) = match stream.request.uri().path() {
            "/trailers" => (gzipped.clone(), vec![], true),
            "/length" => {
                let length = vec![("content-length", gzipped.len().to_string())];
                (gzipped.clone(), length, false)
            }
            "/empty" => (Vec::new(), vec![], false),
            "/cut" => (gzipped[..gzipped.len() / 2].to_vec(), vec![], false),
            _ => (bomb.clone(), vec![], false),
        };
        answer_gzip_over_h2(stream, body, extra, trailers)
    });
    let client = Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .max_body_bytes(1 << 20)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let get = |path: &str| client.get(server.url(path)).send().wait().unwrap();

    let mut response = get("/trailers");
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert!(response.headers().get("content-encoding").is_none());
    let mut body = Vec::new();
    response.body_mut().read_to_end(&mut body).unwrap();
    assert!(body == expected, "{} bytes", body.len());
    assert_eq!(response.trailers().unwrap()["x-trailer"], "t");

    let response = get("/length");
    assert!(response.headers().get("content-length").is_none());
    assert!(response.bytes().wait().unwrap() == expected);

    assert!(get("/empty").bytes().wait().unwrap().is_empty());

    let error = get("/cut").bytes().wait().unwrap_err();
    assert!(matches!(error, Error::Decode { .. }), "{error:?}");

    let error = get("/bomb").bytes().wait().unwrap_err();
    assert!(
        matches!(error, Error::BodyTooLarge { limit, .. } if limit == 1 << 20),
        "{error:?}"
    );

    let head = client.head(server.url("/length")).send().wait().unwrap();
    assert_eq!(head.headers()["content-encoding"], "gzip");
    assert!(head.bytes().wait().unwrap().is_empty());

    assert!(get("/length").bytes().wait().unwrap() == expected);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    client.close();
}
