//! The request policy layer: what happens between the request a caller
//! builds and the exchanges that carry it — one exchange per hop.
//!
//! * [`chain`]: a request across its hops, and what each hop adds (a
//!   `User-Agent`, `Accept-Encoding`, credentials from the URL, cookies);
//! * [`redirect`]: which redirects are followed and the rules of a hop;
//! * [`cookies`]: the cookie store;
//! * [`decode`]: which responses are decompressed, and the decoding of a
//!   body as it is read;
//! * [`attempts`]: the exchanges of one hop — retries ([`retry`]) and
//!   hedged copies ([`hedge`]);
//! * [`hop`]: one hop encoded as an exchange; [`upload`]: request bodies.
//!
//! Everything here runs on the caller's thread (the one that waits for or
//! polls the response), never on an event loop.

pub(crate) mod attempts;
pub(crate) mod chain;
pub(crate) mod cookies;
pub(crate) mod decode;
pub mod hedge;
pub(crate) mod hop;
#[cfg(feature = "multipart")]
pub mod multipart;
pub mod redirect;
pub mod retry;
pub(crate) mod upload;

pub use cookies::CookieStore;
#[cfg(feature = "cookies")]
pub use cookies::Jar;

use http::header::{ACCEPT_ENCODING, RANGE, USER_AGENT};
use http::{HeaderMap, HeaderValue};
use std::sync::{Arc, OnceLock};

/// A client's policies, shared by its requests.
pub(crate) struct Policies {
    pub(crate) redirect: redirect::Policy,
    pub(crate) cookies: Option<Arc<dyn CookieStore>>,
    /// Whether responses are decompressed (and `Accept-Encoding` sent).
    pub(crate) decompress: bool,
    /// Sent unless the request has its own; `None`: none.
    pub(crate) user_agent: Option<HeaderValue>,
    /// The builder's `default_headers`: each name sent, all its values,
    /// unless the request has its own of that name.
    pub(crate) defaults: HeaderMap,
    pub(crate) retry: retry::Policy,
    pub(crate) hedge: hedge::Policy,
    /// Shared by every request of the client that may be retried or hedged.
    pub(crate) budget: retry::BudgetState,
    /// Head latencies per origin, for hedge delays given as a percentile.
    pub(crate) latencies: hedge::Latencies,
    /// The headers of a request that brings none of its own, without and
    /// with `Accept-Encoding`: made once, shared by such requests (three
    /// allocations each saved).
    default_headers: [OnceLock<Arc<HeaderMap>>; 2],
}

/// The `User-Agent` a client sends unless told otherwise.
pub(crate) const DEFAULT_USER_AGENT: &str = concat!("tickless/", env!("CARGO_PKG_VERSION"));

impl Default for Policies {
    fn default() -> Policies {
        Policies {
            redirect: redirect::Policy::default(),
            cookies: None,
            decompress: true,
            user_agent: Some(HeaderValue::from_static(DEFAULT_USER_AGENT)),
            defaults: HeaderMap::new(),
            retry: retry::Policy::none(),
            hedge: hedge::Policy::none(),
            budget: retry::BudgetState::new(retry::Budget::default()),
            latencies: hedge::Latencies::default(),
            default_headers: Default::default(),
        }
    }
}

impl Policies {
    /// The headers the client adds to a request: the builder's
    /// `default_headers`, its `User-Agent`, and `Accept-Encoding` when it
    /// decompresses (`decompress`) — each unless the request has its own
    /// (a default `User-Agent` or `Accept-Encoding` counts as its own),
    /// the last also unless it asks for a `Range` (a range of an encoded
    /// body cannot be decoded alone; reqwest leaves it out too).
    pub(crate) fn add_default_headers(&self, headers: &mut HeaderMap, decompress: bool) {
        for name in self.defaults.keys() {
            if !headers.contains_key(name) {
                for value in self.defaults.get_all(name) {
                    headers.append(name.clone(), value.clone());
                }
            }
        }
        if let Some(agent) = &self.user_agent {
            if !headers.contains_key(USER_AGENT) {
                headers.insert(USER_AGENT, agent.clone());
            }
        }
        if decompress && !headers.contains_key(ACCEPT_ENCODING) && !headers.contains_key(RANGE) {
            headers.insert(
                ACCEPT_ENCODING,
                HeaderValue::from_static(decode::accept_encoding()),
            );
        }
    }

    /// The headers of a request that has none of its own (see
    /// [`add_default_headers`](Self::add_default_headers)), shared.
    pub(crate) fn default_headers(&self, decompress: bool) -> Arc<HeaderMap> {
        self.default_headers[usize::from(decompress)]
            .get_or_init(|| {
                let mut headers = HeaderMap::new();
                self.add_default_headers(&mut headers, decompress);
                Arc::new(headers)
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests with no headers of their own share one map per setting of
    /// `decompress`, holding what `add_default_headers` adds; a request
    /// that changes its headers (a cookie, `Connection: close`) changes a
    /// copy of its own.
    #[test]
    fn requests_without_headers_share_the_defaults_and_change_only_copies() {
        let policies = Policies::default();
        let shared = policies.default_headers(true);
        assert!(Arc::ptr_eq(&shared, &policies.default_headers(true)));
        assert_eq!(shared[USER_AGENT], DEFAULT_USER_AGENT);
        assert!(shared.contains_key(ACCEPT_ENCODING));
        let plain = policies.default_headers(false);
        assert!(!plain.contains_key(ACCEPT_ENCODING));
        assert_eq!(plain[USER_AGENT], DEFAULT_USER_AGENT);

        let mut own = policies.default_headers(true);
        Arc::make_mut(&mut own).insert(http::header::COOKIE, HeaderValue::from_static("a=1"));
        assert!(own.contains_key(http::header::COOKIE));
        assert!(!policies
            .default_headers(true)
            .contains_key(http::header::COOKIE));

        let mut built = HeaderMap::new();
        built.insert(USER_AGENT, HeaderValue::from_static("mine"));
        policies.add_default_headers(&mut built, true);
        assert_eq!(built[USER_AGENT], "mine");
        assert!(built.contains_key(ACCEPT_ENCODING));

        let mut ranged = HeaderMap::new();
        ranged.insert(RANGE, HeaderValue::from_static("bytes=100-"));
        policies.add_default_headers(&mut ranged, true);
        assert!(!ranged.contains_key(ACCEPT_ENCODING), "{ranged:?}");

        let anonymous = Policies {
            user_agent: None,
            ..Policies::default()
        };
        assert!(!anonymous.default_headers(false).contains_key(USER_AGENT));
    }
}
