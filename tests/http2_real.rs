//! HTTP/2 against real servers nobody here wrote (tests/support/real.rs):
//! hypercorn (HTTP/2 over TLS by ALPN, and cleartext with prior knowledge)
//! and nginx's `http2`. `scripts/test` installs them.
//!
//! hypercorn's app says in `x-http-version` which version it saw.

mod support;

use std::time::Duration;
use support::real::{Hypercorn, Nginx, PemFiles};
use support::tls::{certs, TlsServer};
use support::*;
use tickless::{Client, ClientBuilder, Error, Http2Initiator, Http2Reason, Upload};

fn trusting() -> ClientBuilder {
    Client::builder()
        .event_loops(2)
        .add_root_certificate(&certs().ca_pem)
        .request_timeout(Duration::from_secs(30))
}

fn alpn_of(recorder: &Recorder) -> Option<Vec<u8>> {
    recorder
        .events()
        .into_iter()
        .find_map(|(event, _)| match event {
            Event::TlsHandshakeSuccess(_, alpn) => alpn,
            _ => None,
        })
}

#[test]
fn hypercorn_over_tls_negotiates_h2_by_default_and_http11_when_asked() {
    let pem = PemFiles::of(&certs().valid);
    let hypercorn = Hypercorn::start_tls(&pem.cert(), &pem.key());

    let recorder = Recorder::new();
    let client = trusting().listener(recorder.clone()).build().unwrap();
    let response = client
        .get(hypercorn.https_url("/bytes/10"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.headers()["x-http-version"], "2");
    assert_eq!(response.bytes().wait().unwrap(), "abcdefghij");
    assert_eq!(alpn_of(&recorder).as_deref(), Some(&b"h2"[..]));
    client.close();

    let client = trusting().http1_only().build().unwrap();
    let response = client.get(hypercorn.https_url("/")).send().wait().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_11);
    assert_eq!(response.headers()["x-http-version"], "1.1");
    client.close();
}

#[test]
fn hypercorn_serves_many_streams_uploads_and_streams_on_one_connection() {
    let pem = PemFiles::of(&certs().valid);
    let hypercorn = Hypercorn::start_tls(&pem.cert(), &pem.key());
    let client = trusting().build().unwrap();
    // The connection first, then many streams on it.
    let first = client.get(hypercorn.https_url("/")).send().wait().unwrap();
    assert_eq!(first.version(), http::Version::HTTP_2);
    drop(first.bytes().wait().unwrap());
    let futures: Vec<_> = (0..50)
        .map(|i| {
            client
                .get(hypercorn.https_url(&format!("/bytes/{i}")))
                .send()
        })
        .collect();
    for (i, future) in futures.into_iter().enumerate() {
        let body = future.wait().unwrap().bytes().wait().unwrap();
        assert_eq!(body.len(), i);
    }
    assert_eq!(client.stats().open_connections, 1);
    let big = vec![b'x'; 1 << 20];
    let echoed = client
        .post(hypercorn.https_url("/echo"))
        .body(Upload::from_reader(std::io::Cursor::new(big.clone()), None))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    assert_eq!(echoed.len(), big.len());
    let streamed = client
        .get(hypercorn.https_url("/stream/5?interval_ms=20"))
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(streamed, "chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n");
    client.close();
}

#[test]
fn hypercorn_cleartext_with_prior_knowledge_and_a_stalled_stream_timing_out_alone() {
    let hypercorn = Hypercorn::start();
    for event_loop_timeouts in [false, true] {
        let client = Client::builder()
            .http2_prior_knowledge()
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        let slow = client.get(hypercorn.url("/delay/300")).send();
        let stalled = client
            .get(hypercorn.url("/stall"))
            .request_timeout(Duration::from_millis(150))
            .send();
        let error = stalled.wait().unwrap_err();
        assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
        let slow = slow.wait().unwrap();
        assert_eq!(slow.version(), http::Version::HTTP_2);
        assert_eq!(slow.headers()["x-http-version"], "2");
        assert_eq!(slow.text().wait().unwrap(), "delayed 300 ms\n");
        assert_eq!(client.stats().open_connections, 1);
        client.close();
    }
}

/// hypercorn ends every stream with an empty DATA frame, a 304's too: a
/// 304 declaring the length of what it stands for is whole all the same,
/// and its connection goes on.
#[test]
fn hypercorn_304_declaring_a_length_is_whole_and_empty() {
    let hypercorn = Hypercorn::start();
    let client = Client::builder().http2_prior_knowledge().build().unwrap();
    for _ in 0..2 {
        let response = client
            .get(hypercorn.url("/not-modified/1234"))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 304);
        assert_eq!(response.headers()["content-length"], "1234");
        assert_eq!(response.bytes().wait().unwrap(), "");
    }
    assert_eq!(client.stats().open_connections, 1);
    client.close();
}

/// A caller's `TE: trailers` reaches the server over HTTP/2 (RFC 9113
/// §8.2.2 keeps that one connection field): hypercorn sends an app's
/// trailers only to a request that asked so.
#[test]
fn hypercorn_sends_trailers_to_a_request_asking_for_them() {
    let hypercorn = Hypercorn::start();
    let client = Client::builder().http2_prior_knowledge().build().unwrap();
    let mut response = client
        .get(hypercorn.url("/trailers"))
        .header("te", "trailers")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.headers()["x-http-version"], "2");
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().wait().unwrap() {
        body.extend_from_slice(&chunk);
    }
    assert_eq!(body, b"with trailers\n");
    let trailers = response.trailers().expect("the server's trailers");
    assert_eq!(trailers["x-checksum"], "abc123");
    client.close();
}

/// A field value padded with whitespace, which HTTP/1.1 carries (the
/// server trims it), is malformed over HTTP/2 (RFC 9113 §8.2.1):
/// hypercorn (python-h2) ends the whole connection for it with
/// `GOAWAY(PROTOCOL_ERROR)`, and a request in flight beside it failed too.
/// Sent trimmed, both are answered, on the one connection.
#[test]
fn hypercorn_answers_a_padded_field_value_and_the_stream_beside_it() {
    let hypercorn = Hypercorn::start();
    let client = Client::builder().http2_prior_knowledge().build().unwrap();
    let beside = client.get(hypercorn.url("/delay/300")).send();
    let padded = client
        .get(hypercorn.url("/headers"))
        .header("x-pad", " padded\t")
        .send()
        .wait()
        .unwrap();
    assert_eq!(padded.headers()["x-http-version"], "2");
    let text = padded.text().wait().unwrap();
    assert!(text.contains("x-pad: padded\n"), "{text}");
    assert_eq!(
        beside.wait().unwrap().text().wait().unwrap(),
        "delayed 300 ms\n"
    );
    assert_eq!(client.stats().open_connections, 1);
    client.close();
}

#[test]
fn nginx_http2_over_tls_and_prior_knowledge() {
    let pem = PemFiles::of(&certs().valid);
    let nginx = Nginx::start_tls(&pem.cert(), &pem.key());
    nginx.write_file("hello.txt", "hello from nginx\n");
    let client = trusting().build().unwrap();
    let response = client
        .get(nginx.https_url("/hello.txt"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.text().wait().unwrap(), "hello from nginx\n");
    client.close();

    let client = Client::builder().http2_prior_knowledge().build().unwrap();
    let futures: Vec<_> = (0..20)
        .map(|_| client.get(nginx.h2c_url("/hello.txt")).send())
        .collect();
    for future in futures {
        let response = future.wait().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.text().wait().unwrap(), "hello from nginx\n");
    }
    assert_eq!(client.stats().open_connections, 1);
    client.close();
}

/// nginx's HTTP/1.1-only port, spoken to with prior knowledge, answers
/// the preface with an HTTP/1.1 status: the request fails saying the
/// server does not speak HTTP/2, not with a broken pipe.
#[test]
fn nginx_without_http2_asked_with_prior_knowledge_does_not_speak_http2() {
    let nginx = Nginx::start();
    nginx.write_file("hello.txt", "hello from nginx\n");
    let client = Client::builder().http2_prior_knowledge().build().unwrap();
    let error = client
        .get(nginx.url("/hello.txt"))
        .send()
        .wait()
        .unwrap_err();
    match &error {
        Error::NotHttp2 {
            answer: Some(line), ..
        } => assert!(line.starts_with("HTTP/1.1 "), "{line}"),
        _ => panic!("{error:?}"),
    }
    assert!(error.is_unprocessed(), "{error:?}");
    assert!(
        error.to_string().contains("does not speak HTTP/2"),
        "{error}"
    );
    client.close();
}

#[test]
fn nginx_over_tls_with_two_connections_per_origin_opens_the_second_at_its_stream_limit() {
    // nginx lets 128 streams in at once per connection
    // (http2_max_concurrent_streams); /slow/ sends 1 KiB/s per request, so
    // a burst of 300 fills the first connection, then a second, and never
    // opens a third.
    let pem = PemFiles::of(&certs().valid);
    let nginx = Nginx::start_tls(&pem.cert(), &pem.key());
    nginx.write_file("small.txt", "ok");
    nginx.write_file("slow.txt", vec![b's'; 1500]);
    let client = trusting()
        .http2_max_connections_per_origin(2)
        .build()
        .unwrap();
    let warm = client
        .get(nginx.https_url("/small.txt"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(warm.version(), http::Version::HTTP_2);
    assert_eq!(warm.text().wait().unwrap(), "ok");
    let futures: Vec<_> = (0..300)
        .map(|_| client.get(nginx.https_url("/slow/slow.txt")).send())
        .collect();
    for future in futures {
        let response = future.wait().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.bytes().wait().unwrap().len(), 1500);
    }
    // `$connection` is the log's first field.
    let log = nginx.access_log();
    let connections: std::collections::BTreeSet<&str> = log
        .lines()
        .filter(|line| line.contains("/slow/slow.txt"))
        .filter_map(|line| line.split(' ').next())
        .collect();
    assert_eq!(connections.len(), 2, "{connections:?}");
    assert!(client.stats().open_connections <= 2);
    client.close();
}

#[test]
fn http2_only_fails_against_a_server_that_speaks_http11_only() {
    // The test TLS server offers http/1.1 alone: rustls there refuses a
    // client that offers h2 alone, with a `no_application_protocol` alert.
    let server = TlsServer::respond(&certs().valid, |_| ok("h1 only"));
    let client = trusting().http2_only().build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Http2NotNegotiated {
                handshake_refused: true,
                ..
            }
        ),
        "{error:?}"
    );
    client.close();
    // By default the same server is fine, over HTTP/1.1.
    let client = trusting().build().unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_11);
    client.close();
}

/// An HTTP/2-only client against a TLS server that offers http/1.1 alone
/// fails with a typed error that says so — not a TLS failure nor an I/O
/// error to tell by its message —, names the server, says nothing of the
/// request was sent, and is not retried, even for a POST a policy would
/// send again whatever its method: one connection, one refused handshake.
#[test]
fn an_http2_only_client_refused_by_an_http11_server_says_so_and_is_not_retried() {
    let server = TlsServer::respond(&certs().valid, |_| ok("h1 only"));
    let retry = tickless::retry::Policy::attempts(4)
        .any_method(true)
        .backoff(Duration::from_millis(1), Duration::from_millis(1));
    let recorder = Recorder::new();
    let client = trusting()
        .http2_only()
        .retry(retry)
        .listener(recorder.clone())
        .build()
        .unwrap();
    let error = client
        .post(server.url("/"))
        .body("once")
        .send()
        .wait()
        .unwrap_err();
    match &error {
        Error::Http2NotNegotiated {
            remote,
            handshake_refused,
            unprocessed,
        } => {
            let port = format!(":{}", server.addr().port());
            assert!(remote.ends_with(&port), "{remote}");
            assert!(handshake_refused);
            assert!(unprocessed);
        }
        other => panic!("{other:?}"),
    }
    assert!(error.is_unprocessed());
    assert!(error.tls_failure().is_none(), "{error:?}");
    assert!(
        error.to_string().contains("did not negotiate h2"),
        "{error}"
    );
    assert_eq!(server.connections_accepted(), 1);
    assert_eq!(server.handshakes(), 0);
    assert!(server.tls_requests().is_empty());
    let retries = recorder
        .events()
        .into_iter()
        .filter(|(event, _)| matches!(event, Event::Retry(..)))
        .count();
    assert_eq!(retries, 0);
    client.close();
}

/// Requests that waited for an HTTP/2-only client's connection to a TLS
/// server that negotiates no protocol at all (no ALPN: TLS succeeds, and
/// the client refuses the connection) fail with its opener, each with a
/// copy of its error — not one after another, each opening a connection
/// that fails the same way.
#[test]
fn requests_waiting_for_an_http2_only_opening_without_alpn_fail_with_it() {
    let mut config = (*support::tls::server_config(&certs().valid)).clone();
    config.alpn_protocols.clear();
    let server = TlsServer::start_with(
        std::sync::Arc::new(config),
        support::tls::TlsBehaviour::respond(|_| ok("h1 only")),
    );
    let client = trusting().http2_only().build().unwrap();
    let futures: Vec<_> = (0..8).map(|_| client.get(server.url("/")).send()).collect();
    for future in futures {
        match future.wait() {
            Err(Error::Http2NotNegotiated {
                handshake_refused,
                unprocessed,
                ..
            }) => {
                assert!(!handshake_refused);
                assert!(unprocessed);
            }
            other => panic!("{:?}", other.map(|response| response.status())),
        }
    }
    // One for all — two if a loaded machine ran the whole opening before
    // the last request was sent (it opens its own then); one each, before.
    assert!(
        server.handshakes() <= 2,
        "{} handshakes",
        server.handshakes()
    );
    client.close();
}

/// A TLS server that negotiates no protocol does not speak HTTP/2 to an
/// HTTP/2-only client, and would not on another connection: a retry
/// policy does not send the request again (as it does not after
/// `Error::NotHttp2`), each retry a connection and a handshake that fail
/// the same way.
#[test]
fn an_http2_only_opening_without_alpn_is_not_retried() {
    let mut config = (*support::tls::server_config(&certs().valid)).clone();
    config.alpn_protocols.clear();
    let server = TlsServer::start_with(
        std::sync::Arc::new(config),
        support::tls::TlsBehaviour::respond(|_| ok("h1 only")),
    );
    let retry = tickless::retry::Policy::attempts(4)
        .backoff(Duration::from_millis(1), Duration::from_millis(1));
    let client = trusting().http2_only().retry(retry).build().unwrap();
    match client.get(server.url("/")).send().wait() {
        Err(error @ Error::Http2NotNegotiated { .. }) => {
            assert!(
                matches!(
                    error,
                    Error::Http2NotNegotiated {
                        handshake_refused: false,
                        unprocessed: true,
                        ..
                    }
                ),
                "{error:?}"
            );
            assert!(
                error.to_string().ends_with("it negotiated no protocol"),
                "{error}"
            );
        }
        other => panic!("{:?}", other.map(|response| response.status())),
    }
    assert!(server.wait_for_open(0, Duration::from_secs(10)));
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// hypercorn ends an HTTP/2 connection at its 1001st request
/// (`keep_alive_max_requests`, 1000) with a `GOAWAY(NO_ERROR)` whose last
/// stream id is the highest it has read — and from then on answers none of
/// the streams it names processed (python-h2's connection is closed for
/// sending) and takes no frame: any makes it close the connection (after a
/// `GOAWAY(PROTOCOL_ERROR)`), silence has it close after its keep-alive
/// timeout (5 s). Here the 1001st request goes alone, its answer delayed,
/// so nothing the client sends anyway ends the wait.
///
/// In hypercorn 0.18.0 and h2 4.4.1 (the virtualenv's `site-packages`):
/// `hypercorn/protocol/h2.py:256-257` calls `close_connection()` once an
/// event list holds the request past the limit; `h2/connection.py:1097`
/// moves python-h2's state machine to `CLOSED`, whose transitions
/// (`h2/connection.py:244-247`) take no frame but a GOAWAY: any other
/// raises `ProtocolError` (`:262-267`), on which `receive_data` queues
/// `GOAWAY(PROTOCOL_ERROR)` (`:1525-1531`, `_terminate_connection` at
/// `:1584-1593`) and hypercorn sends it and closes (`h2.py:186-188`).
fn hypercorn_client() -> (Hypercorn, Client, std::sync::Arc<Recorder>) {
    let hypercorn = Hypercorn::start();
    let recorder = Recorder::new();
    let client = Client::builder()
        .http2_prior_knowledge()
        // hypercorn's keep-alive timeout: a request that waits for it fails.
        .request_timeout(Duration::from_secs(5))
        .listener(recorder.clone())
        .build()
        .unwrap();
    (hypercorn, client, recorder)
}

/// `requests` GETs of `path`, 32 at a time, each answered.
fn get_32_at_a_time(client: &Client, hypercorn: &Hypercorn, path: &str, requests: usize) {
    let url = hypercorn.url(path);
    let mut in_flight = std::collections::VecDeque::new();
    let mut sent = 0;
    while sent < requests || !in_flight.is_empty() {
        while sent < requests && in_flight.len() < 32 {
            in_flight.push_back(client.get(&url).send());
            sent += 1;
        }
        let response = in_flight.pop_front().unwrap().wait().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert!(!response.bytes().wait().unwrap().is_empty());
    }
}

fn goaways(recorder: &Recorder) -> usize {
    recorder
        .events()
        .into_iter()
        .filter(|(event, _)| matches!(event, Event::GoAway(..)))
        .count()
}

fn streams_opened(recorder: &Recorder) -> usize {
    recorder
        .events()
        .into_iter()
        .filter(|(event, _)| matches!(event, Event::StreamOpened(..)))
        .count()
}

/// The 1001st request, a GET, comes back all the same, not after waiting
/// for hypercorn's timeout: the client asks the connection for a PING
/// answer, hypercorn closes it, and the stream it processed and never
/// answered goes again (a GET may) on a new connection, as do the requests
/// after it.
#[test]
fn hypercorn_goaway_at_its_request_limit_sends_a_get_it_left_unanswered_elsewhere_at_once() {
    let (hypercorn, client, recorder) = hypercorn_client();
    get_32_at_a_time(&client, &hypercorn, "/bytes/3", 1000);
    assert_eq!(client.stats().open_connections, 1);
    assert_eq!(goaways(&recorder), 0);
    get_32_at_a_time(&client, &hypercorn, "/delay/100", 1);
    assert_eq!(goaways(&recorder), 1);
    get_32_at_a_time(&client, &hypercorn, "/bytes/3", 199);
    assert_eq!(goaways(&recorder), 1);
    client.close();
}

/// A POST in the 1001st request's place may have been processed (hypercorn
/// ran it): it is not sent again, and fails as soon as hypercorn closes the
/// connection, not at its timeout — marked as possibly processed, naming
/// the code of hypercorn's last `GOAWAY`.
///
/// Which frame ends the connection is a race: the POST's DATA if hypercorn
/// read it apart from its HEADERS (python-h2 parses all of a read's frames,
/// `h2/connection.py:1519-1520`, before hypercorn handles their events,
/// `h2.py:185-190`, and closes, `:257`), else the client's PING after the
/// `GOAWAY`. Either frame is the client's right (RFC 9113 §6.8: the stream
/// is at or below the last stream id); either way hypercorn sends
/// `GOAWAY(NO_ERROR)`, then `GOAWAY(PROTOCOL_ERROR)`, and closes. The client
/// takes the two in one read (mostly the DATA's case) or two, and fails the
/// POST with the later code both ways (tests/http2_failures.rs, both orders).
#[test]
fn hypercorn_goaway_at_its_request_limit_fails_a_post_it_left_unanswered_at_once() {
    let (hypercorn, client, recorder) = hypercorn_client();
    get_32_at_a_time(&client, &hypercorn, "/bytes/3", 1000);
    let opened = streams_opened(&recorder);
    let error = client
        .post(hypercorn.url("/delay/100"))
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
        "{error:?}"
    );
    assert!(!error.is_unprocessed(), "{error:?}");
    assert_eq!(streams_opened(&recorder), opened + 1);
    assert_eq!(goaways(&recorder), 1);
    // The next request goes to a new connection.
    get_32_at_a_time(&client, &hypercorn, "/bytes/3", 1);
    client.close();
}
