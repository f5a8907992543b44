//! Response limits end to end: a body over `max_body_bytes` fails with
//! `Error::BodyTooLarge` — at once after the head when its length says so
//! (the head delivered: a redirect is followed), where it is read when it
//! grows past the limit — and the connection closes.

mod support;

use std::time::Duration;
use support::*;
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(10);

fn client() -> Client {
    Client::builder()
        .event_loops(1)
        .max_body_bytes(1000)
        // Over anything here but a wait for bytes that never come.
        .request_timeout(WAIT)
        .build()
        .unwrap()
}

/// A GET to `server` fails for the 1000-byte limit, and its connection closes.
fn assert_too_large(client: &Client, server: &TestServer) {
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|response| response.bytes().wait())
        .unwrap_err();
    assert!(
        matches!(error, Error::BodyTooLarge { limit: 1000, .. }),
        "{error:?}"
    );
    assert!(server.wait_for_open(0, WAIT), "connection left open");
}

/// The head comes (its status is the caller's to see), and the body
/// fails at once: nothing of it is read or waited for (this server sends
/// none, so a wait would end in the request timeout instead).
#[test]
fn a_declared_length_over_the_limit_fails_the_body_at_once() {
    let server = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n".to_vec(),
    ));
    let client = client();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    let error = response.bytes().wait().unwrap_err();
    assert!(
        matches!(error, Error::BodyTooLarge { limit: 1000, .. }),
        "{error:?}"
    );
    assert!(server.wait_for_open(0, WAIT), "connection left open");
    client.close();
}

/// A redirect whose body is declared longer than the limit is still
/// followed: its body is not the response's.
#[test]
fn a_redirect_declaring_a_long_body_is_followed() {
    let server = TestServer::start(Behaviour::per_connection(|index| {
        if index > 0 {
            return Behaviour::respond(|_| ok("followed"));
        }
        Behaviour::SendThenStall(
            b"HTTP/1.1 302 Found\r\nLocation: /to\r\nContent-Length: 5000\r\n\r\n".to_vec(),
        )
    }));
    let client = client();
    assert_eq!(get_bytes(&client, &server.url("/from")), b"followed"[..]);
    client.close();
}

#[test]
fn a_chunked_body_growing_past_the_limit_fails() {
    let chunk = vec![b'x'; 600];
    let server = TestServer::respond(move |_| chunked(200, &[&chunk, &chunk], &[]));
    let client = client();
    assert_too_large(&client, &server);
    // Within the limit is fine, on a new connection.
    let small = TestServer::respond(|_| ok(&"y".repeat(1000)));
    assert_eq!(get_bytes(&client, &small.url("/")).len(), 1000);
    client.close();
}

/// What a streaming reader gets of the body `server` sends, before its
/// error: the bytes, and the error.
fn read_until_error(client: &Client, server: &TestServer) -> (Vec<u8>, Error) {
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut read = Vec::new();
    let mut piece = [0; 256];
    loop {
        match std::io::Read::read(response.body_mut(), &mut piece) {
            Ok(0) => panic!("read whole: {} bytes", read.len()),
            Ok(n) => read.extend_from_slice(&piece[..n]),
            Err(error) => {
                let error = error
                    .into_inner()
                    .and_then(|inner| inner.downcast::<Error>().ok())
                    .expect("the client's error");
                return (read, *error);
            }
        }
    }
}

/// A body that grows past the limit gives a streaming reader every byte
/// within it that its framing delivers before the body is known to pass
/// it, then `BodyTooLarge`: a close-delimited body every byte up to the
/// limit, however its bytes come in reads (here in one, with the rest);
/// a chunked one the chunks within it, failing at the size line of the
/// chunk that passes it. (A declared length past it fails at once, above.)
#[test]
fn a_body_growing_past_the_limit_gives_a_reader_what_is_within_it_first() {
    let close_delimited = [b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), vec![b'x'; 1500]].concat();
    let chunk = vec![b'x'; 600];
    let chunked = chunked(200, &[&chunk, &chunk], &[]);
    for (framing, answer, within) in [
        ("close-delimited", close_delimited, 1000),
        ("chunked", chunked, 600),
    ] {
        let server = TestServer::start(Behaviour::SendThenStall(answer));
        let client = client();
        let (read, error) = read_until_error(&client, &server);
        assert!(
            matches!(error, Error::BodyTooLarge { limit: 1000, .. }),
            "{framing}: {error:?}"
        );
        assert_eq!(read.len(), within, "{framing}");
        assert!(read.iter().all(|&byte| byte == b'x'), "{framing}");
        assert!(
            server.wait_for_open(0, WAIT),
            "{framing}: connection left open"
        );
        client.close();
    }
}

/// A chunked body that reaches the limit exactly at its last chunk is
/// whole, with its trailers, however its last chunk and trailers come:
/// here a byte at a time, and the connection left open (the body ends by
/// its framing, not by a close).
#[test]
fn a_chunked_body_at_the_limit_exactly_is_whole_with_its_trailers_read_a_byte_at_a_time() {
    let chunk = vec![b'x'; 500];
    let answer = chunked(200, &[&chunk, &chunk], &[("x-checksum", "abc")]);
    let server = TestServer::start(Behaviour::Trickle {
        bytes: answer,
        interval: Duration::from_micros(200),
        then_stall: true,
    });
    let client = client();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut read = Vec::new();
    std::io::Read::read_to_end(response.body_mut(), &mut read).unwrap();
    assert_eq!(read.len(), 1000);
    assert_eq!(response.trailers().unwrap()["x-checksum"], "abc");
    client.close();
}
