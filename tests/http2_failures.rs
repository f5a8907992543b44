//! HTTP/2 failures, from a server whose frames are written by hand
//! (tests/support/h2_server.rs, `RawH2Server`) or by the `h2` crate
//! (`H2Server`): GOAWAY mid-flight (streams above its last stream id go
//! again on a new connection whatever their method and the GOAWAY's code,
//! those below finish or fail with it), REFUSED_STREAM (retried once),
//! other resets (a typed error naming the code), which failures say the
//! request was not processed (`Error::is_unprocessed`: a streamed upload
//! refused or above the last stream id, not after a redirect), a server
//! that breaks the
//! protocol (the connection ends with an error: no panic, no hang), and
//! what a connection's end does to the requests still waiting on it, to
//! a body it had whole, and to a request with no answer yet on a reused
//! connection (a GET goes again, a POST does not); how many streams a new connection opens
//! before the server's SETTINGS say its limit; and frames still on their
//! way to many streams cancelled together (ignored, not the server's error).

mod support;

use std::net::Shutdown;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::h2_server::*;
use support::*;
use tickless::{Client, Error, Http2Initiator, Http2Reason};

const CEILING: Duration = Duration::from_secs(20);

/// A client of one loop speaking HTTP/2 by prior knowledge, each request
/// bounded by the test's ceiling.
fn h2c() -> tickless::ClientBuilder {
    h2c_builder(1, CEILING)
}

/// The `GOAWAY` codes told to `recorder`'s listener (`on_goaway`).
fn goaways_told(recorder: &Recorder) -> Vec<u32> {
    recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::GoAway(_, code) => Some(code),
            _ => None,
        })
        .collect()
}

#[test]
fn streams_above_a_goaways_last_stream_id_go_again_on_a_new_connection() {
    let server = RawH2Server::start(|mut conn| {
        if conn.index == 0 {
            // Three streams in flight: the first is answered, the others
            // were never processed.
            let ids = conn.read_requests(3);
            assert_eq!(ids.len(), 3);
            conn.send(&ok_headers(ids[0]));
            conn.send(&goaway(ids[0], 0));
            conn.drain(Duration::from_secs(5));
        } else {
            conn.answer_all();
        }
    });
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    // POST too: a stream the server never processed is safe to send again
    // whatever its method.
    let futures = vec![
        client.get(server.url("/a")).send(),
        client.post(server.url("/b")).body("once").send(),
        client.get(server.url("/c")).send(),
    ];
    for future in futures {
        let response = future.wait().unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), http::Version::HTTP_2);
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    assert_eq!(goaways_told(&recorder), [0]);
    let failed: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|(e, _)| matches!(e, Event::Failed(..)))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    client.close();
}

/// The stream id a request's first stream had, from its own recorder.
fn first_stream(recorder: &Recorder) -> Option<u32> {
    recorder
        .events()
        .into_iter()
        .find_map(|(event, _)| match event {
            Event::StreamOpened(_, id) => Some(id),
            _ => None,
        })
}

#[test]
fn after_a_goaway_with_an_error_a_post_above_its_last_id_goes_again_and_those_below_end() {
    for code in [0x1, 0xb] {
        let server = RawH2Server::start(move |mut conn| {
            if conn.index == 0 {
                // Three streams in flight; the GOAWAY's last stream id is
                // the middle one. The first is answered after it, the
                // middle one never (the server closes), the last was never
                // processed.
                let ids = conn.read_requests(3);
                assert_eq!(ids.len(), 3);
                conn.send(&goaway(ids[1], code));
                conn.send(&ok_headers(ids[0]));
                let _ = conn.stream.shutdown(std::net::Shutdown::Write);
                conn.drain(Duration::from_secs(5));
            } else {
                conn.answer_all();
            }
        });
        let client = h2c().build().unwrap();
        // POSTs all: not idempotent, so only "never processed" lets one go
        // again.
        let sent: Vec<_> = (0..3)
            .map(|i| {
                let own = Recorder::new();
                let future = client
                    .post(server.url(&format!("/{i}")))
                    .body("once")
                    .listener(own.clone())
                    .send();
                (future, own)
            })
            .collect();
        let mut by_stream: Vec<_> = sent
            .into_iter()
            .map(|(future, own)| {
                let result = future.wait();
                let opened = own
                    .events()
                    .into_iter()
                    .filter(|(event, _)| matches!(event, Event::StreamOpened(..)))
                    .count();
                (first_stream(&own).unwrap(), result, opened)
            })
            .collect();
        by_stream.sort_by_key(|(id, _, _)| *id);
        let [below, at, above] = <[_; 3]>::try_from(by_stream).unwrap();
        // Below the last id: answered, on its one stream.
        assert_eq!(below.1.as_ref().unwrap().status(), 200);
        assert_eq!(below.2, 1);
        // At it: processed, never answered; it fails with the GOAWAY's code.
        match &at.1 {
            Err(Error::Http2 {
                reason, initiator, ..
            }) => {
                assert_eq!(*reason, Http2Reason(code), "{:?}", at.1);
                assert_eq!(*initiator, Http2Initiator::Remote);
            }
            other => panic!("code {code}: {other:?}"),
        }
        assert_eq!(at.2, 1);
        // Above it: never processed, so sent again on a new connection.
        assert_eq!(above.1.as_ref().unwrap().status(), 200, "code {code}");
        assert_eq!(above.2, 2);
        assert_eq!(server.connections.load(Ordering::SeqCst), 2);
        client.close();
    }
}

#[test]
fn a_refused_stream_is_retried_once() {
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        conn.send(&rst_stream(ids[0], 0x7));
        // The retry, on the same connection.
        let ids = conn.read_requests(1);
        if let Some(&id) = ids.first() {
            conn.send(&ok_headers(id));
        }
        conn.drain(Duration::from_secs(5));
    });
    let client = h2c().build().unwrap();
    let response = client
        .post(server.url("/"))
        .body("x")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    client.close();
}

#[test]
fn a_stream_refused_twice_fails_with_the_reason() {
    let server = RawH2Server::start(|mut conn| loop {
        let ids = conn.read_requests(1);
        let Some(&id) = ids.first() else { return };
        conn.send(&rst_stream(id, 0x7));
    });
    let client = h2c().build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    match error {
        Error::Http2 {
            reason,
            initiator,
            connection,
            ..
        } => {
            assert_eq!(reason, Http2Reason::REFUSED_STREAM);
            assert_eq!(initiator, Http2Initiator::Remote);
            assert!(!connection);
        }
        ref other => panic!("{other:?}"),
    }
    // Neither attempt was processed.
    assert!(error.is_unprocessed(), "{error}");
    client.close();
}

#[test]
fn a_reset_stream_fails_that_stream_with_its_reason_and_the_connection_goes_on() {
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(2);
        conn.send(&rst_stream(ids[0], 0x2));
        conn.send(&ok_headers(ids[1]));
        conn.answer_all();
    });
    let client = h2c().build().unwrap();
    let first = client.get(server.url("/first")).send();
    let second = client.get(server.url("/second")).send();
    let error = first.wait().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Http2 {
                reason: Http2Reason::INTERNAL_ERROR,
                connection: false,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("INTERNAL_ERROR"), "{error}");
    assert!(!error.is_unprocessed(), "{error}");
    assert_eq!(second.wait().unwrap().status(), 200);
    assert_eq!(
        client
            .get(server.url("/third"))
            .send()
            .wait()
            .unwrap()
            .status(),
        200
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close();
}

#[test]
fn a_goaway_with_an_error_fails_the_streams_it_processed() {
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        conn.send(&goaway(ids[0], 0xb));
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    });
    let client = h2c().build().unwrap();
    let error = client
        .post(server.url("/"))
        .body("x")
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Http2 {
                reason: Http2Reason::ENHANCE_YOUR_CALM,
                initiator: Http2Initiator::Remote,
                ..
            }
        ),
        "{error:?}"
    );
    // At the GOAWAY's last stream id: the server may have processed it.
    assert!(!error.is_unprocessed(), "{error}");
    client.close();
}

/// A server may follow its `GOAWAY(NO_ERROR)` with another carrying an
/// error (RFC 9113 §6.8) before it closes — hypercorn does, at the next
/// frame that comes (tests/http2_real.rs). The stream it processed and left
/// unanswered fails naming the later code, whether the two frames came in
/// one read or the client had taken in the first (its PING says so) before
/// the second came: the same frames, the same error.
#[test]
fn a_goaway_with_an_error_after_a_graceful_one_fails_the_streams_it_processed_with_its_code() {
    for apart in [false, true] {
        let server = RawH2Server::start(move |mut conn| {
            let ids = conn.read_requests(1);
            let (graceful, failing) = (goaway(ids[0], 0x0), goaway(ids[0], 0x1));
            if apart {
                conn.send(&graceful);
                // The client PINGs once it has seen the GOAWAY.
                read_ping(&mut conn, CEILING).expect("a PING after the GOAWAY");
                conn.send(&failing);
            } else {
                conn.send(&[graceful, failing].concat());
            }
            // A FIN, not a reset: the client reads all that came first.
            let _ = conn.stream.shutdown(Shutdown::Write);
            conn.drain(CEILING);
        });
        let client = h2c().build().unwrap();
        let error = client
            .post(server.url("/"))
            .body("x")
            .send()
            .wait()
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::Http2 {
                    reason: Http2Reason::PROTOCOL_ERROR,
                    initiator: Http2Initiator::Remote,
                    connection: true,
                    ..
                }
            ),
            "apart: {apart}: {error:?}"
        );
        // At the GOAWAYs' last stream id: the server may have processed it.
        assert!(!error.is_unprocessed(), "apart: {apart}: {error}");
        client.close();
    }
}

/// A streamed upload, whose source the client cannot send again, as the
/// error of a request the server never processed tells the caller.
fn streamed() -> tickless::Upload {
    tickless::Upload::from_reader(std::io::Cursor::new(b"streamed".to_vec()), None)
}

/// A request the server never processed (above its GOAWAY's last stream
/// id) that cannot go again, its body streamed, fails saying so: the
/// caller may send it again, even a POST. The one at the last stream id,
/// which the server may have processed, does not say so.
#[test]
fn a_streamed_upload_above_a_goaways_last_stream_id_fails_as_not_processed() {
    for code in [0x0, 0x2] {
        let server = RawH2Server::start(move |mut conn| {
            let ids = conn.read_requests(2);
            assert_eq!(ids.len(), 2);
            conn.send(&goaway(ids[0], code));
            let _ = conn.stream.shutdown(Shutdown::Write);
            conn.drain(Duration::from_secs(5));
        });
        let client = h2c().build().unwrap();
        let sent: Vec<_> = (0..2)
            .map(|i| {
                let own = Recorder::new();
                let future = client
                    .post(server.url(&format!("/{i}")))
                    .body(streamed())
                    .listener(own.clone())
                    .send();
                (future, own)
            })
            .collect();
        let mut by_stream: Vec<_> = sent
            .into_iter()
            .map(|(future, own)| {
                let result = future.wait();
                (first_stream(&own).unwrap(), result)
            })
            .collect();
        by_stream.sort_by_key(|(id, _)| *id);
        let [(_, at), (_, above)] = <[_; 2]>::try_from(by_stream).unwrap();
        let above = above.unwrap_err();
        match &above {
            Error::Http2 {
                reason,
                initiator: Http2Initiator::Remote,
                connection: true,
                unprocessed: true,
                ..
            } => assert_eq!(*reason, Http2Reason(code)),
            other => panic!("code {code}: {other:?}"),
        }
        assert!(above.is_unprocessed());
        assert!(
            above
                .to_string()
                .ends_with("(not processed by the server: safe to send again)"),
            "{above}"
        );
        let at = at.unwrap_err();
        assert!(!at.is_unprocessed(), "code {code}: {at:?}");
        assert!(!chain_text(&at).contains("not processed"), "{at}");
        // Neither went again: a streamed body is sent once.
        assert_eq!(server.connections.load(Ordering::SeqCst), 1);
        client.close();
    }
}

/// A streamed upload refused with REFUSED_STREAM fails as not processed;
/// a reset with any other code does not say so.
#[test]
fn a_refused_streamed_upload_fails_as_not_processed_and_other_resets_do_not() {
    for (code, unprocessed) in [(0x7, true), (0x2, false), (0x8, false), (0x0, false)] {
        let server = RawH2Server::start(move |mut conn| {
            let ids = conn.read_requests(1);
            conn.send(&rst_stream(ids[0], code));
            conn.drain(Duration::from_secs(5));
        });
        let client = h2c().build().unwrap();
        let error = client
            .post(server.url("/"))
            .body(streamed())
            .send()
            .wait()
            .unwrap_err();
        match &error {
            Error::Http2 {
                reason,
                initiator: Http2Initiator::Remote,
                connection: false,
                ..
            } => assert_eq!(*reason, Http2Reason(code)),
            other => panic!("code {code}: {other:?}"),
        }
        assert_eq!(error.is_unprocessed(), unprocessed, "code {code}: {error}");
        assert_eq!(
            error.to_string().contains("not processed by the server"),
            unprocessed,
            "{error}"
        );
        assert_eq!(server.connections.load(Ordering::SeqCst), 1);
        client.close();
    }
}

/// A file's body (`Upload::from_file`) refused with REFUSED_STREAM goes
/// again, whole, read from where it began — its source is not spent, as
/// a body from any other `Read` is (above).
#[test]
fn a_refused_upload_of_a_file_goes_again_whole() {
    let body: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    let (_dir, path) = real::temp_file("refused-file", &body);
    let server = H2Server::start(|mut stream| async move {
        if stream.index > 0 {
            return echo(stream).await;
        }
        stream.respond.send_reset(h2::Reason::REFUSED_STREAM);
    });
    let client = h2c().build().unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let response = client
        .put(server.url("/"))
        .body(tickless::Upload::from_file(file).unwrap())
        .send()
        .wait()
        .unwrap();
    let echoed = response.bytes().wait().unwrap();
    assert!(echoed == body, "{} bytes", echoed.len());
    assert_eq!(server.stats.streams.load(Ordering::SeqCst), 2);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// Answers with the request's body.
async fn echo(mut stream: H2Stream) {
    let body = stream.request.body_mut();
    let mut got = Vec::new();
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
        got.extend_from_slice(&data);
    }
    let response = http::Response::builder().status(200).body(()).unwrap();
    if let Ok(mut send) = stream.respond.send_response(response, false) {
        let _ = send.send_data(bytes::Bytes::from(got), true);
    }
}

/// A request whose header section is larger than the server's
/// `SETTINGS_MAX_HEADER_LIST_SIZE` is not sent (the server never sees its
/// HEADERS): it fails with `Error::HeadersTooLarge`, not processed, and
/// the connection goes on with the next request — where sent, a server
/// on the `h2` crate ends the whole connection for it (`GOAWAY`), every
/// stream on it failing, and a request sent again meets the same.
#[test]
fn a_request_past_the_servers_header_list_size_is_not_sent_and_the_connection_stays() {
    let seen = Arc::new(AtomicUsize::new(0));
    let heard = seen.clone();
    let raw = RawH2Server::start(move |mut conn| {
        conn.send(&max_header_list_size(1024));
        while let Some(&id) = conn.read_requests(1).first() {
            heard.fetch_add(1, Ordering::SeqCst);
            conn.send(&ok_headers(id));
        }
    });
    let h2 = H2Server::start_with(
        |builder| {
            builder.max_header_list_size(1024);
        },
        |stream| answer(stream, 200, b"ok"),
    );
    for (url, connections) in [
        (raw.url("/"), &*raw.connections),
        (h2.url("/"), &h2.stats.connections),
    ] {
        let client = h2c().build().unwrap();
        // Its answer comes after the server's SETTINGS.
        let first = client.get(&url).send().wait().unwrap();
        assert_eq!(first.status(), 200);
        let error = client
            .post(&url)
            .header("x-large", "a".repeat(1000))
            .body("x")
            .send()
            .wait()
            .unwrap_err();
        match &error {
            Error::HeadersTooLarge { size, limit, .. } => {
                assert_eq!(*limit, 1024);
                // The large field alone is 1039 bytes (its name, value
                // and 32); the client's few other fields, some hundreds.
                assert!((1039..2048).contains(size), "{size}");
            }
            other => panic!("{url}: {other:?}"),
        }
        assert!(error.is_unprocessed(), "{error}");
        assert!(error.to_string().contains("not sent"), "{error}");
        let next = client.get(&url).send().wait().unwrap();
        assert_eq!(next.status(), 200);
        assert_eq!(connections.load(Ordering::SeqCst), 1, "{url}");
        client.close();
    }
    assert_eq!(seen.load(Ordering::SeqCst), 2, "the large request was sent");
    assert_eq!(h2.stats.streams.load(Ordering::SeqCst), 2);
}

/// After a redirect the request was processed — the server answered its
/// first hop — so a later hop refused does not make its error say it was
/// not; the same hop asked for directly does.
#[test]
fn a_hop_refused_after_a_redirect_does_not_say_the_request_was_not_processed() {
    let server = H2Server::start(|mut stream| async move {
        if stream.request.uri().path() == "/first" {
            let response = http::Response::builder()
                .status(307)
                .header("location", "/second")
                .body(())
                .unwrap();
            let _ = stream.respond.send_response(response, true);
        } else {
            stream.respond.send_reset(h2::Reason::REFUSED_STREAM);
        }
    });
    let client = h2c().build().unwrap();
    let post = |path: &str| {
        client
            .post(server.url(path))
            .body("order")
            .send()
            .wait()
            .unwrap_err()
    };
    let direct = post("/second");
    assert!(direct.is_unprocessed(), "{direct}");
    let redirected = post("/first");
    assert!(
        matches!(
            redirected,
            Error::Http2 {
                reason: Http2Reason::REFUSED_STREAM,
                ..
            }
        ),
        "{redirected:?}"
    );
    assert!(!redirected.is_unprocessed(), "{redirected}");
    assert!(
        !chain_text(&redirected).contains("not processed"),
        "{redirected}"
    );
    client.close();
}

/// Each of these breaks the protocol; the client must end the connection
/// with an error, promptly.
fn violation(bytes: Vec<u8>) -> Error {
    let server = RawH2Server::start(move |mut conn| {
        let _ = conn.read_requests(1);
        conn.send(&bytes);
        conn.drain(Duration::from_secs(5));
    });
    let client = h2c().build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    client.close();
    error
}

#[test]
fn bad_frames_end_the_connection_with_an_error() {
    // DATA on stream 0.
    let error = violation(frame(DATA, 0, 0, b"nope"));
    assert!(
        matches!(
            error,
            Error::Http2 {
                reason: Http2Reason::PROTOCOL_ERROR,
                initiator: Http2Initiator::Local,
                connection: true,
                ..
            }
        ),
        "{error:?}"
    );
    for (what, bytes) in [
        (
            "a SETTINGS frame whose length is not a multiple of 6",
            frame(SETTINGS, 0, 0, &[0, 1, 0]),
        ),
        ("a PING of the wrong size", frame(PING, 0, 0, &[1, 2, 3])),
    ] {
        let error = violation(bytes);
        assert!(
            matches!(
                error,
                Error::Http2 {
                    connection: true,
                    ..
                }
            ),
            "{what}: {error:?}"
        );
    }
    // HEADERS whose HPACK block is garbage.
    let error = violation(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &[0xff, 0xff, 0xff, 0xff],
    ));
    assert!(matches!(error, Error::Http2 { .. }), "{error:?}");
}

#[test]
fn a_server_that_closes_mid_stream_fails_it_with_an_io_error() {
    let server = RawH2Server::start(|mut conn| {
        let _ = conn.read_requests(1);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    });
    let client = h2c().build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    assert!(
        matches!(error, Error::Io { .. } | Error::Http2 { .. }),
        "{error:?}"
    );
    client.close();
}

/// A body the server's close cuts short (a TCP FIN, no GOAWAY, no reset)
/// reads as one cut short over HTTP/1.1 does, as `Body` says: the bytes
/// that came, then an `UnexpectedEof`, the client's `Error::Io` inside,
/// saying the server closed the connection — not `h2`'s own word for the
/// close, a `BrokenPipe` ("stream closed because of a broken pipe"),
/// which a downloader that resumes on `UnexpectedEof` would not know, and
/// which blames a write nobody made. So does a request the close leaves
/// unanswered on a connection that served nothing before it.
#[test]
fn a_body_cut_short_by_the_servers_close_reads_as_an_unexpected_eof() {
    use std::io::Read;
    for answered in [true, false] {
        let server = RawH2Server::start(move |mut conn| {
            let id = conn.read_requests(1)[0];
            if answered {
                let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
                out.extend(frame(DATA, 0, id, b"the first bytes"));
                conn.send(&out);
            }
            // The close, one way: what the client sends on is read, so
            // that no reset follows the FIN.
            let _ = conn.stream.shutdown(Shutdown::Write);
            conn.drain(CEILING);
        });
        let client = h2c().build().unwrap();
        let is_the_close = |error: &Error| {
            assert!(
                matches!(error, Error::Io { source, .. }
                    if source.kind() == std::io::ErrorKind::UnexpectedEof),
                "answered: {answered}: {error:?}"
            );
            assert!(
                chain_text(error).contains("closed the HTTP/2 connection"),
                "{error}"
            );
        };
        match client.get(server.url("/")).send().wait() {
            Ok(mut response) => {
                assert!(answered, "an answer nobody sent");
                let mut got = Vec::new();
                let error = response.body_mut().read_to_end(&mut got).unwrap_err();
                assert_eq!(got, b"the first bytes");
                assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{error}");
                let inner = error.get_ref().and_then(|e| e.downcast_ref::<Error>());
                is_the_close(inner.expect("the client's error inside"));
            }
            Err(error) => {
                assert!(!answered, "no answer: {error:?}");
                is_the_close(&error);
            }
        }
        client.close();
    }
}

/// A server that answers a connection's first request and closes it, with
/// no GOAWAY, as the next comes: a server whose idle timeout races the
/// request, or one gone, the connection with it. Later connections answer.
fn closing_as_the_second_request_comes() -> RawH2Server {
    RawH2Server::start(|mut conn| {
        if conn.index > 0 {
            return conn.answer_all();
        }
        let first = conn.read_requests(1)[0];
        conn.send(&ok_headers(first));
        let _ = conn.read_requests(1);
        let _ = conn.stream.shutdown(Shutdown::Both);
    })
}

/// A request on a connection that has served one already, its server
/// gone without a word (no GOAWAY) before any answer: a GET goes again,
/// once, on a new connection — as over HTTP/1.1, where a reused
/// connection's failure before any byte of the response sends again a
/// request that may go twice (RFC 9110 §9.2.2) — and a POST fails, not
/// sent twice.
#[test]
fn a_reused_connection_closed_unanswered_sends_a_get_again_not_a_post() {
    for method in [http::Method::GET, http::Method::POST] {
        let server = closing_as_the_second_request_comes();
        let client = h2c().build().unwrap();
        let first = client.get(server.url("/first")).send().wait().unwrap();
        assert_eq!(first.status(), 200);
        let outcome = client
            .request(method.clone(), server.url("/second"))
            .send()
            .wait()
            .map(|response| response.status());
        let connections = server.connections.load(Ordering::SeqCst);
        if method == http::Method::GET {
            assert_eq!(outcome.unwrap(), 200);
            assert_eq!(connections, 2, "the GET went again on a new connection");
        } else {
            let error = outcome.unwrap_err();
            assert!(matches!(error, Error::Io { .. }), "{error:?}");
            assert!(!error.is_unprocessed(), "the server may have processed it");
            assert_eq!(connections, 1, "the POST was not sent again");
        }
        client.close();
    }
}

/// `on_goaway` says the server sent `GOAWAY`: a connection that ends
/// without one — its server closing it, or the client's own `GOAWAY` for
/// the server's protocol error — tells the listener of none, with a
/// stream open on it (where `h2` refuses new streams with that error).
#[test]
fn a_connection_ended_with_no_goaway_from_its_server_tells_the_listener_of_none() {
    let closing = closing_as_the_second_request_comes();
    let violating = RawH2Server::start(|mut conn| {
        let first = conn.read_requests(1)[0];
        conn.send(&ok_headers(first));
        let _ = conn.read_requests(1);
        // DATA on stream 0: the client ends the connection itself.
        conn.send(&frame(DATA, 0, 0, b"nope"));
        conn.drain(Duration::from_secs(5));
    });
    for (why, url) in [
        ("closed", closing.url("/")),
        ("protocol error", violating.url("/")),
    ] {
        let recorder = Recorder::new();
        let client = h2c().listener(recorder.clone()).build().unwrap();
        let first = client.get(&url).send().wait().unwrap();
        assert_eq!(first.status(), 200, "{why}");
        let second = client.post(&url).body("x").send().wait();
        assert!(second.is_err(), "{why}: {second:?}");
        assert_eq!(goaways_told(&recorder), [] as [u32; 0], "{why}");
        client.close();
    }
}

/// A `200` head's HPACK block with a literal field (not indexed) `x-big`
/// whose value is `len` bytes.
fn head_with_a_big_field(len: usize) -> Vec<u8> {
    let mut block = vec![0x88, 0x00, 0x05];
    block.extend_from_slice(b"x-big");
    // The value's length as an HPACK integer with a 7-bit prefix.
    block.push(0x7f);
    let mut rest = len - 127;
    while rest >= 128 {
        block.push(((rest % 128) | 128) as u8);
        rest /= 128;
    }
    block.push(rest as u8);
    block.extend_from_slice(&vec![b'a'; len]);
    block
}

#[test]
fn an_oversized_header_list_fails_the_stream_and_the_connection_goes_on() {
    // A value larger than the client's limit.
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        let block = head_with_a_big_field(2000);
        conn.send(&frame(HEADERS, END_HEADERS | END_STREAM, ids[0], &block));
        conn.answer_all();
    });
    let client = h2c().http2_max_header_list_size(1024).build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Http2 {
                initiator: Http2Initiator::Local,
                connection: false,
                ..
            }
        ),
        "{error:?}"
    );
    // The stream alone: the connection goes on.
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// A header list more than four times past the client's limit is taken
/// by `h2` for a flood (it stops decoding it: `GOAWAY` with
/// `ENHANCE_YOUR_CALM`): it ends the connection, not the stream alone —
/// what `http2_max_header_list_size` says — failing the other streams on
/// it too; the next request opens another connection.
#[test]
fn a_header_list_four_times_past_the_limit_ends_the_connection() {
    let server = RawH2Server::start(|mut conn| {
        if conn.index == 0 {
            // Both requests, before either is answered.
            let ids = conn.read_requests(2);
            let block = head_with_a_big_field(5000);
            conn.send(&frame(HEADERS, END_HEADERS | END_STREAM, ids[0], &block));
            conn.drain(Duration::from_secs(5));
        } else {
            conn.answer_all();
        }
    });
    let client = h2c().http2_max_header_list_size(1024).build().unwrap();
    let big = client.get(server.url("/big")).send();
    let other = client.get(server.url("/other")).send();
    for error in [big.wait().unwrap_err(), other.wait().unwrap_err()] {
        assert!(
            matches!(
                error,
                Error::Http2 {
                    reason: Http2Reason::ENHANCE_YOUR_CALM,
                    initiator: Http2Initiator::Local,
                    connection: true,
                    ..
                }
            ),
            "{error:?}"
        );
    }
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    client.close();
}

/// HTTP/2 has no `101 Switching Protocols` (RFC 9113 §8.6), and the
/// client asks for no upgrade over it: a server that answers one fails
/// the request with `SwitchingProtocols`, as over HTTP/1.1 — not an
/// interim head after which the request waits for a final one that a
/// server which thinks it switched never sends — and the connection goes
/// on.
#[test]
fn a_101_fails_the_stream_as_over_http11_and_the_connection_goes_on() {
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        // `:status` 101: a literal field, the static table's name.
        let block = [0x08, 3, b'1', b'0', b'1'];
        conn.send(&frame(HEADERS, END_HEADERS, ids[0], &block));
        conn.answer_all();
    });
    let client = h2c().build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Protocol {
                source: tickless::h1::DecodeError::SwitchingProtocols,
                ..
            }
        ),
        "{error:?}"
    );
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// `count` fields `x-f`, for a head or trailers.
fn fields(count: usize) -> http::HeaderMap {
    let mut fields = http::HeaderMap::new();
    for i in 0..count {
        fields.append("x-f", http::HeaderValue::from(i));
    }
    fields
}

/// `Limits::max_headers` bounds a response's fields over HTTP/2 as over
/// HTTP/1.1 (`tests/hostile_servers.rs`): a head with more — the final
/// one, or an interim one — fails the request, trailers with more fail
/// the body, with
/// `TooManyHeaders` — the stream alone: the connection goes on. (Before,
/// only `http2_max_header_list_size` bounded them: some 1,900 fields
/// within its default 64 KiB, whatever the limit said.)
#[test]
fn a_head_or_trailers_with_more_fields_than_max_headers_fail_and_the_connection_goes_on() {
    let limit = tickless::h1::Limits::default().max_headers;
    let server = H2Server::start(move |mut stream| async move {
        let path = stream.request.uri().path().to_string();
        if path == "/interim" {
            let mut hints = http::Response::builder().status(103).body(()).unwrap();
            *hints.headers_mut() = fields(limit + 1);
            let _ = stream.respond.send_informational(hints);
        }
        let mut head = http::Response::builder().status(200).body(()).unwrap();
        if path == "/head" {
            *head.headers_mut() = fields(limit + 1);
        }
        let Ok(mut send) = stream.respond.send_response(head, false) else {
            return;
        };
        let _ = send.send_data(bytes::Bytes::from_static(b"body"), false);
        let trailers = fields(if path == "/trailers" {
            limit + 1
        } else {
            limit
        });
        let _ = send.send_trailers(trailers);
    });
    let client = h2c().build().unwrap();
    let too_many = |error: &Error| {
        matches!(
            error,
            Error::Protocol {
                source: tickless::h1::DecodeError::TooManyHeaders { limit: l },
                ..
            } if *l == limit
        )
    };
    for path in ["/head", "/interim"] {
        let error = client.get(server.url(path)).send().wait().unwrap_err();
        assert!(too_many(&error), "{path}: {error:?}");
    }
    let response = client.get(server.url("/trailers")).send().wait().unwrap();
    let error = response.bytes().wait().unwrap_err();
    assert!(too_many(&error), "{error:?}");
    // At the limit, all is well; and on the same connection.
    let response = client
        .get(server.url("/at-the-limit"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.headers().len(), 0);
    assert_eq!(response.bytes().wait().unwrap(), "body");
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// `Limits::max_trailer_bytes` bounds a response's trailers over HTTP/2
/// as over HTTP/1.1 (`tests/hostile_servers.rs`), each field counted as
/// HTTP/2 sizes a header list (its name, its value and 32): trailers past
/// it fail the body with `TrailersTooLarge` — the stream alone: the
/// connection goes on. (Before, only `http2_max_header_list_size`, 64 KiB
/// by default, bounded them, whatever the limit said.)
#[test]
fn trailers_past_max_trailer_bytes_fail_the_body_and_the_connection_goes_on() {
    const LIMIT: usize = 256;
    // One field of 40 + 3 + 32 bytes: 3 fit within 256, 4 do not.
    let server = H2Server::start(|mut stream| async move {
        let count = match stream.request.uri().path() {
            "/large" => 4,
            _ => 3,
        };
        let head = http::Response::builder().status(200).body(()).unwrap();
        let Ok(mut send) = stream.respond.send_response(head, false) else {
            return;
        };
        let _ = send.send_data(bytes::Bytes::from_static(b"body"), false);
        let mut trailers = http::HeaderMap::new();
        for _ in 0..count {
            trailers.append("x-f", http::HeaderValue::from_str(&"v".repeat(40)).unwrap());
        }
        let _ = send.send_trailers(trailers);
    });
    let limits = tickless::h1::Limits {
        max_trailer_bytes: LIMIT,
        ..tickless::h1::Limits::default()
    };
    let client = h2c().limits(limits).build().unwrap();
    let response = client.get(server.url("/large")).send().wait().unwrap();
    let error = response.bytes().wait().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Protocol {
                source: tickless::h1::DecodeError::TrailersTooLarge { limit: LIMIT },
                ..
            }
        ),
        "{error:?}"
    );
    // Within the limit, all is well; and on the same connection.
    let response = client.get(server.url("/small")).send().wait().unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "body");
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    client.close();
}

#[test]
fn keep_alive_pings_end_a_connection_whose_server_stopped_answering() {
    // Answers the first request, then reads on without answering anything,
    // PINGs included.
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        conn.send(&ok_headers(ids[0]));
        conn.drain(Duration::from_secs(10));
    });
    let client = h2c()
        // Long enough that the first answer is read, and the connection
        // counted, before a stalled test thread sees the PING go unanswered.
        .http2_keep_alive_interval(Duration::from_millis(500))
        .http2_keep_alive_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    assert_eq!(
        client.get(server.url("/")).send().wait().unwrap().status(),
        200
    );
    assert_eq!(client.stats().open_connections, 1);
    // The PING goes unanswered: the connection closes.
    assert!(eventually(CEILING, || client.stats().open_connections == 0));
    client.close();
}

/// A stream that a keep-alive PING's silence fails says it timed out, and
/// which timeout it was — the keep-alive's, with its duration — as a read
/// timeout over HTTP/1.1 does: not an I/O error a caller cannot tell from
/// a reset.
#[test]
fn a_stream_failed_by_an_unanswered_keep_alive_ping_fails_with_a_keep_alive_timeout() {
    // Takes the request, then answers nothing, PINGs included.
    let server = RawH2Server::start(|mut conn| {
        let _ = conn.read_requests(1);
        conn.drain(Duration::from_secs(10));
    });
    let client = h2c()
        .http2_keep_alive_interval(Duration::from_millis(200))
        .http2_keep_alive_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert_eq!(
        error.timeout_kind(),
        Some(tickless::TimeoutKind::KeepAlive),
        "{error:?}"
    );
    assert_eq!(
        error.timeout().map(|timeout| timeout.duration),
        Some(Duration::from_millis(300)),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("HTTP/2 keep-alive timeout to "),
        "{error}"
    );
    client.close();
}

/// A keep-alive timeout of zero is no timeout, as every duration of the
/// builder: a PING's answer is awaited without bound, not given up on as
/// soon as the PING goes (which failed every stream on the connection).
#[test]
fn a_zero_keep_alive_timeout_waits_for_the_ping_answer() {
    // Takes the request, answers the client's first PING, then the request.
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        while let Some(got) = conn.read_frame() {
            if got.kind == PING && got.flags & ACK == 0 {
                conn.send(&frame(PING, ACK, 0, &got.payload));
                conn.send(&ok_headers(ids[0]));
                break;
            }
        }
        conn.drain(Duration::from_secs(10));
    });
    let client = h2c()
        .http2_keep_alive_interval(Duration::from_millis(1))
        .http2_keep_alive_timeout(Duration::ZERO)
        .build()
        .unwrap();
    match client.get(server.url("/")).send().wait() {
        Ok(response) => assert_eq!(response.status(), 200),
        Err(error) => panic!("a zero keep-alive timeout gave up on the PING: {error:?}"),
    }
    client.close();
}

/// Runs `f` on a thread; `None` if it has not returned within `limit`
/// (a hang).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// A response that came whole is not lost when the connection then closes
/// while its body's pipe is full: the rest, in `h2`'s buffer, goes into
/// the pipe (a server closes after its last stream's GOAWAY).
#[test]
fn a_body_received_whole_survives_the_connection_closing_after_it() {
    const FRAMES: usize = 12; // 12 x 16 KiB = 192 KiB: within both windows
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        let id = ids[0];
        conn.send(&frame(HEADERS, END_HEADERS, id, &[0x88]));
        let chunk = vec![b'x'; 16 * 1024];
        for _ in 0..FRAMES {
            conn.send(&frame(DATA, 0, id, &chunk));
        }
        conn.send(&frame(DATA, END_STREAM, id, b""));
        // The response is complete; the server says goodbye and closes,
        // as a server does after its last stream.
        conn.send(&goaway(id, 0));
        let _ = conn.stream.shutdown(Shutdown::Write);
        conn.drain(Duration::from_secs(5));
    });
    // A small body window: the pipe fills at 16 KiB, the rest waits in h2.
    let client = h2c().body_window(16 * 1024).build().unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    // The caller reads a moment later (a slow consumer).
    std::thread::sleep(Duration::from_millis(500));
    let body = response.bytes().wait();
    match body {
        Ok(body) => assert_eq!(body.len(), FRAMES * 16 * 1024),
        Err(error) => panic!("a response the server sent whole failed: {error:?}"),
    }
    client.close();
}

/// A keep-alive PING with no answer fails the streams on the connection,
/// not the requests still waiting on it for a stream: those were never
/// sent, and go elsewhere.
#[test]
fn requests_never_sent_go_elsewhere_when_the_keep_alive_ping_times_out() {
    let (took_first, first_taken) = std::sync::mpsc::sync_channel(1);
    let server = RawH2Server::start(move |mut conn| {
        if conn.index == 0 {
            // Takes the first request, then answers nothing (PINGs
            // included): a dead peer.
            let _ = conn.read_requests(1);
            let _ = took_first.try_send(());
            conn.drain(Duration::from_secs(10));
        } else {
            conn.answer_all();
        }
    });
    let client = h2c()
        .http2_max_concurrent_streams(1)
        .http2_keep_alive_interval(Duration::from_millis(300))
        .http2_keep_alive_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let first = client.get(server.url("/first")).send();
    first_taken
        .recv_timeout(Duration::from_secs(10))
        .expect("the server takes the first request");
    // These two wait on the connection for a stream: nothing of them is
    // ever written to the dead server.
    let waiting: Vec<_> = (0..2)
        .map(|i| client.get(server.url(&format!("/w{i}"))).send())
        .collect();
    let first = first.wait();
    assert!(first.is_err(), "the stream on the dead connection fails");
    for future in waiting {
        match future.wait() {
            Ok(response) => assert_eq!(response.status(), 200),
            Err(error) => panic!("a request never sent failed with the PING timeout: {error:?}"),
        }
    }
    client.close();
}

/// A head before the request body is all sent starts the read timeout: a
/// server that answers early, then neither sends nor reads, is bounded by
/// it rather than hanging the body's reader.
#[test]
fn a_read_timeout_bounds_silence_after_an_early_head_during_an_upload() {
    let server = H2Server::start(|mut stream| async move {
        // Answers at once, sends a little, then neither sends nor reads the
        // upload (its window stays shut).
        let response = http::Response::builder().status(200).body(()).unwrap();
        let mut send = stream.respond.send_response(response, false).unwrap();
        let _ = send.send_data(bytes::Bytes::from_static(b"early"), false);
        tokio::time::sleep(Duration::from_secs(15)).await;
        drop((send, stream));
    });
    let client = h2c().build().unwrap();
    let url = server.url("/");
    let outcome = within(Duration::from_secs(6), move || {
        let upload = vec![b'u'; 1024 * 1024];
        let mut response = client
            .post(url)
            .body(upload)
            .request_timeout(Duration::ZERO)
            .read_timeout(Duration::from_millis(500))
            .send()
            .wait()
            .unwrap();
        let started = Instant::now();
        let first = response.chunk().wait();
        let second = response.chunk().wait();
        client.close();
        (
            first.map(|c| c.map(|c| c.len())),
            second.map(|c| c.map(|c| c.len())),
            started.elapsed(),
        )
    });
    match outcome {
        Some((first, second, elapsed)) => {
            assert_eq!(first.unwrap(), Some(5));
            assert!(second.is_err(), "{second:?} after {elapsed:?}");
        }
        None => panic!(
            "with a 500 ms read timeout, the body read still hangs 6 s after the server fell silent"
        ),
    }
}

/// A server that sends GOAWAY as soon as a connection opens makes a
/// request go elsewhere once, not open connection after connection.
#[test]
fn a_server_refusing_every_connection_with_goaway_does_not_make_the_client_reconnect_endlessly() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut out = frame(SETTINGS, 0, 0, &[]);
                out.extend_from_slice(&goaway(0, 0));
                let _ = socket.write_all(&out);
                let _ = socket.set_read_timeout(Some(Duration::from_secs(3)));
                let mut buf = [0u8; 4096];
                while let Ok(n) = socket.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                }
            });
        }
    });
    let client = h2c()
        .request_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // Twenty requests, one after another. Each may fairly cost two
    // connections (the first, and one retry of a request the GOAWAY says
    // was never processed).
    let mut per_request = Vec::new();
    let started = Instant::now();
    for _ in 0..20 {
        let before = connections.load(Ordering::SeqCst);
        let result = client.get(format!("http://{addr}/")).send().wait();
        // No server processed it: its one retry went the same way.
        let error = result.unwrap_err();
        assert!(error.is_unprocessed(), "{error}");
        per_request.push(connections.load(Ordering::SeqCst) - before);
    }
    let elapsed = started.elapsed();
    let total: usize = per_request.iter().sum();
    client.close();
    eprintln!("connections per request {per_request:?}: {total} in {elapsed:?}");
    assert!(
        total <= 2 * per_request.len(),
        "20 requests opened {total} connections in {elapsed:?}: {per_request:?}"
    );
}

/// A request past the server's `SETTINGS_MAX_CONCURRENT_STREAMS` waits here
/// for a stream, not inside `h2` with its read timeout running.
#[test]
fn a_request_waiting_past_the_servers_stream_limit_does_not_run_its_read_timeout() {
    let server = H2Server::start_with(
        |builder| {
            builder.max_concurrent_streams(1);
        },
        |mut stream| async move {
            if stream.index == 0 {
                // A long, steady response: never silent for 200 ms.
                let response = http::Response::builder().status(200).body(()).unwrap();
                let mut send = stream.respond.send_response(response, false).unwrap();
                for _ in 0..10 {
                    let _ = send.send_data(bytes::Bytes::from_static(b"tick"), false);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let _ = send.send_data(bytes::Bytes::new(), true);
            } else {
                answer(stream, 200, b"second").await;
            }
        },
    );
    let client = h2c()
        // Five times the first response's gaps (a loaded machine may
        // stretch one), and half its length: a read timeout running while
        // the second waits, unsent, fails it.
        .read_timeout(Duration::from_millis(1000))
        .build()
        .unwrap();
    let first = client.get(server.url("/long")).send().wait().unwrap();
    // The server's limit (1) is known now; this one waits for the stream.
    let second = client.get(server.url("/next")).send();
    let body = first.bytes().wait().unwrap();
    assert_eq!(body.len(), 40);
    match second.wait() {
        Ok(response) => assert_eq!(response.status(), 200),
        Err(error) => panic!("a request that waited for a stream, unsent, failed: {error:?}"),
    }
    assert_eq!(server.stats.streams.load(Ordering::SeqCst), 2);
    client.close();
}

/// Bodies dropped while their streams hold the connection's window give
/// it back: another stream's body flows afterwards.
#[test]
fn dropped_bodies_give_back_the_connection_window() {
    let server = H2Server::start(|mut stream| async move {
        let size = if stream.index < 2 {
            600 * 1024
        } else {
            100 * 1024
        };
        let response = http::Response::builder().status(200).body(()).unwrap();
        let Ok(mut send) = stream.respond.send_response(response, false) else {
            return;
        };
        let _ = send.send_data(bytes::Bytes::from(vec![b'z'; size]), true);
        // Keep the stream until it is sent or reset.
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            std::future::poll_fn(|cx| send.poll_reset(cx)),
        )
        .await;
    });
    let client = h2c()
        .body_window(16 * 1024)
        .http2_initial_connection_window_size(512 * 1024)
        .build()
        .unwrap();
    let a = client.get(server.url("/a")).send().wait().unwrap();
    let b = client.get(server.url("/b")).send().wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop((a, b));
    let url = server.url("/c");
    let outcome = within(Duration::from_secs(5), move || {
        let body = client.get(url).send().wait().and_then(|r| r.bytes().wait());
        client.close();
        body.map(|b| b.len())
    });
    assert_eq!(outcome.expect("the third body hangs").unwrap(), 100 * 1024);
}

/// The server's stream limit, and its first SETTINGS (which say it),
/// held back until the client's first burst has come.
const LATE_LIMIT: usize = 100;

/// A server whose SETTINGS (`MAX_CONCURRENT_STREAMS` 100) come once 100
/// streams have, and then 300 ms without more — as they would a round
/// trip after the client's first flight on a slow path: the streams the client opened past its limit meanwhile are
/// refused (`REFUSED_STREAM`), as a server at its limit does, and every
/// other request is answered once its body has come. Returns its address
/// and how many streams came before its SETTINGS.
fn late_settings_server() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let early = Arc::new(AtomicUsize::new(0));
    let counted = early.clone();
    std::thread::spawn(move || {
        let Some(Ok(mut socket)) = listener.incoming().next() else {
            return;
        };
        let mut preface = [0u8; 24];
        if socket.read_exact(&mut preface).is_err() {
            return;
        }
        let mut conn = RawConn {
            stream: socket,
            index: 0,
        };
        // Until the limit's worth of streams has come, however late; then
        // 300 ms more for any past it.
        let _ = conn.stream.set_read_timeout(Some(CEILING));
        let mut opened = 0;
        let mut refused = Vec::new();
        let mut ended = Vec::new();
        while let Some(frame) = conn.read_frame() {
            if frame.kind == HEADERS {
                opened += 1;
                if opened == LATE_LIMIT {
                    let _ = conn
                        .stream
                        .set_read_timeout(Some(Duration::from_millis(300)));
                }
                if opened > LATE_LIMIT {
                    refused.push(frame.stream);
                }
            }
            if ends_a_request(&frame) && !refused.contains(&frame.stream) {
                ended.push(frame.stream);
            }
        }
        counted.store(opened, Ordering::SeqCst);
        let _ = conn.stream.set_read_timeout(Some(CEILING));
        let mut out = max_streams(LATE_LIMIT as u32);
        for &id in &refused {
            out.extend_from_slice(&rst_stream(id, 0x7));
        }
        for &id in &ended {
            out.extend_from_slice(&ok_headers(id));
        }
        conn.send(&out);
        while let Some(frame) = conn.read_frame() {
            match frame.kind {
                SETTINGS if frame.flags & ACK == 0 => conn.send(&settings_ack()),
                _ if ends_a_request(&frame) && !refused.contains(&frame.stream) => {
                    conn.send(&ok_headers(frame.stream))
                }
                _ => {}
            }
        }
    });
    (addr, early)
}

/// A request's last frame (its HEADERS or DATA with `END_STREAM`).
fn ends_a_request(frame: &Frame) -> bool {
    matches!(frame.kind, HEADERS | DATA) && frame.flags & END_STREAM != 0
}

/// Until the server's SETTINGS say how many streams it takes, a new
/// connection opens at most 100 (RFC 9113 §6.5.2 recommends no less;
/// Go's and hyper's clients assume that many): past them, a burst at
/// the connection's start would have its streams refused, and a
/// request whose body is streamed cannot go again.
#[test]
fn before_the_servers_settings_a_connection_opens_no_more_streams_than_servers_allow() {
    let (addr, early) = late_settings_server();
    let client = h2c().build().unwrap();
    let futures: Vec<_> = (0..LATE_LIMIT + 30)
        .map(|_| {
            let body = std::io::Cursor::new(b"streamed".to_vec());
            client
                .post(format!("http://{addr}/"))
                .body(tickless::Upload::from_reader(body, None))
                .send()
        })
        .collect();
    let failed: Vec<_> = futures
        .into_iter()
        .filter_map(|future| future.wait().err())
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        failed[0]
    );
    assert_eq!(early.load(Ordering::SeqCst), LATE_LIMIT);
    client.close();
}

/// A stream whose response head came before the server refused it
/// (`REFUSED_STREAM`, or a `GOAWAY` whose last stream id is below it) was
/// processed — it was answered — whatever the reset says: its body fails,
/// and nothing says the request may be sent again.
#[test]
fn a_stream_answered_then_refused_does_not_say_it_was_not_processed() {
    let answered = |id| frame(0x1, 0x4, id, &[0x88]); // HEADERS :status 200, END_HEADERS
    let scripts: [fn(u32) -> Vec<u8>; 2] = [|id| rst_stream(id, 0x7), |_| goaway(0, 0x0)];
    for (script, refusal) in scripts.into_iter().enumerate() {
        for streamed_body in [true, false] {
            let server = RawH2Server::start(move |mut conn| {
                let ids = conn.read_requests(1);
                let mut bytes = answered(ids[0]);
                bytes.extend(refusal(ids[0]));
                conn.send(&bytes);
                conn.drain(Duration::from_secs(5));
            });
            let client = h2c().build().unwrap();
            let request = client.post(server.url("/"));
            let request = if streamed_body {
                request.body(streamed())
            } else {
                request.body("order")
            };
            let outcome = request.send().wait().and_then(|r| r.bytes().wait());
            let error = outcome.expect_err("the body cannot end well");
            // Ended by the refusal, not by a deadline.
            assert!(!error.is_timeout(), "script {script}: {error}");
            assert!(
                !error.is_unprocessed(),
                "script {script}, streamed {streamed_body}: {error}"
            );
            assert_eq!(server.connections.load(Ordering::SeqCst), 1);
            client.close();
        }
    }
}

/// Reads frames until the client's PING (not an acknowledgement); its
/// payload, or `None` if the client sent none before `limit` or closed.
fn read_ping(conn: &mut RawConn, limit: Duration) -> Option<Vec<u8>> {
    let _ = conn.stream.set_read_timeout(Some(limit));
    loop {
        let frame = conn.read_frame()?;
        if frame.kind == PING && frame.flags & ACK == 0 {
            return Some(frame.payload);
        }
    }
}

/// On a reused connection (its first request answered), a GET and a POST
/// in flight; then a `GOAWAY(NO_ERROR)` whose last stream id names both
/// processed. What the server does next is `script`'s.
fn goaway_naming_two_streams(script: fn(&mut RawConn, [u32; 2])) -> RawH2Server {
    RawH2Server::start(move |mut conn| {
        if conn.index == 0 {
            let first = conn.read_requests(1);
            conn.send(&ok_headers(first[0]));
            let ids = conn.read_requests(2);
            assert_eq!(ids.len(), 2);
            conn.send(&goaway(ids[1], 0));
            script(&mut conn, [ids[0], ids[1]]);
        } else {
            conn.answer_all();
        }
    })
}

/// The GET and the POST of [`goaway_naming_two_streams`], sent together
/// after a first request.
fn get_and_post(
    client: &Client,
    server: &RawH2Server,
) -> (
    Result<tickless::Response, Error>,
    Result<tickless::Response, Error>,
) {
    let first = client.get(server.url("/first")).send().wait().unwrap();
    assert_eq!(first.status(), 200);
    let get = client.get(server.url("/get")).send();
    let post = client.post(server.url("/post")).body("once").send();
    (get.wait(), post.wait())
}

/// A server that names streams processed in its `GOAWAY` and then answers
/// nothing more, closing only when a frame comes (python-h2's connection is
/// closed then, and any frame is an error to it: hypercorn; see
/// tests/http2_real.rs) or after its own idle timeout: the client sends a
/// PING after the `GOAWAY`, the server closes, and the streams end as on
/// any reused connection closed under them — the GET goes again on a new
/// connection, the POST (the server may have processed it) fails, not
/// marked unprocessed. Without the PING both waited for the request
/// timeout.
#[test]
fn after_a_goaway_a_ping_ends_a_server_that_answers_no_stream_and_closes_at_a_frame() {
    let server = goaway_naming_two_streams(|conn, _| {
        // A frame sent after the GOAWAY (the PING; the POST's DATA, sent
        // with its HEADERS, is not) ends it; silence keeps it open far past
        // the request timeout below.
        if read_ping(conn, Duration::from_secs(30)).is_some() {
            let _ = conn.stream.shutdown(Shutdown::Both);
        }
    });
    let client = h2c()
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (get, post) = get_and_post(&client, &server);
    assert_eq!(get.unwrap().status(), 200);
    let error = post.unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(!error.is_unprocessed(), "{error:?}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    client.close();
}

/// A server that goes on with the streams its `GOAWAY` names processed
/// answers the PING that follows it and then the streams: both come back
/// from it, and no other connection opens.
#[test]
fn after_a_goaway_a_server_answering_the_ping_finishes_the_streams_it_processed() {
    let server = goaway_naming_two_streams(|conn, ids| {
        let ping = read_ping(conn, Duration::from_secs(10)).expect("a PING after the GOAWAY");
        conn.send(&frame(PING, ACK, 0, &ping));
        for id in ids {
            conn.send(&ok_headers(id));
        }
        conn.drain(Duration::from_secs(5));
    });
    let client = h2c().build().unwrap();
    let (get, post) = get_and_post(&client, &server);
    assert_eq!(get.unwrap().status(), 200);
    assert_eq!(post.unwrap().status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// Streams the client cancels together (`CANCELLED`, more than `h2`
/// remembers by default, 50), each with frames of its answer still on the
/// way: RFC 9113 §5.4.2 has the client ignore them (their bytes counted
/// for flow control). A stream `h2` has forgotten takes each such frame
/// as the server's error, resets it again (`STREAM_CLOSED`) and counts it
/// towards the resets that end the connection (`LOCAL_RESETS_MAX`):
/// `FRAMES` each would end it with `ENHANCE_YOUR_CALM`, the streams still
/// on it failing — here the bystander's, which has nothing to do with the
/// cancels. The server sends those frames once it has every reset: the
/// client cannot tell them from frames sent just before its reset came.
#[test]
fn frames_on_the_way_to_many_streams_cancelled_together_do_not_end_the_connection() {
    const CANCELLED: usize = 100;
    const FRAMES: usize = 25;
    let server = RawH2Server::start(|mut conn| {
        if conn.index > 0 {
            return conn.answer_all();
        }
        // The bystander: its head now, its body at the end.
        let bystander = conn.read_requests(1)[0];
        conn.send(&frame(HEADERS, END_HEADERS, bystander, &[0x88]));
        let mut heads = 0;
        let mut cancelled = Vec::new();
        while cancelled.len() < CANCELLED {
            let Some(frame) = conn.read_frame() else {
                return;
            };
            match frame.kind {
                HEADERS => {
                    heads += 1;
                    conn.send(&self::frame(HEADERS, END_HEADERS, frame.stream, &[0x88]));
                }
                RST_STREAM => cancelled.push(frame.stream),
                SETTINGS if frame.flags & ACK == 0 => conn.send(&settings_ack()),
                _ => {}
            }
        }
        assert_eq!(heads, CANCELLED);
        // In rounds, a frame on each cancelled stream, each round read
        // whole by the client (its PING answered) before the next: as
        // frames would come spread over a while.
        for round in 0..FRAMES as u64 {
            let mut late = Vec::new();
            for &stream in &cancelled {
                late.extend(self::frame(DATA, 0, stream, b"x"));
            }
            late.extend(self::frame(PING, 0, 0, &round.to_be_bytes()));
            conn.send(&late);
            loop {
                let Some(frame) = conn.read_frame() else {
                    return;
                };
                if frame.kind == PING && frame.flags & ACK != 0 {
                    break;
                }
            }
        }
        conn.send(&frame(DATA, END_STREAM, bystander, b"done"));
        conn.answer_all();
    });
    let client = h2c().build().unwrap();
    let bystander = client.get(server.url("/bystander")).send().wait().unwrap();
    let futures: Vec<_> = (0..CANCELLED)
        .map(|i| client.get(server.url(&format!("/{i}"))).send())
        .collect();
    let heads: Vec<_> = futures.into_iter().map(|f| f.wait().unwrap()).collect();
    // Each body dropped before its end: its stream is reset with CANCEL.
    drop(heads);
    match bystander.bytes().wait() {
        Ok(body) => assert_eq!(body, "done"),
        Err(error) => panic!("the bystander's stream failed: {error:?}"),
    }
    let after = client.get(server.url("/after")).send().wait().unwrap();
    assert_eq!(after.status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// A server that speaks only HTTP/1.1, spoken to with prior knowledge:
/// the request fails saying so, once, on the one connection.
fn prior_knowledge_to_http11_only(
    answer: &'static [u8],
    request: impl FnOnce(&Client, String) -> tickless::ResponseFuture,
) -> (Error, usize) {
    let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
        use std::io::{Read, Write};
        // The preface's request line and blank line, which an HTTP/1.1
        // server reads as a request (`PRI * HTTP/2.0`).
        let mut preface = [0u8; 18];
        let _ = stream.read_exact(&mut preface);
        let _ = stream.write_all(answer);
        let _ = stream.shutdown(Shutdown::Write);
        drain(&mut stream);
    }));
    let client = h2c().build().unwrap();
    let error = request(&client, server.url("/")).wait().unwrap_err();
    client.close();
    (error, server.connections_accepted())
}

/// An HTTP/1.1 server answers the preface with its status line: the
/// request fails with [`Error::NotHttp2`] naming it — not a broken pipe,
/// nor a connection closed — not processed (the server could not read
/// it), and is not sent again (any connection to that server would meet
/// the same).
#[test]
fn prior_knowledge_to_an_http11_server_fails_saying_it_does_not_speak_http2() {
    let answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let (error, connections) =
        prior_knowledge_to_http11_only(answer, |client, url| client.post(url).body("x").send());
    match &error {
        Error::NotHttp2 {
            answer: Some(line), ..
        } => assert_eq!(line, "HTTP/1.1 400 Bad Request"),
        _ => panic!("{error:?}"),
    }
    assert!(error.is_unprocessed(), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("does not speak HTTP/2"), "{message}");
    assert!(message.contains("HTTP/1.1 400 Bad Request"), "{message}");
    assert_eq!(connections, 1);
}

/// A server that answers the preface with no status line — Python's
/// `http.server` answers it as HTTP/0.9, its error page alone — fails the
/// request with [`Error::NotHttp2`] naming the answer's first line, not
/// with `h2`'s frame too large; not marked unprocessed (no HTTP/1.x
/// status line says the server read the preface as a request).
#[test]
fn prior_knowledge_to_a_server_answering_as_http09_fails_saying_it_does_not_speak_http2() {
    let answer = b"<!DOCTYPE HTML>\n<html><body>Error code: 505</body></html>\n";
    let (error, connections) =
        prior_knowledge_to_http11_only(answer, |client, url| client.get(url).send());
    match &error {
        Error::NotHttp2 {
            answer: Some(line), ..
        } => assert_eq!(line, "<!DOCTYPE HTML>"),
        _ => panic!("{error:?}"),
    }
    assert!(!error.is_unprocessed(), "{error:?}");
    assert!(
        error.to_string().contains("does not speak HTTP/2"),
        "{error}"
    );
    assert_eq!(connections, 1);
}

/// A server that closes the connection before any HTTP/2 frame fails the
/// request with [`Error::NotHttp2`] too, with no status line — and not
/// marked unprocessed: nothing proves the server did not act on it.
#[test]
fn prior_knowledge_to_a_server_closing_before_any_frame_fails_saying_so() {
    let (error, connections) =
        prior_knowledge_to_http11_only(b"", |client, url| client.get(url).send());
    assert!(
        matches!(error, Error::NotHttp2 { answer: None, .. }),
        "{error:?}"
    );
    assert!(!error.is_unprocessed(), "{error:?}");
    assert!(error.to_string().contains("HTTP/2"), "{error}");
    assert_eq!(connections, 1);
}
