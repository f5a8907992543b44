//! Request, read and connect timeouts against servers that misbehave on
//! purpose; per-request overrides; the error each one reads as; the thread
//! an expiry runs on.
//!
//! Timing assertions are only "not before the deadline" and "within a
//! generous ceiling" ([`CEILING`]): the machine may be loaded.

mod support;

use std::io::{ErrorKind, Write};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::event_loop::Executor;
use tickless::timer::ManualClock;
use tickless::{timeout_kind, Client, Error, TimeoutKind};

const WAIT: Duration = Duration::from_secs(5);
/// How late a timeout may fire before a test calls it broken.
const CEILING: Duration = Duration::from_secs(5);

fn client_with(config: impl FnOnce(tickless::ClientBuilder) -> tickless::ClientBuilder) -> Client {
    config(Client::builder().event_loops(2))
        .build()
        .expect("client")
}

#[test]
fn request_timeout_against_a_server_that_never_answers() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let recorder = Recorder::new();
    let client = client_with(|b| {
        b.request_timeout(Duration::from_millis(200))
            .listener(recorder.clone())
    });
    let error = fails_on_time(
        client.get(server.url("/")),
        Duration::from_millis(200),
        CEILING,
    );
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert!(error.is_timeout());
    let timeout = error.timeout().unwrap();
    assert_eq!(error.timeout_kind(), Some(TimeoutKind::Request));
    assert_eq!(timeout.duration, Duration::from_millis(200));
    assert_eq!(timeout.remote, format!("127.0.0.1/{}", server.addr()));
    assert_eq!(
        error.to_string(),
        format!(
            "Request timeout to 127.0.0.1/127.0.0.1:{} after 200 ms",
            server.addr().port()
        )
    );
    // The request had been sent; the server saw it, then the close.
    assert_eq!(server.requests().len(), 1);
    assert!(
        server.wait_for_open(0, WAIT),
        "timed-out connection left open"
    );
    // Exactly one failure reported, as a timeout, and no completion.
    let events = recorder.events();
    let failed: Vec<_> = events
        .iter()
        .filter_map(|(e, _)| match e {
            Event::Failed(message, timeout) => Some((message.clone(), *timeout)),
            _ => None,
        })
        .collect();
    assert_eq!(failed, vec![(error.to_string(), true)]);
    assert!(!events.iter().any(|(e, _)| matches!(e, Event::Completed(_))));
    assert_settles(&client, WAIT);
    // The permit comes back when the loop runs the abort, just after the
    // socket closes: poll.
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn timeout_kind_survives_conversion_to_io_error() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client_with(|b| b.request_timeout(Duration::from_millis(100)));
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    let message = error.to_string();
    let io = std::io::Error::from(error);
    assert_eq!(io.kind(), ErrorKind::TimedOut);
    assert_eq!(io.to_string(), message);
    assert_eq!(timeout_kind(&io), Some(TimeoutKind::Request));
    // And through a boxed error chain.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(io);
    assert_eq!(timeout_kind(boxed.as_ref()), Some(TimeoutKind::Request));
    // The inner error is still ours.
    let io = *boxed.downcast::<std::io::Error>().unwrap();
    let inner = io.into_inner().unwrap().downcast::<Error>().unwrap();
    assert!(matches!(*inner, Error::RequestTimeout(_)));
    client.close();
}

#[test]
fn read_timeout_when_the_server_stalls_after_the_head() {
    let server = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part".to_vec(),
    ));
    let client = client_with(|b| {
        b.request_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_millis(200))
    });
    let error = fails_on_time(
        client.get(server.url("/")),
        Duration::from_millis(200),
        CEILING,
    );
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("Read timeout to 127.0.0.1/{} after 200 ms", server.addr())
    );
    assert_eq!(
        timeout_kind(&std::io::Error::from(error)),
        Some(TimeoutKind::Read)
    );
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn read_timeout_before_any_response_byte() {
    // Silence from the moment the request is written counts too.
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client_with(|b| {
        b.request_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_millis(150))
    });
    let error = fails_on_time(
        client.get(server.url("/")),
        Duration::from_millis(150),
        CEILING,
    );
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn trickling_server_survives_the_read_timeout_but_not_the_request_timeout() {
    // A byte every 100 ms: never silent for the 1 s read timeout (a
    // loaded machine may stall the server a few hundred ms), but the whole
    // response (head and a long body) would take far longer than the 3 s
    // request timeout.
    let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 1000));
    let server = TestServer::start(Behaviour::Trickle {
        bytes,
        interval: Duration::from_millis(100),
        then_stall: true,
    });
    let client = client_with(|b| {
        b.request_timeout(Duration::from_secs(3))
            .read_timeout(Duration::from_secs(1))
    });
    let error = fails_on_time(client.get(server.url("/")), Duration::from_secs(3), CEILING);
    assert!(
        matches!(error, Error::RequestTimeout(_)),
        "expected RequestTimeout, got {error:?}"
    );
    assert!(error.to_string().ends_with("after 3000 ms"), "{error}");
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    client.close();
}

/// Sends a chunked head and a first chunk, `a`; once told (or given up
/// on), a second, `b`; then nothing, holding the connection.
fn second_chunk_when_told() -> (TestServer, mpsc::Sender<()>) {
    let (tell, told) = mpsc::channel();
    let told = Mutex::new(told);
    let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
        if read_head(&mut stream).is_none() {
            return;
        }
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n");
        let _ = told.lock().unwrap().recv_timeout(WAIT);
        let _ = stream.write_all(b"1\r\nb\r\n");
        drain(&mut stream);
    }));
    (server, tell)
}

#[test]
fn on_a_manual_clock_a_read_timeout_counts_from_the_last_read_in_every_mode() {
    const READ_TIMEOUT: Duration = Duration::from_secs(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // On the wheel, on the loop, on the loop a runtime drives.
    for (event_loop_timeouts, driven) in [(false, false), (true, false), (true, true)] {
        let mode = format!("event-loop timeouts {event_loop_timeouts}, driven {driven}");
        let (server, tell) = second_chunk_when_told();
        let clock = ManualClock::new();
        let recorder = Recorder::new();
        let mut builder = Client::builder();
        if driven {
            builder = builder.executor(Executor::tokio(runtime.handle().clone()));
        }
        let client = builder
            .clock(Arc::new(clock.clone()))
            .event_loops(1)
            .listener(recorder.clone())
            .use_event_loop_timeouts(event_loop_timeouts)
            .request_timeout(Duration::from_secs(3600))
            .read_timeout(READ_TIMEOUT)
            .build()
            .unwrap();
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.chunk().wait().unwrap().unwrap(), "a");
        clock.advance(Duration::from_secs(3));
        tell.send(()).unwrap();
        assert_eq!(response.chunk().wait().unwrap().unwrap(), "b", "{mode}");
        // Read at 3 s: silent until 8 s, past the 5 s of the first read's
        // timeout.
        read_timeout_fires_a_period_after_the_last_read(
            &clock,
            &recorder,
            &mut response,
            READ_TIMEOUT,
            &mode,
        );
        client.close();
    }
}

#[test]
fn per_request_timeout_beats_the_config() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client_with(|b| b.request_timeout(Duration::from_secs(60)));
    let request = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100));
    let error = fails_on_time(request, Duration::from_millis(100), CEILING);
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert_eq!(
        error.timeout().unwrap().duration,
        Duration::from_millis(100)
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn per_request_zero_disables_the_configured_request_timeout() {
    let server = TestServer::respond(|_| {
        thread::sleep(Duration::from_millis(300));
        ok("late but fine")
    });
    let client = client_with(|b| b.request_timeout(Duration::from_millis(100)));
    let started = Instant::now();
    let response = client
        .get(server.url("/"))
        .request_timeout(Duration::ZERO)
        .send()
        .wait()
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.text().wait().unwrap(), "late but fine");
    // Without the override the config's 100 ms applies.
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert_eq!(
        error.timeout().unwrap().duration,
        Duration::from_millis(100)
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn per_request_read_timeout_beats_the_config() {
    let server = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n".to_vec(),
    ));
    let client = client_with(|b| {
        b.read_timeout(Duration::from_secs(60))
            .request_timeout(Duration::from_secs(60))
    });
    let request = client
        .get(server.url("/"))
        .read_timeout(Duration::from_millis(150));
    let error = fails_on_time(request, Duration::from_millis(150), CEILING);
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    assert_eq!(
        error.timeout().unwrap().duration,
        Duration::from_millis(150)
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn request_and_read_timeouts_expire_on_the_wheel_thread() {
    let never = TestServer::start(Behaviour::NeverAnswer);
    let stall = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n".to_vec(),
    ));
    let client = client_with(|b| b.wheel_tick(Duration::from_millis(10)));
    let wheel = client.wheel_thread_id().expect("the client's wheel runs");
    assert_ne!(wheel, thread::current().id());

    let request_listener = Recorder::new();
    let error = client
        .get(never.url("/"))
        .request_timeout(Duration::from_millis(100))
        .listener(request_listener.clone())
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert_eq!(request_listener.failed_on(), Some(wheel));

    let read_listener = Recorder::new();
    let error = client
        .get(stall.url("/"))
        .read_timeout(Duration::from_millis(100))
        .listener(read_listener.clone())
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, Error::ReadTimeout(_)), "{error:?}");
    assert_eq!(read_listener.failed_on(), Some(wheel));
    // No loop thread ended either exchange.
    for event_loop in client.event_loop_group().loops() {
        assert_ne!(event_loop.thread_id(), wheel);
    }
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_response_before_the_deadline_disarms_its_timeouts() {
    let server = TestServer::respond(|_| ok("quick"));
    // On a manual clock (a loaded machine cannot make a request late), and
    // with no pool cleaner, so that anything firing is a timeout.
    let clock = tickless::timer::ManualClock::new();
    let client = client_with(|b| {
        b.clock(std::sync::Arc::new(clock.clone()))
            .pooled_connection_idle_timeout(Duration::ZERO)
            .request_timeout(Duration::from_millis(300))
            .read_timeout(Duration::from_millis(200))
    });
    for _ in 0..20 {
        assert_eq!(
            client
                .get(server.url("/"))
                .send()
                .wait()
                .unwrap()
                .text()
                .wait()
                .unwrap(),
            "quick"
        );
    }
    // Nothing left armed to fire later, and nothing does: past both
    // deadlines of every request, the next one still succeeds.
    assert_settles(&client, WAIT);
    clock.advance(Duration::from_secs(10));
    let stats = client.stats();
    assert_eq!(stats.armed_timers(), 0, "{stats:?}");
    assert_eq!(stats.wheel.fired, 0, "{stats:?}");
    assert!(stats.loops.iter().all(|l| l.fired == 0), "{stats:?}");
    assert_eq!(
        client
            .get(server.url("/"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "quick"
    );
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// In wheel mode the requests of a kept-alive connection hold its one
/// standing wheel entry: after the first, none arms or cancels an entry of
/// its own — and a timeout still fires at its own deadline exactly, not at
/// the earlier one the entry was armed for.
#[test]
fn kept_alive_requests_share_one_wheel_entry_and_still_time_out_exactly() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    // The client's timeout, or each request's own on a client without one
    // (as the benchmarks set theirs).
    for own_timeout in [false, true] {
        let stalled_seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = stalled_seen.clone();
        let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
            let mut reader = RequestReader::new(index);
            while let Ok(request) = reader.read_request(&mut stream) {
                if request.target == "/stall" {
                    seen.store(true, std::sync::atomic::Ordering::SeqCst);
                    return drain(&mut stream);
                }
                if stream.write_all(&ok("quick")).is_err() {
                    return;
                }
            }
        }));
        // On a manual clock: the wheel fires only when the test advances it.
        let clock = ManualClock::new();
        let client = client_with(|b| {
            let client_timeout = if own_timeout { Duration::ZERO } else { TIMEOUT };
            b.clock(Arc::new(clock.clone()))
                .pooled_connection_idle_timeout(Duration::ZERO)
                .request_timeout(client_timeout)
                .read_timeout(Duration::ZERO)
        });
        let send = |path: &str| {
            let request = client.get(server.url(path));
            match own_timeout {
                true => request.request_timeout(TIMEOUT).send(),
                false => request.send(),
            }
        };
        let mut cancelled_after_first = None;
        for _ in 0..20 {
            let response = send("/").wait().unwrap();
            assert_eq!(response.text().wait().unwrap(), "quick");
            clock.advance(Duration::from_millis(10));
            // The first moved its entry from the wheel onto the connection's.
            cancelled_after_first.get_or_insert(client.stats().wheel.cancelled);
        }
        let stats = client.stats();
        // The others ended before their deadlines: with an entry of its own,
        // each end would have cancelled it.
        assert_eq!(
            (Some(stats.wheel.cancelled), stats.armed_timers()),
            (cancelled_after_first, 0),
            "own timeout {own_timeout}: {stats:?}"
        );
        // The entry is armed for the first request's deadline, 100 ms before
        // this one's.
        let stalled = send("/stall");
        assert!(eventually(WAIT, || stalled_seen
            .load(std::sync::atomic::Ordering::SeqCst)));
        clock.advance(TIMEOUT - Duration::from_nanos(1));
        assert!(!stalled.is_done(), "failed before its deadline");
        clock.advance(Duration::from_nanos(1));
        assert!(stalled.is_done(), "not failed at its deadline");
        let error = stalled.wait().unwrap_err();
        assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
        assert_eq!(server.connections_accepted(), 1);
        client.close();
    }
}

#[test]
fn timeouts_past_the_end_of_time_mean_never_in_both_modes() {
    // `Duration::MAX` is how a caller says "no timeout"; adding it to an
    // instant would overflow. Such a timeout arms nothing and ends nothing.
    let server = TestServer::respond(|_| ok("eventually"));
    for on_event_loop in [false, true] {
        let client = client_with(|b| {
            b.use_event_loop_timeouts(on_event_loop)
                .request_timeout(Duration::MAX)
                .read_timeout(Duration::MAX)
                .connect_timeout(Duration::MAX)
                .handshake_timeout(Duration::MAX)
        });
        for _ in 0..3 {
            let response = client.get(server.url("/")).send().wait();
            assert_eq!(response.unwrap().text().wait().unwrap(), "eventually");
        }
        // Per request too, over the configured ones.
        let response = client
            .get(server.url("/"))
            .request_timeout(Duration::MAX)
            .read_timeout(Duration::MAX)
            .send()
            .wait();
        assert_eq!(response.unwrap().text().wait().unwrap(), "eventually");
        assert_eq!(client.stats().armed_timers(), 0, "mode {on_event_loop}");
        client.close();
    }
}

#[test]
fn connect_timeout_against_a_full_backlog() {
    let mut listener = UnacceptingListener::new();
    let filled = listener.backlog_filled(4096);
    let client = client_with(|b| {
        b.connect_timeout(Duration::from_millis(200))
            .request_timeout(Duration::from_secs(30))
    });
    let started = Instant::now();
    let result = client
        .get(format!("http://{}/", listener.addr()))
        .send()
        .wait();
    let elapsed = started.elapsed();
    if !filled {
        // This kernel did not drop SYNs to a full accept queue, so a
        // connect cannot be made to hang locally: only check that the
        // request ended (whatever way) without hitting the request timeout.
        eprintln!("backlog could not be filled; connect-timeout assertion skipped");
        assert!(elapsed < Duration::from_secs(30) + CEILING);
        client.close();
        return;
    }
    let error = result.unwrap_err();
    assert!(matches!(error, Error::ConnectTimeout(_)), "{error:?}");
    assert_on_time(elapsed, Duration::from_millis(200), CEILING);
    assert_eq!(
        error.to_string(),
        format!(
            "Connect timeout to 127.0.0.1/{} after 200 ms",
            listener.addr()
        )
    );
    assert_eq!(
        timeout_kind(&std::io::Error::from(error)),
        Some(TimeoutKind::Connect)
    );
    assert_settles(&client, WAIT);
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

#[test]
fn request_timeout_bounds_a_hanging_connect() {
    let mut listener = UnacceptingListener::new();
    if !listener.backlog_filled(4096) {
        // See connect_timeout_against_a_full_backlog.
        eprintln!("backlog could not be filled; hanging-connect test skipped");
        return;
    }
    let client = client_with(|b| {
        b.connect_timeout(Duration::ZERO)
            .request_timeout(Duration::from_millis(200))
    });
    let request = client.get(format!("http://{}/", listener.addr()));
    let error = fails_on_time(request, Duration::from_millis(200), CEILING);
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    assert_settles(&client, WAIT);
    assert!(eventually(WAIT, || client.stats().open_connections == 0));
    client.close();
}

/// #10, defect 6: a connection reads at most a budget per readiness event,
/// so one fast download cannot hold back the other deadlines of its loop.
/// Here a 1 GiB download and a request to a silent server share the one
/// loop, the request on a pooled connection so its timeout is on the loop.
#[test]
fn a_fast_download_does_not_hold_back_a_timeout_on_its_loop() {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    const TOTAL: u64 = 1 << 30;
    let fast = TestServer::start(Behaviour::custom(|mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {TOTAL}\r\n\r\n");
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let chunk = vec![b'x'; 256 * 1024];
        let mut sent = 0;
        while sent < TOTAL && stream.write_all(&chunk).is_ok() {
            sent += chunk.len() as u64;
        }
    }));
    // Answers once, then stalls: its pooled connection carries the timed
    // request, whose timeout is then armed on the loop from the start.
    let silent = TestServer::start(Behaviour::custom(|mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_ok() {
            let _ = stream.write_all(&ok("first"));
            let _ = reader.read_request(&mut stream);
            drain(&mut stream);
        }
    }));
    let client = Client::builder()
        .event_loops(1)
        .use_event_loop_timeouts(true)
        .request_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    assert_eq!(
        client
            .get(silent.url("/"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "first"
    );
    assert!(eventually(Duration::from_secs(10), || client
        .stats()
        .idle_connections
        == 1));
    // The download is read as fast as a thread can: the body's window
    // never fills, so only the read budget makes the loop look up.
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let mut download = client.get(fast.url("/big")).send().wait().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = std::io::Read::read(download.body_mut(), &mut buf) {
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    assert!(eventually(Duration::from_secs(10), || received
        .load(Ordering::Relaxed)
        > 1 << 20));
    let sent = Instant::now();
    let timed = client
        .get(silent.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send();
    assert!(matches!(timed.wait(), Err(Error::RequestTimeout(_))));
    // Generous: a loop that read the download until the socket ran dry
    // held this 100 ms timeout for seconds.
    let took = sent.elapsed();
    let so_far = received.load(Ordering::Relaxed);
    assert!(
        took < Duration::from_secs(1) && so_far < TOTAL,
        "a 100 ms timeout ended its request after {took:?}, {so_far} bytes into the download"
    );
    // Closing ends the download, and its reader.
    client.close();
    reader.join().unwrap();
}
