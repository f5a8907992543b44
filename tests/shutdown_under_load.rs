//! `close()` with a thousand requests in flight, in each timeout mode, while
//! another thread keeps submitting: every future resolves, nothing panics,
//! and every thread the client started is joined.
//!
//! One test only, alone in this binary, because it counts the process's
//! threads (`/proc/self/task`).

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use support::*;
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn closing_under_load_resolves_everything_and_joins_every_thread() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    for event_loop_timeouts in [false, true] {
        let before = live_threads();
        let client = Client::builder()
            .event_loops(2)
            .request_timeout(Duration::from_secs(30))
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        let in_flight: Vec<_> = (0..1000)
            .map(|_| client.get(server.url("/")).send())
            .collect();
        // Most are connected and waiting for an answer; the rest are
        // connecting or in a loop's inbox: all of them are in flight.
        assert!(
            server.wait_for_requests(500, WAIT),
            "the burst never got going"
        );

        // Another thread keeps submitting while the client closes.
        let stop = Arc::new(AtomicBool::new(false));
        let submitted = Arc::new(AtomicUsize::new(0));
        let submitter = {
            let (client, stop, url) = (client.clone(), stop.clone(), server.url("/late"));
            let submitted = submitted.clone();
            thread::spawn(move || {
                let mut futures = Vec::new();
                while !stop.load(Ordering::Acquire) && futures.len() < 10_000 {
                    futures.push(client.get(url.as_str()).send());
                    submitted.fetch_add(1, Ordering::Release);
                }
                futures
            })
        };
        // Close while it is submitting, not before it has started.
        assert!(eventually(WAIT, || submitted.load(Ordering::Acquire) > 0));
        client.close();
        stop.store(true, Ordering::Release);
        let during = submitter.join().expect("the submitter did not panic");

        for future in in_flight {
            assert!(
                eventually(WAIT, || future.is_done()),
                "a future never resolved"
            );
            let error = future.wait().and_then(|r| r.bytes().wait()).unwrap_err();
            assert!(matches!(error, Error::ClientClosed), "{error:?}");
        }
        for future in during {
            assert!(
                eventually(WAIT, || future.is_done()),
                "a late future never resolved"
            );
            // Before the close some got in and were failed by it; after it,
            // each was refused at once. Either way: closed.
            assert!(matches!(
                future.wait().and_then(|r| r.bytes().wait()).unwrap_err(),
                Error::ClientClosed
            ));
        }
        let after = client.get(server.url("/after")).send();
        assert!(after.is_done(), "a request after close resolves at once");
        assert!(matches!(
            after.wait().and_then(|r| r.bytes().wait()).unwrap_err(),
            Error::ClientClosed
        ));

        let stats = client.stats();
        assert_eq!(
            stats.armed_timers(),
            0,
            "mode {event_loop_timeouts}: {stats:?}"
        );
        assert_eq!(stats.in_flight, 0);
        drop(client);
        // The server's per-connection threads end once they see the close;
        // the client's own were joined by close() itself.
        assert!(server.wait_for_open(0, WAIT), "connections left open");
        let settled = eventually(WAIT, || live_threads().difference(&before).next().is_none());
        let left: BTreeSet<_> = live_threads().difference(&before).copied().collect();
        assert!(
            settled,
            "mode {event_loop_timeouts}: threads left behind: {left:?}"
        );
    }
}
