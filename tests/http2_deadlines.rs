//! Deadlines per HTTP/2 stream, in both timeout modes: a stream's request
//! or read timeout fails that stream alone, with `RST_STREAM(CANCEL)`, while
//! the other streams of the connection go on; and where the expiry runs is
//! asserted by identity — the wheel's thread by default, the thread of the
//! loop that owns the connection with `use_event_loop_timeouts` — per
//! stream, with a recorder of its own on each request (its `on_failed` runs
//! on the thread that ended the exchange).

mod support;

use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::h2_server::{answer, await_reset, H2Server, H2Stream};
use support::*;
use tickless::event_loop::EventLoopGroup;
use tickless::timer::{HashedWheelTimer, ManualClock};
use tickless::{Client, Error};
use tokio::sync::Notify;

const CEILING: Duration = Duration::from_secs(20);

struct Parts {
    timer: HashedWheelTimer,
    group: Arc<EventLoopGroup>,
    recorder: Arc<Recorder>,
    client: Client,
}

fn parts(event_loop_timeouts: bool) -> Parts {
    let timer = HashedWheelTimer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .unwrap();
    let group = Arc::new(EventLoopGroup::builder().threads(2).build().unwrap());
    let recorder = Recorder::new();
    let client = Client::builder()
        .timer(timer.clone())
        .event_loop_group(group.clone())
        .listener(recorder.clone())
        .use_event_loop_timeouts(event_loop_timeouts)
        .http2_prior_knowledge()
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

/// `/stall` never answers (and records the reset); `/slow` answers after
/// 400 ms; `/trickle` sends its head and a first part, then nothing;
/// `/steady` sends twenty parts 75 ms apart (1.5 s in all); anything else
/// answers at once.
fn server() -> H2Server {
    H2Server::start(|mut stream: H2Stream| async move {
        match stream.request.uri().path() {
            "/stall" => {
                await_reset(&mut stream.respond, &stream.stats, Duration::from_secs(30)).await
            }
            "/slow" => {
                tokio::time::sleep(Duration::from_millis(400)).await;
                answer(stream, 200, b"slow").await
            }
            "/trickle" | "/steady" => {
                let steady = stream.request.uri().path() == "/steady";
                let response = http::Response::builder().status(200).body(()).unwrap();
                let Ok(mut send) = stream.respond.send_response(response, false) else {
                    return;
                };
                let _ = send.send_data(Bytes::from_static(b"part\n"), false);
                if steady {
                    for i in 0..20 {
                        tokio::time::sleep(Duration::from_millis(75)).await;
                        let _ = send.send_data(Bytes::from_static(b"part\n"), i == 19);
                    }
                } else if let Ok(reason) = std::future::poll_fn(|cx| send.poll_reset(cx)).await {
                    stream.stats.record_reset(reason);
                }
            }
            _ => answer(stream, 200, b"ok").await,
        }
    })
}

/// Sends `path` with its own recorder and `timeout` as request timeout.
fn send(
    p: &Parts,
    server: &H2Server,
    path: &str,
    timeout: Duration,
) -> (tickless::ResponseFuture, Arc<Recorder>) {
    let own = Recorder::new();
    let future = p
        .client
        .get(server.url(path))
        .request_timeout(timeout)
        .listener(own.clone())
        .send();
    (future, own)
}

/// One stalled stream among others: it alone fails, by its request
/// timeout, from `expected` (the wheel, or the connection's loop), and
/// is reset with CANCEL; the connection and the other stream go on.
fn one_stream_times_out(event_loop_timeouts: bool) {
    let server = server();
    let p = parts(event_loop_timeouts);
    // The connection first: every later stream is on it, attached there.
    let warm = p.client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(warm.bytes().wait().unwrap(), "ok");
    let info = p
        .recorder
        .connections()
        .pop()
        .expect("a connect-success event");

    let (slow, slow_events) = send(&p, &server, "/slow", Duration::from_secs(30));
    let started = Instant::now();
    let (stalled, stalled_events) = send(&p, &server, "/stall", Duration::from_millis(150));
    let error = stalled.wait().unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    // Never early.
    assert!(started.elapsed() >= Duration::from_millis(150));
    let expired_on = stalled_events
        .failed_on()
        .expect("the stalled stream failed");
    if event_loop_timeouts {
        // On the connection's loop: its thread, or this one — a request
        // for a stream of the shared connection does not wake the loop's
        // thread if it left the loop idle (the warm-up's answer came to
        // this thread driving it), and this thread, blocked on it, drives
        // the loop, as a caller of a pooled HTTP/1.1 connection does.
        assert!(
            expired_on == info.loop_thread || expired_on == std::thread::current().id(),
            "{expired_on:?}: neither the loop's thread nor this one"
        );
        assert_eq!(
            p.group.loops()[info.loop_index].thread_id(),
            info.loop_thread
        );
        assert_ne!(Some(expired_on), p.timer.thread_id());
    } else {
        assert_eq!(Some(expired_on), p.timer.thread_id());
    }
    // The slow stream on the same connection is untouched.
    let slow = slow.wait().unwrap();
    assert_eq!(slow.bytes().wait().unwrap(), "slow");
    assert!(slow_events.failed_on().is_none());
    assert!(eventually(CEILING, || server.stats.resets() == vec![0x8]));
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert_eq!(p.recorder.connections().len(), 1);
    assert!(eventually(CEILING, || p.client.stats().armed_timers() == 0));
    p.client.close();
}

#[test]
fn by_default_a_stream_request_timeout_expires_on_the_wheel_and_fails_that_stream_alone() {
    one_stream_times_out(false);
}

#[test]
fn with_event_loop_timeouts_a_stream_request_timeout_expires_on_the_connections_loop() {
    one_stream_times_out(true);
}

/// A stream's read timeout is its own silence: a trickling stream that
/// goes silent fails by it, while a steady one whose parts come closer
/// together than the read timeout finishes, on the same connection.
fn read_timeout_is_silence_on_the_stream(event_loop_timeouts: bool) {
    let server = server();
    let p = parts(event_loop_timeouts);
    let warm = p.client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(warm.bytes().wait().unwrap(), "ok");
    let info = p.recorder.connections().pop().unwrap();

    // Thirteen times the steady stream's gaps, shorter than the whole of
    // it: a loaded machine stalls its server by a few hundred milliseconds
    // at times (CI once failed the steady stream at 400 ms against gaps of
    // 100).
    let read = Duration::from_secs(1);
    let steady_events = Recorder::new();
    let steady = p
        .client
        .get(server.url("/steady"))
        .read_timeout(read)
        .listener(steady_events.clone())
        .send();
    let trickle_events = Recorder::new();
    let trickle = p
        .client
        .get(server.url("/trickle"))
        .read_timeout(read)
        .listener(trickle_events.clone())
        .send()
        .wait()
        .unwrap();
    let error = trickle.bytes().wait().unwrap_err();
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    let expired_on = trickle_events.failed_on().unwrap();
    if event_loop_timeouts {
        // On the connection's loop: its thread, or this one — blocked on
        // the body (its head answered it), it drives the loop its thread
        // left idle, as a caller back within the loop's grace does.
        assert!(
            expired_on == info.loop_thread || expired_on == std::thread::current().id(),
            "{expired_on:?}: neither the loop's thread nor this one"
        );
        assert_ne!(Some(expired_on), p.timer.thread_id());
    } else {
        assert_eq!(Some(expired_on), p.timer.thread_id());
    }
    let steady = steady.wait().unwrap().bytes().wait().unwrap();
    assert_eq!(steady.len(), 21 * 5);
    assert!(eventually(CEILING, || server.stats.resets() == vec![0x8]));
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert!(eventually(CEILING, || p.client.stats().armed_timers() == 0));
    p.client.close();
}

#[test]
fn by_default_a_streams_read_timeout_measures_its_own_silence() {
    read_timeout_is_silence_on_the_stream(false);
}

#[test]
fn with_event_loop_timeouts_a_streams_read_timeout_measures_its_own_silence_on_its_loop() {
    read_timeout_is_silence_on_the_stream(true);
}

/// A stream that sends its head and a first part, `a`; once told, a
/// second, `b`; then nothing, and records the reset that ends it.
fn second_part_when_told() -> (H2Server, Arc<Notify>) {
    let told = Arc::new(Notify::new());
    let server = H2Server::start({
        let told = told.clone();
        move |mut stream: H2Stream| {
            let told = told.clone();
            async move {
                let response = http::Response::builder().status(200).body(()).unwrap();
                let Ok(mut send) = stream.respond.send_response(response, false) else {
                    return;
                };
                let _ = send.send_data(Bytes::from_static(b"a"), false);
                told.notified().await;
                let _ = send.send_data(Bytes::from_static(b"b"), false);
                if let Ok(reason) = std::future::poll_fn(|cx| send.poll_reset(cx)).await {
                    stream.stats.record_reset(reason);
                }
            }
        }
    });
    (server, told)
}

#[test]
fn on_a_manual_clock_a_streams_read_timeout_counts_from_its_last_read_in_both_modes() {
    const READ_TIMEOUT: Duration = Duration::from_secs(5);
    for event_loop_timeouts in [false, true] {
        let (server, told) = second_part_when_told();
        let clock = ManualClock::new();
        let recorder = Recorder::new();
        let client = h2c_builder(1, Duration::from_secs(3600))
            .clock(Arc::new(clock.clone()))
            .listener(recorder.clone())
            .use_event_loop_timeouts(event_loop_timeouts)
            .read_timeout(READ_TIMEOUT)
            .build()
            .unwrap();
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.chunk().wait().unwrap().unwrap(), "a");
        clock.advance(Duration::from_secs(3));
        told.notify_one();
        assert_eq!(
            response.chunk().wait().unwrap().unwrap(),
            "b",
            "mode {event_loop_timeouts}"
        );
        // Read at 3 s: silent until 8 s, past the 5 s of the first read's
        // timeout.
        read_timeout_fires_a_period_after_the_last_read(
            &clock,
            &recorder,
            &mut response,
            READ_TIMEOUT,
            &format!("mode {event_loop_timeouts}"),
        );
        assert!(eventually(CEILING, || server.stats.resets() == vec![0x8]));
        client.close();
    }
}

/// `/big` sends 1 MiB as the client's window allows; `/silent` sends its
/// head, then nothing (and records the reset that ends it).
fn big_or_silent() -> H2Server {
    H2Server::start(|mut stream: H2Stream| async move {
        const LEN: usize = 1 << 20;
        let response = http::Response::builder().status(200).body(()).unwrap();
        let Ok(mut send) = stream.respond.send_response(response, false) else {
            return;
        };
        if stream.request.uri().path() == "/silent" {
            if let Ok(reason) = std::future::poll_fn(|cx| send.poll_reset(cx)).await {
                stream.stats.record_reset(reason);
            }
            return;
        }
        let chunk = Bytes::from(vec![7u8; 16 * 1024]);
        let mut sent = 0;
        while sent < LEN {
            send.reserve_capacity(chunk.len().min(LEN - sent));
            match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                Some(Ok(n)) if n > 0 => {
                    let n = n.min(chunk.len()).min(LEN - sent);
                    if send.send_data(chunk.slice(..n), sent + n == LEN).is_err() {
                        return;
                    }
                    sent += n;
                }
                Some(Ok(_)) => {}
                _ => return,
            }
        }
    })
}

/// A reader that does not read is not the server's silence (DESIGN.md,
/// timeouts point 13), over HTTP/2 as over HTTP/1.1
/// (`streaming_bodies.rs`): a stream whose body's pipe is full stops its
/// read timeout, on a manual clock advanced far past it, in both modes.
///
/// Known, not slept for. The stream stops (`Stream::pause`) on its loop,
/// in the same call that fills its pipe: once the client has a window's
/// worth buffered, a second stream sent on the connection is taken by
/// the loop after that stop — its head answers it. And whether an armed
/// read timeout would have fired is known by that second stream's own,
/// on the same wheel or the same loop's heap: it is due later, past a
/// first advance of the clock that takes the first stream's due, and it
/// fires — had the first stream's been armed, it would have fired before.
#[test]
fn a_stalled_reader_is_no_read_timeout_in_both_modes() {
    const WINDOW: usize = 64 * 1024;
    const READ_TIMEOUT: Duration = Duration::from_secs(5);
    for event_loop_timeouts in [false, true] {
        let case = format!("mode {event_loop_timeouts}");
        let server = big_or_silent();
        let clock = ManualClock::new();
        let client = h2c_builder(1, Duration::ZERO)
            .clock(Arc::new(clock.clone()))
            .use_event_loop_timeouts(event_loop_timeouts)
            .read_timeout(READ_TIMEOUT)
            .body_window(WINDOW)
            .http2_initial_stream_window_size(WINDOW as u32)
            .build()
            .unwrap();
        let mut big = client.get(server.url("/big")).send().wait().unwrap();
        assert!(
            eventually(CEILING, || client.stats().buffered_body_bytes >= WINDOW),
            "{case}: {} bytes buffered",
            client.stats().buffered_body_bytes
        );
        let probe = client
            .get(server.url("/silent"))
            .read_timeout(3 * READ_TIMEOUT)
            .send()
            .wait()
            .unwrap();
        // Twice the first stream's read timeout with nothing read (on the
        // wheel, what is due fires within `advance`), then past the probe's.
        clock.advance(2 * READ_TIMEOUT);
        clock.advance(2 * READ_TIMEOUT);
        let error = probe.bytes().wait().unwrap_err();
        assert!(
            matches!(error, Error::ReadTimeout(ref t) if t.duration == 3 * READ_TIMEOUT),
            "{case}: the probe ended with {error:?}"
        );
        let mut read = 0;
        let body = big.body_mut();
        loop {
            match body.chunk().wait() {
                Ok(Some(chunk)) => {
                    assert!(chunk.iter().all(|&b| b == 7), "{case}");
                    read += chunk.len();
                }
                Ok(None) => break,
                Err(error) => panic!("{case}: {error:?} after {read} bytes"),
            }
        }
        assert_eq!(read, 1 << 20, "{case}");
        // The probe's stream alone was reset.
        assert!(
            eventually(CEILING, || server.stats.resets() == vec![0x8]),
            "{case}"
        );
        client.close();
    }
}

#[test]
fn a_connecting_streams_timeout_moves_to_the_loop_of_its_new_connection() {
    let server = server();
    let p = parts(true);
    // A budget it cannot reach before connecting, even on a loaded machine:
    // expiring from the wheel, where it is armed until then, would prove
    // nothing.
    let (stalled, events) = send(&p, &server, "/stall", Duration::from_secs(2));
    let error = stalled.wait().unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    let info = p
        .recorder
        .connections()
        .pop()
        .expect("a connect-success event");
    assert_eq!(events.failed_on().unwrap(), info.loop_thread);
    assert_ne!(Some(info.loop_thread), p.timer.thread_id());
    assert!(eventually(CEILING, || server.stats.resets() == vec![0x8]));
    assert!(eventually(CEILING, || p.client.stats().armed_timers() == 0));
    p.client.close();
}

/// Two hundred streams time out together on their loop: their aborts wait
/// for a gap after the burst, then go together, their resets in one drive
/// of the connection — at once, not one by one (a reset once held on a
/// connection timer of its own made the loop see a deadline within its gap
/// after every abort, and defer the next: 84 ms for these two hundred).
/// Measured at the server, from the first reset to the last: one write
/// arrives as one, whatever else the machine is doing; a time from the
/// client's failures would also count its loop's waits for the CPU.
///
/// Together only if they were sent together: each deadline is fixed at
/// its send, and a sending thread stalled between two sends (a loaded
/// machine stalls threads by milliseconds, and more) spreads the deadlines
/// — and so the resets — by as long. Sends spread over more than
/// [`SENT_TOGETHER`] make no burst: the whole is tried again, a few times
/// at most.
#[test]
fn many_streams_time_out_together_are_reset_at_once_and_the_connection_goes_on() {
    const STREAMS: usize = 200;
    const TRIES: usize = 5;
    for _ in 0..TRIES {
        let server = server();
        let p = parts(true);
        let warm = p.client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(warm.bytes().wait().unwrap(), "ok");
        let sending = Instant::now();
        let stalled: Vec<_> = (0..STREAMS)
            .map(|_| send(&p, &server, "/stall", Duration::from_millis(200)).0)
            .collect();
        let sent_over = sending.elapsed();
        for future in stalled {
            assert!(matches!(
                future.wait().unwrap_err(),
                Error::RequestTimeout(_)
            ));
        }
        if sent_over > SENT_TOGETHER {
            p.client.close();
            continue;
        }
        assert!(eventually(CEILING, || server.stats.resets().len() == STREAMS));
        let spread = server.stats.reset_spread();
        assert!(
            spread < Duration::from_millis(40),
            "resets came over {spread:?} (sent over {sent_over:?})"
        );
        assert!(server.stats.resets().iter().all(|&code| code == 0x8));
        assert_eq!(p.client.stats().http2_streams_open, 0);
        let after = p.client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(after.bytes().wait().unwrap(), "ok");
        assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
        assert!(eventually(CEILING, || p.client.stats().armed_timers() == 0));
        p.client.close();
        return;
    }
    panic!("in {TRIES} tries, the {STREAMS} sends were never within {SENT_TOGETHER:?}");
}

/// How close together the sends of a burst of deadlines must be (see
/// `many_streams_time_out_together_are_reset_at_once_and_the_connection_goes_on`):
/// half the spread allowed to the resets, which leaves the other half to
/// the aborts (one by one, two hundred took 84 ms).
const SENT_TOGETHER: Duration = Duration::from_millis(20);

#[test]
fn streams_freed_by_timeouts_go_to_the_requests_waiting_for_one() {
    // Two streams at once: both taken by stalled requests, so the next two
    // wait here until the timeouts reset the stalled ones.
    let server = H2Server::start_with(
        |builder| {
            builder.max_concurrent_streams(2);
        },
        |mut stream: H2Stream| async move {
            if stream.request.uri().path() == "/stall" {
                await_reset(&mut stream.respond, &stream.stats, Duration::from_secs(30)).await
            } else {
                answer(stream, 200, b"ok").await
            }
        },
    );
    for event_loop_timeouts in [false, true] {
        let p = parts(event_loop_timeouts);
        let warm = p.client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(warm.bytes().wait().unwrap(), "ok");
        let stalled: Vec<_> = (0..2)
            .map(|_| send(&p, &server, "/stall", Duration::from_millis(200)).0)
            .collect();
        let waiting: Vec<_> = (0..2)
            .map(|_| send(&p, &server, "/", Duration::from_secs(30)).0)
            .collect();
        for future in stalled {
            assert!(matches!(
                future.wait().unwrap_err(),
                Error::RequestTimeout(_)
            ));
        }
        for future in waiting {
            assert_eq!(future.wait().unwrap().bytes().wait().unwrap(), "ok");
        }
        assert!(eventually(CEILING, || p.client.stats().armed_timers() == 0));
        p.client.close();
    }
}
