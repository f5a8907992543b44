//! Bodies through every path at once, at random but reproducibly: each
//! request's number seeds its response — a length from 0 B to 3 MiB,
//! framed by `Content-Length`, chunked (random chunk sizes, a trailer) or
//! the connection's end, written in random pieces with random pauses — and
//! the way it is read: whole (blocking, async), through `Read` with random
//! buffers and pauses, chunk by chunk (blocking, async), partly and then
//! whole, whole after the window has filled, a chunk and then the rest
//! (async), or dropped unread. Every body read must be the server's byte
//! for byte, and the client must settle after each series; under small,
//! default and odd windows, with and without a read timeout (with one,
//! no low-water mark), one and two loops, both timeout modes. A failure
//! names its seed. (Brought in from a review's experiments, 2026-12-04:
//! 1 650 exchanges found nothing then.)

mod support;

use std::io::{Read, Write};
use std::thread;
use std::time::Duration;
use support::*;
use tickless::Client;

/// xorshift64: the same numbers for the same seed, on both sides.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The body of request `seed`.
fn body_of(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    (0..len).map(|_| rng.next() as u8).collect()
}

const LENS: [usize; 9] = [
    0,
    1,
    100,
    5000,
    16 * 1024 + 3,
    70_000,
    300_000,
    1 << 20,
    3 << 20,
];

/// Request `seed`'s body length, and its framing: 0 `Content-Length`, 1
/// chunked, 2 the connection's end.
fn plan(seed: u64) -> (usize, u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let len = LENS[rng.below(LENS.len() as u64) as usize];
    let framing = rng.below(3);
    (len, framing)
}

/// Answers `GET /<seed>` as [`plan`] says, in random pieces.
fn server() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, index| {
        let mut reader = RequestReader::new(index);
        while let Ok(request) = reader.read_request(&mut stream) {
            let seed: u64 = request.target.trim_start_matches('/').parse().unwrap();
            let (len, framing) = plan(seed);
            let body = body_of(seed, len);
            let mut rng = Rng(seed ^ 0xdead_beef);
            let mut out = Vec::new();
            match framing {
                0 => {
                    out.extend_from_slice(
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n").as_bytes(),
                    );
                    out.extend_from_slice(&body);
                }
                1 => {
                    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                    let mut pos = 0;
                    while pos < body.len() {
                        let n = (1 + rng.below(40_000) as usize).min(body.len() - pos);
                        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                        out.extend_from_slice(&body[pos..pos + n]);
                        out.extend_from_slice(b"\r\n");
                        pos += n;
                    }
                    out.extend_from_slice(b"0\r\nX-Trailer: t\r\n\r\n");
                }
                _ => {
                    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
                    out.extend_from_slice(&body);
                }
            }
            // Write in random pieces, sometimes pausing.
            let mut pos = 0;
            while pos < out.len() {
                let n = (1 + rng.below(200_000) as usize).min(out.len() - pos);
                if stream.write_all(&out[pos..pos + n]).is_err() {
                    return;
                }
                pos += n;
                if rng.below(3) == 0 {
                    thread::sleep(Duration::from_micros(rng.below(3000)));
                }
            }
            if framing == 2 {
                return;
            }
        }
    }))
}

/// Requests `url` and reads its body the way `seed` picks: `None` if it
/// was dropped unread.
fn read_mode(client: &Client, url: &str, seed: u64) -> Result<Option<Vec<u8>>, tickless::Error> {
    let mut rng = Rng(seed ^ 0x1234_5678);
    let mode = rng.below(9);
    let mut response = client.get(url).send().wait()?;
    match mode {
        0 => Ok(Some(response.bytes().wait()?.to_vec())),
        1 => {
            let mut got = Vec::new();
            let mut buf = vec![0; 1 + rng.below(100_000) as usize];
            loop {
                let n = response
                    .body_mut()
                    .read(&mut buf)
                    .map_err(|e| tickless::Error::Io {
                        remote: String::new(),
                        source: e,
                    })?;
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if rng.below(50) == 0 {
                    thread::sleep(Duration::from_millis(1));
                }
            }
            Ok(Some(got))
        }
        2 => {
            let mut got = Vec::new();
            while let Some(chunk) = response.chunk().wait()? {
                got.extend_from_slice(&chunk);
            }
            Ok(Some(got))
        }
        3 => {
            let got = block_on(async {
                let mut got = Vec::new();
                while let Some(chunk) = response.chunk().await? {
                    got.extend_from_slice(&chunk);
                }
                Ok::<_, tickless::Error>(got)
            })?;
            Ok(Some(got))
        }
        4 => {
            // Partial read, then bytes().
            let mut first = vec![0; rng.below(200_000) as usize];
            let n = response.body_mut().read(&mut first).unwrap();
            first.truncate(n);
            thread::sleep(Duration::from_micros(rng.below(5000)));
            let rest = response.bytes().wait()?;
            first.extend_from_slice(&rest);
            Ok(Some(first))
        }
        5 => {
            let got = block_on(async { response.bytes().await })?;
            Ok(Some(got.to_vec()))
        }
        6 => {
            // Wait so the window fills, then bytes().
            thread::sleep(Duration::from_millis(rng.below(20)));
            Ok(Some(response.bytes().wait()?.to_vec()))
        }
        7 => {
            // A chunk, a pause, then bytes() (async).
            let mut got = Vec::new();
            if let Some(c) = response.chunk().wait()? {
                got.extend_from_slice(&c);
            }
            thread::sleep(Duration::from_millis(rng.below(10)));
            let rest = block_on(async { response.bytes().await })?;
            got.extend_from_slice(&rest);
            Ok(Some(got))
        }
        _ => {
            // Sleep, then drop.
            thread::sleep(Duration::from_micros(rng.below(5000)));
            drop(response);
            Ok(None)
        }
    }
}

/// Requests `seeds` one after another on one loop, in the default mode.
fn run(window: usize, read_timeout: Duration, seeds: std::ops::Range<u64>) {
    run_with(window, read_timeout, seeds, 1, false)
}

/// Requests `seeds` one after another, each read as its seed says, on a
/// client with this body window, read timeout (zero: none), number of
/// loops and timeout mode.
fn run_with(
    window: usize,
    read_timeout: Duration,
    seeds: std::ops::Range<u64>,
    loops: usize,
    event_loop_timeouts: bool,
) {
    let server = server();
    let client = Client::builder()
        .event_loops(loops)
        .use_event_loop_timeouts(event_loop_timeouts)
        .body_window(window)
        .read_timeout(read_timeout)
        .request_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    for seed in seeds {
        let url = server.url(&format!("/{seed}"));
        let (len, framing) = plan(seed);
        match read_mode(&client, &url, seed) {
            Ok(Some(got)) => {
                let want = body_of(seed, len);
                assert!(
                    got == want,
                    "seed {seed}: len {len} framing {framing}: got {} bytes, first diff at {:?}",
                    got.len(),
                    got.iter().zip(&want).position(|(a, b)| a != b)
                );
            }
            Ok(None) => {}
            Err(e) => panic!("seed {seed}: len {len} framing {framing}: {e}"),
        }
    }
    assert_settles(&client, Duration::from_secs(10));
    // Every body read or dropped: nothing is counted as buffered any more.
    assert!(
        eventually(Duration::from_secs(10), || client
            .stats()
            .buffered_body_bytes
            == 0),
        "{} body bytes still counted as buffered",
        client.stats().buffered_body_bytes
    );
    client.close();
}

#[test]
fn every_body_path_gives_the_servers_bytes_with_the_default_window() {
    run(256 * 1024, Duration::ZERO, 1..150);
}

#[test]
fn every_body_path_gives_the_servers_bytes_with_a_small_window() {
    run(3000, Duration::ZERO, 1000..1150);
}

#[test]
fn every_body_path_gives_the_servers_bytes_with_a_read_timeout() {
    run(256 * 1024, Duration::from_secs(10), 2000..2150);
}

#[test]
fn every_body_path_gives_the_servers_bytes_on_two_loops_odd_windows_and_both_modes() {
    for (i, (window, read_timeout, loops, event_loop_timeouts)) in [
        (256 * 1024, Duration::ZERO, 2, true),
        (1, Duration::ZERO, 1, false),
        (70_000, Duration::from_secs(10), 2, false),
        (256 * 1024, Duration::ZERO, 1, true),
    ]
    .into_iter()
    .enumerate()
    {
        let start = 5000 + i as u64 * 100_000;
        run_with(
            window,
            read_timeout,
            start..start + 100,
            loops,
            event_loop_timeouts,
        );
    }
}
