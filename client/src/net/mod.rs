//! The network under a connection: where it goes ([`Origin`]), the socket
//! that gets there ([`socket`]), and the byte stream over it, plain or TLS
//! ([`Transport`], configured by [`tls`]). Nothing here knows of exchanges,
//! loops or HTTP.

mod io;
mod origin;
pub(crate) mod socket;
pub(crate) mod tls;
mod transport;

pub(crate) use io::{AsyncIo, IoReadiness};
pub use origin::{Origin, Scheme};
pub(crate) use transport::{Handshake, HandshakeError, Transport};
