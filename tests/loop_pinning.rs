//! Where a client's loops may run, seen from a listener (which runs on the
//! loop): pinned to one CPU each by default in event-loop mode, with a loop
//! per CPU; not on the wheel, nor when told not to. One test, alone in its
//! process: whether a group pins by default depends on the process's other
//! pinned groups.

#![cfg(target_os = "linux")]

mod support;

use std::sync::{Arc, Mutex};
use support::*;
use tickless::{EventListener, RequestInfo};

/// The CPUs the calling thread may run on, as the kernel lists them
/// (`Cpus_allowed_list`, e.g. `0-1` or `3`).
fn allowed_here() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// How many CPUs a `Cpus_allowed_list` names (`0-3,6` is five).
fn count(list: &str) -> usize {
    list.split(',')
        .map(|range| match range.split_once('-') {
            Some((first, last)) => {
                last.parse::<usize>().unwrap() - first.parse::<usize>().unwrap() + 1
            }
            None => 1,
        })
        .sum()
}

/// Notes the CPUs of the thread a response's status is delivered on: the
/// loop that owns the connection.
#[derive(Default)]
struct WhereAmI(Mutex<Option<String>>);

impl EventListener for WhereAmI {
    fn on_status(&self, _request: &RequestInfo, _status: http::StatusCode) {
        *self.0.lock().unwrap() = Some(allowed_here());
    }
}

/// The CPUs the loop of a request may run on, on a client `builder`
/// builds (and closes after: the next client's default pinning depends on
/// whether this one's loops are still pinned).
fn loop_cpus(builder: tickless::ClientBuilder, server: &TestServer) -> String {
    let client = builder.build().unwrap();
    let listener = Arc::new(WhereAmI::default());
    let response = client
        .get(server.url("/"))
        .listener(listener.clone())
        .send()
        .wait()
        .unwrap();
    response.bytes().wait().unwrap();
    client.close();
    let cpus = listener.0.lock().unwrap().take();
    cpus.unwrap()
}

#[test]
fn event_loop_mode_pins_a_loop_per_cpu_and_the_wheel_mode_does_not() {
    let server = TestServer::respond(|_| ok("pinned?"));
    let here = allowed_here();
    let one_cpu = |list: &str| count(list) == 1;
    // A loop per CPU by default, unless a CPU quota counts fewer: then the
    // default is not to pin (see `EventLoopGroupBuilder::pin_to_cpus`).
    let a_loop_per_cpu = std::thread::available_parallelism().unwrap().get() == count(&here);

    let builder = tickless::Client::builder;

    assert_eq!(loop_cpus(builder(), &server), here, "wheel mode");
    let unpinned = builder()
        .use_event_loop_timeouts(true)
        .pin_event_loops(false);
    assert_eq!(loop_cpus(unpinned, &server), here, "told not to pin");

    let seen = loop_cpus(builder().use_event_loop_timeouts(true), &server);
    if a_loop_per_cpu && !one_cpu(&here) {
        assert!(
            one_cpu(&seen),
            "event-loop mode: a loop on {seen}, of {here}"
        );
    } else {
        assert_eq!(seen, here, "one CPU, or fewer loops than CPUs: not pinned");
    }

    let seen = loop_cpus(builder().pin_event_loops(true), &server);
    if !one_cpu(&here) {
        assert!(one_cpu(&seen), "told to pin: a loop on {seen}, of {here}");
    }
}
