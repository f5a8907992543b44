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
#![deny(missing_docs)]

mod client;
mod config;
mod conn;
mod error;
mod event_loop;
mod events;
mod exchange;
mod future;
pub mod h1;
mod origin;
mod pool;
mod request;
mod resolve;
mod response;
mod timeouts;
mod tls;
mod transport;

pub use client::{Client, ClientStats};
pub use config::ClientBuilder;
pub use error::{timeout_kind, Error, InvalidRequest, Timeout, TimeoutKind, TlsFailureKind};
pub use event_loop::{
    EventLoop, EventLoopGroup, EventLoopGroupBuilder, LoopContext, LoopTask, LoopTimeout,
    LoopTimerKey, Rejected, SchedulerFactory, TimeoutScheduler, MAX_EVENT_LOOPS,
};
pub use events::{ConnectionInfo, EventListener, NoopListener};
pub use exchange::BodySink;
pub use future::ResponseFuture;
pub use origin::{Origin, Scheme};
pub use request::RequestBuilder;
pub use response::Response;
/// The rustls this client is built with, for [`ClientBuilder::tls_roots`]
/// and the source of [`Error::Tls`].
pub use rustls;
