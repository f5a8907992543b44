//! HTTPS over rustls against loopback TLS servers, with certificates made at
//! test time (tests/support/tls.rs): round trips, the server named by an
//! IPv6 literal or a name with its final dot, keep-alive reuse (not after
//! part of a record nobody asked for), certificate failures by kind (a
//! self-signed CA certificate as the server's among them),
//! handshake events, truncation without close_notify, a server that never
//! speaks TLS ended by the request
//! timeout in both timeout modes, servers that break the handshake, records
//! split across many segments both ways, an early refusal of an upload (and
//! the reset after it, which raises no `SIGPIPE`), and a response read
//! together with a fatal alert after it.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;
use support::tls::{certs, TlsBehaviour, TlsServer};
use support::*;
use tickless::{Client, ClientBuilder, Error, TlsFailureKind};

const CEILING: Duration = Duration::from_secs(10);

fn trusting() -> ClientBuilder {
    Client::builder()
        .event_loops(1)
        .add_root_certificate(&certs().ca_pem)
}

fn hello_server() -> TlsServer {
    TlsServer::respond(&certs().valid, |request| {
        ok(&format!("hello {}", request.target))
    })
}

fn tls_failure(error: &Error) -> TlsFailureKind {
    match error {
        Error::Tls { kind, .. } => *kind,
        other => panic!("expected Error::Tls, got {other:?}"),
    }
}

#[test]
fn a_valid_chain_round_trips_by_ip_and_by_name() {
    let server = hello_server();
    let client = trusting().build().unwrap();
    let response = client.get(server.url("/a")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "hello /a");
    // By name: SNI is sent, and the name is checked against the certificate.
    let response = client
        .get(server.url_for("localhost", "/b"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "hello /b");
    // An IP literal carries no SNI; a DNS name does.
    let names = server.server_names();
    assert_eq!(names.first(), Some(&None), "{names:?}");
    assert!(names.contains(&Some("localhost".to_owned())), "{names:?}");
    assert_settles(&client, CEILING);
    client.close();
}

#[test]
fn the_root_may_be_given_as_der_and_the_default_roots_replaced() {
    let server = hello_server();
    let client = Client::builder()
        .event_loops(1)
        .tls_roots(tickless::rustls::RootCertStore::empty())
        .add_root_certificate(&certs().ca_der)
        .build()
        .unwrap();
    let response = client.get(server.url("/der")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "hello /der");
    client.close();
    // An empty store and nothing added: nothing is trusted.
    let client = Client::builder()
        .tls_roots(tickless::rustls::RootCertStore::empty())
        .build()
        .unwrap();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert_eq!(tls_failure(&error), TlsFailureKind::UnknownIssuer);
    client.close();
}

#[test]
fn a_root_certificate_that_does_not_parse_fails_build() {
    for bad in [
        &b"definitely not a certificate"[..],
        b"-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
    ] {
        let error = Client::builder()
            .add_root_certificate(bad)
            .build()
            .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{error}");
    }
}

#[test]
fn sequential_requests_reuse_one_tls_connection() {
    let server = hello_server();
    let recorder = Recorder::new();
    let client = trusting().listener(recorder.clone()).build().unwrap();
    for i in 0..5 {
        let path = format!("/{i}");
        let response = client.get(server.url(&path)).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), format!("hello {path}"));
    }
    assert_eq!(server.connections_accepted(), 1);
    assert_eq!(server.handshakes(), 1);
    assert_eq!(server.tls_requests().len(), 5);
    let events = recorder.events();
    let count = |pred: fn(&Event) -> bool| events.iter().filter(|(e, _)| pred(e)).count();
    assert_eq!(count(|e| matches!(e, Event::TlsHandshakeAttempt(_))), 1);
    assert_eq!(count(|e| matches!(e, Event::ConnectionPooled(_))), 4);
    client.close();
    // Closing sends close_notify: the server reads a clean end.
    assert!(server.wait_for_open(0, CEILING));
}

/// A large body that is all on the socket at once, on a connection the
/// server keeps open: every record is read, though a read of plaintext
/// returns less than it was offered while records are still waiting on
/// the socket (no event will announce them again). With and without a read
/// timeout (the second lets the loop wait on the socket's low-water mark
/// over plain TCP, never over TLS).
#[test]
fn a_large_body_sent_at_once_on_a_kept_connection_is_read_whole() {
    let body: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let answer = [
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes(),
        body.clone(),
    ]
    .concat();
    let server = TlsServer::respond(&certs().valid, move |_| answer.clone());
    for read_timeout in [Duration::from_secs(30), Duration::ZERO] {
        let client = trusting()
            .read_timeout(read_timeout)
            .request_timeout(CEILING)
            .build()
            .unwrap();
        for _ in 0..3 {
            let response = client.get(server.url("/")).send().wait().unwrap();
            let got = response.bytes().wait().unwrap();
            assert!(got == body, "the body differs");
        }
        client.close();
    }
}

#[test]
fn a_connection_the_server_closed_while_idle_is_not_reused() {
    let server = TlsServer::start(
        &certs().valid,
        TlsBehaviour::RespondThenClose(Arc::new(|_| ok("once"))),
    );
    let client = trusting().build().unwrap();
    for _ in 0..3 {
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), "once");
    }
    assert_eq!(server.connections_accepted(), 3);
    client.close();
}

/// A record's raw bytes as `conn` would send `plaintext`.
fn record_of(conn: &mut rustls::ServerConnection, plaintext: &[u8]) -> Vec<u8> {
    conn.writer().write_all(plaintext).unwrap();
    let mut raw = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut raw).unwrap();
    }
    raw
}

/// Bytes past an answer that nobody asked for make a TLS connection unfit
/// for another request, as they do a plain one — also when they are the
/// start of a record, which does not decrypt yet: the rest of it, come
/// after the next request went out, would be read as that request's
/// answer. Here the server sends the first half of a record holding a
/// second, stale answer — with its answer (the connection is not pooled),
/// or once the client has read that (it is then closed as it idles) —
/// and the other half only if the next request comes on the same
/// connection.
#[test]
fn a_connection_with_part_of_a_record_past_its_answer_is_not_reused() {
    for with_the_answer in [true, false] {
        let (read, first_read) = std::sync::mpsc::channel::<()>();
        let first_read = std::sync::Mutex::new(first_read);
        let config = support::tls::server_config(&certs().valid);
        let server = TestServer::start(Behaviour::custom(move |stream, index| {
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, stream);
            let mut reader = RequestReader::new(index);
            let Ok(request) = reader.read_request(&mut tls) else {
                return;
            };
            if request.target != "/first" {
                let _ = tls.write_all(&ok("second"));
                let _ = tls.flush();
                return;
            }
            let answer = record_of(&mut tls.conn, &ok("first"));
            let stale = record_of(&mut tls.conn, &ok("stale"));
            let (head, rest) = stale.split_at(stale.len() / 2);
            // In one write, the answer and the first half arrive together.
            let sent = if with_the_answer {
                tls.sock.write_all(&[&answer[..], head].concat())
            } else {
                tls.sock.write_all(&answer).and_then(|()| {
                    let _ = first_read.lock().unwrap().recv();
                    tls.sock.write_all(head)
                })
            };
            // The next request, if it comes on this connection.
            if sent.is_ok() && reader.read_request(&mut tls).is_ok() {
                let _ = tls.sock.write_all(rest);
                let _ = tls.write_all(&ok("second"));
                let _ = tls.flush();
            }
        }));
        let url = |path: &str| format!("https://127.0.0.1:{}{path}", server.addr().port());
        let client = trusting().request_timeout(CEILING).build().unwrap();
        let first = client.get(url("/first")).send().wait().unwrap();
        assert_eq!(first.text().wait().unwrap(), "first");
        read.send(()).unwrap_or_default();
        // The client closes the connection.
        assert!(server.wait_for_open(0, CEILING), "{with_the_answer}");
        let second = client.get(url("/second")).send().wait().unwrap();
        assert_eq!(second.text().wait().unwrap(), "second");
        assert_eq!(server.connections_accepted(), 2);
        client.close();
    }
}

#[test]
fn an_unknown_issuer_is_rejected() {
    let server = hello_server();
    let recorder = Recorder::new();
    // The default roots: the test CA is not among them.
    let client = Client::builder()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert_eq!(tls_failure(&error), TlsFailureKind::UnknownIssuer);
    assert!(error.to_string().contains("TLS handshake with"), "{error}");
    assert!(
        error.to_string().contains("certificate issuer unknown"),
        "{error}"
    );
    assert!(!error.is_timeout());
    assert_eq!(server.handshakes(), 0);
    assert!(server.wait_for_open(0, CEILING), "the socket was left open");
    assert!(server.tls_requests().is_empty());
    assert_settles(&client, CEILING);
    client.close();
}

#[test]
fn a_certificate_for_another_name_is_rejected() {
    let server = TlsServer::respond(&certs().other_name, |_| ok("no"));
    let client = trusting().build().unwrap();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert_eq!(tls_failure(&error), TlsFailureKind::NameMismatch);
    assert!(
        error.to_string().contains("certificate name mismatch"),
        "{error}"
    );
    // By DNS name too.
    let error = client
        .get(server.url_for("localhost", "/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert_eq!(tls_failure(&error), TlsFailureKind::NameMismatch);
    client.close();
}

/// A host that is not ASCII, or percent-encoded, goes as the URL standard
/// reads it: the server name (SNI), the name the certificate is checked
/// for and the `Host` header are its ASCII form (`xn--bcher-kva.test`,
/// `example.test`), as reqwest and curl send them — and the two
/// spellings of one host share a connection.
#[test]
fn a_host_spelled_otherwise_is_the_server_name_in_its_ascii_form() {
    let server = TlsServer::respond(&certs().ascii_names, |request| {
        ok(request.header("host").unwrap_or("-"))
    });
    let port = server.addr().port();
    let client = trusting()
        .no_proxy()
        .resolve("xn--bcher-kva.test", &[server.addr()])
        .resolve("example.test", &[server.addr()])
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let host_sent = |url: &str| {
        client
            .get(url)
            .send()
            .wait()
            .and_then(|r| r.text().wait())
            .unwrap_or_else(|e| panic!("{url}: {e:?}"))
    };
    for (url_host, sent) in [
        ("bücher.test", "xn--bcher-kva.test"),
        ("xn--bcher-kva.test", "xn--bcher-kva.test"),
        ("ex%61mple.test", "example.test"),
        ("example.test", "example.test"),
    ] {
        let url = format!("https://{url_host}:{port}/");
        assert_eq!(host_sent(&url), format!("{sent}:{port}"), "{url}");
    }
    assert_eq!(
        server.server_names(),
        [
            Some("xn--bcher-kva.test".to_owned()),
            Some("example.test".to_owned())
        ]
    );
    client.close();
}

/// An IPv6 literal is no server name: the ClientHello carries no SNI, the
/// certificate is checked against the address, and `Host` has the
/// brackets. A name written with its final dot sends SNI without it (a
/// server name has none) and is checked as the name it is, while `Host`
/// is as the URL has it.
#[test]
fn an_ipv6_literal_and_a_name_with_a_final_dot_are_named_as_tls_and_http_want() {
    let Ok(listener) = std::net::TcpListener::bind("[::1]:0") else {
        eprintln!("skipped: no IPv6 loopback");
        return;
    };
    let server = TlsServer::start_on(
        listener,
        support::tls::server_config(&certs().valid),
        TlsBehaviour::respond(|request| ok(request.header("host").unwrap_or("-"))),
    );
    let port = server.addr().port();
    let client = trusting()
        .no_proxy()
        .resolve("localhost", &[server.addr()])
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let host_sent = |url: &str| {
        client
            .get(url)
            .send()
            .wait()
            .and_then(|r| r.text().wait())
            .unwrap_or_else(|e| panic!("{url}: {e:?}"))
    };
    assert_eq!(
        host_sent(&server.url_for("[::1]", "/")),
        format!("[::1]:{port}")
    );
    assert_eq!(
        host_sent(&server.url_for("localhost.", "/")),
        format!("localhost.:{port}")
    );
    assert_eq!(server.server_names(), [None, Some("localhost".to_owned())]);
    assert_settles(&client, CEILING);
    client.close();
}

/// A retried request whose last attempt met a bad certificate failed for
/// it: `tls_failure` says why, as `timeout_kind` would say which timeout.
#[test]
fn a_retried_request_ended_by_a_certificate_says_why() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        // The first connection reset at once: an I/O error, retried.
        let first = accept_in_time(&listener);
        socket2::SockRef::from(&first)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(first);
        // The second offers an expired certificate.
        let second = accept_in_time(&listener);
        let config = support::tls::server_config(&certs().expired);
        let connection = rustls::ServerConnection::new(config).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, second);
        let _ = std::io::Read::read(&mut tls, &mut [0; 1]);
    });
    let client = trusting().build().unwrap();
    let error = client
        .get(format!("https://127.0.0.1:{port}/"))
        .retry(tickless::retry::Policy::attempts(2).backoff(Duration::ZERO, Duration::ZERO))
        .send()
        .wait()
        .unwrap_err();
    let Error::Retried { attempts } = &error else {
        panic!("expected the two attempts, got {error:?}");
    };
    // The reset comes as the connect's failure or the handshake's, as the
    // kernel's timing has it: a connect error either way, retried.
    assert!(
        matches!(attempts[..], [Error::Connect { .. }, Error::Tls { .. }]),
        "{error:?}"
    );
    assert_eq!(
        error.tls_failure(),
        Some(TlsFailureKind::Expired),
        "{error}"
    );
    assert!(!error.is_timeout());
    // Joined once the client has made both connections (else it would wait
    // for ever).
    server.join().unwrap();
    client.close();
}

/// A TLS handshake the server resets (after the ClientHello) sent no byte
/// of the request — the client sends no early data —, so a retry policy
/// sends it again whatever its method, as it does a connection refused:
/// a POST too. (It failed with an `Error::Io`, which says the connection
/// failed while the exchange was using it: a POST was not sent again.)
#[test]
fn a_handshake_reset_sent_nothing_so_a_post_is_retried() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        // The first connection reset once the ClientHello has come.
        let mut first = accept_in_time(&listener);
        assert!(
            matches!(first.read(&mut [0; 4096]), Ok(1..)),
            "no ClientHello"
        );
        socket2::SockRef::from(&first)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(first);
        // The second answers.
        let second = accept_in_time(&listener);
        let config = support::tls::server_config(&certs().valid);
        let connection = rustls::ServerConnection::new(config).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, second);
        let head = read_head(&mut tls).expect("a request head");
        let mut body = vec![0; content_length(&head)];
        tls.read_exact(&mut body).unwrap();
        tls.write_all(&ok("posted")).unwrap();
        tls.flush().unwrap();
        body
    });
    let client = trusting().request_timeout(CEILING).build().unwrap();
    let answer = client
        .post(format!("https://127.0.0.1:{port}/"))
        .body("the payload")
        .retry(tickless::retry::Policy::attempts(2).backoff(Duration::ZERO, Duration::ZERO))
        .send()
        .wait()
        .and_then(|response| response.text().wait());
    assert_eq!(answer.unwrap(), "posted");
    assert_eq!(server.join().unwrap(), b"the payload");
    client.close();
}

#[test]
fn an_expired_certificate_is_rejected() {
    let server = TlsServer::respond(&certs().expired, |_| ok("no"));
    let client = trusting().build().unwrap();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert_eq!(tls_failure(&error), TlsFailureKind::Expired);
    assert!(error.to_string().contains("certificate expired"), "{error}");
    client.close();
}

/// A server whose certificate is a CA certificate signed by itself — what
/// `openssl req -x509` makes by default, the common "self-signed
/// certificate" — is refused for that, whether or not the client trusts
/// it as a root (webpki takes no CA certificate for a server's), and the
/// error says so: its kind, and its words. (It was `Other`, "TLS error":
/// nothing to act on, and adding the certificate as a root, the remedy
/// an unknown issuer's kind points to, changed nothing.)
#[test]
fn a_ca_certificate_served_as_the_servers_own_is_refused_and_named() {
    let server = TlsServer::respond(&certs().self_signed_ca, |_| ok("no"));
    let untrusted = Client::builder().build().unwrap();
    let trusted = Client::builder()
        .add_root_certificate(&certs().self_signed_ca_pem)
        .build()
        .unwrap();
    for client in [&untrusted, &trusted] {
        let error = client
            .get(server.url_for("localhost", "/"))
            .send()
            .wait()
            .unwrap_err();
        assert_eq!(tls_failure(&error), TlsFailureKind::CaCertificate);
        assert_eq!(error.tls_failure(), Some(TlsFailureKind::CaCertificate));
        assert!(error.to_string().contains("a CA certificate"), "{error}");
        assert_eq!(server.tls_requests().len(), 0);
    }
    untrusted.close();
    trusted.close();
}

#[test]
fn danger_accept_invalid_certs_accepts_what_verification_rejects() {
    let unknown = hello_server();
    let other = TlsServer::respond(&certs().other_name, |_| ok("other"));
    let client = Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let response = client.get(unknown.url("/x")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "hello /x");
    let response = client.get(other.url("/")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "other");
    client.close();
}

#[test]
fn a_server_that_never_speaks_tls_is_ended_by_the_request_timeout_in_both_modes() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::NeverAnswer);
        let recorder = Recorder::new();
        let client = Client::builder()
            .event_loops(1)
            .wheel_tick(Duration::from_millis(10))
            .use_event_loop_timeouts(event_loop_timeouts)
            .listener(recorder.clone())
            .build()
            .unwrap();
        let url = format!("https://{}/", server.addr());
        // Long enough for the connect to be done first on a loaded machine:
        // in event-loop mode the timeout must then expire on its loop.
        let error = client
            .get(url)
            .request_timeout(Duration::from_secs(1))
            .send()
            .wait()
            .and_then(|r| r.bytes().wait())
            .unwrap_err();
        assert!(
            matches!(error, Error::RequestTimeout(ref t) if t.duration == Duration::from_secs(1)),
            "mode {event_loop_timeouts}: {error:?}"
        );
        // The handshake had started, and the timeout ended it.
        let events = recorder.events();
        assert!(events
            .iter()
            .any(|(e, _)| matches!(e, Event::TlsHandshakeAttempt(_))));
        assert!(!events
            .iter()
            .any(|(e, _)| matches!(e, Event::TlsHandshakeSuccess(..))));
        if event_loop_timeouts {
            let info = events
                .iter()
                .find_map(|(e, _)| match e {
                    Event::ConnectSuccess(info) => Some(info.clone()),
                    _ => None,
                })
                .unwrap();
            assert_eq!(recorder.failed_on(), Some(info.loop_thread));
        } else {
            assert_eq!(recorder.failed_on(), client.wheel_thread_id());
        }
        assert!(
            server.wait_for_open(0, CEILING),
            "mode {event_loop_timeouts}: the socket was left open"
        );
        assert_settles(&client, CEILING);
        assert!(eventually(CEILING, || client.stats().open_connections == 0));
        client.close();
    }
}

#[test]
fn the_handshake_timeout_bounds_a_silent_server() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let recorder = Recorder::new();
    let client = Client::builder()
        .event_loops(1)
        .handshake_timeout(Duration::from_millis(200))
        .listener(recorder.clone())
        .build()
        .unwrap();
    let error = client
        .get(format!("https://{}/", server.addr()))
        .request_timeout(Duration::from_secs(20))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::HandshakeTimeout(_)), "{error:?}");
    assert!(error.is_timeout());
    assert_eq!(
        tickless::timeout_kind(&error),
        Some(tickless::TimeoutKind::Handshake)
    );
    assert!(error
        .to_string()
        .starts_with("TLS handshake timeout to 127.0.0.1/"));
    assert!(recorder
        .events()
        .iter()
        .any(|(e, _)| matches!(e, Event::TlsHandshakeFailure(..))));
    assert!(server.wait_for_open(0, CEILING));
    assert_settles(&client, CEILING);
    client.close();
}

/// The failure of `request` read to its body's end: an I/O error of kind
/// `kind`.
fn body_io_error(request: tickless::RequestBuilder, kind: ErrorKind) -> Error {
    let error = request
        .send()
        .wait()
        .and_then(|response| response.bytes().wait())
        .unwrap_err();
    match &error {
        Error::Io { source, .. } => assert_eq!(source.kind(), kind, "{error}"),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    error
}

#[test]
fn a_close_without_close_notify_mid_body_is_an_error() {
    let server = TlsServer::start(
        &certs().valid,
        TlsBehaviour::SendThenCut(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..".to_vec(),
        ),
    );
    let client = trusting().build().unwrap();
    let error = body_io_error(client.get(server.url("/")), ErrorKind::UnexpectedEof);
    assert!(chain_text(&error).contains("close_notify"), "{error}");
    client.close();
}

/// A whole response and a fatal alert after it, in one flight (one read
/// takes both): the response is the outcome — its records decrypted and
/// were authenticated before the alert — and the alert ends the
/// connection, which is not used again, though the server keeps it open.
/// (The alert was met first and the response, decrypted beside it, lost.)
#[test]
fn a_response_read_with_a_fatal_alert_after_it_is_delivered() {
    let server = TlsServer::start(
        &certs().valid,
        TlsBehaviour::SendThenAlert(ok("before the alert")),
    );
    let client = trusting().build().unwrap();
    for round in 1..=2 {
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().wait().unwrap(), "before the alert");
        assert_eq!(server.connections_accepted(), round);
    }
    // A body cut by the alert: the bytes before it are read, then the
    // alert is the failure, the read after them (a server's alert after
    // its data, so an I/O error, not a refused handshake), without
    // waiting for the socket, which the server keeps open past the
    // request timeout.
    let cut = TlsServer::start(
        &certs().valid,
        TlsBehaviour::SendThenAlert(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..".to_vec(),
        ),
    );
    let request = client
        .get(cut.url("/"))
        .request_timeout(Duration::from_secs(20));
    let error = body_io_error(request, ErrorKind::InvalidData);
    assert!(chain_text(&error).contains("BadRecordMac"), "{error}");
    assert_settles(&client, CEILING);
    client.close();
}

#[test]
fn a_close_delimited_body_needs_close_notify_to_succeed() {
    let head = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
    let body = b"the whole body".to_vec();
    let full = [head, body.clone()].concat();

    let clean = TlsServer::start(
        &certs().valid,
        TlsBehaviour::SendThenCloseNotify(full.clone()),
    );
    let client = trusting().build().unwrap();
    let response = client.get(clean.url("/")).send().wait().unwrap();
    assert_eq!(response.bytes().wait().unwrap(), &body[..]);

    let cut = TlsServer::start(&certs().valid, TlsBehaviour::SendThenCut(full));
    let error = client
        .get(cut.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(
        matches!(&error, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
        "a truncation must not pass for the end of the body: {error:?}"
    );
    client.close();
}

/// RFC 9112 §9.5 over TLS: a server that refuses an upload after its head
/// answers, sends close_notify and closes with the body unread, and the
/// kernel resets the connection. The client's write then fails while the
/// answer waits to be read — in the socket, or already in the TLS layer —
/// and the answer is the outcome, framed by its length or by the end of
/// the stream, never the broken pipe. Whether the write fails before the
/// answer is read turns on how the loop's events fall: several tries
/// each meet it.
#[test]
fn an_early_refusal_of_an_upload_is_the_answer_not_the_write_that_failed() {
    let framed: &[u8] = b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n\
                          Content-Length: 8\r\n\r\ntoo big!";
    let to_the_end: &[u8] = b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n\r\ntoo big!";
    for answer in [framed, to_the_end] {
        let server = TlsServer::start(
            &certs().valid,
            TlsBehaviour::AnswerHeadThenClose(answer.to_vec()),
        );
        let client = trusting().request_timeout(CEILING).build().unwrap();
        for attempt in 0..10 {
            let response = client
                .post(server.url("/upload"))
                .body(vec![b'x'; 32 << 20])
                .send()
                .wait()
                .unwrap_or_else(|e| panic!("attempt {attempt}: {}", chain_text(&e)));
            assert_eq!(response.status(), 413, "attempt {attempt}");
            assert_eq!(response.text().wait().unwrap(), "too big!");
        }
        assert_settles(&client, CEILING);
        assert!(eventually(CEILING, || client.stats().open_connections == 0));
        client.close();
    }
}

/// Set in the process [`a_connection_its_server_reset_raises_no_sigpipe`]
/// runs itself in.
#[cfg(target_os = "linux")]
const SIGPIPE_CHILD: &str = "TICKLESS_TEST_SIGPIPE_DEFAULT";

/// A TLS connection its server has reset raises no `SIGPIPE` in the
/// client's process: a process that has not ignored it (a C program
/// hosting the library, a command-line tool that restores the default so
/// that `| head` ends it, as curl's users expect) is not killed by a
/// server's reset. Here the server refuses an upload early and closes with
/// the body unread (a reset); the client's next records — the rest of the
/// upload, its `close_notify` — meet the reset socket. A write on a plain
/// socket is a `send` with `MSG_NOSIGNAL` (std's); rustls's records went
/// out with `writev`, which raises the signal. The test runs itself in a
/// child process with `SIGPIPE` at its default (this process ignores it, as
/// every Rust program does by default), and looks at how the child ended.
#[cfg(target_os = "linux")]
#[test]
fn a_connection_its_server_reset_raises_no_sigpipe() {
    if std::env::var_os(SIGPIPE_CHILD).is_some() {
        // SAFETY: sets the disposition of one signal in this child
        // process, which runs this test alone, before it starts any thread
        // of its own.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        return an_early_refusal_of_an_upload_is_the_answer_not_the_write_that_failed();
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_connection_its_server_reset_raises_no_sigpipe",
            "--test-threads=1",
        ])
        .env(SIGPIPE_CHILD, "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    let status = child.status;
    assert_eq!(status.signal(), None, "the child was killed by a signal");
    assert!(status.success(), "the child failed: {status:?}");
    // It ran this test (a name it no longer matches would run none, and
    // pass).
    let said = String::from_utf8_lossy(&child.stdout);
    assert!(said.contains("1 passed"), "the child ran no test: {said}");
}

/// A server that reads the ClientHello, writes `bytes` and then closes
/// (`close`) or holds the connection open, reading what comes.
fn breaking_the_handshake_with(bytes: &'static [u8], close: bool) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        let mut hello = [0u8; 4096];
        if !matches!(stream.read(&mut hello), Ok(1..)) {
            return;
        }
        let _ = stream.write_all(bytes);
        if close {
            let _ = stream.shutdown(std::net::Shutdown::Write);
        }
        drain(&mut stream);
    }))
}

/// A server that breaks the handshake — a fatal alert, bytes that are not
/// TLS, a record longer than TLS allows, a close after the ClientHello or
/// inside a record — fails the request at once with an error that says
/// what it did: the TLS layer's refusal (`Error::Tls`) or the cut
/// (`Error::Connect`, `UnexpectedEof`: nothing of the request was sent),
/// not a wait for a timeout (the servers
/// that send garbage hold the connection open); and the connection closes.
#[test]
fn a_server_that_breaks_the_handshake_fails_it_at_once_with_a_typed_error() {
    use rustls::{AlertDescription, Error as Rustls, InvalidMessage};
    // The TLS layer's refusal, or `None`: the cut.
    let cases: [(&str, &'static [u8], bool, Option<Rustls>); 5] = [
        (
            "a handshake_failure alert",
            &[0x15, 3, 3, 0, 2, 2, 40],
            true,
            Some(Rustls::AlertReceived(AlertDescription::HandshakeFailure)),
        ),
        (
            "an HTTP answer",
            b"HTTP/1.1 400 Bad Request\r\n\r\n",
            false,
            Some(Rustls::InvalidMessage(InvalidMessage::InvalidContentType)),
        ),
        (
            "a record of 64 KiB",
            &[0x16, 3, 3, 0xff, 0xff],
            false,
            Some(Rustls::InvalidMessage(InvalidMessage::MessageTooLarge)),
        ),
        ("nothing", b"", true, None),
        ("half a record", &[0x16, 3, 3, 0, 64, 2, 0], true, None),
    ];
    let client = trusting()
        .handshake_timeout(CEILING)
        .request_timeout(CEILING)
        .build()
        .unwrap();
    for (what, bytes, close, expected) in cases {
        let server = breaking_the_handshake_with(bytes, close);
        let error = client
            .get(format!("https://{}/", server.addr()))
            .send()
            .wait()
            .unwrap_err();
        match (&error, expected) {
            (Error::Tls { kind, source, .. }, Some(expected)) => {
                assert_eq!(*kind, TlsFailureKind::Protocol, "{what}");
                assert_eq!(*source, expected, "{what}");
            }
            (Error::Connect { source, .. }, None) => {
                assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof, "{what}")
            }
            (error, expected) => panic!("{what}: expected {expected:?}, got {error:?}"),
        }
        assert!(server.wait_for_open(0, CEILING), "{what}: left open");
    }
    assert_settles(&client, CEILING);
    client.close();
}

/// Copies `from` to `to` a few bytes per write, without Nagle's delay
/// (until either side ends; [`relay`] then ends `to`'s).
fn dribble(from: &mut TcpStream, to: &mut TcpStream, step: usize) {
    let _ = to.set_nodelay(true);
    let mut chunk = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut chunk) {
        for piece in chunk[..n].chunks(step) {
            if to.write_all(piece).is_err() {
                return;
            }
            std::thread::yield_now();
        }
    }
}

/// A relay to `target` that passes everything on both ways in pieces of
/// `step` bytes.
fn dribbling_relay(target: std::net::SocketAddr, step: usize) -> TestServer {
    TestServer::start(Behaviour::custom(move |client, _| {
        let Ok(server) = TcpStream::connect(target) else {
            return;
        };
        relay(client, server, move |from, to| dribble(from, to, step));
    }))
}

/// TLS records split across many TCP segments, both ways: a relay passes
/// the stream on three bytes per write, so that the handshake's messages
/// and every record come in pieces — reads of the socket end mid-record
/// — and the server takes the client's records as slowly. An upload and
/// an answer of several records each arrive whole, byte for byte.
#[test]
fn records_that_come_a_few_bytes_at_a_time_arrive_whole_both_ways() {
    let upload: Vec<u8> = (0..20_000u32).map(|i| (i * 13 % 253) as u8).collect();
    let own: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let answer = own.clone();
    // Answers with the upload it got, then bytes of its own.
    let origin = TlsServer::respond(&certs().valid, move |request| {
        let body = [&request.body[..], &answer[..]].concat();
        response(200, &[], &body)
    });
    let relay = dribbling_relay(origin.addr(), 3);
    // A backstop only: thousands of three-byte writes each way, and the
    // machine may be loaded.
    let client = trusting()
        .request_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let got = client
        .post(format!("https://{}/", relay.addr()))
        .body(upload.clone())
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap();
    assert_eq!(got.len(), upload.len() + own.len());
    assert!(got[..upload.len()] == upload[..], "the upload changed");
    assert!(got[upload.len()..] == own[..], "the answer changed");
    assert_eq!(origin.handshakes(), 1);
    client.close();
}

#[test]
fn handshake_events_come_in_order() {
    let server = hello_server();
    let recorder = Recorder::new();
    let client = trusting().listener(recorder.clone()).build().unwrap();
    client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    let events: Vec<Event> = recorder.events().into_iter().map(|(e, _)| e).collect();
    let at = |what: &str, pred: fn(&Event) -> bool| {
        events
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("no {what} in {events:#?}"))
    };
    let connected = at("connect success", |e| matches!(e, Event::ConnectSuccess(_)));
    let attempt = at("handshake attempt", |e| {
        matches!(e, Event::TlsHandshakeAttempt(_))
    });
    let success = at("handshake success", |e| {
        matches!(e, Event::TlsHandshakeSuccess(..))
    });
    let sent = at("request sent", |e| matches!(e, Event::RequestSent(_)));
    let completed = at("completed", |e| matches!(e, Event::Completed(_)));
    assert!(connected < attempt && attempt < success && success < sent && sent < completed);
    match &events[success] {
        Event::TlsHandshakeSuccess(info, alpn) => {
            assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
            assert_eq!(info.remote, server.addr());
        }
        _ => unreachable!(),
    }

    // A failure: attempt, failure, then the exchange fails.
    let bad = TlsServer::respond(&certs().expired, |_| ok("no"));
    recorder.clear();
    client
        .get(bad.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    let events: Vec<Event> = recorder.events().into_iter().map(|(e, _)| e).collect();
    let attempt = events
        .iter()
        .position(|e| matches!(e, Event::TlsHandshakeAttempt(_)))
        .expect("an attempt");
    let failure = events
        .iter()
        .position(|e| matches!(e, Event::TlsHandshakeFailure(..)))
        .expect("a failure");
    let failed = events
        .iter()
        .position(|e| matches!(e, Event::Failed(..)))
        .expect("failed");
    assert!(attempt < failure && failure < failed, "{events:#?}");
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::TlsHandshakeSuccess(..))));
    client.close();
}
