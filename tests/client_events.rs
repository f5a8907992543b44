//! What an `EventListener` sees, in what order, and on which thread.

mod support;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;
use support::*;
use tickless::{
    Client, ConnectionInfo, EventListener, Proxy, RequestHead, RequestInfo, ResponseHead,
};

const WAIT: Duration = Duration::from_secs(5);

/// Position of the first event matching `pred`; panics with the events.
fn position(events: &[(Event, ThreadId)], what: &str, pred: impl Fn(&Event) -> bool) -> usize {
    events
        .iter()
        .position(|(e, _)| pred(e))
        .unwrap_or_else(|| panic!("no {what} event in {events:#?}"))
}

fn connection(events: &[(Event, ThreadId)], index: usize) -> &ConnectionInfo {
    match &events[index].0 {
        Event::ConnectSuccess(info)
        | Event::ConnectionPooled(info)
        | Event::ConnectionOffered(info)
        | Event::RequestSent(info) => info,
        other => panic!("not a connection event: {other:?}"),
    }
}

#[test]
fn a_fresh_request_then_a_pooled_one() {
    let server = TestServer::respond(|_| response(200, &[("X-Ev", "1")], &[b'z'; 50_000]));
    let (client, recorder) = recorded_client();
    let loop_threads: Vec<ThreadId> = client
        .event_loop_group()
        .loops()
        .iter()
        .map(|l| l.thread_id())
        .collect();
    assert_eq!(loop_threads.len(), 2);

    let response = client.get(server.url("/first")).send().wait().unwrap();
    assert_eq!(response.bytes().wait().unwrap().len(), 50_000);
    // `offered` is reported before the body's end is, and `completed`
    // just before: both are in by now.
    let events = recorder.events();
    let attempt = position(
        &events,
        "connect attempt",
        |e| matches!(e, Event::ConnectAttempt(a) if *a == server.addr()),
    );
    let success = position(&events, "connect success", |e| {
        matches!(e, Event::ConnectSuccess(_))
    });
    let sent = position(&events, "request sent", |e| {
        matches!(e, Event::RequestSent(_))
    });
    let status = position(
        &events,
        "status",
        |e| matches!(e, Event::Status(s) if *s == 200),
    );
    let headers = position(
        &events,
        "headers",
        |e| matches!(e, Event::Headers(h) if h["x-ev"] == "1"),
    );
    let head = position(
        &events,
        "response head",
        |e| matches!(e, Event::ResponseHead(h) if h.status == 200 && h.headers["x-ev"] == "1"),
    );
    let body = position(&events, "body part", |e| matches!(e, Event::BodyPart(_)));
    let offered = position(&events, "connection offered", |e| {
        matches!(e, Event::ConnectionOffered(_))
    });
    let completed = position(
        &events,
        "completed",
        |e| matches!(e, Event::Completed(s) if *s == 200),
    );
    assert!(
        attempt < success
            && success < sent
            && sent < status
            && status < headers
            && headers < head
            && head < body
            && body < offered
            && offered < completed,
        "out of order: {events:#?}"
    );
    // No resolution for an IP literal, no failure, no pooled connection.
    assert!(!events.iter().any(|(e, _)| matches!(
        e,
        Event::Resolved(..) | Event::Failed(..) | Event::ConnectionPooled(_)
    )));
    // The body parts add up to the body.
    let body_bytes: usize = events
        .iter()
        .filter_map(|(e, _)| match e {
            Event::BodyPart(n) => Some(*n),
            _ => None,
        })
        .sum();
    assert_eq!(body_bytes, 50_000);

    // One connection, pinned to one of the client's loops, and every
    // connection event ran on that loop's thread.
    let info = connection(&events, success).clone();
    assert!(loop_threads.contains(&info.loop_thread));
    assert_eq!(info.loop_thread, loop_threads[info.loop_index]);
    assert_eq!(info.remote, server.addr());
    assert_eq!(events[success].1, info.loop_thread);
    assert_eq!(connection(&events, sent), &info);
    assert_eq!(connection(&events, offered), &info);
    for (event, thread) in &events[attempt..=offered] {
        assert_eq!(*thread, info.loop_thread, "{event:?} off its loop");
    }

    // The second request takes the same connection from the pool.
    recorder.clear();
    get_bytes(&client, &server.url("/second"));
    let events = recorder.events();
    let pooled = position(&events, "connection pooled", |e| {
        matches!(e, Event::ConnectionPooled(_))
    });
    assert_eq!(connection(&events, pooled), &info);
    // On the loop: its thread, or this one, blocked on the request and
    // driving the loop its thread had left idle after the first answer.
    let pooled_on = events[pooled].1;
    assert!(pooled_on == info.loop_thread || pooled_on == std::thread::current().id());
    assert!(!events
        .iter()
        .any(|(e, _)| matches!(e, Event::ConnectAttempt(_) | Event::ConnectSuccess(_))));
    let sent = position(&events, "request sent", |e| {
        matches!(e, Event::RequestSent(_))
    });
    assert!(pooled < sent);
    assert_eq!(connection(&events, sent).id, info.id);
    assert_eq!(server.connections_accepted(), 1);
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_host_name_is_resolved_off_the_loops() {
    let server = TestServer::respond(|_| ok("named"));
    let (client, recorder) = recorded_client();
    let url = format!("http://localhost:{}/", server.addr().port());
    let response = client.get(url).send().wait().unwrap();
    let remote = response.remote_addr();
    assert_eq!(response.text().wait().unwrap(), "named");
    let events = recorder.events();
    let resolved = position(&events, "resolved", |e| {
        matches!(e, Event::Resolved(host, addrs)
            if host == "localhost" && addrs.iter().any(|a| a.port() == server.addr().port()))
    });
    let loop_threads: Vec<ThreadId> = client
        .event_loop_group()
        .loops()
        .iter()
        .map(|l| l.thread_id())
        .collect();
    assert!(!loop_threads.contains(&events[resolved].1));
    assert_ne!(events[resolved].1, std::thread::current().id());
    let success = position(&events, "connect success", |e| {
        matches!(e, Event::ConnectSuccess(_))
    });
    assert!(resolved < success);
    // The remote in messages and on the response is the address used.
    assert!(remote.ip().is_loopback());
    client.close();
}

#[test]
fn the_request_listener_hears_what_the_client_listener_hears() {
    let server = TestServer::respond(|_| ok("both"));
    let client_listener = Recorder::new();
    let request_listener = Recorder::new();
    let client = Client::builder()
        .event_loops(2)
        .listener(client_listener.clone())
        .build()
        .unwrap();
    client
        .get(server.url("/"))
        .listener(request_listener.clone())
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap();
    let names = |r: &Recorder| -> Vec<String> {
        r.events()
            .iter()
            .map(|(e, _)| format!("{e:?}").split('(').next().unwrap().to_owned())
            .collect()
    };
    assert!(!names(&request_listener).is_empty());
    assert_eq!(names(&client_listener), names(&request_listener));
    // A request without its own listener is heard by the client's only.
    request_listener.clear();
    get_bytes(&client, &server.url("/"));
    assert!(request_listener.events().is_empty());
    client.close();
}

/// `on_request_head` tells the head as it went — the lines the proxy
/// got, in order, the client's own fields among them, and not the small
/// body sent after it — but the forwarding proxy's `Proxy-Authorization`;
/// `on_response_head` the status line as it came (its version, its
/// reason phrase byte for byte) and the headers.
#[test]
fn the_heads_are_told_as_they_went_and_came_but_a_proxys_credentials() {
    #[derive(Default)]
    struct Heads(Mutex<Vec<String>>);
    impl EventListener for Heads {
        fn on_request_head(&self, _: &RequestInfo, _: &ConnectionInfo, head: &RequestHead<'_>) {
            let (method, target, version) = (head.method(), head.target(), head.version());
            let mut lines = vec![format!("{method} {target} {version:?}")];
            lines.extend(
                head.fields()
                    .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value))),
            );
            assert_eq!(head.authority(), None, "HTTP/1.1 has a Host field");
            self.0.lock().unwrap().push(lines.join("\n"));
        }
        fn on_response_head(&self, _: &RequestInfo, head: &ResponseHead<'_>) {
            let (version, status) = (head.version(), head.status().as_u16());
            let reason = String::from_utf8_lossy(head.reason());
            let fields = head.headers().len();
            self.0
                .lock()
                .unwrap()
                .push(format!("{version:?} {status} {reason} ({fields} fields)"));
        }
    }
    // A forwarding proxy double: it answers itself.
    let proxy = TestServer::respond(|_| {
        b"HTTP/1.0 299 Fine Thanks\r\nX-Ev: 1\r\nContent-Length: 2\r\n\r\nok".to_vec()
    });
    let heads = Arc::new(Heads::default());
    let client = Client::builder()
        .proxy(Proxy::all(&format!("http://bob:s3cret@{}", proxy.addr())).unwrap())
        .listener(heads.clone())
        .build()
        .unwrap();
    let response = client
        .post("http://origin.test/form?q=1")
        .header("X-Mine", "yes")
        .body("a=1")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "ok");
    let request = proxy.requests().pop().unwrap();
    assert!(
        request.header("proxy-authorization").is_some(),
        "{request:?}"
    );
    assert_eq!(request.target, "http://origin.test/form?q=1");
    let sent = request.head_lines(&["proxy-authorization"]);
    assert!(sent.contains(&"x-mine: yes".to_string()), "{sent:?}");
    assert_eq!(
        *heads.0.lock().unwrap(),
        [
            sent.join("\n"),
            "HTTP/1.0 299 Fine Thanks (2 fields)".into()
        ]
    );
    client.close();
}

/// Interim (1xx) heads are told to `on_interim_head`, each as it came and
/// in order — the `100 Continue` an upload waits for, then a `103 Early
/// Hints` with its field — before the final response's status; the final
/// head alone to `on_response_head`, once.
#[test]
fn interim_heads_are_told_before_the_final_one_which_alone_is_the_responses() {
    let server = TestServer::start(Behaviour::continue_and_early_hints(|body| {
        response(200, &[("X-Ev", "1")], body)
    }));
    let (client, recorder) = recorded_client();
    let response = client
        .put(server.url("/"))
        .body("up")
        .expect_continue(true)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "up");
    let told = recorder.heads();
    assert_eq!(told.len(), 4, "{told:#?}");
    assert_eq!(told[0], "interim HTTP/1.1 100 Continue []");
    assert_eq!(
        told[1],
        r#"interim HTTP/1.1 103 Early Hints ["link: </s.css>"]"#
    );
    assert_eq!(told[2], "status 200");
    assert!(
        told[3].starts_with("final HTTP/1.1 200 OK [") && told[3].contains("x-ev: 1"),
        "{told:#?}"
    );
    client.close();
}

/// Over HTTP/2 too: a `103 Early Hints` before the final HEADERS is told
/// to `on_interim_head`, with its field (and, HTTP/2 having none, no
/// reason phrase), before the status.
#[test]
fn interim_heads_are_told_over_http2_too() {
    let server = h2_server::H2Server::start(|mut stream| async move {
        let hints = http::Response::builder()
            .status(103)
            .header("link", "</s.css>")
            .body(())
            .unwrap();
        if stream.respond.send_informational(hints).is_ok() {
            h2_server::answer(stream, 200, b"ok").await;
        }
    });
    let recorder = Recorder::new();
    let client = Client::builder()
        .http2_prior_knowledge()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.bytes().wait().unwrap(), "ok");
    assert_eq!(
        recorder.heads(),
        [
            r#"interim HTTP/2.0 103  ["link: </s.css>"]"#,
            "status 200",
            "final HTTP/2.0 200  []",
        ]
    );
    client.close();
}

#[test]
fn a_failure_is_reported_once_and_nothing_completes() {
    let server = TestServer::start(Behaviour::SendThenClose(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ntruncated".to_vec(),
    ));
    let (client, recorder) = recorded_client();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(
        matches!(error, tickless::Error::Protocol { .. }),
        "{error:?}"
    );
    let events = recorder.events();
    let failed: Vec<_> = events
        .iter()
        .filter(|(e, _)| matches!(e, Event::Failed(..)))
        .collect();
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert!(!events
        .iter()
        .any(|(e, _)| matches!(e, Event::Completed(_) | Event::ConnectionOffered(_))));
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_redirect_whose_next_hop_is_refused_is_not_told_as_followed() {
    // A host the URL parser takes and TLS does not: the next hop is
    // refused before it is an exchange.
    let server =
        TestServer::respond(|_| response(302, &[("Location", "https://-bad.example/")], b""));
    let (client, recorder) = recorded_client();
    let error = client.get(server.url("/go")).send().wait().unwrap_err();
    assert!(
        matches!(
            error,
            tickless::Error::Redirect {
                reason: tickless::RedirectError::InvalidHop(tickless::InvalidRequest::ServerName(
                    _
                )),
                ..
            }
        ),
        "{error:?}"
    );
    assert_settles(&client, WAIT);
    client.close();
    // `on_redirect` says the request goes on, in a new exchange whose
    // events follow: none would. What was told is the hop that answered.
    let events = recorder.events();
    assert!(
        !events.iter().any(|(e, _)| matches!(e, Event::Redirect(..))),
        "a redirect told, and no hop after it: {events:#?}"
    );
    let completed = position(
        &events,
        "completed",
        |e| matches!(e, Event::Completed(s) if *s == 302),
    );
    assert_eq!(completed, events.len() - 1, "{events:#?}");
}

/// The one request `events` tell of failed, and was told nothing after:
/// its status came, then its failure, last — on the loop's thread, which
/// was telling the status when the request ended elsewhere.
fn assert_failure_told_last(events: &[(Event, ThreadId)], timeout: bool) {
    let failed = position(events, "failure", |e| matches!(e, Event::Failed(..)));
    assert!(
        matches!(events[failed].0, Event::Failed(_, is_timeout) if is_timeout == timeout),
        "{events:#?}"
    );
    let status = position(events, "status", |e| matches!(e, Event::Status(_)));
    assert!(status < failed, "{events:#?}");
    assert_eq!(failed, events.len() - 1, "told after its end: {events:#?}");
    assert_eq!(events[failed].1, events[status].1, "{events:#?}");
}

#[test]
fn a_request_cancelled_while_its_status_is_told_hears_nothing_after_its_failure() {
    let server = TestServer::respond(|_| ok("fine"));
    // The client's listener holds the loop in `on_status`; the request's
    // is told each event after it: a check that the exchange has not
    // ended, made once before an event, would tell it the status after the
    // failure.
    let (holding, has_entered, release) = HoldingListener::new(WAIT);
    let client = Client::builder()
        .event_loops(1)
        .listener(holding)
        .build()
        .unwrap();
    let recorder = Recorder::new();
    let future = client
        .get(server.url("/"))
        .listener(recorder.clone())
        .send();
    // The loop is inside `on_status`, its headers still to be told, when
    // the caller cancels on its own thread.
    has_entered.recv_timeout(WAIT).expect("no status came");
    assert!(future.cancel());
    release.send(()).unwrap();
    let error = future.wait().unwrap_err();
    assert!(matches!(error, tickless::Error::Cancelled), "{error:?}");
    // Closed: every thread that could still tell of the exchange is joined.
    client.close();
    assert_failure_told_last(&recorder.events(), false);
}

#[test]
fn a_request_timed_out_while_its_status_is_told_hears_nothing_after_its_failure() {
    let server = TestServer::respond(|_| ok("fine"));
    let clock = tickless::timer::ManualClock::new();
    let recorder = Recorder::new();
    let client = Client::builder()
        .event_loops(1)
        .clock(std::sync::Arc::new(clock.clone()))
        .request_timeout(Duration::from_secs(10))
        .listener(recorder.clone())
        .build()
        .unwrap();
    let (holding, has_entered, release) = HoldingListener::new(WAIT);
    let future = client.get(server.url("/")).listener(holding).send();
    // The loop is inside `on_status` when the request timeout fires, on
    // this thread (a manual clock's wheel fires on the thread advancing it).
    has_entered.recv_timeout(WAIT).expect("no status came");
    clock.advance(Duration::from_secs(11));
    release.send(()).unwrap();
    let error = future.wait().unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    client.close();
    assert_failure_told_last(&recorder.events(), true);
}

/// A response the client fails for its coding while the rest of its body
/// is still coming — a body that does not decode, or that inflates past
/// `max_body_bytes`, or a response refused for stacking more codings than
/// are decoded: its exchange is told failed with that error, the one the
/// caller has (as a body past the limit on the wire is told), not as a
/// request cancelled.
#[test]
fn a_response_failed_for_its_coding_is_told_failed_with_the_callers_error() {
    use std::io::Write as _;
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    bomb.write_all(&vec![0; 8 << 20]).unwrap();
    let bomb = bomb.finish().unwrap();
    let cases = [
        ("gzip", vec![b'z'; 100_000]),
        ("gzip", bomb),
        ("gzip, gzip, gzip, gzip, gzip", vec![b'z'; 100]),
    ];
    for (coding, body) in cases {
        // Far less than it declares: the rest never comes.
        let mut sent = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\n\r\n",
            body.len() + 100_000
        )
        .into_bytes();
        sent.extend_from_slice(&body);
        let server = TestServer::start(Behaviour::SendThenStall(sent));
        let recorder = Recorder::new();
        let client = Client::builder()
            .max_body_bytes(1 << 20)
            .listener(recorder.clone())
            .build()
            .unwrap();
        let error = client
            .get(server.url("/"))
            .send()
            .wait()
            .and_then(|response| response.bytes().wait())
            .unwrap_err();
        assert!(a_coding_failure(&error), "{error:?}");
        assert_settles(&client, WAIT);
        // Told on the loop, a moment after the exchange left the count of
        // those in flight.
        assert!(
            eventually(WAIT, || !recorder.failures().is_empty()),
            "{:#?}",
            recorder.events()
        );
        let failures = recorder.failures();
        assert_eq!(failures, [error.to_string()]);
        client.close();
    }
}

/// A response the client fails for its coding after all of it has come —
/// a gzip body whose trailer does not check, one with bytes past its end,
/// one that is no gzip at all, one that inflates past `max_body_bytes`,
/// or a response that stacks more codings than are decoded: its exchange
/// is told failed with the caller's error, never completed. One whose body
/// is read to its decoded end, or let go unread, is told completed.
#[test]
fn a_response_failed_for_its_coding_after_it_came_whole_is_told_failed() {
    let good = gzip(b"hello");
    let mut bad_crc = good.clone();
    let crc_at = bad_crc.len() - 8;
    bad_crc[crc_at] ^= 0xff;
    let trailing = [&good[..], b"garbage"].concat();
    let bomb = gzip(&vec![0; 8 << 20]);
    let cases = [
        ("gzip", bad_crc),
        ("gzip", trailing),
        ("gzip", bomb),
        ("gzip, gzip, gzip, gzip, gzip", vec![b'z'; 100]),
        ("gzip", vec![b'z'; 3000]),
    ];
    for (coding, body) in cases {
        let sent = [
            format!(
                "HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
            &body,
        ]
        .concat();
        let server = TestServer::start(Behaviour::SendThenStall(sent));
        let recorder = Recorder::new();
        let client = Client::builder()
            .max_body_bytes(1 << 20)
            .listener(recorder.clone())
            .build()
            .unwrap();
        let future = client.get(server.url("/")).send();
        // All of it has come, and the exchange has ended, before the body
        // is decoded. (Settled — out of the registry — a moment before its
        // end is told on its loop: the failure may be told there, after.)
        assert_settles(&client, WAIT);
        let error = future
            .wait()
            .and_then(|response| response.bytes().wait())
            .unwrap_err();
        assert!(a_coding_failure(&error), "{error:?}");
        eventually(WAIT, || !recorder.failures().is_empty());
        assert_eq!(recorder.failures(), [error.to_string()], "{coding}");
        assert_eq!(recorder.completions(), 0, "{coding}");
        client.close();
    }
    // Read to its decoded end, or let go unread: completed.
    let server =
        TestServer::respond(move |_| response(200, &[("Content-Encoding", "gzip")], &good));
    let recorder = Recorder::new();
    let client = Client::builder()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut read = String::new();
    std::io::Read::read_to_string(response.body_mut(), &mut read).unwrap();
    assert_eq!(read, "hello");
    // At its decoded end, the response still held.
    assert_eq!(recorder.completions(), 1);
    drop(response);
    // Let go unread: told as the body's end comes — on the loop, after the
    // drop, if the head was taken before the rest of it had come.
    drop(client.get(server.url("/")).send().wait().unwrap());
    assert!(
        eventually(WAIT, || recorder.completions() == 2),
        "{:#?}",
        recorder.events()
    );
    // Its head never taken: the exchange, once ended, goes with the future
    // — or after, with the loop's last hold of it: settled (out of the
    // registry) is a moment before its end is told there.
    let future = client.get(server.url("/")).send();
    assert_settles(&client, WAIT);
    drop(future);
    assert!(
        eventually(WAIT, || recorder.completions() == 3),
        "{:#?}",
        recorder.events()
    );
    assert!(recorder.failures().is_empty());
    client.close();
}

/// Over HTTP/2 too: a body that does not decode, its stream still open,
/// is told failed with the caller's error, not as a request cancelled.
#[test]
fn a_body_failed_as_it_is_decoded_over_http2_is_told_failed_with_the_callers_error() {
    let server = h2_server::H2Server::start(|mut stream| async move {
        let head = http::Response::builder()
            .status(200)
            .header("content-encoding", "gzip")
            .body(())
            .unwrap();
        if let Ok(mut body) = stream.respond.send_response(head, false) {
            let _ = body.send_data(vec![b'z'; 20_000].into(), false);
            // The rest never comes.
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    let recorder = Recorder::new();
    let client = Client::builder()
        .http2_prior_knowledge()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let error = client
        .get(server.url("/"))
        .send()
        .wait()
        .and_then(|response| response.bytes().wait())
        .unwrap_err();
    assert!(matches!(error, tickless::Error::Decode { .. }), "{error:?}");
    // Ended (the connection stays open, its own timer armed).
    assert!(eventually(WAIT, || client.stats().in_flight == 0));
    // Told on the loop, a moment after the exchange left the count of
    // those in flight.
    assert!(
        eventually(WAIT, || !recorder.failures().is_empty()),
        "{:#?}",
        recorder.events()
    );
    let failures = recorder.failures();
    assert_eq!(failures, [error.to_string()]);
    client.close();
}

/// A GET of `/read` told to a recorder, answered and with some of its body
/// buffered; then the loop held by a GET of `/hold` (in its `on_status`):
/// the recorder, the response, the held request and the sender that lets
/// its loop go.
fn read_then_hold_its_loop(
    client: &Client,
    server: &TestServer,
) -> (
    Arc<Recorder>,
    tickless::Response,
    tickless::ResponseFuture,
    std::sync::mpsc::Sender<()>,
) {
    let recorder = Recorder::new();
    let response = client
        .get(server.url("/read"))
        .listener(recorder.clone())
        .send()
        .wait()
        .unwrap();
    assert!(eventually(WAIT, || client.stats().buffered_body_bytes > 0));
    let (holding, has_entered, release) = HoldingListener::new(WAIT);
    let held = client.get(server.url("/hold")).listener(holding).send();
    has_entered.recv_timeout(WAIT).expect("the loop held");
    (recorder, response, held, release)
}

/// A body its reader failed (it does not decode) or let go, whose
/// connection has not yet stopped reading it when a timeout ends its
/// exchange: the listener is told the reader's end, the first — the
/// caller's decode error, or a cancel for a body dropped — not the timeout
/// that came after. The connection's loop is held (in another request's
/// `on_status`) from before the reader's end until after the timeout.
#[test]
fn a_body_its_reader_ended_is_told_ended_so_even_if_a_timeout_comes_first() {
    // Far less than it declares, and no gzip: the rest never comes.
    let mut sent =
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 200000\r\n\r\n".to_vec();
    sent.extend_from_slice(&[b'z'; 1000]);
    for decode in [true, false] {
        let server = TestServer::start(Behaviour::SendThenStall(sent.clone()));
        let clock = tickless::timer::ManualClock::new();
        let client = Client::builder()
            .event_loops(1)
            .clock(Arc::new(clock.clone()))
            .request_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let (recorder, mut response, held, release) = read_then_hold_its_loop(&client, &server);
        let expected = if decode {
            let error = response.chunk().wait().unwrap_err();
            assert!(matches!(error, tickless::Error::Decode { .. }), "{error:?}");
            error.to_string()
        } else {
            drop(response);
            tickless::Error::Cancelled.to_string()
        };
        // The timeout fires on this thread, the loop still held.
        clock.advance(Duration::from_secs(11));
        assert_eq!(recorder.failures(), [expected], "decode: {decode}");
        release.send(()).unwrap();
        drop(held);
        client.close();
        assert_eq!(recorder.failures().len(), 1, "{:#?}", recorder.events());
    }
}

/// A body its reader let go, whose connection fails (the server closes it
/// mid-body) before its loop has seen the reader's notice: the listener is
/// told the reader's end, the first — a cancel — not the connection's
/// failure that came after. The connection's loop is held (in another
/// request's `on_status`) from before the drop until after the close.
#[test]
fn a_body_its_reader_let_go_is_told_cancelled_even_if_its_connection_fails_first() {
    // Far less than it declares: the rest never comes.
    let mut sent = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n".to_vec();
    sent.extend_from_slice(&[b'z'; 1000]);
    let (close, to_close) = std::sync::mpsc::channel::<()>();
    let (closed, has_closed) = std::sync::mpsc::channel::<()>();
    let to_close = Mutex::new(to_close);
    let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
        use std::io::Write;
        if read_head(&mut stream).is_none() || stream.write_all(&sent).is_err() {
            return;
        }
        if index == 0 {
            let _ = to_close.lock().unwrap().recv_timeout(WAIT);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            let _ = closed.send(());
        } else {
            drain(&mut stream);
        }
    }));
    let client = Client::builder().event_loops(1).build().unwrap();
    let (recorder, response, held, release) = read_then_hold_its_loop(&client, &server);
    drop(response);
    close.send(()).unwrap();
    has_closed.recv_timeout(WAIT).expect("the server closed");
    release.send(()).unwrap();
    assert!(eventually(WAIT, || !recorder.failures().is_empty()));
    assert_eq!(
        recorder.failures(),
        [tickless::Error::Cancelled.to_string()],
        "{:#?}",
        recorder.events()
    );
    drop(held);
    client.close();
}

/// Whether `error` fails a response for its coding: its body does not
/// decode, decodes past `max_body_bytes`, or stacks too many codings.
fn a_coding_failure(error: &tickless::Error) -> bool {
    matches!(
        error,
        tickless::Error::Decode { .. }
            | tickless::Error::BodyTooLarge { .. }
            | tickless::Error::TooManyCodings { .. }
    )
}

/// A status retry follows the end of the attempt it retries: an encoded
/// `503` whose body had all come before the policy looked (its completion
/// held for a reader) is told completed, then the retry — as one not
/// encoded is.
#[test]
fn a_status_retry_of_an_encoded_response_that_came_whole_follows_its_completion() {
    let busy = gzip(b"busy");
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = {
        let answered = answered.clone();
        TestServer::respond(move |_| {
            match answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => response(503, &[("Content-Encoding", "gzip")], &busy),
                _ => ok("fine"),
            }
        })
    };
    let recorder = Recorder::new();
    let client = Client::builder()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let policy = tickless::retry::Policy::attempts(2)
        .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
        .backoff(Duration::ZERO, Duration::ZERO);
    let future = client.get(server.url("/")).retry(policy).send();
    // The 503 has come whole, and its exchange ended, before the policy
    // sees it.
    assert_settles(&client, WAIT);
    assert_eq!(future.wait().unwrap().text().wait().unwrap(), "fine");
    client.close();
    let events: Vec<Event> = recorder.events().into_iter().map(|(e, _)| e).collect();
    let completed_503 = events
        .iter()
        .position(|e| matches!(e, Event::Completed(status) if status.as_u16() == 503));
    let retry = events.iter().position(|e| matches!(e, Event::Retry(..)));
    assert!(
        matches!((completed_503, retry), (Some(c), Some(r)) if c < r),
        "{events:#?}"
    );
}

/// A response that is not to be decoded — an answer to HEAD, a 304, or
/// any with decompression off — is told completed as it ends, on its loop,
/// whatever its `Content-Encoding`: its completion waits for no reader,
/// not even for its head to be taken.
#[test]
fn a_response_not_to_be_decoded_is_told_completed_before_its_head_is_taken() {
    let body = gzip(b"held");
    let server = TestServer::respond(move |request| {
        let gzipped = [("Content-Encoding", "gzip")];
        match request.target.as_str() {
            "/not-modified" => response(304, &gzipped, b""),
            _ => response(200, &gzipped, &body),
        }
    });
    let recorder = Recorder::new();
    let client = Client::builder()
        .listener(recorder.clone())
        .build()
        .unwrap();
    let futures = [
        client.head(server.url("/")).send(),
        client.get(server.url("/not-modified")).send(),
        client.get(server.url("/")).decompress(false).send(),
    ];
    // Each has ended on its loop; no head is taken yet. (Told there a
    // moment after it left the count of those in flight.)
    assert_settles(&client, WAIT);
    assert!(
        eventually(WAIT, || recorder.completions() == 3),
        "{:#?}",
        recorder.events()
    );
    assert_eq!(recorder.completions(), 3, "{:#?}", recorder.events());
    for future in futures {
        drop(future.wait().unwrap());
    }
    assert_eq!(recorder.completions(), 3, "{:#?}", recorder.events());
    client.close();
}
