//! Futures cancelled at the moment their timeout expires: each exchange ends
//! exactly once, as cancelled or as timed out, in both timeout modes, and
//! nothing is left armed.

mod support;

use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::{Client, Error};

#[test]
fn a_cancel_racing_an_expiry_ends_each_exchange_exactly_once() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    for event_loop_timeouts in [false, true] {
        let recorder = Recorder::new();
        let client = Client::builder()
            .event_loops(2)
            .wheel_tick(Duration::from_millis(1))
            .use_event_loop_timeouts(event_loop_timeouts)
            .listener(recorder.clone())
            .build()
            .unwrap();
        // Deadlines spread over 30..50 ms, all cancelled in one sweep at
        // 40 ms: the early ones expire first, the late ones are cancelled
        // first, and those in between race the sweep.
        let started = Instant::now();
        let futures: Vec<_> = (0..300u64)
            .map(|i| {
                let timeout = Duration::from_millis(30 + i % 20);
                client.get(server.url("/")).request_timeout(timeout).send()
            })
            .collect();
        thread::sleep(
            (started + Duration::from_millis(40)).saturating_duration_since(Instant::now()),
        );
        let mut cancelled = 0;
        for future in &futures {
            if future.cancel() {
                cancelled += 1;
            }
        }
        let mut timed_out = 0;
        for future in futures {
            match future.wait().and_then(|r| r.bytes().wait()).unwrap_err() {
                Error::Cancelled => {}
                Error::RequestTimeout(_) => timed_out += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(cancelled + timed_out, 300, "mode {event_loop_timeouts}");
        let failures = recorder
            .events()
            .iter()
            .filter(|(e, _)| matches!(e, Event::Failed(..)))
            .count();
        assert_eq!(
            failures, 300,
            "mode {event_loop_timeouts}: each exchange ends exactly once"
        );
        assert_settles(&client, Duration::from_secs(10));
        client.close();
    }
}
