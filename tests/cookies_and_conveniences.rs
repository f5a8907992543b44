//! The rest of the policy layer: cookies kept across hops and requests
//! (against httpbin, and a store of one's own), credentials from the URL,
//! and the conveniences — query, form, JSON, bearer tokens,
//! `error_for_status`, the `User-Agent`.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::real::Httpbin;
use support::tls::{certs, TlsServer};
use support::*;
use tickless::cookie::{CookieStore, Jar, Url};
use tickless::{Client, Error, InvalidRequest};

fn client_with_cookies() -> Client {
    Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .cookie_store(true)
        .build()
        .unwrap()
}

/// The body of a GET of `url`, as text.
fn text_of(client: &Client, url: String) -> String {
    client
        .get(url)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap()
}

#[test]
fn httpbin_cookies_are_kept_across_hops_and_later_requests() {
    let httpbin = Httpbin::start();
    let client = client_with_cookies();
    // `/cookies/set` sets them and redirects to `/cookies`, which echoes
    // what it was sent: the redirect's next hop carries them.
    let response = client
        .get(httpbin.url("/cookies/set?flavour=oat&count=3"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.url().path(), "/cookies");
    let text = response.text().wait().unwrap();
    assert!(text.contains("\"flavour\": \"oat\""), "{text}");
    assert!(text.contains("\"count\": \"3\""), "{text}");
    // A later request of the same client.
    let text = text_of(&client, httpbin.url("/cookies"));
    assert!(text.contains("\"flavour\": \"oat\""), "{text}");
    // Deleted (httpbin expires it), and gone from the next request.
    text_of(&client, httpbin.url("/cookies/delete?flavour"));
    let text = text_of(&client, httpbin.url("/cookies"));
    assert!(!text.contains("flavour"), "{text}");
    assert!(text.contains("\"count\": \"3\""), "{text}");
    client.close();

    // Without a store nothing is kept.
    let plain = Client::builder().event_loops(1).build().unwrap();
    let text = text_of(&plain, httpbin.url("/cookies/set?flavour=oat"));
    assert!(!text.contains("flavour"), "{text}");
    plain.close();
}

#[test]
fn cookies_follow_domain_and_path_rules() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/set" => response(
            200,
            &[
                ("Set-Cookie", "everywhere=1; Path=/"),
                ("Set-Cookie", "admin_only=2; Path=/admin"),
                ("Set-Cookie", "foreign=3; Domain=example.com"),
                ("Set-Cookie", "gone=4; Max-Age=0"),
            ],
            b"",
        ),
        _ => ok(""),
    });
    let client = client_with_cookies();
    client.get(server.url("/set")).send().wait().unwrap();
    client.get(server.url("/page")).send().wait().unwrap();
    client
        .get(server.url("/admin/panel"))
        .send()
        .wait()
        .unwrap();
    let requests = server.requests();
    let cookies = |i: usize| cookies_of(&requests[i]);
    assert_eq!(
        cookies(1),
        ["everywhere=1"],
        "no foreign domain, no expired one"
    );
    assert_eq!(cookies(2), ["admin_only=2", "everywhere=1"]);
    client.close();
}

/// RFC 6265 §5.1.1: `Expires` is read leniently, as the browsers read it.
/// A server that deletes a cookie with a past date, in the standard layout
/// or in one the `cookie` crate does not read (`+0000` for `GMT`: it made
/// the cookie a session cookie, which stayed), sees the next request go
/// without it. Every layout servers use is listed once, in the jar's unit
/// tests (`policy::cookies`, through the `CookieStore` calls the client
/// makes); here the way from a response to the next request.
#[test]
fn a_cookie_deleted_with_a_past_date_in_any_layout_is_not_sent_again() {
    const PAST: [&str; 2] = [
        "Thu, 01 Jan 1970 00:00:00 GMT",
        "Thu, 01 Jan 1970 00:00:00 +0000",
    ];
    let server = TestServer::respond(|request| {
        let target = request.target.as_str();
        if target == "/set" {
            return response(200, &[("Set-Cookie", "x=1"), ("Set-Cookie", "keep=2")], b"");
        }
        match target.strip_prefix("/delete/").map(str::parse::<usize>) {
            Some(Ok(i)) => response(
                200,
                &[("Set-Cookie", &format!("x=; Path=/; Expires={}", PAST[i]))],
                b"",
            ),
            _ => ok(""),
        }
    });
    let client = client_with_cookies();
    for (i, past) in PAST.iter().enumerate() {
        client.get(server.url("/set")).send().wait().unwrap();
        client
            .get(server.url(&format!("/delete/{i}")))
            .send()
            .wait()
            .unwrap();
        client.get(server.url("/next")).send().wait().unwrap();
        let requests = server.requests();
        let next = requests.last().unwrap();
        assert_eq!(next.target, "/next");
        assert_eq!(cookies_of(next), ["keep=2"], "deleted with {past:?}");
    }
    client.close();
}

#[test]
fn a_jar_can_be_shared_and_filled_by_hand() {
    let server = TestServer::respond(|_| ok(""));
    let jar = Arc::new(Jar::new());
    let url = Url::parse(&server.url("/")).unwrap();
    jar.add_cookie_str("handmade=yes; Path=/", &url);
    let client = |jar: &Arc<Jar>| {
        Client::builder()
            .event_loops(1)
            .cookie_provider(jar.clone())
            .build()
            .unwrap()
    };
    let first = client(&jar);
    let second = client(&jar);
    first.get(server.url("/")).send().wait().unwrap();
    second.get(server.url("/")).send().wait().unwrap();
    for request in server.requests() {
        assert_eq!(request.header("cookie"), Some("handmade=yes"));
    }
    // A caller's own Cookie header wins over the store's.
    first
        .get(server.url("/"))
        .header("cookie", "mine=1")
        .send()
        .wait()
        .unwrap();
    assert_eq!(server.requests()[2].header("cookie"), Some("mine=1"));
    first.close();
    second.close();
}

/// The cookies a request carried, sorted (a store keeps no order).
fn cookies_of(request: &RecordedRequest) -> Vec<String> {
    let mut cookies: Vec<String> = request
        .header("cookie")
        .unwrap_or("")
        .split("; ")
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    cookies.sort();
    cookies
}

/// RFC 6265bis §5.7: a `Secure` cookie that comes over plain http is
/// ignored — kept, it would go with the site's https requests, set by
/// whoever could answer in clear — and one set over https never goes over
/// http. `shop.test` is resolved to loopback: loopback itself counts as
/// secure to cookie stores (curl's and the browsers' too).
#[test]
fn a_secure_cookie_is_only_taken_over_https_and_only_sent_over_https() {
    let plain = TestServer::respond(|request| match request.target.as_str() {
        "/set" => response(
            200,
            &[
                ("Set-Cookie", "token=forged; Secure"),
                ("Set-Cookie", "plain=p"),
            ],
            b"",
        ),
        _ => ok(""),
    });
    let secure = TlsServer::respond(&certs().valid, |request| match request.target.as_str() {
        "/set" => response(200, &[("Set-Cookie", "token=real; Secure")], b""),
        _ => ok(""),
    });
    let client = Client::builder()
        .event_loops(1)
        .resolve("shop.test", &[SocketAddr::from(([127, 0, 0, 1], 0))])
        // The test certificate names loopback, not shop.test.
        .danger_accept_invalid_certs(true)
        .cookie_store(true)
        .build()
        .unwrap();
    let over_http = |path: &str| format!("http://shop.test:{}{path}", plain.addr().port());
    let over_https = |path: &str| secure.url_for("shop.test", path);
    for url in [
        over_http("/set"),
        over_https("/page"),
        over_https("/set"),
        over_http("/page"),
        over_https("/page"),
    ] {
        client.get(url).send().wait().unwrap();
    }
    let (plain_requests, secure_requests) = (plain.requests(), secure.tls_requests());
    assert_eq!(
        cookies_of(&secure_requests[0]),
        ["plain=p"],
        "the Secure cookie set over http was kept"
    );
    assert_eq!(
        cookies_of(&plain_requests[1]),
        ["plain=p"],
        "a Secure cookie went over http"
    );
    assert_eq!(cookies_of(&secure_requests[2]), ["plain=p", "token=real"]);
    client.close();
}

/// A store of one's own: records what it was told and answers a constant.
#[derive(Default)]
struct Notebook {
    set: Mutex<Vec<(String, String)>>,
}

impl CookieStore for Notebook {
    fn set_cookies(&self, url: &Url, set_cookie: &mut dyn Iterator<Item = &http::HeaderValue>) {
        let mut set = self.set.lock().unwrap();
        for value in set_cookie {
            set.push((url.path().to_owned(), value.to_str().unwrap().to_owned()));
        }
    }

    fn cookies(&self, url: &Url) -> Option<http::HeaderValue> {
        (url.path() != "/none").then(|| http::HeaderValue::from_static("from=notebook"))
    }
}

#[test]
fn a_cookie_store_of_ones_own_is_asked_for_every_hop() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/start" => response(302, &[("Location", "/none"), ("Set-Cookie", "a=1")], b""),
        _ => response(200, &[("Set-Cookie", "b=2")], b""),
    });
    let notebook = Arc::new(Notebook::default());
    let client = Client::builder()
        .event_loops(1)
        .cookie_provider(notebook.clone())
        .build()
        .unwrap();
    client.get(server.url("/start")).send().wait().unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("cookie"), Some("from=notebook"));
    assert_eq!(requests[1].header("cookie"), None, "chosen for /none");
    assert_eq!(
        *notebook.set.lock().unwrap(),
        [
            ("/start".to_owned(), "a=1".to_owned()),
            ("/none".to_owned(), "b=2".to_owned())
        ]
    );
    client.close();
}

#[test]
fn userinfo_becomes_basic_auth_and_never_reaches_the_request_line() {
    let server = TestServer::respond(|_| ok(""));
    let client = Client::builder().event_loops(1).build().unwrap();
    let url = server.url("/private").replace("://", "://us%40er:p%3Ass@");
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(response.url().to_string(), server.url("/private"));
    let request = &server.requests()[0];
    assert_eq!(request.target, "/private");
    assert_eq!(request.header("host"), Some(server.authority().as_str()));
    // Percent-decoded before encoding: `us@er:p:ss`.
    assert_eq!(
        request.header("authorization"),
        Some(support::real::basic_auth("us@er", "p:ss").as_str())
    );
    client.close();

    let httpbin = Httpbin::start();
    let client = Client::builder().event_loops(1).build().unwrap();
    let good = httpbin
        .url("/basic-auth/alice/wonder")
        .replace("://", "://alice:wonder@");
    assert_eq!(client.get(good).send().wait().unwrap().status(), 200);
    let bad = httpbin
        .url("/basic-auth/alice/wonder")
        .replace("://", "://alice:land@");
    assert_eq!(client.get(bad).send().wait().unwrap().status(), 401);
    client.close();
}

/// A userinfo written with what a URL parser percent-encodes there and
/// `http::Uri` refuses — a space, `"`, `<`, `>`, `` ` ``, `{`, `}`, `^`,
/// `|`, a character that is not ASCII: a generated password, pasted as it
/// is — is read as the URL standard reads it (encoded, as reqwest and
/// curl take it): the credentials sent are the ones written, in UTF-8.
#[test]
fn a_userinfo_written_with_what_a_url_parser_encodes_is_sent_as_written() {
    let server = TestServer::respond(|_| ok(""));
    let client = Client::builder().event_loops(1).build().unwrap();
    let (user, password) = ("j\u{f6}", "p^s s{|}\"<>`\u{e4}%41:x");
    let url = server
        .url("/private")
        .replace("://", &format!("://{user}:{password}@"));
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(response.url().to_string(), server.url("/private"));
    let request = &server.requests()[0];
    assert_eq!(request.target, "/private");
    // An escape written (`%41`) is decoded, as in any userinfo.
    let sent = support::real::basic_auth("j\u{f6}", "p^s s{|}\"<>`\u{e4}A:x");
    assert_eq!(request.header("authorization"), Some(sent.as_str()));
    client.close();
}

/// RFC 7617 §2: a user-id containing a colon is invalid — the server
/// takes the first `:` for the end of the name, and the rest for the
/// password. `basic_auth` refuses it before anything is sent, and never
/// shows it (a caller who wrote `"name:password"` as the name would see the
/// password); a colon in the password is the password's own.
#[test]
fn a_basic_auth_user_name_with_a_colon_is_refused_before_anything_is_sent() {
    let server = TestServer::respond(|_| ok(""));
    let client = Client::builder().event_loops(1).build().unwrap();
    let error = client
        .get(server.url("/"))
        .basic_auth("alice:s3cret", None)
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidRequest(InvalidRequest::BasicAuthUser)),
        "{error:?}"
    );
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("':'"), "{shown}");
    assert!(server.requests().is_empty());
    client
        .get(server.url("/"))
        .basic_auth("alice", Some("p:w"))
        .send()
        .wait()
        .unwrap();
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(support::real::basic_auth("alice", "p:w").as_str())
    );
    client.close();
}

/// RFC 7617 §2 forbids control characters in either part: `basic_auth`
/// refuses a CR, LF, NUL or DEL in the name or the password, as it does
/// the userinfo's decoded ones, before anything is sent.
#[test]
fn basic_auth_credentials_with_a_control_character_are_refused_before_anything_is_sent() {
    let server = TestServer::respond(|_| ok(""));
    let client = Client::builder().event_loops(1).build().unwrap();
    for (user, password) in [
        ("al\r\nice", None),
        ("alice\0", Some("pw")),
        ("alice", Some("p\nw")),
        ("alice", Some("pw\u{7f}")),
    ] {
        let error = client
            .get(server.url("/"))
            .basic_auth(user, password)
            .send()
            .wait()
            .unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest(InvalidRequest::BasicAuthUser)),
            "{user:?} {password:?}: {error:?}"
        );
    }
    assert!(server.requests().is_empty());
    client.close();
}

/// The same rule for credentials in the URI's userinfo, percent-decoded:
/// `u%3Ax` would reach the server as the user `u` and a password
/// beginning `x:`, and a decoded CR, LF or NUL is a control character,
/// which RFC 7617 §2 forbids in either part. The request fails with a
/// typed error, nothing sent to that URI — the first hop's, or a
/// redirect's `Location`, where the chain stops with it
/// (`RedirectError::InvalidHop`: the hop before it went).
#[test]
fn a_userinfo_unusable_as_basic_credentials_is_refused_before_anything_is_sent() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/redirect" => response(
            302,
            &[("location", "http://u%0D%0Ax:p@localhost.test/elsewhere")],
            b"",
        ),
        _ => ok(""),
    });
    let client = Client::builder().event_loops(1).build().unwrap();
    for userinfo in [
        "alice%3As3cret:pw@",
        "alice%3As3cret@",
        "u:p%0D%0AX:%20y@",
        "u%00:p@",
    ] {
        let url = server.url("/").replace("://", &format!("://{userinfo}"));
        let error = client.get(url).send().wait().unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest(InvalidRequest::Userinfo)),
            "{userinfo}: {error:?}"
        );
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
    assert!(server.requests().is_empty());
    let error = client
        .get(server.url("/redirect"))
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Redirect {
                reason: tickless::RedirectError::InvalidHop(InvalidRequest::Userinfo),
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1, "only the redirect went");
    client.close();
}

#[test]
fn query_form_and_bearer() {
    let server = TestServer::respond(|request| {
        ok(&format!(
            "{} {} {}",
            request.target,
            request.header("content-type").unwrap_or("-"),
            String::from_utf8_lossy(&request.body)
        ))
    });
    let client = Client::new();
    let text = |response: tickless::ResponseFuture| response.wait().unwrap().text().wait().unwrap();
    assert_eq!(
        text(
            client
                .get(server.url("/search?lang=en"))
                .query(&[("q", "rust & go"), ("page", "2")])
                .send()
        ),
        "/search?lang=en&q=rust+%26+go&page=2 - "
    );
    assert_eq!(
        text(
            client
                .get(server.url("/plain"))
                .query(&[("only", "one")])
                .send()
        ),
        "/plain?only=one - "
    );
    assert_eq!(
        text(
            client
                .post(server.url("/form"))
                .form(&[("name", "Zoë"), ("note", "a=b")])
                .send()
        ),
        "/form application/x-www-form-urlencoded name=Zo%C3%AB&note=a%3Db"
    );
    client
        .get(server.url("/token"))
        .bearer_auth("abc.def")
        .send()
        .wait()
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests[3].header("authorization"), Some("Bearer abc.def"));

    // What cannot be url-encoded is a typed error, before anything is sent.
    let error = client
        .get(server.url("/"))
        .query(&[[("nested", "no")]])
        .send()
        .wait()
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidRequest(InvalidRequest::Query(_))),
        "{error:?}"
    );
    let error = client
        .get(server.url("/"))
        .bearer_auth("line\nbreak")
        .send()
        .wait()
        .unwrap_err();
    assert!(matches!(error, Error::InvalidRequest(_)), "{error:?}");
    assert_eq!(server.requests().len(), 4);
    client.close();
}

#[cfg(feature = "json")]
#[test]
fn json_both_ways() {
    let httpbin = Httpbin::start();
    let client = Client::new();
    let sent = serde_json::json!({"name": "tickless", "tags": ["exact", "fast"], "n": 3});
    let echoed: serde_json::Value = client
        .post(httpbin.url("/anything"))
        .json(&sent)
        .send()
        .wait()
        .unwrap()
        .json()
        .wait()
        .unwrap();
    assert_eq!(echoed["json"], sent);
    assert_eq!(echoed["headers"]["Content-Type"], "application/json");
    // A body that is not JSON is a typed error.
    let error = client
        .get(httpbin.url("/html"))
        .send()
        .wait()
        .unwrap()
        .json::<serde_json::Value>()
        .wait()
        .unwrap_err();
    assert!(matches!(error, Error::Json(_)), "{error:?}");
    client.close();
}

/// A JSON body sent with a `Content-Type` of the caller's own (a JSON
/// merge patch, JSON:API's type) keeps it, as reqwest does: APIs that take
/// several JSON types (Kubernetes' PATCH) tell them apart by it, and refuse
/// `application/json` where they want another.
#[cfg(feature = "json")]
#[test]
fn a_json_body_keeps_the_callers_own_content_type() {
    let server = TestServer::respond(|request| ok(&request.header_all("content-type").join(" | ")));
    let client = Client::new();
    let patch = serde_json::json!({"spec": {"replicas": 3}});
    let sent =
        |request: tickless::RequestBuilder| request.send().wait().unwrap().text().wait().unwrap();
    assert_eq!(
        sent(
            client
                .patch(server.url("/deployment"))
                .header("content-type", "application/merge-patch+json")
                .json(&patch)
        ),
        "application/merge-patch+json"
    );
    assert_eq!(
        sent(client.patch(server.url("/deployment")).json(&patch)),
        "application/json"
    );
    client.close();
}

/// A form body sent with a `Content-Type` of the caller's own keeps it,
/// as a JSON body does, and as reqwest and curl (`-H` with `--data`) send
/// it: a server that wants the charset said
/// (`application/x-www-form-urlencoded; charset=UTF-8`) reads the UTF-8
/// of `Zoë` as UTF-8, not as its default (Latin-1 for many servers of
/// that kind). Without one, the form's own goes, once.
#[test]
fn a_form_body_keeps_the_callers_own_content_type() {
    let server = TestServer::respond(|request| ok(&request.header_all("content-type").join(" | ")));
    let client = Client::new();
    let sent =
        |request: tickless::RequestBuilder| request.send().wait().unwrap().text().wait().unwrap();
    let own = "application/x-www-form-urlencoded; charset=UTF-8";
    assert_eq!(
        sent(
            client
                .post(server.url("/token"))
                .header("content-type", own)
                .form(&[("name", "Zo\u{eb}")])
        ),
        own
    );
    assert_eq!(
        sent(
            client
                .post(server.url("/token"))
                .form(&[("name", "Zo\u{eb}")])
        ),
        "application/x-www-form-urlencoded"
    );
    client.close();
}

/// `headers` puts each name it gives in place of the request's own
/// fields of that name, with all its values — as `default_headers` does
/// with the client's, as `http`'s `HeaderMap::extend` and reqwest's
/// `headers` do — and keeps the names it does not give: a field set with
/// `header` and again in a map goes once, not twice (two `Accept`, two
/// `Authorization`; two `Host` fail the request).
#[test]
fn headers_replace_the_names_they_give_and_keep_the_others() {
    let server = TestServer::respond(|request| {
        let all = |name| request.header_all(name).join(" | ");
        ok(&format!(
            "accept={} x-keep={} x-tag={} host={}",
            all("accept"),
            all("x-keep"),
            all("x-tag"),
            all("host")
        ))
    });
    let client = Client::new();
    let mut given = http::HeaderMap::new();
    given.insert("accept", http::HeaderValue::from_static("application/json"));
    given.append("x-tag", http::HeaderValue::from_static("a"));
    given.append("x-tag", http::HeaderValue::from_static("b"));
    given.insert("host", http::HeaderValue::from_static("b.test"));
    let text = client
        .get(server.url("/"))
        .header("accept", "text/html")
        .header("x-keep", "1")
        .header("host", "a.test")
        .headers(given)
        .send()
        .wait()
        .unwrap()
        .text()
        .wait()
        .unwrap();
    assert_eq!(
        text,
        "accept=application/json x-keep=1 x-tag=a | b host=b.test"
    );
    client.close();
}

#[test]
fn error_for_status_turns_4xx_5xx_and_codes_past_599_into_errors() {
    let server = TestServer::respond(|request| {
        let status: u16 = request.target[1..].parse().unwrap();
        response(status, &[], b"")
    });
    let client = Client::new();
    for status in [200u16, 204, 302, 399] {
        let url = server.url(&format!("/{status}"));
        let response = client
            .get(url)
            .redirect(tickless::redirect::Policy::none())
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.error_for_status().unwrap().status(), status);
    }
    // Past 599 is no HTTP status (some servers' own: LinkedIn's 999): a
    // client takes it as a server error (RFC 9110 §15).
    for status in [400u16, 404, 418, 500, 503, 600, 999] {
        let url = server.url(&format!("/{status}"));
        let error = client
            .get(url.clone())
            .send()
            .wait()
            .unwrap()
            .error_for_status()
            .unwrap_err();
        match error {
            Error::Status { status: s, url: u } => {
                assert_eq!(s, status);
                assert_eq!(u.to_string(), url);
            }
            other => panic!("{other:?}"),
        }
    }
    client.close();
}

#[test]
fn the_user_agent_is_ours_unless_replaced() {
    let server = TestServer::respond(|_| ok(""));
    let default = Client::new();
    default.get(server.url("/")).send().wait().unwrap();
    default
        .get(server.url("/"))
        .header("user-agent", "mine/1")
        .send()
        .wait()
        .unwrap();
    default.close();
    let replaced = Client::builder()
        .user_agent(http::HeaderValue::from_static("replaced/2"))
        .build()
        .unwrap();
    replaced.get(server.url("/")).send().wait().unwrap();
    replaced.close();
    let without = Client::builder().no_user_agent().build().unwrap();
    without.get(server.url("/")).send().wait().unwrap();
    without.close();
    let agents: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("user-agent").map(str::to_owned))
        .collect();
    let ours = format!("tickless/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        agents,
        [
            Some(ours),
            Some("mine/1".to_owned()),
            Some("replaced/2".to_owned()),
            None
        ]
    );
}

/// The builders print with `{:?}` (reqwest's do, and a caller's
/// `#[derive(Debug)]` struct holding one needs them to), as do a body's
/// chunk and collectors: what the builders were given — the method, the URL, the headers,
/// the settings — but no credential: not a password in the URL, nor an
/// `Authorization`, `Proxy-Authorization` or `Cookie` value, however it
/// was set.
#[test]
fn the_builders_print_what_they_were_given_and_no_credential() {
    fn debug<T: std::fmt::Debug>(value: &T) -> String {
        format!("{value:?}")
    }
    let mut defaults = http::HeaderMap::new();
    defaults.insert("x-team", http::HeaderValue::from_static("blue"));
    defaults.insert(
        "authorization",
        http::HeaderValue::from_static("Bearer default-secret"),
    );
    let builder = Client::builder()
        .request_timeout(Duration::from_millis(1500))
        .max_connections_per_host(7)
        .default_headers(defaults);
    let shown = debug(&builder);
    for expected in ["ClientBuilder", "1.5s", "7", "x-team", "blue"] {
        assert!(shown.contains(expected), "{expected} in {shown}");
    }
    assert!(!shown.contains("default-secret"), "{shown}");

    let client = builder.build().unwrap();
    let request = client
        .post("http://user:url-secret@example.test/items?page=2")
        .header("x-trace", "t-42")
        .header("authorization", "Bearer header-secret")
        .header("proxy-authorization", "Basic proxy-secret")
        .header("cookie", "sid=cookie-secret")
        .read_timeout(Duration::from_secs(3))
        .body("payload");
    let shown = debug(&request);
    for expected in [
        "RequestBuilder",
        "POST",
        "example.test/items?page=2",
        "x-trace",
        "t-42",
        "authorization",
        "cookie",
        "3s",
    ] {
        assert!(shown.contains(expected), "{expected} in {shown}");
    }
    for secret in [
        "url-secret",
        "header-secret",
        "proxy-secret",
        "cookie-secret",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    let shown = debug(&client.get("http://a b/").bearer_auth("bearer-secret"));
    assert!(shown.contains("http://a b/"), "{shown}");
    assert!(!shown.contains("bearer-secret"), "{shown}");

    let server = TestServer::respond(|_| ok("body"));
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    assert!(debug(&response.chunk()).contains("Chunk"));
    let bytes = response.bytes();
    assert!(debug(&bytes).contains("CollectBytes"));
    #[cfg(feature = "json")]
    {
        let json = client.get(server.url("/")).send().wait().unwrap();
        let json = json.json::<serde_json::Value>();
        assert!(debug(&json).contains("CollectJson"));
    }
    let text = client.get(server.url("/")).send().wait().unwrap().text();
    assert!(debug(&text).contains("CollectText"));
    assert_eq!(text.wait().unwrap(), "body");
    client.close();
}

/// Over HTTP/2 the jar's cookies go as over HTTP/1.1 — a `cookie` field
/// the client adds after the request's own (kept out of them, which the
/// client's other requests share) — and a caller's own `Cookie` header
/// still wins: the jar's is not sent beside it.
#[test]
fn the_jars_cookies_go_over_http2_and_a_callers_own_still_wins() {
    let seen = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let server = support::h2_server::H2Server::start({
        let seen = seen.clone();
        move |stream| {
            let cookies = stream
                .request
                .headers()
                .get_all(http::header::COOKIE)
                .iter()
                .map(|value| value.to_str().unwrap().to_owned())
                .collect();
            seen.lock().unwrap().push(cookies);
            support::h2_server::answer(stream, 200, b"")
        }
    });
    let jar = Arc::new(Jar::new());
    jar.add_cookie_str("flavour=oat", &Url::parse(&server.url("/")).unwrap());
    let client = Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .request_timeout(Duration::from_secs(30))
        .cookie_provider(jar)
        .build()
        .unwrap();
    let response = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    client
        .get(server.url("/"))
        .header("cookie", "mine=1")
        .send()
        .wait()
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [vec!["flavour=oat".to_owned()], vec!["mine=1".to_owned()]]
    );
    client.close();
}
