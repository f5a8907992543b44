//! The connect path below the proxies: happy eyeballs (RFC 8305) against a
//! first address that silently drops SYNs (a listener whose accept queue is
//! full), the connect timeout per attempt inside the request deadline, the
//! `Resolve` seam with a resolver double that never answers one name,
//! `resolve(host, addrs)` overrides, and `local_address`. Loopback only.

mod support;

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;
use tickless::{Client, ClientBuilder, Error, Resolve, ResolveAnswer};

const CEILING: Duration = Duration::from_secs(10);

fn builder() -> ClientBuilder {
    Client::builder().event_loops(1).no_proxy()
}

/// A listener whose accept queue is full: a connect to it hangs, as to an
/// address that drops SYNs.
fn blackhole() -> Option<UnacceptingListener> {
    let mut listener = UnacceptingListener::new();
    listener.backlog_filled(1024).then_some(listener)
}

fn attempts(recorder: &Recorder) -> Vec<SocketAddr> {
    recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::ConnectAttempt(addr) => Some(addr),
            _ => None,
        })
        .collect()
}

#[test]
fn a_first_address_that_drops_syns_costs_about_one_stagger_not_a_connect_timeout() {
    let Some(dead) = blackhole() else { return };
    let server = TestServer::respond(|_| ok("alive"));
    let recorder = Recorder::new();
    let client = builder()
        .connect_timeout(Duration::from_secs(30))
        .happy_eyeballs_delay(Duration::from_millis(150))
        .resolve("dual.test", &[dead.addr(), server.addr()])
        .listener(recorder.clone())
        .build()
        .unwrap();
    let started = Instant::now();
    let response = client.get("http://dual.test/").send().wait().unwrap();
    let took = started.elapsed();
    assert_eq!(response.text().wait().unwrap(), "alive");
    // The second attempt started after the stagger, well before the
    // connect timeout of the first would have ended it.
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert!(took < CEILING, "{took:?}");
    assert_eq!(attempts(&recorder), vec![dead.addr(), server.addr()]);
    let connected: Vec<SocketAddr> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::ConnectSuccess(info) => Some(info.remote),
            _ => None,
        })
        .collect();
    assert_eq!(connected, vec![server.addr()]);
    // The losing attempt was closed, not left for its timeout: no timer
    // of the connect remains armed.
    assert!(eventually(CEILING, || client.stats().armed_timers() == 0));
}

#[test]
fn without_a_stagger_addresses_go_one_at_a_time_each_with_its_connect_timeout() {
    let Some(dead) = blackhole() else { return };
    let server = TestServer::respond(|_| ok("alive"));
    let client = builder()
        .connect_timeout(Duration::from_millis(400))
        .happy_eyeballs_delay(Duration::ZERO)
        .resolve("dual.test", &[dead.addr(), server.addr()])
        .build()
        .unwrap();
    let started = Instant::now();
    let response = client.get("http://dual.test/").send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "alive");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < CEILING, "{took:?}");
}

#[test]
fn when_every_attempt_times_out_the_error_is_the_connect_timeout_within_the_request_deadline() {
    let (Some(first), Some(second)) = (blackhole(), blackhole()) else {
        return;
    };
    let client = builder()
        .connect_timeout(Duration::from_millis(300))
        .happy_eyeballs_delay(Duration::from_millis(100))
        .resolve("dead.test", &[first.addr(), second.addr()])
        .build()
        .unwrap();
    let started = Instant::now();
    let error = client.get("http://dead.test/").send().wait().unwrap_err();
    let took = started.elapsed();
    assert!(matches!(error, Error::ConnectTimeout(_)), "{error:?}");
    // The two attempts overlapped: the second ended 100 ms after the first.
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < CEILING, "{took:?}");
    // The request deadline bounds it all, whatever the connect timeout.
    let client = builder()
        .connect_timeout(Duration::from_secs(30))
        .request_timeout(Duration::from_millis(300))
        .resolve("dead.test", &[first.addr(), second.addr()])
        .build()
        .unwrap();
    let error = client.get("http://dead.test/").send().wait().unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
}

#[test]
fn a_connect_error_names_the_address_whose_attempt_it_reports() {
    let Some(dead) = blackhole() else { return };
    // A port nothing listens on: refused at once, while the first attempt
    // (started before it) still waits, and times out last.
    // In the other order, refused first, the attempt that times out is the
    // second: it is named either way, not whichever came first or last.
    let refused = refused_addr();
    for addrs in [[dead.addr(), refused], [refused, dead.addr()]] {
        let client = builder()
            .connect_timeout(Duration::from_millis(400))
            .happy_eyeballs_delay(Duration::from_millis(50))
            .resolve("dual.test", &addrs)
            .build()
            .unwrap();
        let error = client.get("http://dual.test/").send().wait().unwrap_err();
        assert!(matches!(error, Error::ConnectTimeout(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!("Connect timeout to dual.test/{} after 400 ms", dead.addr()),
            "{addrs:?}"
        );
    }
}

/// A resolver double: `slow.test` is never answered (its answers are
/// kept, so they do not fail on drop); every other name is 127.0.0.1.
#[derive(Default)]
struct Stuck {
    held: Mutex<Vec<ResolveAnswer>>,
    asked: Mutex<Vec<(String, u16)>>,
}

impl Resolve for Stuck {
    fn resolve(&self, host: &str, port: u16, answer: ResolveAnswer) {
        self.asked.lock().unwrap().push((host.to_owned(), port));
        match host {
            "slow.test" => self.held.lock().unwrap().push(answer),
            _ => answer.addresses([SocketAddr::from(([127, 0, 0, 1], port))]),
        }
    }
}

#[test]
fn a_name_the_resolver_never_answers_holds_up_no_other_and_the_request_timeout_ends_it() {
    let server = TestServer::respond(|request| ok(request.header("host").unwrap_or("")));
    let resolver = Arc::new(Stuck::default());
    let client = builder()
        .resolver(resolver.clone())
        .request_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let port = server.addr().port();
    let stuck: Vec<_> = (0..4)
        .map(|_| client.get(format!("http://slow.test:{port}/")).send())
        .collect();
    for name in ["fast.test", "other.test", "FAST.test"] {
        let body = client
            .get(format!("http://{name}:{port}/"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap();
        assert_eq!(
            body.to_ascii_lowercase(),
            format!("{}:{port}", name.to_ascii_lowercase())
        );
    }
    for future in stuck {
        let error = future.wait().unwrap_err();
        assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    }
    // IP literals never reach the resolver.
    client.get(server.url("/")).send().wait().unwrap();
    let asked = resolver.asked.lock().unwrap().clone();
    assert!(
        asked.iter().all(|(host, _)| host != "127.0.0.1"),
        "{asked:?}"
    );
    assert_eq!(asked.iter().filter(|(h, _)| h == "slow.test").count(), 4);
}

#[test]
fn a_request_that_ends_while_its_name_is_looked_up_gives_its_connection_back_at_once() {
    // One connection for the whole client: the request stuck in a lookup
    // holds it, until it times out — then the next request has it, the
    // resolver still silent.
    let server = TestServer::respond(|_| ok("fine"));
    let resolver = Arc::new(Stuck::default());
    let client = builder()
        .resolver(resolver.clone())
        .max_connections(1)
        .request_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let port = server.addr().port();
    let error = client
        .get(format!("http://slow.test:{port}/"))
        .send()
        .wait()
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    let body = client
        .get(format!("http://fast.test:{port}/"))
        .request_timeout(CEILING)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(body, "fine");
    // The late answer gives nothing back twice: one connection still.
    let late = resolver.held.lock().unwrap().pop().unwrap();
    late.addresses([SocketAddr::from(([127, 0, 0, 1], port))]);
    let again: Vec<_> = (0..3)
        .map(|_| client.get(format!("http://fast.test:{port}/")).send())
        .collect();
    for future in again {
        future.wait().unwrap();
    }
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// A resolver double that panics for `panic.test`, never answers
/// `slow.test` (its answers are kept, so they do not fail on drop), and
/// answers every other name with 127.0.0.1.
#[derive(Default)]
struct Panics {
    held: Mutex<Vec<ResolveAnswer>>,
}

impl Resolve for Panics {
    fn resolve(&self, host: &str, port: u16, answer: ResolveAnswer) {
        match host {
            "panic.test" => panic!("the resolver panics for {host}"),
            "slow.test" => self.held.lock().unwrap().push(answer),
            _ => answer.addresses([SocketAddr::from(([127, 0, 0, 1], port))]),
        }
    }
}

/// A resolver that panics fails the request it was asked for, and only
/// that one — as a listener that panics does. It is called in `send`,
/// where its panic does not come out; and as the request holding the one
/// connection ends (its request timeout, on the wheel) for the one queued
/// behind it, where its panic cut the ending short: the request that
/// timed out was never told, and waited for ever.
#[test]
fn a_resolver_that_panics_fails_its_own_request_and_no_other() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = builder()
        .resolver(Arc::new(Panics::default()))
        .max_connections(1)
        .request_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let port = server.addr().port();
    let url = |host: &str| format!("http://{host}:{port}/");
    let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.get(url("panic.test")).send()
    }));
    let error = sent.expect("the resolver's panic came out of send").wait();
    assert!(
        matches!(error, Err(Error::Resolve { .. })),
        "{:?}",
        error.map(|response| response.status())
    );
    let stuck = client.get(url("slow.test")).send();
    let queued = client
        .get(url("panic.test"))
        .request_timeout(CEILING)
        .send();
    let (told, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = told.send(stuck.wait().map(|response| response.status()));
    });
    let timed_out = outcome
        .recv_timeout(CEILING)
        .expect("the request that timed out was told");
    assert!(
        matches!(timed_out, Err(Error::RequestTimeout(_))),
        "{timed_out:?}"
    );
    let error = queued.wait().map(|response| response.status());
    assert!(matches!(error, Err(Error::Resolve { .. })), "{error:?}");
    let response = client.get(url("fast.test")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "fine");
}

#[test]
fn overrides_answer_without_the_resolver_and_port_zero_takes_the_request_port() {
    let server = TestServer::respond(|_| ok("overridden"));
    let resolver = Arc::new(Stuck::default());
    let client = builder()
        .resolver(resolver.clone())
        .resolve("Slow.Test", &[SocketAddr::from(([127, 0, 0, 1], 0))])
        .build()
        .unwrap();
    let url = format!("http://slow.test:{}/", server.addr().port());
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "overridden");
    assert!(resolver.asked.lock().unwrap().is_empty());
}

/// A resolver that answers as `getaddrinfo` does, and as resolvers written
/// for reqwest do (hyper fills in the port): addresses with port 0.
struct PortZero;

impl Resolve for PortZero {
    fn resolve(&self, _host: &str, _port: u16, answer: ResolveAnswer) {
        answer.addresses([
            SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
            SocketAddr::from(([127, 0, 0, 1], 0)),
        ]);
    }
}

/// An address a resolver gives with port 0 takes the request's port, as an
/// override's does, and as hyper (so reqwest) fills it in: nothing listens
/// on port 0, and a resolver ported from reqwest answers so. Any other
/// port is the resolver's choice.
#[test]
fn a_resolvers_address_with_port_zero_takes_the_request_port() {
    let server = TestServer::respond(|_| ok("resolved"));
    let recorder = Recorder::new();
    let client = builder()
        .resolver(Arc::new(PortZero))
        .listener(recorder.clone())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let port = server.addr().port();
    let response = client
        .get(format!("http://zero.test:{port}/"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "resolved");
    assert!(
        attempts(&recorder).iter().all(|addr| addr.port() == port),
        "{:?}",
        attempts(&recorder)
    );
}

/// A resolver that knows no name, and notes each it is asked.
#[derive(Default)]
struct KnowsNone {
    asked: Mutex<Vec<String>>,
}

impl Resolve for KnowsNone {
    fn resolve(&self, host: &str, _port: u16, answer: ResolveAnswer) {
        self.asked.lock().unwrap().push(host.to_owned());
        answer.failed(std::io::Error::other("no such name"));
    }
}

/// An override names its host as a URL may: in any case, with or without
/// a final dot (the same DNS name), an IP literal in or out of brackets
/// and in any spelling the URL's host takes (`[2001:DB8:0::1]`, `127.2`
/// for `127.0.0.2`) — and the request's host matches it the same ways.
/// An IP literal is overridden too, as curl's `--resolve` does. Nothing is
/// asked of the resolver, and nothing goes to the literal's own address
/// (`127.0.0.2` and `2001:db8::1` have no server). A name that is not ASCII
/// or is percent-encoded is read as a URL's is, in IDNA's ASCII form, so
/// `bücher.test` and `xn--bcher-kva.test` are one host, whichever the
/// override and the URL spell.
#[test]
fn an_override_matches_its_host_however_the_url_spells_it() {
    let server = TestServer::respond(|_| ok("overridden"));
    let port = server.addr().port();
    for (host, url_host) in [
        ("Slow.Test", "sLOW.tEST"),
        ("slow.test", "slow.test."),
        ("Slow.Test.", "slow.test"),
        ("[2001:db8::1]", "[2001:DB8:0::1]"),
        ("2001:0db8::1", "[2001:db8::1]"),
        ("127.0.0.2", "127.0.0.2"),
        ("127.2", "127.0.0.2"),
        ("[::ffff:127.0.0.2]", "[::FFFF:7F00:2]"),
        ("bücher.test", "bücher.test"),
        ("Bücher.Test.", "xn--bcher-kva.test"),
        ("xn--bcher-kva.test", "BÜCHER.test"),
        ("ex%61mple.test", "example.test"),
    ] {
        let resolver = Arc::new(KnowsNone::default());
        let client = builder()
            .resolver(resolver.clone())
            .connect_timeout(Duration::from_secs(2))
            .request_timeout(CEILING)
            .resolve(host, &[SocketAddr::from(([127, 0, 0, 1], 0))])
            .build()
            .unwrap();
        let url = format!("http://{url_host}:{port}/");
        let text = client.get(url).send().wait().and_then(|r| r.text().wait());
        assert_eq!(
            text.as_deref().ok(),
            Some("overridden"),
            "{host} for {url_host}: {text:?}"
        );
        assert!(resolver.asked.lock().unwrap().is_empty(), "{host}");
        client.close();
    }
}

/// An override for one port of a host (curl's `--resolve host:port:addr`)
/// holds at that port only, and wins there over the host's override for
/// every port, whichever was set first; at any other port the one for
/// every port holds, or the resolver is asked. An empty list removes the
/// one port's override, and the one for every port holds there again.
#[test]
fn an_override_for_one_port_wins_there_over_the_one_for_every_port() {
    let every_port = TestServer::respond(|_| ok("every port"));
    let one_port = TestServer::respond(|_| ok("one port"));
    let (port, other_port) = (one_port.addr().port(), every_port.addr().port());
    // Port 0: the request's, which is `one_port`'s.
    let loopback = [SocketAddr::from(([127, 0, 0, 1], 0))];
    let answer = |client: &Client, url: String| -> Result<String, Error> {
        client.get(url).send().wait()?.text().wait()
    };
    for port_first in [false, true] {
        let resolver = Arc::new(KnowsNone::default());
        let mut builder = builder()
            .resolver(resolver.clone())
            .request_timeout(CEILING);
        if port_first {
            builder = builder.resolve_port("Ports.Test.", port, &loopback);
        }
        builder = builder.resolve("ports.test", &[every_port.addr()]);
        if !port_first {
            builder = builder.resolve_port("ports.test", port, &loopback);
        }
        let client = builder
            .resolve_port("one.test", port, &[one_port.addr()])
            .build()
            .unwrap();
        let at = |host: &str, port: u16| answer(&client, format!("http://{host}:{port}/"));
        assert_eq!(at("ports.test", port).unwrap(), "one port");
        assert_eq!(at("PORTS.test", other_port).unwrap(), "every port");
        // At a port nothing listens on: the override for every port has
        // its own port.
        assert_eq!(at("ports.test", 1).unwrap(), "every port");
        assert_eq!(at("one.test", port).unwrap(), "one port");
        assert!(resolver.asked.lock().unwrap().is_empty());
        let error = at("one.test", other_port).unwrap_err();
        assert!(matches!(error, Error::Resolve { .. }), "{error:?}");
        assert_eq!(*resolver.asked.lock().unwrap(), ["one.test"]);
        client.close();
    }
    let client = builder()
        .request_timeout(CEILING)
        .resolve("ports.test", &[every_port.addr()])
        .resolve_port("ports.test", port, &loopback)
        .resolve_port("ports.test", port, &[])
        .build()
        .unwrap();
    let text = answer(&client, format!("http://ports.test:{port}/"));
    assert_eq!(text.unwrap(), "every port");
    client.close();
}

#[test]
fn when_the_latest_attempt_fails_the_next_starts_at_once_though_an_earlier_one_still_waits() {
    let Some(dead) = blackhole() else { return };
    let refused = refused_addr();
    let server = TestServer::respond(|_| ok("alive"));
    let stagger = Duration::from_secs(3);
    let recorder = Recorder::new();
    let client = builder()
        .connect_timeout(Duration::from_secs(30))
        .happy_eyeballs_delay(stagger)
        .resolve("three.test", &[dead.addr(), refused, server.addr()])
        .listener(recorder.clone())
        .build()
        .unwrap();
    let started = Instant::now();
    let response = client.get("http://three.test/").send().wait().unwrap();
    let took = started.elapsed();
    assert_eq!(response.text().wait().unwrap(), "alive");
    assert_eq!(
        attempts(&recorder),
        vec![dead.addr(), refused, server.addr()]
    );
    // The second attempt started after one stagger and was refused at
    // once: the third went then (RFC 8305's stagger is for attempts still
    // under way), not one stagger later, while the first was still waiting
    // for its SYN-ACK.
    assert!(took >= stagger, "{took:?}");
    assert!(took < stagger * 2 - Duration::from_millis(500), "{took:?}");
}

/// An address given twice is tried once: a resolver may answer one twice
/// (`/etc/hosts` listing it twice, answers merged from two sources), and
/// an address with port 0 is the same as one with the request's port once
/// that fills it in. Tried again, a dead address would cost a second
/// connect timeout (one at a time) or stagger before the next one.
#[test]
fn an_address_given_twice_is_tried_once() {
    let refused = refused_addr();
    let server = TestServer::respond(|_| ok("alive"));
    let recorder = Recorder::new();
    let at_request_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let client = builder()
        .happy_eyeballs_delay(Duration::ZERO)
        .resolve(
            "twice.test",
            &[at_request_port, refused, refused, server.addr()],
        )
        .listener(recorder.clone())
        .build()
        .unwrap();
    let url = format!("http://twice.test:{}/", refused.port());
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "alive");
    assert_eq!(attempts(&recorder), vec![refused, server.addr()]);
}

/// The listener hears how every attempt it was told of ended: one that
/// timed out is a failure with `TimedOut` — told when it ends, before the
/// attempt it makes way for — as much as one that was refused.
#[test]
fn an_attempt_that_times_out_is_told_to_the_listener_as_a_failure() {
    let Some(dead) = blackhole() else { return };
    let server = TestServer::respond(|_| ok("alive"));
    let recorder = Recorder::new();
    let client = builder()
        .connect_timeout(Duration::from_millis(300))
        .happy_eyeballs_delay(Duration::from_secs(30))
        .resolve("dual.test", &[dead.addr(), server.addr()])
        .listener(recorder.clone())
        .build()
        .unwrap();
    let response = client.get("http://dual.test/").send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "alive");
    let connects: Vec<String> = recorder
        .events()
        .into_iter()
        .filter_map(|(event, _)| match event {
            Event::ConnectAttempt(addr) => Some(format!("attempt {addr}")),
            Event::ConnectFailure(addr, kind) => Some(format!("failure {addr} {kind:?}")),
            Event::ConnectSuccess(info) => Some(format!("success {}", info.remote)),
            _ => None,
        })
        .collect();
    assert_eq!(
        connects,
        vec![
            format!("attempt {}", dead.addr()),
            format!("failure {} TimedOut", dead.addr()),
            format!("attempt {}", server.addr()),
            format!("success {}", server.addr()),
        ]
    );
}

/// A server on `[::1]` that answers one request with `body`: its port and
/// its thread; `None` without an IPv6 loopback.
fn answer_once_on_ipv6_loopback(body: &'static str) -> Option<(u16, std::thread::JoinHandle<()>)> {
    let listener = std::net::TcpListener::bind("[::1]:0").ok()?;
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut stream = accept_in_time(&listener);
        let _ = RequestReader::new(0).read_request(&mut stream);
        std::io::Write::write_all(&mut stream, &ok(body)).unwrap();
    });
    Some((port, server))
}

/// An IPv6 address with a scope id (a link-local one needs its
/// interface's) keeps it when an override's port 0 takes the request's
/// port: the connection goes to the address given, interface and all.
#[test]
fn an_override_keeps_the_scope_id_of_its_ipv6_address() {
    let Some((port, server)) = answer_once_on_ipv6_loopback("scoped") else {
        return; // No IPv6 loopback here.
    };
    let scoped =
        |port| SocketAddr::V6(std::net::SocketAddrV6::new(Ipv6Addr::LOCALHOST, port, 0, 1));
    let recorder = Recorder::new();
    let client = builder()
        .resolve("scoped.test", &[scoped(0)])
        .listener(recorder.clone())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let url = format!("http://scoped.test:{port}/");
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "scoped");
    assert_eq!(attempts(&recorder), vec![scoped(port)]);
    server.join().unwrap();
}

/// A URL's host is the name the URL standard makes of it: percent-decoded
/// (`ex%61mple.test` is `example.test`) and, when it is not ASCII, in
/// IDNA's ASCII form (`bücher.test` is `xn--bcher-kva.test`), as reqwest
/// and curl send it. That form is the name the resolver is asked for, the
/// `Host` header, and the origin connections are pooled by: the two
/// spellings of one host share a connection.
#[test]
fn a_host_is_looked_up_sent_and_pooled_in_its_ascii_form() {
    let server = TestServer::respond(|request| ok(request.header("host").unwrap_or("-")));
    let port = server.addr().port();
    let resolver = Arc::new(Stuck::default());
    let client = builder()
        .resolver(resolver.clone())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    // Each response read whole before the next request: its connection
    // is back in the pool for the next to take.
    let host_sent = |response: Result<tickless::Response, Error>| {
        response.and_then(|response| response.text().wait())
    };
    let example = format!("example.test:{port}");
    // A `String` and a `&str`, each its own conversion.
    let sent = client
        .get(format!("http://ex%61mple.test:{port}/"))
        .send()
        .wait();
    assert_eq!(host_sent(sent).unwrap(), example);
    for url in [
        format!("http://example.test:{port}/"),
        format!("http://EX%41MPLE.test:{port}/"),
    ] {
        let sent = client.get(url.as_str()).send().wait();
        assert_eq!(host_sent(sent).unwrap(), example, "{url}");
    }
    assert_eq!(server.connections_accepted(), 1);
    let idn = format!("xn--bcher-kva.test:{port}");
    for url in [
        format!("http://bücher.test:{port}/"),
        format!("http://BÜCHER.test:{port}/x?q"),
        format!("http://user:pw@bücher.test:{port}"),
        format!("http://xn--bcher-kva.test:{port}/"),
    ] {
        let sent = client.get(url.as_str()).send().wait();
        assert_eq!(host_sent(sent).unwrap(), idn, "{url}");
        let sent = client.get(url.as_bytes().to_vec()).send().wait();
        assert_eq!(host_sent(sent).unwrap(), idn, "{url}");
    }
    assert_eq!(server.connections_accepted(), 2);
    let asked: Vec<String> = resolver
        .asked
        .lock()
        .unwrap()
        .iter()
        .map(|(host, _)| host.clone())
        .collect();
    assert_eq!(asked, ["example.test", "xn--bcher-kva.test"]);
    client.close();
}

/// The error of a GET of `url`, which must be an invalid request for its
/// host.
fn invalid_host(client: &Client, url: &str) -> Error {
    let error = client.get(url).send().wait().unwrap_err();
    assert!(
        matches!(
            &error,
            Error::InvalidRequest(tickless::InvalidRequest::Host(_))
        ),
        "{url}: {error:?}"
    );
    error
}

/// A host the URL standard refuses once percent-decoded and mapped (a
/// `/` or a space in it, a code point IDNA disallows) is an invalid
/// request, sent nowhere and asked of no resolver.
#[test]
fn a_host_that_decodes_to_no_valid_name_is_an_invalid_request() {
    let resolver = Arc::new(KnowsNone::default());
    let client = builder().resolver(resolver.clone()).build().unwrap();
    for url in [
        "http://ex%2Fample.test/",
        "http://ex%20ample.test/",
        "http://ex%25ample.test/",
        "http://\u{FFFD}.test/",
    ] {
        invalid_host(&client, url);
    }
    assert!(resolver.asked.lock().unwrap().is_empty());
}

/// An IPv6 literal followed by its port without the colon
/// (`http://[::1]8080/`, a colon forgotten) or by anything else
/// (`[::1]x:8080`) is an invalid request, as a URL parser has it: `http`
/// takes it as the literal with no port, and it went to port 80 (a
/// server the caller never named).
#[test]
fn an_ipv6_literal_followed_by_what_is_no_port_is_an_invalid_request() {
    let recorder = Recorder::new();
    let client = builder().listener(recorder.clone()).build().unwrap();
    for url in [
        "http://[::1]8080/",
        "https://[::1]8443/x",
        "http://user:pw@[::1]8080/",
        "http://[::1]x:8080/",
    ] {
        let error = invalid_host(&client, url);
        assert!(!error.to_string().contains("pw"), "{error}");
    }
    assert_eq!(attempts(&recorder), [], "no connection was tried");
    client.close();
}

/// A listener on 127.0.0.1 that answers each connection's first request
/// with `200` and `Connection: close`, and records the peer address of
/// each connection.
fn peer_recording_server() -> (SocketAddr, Arc<Mutex<Vec<SocketAddr>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peers = Arc::new(Mutex::new(Vec::new()));
    let seen = peers.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            seen.lock().unwrap().push(stream.peer_addr().unwrap());
            if read_head(&mut stream).is_some() {
                let _ = std::io::Write::write_all(
                    &mut stream,
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        }
    });
    (addr, peers)
}

/// `local_address` binds the outgoing socket to that source address
/// before it connects (curl's `--interface ADDR`): Linux routes all of
/// 127/8 to the loopback, so a server on 127.0.0.1 sees 127.0.0.2 as its
/// peer. A proxy's socket is bound the same way: a forwarding HTTP proxy
/// sees it as its peer.
#[cfg(target_os = "linux")]
#[test]
fn local_address_is_the_source_of_the_connection_direct_and_to_a_proxy() {
    let local: std::net::IpAddr = [127, 0, 0, 2].into();
    let (origin, origin_peers) = peer_recording_server();
    let client = builder()
        .request_timeout(CEILING)
        .local_address(local)
        .build()
        .unwrap();
    let response = client
        .get(format!("http://{origin}/"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "ok");
    client.close();
    let peers = origin_peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].ip(), local);

    let (proxy, proxy_peers) = peer_recording_server();
    let client = builder()
        .request_timeout(CEILING)
        .local_address(local)
        .proxy(tickless::Proxy::http(&format!("http://{proxy}")).unwrap())
        .build()
        .unwrap();
    let response = client.get("http://origin.test/").send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "ok");
    client.close();
    let peers = proxy_peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].ip(), local);
}

/// A target of the other family than the local address is skipped, as
/// hyper's connector skips it: not tried at all (no attempt told of). With
/// every target so skipped, the request fails with `Error::Connect` whose
/// source says why (`AddrNotAvailable`), naming the local address.
#[test]
fn targets_of_the_other_family_than_the_local_address_are_skipped() {
    let (origin, origin_peers) = peer_recording_server();
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, origin.port()));
    let recorder = Recorder::new();
    let client = builder()
        .request_timeout(CEILING)
        .local_address([127, 0, 0, 2].into())
        .resolve("dual.test", &[v6, origin])
        .listener(recorder.clone())
        .build()
        .unwrap();
    let response = client
        .get(format!("http://dual.test:{}/", origin.port()))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "ok");
    assert_eq!(attempts(&recorder), [origin]);
    assert_eq!(origin_peers.lock().unwrap().len(), 1);
    client.close();

    let client = builder()
        .request_timeout(CEILING)
        .local_address(Ipv6Addr::LOCALHOST.into())
        .build()
        .unwrap();
    let error = client
        .get(format!("http://{origin}/"))
        .send()
        .wait()
        .unwrap_err();
    client.close();
    match &error {
        Error::Connect { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::AddrNotAvailable);
            assert!(source.to_string().contains("::1"), "{source}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(origin_peers.lock().unwrap().len(), 1, "nothing connected");
}

/// `localhost`, and a name under it, is the loopback addresses, IPv4's
/// and IPv6's, whatever the hosts file says (RFC 6761 §6.3, as curl and
/// browsers resolve it): a server listening on `::1` alone is reached by
/// `localhost` on a system whose hosts file names only `127.0.0.1` for it
/// (as this machine's does), and one on `127.0.0.1` by `app.localhost`.
#[test]
fn localhost_names_reach_a_server_on_either_loopback_address() {
    // 127.0.0.1 at the server's port, tried first, refuses: held, not
    // listening, so that no other test's server there answers in ::1's
    // place. Another test's socket there already: another port.
    let mut ports_taken = 0;
    let (port, server, _held) = loop {
        let Some((port, server)) = answer_once_on_ipv6_loopback("on ::1") else {
            return; // No IPv6 loopback here.
        };
        let held =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if held
            .bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())
            .is_ok()
        {
            break (port, server, held);
        }
        // That server's one answer, to nobody, ends its thread.
        drop(std::net::TcpStream::connect((Ipv6Addr::LOCALHOST, port)));
        ports_taken += 1;
        assert!(
            ports_taken < 20,
            "127.0.0.1 taken at {ports_taken} ports in a row"
        );
    };
    let client = builder().request_timeout(CEILING).build().unwrap();
    let response = client
        .get(format!("http://localhost:{port}/"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.remote_addr().ip(), Ipv6Addr::LOCALHOST);
    assert_eq!(response.text().wait().unwrap(), "on ::1");
    server.join().unwrap();

    let v4 = TestServer::respond(|request| ok(request.header("host").unwrap_or("-")));
    let url = format!("http://app.localhost:{}/", v4.addr().port());
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(
        response.text().wait().unwrap(),
        format!("app.localhost:{}", v4.addr().port())
    );
}
