//! `ClientBuilder::default_headers`: headers sent with every request
//! unless the request has its own of the name — on the first hop, on
//! redirects (credentials dropped across origins as a request's own are),
//! on retries, over HTTP/1.1 and HTTP/2 — and the ones `build` refuses.

mod support;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tickless::{retry, Client};

fn headers(fields: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        map.append(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    map
}

fn client_with(defaults: HeaderMap) -> Client {
    Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .default_headers(defaults)
        .build()
        .unwrap()
}

/// Every value of a default goes with a request that has none of its
/// own, with headers of its own or not; a request's own field of a name
/// replaces all the default's values of it. A default `User-Agent`
/// replaces the client's own (also one given to `user_agent`), and a
/// default `Accept-Encoding` the client's, as a request's own do.
#[test]
fn defaults_go_with_every_request_unless_it_has_its_own() {
    let server = TestServer::respond(|_| ok(""));
    let client = Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .user_agent(HeaderValue::from_static("builder/1"))
        .default_headers(headers(&[
            ("x-team", "a"),
            ("x-team", "b"),
            ("user-agent", "defaults/1"),
            ("accept-encoding", "identity"),
        ]))
        .build()
        .unwrap();
    client.get(server.url("/bare")).send().wait().unwrap();
    client
        .get(server.url("/other"))
        .header("x-other", "1")
        .send()
        .wait()
        .unwrap();
    client
        .get(server.url("/own"))
        .header("x-team", "mine")
        .header("user-agent", "request/1")
        .send()
        .wait()
        .unwrap();
    client.close();
    let requests = server.requests();
    let seen: Vec<_> = requests
        .iter()
        .map(|r| {
            (
                r.target.clone(),
                r.header_all("x-team"),
                r.header("user-agent"),
                r.header("accept-encoding"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "/bare".to_owned(),
                vec!["a", "b"],
                Some("defaults/1"),
                Some("identity")
            ),
            (
                "/other".to_owned(),
                vec!["a", "b"],
                Some("defaults/1"),
                Some("identity")
            ),
            (
                "/own".to_owned(),
                vec!["mine"],
                Some("request/1"),
                Some("identity")
            ),
        ]
    );
    assert_eq!(requests[1].header("x-other"), Some("1"));
}

/// The credentials of a request's URL are its own `Authorization`: a
/// default one goes only with requests that have neither.
#[test]
fn a_urls_credentials_win_over_a_default_authorization() {
    let server = TestServer::respond(|_| ok(""));
    let client = client_with(headers(&[("authorization", "Bearer default")]));
    let with_userinfo = server
        .url("/userinfo")
        .replacen("http://", "http://u:p@", 1);
    client.get(with_userinfo.as_str()).send().wait().unwrap();
    client.get(server.url("/plain")).send().wait().unwrap();
    client.close();
    let seen: Vec<_> = server
        .requests()
        .iter()
        .map(|r| {
            (
                r.target.clone(),
                r.header("authorization").map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("/userinfo".to_owned(), Some("Basic dTpw".to_owned())),
            ("/plain".to_owned(), Some("Bearer default".to_owned())),
        ]
    );
}

/// A later call replaces the names it gives and keeps the others.
#[test]
fn a_later_call_replaces_the_names_it_gives() {
    let server = TestServer::respond(|_| ok(""));
    let client = Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .default_headers(headers(&[("x-a", "1"), ("x-b", "1"), ("x-b", "2")]))
        .default_headers(headers(&[("x-b", "3")]))
        .build()
        .unwrap();
    client.get(server.url("/")).send().wait().unwrap();
    client.close();
    let request = &server.requests()[0];
    assert_eq!(request.header_all("x-a"), ["1"]);
    assert_eq!(request.header_all("x-b"), ["3"]);
}

/// A redirect carries the defaults as the request's own headers: all of
/// them within the origin, and to another origin all but the credentials
/// (`Authorization`, `Cookie`, `Proxy-Authorization`).
#[test]
fn defaults_follow_redirects_and_credentials_stay_within_one_origin() {
    let elsewhere = TestServer::respond(|_| ok("elsewhere"));
    let elsewhere_url = elsewhere.url("/landing");
    let server = TestServer::respond(move |request| match request.target.as_str() {
        "/start" => response(302, &[("Location", "/same-origin")], b""),
        "/same-origin" => response(307, &[("Location", &elsewhere_url)], b""),
        _ => ok("?"),
    });
    let client = client_with(headers(&[
        ("authorization", "Bearer t"),
        ("cookie", "session=1"),
        ("proxy-authorization", "Basic cDpw"),
        ("x-custom", "kept"),
    ]));
    let response = client.get(server.url("/start")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "elsewhere");
    client.close();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.header("authorization"), Some("Bearer t"));
        assert_eq!(request.header("cookie"), Some("session=1"));
        assert_eq!(request.header("proxy-authorization"), Some("Basic cDpw"));
        assert_eq!(request.header("x-custom"), Some("kept"));
    }
    let landed = &elsewhere.requests()[0];
    assert_eq!(landed.header("authorization"), None);
    assert_eq!(landed.header("cookie"), None);
    assert_eq!(landed.header("proxy-authorization"), None);
    assert_eq!(landed.header("x-custom"), Some("kept"));
}

/// A status retried is sent again with the defaults (the server answers
/// 503 each time; the policy sends the request twice).
#[test]
fn a_retry_carries_the_defaults() {
    let server = TestServer::respond(|_| response(503, &[], b"busy"));
    let client = Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .default_headers(headers(&[("x-attempt-seen", "yes")]))
        .retry(
            retry::Policy::attempts(2)
                .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
                .backoff(Duration::from_millis(1), Duration::from_millis(1))
                .jitter(false),
        )
        .build()
        .unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.status(), 503);
    client.close();
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "retried once");
    for request in &requests {
        assert_eq!(request.header("x-attempt-seen"), Some("yes"));
    }
}

/// A default that would frame every request (`Content-Length`,
/// `Transfer-Encoding`) or name one host for every origin (`Host`) is
/// refused when the client is built, as `build`'s other errors are.
#[test]
fn a_default_host_or_framing_header_is_refused_at_build() {
    for name in ["host", "content-length", "transfer-encoding"] {
        let value = if name == "transfer-encoding" {
            "chunked"
        } else {
            "1"
        };
        let error = Client::builder()
            .default_headers(headers(&[("x-fine", "1"), (name, value)]))
            .build()
            .err()
            .unwrap_or_else(|| panic!("a default {name} was taken"));
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{name}");
        assert!(error.to_string().contains(name), "{error}");
        assert!(error.to_string().contains("default_headers"), "{error}");
    }
}

/// Over HTTP/2 the defaults go as a request's own fields do: a
/// connection-specific one (`Connection`, and what it names) is left out,
/// the rest go.
#[test]
fn over_http2_a_connection_specific_default_is_left_out() {
    let seen = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let server = support::h2_server::H2Server::start({
        let seen = seen.clone();
        move |stream| {
            let names = stream
                .request
                .headers()
                .keys()
                .map(|name| name.as_str().to_owned())
                .filter(|name| name != "user-agent" && name != "accept-encoding")
                .collect();
            seen.lock().unwrap().push(names);
            support::h2_server::answer(stream, 200, b"")
        }
    });
    let client = Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .request_timeout(Duration::from_secs(30))
        .default_headers(headers(&[
            ("connection", "x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("x-team", "a"),
        ]))
        .build()
        .unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    client
        .get(server.url("/"))
        .header("x-own", "1")
        .send()
        .wait()
        .unwrap();
    client.close();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec!["x-team".to_owned()],
            vec!["x-own".to_owned(), "x-team".to_owned()]
        ]
    );
}
