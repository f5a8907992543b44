//! `use_event_loop_timeouts`: where each expiry is delivered from, asserted
//! by identity against the wheel and the loops the test built itself and
//! handed to the client (never by thread names).
//!
//! The listener's `on_failed` runs on the thread that ended the exchange,
//! which for a timeout is the thread the timeout expired on.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};
use support::*;
use tickless::event_loop::{
    EventLoop, EventLoopGroup, EventLoopGroupBuilder, LoopTimeout, LoopTimerKey, Rejected,
    TimeoutScheduler,
};
use tickless::timer::{HashedWheelTimer, ManualClock};
use tickless::{Client, Error};

const CEILING: Duration = Duration::from_secs(10);

struct Parts {
    timer: HashedWheelTimer,
    group: Arc<EventLoopGroup>,
    recorder: Arc<Recorder>,
    client: Client,
}

fn parts(event_loop_timeouts: bool) -> Parts {
    parts_with(event_loop_timeouts, EventLoopGroup::builder().threads(2))
}

fn parts_with(event_loop_timeouts: bool, group: EventLoopGroupBuilder) -> Parts {
    let timer = HashedWheelTimer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .unwrap();
    let group = Arc::new(group.build().unwrap());
    let recorder = Recorder::new();
    let client = Client::builder()
        .timer(timer.clone())
        .event_loop_group(group.clone())
        .listener(recorder.clone())
        .use_event_loop_timeouts(event_loop_timeouts)
        // No pool cleaner: whatever fires on the wheel is a timeout.
        .pooled_connection_idle_timeout(Duration::ZERO)
        .connection_ttl(Duration::ZERO)
        .build()
        .unwrap();
    Parts {
        timer,
        group,
        recorder,
        client,
    }
}

fn failed_on(recorder: &Recorder) -> ThreadId {
    recorder.failed_on().expect("the exchange failed")
}

/// Answers the first request of each connection, then reads the next and
/// never answers it.
fn answer_once_then_stall() -> TestServer {
    TestServer::start(Behaviour::custom(|mut stream, index| {
        use std::io::Write;
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_ok() {
            let _ = stream.write_all(&ok("first"));
            let _ = reader.read_request(&mut stream);
            drain(&mut stream);
        }
    }))
}

#[test]
fn by_default_a_request_timeout_expires_on_the_wheel_thread() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let p = parts(false);
    let error = p
        .client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert_eq!(Some(failed_on(&p.recorder)), p.timer.thread_id());
    assert_eq!(
        p.client.stats().loops.iter().map(|l| l.fired).sum::<u64>(),
        0
    );
    p.client.close();
}

#[test]
fn a_connecting_exchange_expires_on_the_loop_of_its_new_connection() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let p = parts(true);
    // A budget it cannot reach before connecting, even on a loaded
    // machine: expiring from the wheel, where it is armed until then, would
    // prove nothing.
    let error = p
        .client
        .get(server.url("/"))
        .request_timeout(Duration::from_secs(2))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    let info = p
        .recorder
        .connections()
        .pop()
        .expect("a connect-success event");
    assert_eq!(failed_on(&p.recorder), info.loop_thread);
    assert_eq!(
        p.group.loops()[info.loop_index].thread_id(),
        info.loop_thread
    );
    assert_ne!(Some(info.loop_thread), p.timer.thread_id());
    assert_eq!(
        p.client.stats().wheel.fired,
        0,
        "nothing expired on the wheel"
    );
    p.client.close();
}

#[test]
fn a_pooled_exchange_expires_on_the_loop_of_the_pooled_connection() {
    let server = answer_once_then_stall();
    let p = parts(true);
    let first = p.client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(first.text().wait().unwrap(), "first");
    // Wait for the connection to be offered back, so the second request
    // cannot quietly open a connection of its own.
    assert!(p.recorder.wait_for(CEILING, |events| events
        .iter()
        .any(|(e, _)| matches!(e, Event::ConnectionOffered(_)))));
    let offered = p.recorder.connections().pop().unwrap();
    p.recorder.clear();

    let error = p
        .client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(200))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    let events = p.recorder.events();
    let pooled = events
        .iter()
        .find_map(|(e, _)| match e {
            Event::ConnectionPooled(info) => Some(info.clone()),
            _ => None,
        })
        .expect("the second request reused the pooled connection");
    assert_eq!(pooled.id, offered.id);
    assert!(!events
        .iter()
        .any(|(e, _)| matches!(e, Event::ConnectAttempt(_))));
    // On that loop: its thread, or this one — blocked on the request, it
    // drives the loop its thread left idle after the first answer. Not
    // the wheel's.
    let failed = failed_on(&p.recorder);
    assert!(failed == pooled.loop_thread || failed == thread::current().id());
    assert_ne!(Some(failed), p.timer.thread_id());
    assert_eq!(p.client.stats().wheel.fired, 0);
    assert_eq!(server.connections_accepted(), 1);
    p.client.close();
}

#[test]
fn a_read_timeout_expires_on_the_loop_of_its_connection() {
    let server = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec(),
    ));
    let p = parts(true);
    let error = p
        .client
        .get(server.url("/"))
        .request_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_millis(200))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    let info = p.recorder.connections().pop().unwrap();
    // On that loop: its thread, or this one — back for the body within the
    // loop's idle grace after its head, it drives the loop its thread left
    // idle (a few microseconds either way decide which). Not the wheel's.
    let failed = failed_on(&p.recorder);
    assert!(
        failed == info.loop_thread || failed == thread::current().id(),
        "{failed:?}: neither the loop's thread nor this one"
    );
    assert_ne!(Some(failed), p.timer.thread_id());
    assert_eq!(p.client.stats().wheel.fired, 0);
    p.client.close();
}

/// A loop that says it is not shutting down, then rejects every schedule.
struct RejectingLoop {
    inner: Arc<EventLoop>,
    asked: Arc<AtomicUsize>,
}

impl TimeoutScheduler for RejectingLoop {
    fn thread_id(&self) -> ThreadId {
        self.inner.thread_id()
    }
    fn is_shutting_down(&self) -> bool {
        false
    }
    fn schedule(
        &self,
        _: Instant,
        _: Arc<dyn LoopTimeout>,
        _: u64,
    ) -> Result<LoopTimerKey, Rejected> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Err(Rejected)
    }
    fn cancel(&self, key: LoopTimerKey) -> bool {
        self.inner.cancel(key)
    }
}

#[test]
fn a_rejected_arm_falls_back_to_the_wheel() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let asked = Arc::new(AtomicUsize::new(0));
    let group = {
        let asked = asked.clone();
        EventLoopGroup::builder()
            .threads(1)
            .timeout_scheduler(Arc::new(move |inner| {
                Arc::new(RejectingLoop {
                    inner,
                    asked: asked.clone(),
                }) as Arc<dyn TimeoutScheduler>
            }))
    };
    let p = parts_with(true, group);
    let future = p
        .client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(300))
        .send();
    // Bounded: without the fallback, nothing would ever end this exchange.
    assert!(eventually(CEILING, || future.is_done()), "no timeout fired");
    let error = future.wait().and_then(|r| r.bytes().wait()).unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert!(
        asked.load(Ordering::SeqCst) > 0,
        "the re-home never asked the loop"
    );
    assert_eq!(Some(failed_on(&p.recorder)), p.timer.thread_id());
    assert_settles(&p.client, CEILING);
    p.client.close();
}

/// In event-loop mode, as on the wheel, the requests of a kept-alive
/// HTTP/1 connection hold its one standing entry in turn, here on its
/// loop's heap: none arms an entry of its own and cancels it (the loops
/// count no cancel after the first request, which also had its connect
/// timer), and between requests the entry, left armed with nobody holding
/// it, is no timeout (the client's stats count none armed).
#[test]
fn the_requests_of_a_kept_alive_connection_hold_its_standing_entry_on_its_loop() {
    let server = TestServer::respond(|request| ok(&request.target));
    let p = parts(true);
    let get = |i: usize| {
        let path = format!("/n/{i}");
        let response = p
            .client
            .get(server.url(&path))
            .request_timeout(Duration::from_secs(60))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.text().wait().unwrap(), path);
        // Let go of once the exchange has ended, a moment after its body.
        assert!(
            eventually(CEILING, || p.client.stats().armed_timers() == 0),
            "after request {i}: {:?}",
            p.client.stats()
        );
    };
    let cancelled = || -> u64 { p.client.stats().loops.iter().map(|l| l.cancelled).sum() };
    get(0);
    let after_first = cancelled();
    for i in 1..6 {
        get(i);
    }
    assert_eq!(server.connections_accepted(), 1);
    let stats = p.client.stats();
    assert_eq!(cancelled(), after_first, "{stats:?}");
    assert_eq!(stats.loops.iter().map(|l| l.fired).sum::<u64>(), 0);
    p.client.close();
}

#[test]
fn cancelling_and_closing_in_flight_leave_nothing_behind_in_both_modes() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::NeverAnswer);
        let p = parts(event_loop_timeouts);
        // Long enough that a loaded machine still cancels and closes first.
        let deadline = Duration::from_millis(1500);
        let futures: Vec<_> = (0..20)
            .map(|_| {
                p.client
                    .get(server.url("/"))
                    .request_timeout(deadline)
                    .send()
            })
            .collect();
        let sent = Instant::now();
        assert!(server.wait_for_requests(20, CEILING));
        let (cancelled, closed) = futures.split_at(10);
        for future in cancelled {
            assert!(future.cancel());
        }
        // Cancelled exchanges free their timers at once (the connections
        // close on their loops).
        assert!(eventually(CEILING, || p.client.stats().in_flight == 10));
        p.client.close();
        for future in closed {
            assert!(future.is_done());
        }
        let results: Vec<_> = futures
            .into_iter()
            .map(|f| f.wait().and_then(|r| r.bytes().wait()).unwrap_err())
            .collect();
        assert!(results[..10].iter().all(|e| matches!(e, Error::Cancelled)));
        assert!(results[10..]
            .iter()
            .all(|e| matches!(e, Error::ClientClosed)));
        // Past the deadline, nothing fired.
        thread::sleep(
            (sent + deadline + Duration::from_millis(100))
                .saturating_duration_since(Instant::now()),
        );
        let timeouts = p
            .recorder
            .events()
            .iter()
            .filter(|(e, _)| matches!(e, Event::Failed(_, true)))
            .count();
        assert_eq!(
            timeouts, 0,
            "mode {event_loop_timeouts}: a timeout fired after cancel/close"
        );
        let stats = p.client.stats();
        assert_eq!(
            stats.armed_timers(),
            0,
            "mode {event_loop_timeouts}: {stats:?}"
        );
        assert_eq!(stats.in_flight, 0);
        assert!(server.wait_for_open(0, CEILING), "connections left open");
    }
}

#[test]
fn on_a_manual_clock_a_five_second_timeout_fires_when_the_clock_passes_it_in_both_modes() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::NeverAnswer);
        let clock = ManualClock::new();
        let recorder = Recorder::new();
        let client = Client::builder()
            .clock(Arc::new(clock.clone()))
            .event_loops(1)
            .listener(recorder.clone())
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        let future = client
            .get(server.url("/"))
            .request_timeout(Duration::from_secs(5))
            .send();
        // Sent, so in event-loop mode the timeout now lives on the loop.
        assert!(recorder.wait_for(CEILING, |events| events
            .iter()
            .any(|(e, _)| matches!(e, Event::RequestSent(_)))));
        clock.advance(Duration::from_secs(5) - Duration::from_nanos(1));
        // A wrongly fired timeout would show itself within this pause.
        thread::sleep(Duration::from_millis(50));
        assert!(
            !future.is_done(),
            "mode {event_loop_timeouts}: fired before 5 s"
        );
        clock.advance(Duration::from_nanos(1));
        assert!(
            eventually(CEILING, || future.is_done()),
            "mode {event_loop_timeouts}: never fired"
        );
        let error = future.wait().and_then(|r| r.bytes().wait()).unwrap_err();
        assert!(
            matches!(error, Error::RequestTimeout(ref t) if t.duration == Duration::from_secs(5))
        );
        let expected = if event_loop_timeouts {
            recorder.connections().pop().unwrap().loop_thread
        } else {
            // A wheel on a manual clock fires on the advancing thread.
            thread::current().id()
        };
        assert_eq!(failed_on(&recorder), expected, "mode {event_loop_timeouts}");
        client.close();
    }
}

/// A request whose deadline passes while its dispatch task waits in the
/// inbox of a busy loop (held here by a task of the test's, on a manual
/// clock) must not be sent: it has timed out, and a server may act on it
/// (a POST). It fails with its timeout, and its pooled connection, on
/// which nothing went, carries the next request. On the wheel the expiry
/// comes from the wheel, whatever the loop does; on the loops, from the
/// loop once it runs the task, which must not send first.
#[test]
fn a_request_timed_out_in_a_busy_loops_inbox_is_never_sent() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::respond(|_| ok("fine"));
        let clock = ManualClock::new();
        let shared: tickless::timer::SharedClock = Arc::new(clock.clone());
        let group = Arc::new(
            EventLoopGroup::builder()
                .threads(1)
                .clock(shared.clone())
                .build()
                .unwrap(),
        );
        let client = Client::builder()
            .clock(shared)
            .event_loop_group(group.clone())
            .use_event_loop_timeouts(event_loop_timeouts)
            .pooled_connection_idle_timeout(Duration::ZERO)
            .connection_ttl(Duration::ZERO)
            .build()
            .unwrap();
        let get = |path: &str| client.get(server.url(path)).send().wait().unwrap();
        assert_eq!(get("/first").bytes().wait().unwrap(), "fine");
        // The loop, busy with a task, until the request's deadline has passed.
        let (started, running) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        group.loops()[0]
            .execute(move |_| {
                started.send(()).unwrap();
                let _ = released.recv();
            })
            .unwrap();
        running.recv().unwrap();
        let late = client
            .get(server.url("/late"))
            .request_timeout(Duration::from_secs(1))
            .send();
        clock.advance(Duration::from_secs(2));
        release.send(()).unwrap();
        let error = late.wait().unwrap_err();
        assert!(
            matches!(error, Error::RequestTimeout(_)),
            "timeouts on loops {event_loop_timeouts}: {error:?}"
        );
        assert_eq!(get("/after").bytes().wait().unwrap(), "fine");
        client.close();
        // Every connection read to its end: whatever was sent is recorded.
        assert!(eventually(CEILING, || server.connections_open() == 0));
        let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
        assert_eq!(
            targets,
            ["/first", "/after"],
            "timeouts on loops {event_loop_timeouts}"
        );
    }
}
