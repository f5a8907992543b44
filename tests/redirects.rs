//! Redirects, hop by hop against loopback servers: which statuses are
//! followed and how each changes the method and the body, how `Location`
//! resolves, which headers cross an origin, downgrades, limits and loops,
//! the one request deadline over every hop (on a `ManualClock`, in both
//! timeout modes), streamed bodies, and what the caller and the listener
//! see.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::client_kit::{assert_settles, Event, Recorder};
use support::tls::{certs, TlsServer};
use support::*;
use tickless::redirect::Policy;
use tickless::timer::ManualClock;
use tickless::{Client, Error, Proxy, RedirectError, Upload};

fn client() -> Client {
    Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A redirect to `location` with `status`.
fn redirect(status: u16, location: &str) -> Vec<u8> {
    response(status, &[("Location", location)], b"")
}

/// A server that redirects `/from` to `/to` with `status` and answers
/// `/to` with the method, the body and the `Content-Type` it received.
fn redirecting(status: u16) -> TestServer {
    TestServer::respond(move |request| match request.target.as_str() {
        "/from" => redirect(status, "/to"),
        _ => ok(&format!(
            "{} {} [{}]",
            request.method,
            String::from_utf8_lossy(&request.body),
            request.header("content-type").unwrap_or("-"),
        )),
    })
}

fn post_with_body(client: &Client, url: String) -> String {
    let response = client
        .post(url)
        .header("content-type", "text/plain")
        .body("payload")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().wait().unwrap()
}

#[test]
fn each_redirect_status_changes_the_method_as_the_rfc_and_the_browsers_do() {
    let client = client();
    for (status, expected) in [
        (301, "GET  [-]"),
        (302, "GET  [-]"),
        (303, "GET  [-]"),
        (307, "POST payload [text/plain]"),
        (308, "POST payload [text/plain]"),
    ] {
        let server = redirecting(status);
        assert_eq!(
            post_with_body(&client, server.url("/from")),
            expected,
            "{status}"
        );
        // The body and its headers went only where they were meant to.
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].body, b"payload");
        if !expected.starts_with("POST") {
            assert!(requests[1]
                .header("content-length")
                .is_none_or(|l| l == "0"));
            assert!(requests[1].body.is_empty());
        }
    }
    client.close();
}

/// A body dropped on the way takes every header that described it (RFC
/// 9110 §15.4: "content-specific header fields, including (but not
/// limited to) Content-Encoding, Content-Language, Content-Location,
/// Content-Type, Content-Length, Digest, and Last-Modified"; RFC 9530's
/// `Content-Digest` and `Repr-Digest` replace `Digest`): a GET with the
/// digest of a body it does not have is refused by a server that checks
/// it. A body that goes on keeps them all.
#[test]
fn a_body_dropped_on_the_way_takes_all_its_headers_with_it() {
    let described_by = [
        ("content-type", "text/plain"),
        ("content-encoding", "identity"),
        ("content-language", "en"),
        ("content-location", "/drafts/1"),
        (
            "digest",
            "sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=",
        ),
        (
            "content-digest",
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
        ),
        (
            "repr-digest",
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
        ),
        ("last-modified", "Sat, 05 Dec 2026 18:00:00 GMT"),
    ];
    let client = client();
    for status in [303, 307] {
        let server = redirecting(status);
        let mut request = client.post(server.url("/from")).body("payload");
        for (name, value) in described_by {
            request = request.header(name, value);
        }
        request.send().wait().unwrap();
        let followed = &server.requests()[1];
        for (name, value) in described_by {
            let kept = (status == 307).then_some(value);
            assert_eq!(followed.header(name), kept, "{status} {name}");
        }
    }
    client.close();
}

/// A body in memory too large to share the head's buffer (sent from its
/// own bytes after the head, as one waiting for `100 Continue` is) goes
/// again whole after a 307 or a 308, framed by `Content-Length` or chunked.
#[test]
fn a_307_or_308_sends_a_large_body_in_memory_again_whole() {
    let body: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    let client = client();
    for status in [307, 308] {
        for chunked in [false, true] {
            let server = redirecting(status);
            let mut request = client.post(server.url("/from")).body(body.clone());
            if chunked {
                request = request.header("transfer-encoding", "chunked");
            }
            let response = request.send().wait().unwrap();
            assert_eq!(response.status(), 200, "{status} chunked: {chunked}");
            let requests = server.requests();
            assert_eq!(requests.len(), 2, "{status} chunked: {chunked}");
            for request in &requests {
                assert!(request.body == body, "{status} chunked: {chunked}");
                assert_eq!(request.header("transfer-encoding").is_some(), chunked);
            }
        }
    }
    client.close();
}

#[test]
fn put_keeps_its_method_on_301_and_302_and_head_stays_head_on_303() {
    let client = client();
    for status in [301, 302, 307, 308] {
        let server = redirecting(status);
        let response = client
            .put(server.url("/from"))
            .body("data")
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.text().wait().unwrap(), "PUT data [-]", "{status}");
    }
    let server = redirecting(303);
    let response = client.head(server.url("/from")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests()[1].method, "HEAD");
    client.close();
}

#[test]
fn other_statuses_and_unusable_locations_are_the_response() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/300" => redirect(300, "/elsewhere"),
        "/304" => response(304, &[("Location", "/elsewhere")], b""),
        "/no-location" => response(302, &[], b"moved, but where?"),
        "/ftp" => redirect(301, "ftp://127.0.0.1/file"),
        "/garbage" => redirect(302, "http://[::1"),
        // An empty or blank `Location` says no more than none (curl takes
        // it so): not a redirect to the same URL.
        "/empty-location" => redirect(302, ""),
        "/blank-location" => redirect(301, "  "),
        _ => ok("followed"),
    });
    let client = client();
    for (path, status) in [
        ("/300", 300),
        ("/304", 304),
        ("/no-location", 302),
        ("/ftp", 301),
        ("/garbage", 302),
        ("/empty-location", 302),
        ("/blank-location", 301),
    ] {
        let response = client.get(server.url(path)).send().wait();
        let response = response.unwrap_or_else(|e| panic!("{path}: not the response: {e:?}"));
        assert_eq!(response.status(), status, "{path}");
        assert_eq!(response.url().path(), path);
    }
    assert_eq!(server.requests().len(), 7, "nothing was followed");
    client.close();
}

#[test]
fn locations_resolve_against_the_url_that_answered() {
    let other = TestServer::respond(|request| ok(&format!("other {}", request.target)));
    let other_authority = other.authority();
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/a/b/start" => redirect(302, "../c/./d?x=1#fragment"),
        "/a/c/d?x=1" => redirect(302, "?y=2"),
        "/a/c/d?y=2" => redirect(302, "e%20f/g h"),
        "/a/c/e%20f/g%20h" => redirect(302, &format!("//{other_authority}/scheme-relative")),
        target => ok(&format!("unexpected {target}")),
    });
    let client = client();
    let response = client.get(server.url("/a/b/start")).send().wait().unwrap();
    assert_eq!(response.url().to_string(), other.url("/scheme-relative"));
    assert_eq!(response.text().wait().unwrap(), "other /scheme-relative");
    let targets: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(
        targets,
        ["/a/b/start", "/a/c/d?x=1", "/a/c/d?y=2", "/a/c/e%20f/g%20h"],
        "the fragment is never sent, spaces are percent-encoded"
    );
    client.close();
}

#[test]
fn credentials_stay_within_one_origin() {
    let elsewhere = TestServer::respond(|_| ok("elsewhere"));
    let elsewhere_url = elsewhere.url("/landing");
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/start" => redirect(302, "/same-origin"),
        "/same-origin" => redirect(307, &elsewhere_url),
        _ => ok("?"),
    });
    let client = client();
    let response = client
        .get(server.url("/start"))
        .basic_auth("user", Some("secret"))
        .header("cookie", "session=1")
        .header("x-custom", "kept")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "elsewhere");
    for request in server.requests() {
        assert!(
            request.header("authorization").is_some(),
            "{}",
            request.target
        );
        assert_eq!(request.header("cookie"), Some("session=1"));
    }
    let landed = &elsewhere.requests()[0];
    assert_eq!(landed.header("authorization"), None);
    assert_eq!(landed.header("cookie"), None);
    assert_eq!(landed.header("x-custom"), Some("kept"));
    // Host names the origin that is asked, not the first one.
    assert_eq!(landed.header("host"), Some(elsewhere.authority().as_str()));
    client.close();
}

#[test]
fn a_port_change_is_an_origin_change() {
    // Same host, another port: credentials are dropped (RFC 6454 origin).
    let second = TestServer::respond(|_| ok("second"));
    let second_url = second.url("/");
    let first = TestServer::respond(move |_| redirect(302, &second_url));
    let client = client();
    client
        .get(first.url("/"))
        .bearer_auth("token")
        .send()
        .wait()
        .unwrap();
    assert!(first.requests()[0].header("authorization").is_some());
    assert_eq!(second.requests()[0].header("authorization"), None);
    client.close();
}

#[test]
fn https_to_http_is_refused_unless_the_policy_allows_it() {
    let plain = TestServer::respond(|_| ok("plain"));
    let plain_url = plain.url("/landing");
    let secure = TlsServer::respond(&certs().valid, move |_| redirect(302, &plain_url));
    let client = |policy: Policy| {
        Client::builder()
            .event_loops(1)
            .add_root_certificate(&certs().ca_pem)
            .redirect(policy)
            .build()
            .unwrap()
    };
    let refusing = client(Policy::limited(5));
    let error = refusing
        .get(secure.url("/start"))
        .send()
        .wait()
        .unwrap_err();
    match &error {
        Error::Redirect { chain, reason } => {
            assert!(matches!(reason, RedirectError::Downgrade), "{reason:?}");
            assert_eq!(chain.len(), 2);
            assert_eq!(chain[1].to_string(), plain.url("/landing"));
        }
        other => panic!("expected a refused downgrade, got {other:?}"),
    }
    assert!(plain.requests().is_empty());
    refusing.close();

    let allowing = client(Policy::limited(5).allow_https_to_http(true));
    let response = allowing.get(secure.url("/start")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "plain");
    allowing.close();
}

/// `/n` redirects to `/n+1`, forever.
fn endless_chain() -> TestServer {
    TestServer::respond(|request| {
        let n: usize = request.target[1..].parse().unwrap_or(0);
        redirect(302, &format!("/{}", n + 1))
    })
}

#[test]
fn the_limit_counts_redirects_and_none_returns_the_first() {
    let server = endless_chain();
    let client = Client::builder()
        .event_loops(1)
        .redirect(Policy::limited(3))
        .build()
        .unwrap();
    let error = client.get(server.url("/0")).send().wait().unwrap_err();
    match &error {
        Error::Redirect { chain, reason } => {
            assert!(matches!(reason, RedirectError::TooMany { limit: 3 }));
            let paths: Vec<&str> = chain.iter().map(|u| u.path()).collect();
            assert_eq!(paths, ["/0", "/1", "/2", "/3", "/4"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 4, "three redirects followed");

    // Per request, over the client's policy.
    let response = client
        .get(server.url("/0"))
        .redirect(Policy::none())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 302);
    assert_eq!(response.headers()["location"], "/1");
    assert_eq!(response.url().path(), "/0");
    client.close();
}

#[test]
fn the_default_follows_ten() {
    let server = endless_chain();
    let client = client();
    let error = client.get(server.url("/0")).send().wait().unwrap_err();
    assert!(
        matches!(
            error,
            Error::Redirect {
                reason: RedirectError::TooMany { limit: 10 },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 11);
    client.close();
}

#[test]
fn a_loop_is_found_but_a_login_that_sets_a_cookie_is_not_one() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/ping" => redirect(302, "/pong"),
        "/pong" => redirect(302, "/ping"),
        // Sets a cookie and redirects to itself; with the cookie it answers.
        "/login" if request.header("cookie") == Some("token=1") => ok("welcome"),
        "/login" => response(
            302,
            &[("Location", "/login"), ("Set-Cookie", "token=1")],
            b"",
        ),
        _ => ok("?"),
    });
    let client = client();
    let error = client.get(server.url("/ping")).send().wait().unwrap_err();
    match &error {
        Error::Redirect { chain, reason } => {
            assert!(matches!(reason, RedirectError::Loop), "{reason:?}");
            let paths: Vec<&str> = chain.iter().map(|u| u.path()).collect();
            assert_eq!(paths, ["/ping", "/pong", "/ping"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 2, "the loop is not walked again");

    // Without a cookie store the login is a loop too: nothing changes.
    let error = client.get(server.url("/login")).send().wait().unwrap_err();
    assert!(matches!(
        error,
        Error::Redirect {
            reason: RedirectError::Loop,
            ..
        }
    ));
    client.close();
    // With one, the second visit carries the cookie the first one set.
    let client = Client::builder()
        .event_loops(1)
        .cookie_store(true)
        .build()
        .unwrap();
    let response = client.get(server.url("/login")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "welcome");
    client.close();
}

/// A loop through URLs spelled differently — the host's case, the default
/// port written out — is the same loop, found at the first hop that comes
/// back. The test server is the client's HTTP proxy, so that the URLs can
/// have any host and port 80; it answers every request itself.
#[test]
fn a_loop_spelled_with_another_case_or_the_default_port_is_found_at_once() {
    let server = TestServer::respond(|request| {
        // Absolute-form targets, as sent to a proxy.
        if request.target.ends_with("/self") {
            redirect(302, "http://loop.test/self")
        } else if request.target.ends_with("/ping") {
            redirect(302, "http://Loop.Test/pong")
        } else {
            redirect(302, "http://loop.TEST:80/ping")
        }
    });
    let client = Client::builder()
        .event_loops(1)
        .no_proxy()
        .proxy(Proxy::http(&format!("http://{}", server.addr())).unwrap())
        .build()
        .unwrap();
    let loop_after = |url: &str| match client.get(url).send().wait() {
        Err(Error::Redirect {
            chain,
            reason: RedirectError::Loop,
        }) => chain.iter().map(ToString::to_string).collect::<Vec<_>>(),
        other => panic!("{url}: {other:?}"),
    };

    // Back to the caller's own URL, as typed: the first redirect is the loop.
    let chain = loop_after("http://LOOP.test:80/self");
    assert_eq!(server.requests().len(), 1, "{chain:?}");
    assert_eq!(chain, ["http://LOOP.test:80/self", "http://loop.test/self"]);

    // Through another URL and back: two requests, not a third.
    let chain = loop_after("http://LOOP.test:80/ping");
    assert_eq!(server.requests().len(), 1 + 2, "{chain:?}");
    assert_eq!(
        chain,
        [
            "http://LOOP.test:80/ping",
            "http://loop.test/pong",
            "http://loop.test/ping"
        ]
    );
    client.close();
}

#[test]
fn a_custom_policy_sees_each_attempt_and_may_stop_or_fail() {
    let server = endless_chain();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let noted = seen.clone();
    let policy = Policy::custom(move |attempt| {
        noted.lock().unwrap().push((
            attempt.status().as_u16(),
            attempt.url().path().to_owned(),
            attempt.previous().len(),
        ));
        match attempt.url().path() {
            "/2" => attempt.stop(),
            _ => attempt.follow(),
        }
    });
    let client = client();
    let response = client
        .get(server.url("/0"))
        .redirect(policy)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 302);
    assert_eq!(response.url().path(), "/1");
    assert_eq!(
        *seen.lock().unwrap(),
        [(302, "/1".to_owned(), 1), (302, "/2".to_owned(), 2)]
    );

    let failing = Policy::custom(|attempt| attempt.error("not there"));
    let error = client
        .get(server.url("/0"))
        .redirect(failing)
        .send()
        .wait()
        .unwrap_err();
    match error {
        Error::Redirect {
            reason: RedirectError::Policy(inner),
            ..
        } => assert_eq!(inner.to_string(), "not there"),
        other => panic!("{other:?}"),
    }
    client.close();
}

/// A cancel that ended a redirect's exchange — its head come, its body
/// still on the way — ends the request, as `cancel` says: the future
/// resolves with `Error::Cancelled`, and the redirect is not followed.
#[test]
fn a_cancel_after_a_redirect_came_follows_it_nowhere() {
    let server = TestServer::start(Behaviour::per_connection(|index| {
        if index > 0 {
            return Behaviour::respond(|_| ok("followed"));
        }
        // Part of its body: the exchange goes on until it all comes.
        Behaviour::SendThenStall(
            b"HTTP/1.1 302 Found\r\nLocation: /to\r\nContent-Length: 100\r\n\r\nmoved ".to_vec(),
        )
    }));
    let client = client();
    let future = client.get(server.url("/from")).send();
    // The redirect's head is there, not taken.
    assert!(
        eventually(Duration::from_secs(10), || future.is_done()),
        "no redirect came"
    );
    assert!(future.cancel(), "the redirect's exchange had not ended");
    match future.wait() {
        Err(Error::Cancelled) => {}
        other => panic!(
            "{:?} after a cancel",
            other.map(|response| response.status())
        ),
    }
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

#[test]
fn a_streamed_body_cannot_be_replayed_so_a_307_is_the_response() {
    let server = redirecting(307);
    let client = client();
    let body = std::io::Cursor::new(b"streamed".to_vec());
    let response = client
        .post(server.url("/from"))
        .body(Upload::from_reader(body, Some(8)))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 307);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].body, b"streamed");
    // A 303 drops the body anyway, so it is followed.
    let server = redirecting(303);
    let body = std::io::Cursor::new(b"streamed".to_vec());
    let response = client
        .post(server.url("/from"))
        .body(Upload::from_reader(body, None))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "GET  [-]");
    client.close();
}

/// A file's body (`Upload::from_file`) can be read again from where it
/// began, as curl rewinds one (`-T FILE`): a 307 or a 308 sends it again
/// whole, from the position the file was given at — not a body that went
/// once and a 307 for the response.
#[test]
fn a_307_or_308_sends_a_files_body_again_from_where_it_began() {
    use std::io::{Seek, SeekFrom};
    let body: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    let (_dir, path) =
        support::real::temp_file("redirect-file", &[&b"skipped|"[..], &body].concat());
    let client = client();
    for status in [307, 308] {
        let server = redirecting(status);
        let mut file = std::fs::File::open(&path).unwrap();
        file.seek(SeekFrom::Start(8)).unwrap();
        let response = client
            .put(server.url("/from"))
            .body(Upload::from_file(file).unwrap())
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200, "{status}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{status}");
        for request in &requests {
            assert_eq!(request.method, "PUT", "{status}");
            assert!(
                request.body == body,
                "{status}: {} bytes",
                request.body.len()
            );
            assert_eq!(request.header("content-length"), Some("300000"));
        }
    }
    client.close();
}

#[test]
fn the_response_and_the_listener_say_where_the_chain_went() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/one" => response(301, &[("Location", "/two")], b"skipped body"),
        "/two" => redirect(308, "/three"),
        _ => ok("three"),
    });
    let recorder = Recorder::new();
    let client = client();
    let response = client
        .get(server.url("/one"))
        .listener(recorder.clone())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.url().to_string(), server.url("/three"));
    assert_eq!(response.text().wait().unwrap(), "three");
    let redirects: Vec<(u16, String, String)> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::Redirect(status, from, to) => Some((status.as_u16(), from, to)),
            _ => None,
        })
        .collect();
    assert_eq!(
        redirects,
        [
            (301, server.url("/one"), server.url("/two")),
            (308, server.url("/two"), server.url("/three")),
        ]
    );
    // The redirect's body was read off, so one connection served the chain.
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// The request deadline is fixed when the first hop is sent and holds
/// across every hop. Each hop's server advances the manual clock by 600 ms
/// before it answers, so the second hop starts at 0.6 s: a deadline fixed
/// per hop (1.6 s) would let the 1.2 s of the second hop's answer through,
/// the request's own (1 s) does not.
fn one_deadline_over_every_hop(event_loop_timeouts: bool) {
    let clock = ManualClock::new();
    let server_clock = clock.clone();
    let slow_second_answers = Arc::new(AtomicUsize::new(0));
    let answered = slow_second_answers.clone();
    let server = TestServer::respond(move |request| {
        server_clock.advance(Duration::from_millis(600));
        match request.target.as_str() {
            "/first" => redirect(302, "/second"),
            _ => {
                // Real time for the client's timer to fire first.
                thread::sleep(Duration::from_secs(2));
                answered.fetch_add(1, Ordering::SeqCst);
                ok("too late")
            }
        }
    });
    let client = Client::builder()
        .clock(Arc::new(clock.clone()))
        .event_loops(1)
        .use_event_loop_timeouts(event_loop_timeouts)
        .request_timeout(Duration::from_secs(1))
        .read_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let started = Instant::now();
    let error = client.get(server.url("/first")).send().wait().unwrap_err();
    assert!(
        matches!(error, Error::RequestTimeout(_)),
        "mode {event_loop_timeouts}: {error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "not at the deadline"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(slow_second_answers.load(Ordering::SeqCst), 0);
    assert!(eventually(Duration::from_secs(10), || client
        .stats()
        .armed_timers()
        == 0));
    client.close();
}

#[test]
fn one_request_deadline_covers_every_hop_on_the_wheel() {
    one_deadline_over_every_hop(false);
}

#[test]
fn one_request_deadline_covers_every_hop_on_the_loop() {
    one_deadline_over_every_hop(true);
}

/// A redirect not followed whose `Location` carries credentials
/// (`user:password@`) does not put them in the error's message or its
/// `Debug`, which are printed and logged.
#[test]
fn a_stopped_redirects_credentials_are_not_shown() {
    let server = TestServer::respond(|_| {
        response(
            302,
            &[("Location", "http://user:hunter2@127.0.0.1:9/next")],
            b"",
        )
    });
    let client = client();
    let error = client
        .get(server.url("/"))
        .redirect(Policy::limited(0))
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(error, tickless::Error::Redirect { .. }),
        "{error:?}"
    );
    assert!(!chain_text(&error).contains("hunter2"), "{error}");
    assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
    // The target is still named, without its credentials.
    assert!(
        error.to_string().contains("http://127.0.0.1:9/next"),
        "{error}"
    );
    client.close();
}

/// A redirect followed to a `Location` with credentials tells the
/// listener (which the tracing one logs) where it went without them.
#[test]
fn a_followed_redirects_credentials_are_not_told_to_the_listener() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/one" => {
            let host = request.header("host").unwrap_or_default();
            let location = format!("http://user:hunter2@{host}/two");
            response(302, &[("Location", location.as_str())], b"")
        }
        _ => ok("two"),
    });
    let recorder = Recorder::new();
    let client = client();
    let response = client
        .get(server.url("/one"))
        .listener(recorder.clone())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "two");
    let redirects: Vec<String> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::Redirect(_, _, to) => Some(to),
            _ => None,
        })
        .collect();
    assert_eq!(redirects, [server.url("/two")]);
    client.close();
}

/// A redirect not followed because the chain fails (too many, a loop, a
/// downgrade, a custom policy's error) ends the request with an error and
/// no response: nobody will read the redirect's body. Its exchange ends
/// and its connection goes (drained if small, else closed), as for a
/// dropped body — not held until the body, which may never end, arrives.
#[test]
fn a_redirect_the_chain_fails_on_lets_its_connection_go() {
    // A redirect whose body has begun and never ends.
    let stalled = |location: &str| {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 1000000\r\n\r\nmoved"
        );
        TestServer::start(Behaviour::SendThenStall(head.into_bytes()))
    };
    let failing = Policy::custom(|attempt| attempt.error("not there"));
    for (what, location, policy) in [
        ("too many", "/again", Policy::limited(0)),
        ("a loop", "/from", Policy::limited(5)),
        ("custom", "/again", failing),
    ] {
        let server = stalled(location);
        let client = untimed_client();
        let error = client
            .get(server.url("/from"))
            .redirect(policy)
            .send()
            .wait()
            .unwrap_err();
        assert!(matches!(error, Error::Redirect { .. }), "{what}: {error:?}");
        assert!(
            server.wait_for_open(0, Duration::from_secs(10)),
            "{what}: the redirect's connection is still open"
        );
        assert_settles(&client, Duration::from_secs(10));
        client.close();
    }
}

/// A custom policy that panics (on the thread that waits, as it runs
/// there) unwinds through the wait: a caller that survives it — a tokio
/// task's panic is caught, its future dropped — leaves nobody to read the
/// redirect that was being decided on. Its exchange ends and its
/// connection goes, as for a dropped body.
#[test]
fn a_custom_policy_that_panics_lets_the_redirects_connection_go() {
    let server = TestServer::start(Behaviour::SendThenStall(
        b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 1000000\r\n\r\nmoved".to_vec(),
    ));
    let client = untimed_client();
    let url = server.url("/from");
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client
            .get(&url)
            .redirect(Policy::custom(|_| panic!("the policy panics")))
            .send()
            .wait()
    }));
    assert!(caught.is_err(), "the policy's panic reaches the caller");
    assert!(
        server.wait_for_open(0, Duration::from_secs(10)),
        "the redirect's connection is still open"
    );
    assert_settles(&client, Duration::from_secs(10));
    client.close();
}

/// A redirect to a URL that cannot be requested (here a user name with a
/// `:` once decoded, which Basic credentials cannot carry) stops the
/// chain with [`RedirectError::InvalidHop`], listing it: the hops before
/// it were sent and answered — a POST taken, its 303 to the bad URL — so
/// the error is not the [`tickless::Error::InvalidRequest`] of a request
/// refused before anything was sent, which a caller may send again.
#[test]
fn a_redirect_to_a_url_that_cannot_be_requested_stops_the_chain_as_sent() {
    let server = TestServer::respond(|request| {
        let host = request.header("host").unwrap_or_default();
        let location = format!("http://a%3Ab:hunter2@{host}/done");
        response(303, &[("Location", location.as_str())], b"")
    });
    let client = client();
    let error = client
        .post(server.url("/order"))
        .body("one order")
        .send()
        .wait()
        .unwrap_err();
    let tickless::Error::Redirect { chain, reason } = &error else {
        panic!("not the chain's error: {error:?}");
    };
    assert!(
        matches!(
            reason,
            RedirectError::InvalidHop(tickless::InvalidRequest::Userinfo)
        ),
        "{reason:?}"
    );
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(chain[1].to_string(), server.url("/done"));
    assert!(!error.is_unprocessed());
    assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
    assert_eq!(server.requests().len(), 1, "the POST was sent, once");
    client.close();
}

/// A 307 that comes before the server has read a file's body (it answers
/// on the head, as a server moving an upload elsewhere may): the upload
/// stops there, and the file goes whole, from its start, to where the 307
/// points.
#[test]
fn a_307_before_a_files_body_was_read_sends_it_whole_where_it_points() {
    use std::io::{Read, Write};
    let body: Vec<u8> = (0..8_000_000).map(|i| (i % 251) as u8).collect();
    let (_dir, path) = support::real::temp_file("redirect-early", &body);
    let server = TestServer::start(Behaviour::per_connection(|index| match index {
        0 => Behaviour::custom(|mut stream, _| {
            let _ = read_head(&mut stream);
            let moved = response(307, &[("Location", "/to"), ("Connection", "close")], b"");
            stream.write_all(&moved).unwrap();
            // What the client still sends, read and dropped, until it closes.
            let mut sink = [0; 64 * 1024];
            while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        }),
        _ => {
            Behaviour::respond(|request| ok(&format!("{} {}", request.method, request.body.len())))
        }
    }));
    let client = client();
    let file = std::fs::File::open(&path).unwrap();
    let response = client
        .put(server.url("/from"))
        .body(Upload::from_file(file).unwrap())
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "PUT 8000000");
    let requests = server.requests();
    assert!(requests.last().unwrap().body == body);
    client.close();
}

/// A server on which `/from` answers a 302 to `/to` with a body of
/// `body_len` bytes — far over the body window and the drain bound — and
/// `/to` answers `done`.
fn redirecting_with_a_large_body(body_len: usize) -> TestServer {
    TestServer::respond(move |request| match request.target.as_str() {
        "/from" => response(302, &[("Location", "/to")], &vec![b'x'; body_len]),
        _ => ok("done"),
    })
}

/// A client allowed one connection per host, whose 10 s request deadline
/// is the failure signal of a hop waiting on a connection nobody frees.
fn one_connection_client() -> Client {
    Client::builder()
        .event_loops(1)
        .max_connections_per_host(1)
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The redirect's own body is not read by anyone: with one connection per
/// host, the hop it leads to must not wait on the connection that redirect
/// still holds (its body larger than the client would drain, so the
/// connection closes).
#[test]
fn a_redirect_with_a_large_body_frees_its_connection_for_the_next_hop() {
    let server = redirecting_with_a_large_body(4 << 20);
    let client = one_connection_client();
    let response = client.get(server.url("/from")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().wait().unwrap(), "done");
    client.close();
}

/// Several such requests sent at once and waited on in order: the ones
/// not yet waited on may not hold the one connection while their
/// redirect's body waits for a reader, so each completes.
#[test]
fn redirects_with_large_bodies_waited_on_in_order_each_complete() {
    let server = redirecting_with_a_large_body(4 << 20);
    let client = one_connection_client();
    let futures: Vec<_> = (0..5)
        .map(|_| client.get(server.url("/from")).send())
        .collect();
    each_answered_in_order("redirected", futures, |_| "done".into());
    client.close();
}
