//! The tickless HTTP client: event loops on mio, HTTP/1.1 on a sans-IO
//! codec and HTTP/2 on the `h2` crate driven by those loops, a connection
//! pool, and timeouts that can be armed on the loop that owns the
//! connection — per HTTP/2 stream too.
//!
//! Start with [`Client::builder`]; the option that gives the crate its name
//! is [`ClientBuilder::use_event_loop_timeouts`].
//!
//! `https://` URIs go over rustls (ring provider); see
//! [`ClientBuilder::add_root_certificate`] for private CAs. The cargo feature
//! `platform-verifier` adds `ClientBuilder::platform_verifier`, which
//! verifies certificates with the operating system's verifier.
//!
//! HTTP/2: offered by ALPN over TLS by default (the server picks), and over
//! cleartext with [`ClientBuilder::http2_prior_knowledge`]; see
//! [`ClientBuilder::http1_only`] and [`ClientBuilder::http2_only`]. One
//! connection per origin carries every stream to it.
//!
//! # Layers
//!
//! Dependencies run one way, down; a call that would go up is a returned
//! value or a small trait the layer above implements (a connection hands
//! itself back through `conn::ConnOwner`; a pooled connection that closed
//! meanwhile hands its request back as a returned value).
//!
//! ```text
//! api         Client, ClientBuilder, RequestBuilder, Response, ResponseFuture
//!   ▼
//! policy      a request across its hops: redirects, decompression, cookies,
//!   │         credentials; per hop its attempts — retries, hedged copies —
//!   │         one exchange each
//!   ▼
//! dispatch    submit, the pool (keyed by route; HTTP/1.1 checked out,
//!   │         HTTP/2 shared), resolution, proxies, the cleaner, close
//!   ▼
//! conn        a connection on its loop: happy eyeballs, the proxy's
//!   │         handshake, TLS, then one protocol for life: h1 (one exchange
//!   │         at a time) or h2 (streams, polled on the loop)
//!   ▼
//! exchange    one request in flight: its state, its outcome, its timer table
//!   ▼
//! event_loop  one loop's turn, its heap and precise wait, the group, the
//!   │         scheduler seam; hosts connections as `Source`s
//!   ▼
//! config · events · net · error · sync · h1
//!             settled options; the listener; origin, route, proxies
//!             (sans-IO), the `Resolve` seam, socket, TLS and the byte
//!             stream (and its async face for h2); error types; locks; the
//!             sans-IO HTTP/1.1 codec (a crate of its own, `tickless-h1`)
//! ```
#![deny(missing_docs)]
// Without TLS the handshake states and their types are still there,
// unused; without HTTP/2 the sharing of connections (pool, dispatch, conn)
// has nothing to share. That code is compiled but unused in such builds.
#![cfg_attr(any(not(feature = "rustls"), not(feature = "http2")), allow(dead_code))]
// One module may use `unsafe` (`net::sys`: a read into uninitialised
// memory, the socket's receive low-water mark), and says so itself; the
// rest of the crate may not.
#![deny(unsafe_code)]

mod api;
mod basic_auth;
mod config;
mod conn;
mod dispatch;
#[doc(hidden)]
pub mod doc_support;
mod error;
pub mod event_loop;
mod events;
mod exchange;
mod net;
mod policy;
mod spin;
mod sync;
#[cfg(feature = "tracing")]
mod trace;

#[cfg(feature = "json")]
pub use api::CollectJson;
pub use api::{
    Body, Chunk, Client, ClientBuilder, ClientStats, CollectBytes, CollectText, IntoHeaderName,
    IntoUri, ReasonPhrase, RequestBuilder, Response, ResponseFuture, Upload,
};
/// The byte buffers bodies come in.
pub use bytes::Bytes;
pub use error::{
    timeout_kind, Error, Http2Initiator, Http2Reason, InvalidRequest, ProxyError, ProxyUrlError,
    RedirectError, SocksError, SocksStage, Timeout, TimeoutKind, TlsFailureKind, WithCauses,
};
#[cfg(feature = "multipart")]
pub use policy::multipart;
pub use policy::{hedge, redirect, retry};

/// Cookies: the [`CookieStore`](cookie::CookieStore) seam and the client's
/// own [`Jar`](cookie::Jar).
pub mod cookie {
    pub use crate::policy::CookieStore;
    #[cfg(feature = "cookies")]
    pub use crate::policy::Jar;
    /// The URL type cookie stores are given (the `url` crate's).
    pub use url::Url;
}
pub use events::{
    ConnectionInfo, EventListener, NoopListener, RequestFields, RequestHead, RequestInfo,
    ResponseHead,
};
/// The body trait of hyper and the tower ecosystem, which [`Body`] implements.
pub use http_body;
#[cfg(feature = "rustls")]
pub use net::TlsVersion;
pub use net::{Origin, Proxy, Resolve, ResolveAnswer, Scheme};
/// The rustls this client is built with, for [`ClientBuilder::tls_roots`]
/// and the source of [`Error::Tls`].
#[cfg(feature = "rustls")]
pub use rustls;
/// The sans-IO HTTP/1.1 codec the client is built on (the `tickless-h1` crate).
pub use tickless_h1 as h1;
