//! Requests through proxies: real ones started by the test on loopback
//! (tinyproxy for HTTP forwarding, CONNECT and Basic auth; microsocks for
//! SOCKS5, with and without RFC 1929 credentials), and doubles for what a
//! real proxy will not do on demand (a CONNECT answered 403, a SOCKS server
//! that replies "host unreachable", a proxy that stalls mid-handshake, a
//! proxy that refuses the connection, a CONNECT answer with more after it,
//! however much). `scripts/test` installs tinyproxy and microsocks;
//! without them these tests fail saying so, never skip.

mod support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};
use support::real::{Microsocks, Tinyproxy};
use support::tls::{certs, TlsServer};
use support::*;
use tickless::{Client, ClientBuilder, Error, Proxy, ProxyError, SocksError};

/// Bound on anything that should be prompt: generous, for a loaded machine.
const CEILING: Duration = Duration::from_secs(20);

fn client_via(proxy: Proxy) -> ClientBuilder {
    Client::builder()
        .event_loops(1)
        .no_proxy()
        .proxy(proxy)
        .add_root_certificate(&certs().ca_pem)
}

/// An origin that says which request it got and whether a proxy left its
/// mark (`Via`) or credentials (`Proxy-Authorization`, which must never
/// reach it).
fn origin() -> TestServer {
    TestServer::respond(|request| {
        ok(&format!(
            "{} {} via={} auth={}",
            request.method,
            request.target,
            request.header("via").unwrap_or("none"),
            request.header("proxy-authorization").unwrap_or("none"),
        ))
    })
}

fn tls_origin() -> TlsServer {
    TlsServer::respond(&certs().valid, |request| {
        ok(&format!(
            "tls {} auth={}",
            request.target,
            request.header("proxy-authorization").unwrap_or("none")
        ))
    })
}

fn text(client: &Client, url: &str) -> Result<String, Error> {
    let response = client.get(url).send().wait()?;
    assert_eq!(response.status(), 200);
    response.text().wait()
}

/// A GET of `https://origin.invalid:8443/` through `proxy` as an HTTPS
/// proxy (a CONNECT), which must fail: the proxy's URL, and the error.
fn connect_through(proxy: &TestServer) -> (String, Error) {
    let url = format!("http://{}", proxy.addr());
    let client = client_via(Proxy::https(&url).unwrap()).build().unwrap();
    let error = client
        .get("https://origin.invalid:8443/")
        .send()
        .wait()
        .unwrap_err();
    (url, error)
}

fn proxy_error(error: Error) -> (String, String, ProxyError) {
    match error {
        Error::Proxy {
            proxy,
            target,
            source,
            ..
        } => (proxy, target, source),
        other => panic!("expected Error::Proxy, got {other:?}"),
    }
}

// ------------------------------------------------------------ tinyproxy ---

#[test]
fn plain_http_goes_through_tinyproxy_in_absolute_form() {
    let origin = origin();
    let proxy = Tinyproxy::start();
    let client = client_via(Proxy::http(&proxy.url()).unwrap())
        .build()
        .unwrap();
    let body = text(&client, &origin.url("/forwarded?q=1")).unwrap();
    // tinyproxy took the absolute form and sent origin form on.
    assert!(body.starts_with("GET /forwarded?q=1 via="), "{body}");
    assert!(body.contains("tinyproxy"), "forwarded by tinyproxy: {body}");
}

#[test]
fn tinyproxy_with_basic_auth_takes_the_credentials_of_the_proxy_url() {
    let origin = origin();
    let tls = tls_origin();
    let proxy = Tinyproxy::with_basic_auth("tester", "s3cret");
    let authed = proxy.url().replace("http://", "http://tester:s3cret@");
    let client = client_via(Proxy::all(&authed).unwrap()).build().unwrap();
    // Forwarded: tinyproxy checks Proxy-Authorization and strips it.
    let body = text(&client, &origin.url("/private")).unwrap();
    assert!(body.starts_with("GET /private via="), "{body}");
    assert!(body.ends_with("auth=none"), "{body}");
    // Tunnelled: CONNECT with the credentials, then TLS with the origin,
    // whose name (not the proxy's) is sent and verified.
    let body = text(&client, &tls.url_for("localhost", "/secure")).unwrap();
    assert_eq!(body, "tls /secure auth=none");
    assert_eq!(tls.server_names(), vec![Some("localhost".to_owned())]);
}

#[test]
fn connect_without_credentials_is_a_407_naming_the_proxy() {
    let tls = tls_origin();
    let proxy = Tinyproxy::with_basic_auth("tester", "s3cret");
    let client = client_via(Proxy::all(&proxy.url()).unwrap())
        .build()
        .unwrap();
    let error = client.get(tls.url("/x")).send().wait().unwrap_err();
    let message = chain_text(&error);
    let (named, target, source) = proxy_error(error);
    assert_eq!(named, proxy.url());
    assert_eq!(target, tls.addr().to_string());
    match source {
        ProxyError::AuthenticationRequired { challenges, .. } => {
            assert!(
                challenges.iter().any(|c| c.starts_with("Basic")),
                "{challenges:?}"
            )
        }
        other => panic!("expected a 407, got {other:?}"),
    }
    assert!(message.contains("407"), "{message}");
    assert_eq!(tls.handshakes(), 0);
}

#[test]
fn several_plain_origins_go_through_one_tinyproxy() {
    let first = origin();
    let second = origin();
    let proxy = Tinyproxy::start();
    let client = client_via(Proxy::http(&proxy.url()).unwrap())
        .build()
        .unwrap();
    for url in [first.url("/a"), second.url("/b"), first.url("/c")] {
        let body = text(&client, &url).unwrap();
        assert!(body.contains("tinyproxy"), "{body}");
    }
    assert_eq!(first.requests().len(), 2);
    assert_eq!(second.requests().len(), 1);
    // tinyproxy 1.11 closes its client connection after each answer; that
    // one proxy connection carries requests for several origins is
    // asserted with the double below.
}

// ----------------------------------------------------------- microsocks ---

#[test]
fn socks5_and_socks5h_through_microsocks_with_and_without_credentials() {
    let origin = origin();
    let tls = tls_origin();
    let plain = Microsocks::start();
    let authed = Microsocks::with_auth("tester", "s3cret");
    let authed_url = authed.url().replace("socks5://", "socks5://tester:s3cret@");
    for url in [
        plain.url(),
        plain.url().replace("socks5://", "socks5h://"),
        authed_url.clone(),
        authed_url.replace("socks5://", "socks5h://"),
    ] {
        let client = client_via(Proxy::all(&url).unwrap()).build().unwrap();
        let body = text(&client, &origin.url("/socks")).unwrap();
        assert_eq!(body, "GET /socks via=none auth=none", "through {url}");
        // By name: socks5h sends the name (microsocks resolves it), socks5
        // resolves it here; either way TLS is with the origin.
        let body = text(&client, &tls.url_for("localhost", "/s")).unwrap();
        assert_eq!(body, "tls /s auth=none", "through {url}");
    }
    // Without credentials where they are required: the proxy's refusal.
    let client = client_via(Proxy::all(&authed.url()).unwrap())
        .build()
        .unwrap();
    let (named, _, source) = proxy_error(client.get(origin.url("/")).send().wait().unwrap_err());
    assert_eq!(named, authed.url());
    assert!(
        matches!(source, ProxyError::Socks(SocksError::NoAcceptableMethods)),
        "{source:?}"
    );
}

/// `socks5://` resolves the origin here and gives the proxy one address:
/// when the proxy cannot reach it (microsocks answers "connection refused"),
/// a new connection to the proxy asks for the next one, as a direct
/// connection would try it.
#[test]
fn socks5_asks_the_proxy_for_the_next_address_when_it_cannot_reach_one() {
    let origin = origin();
    let socks = Microsocks::start();
    let client = client_via(Proxy::all(&socks.url()).unwrap())
        .resolve("two.test", &[refused_addr(), origin.addr()])
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let body = text(&client, "http://two.test/next").unwrap();
    assert_eq!(body, "GET /next via=none auth=none");
    assert_eq!(origin.connections_accepted(), 1);
}

// -------------------------------------------------------------- doubles ---

#[test]
fn a_connect_answered_403_is_a_typed_error_naming_the_proxy_and_its_answer() {
    let proxy = TestServer::respond(|_| response(403, &[], b"no tunnels here"));
    let (url, error) = connect_through(&proxy);
    let message = chain_text(&error);
    let (named, target, source) = proxy_error(error);
    assert_eq!(named, url);
    assert_eq!(target, "origin.invalid:8443");
    match source {
        ProxyError::ConnectRefused { status, .. } => assert_eq!(status, 403),
        other => panic!("expected a refused CONNECT, got {other:?}"),
    }
    assert!(message.contains("403"), "{message}");
    let connect = &proxy.requests()[0];
    assert_eq!(connect.method, "CONNECT");
    assert_eq!(connect.target, "origin.invalid:8443");
}

/// A CONNECT answered 503 with a `Retry-After` longer than the retry
/// policy's `max_retry_after` (60 s) asks the client not to come back for an
/// hour: it is not retried at once, as an origin's 503 with that
/// `Retry-After` is not (RFC 9110 §10.2.3) — the 503 is the request's error,
/// and the proxy sees one CONNECT.
#[test]
fn a_connect_answered_503_with_a_long_retry_after_is_not_retried_at_once() {
    let proxy = TestServer::respond(|_| response(503, &[("Retry-After", "3600")], b""));
    let url = format!("http://{}", proxy.addr());
    let client = client_via(Proxy::https(&url).unwrap())
        .retry(tickless::retry::Policy::attempts(3))
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let error = client
        .get("https://origin.invalid:8443/")
        .send()
        .wait()
        .unwrap_err();
    let (_, _, source) = proxy_error(error);
    match source {
        ProxyError::ConnectRefused { status, .. } => assert_eq!(status, 503),
        other => panic!("expected a refused CONNECT, got {other:?}"),
    }
    assert_eq!(proxy.connections_accepted(), 1, "CONNECTs sent");
}

/// The CONNECT says who asks, as curl's and reqwest's do (some proxies
/// refuse a tunnel to a client that does not): the `User-Agent` of the
/// request it opens for — the client's own, one of its `default_headers`
/// (which replaces the client's own), or the caller's — and none when the
/// request has none.
#[test]
fn a_connect_carries_the_user_agent_of_its_request() {
    let proxy = TestServer::respond(|_| response(403, &[], b""));
    let url = format!("http://{}", proxy.addr());
    let agent_asking = |builder: ClientBuilder, own: Option<&str>| {
        let client = builder.build().unwrap();
        let mut request = client.get("https://origin.invalid:8443/");
        if let Some(own) = own {
            request = request.header("user-agent", own);
        }
        request.send().wait().unwrap_err();
        let connect = proxy.requests().pop().unwrap();
        assert_eq!(connect.method, "CONNECT");
        connect.header("user-agent").map(str::to_owned)
    };
    let via = || client_via(Proxy::https(&url).unwrap());
    let default = agent_asking(via(), None);
    assert!(
        default
            .as_deref()
            .is_some_and(|agent| agent.starts_with("tickless/")),
        "{default:?}"
    );
    assert_eq!(
        agent_asking(via(), Some("probe/1.0")).as_deref(),
        Some("probe/1.0")
    );
    assert_eq!(agent_asking(via().no_user_agent(), None), None);
    let mut defaults = http::HeaderMap::new();
    defaults.insert("user-agent", http::HeaderValue::from_static("defaults/1"));
    assert_eq!(
        agent_asking(via().default_headers(defaults.clone()), None).as_deref(),
        Some("defaults/1")
    );
    assert_eq!(
        agent_asking(via().default_headers(defaults), Some("probe/1.0")).as_deref(),
        Some("probe/1.0")
    );
}

/// A reason phrase with obs-text (bytes 0x80-0xFF, which httparse gives
/// as an empty reason) is kept: read as Latin-1, one character a byte.
#[test]
fn a_refused_connects_reason_with_obs_text_is_kept() {
    let proxy = TestServer::respond(|_| {
        b"HTTP/1.1 403 Interdit \xe9\r\nContent-Length: 0\r\n\r\n".to_vec()
    });
    let (_, error) = connect_through(&proxy);
    let message = chain_text(&error);
    match proxy_error(error).2 {
        ProxyError::ConnectRefused { status, reason, .. } => {
            assert_eq!(status, 403);
            assert_eq!(reason, "Interdit \u{e9}");
        }
        other => panic!("expected a refused CONNECT, got {other:?}"),
    }
    assert!(message.contains("403 Interdit \u{e9}"), "{message}");
}

/// An https:// host no CONNECT could name is refused with the request, as
/// no usable host (`Origin::of`), before the proxy is even connected to:
/// the tunnel's own check of its target (`conn::tunnel::first_step`) is
/// never reached.
#[test]
fn an_https_host_no_connect_can_name_is_refused_before_the_proxy() {
    let proxy = TestServer::respond(|_| response(200, &[], b""));
    let url = format!("http://{}", proxy.addr());
    let client = client_via(Proxy::https(&url).unwrap()).build().unwrap();
    for target in [
        "https://a[b]/",
        "https://[v1.x:y]/",
        "https://[fe80::1%25eth0]/",
    ] {
        let error = client.get(target).send().wait().unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidRequest(tickless::InvalidRequest::Host(_))
            ),
            "{target}: {error:?}"
        );
    }
    assert_eq!(proxy.connections_accepted(), 0);
}

#[test]
fn a_malformed_connect_answer_says_malformed_once_through_its_causes() {
    // Not an HTTP/1.x status line: what the parser says is the reason.
    let proxy = TestServer::respond(|_| b"HTTP/2 200\r\n\r\n".to_vec());
    let (_, error) = connect_through(&proxy);
    let message = chain_text(&error);
    let (_, _, source) = proxy_error(error);
    assert!(
        matches!(source, ProxyError::MalformedAnswer(_)),
        "{source:?}"
    );
    assert_eq!(message.matches("malformed").count(), 1, "{message}");
    assert!(message.contains("invalid HTTP version"), "{message}");
}

/// A SOCKS5 server that takes no authentication and answers every
/// CONNECT with `reply`.
fn socks_replying(reply: u8) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        let mut greeting = [0u8; 3];
        if stream.read_exact(&mut greeting).is_err() {
            return;
        }
        let _ = stream.write_all(&[5, 0]);
        let mut request = [0u8; 512];
        if stream.read(&mut request).is_err() {
            return;
        }
        let _ = stream.write_all(&[5, reply, 0, 1, 0, 0, 0, 0, 0, 0]);
        let _ = stream.read(&mut request);
    }))
}

#[test]
fn a_socks_failure_reply_is_a_typed_error_naming_the_proxy() {
    let socks = socks_replying(0x04);
    let url = format!("socks5h://{}", socks.addr());
    let client = client_via(Proxy::all(&url).unwrap()).build().unwrap();
    let error = client
        .get("http://unreachable.invalid/")
        .send()
        .wait()
        .unwrap_err();
    let message = chain_text(&error);
    let (named, target, source) = proxy_error(error);
    assert_eq!(named, url);
    assert_eq!(target, "unreachable.invalid:80");
    assert!(
        matches!(source, ProxyError::Socks(SocksError::HostUnreachable)),
        "{source:?}"
    );
    assert!(message.contains("host unreachable"), "{message}");
}

#[test]
fn socks5_asks_for_every_address_it_may_and_reports_the_last_failure() {
    let refused = socks_replying(0x05);
    let addrs = [
        "192.0.2.1:80".parse().unwrap(),
        "[2001:db8::1]:80".parse().unwrap(),
        "192.0.2.2:80".parse().unwrap(),
    ];
    let url = format!("socks5://{}", refused.addr());
    let client = client_via(Proxy::all(&url).unwrap())
        .resolve("three.test", &addrs)
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let error = client.get("http://three.test/").send().wait().unwrap_err();
    let (named, target, source) = proxy_error(error);
    assert_eq!(
        (named.as_str(), target.as_str()),
        (url.as_str(), "three.test:80")
    );
    assert!(
        matches!(source, ProxyError::Socks(SocksError::ConnectionRefused)),
        "{source:?}"
    );
    // One connection to the proxy per address, each asked once.
    assert_eq!(refused.connections_accepted(), addrs.len());
}

#[test]
fn socks5_asks_for_no_other_address_when_the_proxy_itself_refuses() {
    for reply in [0x01, 0x02, 0x07] {
        let refusing = socks_replying(reply);
        let url = format!("socks5://{}", refusing.addr());
        let client = client_via(Proxy::all(&url).unwrap())
            .resolve("two.test", &[refused_addr(), refused_addr()])
            .request_timeout(CEILING)
            .build()
            .unwrap();
        let error = client.get("http://two.test/").send().wait().unwrap_err();
        let (_, _, source) = proxy_error(error);
        match source {
            ProxyError::Socks(socks) => assert_eq!(socks.reply_code(), Some(reply)),
            other => panic!("expected the proxy's reply {reply}, got {other:?}"),
        }
        assert_eq!(refusing.connections_accepted(), 1, "reply {reply}");
    }
}

/// A host the system reads as an IPv4 address though it is not written in
/// dotted-decimal (`127.1`, one number, octal or hex parts): the
/// connection goes to that address, so a `no_proxy` CIDR block holding it
/// keeps the request off the proxy, as for `127.0.0.1`.
#[test]
fn no_proxy_cidr_blocks_match_ipv4_hosts_in_any_spelling() {
    let origin = TestServer::respond(|_| ok("direct"));
    let proxy = TestServer::respond(|_| ok("proxied"));
    let url = format!("http://{}", proxy.addr());
    let client = client_via(Proxy::all(&url).unwrap().no_proxy("127.0.0.0/8"))
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let port = origin.addr().port();
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.0.0.1",
        "0177.0.0.1",
    ] {
        let body = text(&client, &format!("http://{host}:{port}/")).unwrap();
        assert_eq!(body, "direct", "http://{host}:{port}/");
    }
    assert_eq!(proxy.connections_accepted(), 0);
}

/// A `no_proxy` name that is not ASCII (or is percent-encoded) names the
/// host the URL's does: a request's host is read in its ASCII form
/// (`bücher.test` is `xn--bcher-kva.test`), and so is the entry, in
/// either spelling — as `resolve` reads its host — so the request goes
/// straight, not through the proxy the list was written to keep it from.
#[test]
fn a_no_proxy_name_matches_a_host_that_is_not_ascii_however_either_is_spelt() {
    let origin = TestServer::respond(|_| ok("direct"));
    let proxy = TestServer::respond(|_| ok("proxied"));
    let url = format!("http://{}", proxy.addr());
    let port = origin.addr().port();
    for entry in [
        "bücher.test",
        "BÜCHER.test",
        "xn--bcher-kva.test",
        "b%C3%BCcher.test",
    ] {
        let client = client_via(Proxy::all(&url).unwrap().no_proxy(entry))
            .resolve("bücher.test", &[origin.addr()])
            .resolve("www.bücher.test", &[origin.addr()])
            .request_timeout(CEILING)
            .build()
            .unwrap();
        for host in ["bücher.test", "xn--bcher-kva.test", "www.bücher.test"] {
            let body = text(&client, &format!("http://{host}:{port}/")).unwrap();
            assert_eq!(body, "direct", "no_proxy {entry:?}, http://{host}:{port}/");
        }
    }
    assert_eq!(proxy.connections_accepted(), 0);
}

#[test]
fn a_proxy_that_refuses_the_connection_is_named_not_the_origin() {
    let refused = refused_addr();
    let url = format!("http://{refused}");
    let client = client_via(Proxy::all(&url).unwrap()).build().unwrap();
    let error = client
        .get("http://origin.invalid/")
        .send()
        .wait()
        .unwrap_err();
    let (named, target, source) = proxy_error(error);
    assert_eq!(named, url);
    assert_eq!(target, "origin.invalid:80");
    match source {
        ProxyError::Connect(io) => assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("expected a refused connection, got {other:?}"),
    }
}

/// A proxy that never completes the connection (its backlog full: SYNs
/// dropped) is a proxy's connect timeout — named as the proxy, typed as a
/// connect timeout — for an HTTP proxy as for a SOCKS5 one; not the
/// origin's `Error::ConnectTimeout`.
#[test]
fn a_proxy_that_never_accepts_is_the_proxys_connect_timeout() {
    let mut blackhole = UnacceptingListener::new();
    if !blackhole.backlog_filled(1024) {
        return;
    }
    for scheme in ["http", "socks5h"] {
        let url = format!("{scheme}://{}", blackhole.addr());
        let client = client_via(Proxy::all(&url).unwrap())
            .connect_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let error = client
            .get("http://origin.invalid/")
            .send()
            .wait()
            .unwrap_err();
        assert_eq!(
            error.timeout_kind(),
            Some(tickless::TimeoutKind::Connect),
            "{error:?}"
        );
        assert_eq!(
            error.timeout().map(|t| t.duration),
            Some(Duration::from_millis(300))
        );
        let (named, target, source) = proxy_error(error);
        assert_eq!(named, url);
        assert_eq!(target, "origin.invalid:80");
        assert!(
            matches!(&source, ProxyError::ConnectTimeout(t) if t.remote.contains(&blackhole.addr().to_string())),
            "{source:?}"
        );
        assert!(
            source.to_string().contains("took longer than 300 ms"),
            "{source}"
        );
    }
}

/// A proxy whose host name does not resolve (`.invalid`, RFC 6761: the
/// system's resolver fails it without asking the network for long) is the
/// proxy's failure, for an HTTP proxy as for a SOCKS5 one — not an
/// `Error::Resolve` that reads as if the origin's name had failed.
#[test]
fn a_proxy_whose_name_does_not_resolve_is_named_not_the_origin() {
    for url in [
        "http://no-such-proxy.invalid:3128",
        "socks5://no-such-proxy.invalid:1080",
        "socks5h://no-such-proxy.invalid:1080",
    ] {
        let client = client_via(Proxy::all(url).unwrap())
            .request_timeout(CEILING)
            .build()
            .unwrap();
        let error = client
            .get("http://origin.invalid/")
            .send()
            .wait()
            .unwrap_err();
        let message = chain_text(&error);
        let (named, target, source) = proxy_error(error);
        assert_eq!(named, url);
        assert_eq!(target, "origin.invalid:80");
        assert!(
            matches!(source, ProxyError::Resolve(_)),
            "{url}: expected the proxy's name unresolved, got {source:?}"
        );
        assert!(
            message.contains("could not resolve the proxy's host name"),
            "{message}"
        );
    }
}

/// Through a `socks5://` proxy the client resolves the origin too: the
/// origin's name failing is the origin's, as without a proxy.
#[test]
fn an_origin_that_does_not_resolve_for_a_socks5_proxy_is_the_origin_failing() {
    let proxy = refused_addr();
    let client = client_via(Proxy::all(&format!("socks5://{proxy}")).unwrap())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let error = client
        .get("http://origin.invalid/")
        .send()
        .wait()
        .unwrap_err();
    match error {
        Error::Resolve { host, .. } => assert_eq!(host, "origin.invalid"),
        other => panic!("expected the origin's name unresolved, got {other:?}"),
    }
}

/// A proxy that accepts and reads, and never answers.
fn stalling_proxy() -> TestServer {
    TestServer::start(Behaviour::NeverAnswer)
}

#[test]
fn a_proxy_stalling_mid_handshake_is_ended_by_the_request_timeout_in_both_modes() {
    for on_loop in [false, true] {
        for scheme in ["http", "socks5h"] {
            let proxy = stalling_proxy();
            let url = format!("{scheme}://{}", proxy.addr());
            let recorder = Recorder::new();
            let client = client_via(Proxy::all(&url).unwrap())
                .use_event_loop_timeouts(on_loop)
                .request_timeout(Duration::from_millis(300))
                .handshake_timeout(Duration::ZERO)
                .listener(recorder.clone())
                .build()
                .unwrap();
            let started = Instant::now();
            let error = client
                .get("https://origin.invalid/")
                .send()
                .wait()
                .unwrap_err();
            let took = started.elapsed();
            assert!(
                matches!(error, Error::RequestTimeout(_)),
                "{scheme}, on loop {on_loop}: {error:?}"
            );
            assert!(took >= Duration::from_millis(300), "{took:?}");
            assert!(took < CEILING, "{took:?}");
            assert!(error.to_string().contains("via proxy"), "{error}");
            if on_loop {
                // Re-homed at the TCP connect to the proxy: the expiry ran
                // on the connection's loop, not on the wheel.
                let loop_thread = client.event_loop_group().loops()[0].thread_id();
                assert_eq!(recorder.failed_on(), Some(loop_thread), "{scheme}");
            }
        }
    }
}

#[test]
fn the_handshake_timeout_covers_connect_and_tls_together() {
    let proxy = stalling_proxy();
    let client = client_via(Proxy::all(&format!("http://{}", proxy.addr())).unwrap())
        .handshake_timeout(Duration::from_millis(200))
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let error = client
        .get("https://origin.invalid/")
        .send()
        .wait()
        .unwrap_err();
    // The proxy's part of it: CONNECT was never answered, TLS never began.
    assert_eq!(error.timeout_kind(), Some(tickless::TimeoutKind::Handshake));
    assert!(
        matches!(
            error,
            Error::Proxy {
                source: ProxyError::HandshakeTimeout(_),
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_double_http_proxy_gets_absolute_form_and_basic_credentials_for_plain_requests() {
    let proxy = TestServer::respond(|request| ok(&request.target));
    let url = format!("http://us%40er:p%3Ass@{}", proxy.addr());
    let client = client_via(Proxy::http(&url).unwrap()).build().unwrap();
    for target in [
        "http://a.invalid/x?y=1",
        "http://b.invalid:8080/",
        "http://[::1]:81/v6",
    ] {
        assert_eq!(text(&client, target).unwrap(), target);
    }
    let requests = proxy.requests();
    assert_eq!(requests.len(), 3);
    // The pool keys forwarding connections by proxy: one for all origins.
    assert!(
        requests.iter().all(|r| r.connection_index == 0),
        "one connection for all"
    );
    assert_eq!(proxy.connections_accepted(), 1);
    // RFC 7617: base64 of "user:password", percent-decoded from the URL.
    assert_eq!(
        requests[0].header("proxy-authorization"),
        Some(support::real::basic_auth("us@er", "p:ss").as_str())
    );
}

/// Each hop of a redirect chain takes its own route: `https://localhost`
/// through a `CONNECT` tunnel, its `302` to a plain `http://` origin
/// forwarded by the same proxy, and that one's `302` to `127.0.0.1`, which
/// the proxy's `no_proxy` list sends straight. The proxy URL's credentials
/// go with the `CONNECT` and the forwarded request, to the proxy alone; the
/// caller's own `Proxy-Authorization` is dropped at the first change of
/// origin, and neither reaches an origin.
#[test]
fn a_redirect_chain_takes_each_hops_route_through_the_proxy_or_past_it() {
    let straight = tls_origin();
    let straight_url = straight.url("/end");
    let tunnelled = TlsServer::respond(&certs().valid, |request| {
        let auth = request.header("proxy-authorization").unwrap_or("none");
        let location = format!("http://far.invalid/mid?auth={auth}");
        response(302, &[("location", &location)], b"")
    });
    let to = tunnelled.addr();
    // What the proxy was asked: method, target, credentials.
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let told = asked.clone();
    let proxy = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let Ok(request) = RequestReader::new(index).read_request(&mut stream) else {
            return;
        };
        let auth = request.header("proxy-authorization").unwrap_or("none");
        let line = format!("{} {} {auth}", request.method, request.target);
        told.lock().unwrap().push(line);
        if request.method == "CONNECT" {
            let _ = stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            if let Ok(upstream) = std::net::TcpStream::connect(to) {
                relay(stream, upstream, copy_all);
            }
        } else {
            let _ = stream.write_all(&response(302, &[("location", &straight_url)], b""));
        }
    }));
    let client = client_via(
        Proxy::all(&format!("http://u:p@{}", proxy.addr()))
            .unwrap()
            .no_proxy("127.0.0.1"),
    )
    .redirect(tickless::redirect::Policy::limited(5).allow_https_to_http(true))
    .build()
    .unwrap();
    let response = client
        .get(tunnelled.url_for("localhost", "/start"))
        .header("proxy-authorization", "Basic b3du")
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.text().wait().unwrap(), "tls /end auth=none");
    let proxys = support::real::basic_auth("u", "p");
    assert_eq!(
        *asked.lock().unwrap(),
        [
            format!("CONNECT localhost:{} {proxys}", to.port()),
            format!("GET http://far.invalid/mid?auth=none {proxys}"),
        ]
    );
    assert_eq!(straight.handshakes(), 1, "straight to the last origin");
}

/// `ClientBuilder::no_proxy` means no proxy, as reqwest's does: it drops
/// the proxies given before it (the environment's too), and the request
/// goes straight to its origin; a proxy given after it is used.
#[test]
fn no_proxy_on_the_builder_drops_the_proxies_given_before_it() {
    let origin = TestServer::respond(|_| ok("origin"));
    let proxy = TestServer::respond(|_| ok("proxy"));
    let proxy_url = format!("http://{}", proxy.addr());
    let answered = |builder: ClientBuilder| {
        let client = builder.event_loops(1).build().unwrap();
        text(&client, &origin.url("/")).unwrap()
    };
    let dropped = Client::builder()
        .proxy(Proxy::all(&proxy_url).unwrap())
        .no_proxy();
    assert_eq!(answered(dropped), "origin");
    assert_eq!(proxy.requests().len(), 0, "the proxy was passed by");
    let given_after = Client::builder()
        .no_proxy()
        .proxy(Proxy::all(&proxy_url).unwrap());
    assert_eq!(answered(given_after), "proxy");
    assert_eq!(proxy.requests().len(), 1);
}

/// Answers held until it opens; it opens when dropped too, so that a test
/// that fails before opening it does not leave its server's threads
/// waiting forever (and the test with them).
#[derive(Clone, Default)]
struct Gate(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, opened) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        let (open, opened) = &*self.0;
        *open.lock().unwrap() = true;
        opened.notify_all();
    }
}

/// Opens its gate when dropped.
struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Through an HTTP proxy that forwards plain requests, the per-host limit
/// counts the connections to the proxy, every origin together (as
/// `ClientBuilder::max_connections_per_host` says): with a limit of 2,
/// requests to three origins have two connections, and the third waits
/// for one of them.
#[test]
fn the_per_host_limit_counts_a_forwarding_proxy_for_every_origin_together() {
    // Holds every answer until the gate opens: the connections stay busy.
    let gate = Gate::default();
    let held = gate.clone();
    let proxy = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        while let Ok(request) = reader.read_request(&mut stream) {
            held.wait();
            if stream.write_all(&ok(&request.target)).is_err() {
                return;
            }
        }
    }));
    // Dropped before the proxy, should an assertion fail.
    let _opened_at_the_end = OpenOnDrop(gate.clone());
    let client = client_via(Proxy::http(&format!("http://{}", proxy.addr())).unwrap())
        .max_connections_per_host(2)
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let targets = [
        "http://a.invalid/",
        "http://b.invalid/",
        "http://c.invalid/",
    ];
    let futures: Vec<_> = targets
        .iter()
        .map(|target| client.get(*target).send())
        .collect();
    assert!(proxy.wait_for_accepted(2, CEILING));
    assert!(
        eventually(CEILING, || client.stats().waiting == 1),
        "the third origin's request does not wait: {:?}",
        client.stats()
    );
    let stats = client.stats();
    assert_eq!(stats.open_connections, 2, "{stats:?}");
    assert_eq!(proxy.connections_accepted(), 2);
    gate.open();
    for (future, target) in futures.into_iter().zip(targets) {
        assert_eq!(future.wait().unwrap().text().wait().unwrap(), target);
    }
    // The third went on one of the two, once it was free.
    assert_eq!(proxy.connections_accepted(), 2);
    client.close();
}

#[test]
fn one_handshake_timeout_bounds_the_connect_and_the_tls_after_it_together() {
    // Answers CONNECT after a while, then never speaks TLS.
    // Seconds, not fractions: the bound below must hold on a loaded machine.
    let slow = Duration::from_secs(4);
    let proxy = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_ok() {
            std::thread::sleep(slow);
            let _ = stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            drain(&mut stream);
        }
    }));
    let timeout = Duration::from_secs(5);
    let client = client_via(Proxy::all(&format!("http://{}", proxy.addr())).unwrap())
        .handshake_timeout(timeout)
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let started = Instant::now();
    let error = client
        .get("https://origin.invalid/")
        .send()
        .wait()
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(error, Error::HandshakeTimeout(_)), "{error:?}");
    assert!(took >= timeout, "{took:?}");
    // Not restarted when the tunnel opened: that would end it only after
    // `slow + timeout` (9 s).
    assert!(
        took < slow + timeout - Duration::from_millis(300),
        "{took:?}"
    );
}

#[test]
fn a_tunnel_is_pooled_for_its_origin_alone() {
    let tls = tls_origin();
    let proxy = Tinyproxy::start();
    let client = client_via(Proxy::https(&proxy.url()).unwrap())
        .build()
        .unwrap();
    for path in ["/one", "/two"] {
        let body = text(&client, &tls.url_for("localhost", path)).unwrap();
        assert_eq!(body, format!("tls {path} auth=none"));
    }
    // The second request went down the first one's tunnel.
    assert_eq!(tls.handshakes(), 1);
    // Another origin (the same server by another name) gets a tunnel of
    // its own.
    assert_eq!(
        text(&client, &tls.url("/three")).unwrap(),
        "tls /three auth=none"
    );
    assert_eq!(tls.handshakes(), 2);
    assert_eq!(client.stats().open_connections, 2);
}

/// A request's own `Proxy-Authorization` (the caller's, not the proxy
/// URL's) is a proxy's credential: a proxy that forwards the request gets
/// it, in place of the URL's; through a tunnel no proxy reads the request,
/// and it goes nowhere — never to the origin, over HTTP/1.1 (a CONNECT
/// tunnel, SOCKS5) or HTTP/2.
#[test]
fn a_requests_own_proxy_authorization_never_reaches_an_origin_through_a_tunnel() {
    let own = "Basic b3duOmNyZWRlbnRpYWxz";
    let get = |client: &Client, url: &str| {
        let response = client
            .get(url)
            .header("proxy-authorization", own)
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().wait().unwrap()
    };
    let tls = tls_origin();
    let connect = connect_answering(b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), Some(tls.addr()));
    let client = client_via(Proxy::all(&format!("http://u:p@{}", connect.addr())).unwrap())
        .build()
        .unwrap();
    assert_eq!(
        get(&client, &tls.url_for("localhost", "/c")),
        "tls /c auth=none"
    );
    let origin = origin();
    let socks = Microsocks::start();
    let client = client_via(Proxy::all(&socks.url()).unwrap())
        .build()
        .unwrap();
    assert_eq!(get(&client, &origin.url("/s")), "GET /s via=none auth=none");
    let pem = support::real::PemFiles::of(&certs().valid);
    let hypercorn = support::real::Hypercorn::start_tls(&pem.cert(), &pem.key());
    let tinyproxy = Tinyproxy::start();
    let client = client_via(Proxy::https(&tinyproxy.url()).unwrap())
        .build()
        .unwrap();
    let headers = get(&client, &hypercorn.https_url_for("localhost", "/headers"));
    assert!(headers.contains("user-agent: tickless/"), "{headers}");
    assert!(
        !headers.to_ascii_lowercase().contains("proxy-authorization"),
        "{headers}"
    );
    // Forwarded, in place of the URL's.
    let forwarding =
        TestServer::respond(|request| ok(request.header("proxy-authorization").unwrap_or("none")));
    let client = client_via(Proxy::http(&format!("http://u:p@{}", forwarding.addr())).unwrap())
        .build()
        .unwrap();
    assert_eq!(get(&client, "http://a.invalid/"), own);
}

#[test]
fn http2_goes_inside_a_connect_tunnel_and_its_connection_is_shared() {
    let pem = support::real::PemFiles::of(&certs().valid);
    let hypercorn = support::real::Hypercorn::start_tls(&pem.cert(), &pem.key());
    let proxy = Tinyproxy::start();
    let client = client_via(Proxy::https(&proxy.url()).unwrap())
        .build()
        .unwrap();
    for _ in 0..3 {
        let response = client
            .get(hypercorn.https_url_for("localhost", "/bytes/10"))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.bytes().wait().unwrap(), "abcdefghij");
    }
    // One tunnel, one HTTP/2 connection, for all three.
    assert_eq!(client.stats().open_connections, 1);
}

/// A request whose spare tunnel the proxy refuses (a proxy that admits
/// one tunnel per client at a time) goes on the origin's HTTP/2 connection
/// once there is one — as a request whose spare connection fails its
/// connect or its TLS handshake does: nothing of it was sent.
#[test]
fn a_refused_spare_tunnel_leaves_its_request_to_the_shared_http2_connection() {
    let pem = support::real::PemFiles::of(&certs().valid);
    let hypercorn = support::real::Hypercorn::start_tls(&pem.cert(), &pem.key());
    let to = hypercorn.tls_addr();
    // The refusal waits until the first request has its answer, so that
    // the HTTP/2 connection is there when it comes.
    let (open_gate, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let proxy = TestServer::start(Behaviour::custom(move |mut stream, index| {
        if read_head(&mut stream).is_none() {
            return;
        }
        if index == 0 {
            let _ = stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            if let Ok(upstream) = std::net::TcpStream::connect(to) {
                relay(stream, upstream, copy_all);
            }
            return;
        }
        let _ = gate.lock().unwrap().recv_timeout(CEILING);
        let _ = stream.write_all(b"HTTP/1.1 503 One Tunnel Only\r\nContent-Length: 0\r\n\r\n");
    }));
    let client = client_via(Proxy::https(&format!("http://{}", proxy.addr())).unwrap())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let url = hypercorn.https_url_for("localhost", "/bytes/10");
    // Both go before either connection is known to speak HTTP/2: each
    // opens one.
    let (done, results) = std::sync::mpsc::channel();
    for _ in 0..2 {
        let future = client.get(&url).send();
        let done = done.clone();
        std::thread::spawn(move || {
            let result = future.wait().and_then(|response| {
                let version = response.version();
                response.bytes().wait().map(|body| (version, body))
            });
            let _ = done.send(result.map_err(|e| chain_text(&e)));
        });
    }
    let first = results.recv_timeout(CEILING).unwrap().unwrap();
    assert_eq!(first, (http::Version::HTTP_2, "abcdefghij".into()));
    assert!(proxy.wait_for_accepted(2, CEILING), "a second tunnel asked");
    open_gate.send(()).unwrap();
    let second = results.recv_timeout(CEILING).unwrap();
    assert_eq!(
        second,
        Ok((http::Version::HTTP_2, "abcdefghij".into())),
        "the refused request waits for the shared connection"
    );
    assert_eq!(client.stats().open_connections, 1);
}

#[test]
fn a_socks_proxy_that_never_answers_is_a_proxy_handshake_timeout() {
    // A proxy that takes the connection and says nothing: the SOCKS5
    // exchange (a plain origin: no TLS anywhere) stalls, which is the
    // proxy's timeout, not a TLS one (CONNECT: the test above).
    let silent = stalling_proxy();
    let timeout = Duration::from_millis(200);
    let proxy = format!("socks5h://{}", silent.addr());
    let client = client_via(Proxy::all(&proxy).unwrap())
        .handshake_timeout(timeout)
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let error = client
        .get("http://origin.invalid/")
        .send()
        .wait()
        .unwrap_err();
    assert_eq!(error.timeout_kind(), Some(tickless::TimeoutKind::Handshake));
    assert!(!error.to_string().contains("TLS"), "{error}");
    let (named, _, source) = proxy_error(error);
    assert_eq!(named, proxy);
    assert!(
        matches!(&source, ProxyError::HandshakeTimeout(t) if t.duration == timeout),
        "{source:?}"
    );
    client.close();
}

/// A SOCKS5 proxy double that relays to `origin`, and whose success reply
/// goes in one write with the origin's first bytes: it waits for them
/// before answering (a proxy that answers once the origin has spoken, or
/// whose reply and relayed bytes meet in one read of the client's).
fn socks_replying_with_the_origins_first_bytes(origin: std::net::SocketAddr) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        let mut greeting = [0u8; 3];
        if stream.read_exact(&mut greeting).is_err() {
            return;
        }
        let _ = stream.write_all(&[5, 0]);
        let mut request = [0u8; 512];
        if stream.read(&mut request).is_err() {
            return;
        }
        let Ok(mut upstream) = std::net::TcpStream::connect(origin) else {
            return;
        };
        let mut first = [0u8; 1024];
        let Ok(n) = upstream.read(&mut first) else {
            return;
        };
        let mut reply = vec![5, 0, 0, 1, 127, 0, 0, 1, 0, 0];
        reply.extend_from_slice(&first[..n]);
        if stream.write_all(&reply).is_err() {
            return;
        }
        relay(stream, upstream, copy_all);
    }))
}

/// A CONNECT proxy double: reads the CONNECT, writes `answer`, then relays
/// to `origin` if there is one, or else closes.
fn connect_answering(answer: Vec<u8>, origin: Option<std::net::SocketAddr>) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, index| {
        if RequestReader::new(index).read_request(&mut stream).is_err()
            || stream.write_all(&answer).is_err()
        {
            return;
        }
        match origin.map(std::net::TcpStream::connect) {
            Some(Ok(upstream)) => relay(stream, upstream, copy_all),
            _ => {
                let _ = stream.shutdown(std::net::Shutdown::Write);
                drain(&mut stream);
            }
        }
    }))
}

/// What comes with a CONNECT's answer, or after it: a 2xx's
/// `Content-Length` announces no body (RFC 9110 §9.3.6: the client ignores
/// it, and what follows is the tunnel's), so TLS with the origin goes on,
/// the proxy's credentials left outside; a proxy that closes after its 200
/// cuts the TLS handshake, and one that sends bytes that are not TLS has
/// them refused by the TLS layer, each error naming the proxy (never its
/// credentials); a 407 whose
/// body is larger than anything the client buffers is the proxy's refusal,
/// read from its head alone; a proxy that closes in the middle of its
/// answer is said to have (not "before answering"). A tunnel that failed
/// closes.
#[test]
fn what_comes_with_a_connect_answer_is_the_tunnels_or_is_ignored() {
    let tls = tls_origin();
    let port = tls.addr().port();
    let via = |proxy: &TestServer| {
        client_via(Proxy::all(&format!("http://user:secret@{}", proxy.addr())).unwrap())
            .request_timeout(CEILING)
            .build()
            .unwrap()
    };
    let url = format!("https://localhost:{port}/tunnelled");

    let announcing = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec();
    let proxy = connect_answering(announcing, Some(tls.addr()));
    let client = via(&proxy);
    assert_eq!(text(&client, &url).unwrap(), "tls /tunnelled auth=none");
    client.close();

    let mut refusal = b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                        Proxy-Authenticate: Basic\r\nContent-Length: 200000\r\n\r\n"
        .to_vec();
    refusal.resize(refusal.len() + 200_000, b'x');
    let cases = [
        ("a 200, then the end", b"HTTP/1.1 200 OK\r\n\r\n".to_vec()),
        (
            "a 200 and bytes not TLS",
            b"HTTP/1.1 200 OK\r\n\r\nhello".to_vec(),
        ),
        ("a 407 and its long body", refusal),
        (
            "half a status line, then the end",
            b"HTTP/1.1 200 Co".to_vec(),
        ),
    ];
    for (what, answer) in cases {
        let proxy = connect_answering(answer, None);
        let client = via(&proxy);
        let error = client.get(&url).send().wait().unwrap_err();
        // Named, its credentials not shown.
        let named = format!("proxy http://***@{}", proxy.addr());
        assert!(chain_text(&error).contains(&named), "{what}: {error}");
        assert!(!chain_text(&error).contains("secret"), "{what}: {error}");
        match (what, &error) {
            // The origin's handshake cut: nothing of the request sent.
            ("a 200, then the end", Error::Connect { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof, "{what}")
            }
            ("a 200 and bytes not TLS", Error::Tls { source, .. }) => assert_eq!(
                *source,
                rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
                "{what}"
            ),
            (
                "a 407 and its long body",
                Error::Proxy {
                    source: ProxyError::AuthenticationRequired { .. },
                    ..
                },
            ) => {}
            (
                "half a status line, then the end",
                Error::Proxy {
                    source: ProxyError::Io(source),
                    ..
                },
            ) => {
                assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof);
                let said = source.to_string();
                assert!(
                    said.contains("in the middle of its answer to CONNECT (15 bytes of it came)"),
                    "{said}"
                );
            }
            (what, error) => panic!("{what}: {error:?}"),
        }
        assert!(proxy.wait_for_open(0, CEILING), "{what}: left open");
        assert_settles(&client, CEILING);
        client.close();
    }
}

/// A proxy that closes or resets its connection before its answer is
/// complete — a CONNECT's, or a SOCKS5 handshake's — failed the request
/// before any response, as a server's close or reset before the head
/// does: a GET with a retry policy goes again, on a new connection to
/// the proxy, which tunnels this time.
#[test]
fn a_proxy_that_ends_its_connection_mid_handshake_is_retried_as_a_reset_before_any_response() {
    let tls = tls_origin();
    let origin = origin();
    let reset = |stream: std::net::TcpStream| {
        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    };
    let tls_addr = tls.addr();
    let connect = TestServer::start(Behaviour::custom(move |mut stream, index| {
        if RequestReader::new(index).read_request(&mut stream).is_err() {
            return;
        }
        match index {
            0 => drop(stream),
            1 => reset(stream),
            _ => {
                if stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").is_ok() {
                    tunnel_to(tls_addr, stream);
                }
            }
        }
    }));
    let origin_addr = origin.addr();
    let socks = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut greeting = [0u8; 3];
        if stream.read_exact(&mut greeting).is_err() {
            return;
        }
        match index {
            0 => drop(stream),
            1 => reset(stream),
            _ => {
                if socks_reply(&mut stream, 0) {
                    tunnel_to(origin_addr, stream);
                }
            }
        }
    }));
    let through = [(connect.addr(), tls_addr), (socks.addr(), origin_addr)];
    each_answers(through, http::Method::GET, 3);
    assert_eq!(connect.connections_accepted(), 3);
    assert_eq!(socks.connections_accepted(), 3);
}

/// A proxy that fails before its tunnel is up — closes before its answer,
/// answers `CONNECT` 403, refuses in SOCKS5 — failed a request no byte of
/// which reached the origin: it says so (`is_unprocessed`), and a retry
/// policy sends even a POST again. Once the tunnel is up, an origin that
/// closes may have had the request: not so.
#[test]
fn a_proxy_failing_before_its_tunnel_leaves_even_a_post_unprocessed() {
    let origin = origin();
    let refusing = TestServer::respond(|_| response(403, &[], b"no tunnels here"));
    let (_, refused) = connect_through(&refusing);
    assert!(refused.is_unprocessed(), "{refused}");
    let socks_refusing = socks_replying(0x02);
    let client = client_via(Proxy::all(&format!("socks5://{}", socks_refusing.addr())).unwrap())
        .build()
        .unwrap();
    let refused = client
        .post(origin.url("/"))
        .body("once")
        .send()
        .wait()
        .unwrap_err();
    assert!(refused.is_unprocessed(), "{refused}");
    client.close();

    let tls = tls_origin();
    let tls_addr = tls.addr();
    let connect = TestServer::start(Behaviour::custom(move |mut stream, index| {
        if RequestReader::new(index).read_request(&mut stream).is_err() || index == 0 {
            return;
        }
        if stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").is_ok() {
            tunnel_to(tls_addr, stream);
        }
    }));
    let origin_addr = origin.addr();
    let socks = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut greeting = [0u8; 3];
        if stream.read_exact(&mut greeting).is_err() || index == 0 {
            return;
        }
        if socks_reply(&mut stream, 0) {
            tunnel_to(origin_addr, stream);
        }
    }));
    let through = [(connect.addr(), tls_addr), (socks.addr(), origin_addr)];
    each_answers(through, http::Method::POST, 2);
    assert_eq!(connect.connections_accepted(), 2);
    assert_eq!(socks.connections_accepted(), 2);

    // The tunnel up, the origin reads the request and closes.
    let closing = TestServer::start(Behaviour::custom(|mut stream, index| {
        let _ = RequestReader::new(index).read_request(&mut stream);
    }));
    let closing_addr = closing.addr();
    let tunnelling = TestServer::start(Behaviour::custom(move |mut stream, _| {
        let mut greeting = [0u8; 3];
        if stream.read_exact(&mut greeting).is_ok() && socks_reply(&mut stream, 0) {
            tunnel_to(closing_addr, stream);
        }
    }));
    let client = client_via(Proxy::all(&format!("socks5://{}", tunnelling.addr())).unwrap())
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{}/", closing_addr.port());
    let lost = client.post(&url).body("once").send().wait().unwrap_err();
    assert!(!lost.is_unprocessed(), "{lost}");
    client.close();
}

/// A `method` request to a TLS origin through a CONNECT proxy and to a
/// plain one through a SOCKS5 proxy (`through`: each proxy's address and
/// its origin's, `tls_origin()`'s then `origin()`'s), with a client that
/// makes up to `attempts`: each answered 200 by its origin.
fn each_answers(
    through: [(std::net::SocketAddr, std::net::SocketAddr); 2],
    method: http::Method,
    attempts: u32,
) {
    let [(connect, tls_origin), (socks, origin)] = through;
    let cases = [
        (
            format!("http://{connect}"),
            format!("https://localhost:{}/t", tls_origin.port()),
            "tls /t auth=none".to_owned(),
        ),
        (
            format!("socks5://{socks}"),
            format!("http://127.0.0.1:{}/s", origin.port()),
            format!("{method} /s via=none auth=none"),
        ),
    ];
    for (proxy, url, expected) in cases {
        let client = client_via(Proxy::all(&proxy).unwrap())
            .retry(tickless::retry::Policy::attempts(attempts))
            .request_timeout(CEILING)
            .build()
            .unwrap();
        let response = client.request(method.clone(), &url).send().wait().unwrap();
        assert_eq!(response.status(), 200, "{proxy}");
        assert_eq!(response.text().wait().unwrap(), expected, "{proxy}");
        client.close();
    }
}

/// A SOCKS5 proxy's side of the handshake after the client's greeting:
/// no authentication, the CONNECT read, `reply` (0: granted) sent. False
/// if the client went.
fn socks_reply(stream: &mut std::net::TcpStream, reply: u8) -> bool {
    let mut request = [0u8; 10];
    stream.write_all(&[5, 0]).is_ok()
        && stream.read_exact(&mut request).is_ok()
        && stream
            .write_all(&[5, reply, 0, 1, 127, 0, 0, 1, 0, 0])
            .is_ok()
}

/// A proxy's tunnel, once it has answered: relays `stream` to `target`.
fn tunnel_to(target: std::net::SocketAddr, mut stream: std::net::TcpStream) {
    if let Ok(upstream) = std::net::TcpStream::connect(target) {
        let _ = stream.flush();
        relay(stream, upstream, copy_all);
    }
}

/// A proxy that reports the origin out of reach — a CONNECT answered 502,
/// a SOCKS5 reply of connection refused — failed a request that never
/// left the client, as a connect error does: retried whatever its method,
/// a POST going again on a new connection to the proxy, which tunnels
/// this time.
#[test]
fn a_proxy_that_cannot_reach_the_origin_is_retried_as_a_connect_error() {
    let tls = tls_origin();
    let origin = origin();
    let tls_addr = tls.addr();
    let connect = TestServer::start(Behaviour::custom(move |mut stream, index| {
        if RequestReader::new(index).read_request(&mut stream).is_err() {
            return;
        }
        let answer: &[u8] = match index {
            0 => b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n",
            _ => b"HTTP/1.1 200 OK\r\n\r\n",
        };
        if stream.write_all(answer).is_ok() && index > 0 {
            tunnel_to(tls_addr, stream);
        }
    }));
    let origin_addr = origin.addr();
    let socks = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut greeting = [0u8; 3];
        // Connection refused, then granted.
        let reply = if index == 0 { 5 } else { 0 };
        if stream.read_exact(&mut greeting).is_ok() && socks_reply(&mut stream, reply) && reply == 0
        {
            tunnel_to(origin_addr, stream);
        }
    }));
    let through = [(connect.addr(), tls_addr), (socks.addr(), origin_addr)];
    each_answers(through, http::Method::POST, 2);
    assert_eq!(connect.connections_accepted(), 2);
    assert_eq!(socks.connections_accepted(), 2);
}

/// A CONNECT request that goes out slowly — a `User-Agent` of 16 MiB, more
/// than the sockets' buffers hold — while the proxy, before it reads any
/// of it, sends its 200 and, after it, a handshake record of 5,000 bytes
/// that is no handshake message: the client reads on while it writes, so
/// what came past the answer is longer than one `read_tls` takes (4 KiB),
/// and all of it goes to TLS, whose refusal of the record is the error.
/// (Cut after 4 KiB, the record waited for the rest, dropped, and the
/// handshake waited for the proxy.) No origin could have sent these bytes
/// — the ClientHello goes only once the tunnel is open — so this is the
/// one way so much comes before TLS starts.
#[test]
fn every_byte_that_came_past_a_slow_connects_answer_goes_to_tls() {
    let proxy = TestServer::start(Behaviour::custom(|mut stream, _| {
        let mut answer = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        // Handshake type 0xff of length 0xffffff: over any limit.
        answer.extend_from_slice(&[0x16, 0x03, 0x03, 0x13, 0x88]);
        answer.resize(answer.len() + 5000, 0xff);
        if stream.write_all(&answer).is_err() {
            return;
        }
        // Now the request (no CRLF in its one long field), then whatever
        // follows until the client closes.
        let mut chunk = vec![0u8; 64 * 1024];
        let mut tail = Vec::new();
        while !tail.ends_with(b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    tail.extend_from_slice(&chunk[..n]);
                    tail.drain(..tail.len().saturating_sub(4));
                }
            }
        }
        drain(&mut stream);
    }));
    let client = client_via(Proxy::all(&format!("http://{}", proxy.addr())).unwrap())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let error = client
        .get("https://localhost:1/")
        .header("user-agent", "a".repeat(16 << 20))
        .send()
        .wait()
        .unwrap_err();
    match &error {
        Error::Tls { source, .. } => assert!(
            matches!(source, rustls::Error::InvalidMessage(_)),
            "{error:?}"
        ),
        other => panic!("expected Error::Tls, got {other:?}"),
    }
    assert!(proxy.wait_for_open(0, CEILING), "left open");
    client.close();
}

/// HTTP/2 with prior knowledge through SOCKS5: an `h2` server sends its
/// SETTINGS as soon as it accepts (RFC 9113 §3.4 lets it), so the tunnel's
/// first bytes can come with the proxy's reply. They are the origin's
/// connection preface, not bytes before any request, and HTTP/2 reads them.
#[test]
fn http2_prior_knowledge_through_socks5_takes_the_origins_settings_that_came_with_the_reply() {
    let h2 = support::h2_server::H2Server::start(|stream| {
        support::h2_server::answer(stream, 200, b"over h2 through socks")
    });
    let socks = socks_replying_with_the_origins_first_bytes(h2.addr());
    let client = client_via(Proxy::all(&format!("socks5h://{}", socks.addr())).unwrap())
        .http2_prior_knowledge()
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let response = client.get(h2.url("/")).send().wait().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.text().wait().unwrap(), "over h2 through socks");
    // To HTTP/1.1 the same bytes are a server speaking before the request.
    let client = client_via(Proxy::all(&format!("socks5h://{}", socks.addr())).unwrap())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let (_, _, source) = proxy_error(client.get(h2.url("/")).send().wait().unwrap_err());
    assert!(
        matches!(&source, ProxyError::MalformedAnswer(m) if m.contains("before any request")),
        "{source:?}"
    );
}

/// A SOCKS5 proxy that answers before it is asked: its method selection
/// and its CONNECT reply in one write, right after the greeting. The
/// client still sends its CONNECT request before it takes the reply as
/// the answer to it — not its HTTP request in its place.
#[test]
fn a_socks_reply_that_comes_before_the_request_is_taken_once_the_request_is_sent() {
    let origin = origin();
    let to = origin.addr();
    let (asked, asked_for) = std::sync::mpsc::channel();
    let socks = TestServer::start(Behaviour::custom(move |mut stream, _| {
        let mut greeting = [0u8; 3];
        if stream.read_exact(&mut greeting).is_err() {
            return;
        }
        let _ = stream.write_all(&[5, 0, 5, 0, 0, 1, 127, 0, 0, 1, 0, 0]);
        // The CONNECT request for an IPv4 address is 10 bytes.
        let mut request = [0u8; 10];
        if stream.read_exact(&mut request).is_err() {
            return;
        }
        let _ = asked.send(request.to_vec());
        if let Ok(upstream) = std::net::TcpStream::connect(to) {
            relay(stream, upstream, copy_all);
        }
    }));
    let client = client_via(Proxy::all(&format!("socks5h://{}", socks.addr())).unwrap())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    let body = text(&client, &origin.url("/early")).unwrap();
    assert_eq!(body, "GET /early via=none auth=none");
    let request = asked_for.recv_timeout(CEILING).unwrap();
    let port = to.port().to_be_bytes();
    assert_eq!(request, [5, 1, 0, 1, 127, 0, 0, 1, port[0], port[1]]);
}

/// `Proxy::custom_http_auth`: its value is the `Proxy-Authorization` the
/// proxy gets — with each request it forwards and on its `CONNECT` — in
/// place of the `Basic` one of the URL's credentials, never reaching an
/// origin, and hidden when the proxy is printed.
#[test]
fn a_proxys_custom_authorization_goes_to_it_in_place_of_the_urls_basic() {
    let token = http::HeaderValue::from_static("Bearer secret-token");
    let proxy = TestServer::respond(|request| {
        let auth = request.header("proxy-authorization").unwrap_or("none");
        match request.method.as_str() {
            // A tunnel refused, as a proxy refuses a token it does not take.
            "CONNECT" => response(407, &[("x-auth", auth)], b""),
            _ => ok(auth),
        }
    });
    let url = format!("http://user:pass@{}", proxy.addr());
    let custom = Proxy::all(&url).unwrap().custom_http_auth(token.clone());
    assert!(
        !format!("{custom:?}").contains("secret-token"),
        "{custom:?}"
    );
    let client = client_via(custom).build().unwrap();
    assert_eq!(
        text(&client, "http://a.invalid/").unwrap(),
        "Bearer secret-token"
    );
    let error = client
        .get("https://b.invalid:8443/")
        .send()
        .wait()
        .unwrap_err();
    assert!(matches!(error, Error::Proxy { .. }), "{error:?}");
    let connect = &proxy.requests()[1];
    assert_eq!(connect.method, "CONNECT");
    assert_eq!(
        connect.header("proxy-authorization"),
        Some("Bearer secret-token")
    );

    // Without it, the URL's credentials, as before.
    let basic = client_via(Proxy::all(&url).unwrap()).build().unwrap();
    assert_eq!(
        text(&basic, "http://a.invalid/").unwrap(),
        support::real::basic_auth("user", "pass")
    );
}
