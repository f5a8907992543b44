//! The tickless HTTP/1.1 client: event loops on mio, a sans-IO codec, a
//! connection pool, and timeouts that can be armed on the loop that owns the
//! connection.
//!
//! Start with [`Client::builder`]; the option that gives the crate its name
//! is [`ClientBuilder::use_event_loop_timeouts`].
//!
//! `https://` URIs go over rustls (ring provider); see
//! [`ClientBuilder::add_root_certificate`] for private CAs. The cargo feature
//! `platform-verifier` adds `ClientBuilder::platform_verifier`, which
//! verifies certificates with the operating system's verifier.
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
//!   │         (policy — redirects, decompression, cookies — comes here,
//!   ▼          above one exchange per hop)
//! dispatch    submit, the pool, resolution, the cleaner, close
//!   ▼
//! conn        a connection on its loop: open, handshake, send, receive,
//!   │         failure policy, its read buffer; one type per protocol (h1 now)
//!   ▼
//! exchange    one request in flight: its state, its outcome, its timer table
//!   ▼
//! event_loop  one loop's turn, its heap and precise wait, the group, the
//!   │         scheduler seam; hosts connections as `Source`s
//!   ▼
//! config · events · net · error · sync · h1
//!             settled options; the listener; origin, socket, TLS and the
//!             byte stream; error types; locks; the sans-IO HTTP/1.1 codec
//!             (a crate of its own, `tickless-h1`)
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod api;
mod config;
mod conn;
mod dispatch;
mod error;
pub mod event_loop;
mod events;
mod exchange;
mod net;
mod sync;

pub use api::{
    Body, Chunk, Client, ClientBuilder, ClientStats, CollectBytes, CollectText, RequestBuilder,
    Response, ResponseFuture, Upload,
};
/// The byte buffers bodies come in.
pub use bytes::Bytes;
pub use error::{
    timeout_kind, Error, Http2Initiator, Http2Reason, InvalidRequest, Timeout, TimeoutKind,
    TlsFailureKind,
};
pub use events::{ConnectionInfo, EventListener, NoopListener};
/// The body trait of hyper and the tower ecosystem, which [`Body`] implements.
pub use http_body;
pub use net::{Origin, Scheme};
/// The rustls this client is built with, for [`ClientBuilder::tls_roots`]
/// and the source of [`Error::Tls`].
pub use rustls;
/// The sans-IO HTTP/1.1 codec the client is built on (the `tickless-h1` crate).
pub use tickless_h1 as h1;
