//! The network under a connection: where it goes ([`Origin`]), the socket
//! that gets there ([`socket`]), and the byte stream over it, plain or TLS
//! ([`Transport`], configured by [`tls`]). Nothing here knows of exchanges,
//! loops or HTTP.

mod frame_watch;
#[cfg(feature = "http2")]
mod io;
mod origin;
pub(crate) mod proxy;
mod resolve;
mod route;
pub(crate) mod socket;
mod sys;
#[cfg(feature = "rustls")]
pub(crate) mod tls;
mod transport;

#[cfg(feature = "http2")]
pub(crate) use io::{AsyncIo, IoReadiness, NotHttp2};
pub(crate) use origin::{needs_url_parsing, override_key, url_standard_host};
pub use origin::{Origin, Scheme};
pub use proxy::Proxy;
pub(crate) use resolve::Lookup;
pub use resolve::{Resolve, ResolveAnswer};
pub(crate) use route::Route;
#[cfg(feature = "rustls")]
pub use tls::TlsVersion;
#[cfg(feature = "rustls")]
pub(crate) use transport::{late_handshake_failure, take_early_records};
pub(crate) use transport::{Handshake, HandshakeError, Transport};
