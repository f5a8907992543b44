//! A streamed body that trickles in, a byte per segment, to a reader that
//! does not read: the heap the exchange holds stays near its window (each
//! pushed chunk must not keep a whole read allocation alive). A test binary
//! of its own: it counts the process's heap with its global allocator.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;
use tickless::Client;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn a_body_trickling_in_to_a_reader_that_waits_holds_about_its_window() {
    const WINDOW: usize = 2048;
    const SENT: usize = WINDOW + 100;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (sent_all, all_sent) = mpsc::channel();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_nodelay(true).unwrap();
        let mut head = [0u8; 4096];
        let _ = stream.read(&mut head);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            .unwrap();
        // One byte a segment: every read the loop makes gets one.
        for _ in 0..SENT {
            stream.write_all(b"x").unwrap();
            thread::sleep(Duration::from_micros(300));
        }
        sent_all.send(()).unwrap();
        // Hold the connection until the client lets go of it.
        let _ = stream.read(&mut head);
    });
    let client = Client::builder()
        .event_loops(1)
        .body_window(WINDOW)
        .build()
        .unwrap();
    let before = counting_alloc::live_bytes();
    let response = client.get(format!("http://{addr}/")).send().wait().unwrap();
    all_sent.recv_timeout(Duration::from_secs(30)).unwrap();
    // The loop has read what came, up to the window.
    let read_up = std::time::Instant::now() + Duration::from_secs(20);
    while client.stats().buffered_body_bytes < WINDOW {
        assert!(
            std::time::Instant::now() < read_up,
            "the window never filled"
        );
        thread::sleep(Duration::from_millis(10));
    }
    let held = counting_alloc::live_bytes() - before;
    drop(response);
    client.close();
    server.join().unwrap();
    // A read buffer, one gathering allocation and the chunks' own
    // bookkeeping: well under a MiB. A 64 KiB allocation per byte read
    // (the defect this guards against) was 128 MiB here.
    assert!(
        held < 1024 * 1024,
        "{} KiB of heap for a {WINDOW}-byte window",
        held / 1024
    );
}
