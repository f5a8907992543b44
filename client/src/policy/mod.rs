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
pub mod redirect;
pub mod retry;
pub(crate) mod upload;

pub use cookies::CookieStore;
#[cfg(feature = "cookies")]
pub use cookies::Jar;

use http::HeaderValue;
use std::sync::Arc;

/// A client's policies, shared by its requests.
pub(crate) struct Policies {
    pub(crate) redirect: redirect::Policy,
    pub(crate) cookies: Option<Arc<dyn CookieStore>>,
    /// Whether responses are decompressed (and `Accept-Encoding` sent).
    pub(crate) decompress: bool,
    /// Sent unless the request has its own; `None`: none.
    pub(crate) user_agent: Option<HeaderValue>,
    pub(crate) retry: retry::Policy,
    pub(crate) hedge: hedge::Policy,
    /// Shared by every request of the client that may be retried or hedged.
    pub(crate) budget: retry::BudgetState,
    /// Head latencies per origin, for hedge delays given as a percentile.
    pub(crate) latencies: hedge::Latencies,
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
            retry: retry::Policy::none(),
            hedge: hedge::Policy::none(),
            budget: retry::BudgetState::new(retry::Budget::default()),
            latencies: hedge::Latencies::default(),
        }
    }
}
