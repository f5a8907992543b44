//! HTTP/2 floods from a server whose frames are written by hand
//! (tests/support/h2_server.rs, `RawH2Server`): PING and SETTINGS frames
//! by the hundred thousand, each of which asks the client for an answer
//! (a PING ACK, a SETTINGS ACK). The `h2` crate answers each before it
//! reads the next frame and keeps at most one answer pending, so a server
//! that does not read the answers stops the client reading: what it buffers
//! stays bounded by the socket buffers, never by the flood. A server that
//! reads them keeps the connection busy, but never the loop: the other
//! connections of that loop go on, and the request's own deadline ends it.
//! Interim (1xx) heads without end on a stream are bounded in all, as over
//! HTTP/1.1: the request fails past `max_head_bytes` of them.

mod support;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::h2_server::*;
use support::*;
use tickless::{Client, Error};

const CEILING: Duration = Duration::from_secs(20);
/// Frames a server that reads no answer writes at most: far more than the
/// socket buffers on both sides hold, so a server that could write them all
/// would have found a client that buffers whatever comes.
const FLOOD: usize = 2_000_000;
const BATCH: usize = 1000;

/// A flood as the test sees it.
#[derive(Default)]
struct Flood {
    /// Frames written so far.
    written: AtomicUsize,
    /// The writer still writes (or waits for the client to read).
    flooding: AtomicBool,
    /// The test is done with it.
    stop: AtomicBool,
}

/// A server that takes one request, then writes `frame` — until the test
/// stops it, for at most [`CEILING`], and at most [`FLOOD`] times unless
/// it `reads` what the client sends meanwhile (the answers).
fn flood(frame: Vec<u8>, reads: bool, flood: Arc<Flood>) -> RawH2Server {
    RawH2Server::start(move |mut conn| {
        let _ = conn.read_requests(1);
        let reader = reads.then(|| {
            let mut socket = conn.stream.try_clone().unwrap();
            let _ = socket.set_read_timeout(None);
            thread::spawn(move || {
                let mut sink = [0u8; 64 * 1024];
                while matches!(socket.read(&mut sink), Ok(n) if n > 0) {}
            })
        });
        let limit = if reads { usize::MAX } else { FLOOD };
        let mut socket = conn.stream.try_clone().unwrap();
        let (writer_flood, frame) = (flood.clone(), frame.clone());
        flood.flooding.store(true, Ordering::SeqCst);
        let writer = thread::spawn(move || {
            let batch: Vec<u8> = frame.repeat(BATCH);
            let flood = writer_flood;
            while !flood.stop.load(Ordering::SeqCst) && flood.written.load(Ordering::SeqCst) < limit
            {
                if socket.write_all(&batch).is_err() {
                    break;
                }
                flood.written.fetch_add(BATCH, Ordering::SeqCst);
            }
            flood.flooding.store(false, Ordering::SeqCst);
        });
        let started = Instant::now();
        while !flood.stop.load(Ordering::SeqCst) && started.elapsed() < CEILING {
            thread::sleep(Duration::from_millis(10));
        }
        // Unblocks the writer (and the reader), whatever the client does.
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        let _ = writer.join();
        if let Some(reader) = reader {
            let _ = reader.join();
        }
    })
}

/// A well-behaved server to reach on the same loop meanwhile.
fn healthy() -> RawH2Server {
    RawH2Server::start(|mut conn| conn.answer_all())
}

/// Floods `frame` at a request with a short deadline, in both timeout
/// modes, on a client with one loop. While the flood goes on, a request to
/// another server on that loop is answered and the flooded request ends
/// with its timeout; nothing is armed after. Returns the frames the server
/// wrote, in each mode.
fn survives(frame: &[u8], reads: bool) -> Vec<usize> {
    let mut written_per_mode = Vec::new();
    for event_loop_timeouts in [false, true] {
        let state = Arc::new(Flood::default());
        let server = flood(frame.to_vec(), reads, state.clone());
        let other = healthy();
        let client = Client::builder()
            .event_loops(1)
            .http2_prior_knowledge()
            .use_event_loop_timeouts(event_loop_timeouts)
            .pooled_connection_idle_timeout(Duration::ZERO)
            .build()
            .unwrap();
        let flooded = client
            .get(server.url("/"))
            .request_timeout(Duration::from_millis(500))
            .send();
        assert!(eventually(CEILING, || state.written.load(Ordering::SeqCst) > 0));
        let answered = client
            .get(other.url("/"))
            .request_timeout(CEILING)
            .send()
            .wait();
        assert_eq!(answered.unwrap().status(), 200, "{event_loop_timeouts}");
        assert!(
            state.flooding.load(Ordering::SeqCst),
            "the flood ended first"
        );
        let error = flooded.wait().unwrap_err();
        assert!(
            matches!(error, Error::RequestTimeout(_)),
            "{event_loop_timeouts}: {error:?}"
        );
        assert!(
            state.flooding.load(Ordering::SeqCst),
            "the flood ended first"
        );
        state.stop.store(true, Ordering::SeqCst);
        assert_settles(&client, CEILING);
        client.close();
        written_per_mode.push(state.written.load(Ordering::SeqCst));
    }
    written_per_mode
}

fn ping() -> Vec<u8> {
    frame(PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8])
}

fn settings() -> Vec<u8> {
    frame(SETTINGS, 0, 0, &[])
}

#[test]
fn a_ping_flood_that_reads_no_answer_stops_the_client_reading() {
    for written in survives(&ping(), false) {
        assert!(written < FLOOD, "the client took all {written} PINGs");
    }
}

#[test]
fn a_ping_flood_that_reads_the_answers_holds_neither_the_loop_nor_the_deadline() {
    survives(&ping(), true);
}

#[test]
fn a_settings_flood_that_reads_no_answer_stops_the_client_reading() {
    for written in survives(&settings(), false) {
        assert!(written < FLOOD, "the client took all {written} SETTINGS");
    }
}

#[test]
fn a_settings_flood_that_reads_the_answers_holds_neither_the_loop_nor_the_deadline() {
    survives(&settings(), true);
}

/// A server that answers a request with `103 Early Hints` for ever (a
/// flood of interim heads on its stream, reading what the client sends)
/// fails it once they pass `max_head_bytes` in all, as over HTTP/1.1
/// (`DecodeError::InterimResponsesTooLarge`), not at its read or request
/// timeout. Each interim head is bounded by `h2` (`max_header_list_size`),
/// but not their number; `h2` hands them to the client, which drops them.
#[test]
fn interim_heads_without_end_fail_the_request_past_max_head_bytes_in_all() {
    let state = Arc::new(Flood::default());
    // A new connection's first stream is 1.
    let server = flood(early_hints(1), true, state.clone());
    let client = h2c_builder(1, CEILING).build().unwrap();
    let error = client.get(server.url("/")).send().wait().unwrap_err();
    let limit = tickless::h1::Limits::default().max_head_bytes;
    assert!(
        matches!(
            &error,
            Error::Protocol {
                source: tickless::h1::DecodeError::InterimResponsesTooLarge { limit: l },
                ..
            } if *l == limit
        ),
        "{error:?}"
    );
    assert!(
        state.flooding.load(Ordering::SeqCst),
        "the flood ended first"
    );
    state.stop.store(true, Ordering::SeqCst);
    client.close();
}

/// Interim heads within the bound are read past, and the final answer is
/// the response.
#[test]
fn a_few_interim_heads_then_the_answer() {
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        for _ in 0..10 {
            conn.send(&early_hints(ids[0]));
        }
        conn.send(&ok_headers(ids[0]));
        conn.answer_all();
    });
    let client = Client::builder()
        .http2_prior_knowledge()
        .request_timeout(CEILING)
        .build()
        .unwrap();
    for _ in 0..2 {
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.status(), 200);
    }
    client.close();
}

/// An interim head is the server's word on its stream: it restarts the
/// read timeout, as any byte of a response does over HTTP/1.1. Ten `103`s
/// 100 ms apart, then the answer, under a read timeout of 600 ms: the
/// whole second of them is longer than the timeout, no gap near it.
#[test]
fn interim_heads_restart_the_read_timeout() {
    let server = RawH2Server::start(|mut conn| {
        let ids = conn.read_requests(1);
        for _ in 0..10 {
            thread::sleep(Duration::from_millis(100));
            conn.send(&early_hints(ids[0]));
        }
        conn.send(&ok_headers(ids[0]));
        conn.answer_all();
    });
    let client = Client::builder()
        .http2_prior_knowledge()
        .read_timeout(Duration::from_millis(600))
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let started = Instant::now();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() >= Duration::from_secs(1));
    client.close();
}

/// `h2` counts the empty DATA frames that do not end their stream over a
/// connection's whole life, and at the 101st ends the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)`, failing every stream on it (h2 #935, a
/// guard against a flood of them that flow control does not bound). A
/// server may send one such frame a response (a gateway on hyper relaying
/// a chunked body did, smg-project/smg#2488), so every 101st
/// answer on a connection, and any stream open beside it, failed. The
/// connection retires before that, its open streams finishing, and the
/// requests after go to a new one. A DATA frame of padding alone is
/// empty too (`h2` counts what is left once the padding is taken off):
/// every other answer here has one.
#[test]
fn empty_data_frames_over_a_connections_life_fail_no_stream() {
    const ANSWERS: usize = 250;
    const PADDED: u8 = 0x8;
    let (seen, held_seen) = std::sync::mpsc::channel();
    // The first connection's socket and the stream it holds open, answered
    // once the client has taken its requests to a second connection (not
    // on a read timeout, which a stalled machine would reach early).
    let first: Arc<std::sync::Mutex<Option<(std::net::TcpStream, u32)>>> = Arc::default();
    let server = RawH2Server::start(move |mut conn| {
        if conn.index == 0 {
            let held = conn.read_requests(1)[0];
            let socket = conn.stream.try_clone().unwrap();
            *first.lock().unwrap() = Some((socket, held));
            let _ = seen.send(());
        } else if let Some((mut socket, held)) = first.lock().unwrap().take() {
            socket.write_all(&ok_headers(held)).unwrap();
        }
        let mut answered = 0;
        while let Some(&id) = conn.read_requests(1).first() {
            let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
            if answered % 2 == 0 {
                out.extend(frame(DATA, 0, id, b""));
            } else {
                out.extend(frame(DATA, PADDED, id, &[3, 0, 0, 0]));
            }
            out.extend(frame(DATA, END_STREAM, id, b"ok"));
            conn.send(&out);
            answered += 1;
        }
    });
    let client = Client::builder().http2_prior_knowledge().build().unwrap();
    let held = client.get(server.url("/held")).send();
    held_seen.recv_timeout(CEILING).unwrap();
    for i in 0..ANSWERS {
        let answer = client
            .get(server.url("/"))
            .send()
            .wait()
            .and_then(|response| response.bytes().wait());
        match answer {
            Ok(body) => assert_eq!(body, "ok", "answer {i}"),
            Err(error) => panic!("answer {i}: {error:?}"),
        }
    }
    match held.wait() {
        Ok(response) => assert_eq!(response.status(), 200),
        Err(error) => panic!("the stream held open beside the answers: {error:?}"),
    }
    // Each connection retired once it had taken some 75 of them.
    let connections = server.connections.load(Ordering::SeqCst);
    assert!((2..=ANSWERS / 50).contains(&connections), "{connections}");
    client.close();
}
