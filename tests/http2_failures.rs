//! HTTP/2 failures, from a server whose frames are written by hand
//! (tests/support/h2_server.rs, `RawH2Server`): GOAWAY mid-flight (streams
//! above its last stream id go again on a new connection whatever their
//! method and the GOAWAY's code, those below finish or fail with it), REFUSED_STREAM (retried once), other resets (a typed error
//! naming the code), and a server that breaks the protocol (the connection
//! ends with an error: no panic, no hang).

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;
use support::h2_server::*;
use support::*;
use tickless::{Client, ClientBuilder, Error, Http2Initiator, Http2Reason};

const CEILING: Duration = Duration::from_secs(20);

fn h2c() -> ClientBuilder {
    Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .request_timeout(CEILING)
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
    let goaways: Vec<u32> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::GoAway(_, code) => Some(code),
            _ => None,
        })
        .collect();
    assert_eq!(goaways, [0]);
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
        other => panic!("{other:?}"),
    }
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

#[test]
fn an_oversized_header_list_fails_the_stream() {
    // A literal header (not indexed), name "x-big", with a value larger
    // than the client's limit.
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        let mut block = vec![0x88, 0x00, 0x05];
        block.extend_from_slice(b"x-big");
        let value = vec![b'a'; 2000];
        // Value length 2000 as an HPACK integer with a 7-bit prefix.
        block.push(0x7f);
        let mut rest = 2000 - 127;
        while rest >= 128 {
            block.push(((rest % 128) | 128) as u8);
            rest /= 128;
        }
        block.push(rest as u8);
        block.extend_from_slice(&value);
        conn.send(&frame(HEADERS, END_HEADERS | END_STREAM, ids[0], &block));
        conn.drain(Duration::from_secs(5));
    });
    let client = h2c().http2_max_header_list_size(1024).build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    assert!(matches!(error, Error::Http2 { .. }), "{error:?}");
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
