//! Proxies from the environment, read when a client is built (reqwest's
//! convention); a value that is not a proxy URL fails the requests it
//! would take (curl's). One test, alone in its binary: the environment is the
//! process's, and tests of one binary run on parallel threads.

mod support;

use support::*;
use tickless::{Client, Error, InvalidRequest};

const VARS: [&str; 9] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
    "REQUEST_METHOD",
];

fn set_only(vars: &[(&str, &str)]) {
    for name in VARS {
        std::env::remove_var(name);
    }
    for (name, value) in vars {
        std::env::set_var(name, value);
    }
}

/// Which server answered a request to `origin` from a client built now.
fn answered_by(origin: &TestServer, proxy: &TestServer, no_proxy: bool) -> &'static str {
    let builder = Client::builder().event_loops(1);
    let builder = if no_proxy {
        builder.no_proxy()
    } else {
        builder
    };
    let client = builder.build().unwrap();
    let (origin_seen, proxy_seen) = (origin.requests().len(), proxy.requests().len());
    client.get(origin.url("/")).send().wait().unwrap();
    match (
        origin.requests().len() - origin_seen,
        proxy.requests().len() - proxy_seen,
    ) {
        (1, 0) => "origin",
        (0, 1) => "proxy",
        other => panic!("{other:?}"),
    }
}

/// What the `tracing` warnings of this thread (where a client is built,
/// and reads the environment) say while `f` runs; empty without the
/// feature `tracing`.
fn warnings_while(f: impl FnOnce()) -> String {
    #[cfg(feature = "tracing")]
    {
        use tracing_subscriber::util::SubscriberInitExt;

        let captured = Captured::default();
        let writer = captured.clone();
        let guard = tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .set_default();
        f();
        drop(guard);
        captured.text()
    }
    #[cfg(not(feature = "tracing"))]
    {
        f();
        String::new()
    }
}

/// `told` is one warning that `HTTP_PROXY` was ignored under CGI, without
/// the variable's value.
fn ignored_http_proxy_is_told_once(told: &str, value: &str) {
    if cfg!(not(feature = "tracing")) {
        return;
    }
    assert_eq!(told.lines().count(), 1, "{told}");
    assert!(told.contains("WARN"), "{told}");
    assert!(
        told.contains("ignoring HTTP_PROXY because REQUEST_METHOD is set"),
        "{told}"
    );
    assert!(!told.contains(value), "{told}");
}

#[test]
fn the_proxy_environment_is_honoured_by_default_with_reqwests_rules() {
    let origin = TestServer::respond(|_| ok("origin"));
    let proxy = TestServer::respond(|_| ok("proxy"));
    let proxy_url = format!("http://{}", proxy.addr());

    set_only(&[("http_proxy", &proxy_url)]);
    assert_eq!(answered_by(&origin, &proxy, false), "proxy");
    assert!(proxy.requests()[0].target.starts_with("http://127.0.0.1:"));
    // `no_proxy()` on the builder turns the environment off.
    assert_eq!(answered_by(&origin, &proxy, true), "origin");

    set_only(&[("ALL_PROXY", &proxy_url)]);
    assert_eq!(answered_by(&origin, &proxy, false), "proxy");
    // NO_PROXY by address, by CIDR block, and `*`.
    for bypass in ["127.0.0.1", "127.0.0.0/8", "*", "example.com, 127.0.0.1"] {
        set_only(&[("ALL_PROXY", &proxy_url), ("NO_PROXY", bypass)]);
        assert_eq!(answered_by(&origin, &proxy, false), "origin", "{bypass}");
    }
    set_only(&[("ALL_PROXY", &proxy_url), ("no_proxy", "10.0.0.0/8")]);
    assert_eq!(answered_by(&origin, &proxy, false), "proxy");

    // https_proxy is for https:// only.
    set_only(&[("https_proxy", &proxy_url)]);
    assert_eq!(answered_by(&origin, &proxy, false), "origin");

    // httpoxy: in a CGI program HTTP_PROXY is the request's `Proxy:`
    // header, so it is ignored when REQUEST_METHOD is set; http_proxy is not.
    set_only(&[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", &proxy_url)]);
    let told = warnings_while(|| {
        assert_eq!(answered_by(&origin, &proxy, false), "origin");
    });
    ignored_http_proxy_is_told_once(&told, &proxy_url);
    // Once for the client built, not once per request.
    let told = warnings_while(|| {
        let client = Client::builder().event_loops(1).build().unwrap();
        for _ in 0..2 {
            client.get(origin.url("/")).send().wait().unwrap();
        }
    });
    ignored_http_proxy_is_told_once(&told, &proxy_url);
    set_only(&[("REQUEST_METHOD", "GET"), ("http_proxy", &proxy_url)]);
    let told = warnings_while(|| {
        assert_eq!(answered_by(&origin, &proxy, false), "proxy");
    });
    assert_eq!(told, "");
    // Outside CGI, HTTP_PROXY is a setting like any other: nothing to tell.
    set_only(&[("HTTP_PROXY", &proxy_url)]);
    let told = warnings_while(|| {
        assert_eq!(answered_by(&origin, &proxy, false), "proxy");
    });
    assert_eq!(told, "");
    let origin_connections = origin.connections_accepted();
    let proxy_connections = proxy.connections_accepted();

    // A value that is not a proxy URL fails the requests it would take,
    // naming the variable: none goes straight, past the proxy the user
    // meant it to go through (curl refuses too).
    for (variable, value, url) in [
        ("http_proxy", "ftp://nowhere.invalid", origin.url("/")),
        ("HTTP_PROXY", "http://[bad", origin.url("/")),
        (
            "HTTPS_PROXY",
            "not a url",
            format!("https://{}/", origin.authority()),
        ),
    ] {
        // `all_proxy` does not fill in for it either.
        set_only(&[(variable, value), ("all_proxy", &proxy_url)]);
        let client = Client::builder().event_loops(1).build().unwrap();
        let error = client.get(&url).send().wait().unwrap_err();
        // Without TLS an https request is refused before its proxy is
        // looked for (and goes nowhere either): the variable would not
        // take it.
        if cfg!(not(feature = "rustls")) && url.starts_with("https:") {
            assert!(
                matches!(
                    &error,
                    Error::InvalidRequest(InvalidRequest::TlsDisabled(uri)) if *uri == url
                ),
                "{variable}={value}: {error:?}"
            );
            continue;
        }
        assert!(
            matches!(
                &error,
                Error::InvalidRequest(InvalidRequest::ProxyVariable { variable: named, .. })
                    if named == variable
            ),
            "{variable}={value}: {error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("the proxy environment variable {variable} is not a usable proxy URL")
        );
        assert!(
            std::error::Error::source(&error).is_some(),
            "why: {error:?}"
        );
    }
    assert_eq!(origin.connections_accepted(), origin_connections);
    assert_eq!(proxy.connections_accepted(), proxy_connections);
    // Requests it would not take go as they would without it: another
    // scheme's, and hosts `no_proxy` sends straight.
    set_only(&[("HTTPS_PROXY", "not a url")]);
    assert_eq!(answered_by(&origin, &proxy, false), "origin");
    set_only(&[("http_proxy", "http://[bad"), ("no_proxy", "127.0.0.1")]);
    assert_eq!(answered_by(&origin, &proxy, false), "origin");

    a_value_that_is_not_unicode_is_set_all_the_same(&origin, &proxy, &proxy_url);
    set_only(&[]);
}

/// A variable whose value is not Unicode is set all the same, read with
/// U+FFFD for what is not UTF-8 (as percent-decoded credentials are): a
/// proxy host that is then no host fails the requests the variable would
/// take, naming it — neither straight to the origin, nor through
/// `all_proxy`, nor through the upper-case name behind it — and
/// `REQUEST_METHOD` so set is a CGI program's all the same.
fn a_value_that_is_not_unicode_is_set_all_the_same(
    origin: &TestServer,
    proxy: &TestServer,
    proxy_url: &str,
) {
    use std::os::unix::ffi::OsStrExt;
    let not_unicode = std::ffi::OsStr::from_bytes(b"http://proxy\xff.invalid:3128");
    let (origin_connections, proxy_connections) =
        (origin.connections_accepted(), proxy.connections_accepted());
    for (variable, others) in [
        ("http_proxy", &[("all_proxy", proxy_url)][..]),
        ("http_proxy", &[("HTTP_PROXY", proxy_url)]),
        ("ALL_PROXY", &[]),
    ] {
        set_only(others);
        std::env::set_var(variable, not_unicode);
        let client = Client::builder().event_loops(1).build().unwrap();
        let outcome = client.get(origin.url("/")).send().wait();
        assert!(
            matches!(
                &outcome,
                Err(Error::InvalidRequest(InvalidRequest::ProxyVariable { variable: named, .. }))
                    if named == variable
            ),
            "{variable} not Unicode, {others:?}: {outcome:?}"
        );
    }
    assert_eq!(origin.connections_accepted(), origin_connections);
    assert_eq!(proxy.connections_accepted(), proxy_connections);
    set_only(&[("HTTP_PROXY", proxy_url)]);
    std::env::set_var("REQUEST_METHOD", std::ffi::OsStr::from_bytes(b"G\xffT"));
    assert_eq!(answered_by(origin, proxy, false), "origin");
}
