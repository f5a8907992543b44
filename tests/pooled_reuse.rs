//! Reusing a pooled connection without a peek, only when the loop's word
//! on it is fresh: a connection the server closed while the loop was held
//! up elsewhere is not handed a request that cannot go twice.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use tickless::{Client, EventListener, RequestInfo};

/// Holds the loop inside the turn that reads its response.
struct SlowListener;

impl EventListener for SlowListener {
    fn on_status(&self, _request: &RequestInfo, _status: http::StatusCode) {
        thread::sleep(Duration::from_millis(400));
    }
}

/// Reads one request (head, and a body of the length it says).
fn read_request(stream: &mut TcpStream) -> Option<()> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse().unwrap());
    let mut have = got.len() - end;
    while have < length {
        have += stream.read(&mut buf).ok().filter(|&n| n > 0)?;
    }
    Some(())
}

fn answer(stream: &mut TcpStream, body: &str) -> bool {
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(format!("{head}{body}").as_bytes()).is_ok()
}

#[test]
fn a_post_never_goes_on_a_connection_closed_while_the_loop_was_held_up() {
    // The first connection answers once, then closes when told; every
    // later one answers each request with "fresh".
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin_addr = origin.local_addr().unwrap();
    let (close, closing) = mpsc::channel::<()>();
    let (closed, has_closed) = mpsc::channel::<()>();
    thread::spawn(move || {
        let (mut first, _) = origin.accept().unwrap();
        read_request(&mut first).unwrap();
        assert!(answer(&mut first, "ok"));
        closing.recv().unwrap();
        drop(first);
        closed.send(()).unwrap();
        for stream in origin.incoming() {
            let mut stream = stream.unwrap();
            thread::spawn(move || {
                while read_request(&mut stream).is_some() && answer(&mut stream, "fresh") {}
            });
        }
    });
    // A second server, whose answer's listener holds the client's one loop.
    let slow = TcpListener::bind("127.0.0.1:0").unwrap();
    let slow_addr = slow.local_addr().unwrap();
    thread::spawn(move || {
        for stream in slow.incoming() {
            let mut stream = stream.unwrap();
            read_request(&mut stream);
            answer(&mut stream, "slow");
            thread::sleep(Duration::from_secs(2));
        }
    });

    let client = Client::builder().event_loops(1).build().unwrap();
    let first = client
        .get(format!("http://{origin_addr}/a"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(first.text().wait().unwrap(), "ok");
    // The origin's connection is idle, its socket drained.
    thread::sleep(Duration::from_millis(100));
    let held = {
        let client = client.clone();
        thread::spawn(move || {
            let response = client
                .get(format!("http://{slow_addr}/"))
                .listener(Arc::new(SlowListener))
                .send()
                .wait()
                .unwrap();
            response.text().wait().unwrap()
        })
    };
    // While the loop is in the slow listener: the origin closes the idle
    // connection, and a POST is sent, to run once the loop is free.
    thread::sleep(Duration::from_millis(150));
    close.send(()).unwrap();
    has_closed.recv().unwrap();
    thread::sleep(Duration::from_millis(50));
    let post = client
        .post(format!("http://{origin_addr}/b"))
        .body("payload")
        .send()
        .wait()
        .and_then(|response| response.text().wait());
    assert_eq!(held.join().unwrap(), "slow");
    assert_eq!(post.unwrap(), "fresh", "the POST went on a new connection");
    client.close();
}
