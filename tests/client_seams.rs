//! The testing seams of the config — a caller-made timer, loop group and
//! clock — misused, and thread counts out of bounds: a clear error or
//! outcome, never a hang or a panic.

mod support;

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use support::*;
use tickless::event_loop::{EventLoopGroup, MAX_EVENT_LOOPS};
use tickless::timer::{HashedWheelTimer, ManualClock, SharedClock};
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn a_timer_or_loops_on_another_clock_than_the_clients_are_refused() {
    let manual: SharedClock = Arc::new(ManualClock::new());
    let other: SharedClock = Arc::new(ManualClock::new());
    let system_timer = || HashedWheelTimer::builder().build().unwrap();
    let timer_on = |clock: &SharedClock| {
        HashedWheelTimer::builder()
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let group_on = |clock: &SharedClock| {
        Arc::new(
            EventLoopGroup::builder()
                .threads(1)
                .clock(clock.clone())
                .build()
                .unwrap(),
        )
    };
    let refused = [
        Client::builder()
            .clock(manual.clone())
            .timer(system_timer())
            .build(),
        Client::builder()
            .clock(manual.clone())
            .timer(timer_on(&other))
            .build(),
        Client::builder().timer(timer_on(&manual)).build(),
        Client::builder()
            .clock(manual.clone())
            .event_loop_group(group_on(&other))
            .build(),
    ];
    for (i, built) in refused.into_iter().enumerate() {
        let error = built.expect_err("built with a foreign clock");
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "case {i}: {error}");
        assert!(
            error.to_string().contains("another clock"),
            "case {i}: {error}"
        );
    }
    // The client's own clock, through clones: accepted.
    let client = Client::builder()
        .clock(manual.clone())
        .timer(timer_on(&manual))
        .event_loop_group(group_on(&manual))
        .build()
        .expect("the same clock");
    client.close();
}

#[test]
fn a_stopped_timer_fails_requests_that_need_a_timeout_instead_of_leaving_them() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let timer = HashedWheelTimer::builder().build().unwrap();
    let client = Client::builder()
        .timer(timer.clone())
        .request_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    // Stopped behind the client's back, before the request arms on it.
    drop(timer.stop());
    let future = client.get(server.url("/")).send();
    assert!(eventually(WAIT, || future.is_done()), "never resolved");
    let error = future.wait().and_then(|r| r.bytes().wait()).unwrap_err();
    assert!(matches!(error, Error::ClientClosed), "{error:?}");
    client.close();
}

#[test]
fn a_timer_stopped_under_armed_timeouts_fails_their_requests() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let timer = HashedWheelTimer::builder().build().unwrap();
    let client = Client::builder()
        .timer(timer.clone())
        .request_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let futures: Vec<_> = (0..5).map(|_| client.get(server.url("/")).send()).collect();
    assert!(
        eventually(WAIT, || client.stats().wheel.armed >= 5),
        "{:?}",
        client.stats()
    );
    // Its timeouts, handed back by stop and dropped, end their requests.
    drop(timer.stop());
    for future in futures {
        assert!(eventually(WAIT, || future.is_done()), "never resolved");
        let error = future.wait().and_then(|r| r.bytes().wait()).unwrap_err();
        assert!(matches!(error, Error::ClientClosed), "{error:?}");
    }
    client.close();
}

#[test]
fn more_event_loops_than_the_most_is_an_error_not_a_panic() {
    for loops in [MAX_EVENT_LOOPS + 1, usize::MAX] {
        let error = Client::builder().event_loops(loops).build().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        let error = EventLoopGroup::builder()
            .threads(loops)
            .build()
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    }
    // Zero means one.
    let client = Client::builder().event_loops(0).build().unwrap();
    assert_eq!(client.event_loop_group().loops().len(), 1);
    client.close();
}

/// Two clients may share one loop group: their connections live side by
/// side on the same loops, each named by an id unique in the process, so a
/// task one client posts for a connection of its own (an abort, a pooled
/// request) can never reach the other's that took its slot.
#[test]
fn clients_sharing_a_loop_group_never_share_a_connection_id() {
    let server = TestServer::respond(|request| ok(&request.target));
    let group = Arc::new(EventLoopGroup::builder().threads(1).build().unwrap());
    let clients: Vec<(Client, Arc<Recorder>)> = (0..2)
        .map(|_| {
            let recorder = Recorder::new();
            let client = Client::builder()
                .event_loop_group(group.clone())
                .listener(recorder.clone())
                // Each connection closes after its answer: the slots they
                // leave are taken by the next ones, of either client.
                .keep_alive(false)
                .build()
                .unwrap();
            (client, recorder)
        })
        .collect();
    for round in 0..5 {
        for (client, _) in &clients {
            let path = format!("/{round}");
            assert_eq!(
                client
                    .get(server.url(&path))
                    .send()
                    .wait()
                    .unwrap()
                    .text()
                    .wait()
                    .unwrap(),
                path
            );
        }
    }
    let mut ids: Vec<u64> = clients
        .iter()
        .flat_map(|(_, recorder)| recorder.events())
        .filter_map(|(event, _)| match event {
            Event::ConnectSuccess(info) => Some(info.id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 10);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 10, "two connections shared an id");
    for (client, _) in &clients {
        assert_eq!(client.stats().in_flight, 0);
    }
    drop(clients);
}
