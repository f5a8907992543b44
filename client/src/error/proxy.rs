//! The errors of proxies: a proxy URL that does not parse
//! ([`ProxyUrlError`]), and what a proxy did or said when it failed a
//! request ([`ProxyError`], inside [`Error::Proxy`](super::Error::Proxy);
//! SOCKS5 failures in detail in [`SocksError`]).

use std::fmt;
use std::io;

/// What a proxy did or said that failed the request. Carried by
/// [`Error::Proxy`](super::Error::Proxy), which names the proxy. An I/O
/// failure is the [`source`](std::error::Error::source), not in the message
/// (see [`Error`](super::Error), "Messages and their causes").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The proxy's host name could not be resolved (the resolver's error).
    /// Not the origin's: that one, which the client resolves for a
    /// `socks5://` proxy, is [`Error::Resolve`](super::Error::Resolve).
    #[error("could not resolve the proxy's host name")]
    Resolve(#[source] io::Error),
    /// The TCP connect to the proxy failed (it refused the connection, or
    /// is unreachable).
    #[error("the connection to the proxy failed")]
    Connect(#[source] io::Error),
    /// No connection to the proxy could be made within the
    /// [connect timeout](crate::ClientBuilder::connect_timeout) (every
    /// address of the proxy timed out). A timeout:
    /// [`Error::timeout_kind`](super::Error::timeout_kind) is
    /// [`Connect`](super::TimeoutKind::Connect).
    #[error("the connection to the proxy took longer than {} ms", .0.millis())]
    ConnectTimeout(super::Timeout),
    /// The connection to the proxy failed or closed during its handshake.
    #[error("the proxy connection failed during its handshake")]
    Io(#[source] io::Error),
    /// The proxy answered CONNECT with `407 Proxy Authentication
    /// Required`: it wants credentials (in the proxy URL's userinfo), or
    /// others than those sent.
    #[error("CONNECT to {target} answered 407 Proxy Authentication Required{}", challenges_of(.challenges))]
    AuthenticationRequired {
        /// Where the tunnel was to go (`host:port`).
        target: String,
        /// Its `Proxy-Authenticate` challenges, in order (maybe none).
        challenges: Vec<String>,
    },
    /// The proxy answered CONNECT with a status other than 2xx and 407.
    #[error("CONNECT to {target} answered {} {reason}", status.as_u16())]
    ConnectRefused {
        /// Where the tunnel was to go (`host:port`).
        target: String,
        /// The status it answered with.
        status: http::StatusCode,
        /// Its reason phrase, as sent (maybe empty): as UTF-8 if it is
        /// that, else each byte as its Latin-1 character (obs-text,
        /// 0x80-0xFF, as in `403 Interdit \xe9`, reads `Interdit é`).
        reason: String,
    },
    /// The proxy's answer to CONNECT is not an HTTP/1.x response head, or
    /// is larger than the limit.
    #[error("the proxy's answer to CONNECT is malformed: {0}")]
    MalformedAnswer(String),
    /// The SOCKS5 handshake failed: the proxy's failure reply, its refusal
    /// of the credentials, or a protocol error.
    #[error(transparent)]
    Socks(#[from] SocksError),
    /// The proxy did not finish its handshake (the CONNECT answer, or the
    /// SOCKS5 exchange) within the
    /// [handshake timeout](crate::ClientBuilder::handshake_timeout). A
    /// timeout: [`Error::timeout_kind`](super::Error::timeout_kind) is
    /// [`Handshake`](super::TimeoutKind::Handshake).
    #[error("the proxy's handshake took longer than {} ms", .0.millis())]
    HandshakeTimeout(super::Timeout),
}

impl ProxyError {
    /// A copy, for the requests that waited for the connection whose
    /// opening failed with it (see
    /// [`Error::copy_of_opening_failure`](super::Error::copy_of_opening_failure),
    /// which says what of an `io::Error` is kept).
    pub(super) fn copy(&self) -> ProxyError {
        match self {
            ProxyError::Resolve(source) => ProxyError::Resolve(super::copy_io(source)),
            ProxyError::Connect(source) => ProxyError::Connect(super::copy_io(source)),
            ProxyError::ConnectTimeout(timeout) => ProxyError::ConnectTimeout(timeout.clone()),
            ProxyError::Io(source) => ProxyError::Io(super::copy_io(source)),
            ProxyError::AuthenticationRequired { target, challenges } => {
                ProxyError::AuthenticationRequired {
                    target: target.clone(),
                    challenges: challenges.clone(),
                }
            }
            ProxyError::ConnectRefused {
                target,
                status,
                reason,
            } => ProxyError::ConnectRefused {
                target: target.clone(),
                status: *status,
                reason: reason.clone(),
            },
            ProxyError::MalformedAnswer(what) => ProxyError::MalformedAnswer(what.clone()),
            ProxyError::Socks(error) => ProxyError::Socks(error.clone()),
            ProxyError::HandshakeTimeout(timeout) => ProxyError::HandshakeTimeout(timeout.clone()),
        }
    }
}

/// `: Basic realm="x", Negotiate` after a 407, if it sent challenges.
fn challenges_of(challenges: &[String]) -> String {
    match challenges.is_empty() {
        true => String::new(),
        false => format!(" (Proxy-Authenticate: {})", challenges.join(", ")),
    }
}

/// Why a proxy URL was refused. Never shows the credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyUrlError {
    /// The value is empty or blank.
    #[error("empty proxy URL")]
    Empty,
    /// The value is not a URL (what the URL parser said).
    #[error("invalid proxy URL: {reason}")]
    Invalid {
        /// The URL parser's reason (it never quotes the input).
        reason: String,
    },
    /// The scheme is not `http`, `socks5` or `socks5h`.
    #[error("unsupported proxy scheme {0:?} (supported: http, socks5, socks5h)")]
    UnsupportedScheme(String),
    /// The URL has no host.
    #[error("proxy URL has no host")]
    MissingHost,
    /// An `http://` proxy URL's userinfo, percent-decoded, cannot be sent
    /// as `Proxy-Authorization: Basic` (RFC 7617 §2): its user name holds a
    /// `:` (which the proxy would take for the end of the name), or the
    /// name or the password a control character. A SOCKS5 proxy takes
    /// them. The credentials are not shown.
    #[error("the proxy URL's userinfo cannot be used as Basic credentials (RFC 7617 §2)")]
    Credentials,
}

/// The step of the handshake that is waiting for the proxy; names where an
/// unexpected end of stream happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SocksStage {
    /// Waiting for the method selection (step 2).
    MethodSelection,
    /// Waiting for the RFC 1929 status (step 3).
    Authentication,
    /// Waiting for the CONNECT reply (step 5).
    ConnectReply,
    /// The handshake has finished, successfully or not.
    Finished,
}

impl fmt::Display for SocksStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SocksStage::MethodSelection => "method selection",
            SocksStage::Authentication => "username/password authentication",
            SocksStage::ConnectReply => "CONNECT reply",
            SocksStage::Finished => "finished handshake",
        })
    }
}

/// Everything that can go wrong in a SOCKS5 handshake.
///
/// Messages never contain the credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SocksError {
    /// The username is longer than RFC 1929's one-byte length allows.
    #[error("SOCKS5 username is {len} bytes long; at most 255 are allowed")]
    UsernameTooLong {
        /// The username's length in bytes.
        len: usize,
    },
    /// The password is longer than RFC 1929's one-byte length allows.
    #[error("SOCKS5 password is {len} bytes long; at most 255 are allowed")]
    PasswordTooLong {
        /// The password's length in bytes.
        len: usize,
    },
    /// The target domain is longer than the one-byte length allows.
    #[error("SOCKS5 target domain is {len} bytes long; at most 255 are allowed")]
    DomainTooLong {
        /// The domain's length in bytes.
        len: usize,
    },
    /// The target domain is empty.
    #[error("SOCKS5 target domain is empty")]
    EmptyDomain,
    /// A message from the proxy did not start with version `05`.
    #[error("SOCKS5 proxy sent version byte {got:#04x} instead of 0x05")]
    BadVersion {
        /// The version byte received.
        got: u8,
    },
    /// The sub-negotiation reply did not start with version `01`.
    #[error("SOCKS5 proxy sent authentication version byte {got:#04x} instead of 0x01")]
    BadAuthVersion {
        /// The version byte received.
        got: u8,
    },
    /// The proxy answered the greeting with `FF`.
    #[error("SOCKS5 proxy accepted none of the offered authentication methods")]
    NoAcceptableMethods,
    /// The proxy chose a method we did not offer.
    #[error("SOCKS5 proxy chose authentication method {method:#04x}, which was not offered")]
    UnexpectedMethod {
        /// The method byte received.
        method: u8,
    },
    /// The proxy rejected the username/password.
    #[error("SOCKS5 proxy rejected the username/password (status {status:#04x})")]
    AuthFailed {
        /// The non-zero status byte received.
        status: u8,
    },
    /// Reply `01`.
    #[error("SOCKS5 proxy reported: general failure")]
    GeneralFailure,
    /// Reply `02`.
    #[error("SOCKS5 proxy reported: connection not allowed by ruleset")]
    NotAllowed,
    /// Reply `03`.
    #[error("SOCKS5 proxy reported: network unreachable")]
    NetworkUnreachable,
    /// Reply `04`.
    #[error("SOCKS5 proxy reported: host unreachable")]
    HostUnreachable,
    /// Reply `05`.
    #[error("SOCKS5 proxy reported: connection refused")]
    ConnectionRefused,
    /// Reply `06`.
    #[error("SOCKS5 proxy reported: TTL expired")]
    TtlExpired,
    /// Reply `07`.
    #[error("SOCKS5 proxy reported: command not supported")]
    CommandNotSupported,
    /// Reply `08`.
    #[error("SOCKS5 proxy reported: address type not supported")]
    AddressTypeNotSupported,
    /// A failure reply code RFC 1928 does not define (`09`..=`FF`).
    #[error("SOCKS5 proxy reported unknown failure code {code:#04x}")]
    UnknownReply {
        /// The reply code received.
        code: u8,
    },
    /// A success reply carried an `ATYP` other than `01`, `03` or `04`.
    #[error("SOCKS5 proxy sent a reply with unknown address type {atyp:#04x}")]
    BadAddressType {
        /// The address type byte received.
        atyp: u8,
    },
    /// The proxy closed the connection before the handshake finished.
    #[error("SOCKS5 proxy closed the connection during {stage}")]
    UnexpectedEof {
        /// What we were waiting for.
        stage: SocksStage,
    },
}

impl SocksError {
    /// Maps a non-zero `REP` byte to its error.
    pub(crate) fn from_reply(code: u8) -> SocksError {
        match code {
            0x01 => SocksError::GeneralFailure,
            0x02 => SocksError::NotAllowed,
            0x03 => SocksError::NetworkUnreachable,
            0x04 => SocksError::HostUnreachable,
            0x05 => SocksError::ConnectionRefused,
            0x06 => SocksError::TtlExpired,
            0x07 => SocksError::CommandNotSupported,
            0x08 => SocksError::AddressTypeNotSupported,
            code => SocksError::UnknownReply { code },
        }
    }

    /// Whether the proxy reports that it could not reach the address it
    /// was given — the network or host unreachable, the connection refused
    /// or timed out, or the address family unsupported (a proxy without
    /// IPv6) — so another address of the same host may still work. Not a
    /// refusal by the proxy itself (its rules, its credentials, a general
    /// failure), which another address would meet as well.
    pub(crate) fn blames_the_address(&self) -> bool {
        matches!(
            self,
            SocksError::NetworkUnreachable
                | SocksError::HostUnreachable
                | SocksError::ConnectionRefused
                | SocksError::TtlExpired
                | SocksError::AddressTypeNotSupported
        )
    }

    /// The `REP` byte for errors that are a failure reply from the proxy.
    pub fn reply_code(&self) -> Option<u8> {
        Some(match self {
            SocksError::GeneralFailure => 0x01,
            SocksError::NotAllowed => 0x02,
            SocksError::NetworkUnreachable => 0x03,
            SocksError::HostUnreachable => 0x04,
            SocksError::ConnectionRefused => 0x05,
            SocksError::TtlExpired => 0x06,
            SocksError::CommandNotSupported => 0x07,
            SocksError::AddressTypeNotSupported => 0x08,
            SocksError::UnknownReply { code } => *code,
            _ => return None,
        })
    }
}
