//! Two threads closing one client at once: each returns only once the
//! client's threads are gone, as `close` documents.
//!
//! One test only, alone in this binary: it looks for the client's threads
//! among the process's (`/proc/self/task`), which other tests running in
//! the same process would disturb.

mod support;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;
use support::*;
use tickless::{Client, EventListener};

/// Makes the first close slow: each exchange it fails is told here.
struct SlowToHear;

impl EventListener for SlowToHear {
    fn on_failed(&self, _request: &tickless::RequestInfo, _error: &tickless::Error) {
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_second_close_waits_for_the_first_to_finish() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = Client::builder()
        .event_loops(2)
        .listener(Arc::new(SlowToHear))
        .build()
        .unwrap();
    let futures: Vec<_> = (0..4).map(|_| client.get(server.url("/")).send()).collect();
    assert!(server.wait_for_requests(4, Duration::from_secs(10)));
    assert!(live_threads_named("tickless-") > 0);
    let start = Arc::new(Barrier::new(2));
    let closers: Vec<_> = [Duration::ZERO, Duration::from_millis(50)]
        .into_iter()
        .map(|delay| {
            let (client, start) = (client.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                thread::sleep(delay);
                client.close();
                // Returned: every thread of the client has been joined.
                live_threads_named("tickless-")
            })
        })
        .collect();
    for closer in closers {
        assert_eq!(
            closer.join().unwrap(),
            0,
            "close returned with client threads alive"
        );
    }
    for future in futures {
        assert!(future.is_done());
    }
}
