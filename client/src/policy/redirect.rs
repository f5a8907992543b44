//! Redirects: which to follow ([`Policy`]), and the rules every hop keeps.
//!
//! A request follows up to 10 redirects by default (the convention of
//! reqwest and ureq). Each hop is a new exchange, on a pooled connection
//! where there is one, under the one request deadline fixed when the first
//! hop was sent.
//!
//! * **Which**: `301`, `302`, `303`, `307` and `308` with a `Location` that
//!   resolves (RFC 3986, against the URL that answered) to an `http` or
//!   `https` URL. Any other status, or a missing, empty or unusable
//!   `Location`, is the response.
//! * **Methods**: `303` turns every method but HEAD into GET; `301` and
//!   `302` turn POST into GET (as browsers and the other clients do); `307`
//!   and `308` keep the method and the body. A body dropped on the way takes
//!   the headers that described it with it (`Content-*`, `Last-Modified`,
//!   the digests: RFC 9110 §15.4). A body from a regular file
//!   ([`Upload::from_file`](crate::Upload::from_file)) is read again from
//!   where it began, as curl rewinds one; any other streamed body (from a
//!   `Read` or a stream) cannot be sent twice: a `307` or `308` to a
//!   request that had one is the response — unless none of it went. Over
//!   HTTP/1.1 a request that says `Expect: 100-continue` and is redirected
//!   before its `100 Continue` (the server answered its head, as S3's
//!   region redirects do) still has its body untouched: the hop it leads
//!   to sends it whole, the same source, with the `Expect` (and so does a
//!   `301` or `302` that keeps the body). One that began to go (`100
//!   Continue` came, or
//!   [`expect_continue_timeout`](crate::ClientBuilder::expect_continue_timeout)
//!   passed, first) cannot; nor does one over HTTP/2, which sends no
//!   `Expect` and the body at once.
//! * **Headers**: `Authorization`, `Cookie` and `Proxy-Authorization` are
//!   dropped at the first hop that changes origin (scheme, host or port),
//!   and kept within one (a streamed body's trailers, which go whole with
//!   it, may not hold them: see
//!   [`Upload::from_stream`](crate::Upload::from_stream)). Cookies from the
//!   client's store are chosen for each hop's URL.
//! * **Downgrades**: an `https` URL redirected to an `http` one fails with
//!   [`RedirectError::Downgrade`](crate::RedirectError::Downgrade) unless
//!   [`Policy::allow_https_to_http`] says otherwise.
//! * **Loops**: with [`Policy::limited`], a hop back to a request already
//!   made (same method and URL, as the `url` crate normalises it: host
//!   case, a default port spelled out) with no cookie set in between fails
//!   with [`RedirectError::Loop`](crate::RedirectError::Loop); a chain longer
//!   than the limit with [`RedirectError::TooMany`](crate::RedirectError::TooMany).
//! * **Unsendable hops**: a hop the client refuses to send (what would be
//!   an [`Error::InvalidRequest`](crate::Error::InvalidRequest) for a
//!   first request) fails with
//!   [`RedirectError::InvalidHop`](crate::RedirectError::InvalidHop): the
//!   hops before it were sent.

use crate::net::Origin;
use http::header::{
    HeaderName, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LANGUAGE, CONTENT_LENGTH,
    CONTENT_LOCATION, CONTENT_TYPE, COOKIE, EXPECT, LAST_MODIFIED, PROXY_AUTHORIZATION,
    TRANSFER_ENCODING,
};
use http::{Method, StatusCode};
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// How many redirects a client follows unless told otherwise.
pub const DEFAULT_LIMIT: usize = 10;

/// Which redirects a request follows. See the [module documentation](self)
/// for the rules every followed hop keeps.
#[derive(Clone)]
pub struct Policy {
    kind: Kind,
    https_to_http: bool,
}

#[derive(Clone)]
enum Kind {
    Limited(usize),
    None,
    Custom(Arc<dyn Fn(Attempt<'_>) -> Action + Send + Sync>),
}

impl Policy {
    /// Follows up to `max` redirects; the next one fails with
    /// [`RedirectError::TooMany`](crate::RedirectError::TooMany). Zero
    /// follows none (and fails on the first, like curl's `--max-redirs 0`
    /// would; use [`none`](Self::none) to get the 3xx back instead).
    pub fn limited(max: usize) -> Policy {
        Policy {
            kind: Kind::Limited(max),
            https_to_http: false,
        }
    }

    /// Follows no redirect: a 3xx is the response.
    pub fn none() -> Policy {
        Policy {
            kind: Kind::None,
            https_to_http: false,
        }
    }

    /// Asks `decide` at each redirect: follow it, stop (the 3xx is the
    /// response), or fail the request. It runs on the thread that waits for
    /// or polls the response.
    ///
    /// ```
    /// use tickless_client::redirect::Policy;
    /// // Five hops at most, and never off example.com.
    /// let policy = Policy::custom(|attempt| {
    ///     if attempt.previous().len() > 5 {
    ///         attempt.error("too long a chain")
    ///     } else if attempt.url().host() != Some("example.com") {
    ///         attempt.stop()
    ///     } else {
    ///         attempt.follow()
    ///     }
    /// });
    /// # drop(policy);
    /// ```
    pub fn custom(decide: impl Fn(Attempt<'_>) -> Action + Send + Sync + 'static) -> Policy {
        Policy {
            kind: Kind::Custom(Arc::new(decide)),
            https_to_http: false,
        }
    }

    /// Whether an `https` URL may redirect to an `http` one (default: no,
    /// the request fails).
    pub fn allow_https_to_http(mut self, allow: bool) -> Policy {
        self.https_to_http = allow;
        self
    }

    pub(crate) fn allows_downgrade(&self) -> bool {
        self.https_to_http
    }

    /// Whether the chain watches for loops (only a limited policy does: a
    /// custom one sees every URL and decides for itself).
    pub(crate) fn detects_loops(&self) -> bool {
        matches!(self.kind, Kind::Limited(_))
    }

    pub(crate) fn follows_any(&self) -> bool {
        !matches!(self.kind, Kind::None)
    }

    /// The policy's answer to one redirect.
    pub(crate) fn decide(&self, attempt: Attempt<'_>) -> Decision {
        match &self.kind {
            Kind::None => Decision::Stop,
            // `previous` holds the first request, then one URL per hop.
            Kind::Limited(max) if attempt.previous.len() > *max => {
                Decision::Fail(crate::RedirectError::TooMany { limit: *max })
            }
            Kind::Limited(_) => Decision::Follow,
            Kind::Custom(decide) => match decide(attempt).kind {
                ActionKind::Follow => Decision::Follow,
                ActionKind::Stop => Decision::Stop,
                ActionKind::Error(error) => Decision::Fail(crate::RedirectError::Policy(error)),
            },
        }
    }
}

impl Default for Policy {
    /// [`Policy::limited`]`(10)`.
    fn default() -> Policy {
        Policy::limited(DEFAULT_LIMIT)
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Limited(max) => format!("limited({max})"),
            Kind::None => "none".into(),
            Kind::Custom(_) => "custom".into(),
        };
        f.debug_struct("Policy")
            .field("kind", &kind)
            .field("https_to_http", &self.https_to_http)
            .finish()
    }
}

/// One redirect, for a custom [`Policy`] to decide on.
#[derive(Debug)]
pub struct Attempt<'a> {
    pub(crate) status: StatusCode,
    pub(crate) next: &'a http::Uri,
    pub(crate) previous: &'a [http::Uri],
}

impl Attempt<'_> {
    /// The redirect's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Where it points, resolved against the URL that answered.
    pub fn url(&self) -> &http::Uri {
        self.next
    }

    /// The URLs requested so far: the first request's first, the one that
    /// answered with this redirect last.
    pub fn previous(&self) -> &[http::Uri] {
        self.previous
    }

    /// Follows it.
    pub fn follow(self) -> Action {
        Action {
            kind: ActionKind::Follow,
        }
    }

    /// Does not follow it: the redirect is the response.
    pub fn stop(self) -> Action {
        Action {
            kind: ActionKind::Stop,
        }
    }

    /// Fails the request with
    /// [`RedirectError::Policy`](crate::RedirectError::Policy).
    pub fn error(self, error: impl Into<Box<dyn StdError + Send + Sync>>) -> Action {
        Action {
            kind: ActionKind::Error(error.into()),
        }
    }
}

/// What a custom [`Policy`] decided.
pub struct Action {
    kind: ActionKind,
}

enum ActionKind {
    Follow,
    Stop,
    Error(Box<dyn StdError + Send + Sync>),
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            ActionKind::Follow => "follow",
            ActionKind::Stop => "stop",
            ActionKind::Error(_) => "error",
        };
        f.debug_struct("Action").field("kind", &kind).finish()
    }
}

/// A policy's answer, for the chain.
pub(crate) enum Decision {
    Follow,
    Stop,
    Fail(crate::RedirectError),
}

/// The method of the next hop after `status`, and whether the body goes
/// with it; `None` if `status` is not a redirect to follow.
pub(crate) fn next_method(status: StatusCode, method: &Method) -> Option<(Method, bool)> {
    match status.as_u16() {
        303 if *method == Method::HEAD => Some((Method::HEAD, false)),
        303 => Some((Method::GET, false)),
        301 | 302 if *method == Method::POST => Some((Method::GET, false)),
        301 | 302 | 307 | 308 => Some((method.clone(), true)),
        _ => None,
    }
}

/// Where a `Location` value points, resolved against `current` (relative,
/// scheme-relative, dot segments: RFC 3986 §5, by the `url` crate), without
/// a fragment; `None` if it is empty or blank (it says no more than no
/// `Location`: curl takes it so, where resolved it would be
/// the same URL again), is not UTF-8, does not resolve, or is not an
/// `http` or `https` URL.
pub(crate) fn resolve(current: &http::Uri, location: &http::HeaderValue) -> Option<http::Uri> {
    let location = std::str::from_utf8(location.as_bytes()).ok()?.trim();
    if location.is_empty() {
        return None;
    }
    let base = url::Url::parse(&current.to_string()).ok()?;
    let mut next = base.join(location).ok()?;
    if !matches!(next.scheme(), "http" | "https") || next.host_str().is_none() {
        return None;
    }
    next.set_fragment(None);
    http::Uri::try_from(next.as_str()).ok()
}

/// Whether two URLs name the same resource once the `url` crate has
/// normalised them (host case, a default port spelled out, dot segments):
/// a `Location` comes out of [`resolve`] normalised, the caller's first URL
/// as it was typed, and a loop back to that one is still a loop.
pub(crate) fn same_url(a: &http::Uri, b: &http::Uri) -> bool {
    let normalised = |uri: &http::Uri| url::Url::parse(&uri.to_string()).ok();
    match (normalised(a), normalised(b)) {
        (Some(a), Some(b)) => a == b,
        // Not a URL the `url` crate takes: as written.
        _ => a.to_string() == b.to_string(),
    }
}

/// Whether two URLs have the same origin (scheme, host, port).
pub(crate) fn same_origin(a: &http::Uri, b: &http::Uri) -> bool {
    matches!((Origin::of(a), Origin::of(b)), (Ok(a), Ok(b)) if a == b)
}

/// Headers that carry credentials: not sent to another origin.
const SENSITIVE: [HeaderName; 3] = [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION];

/// Headers that describe a body: dropped with it. RFC 9110 §15.4 names
/// Content-Encoding, Content-Language, Content-Location, Content-Type,
/// Content-Length, Digest and Last-Modified ("including but not limited
/// to"); RFC 9530's Content-Digest and Repr-Digest replace Digest — a
/// GET that carried the digest of a body it has not would be refused by a
/// server that checks it. The framing goes too, and `Expect`, which asks
/// to wait before a body.
const OF_THE_BODY: [HeaderName; 11] = [
    CONTENT_TYPE,
    CONTENT_LENGTH,
    CONTENT_ENCODING,
    CONTENT_LANGUAGE,
    CONTENT_LOCATION,
    LAST_MODIFIED,
    HeaderName::from_static("digest"),
    HeaderName::from_static("content-digest"),
    HeaderName::from_static("repr-digest"),
    TRANSFER_ENCODING,
    EXPECT,
];

/// Drops the credentials of `headers` (the next hop changes origin).
pub(crate) fn strip_sensitive(headers: &mut http::HeaderMap) {
    for name in SENSITIVE {
        headers.remove(name);
    }
}

/// Drops what described a body that does not go on.
pub(crate) fn strip_body_headers(headers: &mut http::HeaderMap) {
    for name in OF_THE_BODY {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    fn resolved(base: &str, location: &str) -> Option<String> {
        resolve(&uri(base), &http::HeaderValue::from_str(location).unwrap()).map(|u| u.to_string())
    }

    #[test]
    fn methods_change_as_the_status_says() {
        use Method as M;
        let cases = [
            (301, M::POST, Some((M::GET, false))),
            (302, M::POST, Some((M::GET, false))),
            (301, M::PUT, Some((M::PUT, true))),
            (302, M::GET, Some((M::GET, true))),
            (303, M::POST, Some((M::GET, false))),
            (303, M::DELETE, Some((M::GET, false))),
            (303, M::HEAD, Some((M::HEAD, false))),
            (307, M::POST, Some((M::POST, true))),
            (308, M::PUT, Some((M::PUT, true))),
            (300, M::GET, None),
            (304, M::GET, None),
            (305, M::GET, None),
            (200, M::GET, None),
        ];
        for (status, method, expected) in cases {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(next_method(status, &method), expected, "{status} {method}");
        }
    }

    #[test]
    fn locations_resolve_as_rfc_3986_says() {
        let base = "http://a.test/b/c/d;p?q";
        let cases = [
            ("g", Some("http://a.test/b/c/g")),
            ("./g", Some("http://a.test/b/c/g")),
            ("g/", Some("http://a.test/b/c/g/")),
            ("/g", Some("http://a.test/g")),
            ("//other.test/g", Some("http://other.test/g")),
            ("?y", Some("http://a.test/b/c/d;p?y")),
            ("g?y#frag", Some("http://a.test/b/c/g?y")),
            ("../g", Some("http://a.test/b/g")),
            ("../../../g", Some("http://a.test/g")),
            ("/./g/../h", Some("http://a.test/h")),
            (
                "https://secure.test:8443/x",
                Some("https://secure.test:8443/x"),
            ),
            (" /padded ", Some("http://a.test/padded")),
            ("ftp://files.test/x", None),
            ("mailto:someone@a.test", None),
            ("http://", None),
            ("", None),
            (" \t", None),
        ];
        for (location, expected) in cases {
            assert_eq!(resolved(base, location).as_deref(), expected, "{location}");
        }
        // Not UTF-8: not followed.
        let latin1 = http::HeaderValue::from_bytes(b"/caf\xe9").unwrap();
        assert_eq!(resolve(&uri(base), &latin1), None);
    }

    /// A `Location`'s host is read as a request's text has its host read
    /// (`api::input`): percent-decoded and, if not ASCII, in IDNA's ASCII
    /// form — the same origin as the request to that name, wherever
    /// its URL came from.
    #[test]
    fn a_location_host_is_read_as_a_request_host_is() {
        let base = "http://xn--bcher-kva.test/a";
        for (location, expected) in [
            ("http://BÜCHER.test/b", "http://xn--bcher-kva.test/b"),
            ("//bücher.test:8080/b", "http://xn--bcher-kva.test:8080/b"),
            ("http://ex%61mple.test/b", "http://example.test/b"),
        ] {
            let value = http::HeaderValue::from_bytes(location.as_bytes()).unwrap();
            let next = resolve(&uri(base), &value).unwrap();
            assert_eq!(next.to_string(), expected, "{location}");
        }
        let next = resolve(
            &uri(base),
            &http::HeaderValue::from_bytes("http://Bücher.test/c".as_bytes()).unwrap(),
        )
        .unwrap();
        assert!(same_origin(&uri(base), &next));
        // A host the URL standard refuses: not followed.
        assert_eq!(resolved(base, "http://ex%2Fample.test/"), None);
    }

    #[test]
    fn urls_are_the_same_once_normalised() {
        for (a, b) in [
            ("http://LOOP.test/x", "http://loop.test/x"),
            ("http://loop.test:80/x", "http://loop.test/x"),
            ("https://Loop.Test:443/x?q", "https://loop.test/x?q"),
            ("http://loop.test/a/../x", "http://loop.test/x"),
            ("http://loop.test", "http://loop.test/"),
        ] {
            assert!(same_url(&uri(a), &uri(b)), "{a} {b}");
        }
        for (a, b) in [
            ("http://loop.test/x", "http://loop.test/X"),
            ("http://loop.test:8080/x", "http://loop.test/x"),
            ("https://loop.test:80/x", "https://loop.test/x"),
            ("http://loop.test/x?q", "http://loop.test/x"),
        ] {
            assert!(!same_url(&uri(a), &uri(b)), "{a} {b}");
        }
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert!(same_origin(
            &uri("http://A.test/x"),
            &uri("http://a.test:80/y")
        ));
        assert!(!same_origin(
            &uri("http://a.test/"),
            &uri("https://a.test/")
        ));
        assert!(!same_origin(
            &uri("http://a.test/"),
            &uri("http://a.test:8080/")
        ));
        assert!(!same_origin(&uri("http://a.test/"), &uri("http://b.test/")));
    }

    #[test]
    fn a_limited_policy_counts_the_hops_and_none_follows_nothing() {
        let next = uri("http://a.test/next");
        let previous: Vec<http::Uri> = (0..3).map(|i| uri(&format!("http://a.test/{i}"))).collect();
        let attempt = |n| Attempt {
            status: StatusCode::FOUND,
            next: &next,
            previous: &previous[..n],
        };
        // Two URLs requested: one redirect followed so far.
        assert!(matches!(
            Policy::limited(2).decide(attempt(2)),
            Decision::Follow
        ));
        assert!(matches!(
            Policy::limited(2).decide(attempt(3)),
            Decision::Fail(crate::RedirectError::TooMany { limit: 2 })
        ));
        assert!(matches!(Policy::none().decide(attempt(1)), Decision::Stop));
        let custom = Policy::custom(|a| {
            if a.previous().len() < 2 {
                a.follow()
            } else {
                a.error("no")
            }
        });
        assert!(matches!(custom.decide(attempt(1)), Decision::Follow));
        assert!(matches!(
            custom.decide(attempt(2)),
            Decision::Fail(crate::RedirectError::Policy(_))
        ));
    }
}
