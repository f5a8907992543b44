//! What a response keeps alive once its exchange has ended: not the
//! request's bytes (its encoded head, with a body in memory copied in, and
//! the body itself), which nothing sends again then. A test binary of its
//! own: it counts the process's heap with its global allocator. (Found by
//! a review, 2026-12-04: twice the upload stayed until the response went.)

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
mod support;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

use std::io::{Read, Write};
use support::*;
use tickless::Client;

const UPLOAD: usize = 32 << 20;

/// A 32 MiB upload answered with a 5-byte body: once the body has been
/// read to its end (the exchange has completed and its connection is back
/// in the pool), the `Response` the caller still holds does not keep the
/// upload alive (it kept about twice the upload — the encoded head with
/// the body copied in, and the body itself — until dropped).
/// The tests of this binary one at a time: each measures the whole
/// process's heap, which another's requests would swell.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A server that reads each request head byte by byte, discards its body
/// through a small buffer (nothing of it kept on the server's side), and
/// answers `hello`.
fn discarding_server() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| loop {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let mut length = content_length(&head);
        let mut sink = [0; 16 * 1024];
        while length > 0 {
            match stream.read(&mut sink[..length.min(16 * 1024)]) {
                Ok(0) | Err(_) => return,
                Ok(n) => length -= n,
            }
        }
        if stream.write_all(&ok("hello")).is_err() {
            return;
        }
    }))
}

#[test]
fn a_finished_response_does_not_keep_its_request_body_alive() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = discarding_server();
    let client = Client::builder().event_loops(1).build().unwrap();
    // Warm up: the client's own allocations settle.
    let _ = client
        .get(server.url("/"))
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait();

    let before = counting_alloc::live_bytes();
    let mut response = client
        .post(server.url("/"))
        .body(vec![b'u'; UPLOAD])
        .send()
        .wait()
        .unwrap();
    let mut text = String::new();
    response.body_mut().read_to_string(&mut text).unwrap();
    assert!(response.body_mut().is_end());
    assert_settles(&client, std::time::Duration::from_secs(10));
    // The exchange's end (on the loop's thread) lets go of the bytes just
    // after it leaves the in-flight count that `assert_settles` sees: a
    // loaded machine can hold that thread back for milliseconds.
    let went = eventually(std::time::Duration::from_secs(5), || {
        counting_alloc::live_bytes() - before < (UPLOAD / 4) as isize
    });
    let held = counting_alloc::live_bytes() - before;
    drop(response);
    let after_drop = counting_alloc::live_bytes() - before;
    assert!(
        went,
        "an ended response keeps {held} bytes alive for a {UPLOAD}-byte upload \
         ({after_drop} once it is dropped)"
    );
    client.close();
}

/// A 4 MiB body given as a `Vec` is sent from the caller's own bytes, not
/// copied into the buffer of the encoded head: sending it allocates far
/// less than the body (it allocated the body's size again, and twice the
/// body was in memory at the peak, when the head took a copy of it). The
/// same body over the same pooled connection, sent twice: both requests
/// carry it whole (the server reads each to its `Content-Length`).
#[test]
fn a_large_body_in_memory_is_sent_without_a_copy() {
    const BODY: usize = 4 << 20;
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = discarding_server();
    let client = Client::builder().event_loops(1).build().unwrap();
    let post = |body: Vec<u8>| {
        let response = client
            .post(server.url("/"))
            .body(body)
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().wait().unwrap()
    };
    // Warm up: the connection, and the client's own allocations, settle.
    assert_eq!(post(b"warm".to_vec()), "hello");

    for _ in 0..2 {
        let body = vec![b'u'; BODY];
        let before = counting_alloc::allocated_bytes();
        assert_eq!(post(body), "hello");
        let allocated = counting_alloc::allocated_bytes() - before;
        assert!(
            allocated < (BODY / 8) as u64,
            "sending a {BODY}-byte body allocated {allocated} bytes"
        );
    }
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// A server that answers `/big` with a chunked body of [`BIG`] bytes and
/// anything else with a chunked body of [`SMALL`] bytes, head and body in
/// one write.
fn big_and_small_chunked_server() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, _| loop {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        let body = if head.starts_with("GET /big ") {
            vec![b'b'; BIG]
        } else {
            vec![b's'; SMALL]
        };
        if stream.write_all(&chunked(200, &[&body], &[])).is_err() {
            return;
        }
    }))
}

const BIG: usize = 1 << 20;
const SMALL: usize = 100;

/// A small chunked body that has ended before its reader asks for it (its
/// head and body came in one read) does not keep the buffer its
/// connection reserved for the client's typical body — up to the window,
/// here about that of a 1 MiB body fetched just before — alive with it:
/// a caller keeping many small bodies keeps about their own size.
#[test]
fn a_small_chunked_body_does_not_keep_a_reservation_for_a_typical_one() {
    const KEPT: usize = 8;
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = big_and_small_chunked_server();
    let client = Client::builder().event_loops(1).build().unwrap();
    let get = |path: &str| {
        let response = client.get(server.url(path)).send().wait().unwrap();
        response.bytes().wait().unwrap()
    };
    // Warm up: the connection, and the client's own allocations, settle.
    assert_eq!(get("/big").len(), BIG);
    assert_eq!(get("/small").len(), SMALL);

    let before = counting_alloc::live_bytes();
    let mut kept = Vec::new();
    for _ in 0..KEPT {
        assert_eq!(get("/big").len(), BIG);
        kept.push(get("/small"));
    }
    assert_settles(&client, std::time::Duration::from_secs(10));
    let bound = (KEPT * 8 * 1024) as isize;
    let went = eventually(std::time::Duration::from_secs(5), || {
        counting_alloc::live_bytes() - before < bound
    });
    let held = counting_alloc::live_bytes() - before;
    assert!(
        went,
        "{KEPT} kept bodies of {SMALL} bytes keep {held} bytes alive"
    );
    assert!(kept.iter().all(|body| body.len() == SMALL));
    client.close();
}
