//! [`Error`]: every way an exchange can fail, each kind its own variant.
//!
//! A timeout keeps its kind, the duration it exceeded and the remote address
//! through every layer: [`Error::is_timeout`] and [`timeout_kind`] answer for
//! a tickless error wrapped in an `io::Error` or a boxed error chain too.

mod proxy;
mod quoted;

pub use proxy::{ProxyError, ProxyUrlError, SocksError, SocksStage};
pub(crate) use quoted::{authority_range, shortened, shown_uri};

use crate::h1::{DecodeError, EncodeError};
use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::Duration;

/// Which deadline was exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// The whole exchange took longer than the request timeout.
    Request,
    /// The server was silent for longer than the read timeout.
    Read,
    /// The server took none of the request for longer than the write
    /// timeout.
    Write,
    /// A connection could not be established within the connect timeout.
    Connect,
    /// A handshake — TLS, or a proxy's (as [`ProxyError::HandshakeTimeout`])
    /// — did not finish within the handshake timeout.
    Handshake,
    /// An HTTP/2 PING — keep-alive, or the probe after a `GOAWAY` — had no
    /// answer within the keep-alive timeout (see
    /// [`ClientBuilder::http2_keep_alive_timeout`](crate::ClientBuilder::http2_keep_alive_timeout)):
    /// the connection was taken as dead.
    KeepAlive,
}

impl fmt::Display for TimeoutKind {
    /// `Request timeout`, …, `Handshake timeout`: the handshake named
    /// without saying TLS, since a proxy's (CONNECT, SOCKS5) is of this
    /// kind too. [`Error::HandshakeTimeout`], which is TLS's, says so.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutKind::Request => "Request timeout",
            TimeoutKind::Read => "Read timeout",
            TimeoutKind::Write => "Write timeout",
            TimeoutKind::Connect => "Connect timeout",
            TimeoutKind::Handshake => "Handshake timeout",
            TimeoutKind::KeepAlive => "HTTP/2 keep-alive timeout",
        })
    }
}

/// A deadline that passed: to where, and after how long. Which deadline it
/// was is the [`Error`] variant that carries it ([`Error::timeout_kind`]),
/// stored there alone so the two can never disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    /// The remote, as `host/ip:port` once resolved, `host:port` before.
    pub remote: String,
    /// The configured duration that was exceeded.
    pub duration: Duration,
}

impl Timeout {
    /// The duration in milliseconds, as messages show it: `20` for a whole
    /// number of them, else with the fraction, to the nanosecond and
    /// without trailing zeros (`0.25`, `1.5`). Cut to whole milliseconds,
    /// the sub-millisecond timeouts a loop fires on time would read
    /// `after 0 ms` — a zero timeout, which is none at all.
    fn millis(&self) -> Millis {
        Millis(self.duration)
    }
}

/// A duration shown in milliseconds (see [`Timeout::millis`]).
struct Millis(Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NANOS_PER_MILLI: u32 = 1_000_000;
        write!(f, "{}", self.0.as_millis())?;
        let fraction = self.0.subsec_nanos() % NANOS_PER_MILLI;
        if fraction == 0 {
            return Ok(());
        }
        let digits = format!("{fraction:06}");
        write!(f, ".{}", digits.trim_end_matches('0'))
    }
}

/// Why a request was refused before anything was sent. Where the error came
/// from a parser (the URI, a header, the request encoder), it is kept as the
/// [`source`](std::error::Error::source), and the message does not repeat it
/// (see [`Error`], "Messages and their causes").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRequest {
    /// The URI has no scheme, or one other than http and https; also
    /// text that does not parse as a URI and does not start with a
    /// `scheme://` (`127.0.0.1:8080/x`).
    #[error("unsupported or missing URI scheme in {0:?} (expected http:// or https://)")]
    Scheme(String),
    /// The URI has no host, or none a connection could go to: `[]`, an
    /// IPvFuture literal or an IPv6 zone id (`[fe80::1%25eth0]`), a bracket
    /// in a name, an IPv6 literal followed by anything but `:` and its port
    /// (`[::1]8080`, its colon forgotten); or a host given as text, not ASCII or percent-encoded,
    /// that the URL standard's host parser refuses (`ex%2Fample.com`: a
    /// `/` once decoded; a code point IDNA disallows).
    #[error("URI {0:?} has no usable host")]
    Host(String),
    /// The URI's port is not a number from 0 to 65535.
    #[error("URI {0:?} has a port out of range (0 to 65535)")]
    Port(String),
    /// The URI could not be parsed. Displays like `invalid URI
    /// "http://a b/"`, its source what the parser said (`invalid uri
    /// character`).
    #[error("invalid URI {uri:?}")]
    Uri {
        /// The URI as given, its userinfo (`user:password@`), if any,
        /// shown as `***@`.
        uri: String,
        /// What the parser said.
        source: http::Error,
    },
    /// A header name or value is not valid HTTP. Displays like `invalid
    /// header "X Bad"`, its source what was wrong (`invalid HTTP header
    /// name`): the header is named, and its value, which may be a secret
    /// (`Authorization`), never shown.
    #[error("invalid header {name:?}")]
    Header {
        /// The header's name: as given if it is the name that is invalid,
        /// else as `http` keeps it (in lower case).
        name: String,
        /// What was wrong with the name or the value.
        source: http::Error,
    },
    /// The request could not be encoded (conflicting framing headers, …).
    #[error("cannot encode the request")]
    Encode(#[source] EncodeError),
    /// An https URI whose host is not a valid TLS server name (a DNS
    /// name or an IP address).
    #[error("host {0:?} is not a valid TLS server name")]
    ServerName(String),
    /// An https URI for a client built without the `rustls` cargo feature
    /// (on by default), which speaks plain HTTP only.
    #[error("{0:?} needs TLS, and the client was built without the `rustls` feature")]
    TlsDisabled(String),
    /// The proxy environment variable that would take the request (read
    /// when the client was built: see
    /// [`ClientBuilder::no_proxy`](crate::ClientBuilder::no_proxy)) is set
    /// to what is not a proxy URL (`HTTPS_PROXY=http://[bad`). The request
    /// is not sent straight to its origin instead, as curl's is not: a
    /// proxy the user set may be the only way out allowed. Displays like
    /// `the proxy environment variable HTTPS_PROXY is not a usable proxy
    /// URL`, its source why (the value is not shown: it may hold
    /// credentials).
    #[error("the proxy environment variable {variable} is not a usable proxy URL")]
    ProxyVariable {
        /// The variable's name as it was read (`https_proxy` or
        /// `HTTPS_PROXY`, …).
        variable: String,
        /// Why its value is not a proxy URL.
        source: ProxyUrlError,
    },
    /// The URI's userinfo (`user:password@`) could not be made into
    /// credentials: the URI without it is not valid, or, percent-decoded,
    /// the user name holds a `:` or either part a control character, which
    /// RFC 7617 §2 makes invalid in `Authorization: Basic` (`u%3Ax` would
    /// reach the server as the user `u`). The userinfo is not shown.
    #[error("the URI's userinfo cannot be used as credentials")]
    Userinfo,
    /// The credentials given to
    /// [`basic_auth`](crate::RequestBuilder::basic_auth) are invalid under
    /// RFC 7617 §2: the user name contains a `:` (the server takes the
    /// first `:` for the end of the name), or either part a control
    /// character. Neither part is shown: the name may be `name:password`
    /// given as the name.
    #[error("a Basic authentication user name cannot contain ':', nor either part a control character (RFC 7617 §2)")]
    BasicAuthUser,
    /// An `http::Request` given to [`Client::execute`](crate::Client::execute)
    /// asks for an HTTP version the client never speaks: HTTP/0.9, HTTP/1.0
    /// or HTTP/3. (HTTP/1.1, `http`'s default, and HTTP/2 leave the version
    /// to the client.) Displays like `the request asks for HTTP/1.0, which
    /// the client does not speak`.
    #[error("the request asks for {0:?}, which the client does not speak")]
    Version(http::Version),
    /// Query parameters or a form that cannot be url-encoded.
    #[error("cannot url-encode the query or form")]
    Query(#[source] serde_urlencoded::ser::Error),
    /// A value that cannot be serialized as JSON.
    #[cfg(feature = "json")]
    #[error("cannot serialize the JSON body")]
    Json(#[source] serde_json::Error),
}

/// Why a TLS handshake failed, in the terms a user acts on. The rustls error
/// in [`Error::Tls`] has the details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsFailureKind {
    /// The certificate chain does not lead to a trusted root (a private
    /// CA's certificate, or a self-signed one that is no CA certificate:
    /// see [`add_root_certificate`](crate::ClientBuilder::add_root_certificate);
    /// a self-signed CA certificate is [`CaCertificate`](Self::CaCertificate)).
    UnknownIssuer,
    /// A certificate of the chain has expired.
    Expired,
    /// A certificate of the chain is not valid yet (or the clock is wrong).
    NotYetValid,
    /// The certificate is not valid for the host name (or IP address) of
    /// the URI.
    NameMismatch,
    /// The server's own certificate is a CA certificate (`CA:TRUE`), which
    /// is never taken for a server's, trusted as a root or not — most
    /// often a self-signed certificate made as `openssl req -x509` makes
    /// one by default. The server needs a certificate a CA signed for it
    /// (that CA, added as a root, is then trusted: see
    /// [`add_root_certificate`](crate::ClientBuilder::add_root_certificate)),
    /// or a self-signed one with `basicConstraints=CA:FALSE`.
    CaCertificate,
    /// The server broke the TLS protocol, sent an alert, or has nothing in
    /// common with the client (versions, cipher suites, ALPN).
    Protocol,
    /// Any other certificate or TLS failure.
    Other,
}

impl TlsFailureKind {
    /// Classifies a rustls error.
    #[cfg(feature = "rustls")]
    pub fn of(error: &rustls::Error) -> TlsFailureKind {
        use rustls::CertificateError as C;
        match error {
            rustls::Error::InvalidCertificate(cert) => match cert {
                C::UnknownIssuer => TlsFailureKind::UnknownIssuer,
                C::Expired | C::ExpiredContext { .. } => TlsFailureKind::Expired,
                C::NotValidYet | C::NotValidYetContext { .. } => TlsFailureKind::NotYetValid,
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    TlsFailureKind::NameMismatch
                }
                // webpki's own error, which rustls passes on as it is.
                C::Other(other)
                    if other.0.downcast_ref::<webpki::Error>()
                        == Some(&webpki::Error::CaUsedAsEndEntity) =>
                {
                    TlsFailureKind::CaCertificate
                }
                _ => TlsFailureKind::Other,
            },
            rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. }
            | rustls::Error::InvalidMessage(_)
            | rustls::Error::PeerIncompatible(_)
            | rustls::Error::PeerMisbehaved(_)
            | rustls::Error::AlertReceived(_)
            | rustls::Error::DecryptError
            | rustls::Error::NoApplicationProtocol
            | rustls::Error::PeerSentOversizedRecord
            | rustls::Error::HandshakeNotComplete => TlsFailureKind::Protocol,
            _ => TlsFailureKind::Other,
        }
    }
}

impl fmt::Display for TlsFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsFailureKind::UnknownIssuer => "certificate issuer unknown",
            TlsFailureKind::Expired => "certificate expired",
            TlsFailureKind::NotYetValid => "certificate not valid yet",
            TlsFailureKind::NameMismatch => "certificate name mismatch",
            TlsFailureKind::Protocol => "TLS protocol error",
            TlsFailureKind::CaCertificate => "the server's certificate is a CA certificate",
            TlsFailureKind::Other => "TLS error",
        })
    }
}

/// An HTTP/2 error code (RFC 9113 §7), as a stream reset or a `GOAWAY`
/// carries it. Displays as its name (`CANCEL`, `PROTOCOL_ERROR`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Http2Reason(pub u32);

impl Http2Reason {
    /// `NO_ERROR`: a graceful shutdown.
    pub const NO_ERROR: Http2Reason = Http2Reason(0x0);
    /// `PROTOCOL_ERROR`.
    pub const PROTOCOL_ERROR: Http2Reason = Http2Reason(0x1);
    /// `INTERNAL_ERROR`.
    pub const INTERNAL_ERROR: Http2Reason = Http2Reason(0x2);
    /// `FLOW_CONTROL_ERROR`.
    pub const FLOW_CONTROL_ERROR: Http2Reason = Http2Reason(0x3);
    /// `FRAME_SIZE_ERROR`: a frame of the wrong size.
    pub const FRAME_SIZE_ERROR: Http2Reason = Http2Reason(0x6);
    /// `REFUSED_STREAM`: the server did not process the stream.
    pub const REFUSED_STREAM: Http2Reason = Http2Reason(0x7);
    /// `CANCEL`.
    pub const CANCEL: Http2Reason = Http2Reason(0x8);
    /// `COMPRESSION_ERROR`: a header block that does not decode.
    pub const COMPRESSION_ERROR: Http2Reason = Http2Reason(0x9);
    /// `ENHANCE_YOUR_CALM`: the server asks the client to slow down.
    pub const ENHANCE_YOUR_CALM: Http2Reason = Http2Reason(0xb);
    /// `HTTP_1_1_REQUIRED`: the server will not take the request over HTTP/2.
    pub const HTTP_1_1_REQUIRED: Http2Reason = Http2Reason(0xd);

    /// The error code's name, or `None` for a code RFC 9113 does not define.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Display for Http2Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown error code {:#x}", self.0),
        }
    }
}

/// Who ended an HTTP/2 stream or connection with an error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Http2Initiator {
    /// The server: a `RST_STREAM` or `GOAWAY` it sent.
    Remote,
    /// This client: the server broke the protocol (bad frames, a flood,
    /// an oversized header list), and the client ended the connection.
    Local,
}

/// The error of a failed exchange.
///
/// A timeout says which deadline passed — its variant, or
/// [`timeout_kind`](Error::timeout_kind) — the remote and the duration:
///
/// ```
/// # let url = tickless_client::doc_support::silent();
/// use std::time::Duration;
/// use tickless_client::{Error, TimeoutKind};
///
/// let client = tickless_client::Client::builder()
///     .request_timeout(Duration::from_millis(50))
///     .use_event_loop_timeouts(true)
///     .build()?;
/// match client.get(&url).send().wait() {
///     Err(Error::RequestTimeout(timeout)) => {
///         assert_eq!(timeout.duration, Duration::from_millis(50));
///     }
///     other => panic!("the server never answers: {other:?}"),
/// }
/// let error = client.get(&url).send().wait().unwrap_err();
/// assert_eq!(error.timeout_kind(), Some(TimeoutKind::Request));
/// assert!(error.to_string().starts_with("Request timeout to "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Messages and their causes
///
/// Every error of the crate follows one rule, the Rust API guidelines'
/// (C-GOOD-ERR) and the error-handling working group's: its `Display` says
/// its own level only, and the error that caused it is its
/// [`source`](std::error::Error::source) — never both, so that a chain
/// walker (`anyhow`'s `{:#}`, a logger's `sources`) prints each cause once.
/// A message alone is then short — `connect to localhost/127.0.0.1:1
/// failed`, without the OS's `Connection refused` — and the chain says the
/// rest:
///
/// ```
/// let client = tickless_client::Client::new();
/// let error = client.get("http://a b/").send().wait().unwrap_err();
/// assert_eq!(error.to_string(), r#"invalid URI "http://a b/""#);
/// let mut message = error.to_string();
/// let mut cause = std::error::Error::source(&error);
/// while let Some(next) = cause {
///     message = format!("{message}: {next}");
///     cause = next.source();
/// }
/// assert_eq!(message, r#"invalid URI "http://a b/": invalid uri character"#);
/// ```
///
/// An [`Error::Retried`]'s source is its last attempt's error; the earlier
/// attempts, which no chain holds, its message names with their causes.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The request deadline passed. Displays like `Request timeout to
    /// localhost/127.0.0.1:8080 after 20 ms`, as the other timeouts do (a
    /// timeout that is not whole milliseconds with its fraction: `after
    /// 0.25 ms`).
    RequestTimeout(Timeout),
    /// The server was silent for longer than the read timeout.
    ReadTimeout(Timeout),
    /// The server took none of the request for longer than the write
    /// timeout (see [`ClientBuilder::write_timeout`](crate::ClientBuilder::write_timeout)).
    WriteTimeout(Timeout),
    /// No connection could be established within the connect timeout.
    ConnectTimeout(Timeout),
    /// Every address of the host refused or failed the connection — or
    /// the connection made failed before its TLS handshake was done: the
    /// server closed or reset it (the source an `UnexpectedEof` or the OS
    /// error), and no byte of the request was sent.
    Connect {
        /// The remote tried last.
        remote: String,
        /// What the last attempt failed with.
        source: io::Error,
    },
    /// The TLS handshake did not finish within the handshake timeout (see
    /// [`ClientBuilder::handshake_timeout`](crate::ClientBuilder::handshake_timeout)).
    HandshakeTimeout(Timeout),
    /// An HTTP/2 PING had no answer within the keep-alive timeout (see
    /// [`ClientBuilder::http2_keep_alive_interval`](crate::ClientBuilder::http2_keep_alive_interval)):
    /// the connection was taken as dead, and the streams on it without a
    /// whole answer failed with this. Displays like `HTTP/2 keep-alive
    /// timeout to example.com/1.2.3.4:443 after 20000 ms`, the duration the
    /// keep-alive timeout's.
    KeepAliveTimeout(Timeout),
    /// The TLS handshake failed: the certificate was refused, or the
    /// server broke the protocol — or refused the client's certificate,
    /// which a TLS 1.3 server does only after the client has finished its
    /// side, so that its alert comes with the first read (reported here
    /// too, over HTTP/1.1 and HTTP/2). Displays like `TLS handshake with
    /// example.com/1.2.3.4:443 failed: certificate name mismatch`, the
    /// rustls error its source.
    #[cfg(feature = "rustls")]
    Tls {
        /// The server.
        remote: String,
        /// Why, in short.
        kind: TlsFailureKind,
        /// What rustls reported.
        source: rustls::Error,
    },
    /// A proxy failed the request: its host name did not resolve, it
    /// refused the connection, answered `CONNECT` with a failure, or
    /// failed the SOCKS5 handshake. Displays
    /// like `proxy http://127.0.0.1:3128 failed the request to
    /// example.com:443` (a proxy's credentials are never shown), its source
    /// what the proxy did or said (`CONNECT to example.com:443 answered 403
    /// Forbidden`).
    Proxy {
        /// The proxy, as `scheme://host:port`.
        proxy: String,
        /// The origin the request was for, as `host:port`.
        target: String,
        /// What it did or said.
        source: ProxyError,
        /// Whether no byte of the request reached the origin, so that it
        /// may be sent again whatever its method: true, as the proxy
        /// failed before its tunnel was up, unless an earlier attempt may
        /// have been processed. See [`Error::is_unprocessed`].
        unprocessed: bool,
    },
    /// The origin's host name could not be resolved (a proxy's is an
    /// [`Error::Proxy`] with [`ProxyError::Resolve`]).
    Resolve {
        /// The host name.
        host: String,
        /// Why.
        source: io::Error,
    },
    /// The server sent something that is not valid HTTP/1.1 — or, over
    /// HTTP/2, interim (1xx) heads past
    /// [`max_head_bytes`](crate::h1::Limits::max_head_bytes) in all
    /// ([`DecodeError::InterimResponsesTooLarge`], as over HTTP/1.1).
    Protocol {
        /// The server.
        remote: String,
        /// What was wrong.
        source: DecodeError,
    },
    /// The HTTP/2 stream or its connection ended with an error code: the
    /// server reset the stream or sent `GOAWAY` with an error, or it broke
    /// the protocol and the client ended the connection. Displays like
    /// `HTTP/2 error from example.com/1.2.3.4:443: stream reset by the
    /// server with REFUSED_STREAM (not processed by the server: safe to
    /// send again)`, the last part when [`unprocessed`](Error::is_unprocessed).
    Http2 {
        /// The server.
        remote: String,
        /// The error code.
        reason: Http2Reason,
        /// Who sent it.
        initiator: Http2Initiator,
        /// Whether it ended the whole connection (`GOAWAY`), not only the
        /// stream (`RST_STREAM`).
        connection: bool,
        /// Whether the server provably did not process the request, so
        /// that it may be sent again whatever its method: see
        /// [`Error::is_unprocessed`].
        unprocessed: bool,
    },
    /// The server does not speak HTTP/2, which the client spoke to it
    /// without asking ([`ClientBuilder::http2_prior_knowledge`](crate::ClientBuilder::http2_prior_knowledge)):
    /// it answered the connection's preface with anything but HTTP/2's
    /// `SETTINGS` frame (an HTTP/1.x status line, say), or closed the
    /// connection before sending anything. Displays like
    /// `example.com/1.2.3.4:80 does not speak HTTP/2: it answered the
    /// connection preface with "HTTP/1.1 400 Bad Request"`. Never sent again by the
    /// client nor by a [retry policy](crate::retry::Policy): any connection
    /// to that server would meet the same. After an HTTP/1.x status line it
    /// is [`unprocessed`](Error::is_unprocessed): the server could not read
    /// the request, which came after the preface as HTTP/2 frames.
    NotHttp2 {
        /// The server.
        remote: String,
        /// The first line of what the server answered with (at most 128
        /// bytes of it, lossily decoded as UTF-8): an HTTP/1.x status line,
        /// say. `None` if it closed the connection before sending anything.
        answer: Option<String>,
    },
    /// The server did not negotiate HTTP/2 (`h2`, by ALPN) with an
    /// [`http2_only`](crate::ClientBuilder::http2_only) client, whose TLS
    /// handshake offers nothing else: it refused the handshake with a
    /// `no_application_protocol` alert (it speaks only other protocols,
    /// `http/1.1` say: RFC 7301 §3.2), or finished it negotiating no
    /// protocol at all, and the client closed the connection. Displays like
    /// `example.com/1.2.3.4:443 did not negotiate h2 (the client is HTTP/2
    /// only): it refused the TLS handshake with no_application_protocol`.
    /// No byte of the request was sent:
    /// [`unprocessed`](Error::is_unprocessed), unless an earlier attempt of
    /// it may have been processed. Never sent again on a new connection,
    /// by the client nor by a [retry policy](crate::retry::Policy): any
    /// connection to that server would meet the same. (A request whose own
    /// connection failed so goes on an HTTP/2 connection to that origin
    /// already open, if there is one, rather than fail.) (Over cleartext, with
    /// [prior knowledge](crate::ClientBuilder::http2_prior_knowledge), a
    /// server that does not speak HTTP/2 is an [`Error::NotHttp2`].)
    Http2NotNegotiated {
        /// The server.
        remote: String,
        /// Whether the server refused the handshake
        /// (`no_application_protocol`), rather than finished it with no
        /// protocol negotiated.
        handshake_refused: bool,
        /// Whether the server provably did not process the request: see
        /// [`Error::is_unprocessed`].
        unprocessed: bool,
    },
    /// The request's header section is larger than the server accepts
    /// over HTTP/2, by the `SETTINGS_MAX_HEADER_LIST_SIZE` it sent (RFC
    /// 9113 §6.5.2, which counts each field's name and value and 32 bytes,
    /// its pseudo-header fields too): the client did not send it, and the
    /// connection goes on with its other requests. Displays like `request
    /// header section of 9000 bytes is larger than the 8192 bytes
    /// example.com/1.2.3.4:443 accepts over HTTP/2: not sent`. Never sent
    /// again by the client nor by a [retry policy](crate::retry::Policy):
    /// the server would refuse it again. [`unprocessed`](Error::is_unprocessed)
    /// unless an earlier attempt of it may have been processed.
    ///
    /// A request sent before the server's `SETTINGS` come (the first
    /// requests of a connection may be) is not held to it: the server says
    /// what it does with it.
    HeadersTooLarge {
        /// The server.
        remote: String,
        /// The request's header section, in bytes as counted above.
        size: u64,
        /// The server's `SETTINGS_MAX_HEADER_LIST_SIZE`.
        limit: u64,
        /// Whether the server provably did not process the request: see
        /// [`Error::is_unprocessed`].
        unprocessed: bool,
    },
    /// The response body is larger than the configured limit.
    BodyTooLarge {
        /// The server.
        remote: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The request body could not be sent as given: its source (a
    /// `Read`, an async body) failed, or produced more or fewer bytes than
    /// the `Content-Length` it was sent with.
    RequestBody {
        /// What went wrong.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The caller cancelled the exchange (or dropped its future or body).
    Cancelled,
    /// The client was closed before the exchange ended.
    ClientClosed,
    /// A blocking wait — [`ResponseFuture::wait`](crate::ResponseFuture::wait),
    /// a blocking read of a [`Body`](crate::Body) — was called on a thread
    /// that runs the turns of the event loop it would wait for: that
    /// loop's own thread, or a caller's driving it, in an
    /// [`EventListener`](crate::EventListener) method or a waker that polls
    /// its task inline. The loop cannot turn while its thread waits, so the
    /// wait would end only by a timeout (or never): it fails at once
    /// instead. Poll the future or read the body asynchronously (a
    /// waker wakes the task when the answer comes), or hand the wait to
    /// another thread and return.
    ///
    /// Nothing else changes: a refused [`ResponseFuture::wait`](crate::ResponseFuture::wait)
    /// drops its future, which cancels the request, as any dropped future
    /// does; a refused `Read` or [`Chunk::wait`](crate::Chunk::wait)
    /// leaves the body as it was, to be read later, or elsewhere (a
    /// refused `bytes().wait()` or `text().wait()` has taken the response,
    /// and drops it). See [`EventListener`](crate::EventListener),
    /// "Blocking, and calling back into the client", for which waits are
    /// refused, and which are not (the client cannot tell).
    WouldDeadlock,
    /// The connection failed while the exchange was using it.
    Io {
        /// The server.
        remote: String,
        /// The OS error.
        source: io::Error,
    },
    /// The request was refused before anything was sent.
    InvalidRequest(InvalidRequest),
    /// A redirect chain was stopped: too long, a loop, an `https` → `http`
    /// hop, or the redirect policy's own error.
    Redirect {
        /// Every URL of the chain, the first request's first, the one that
        /// was not followed last; none with its userinfo
        /// (`user:password@`).
        chain: Vec<http::Uri>,
        /// Why it stopped; also the [`source`](std::error::Error::source),
        /// whose own source is a custom policy's error.
        reason: RedirectError,
    },
    /// A response body said it was encoded (`Content-Encoding`) and did not
    /// decode: corrupt, cut short, or followed by stray bytes. Its
    /// connection is let go at once, as when the body is dropped.
    Decode {
        /// The server.
        remote: String,
        /// What was wrong.
        source: tickless_codings::DecodeError,
    },
    /// A response's `Content-Encoding` stacks more codings than the client
    /// decodes ([`MAX_CODINGS`](tickless_codings::MAX_CODINGS), 4, as
    /// curl), with decompression on: the response is refused, as curl
    /// refuses it, rather than handed over still encoded to a caller who
    /// asked for it decoded. Its connection is let go at once. With
    /// decompression off it comes as sent, `Content-Encoding` and all.
    TooManyCodings {
        /// The server.
        remote: String,
        /// How many codings (other than `identity`) the response stacks.
        count: usize,
    },
    /// The response's status is a client or server error (or past 599,
    /// taken as one), and
    /// [`Response::error_for_status`](crate::Response::error_for_status)
    /// was asked.
    Status {
        /// The status.
        status: http::StatusCode,
        /// The URL that answered it.
        url: http::Uri,
    },
    /// Every attempt of a retried request failed: their errors, the first
    /// attempt's first and the one that ended it last (a status retried is
    /// an [`Error::Status`]). Its timeout, if any, is the last one's, and
    /// so is its [`source`](std::error::Error::source): the last attempt's
    /// error, with its own causes after it. The message names the earlier
    /// attempts, each with its causes, since no source chain holds them:
    /// `3 attempts failed (earlier: 1) I/O error with a/1.2.3.4:80:
    /// connection reset; 2) …)`.
    Retried {
        /// Each attempt's error, in order.
        attempts: Vec<Error>,
    },
    /// A response body is not the JSON asked for ([`Response::json`](crate::Response::json)).
    #[cfg(feature = "json")]
    Json(serde_json::Error),
}

impl fmt::Display for Error {
    /// This level only: the cause, if any, is the
    /// [`source`](StdError::source) (see "Messages and their causes").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let timeout = |f: &mut fmt::Formatter<'_>, kind: TimeoutKind, t: &Timeout| {
            write!(f, "{kind} to {} after {} ms", t.remote, t.millis())
        };
        match self {
            Error::RequestTimeout(t) => timeout(f, TimeoutKind::Request, t),
            Error::ReadTimeout(t) => timeout(f, TimeoutKind::Read, t),
            Error::WriteTimeout(t) => timeout(f, TimeoutKind::Write, t),
            Error::ConnectTimeout(t) => timeout(f, TimeoutKind::Connect, t),
            Error::KeepAliveTimeout(t) => timeout(f, TimeoutKind::KeepAlive, t),
            Error::Connect { remote, .. } => write!(f, "connect to {remote} failed"),
            // Not `TimeoutKind::Handshake`'s text: this one is TLS's.
            Error::HandshakeTimeout(t) => write!(
                f,
                "TLS handshake timeout to {} after {} ms",
                t.remote,
                t.millis()
            ),
            #[cfg(feature = "rustls")]
            Error::Tls { remote, kind, .. } => {
                write!(f, "TLS handshake with {remote} failed: {kind}")
            }
            Error::Proxy { proxy, target, .. } => {
                write!(f, "proxy {proxy} failed the request to {target}")
            }
            Error::Resolve { host, .. } => write!(f, "could not resolve {host}"),
            Error::Protocol { remote, .. } => write!(f, "protocol error from {remote}"),
            Error::Http2 {
                remote,
                reason,
                initiator,
                connection,
                unprocessed,
            } => write!(
                f,
                "HTTP/2 error from {remote}: {} by the {} with {reason}{}",
                if *connection {
                    "connection ended"
                } else {
                    "stream reset"
                },
                match initiator {
                    Http2Initiator::Remote => "server",
                    Http2Initiator::Local => "client",
                },
                if *unprocessed {
                    " (not processed by the server: safe to send again)"
                } else {
                    ""
                }
            ),
            Error::NotHttp2 {
                remote,
                answer: Some(answer),
            } => write!(
                f,
                "{remote} does not speak HTTP/2: it answered the connection preface with {answer:?}"
            ),
            Error::NotHttp2 {
                remote,
                answer: None,
            } => write!(
                f,
                "{remote} closed the connection before any HTTP/2 frame: it may not speak HTTP/2"
            ),
            Error::Http2NotNegotiated {
                remote,
                handshake_refused,
                ..
            } => write!(
                f,
                "{remote} did not negotiate h2 (the client is HTTP/2 only): {}",
                if *handshake_refused {
                    "it refused the TLS handshake with no_application_protocol"
                } else {
                    "it negotiated no protocol"
                }
            ),
            Error::HeadersTooLarge {
                remote,
                size,
                limit,
                ..
            } => write!(
                f,
                "request header section of {size} bytes is larger than the {limit} bytes \
                 {remote} accepts over HTTP/2: not sent"
            ),
            Error::BodyTooLarge { remote, limit } => write!(
                f,
                "response body from {remote} exceeds the limit of {limit} bytes"
            ),
            Error::RequestBody { .. } => f.write_str("the request body failed"),
            Error::Cancelled => f.write_str("request cancelled"),
            Error::ClientClosed => f.write_str("the client is closed"),
            Error::WouldDeadlock => f.write_str(
                "a blocking wait on the thread of the event loop it waits for would never end: \
                 poll the future or read the body asynchronously, or wait on another thread",
            ),
            Error::Io { remote, .. } => write!(f, "I/O error with {remote}"),
            // Transparent: the invalid request's own message and source.
            Error::InvalidRequest(invalid) => invalid.fmt(f),
            Error::Redirect { chain, .. } => {
                write!(f, "redirect stopped after {}", chain_text(chain))
            }
            Error::Decode { remote, .. } => {
                write!(f, "response body from {remote} does not decode")
            }
            Error::TooManyCodings { remote, count } => write!(
                f,
                "response from {remote} stacks {count} content codings (at most {} are decoded)",
                tickless_codings::MAX_CODINGS
            ),
            Error::Status { status, url } => write!(f, "{url} answered {status}"),
            Error::Retried { attempts } => f.write_str(&retried_text(attempts, |attempt| {
                WithCauses(attempt).to_string()
            })),
            #[cfg(feature = "json")]
            Error::Json(_) => f.write_str("the response body does not parse as the JSON asked for"),
        }
    }
}

impl StdError for Error {
    /// The error this one's message does not say: the parser's, the OS's,
    /// the proxy's, the last attempt's; `None` for an error that is its
    /// own cause (a timeout, a status, a cancel).
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Connect { source, .. }
            | Error::Resolve { source, .. }
            | Error::Io { source, .. } => Some(source),
            #[cfg(feature = "rustls")]
            Error::Tls { source, .. } => Some(source),
            Error::Proxy { source, .. } => Some(source),
            Error::Protocol { source, .. } => Some(source),
            Error::RequestBody { source } => Some(source.as_ref()),
            // Transparent, as its message is.
            Error::InvalidRequest(invalid) => invalid.source(),
            Error::Redirect { reason, .. } => Some(reason),
            Error::Decode { source, .. } => Some(source),
            Error::Retried { attempts } => attempts.last().map(|last| last as &dyn StdError),
            #[cfg(feature = "json")]
            Error::Json(source) => Some(source),
            Error::RequestTimeout(_)
            | Error::ReadTimeout(_)
            | Error::WriteTimeout(_)
            | Error::ConnectTimeout(_)
            | Error::HandshakeTimeout(_)
            | Error::KeepAliveTimeout(_)
            | Error::Http2 { .. }
            | Error::NotHttp2 { .. }
            | Error::Http2NotNegotiated { .. }
            | Error::HeadersTooLarge { .. }
            | Error::BodyTooLarge { .. }
            | Error::Cancelled
            | Error::ClientClosed
            | Error::WouldDeadlock
            | Error::TooManyCodings { .. }
            | Error::Status { .. } => None,
        }
    }
}

impl From<InvalidRequest> for Error {
    fn from(invalid: InvalidRequest) -> Error {
        Error::InvalidRequest(invalid)
    }
}

/// Why a redirect chain stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectError {
    /// More hops than the policy allows.
    #[error("more than {limit} redirects")]
    TooMany {
        /// The policy's limit.
        limit: usize,
    },
    /// The chain came back to a request it had made already, with nothing
    /// changed (no cookie set) in between.
    #[error("a redirect loop")]
    Loop,
    /// An `https` URL redirected to an `http` one, which the policy refuses.
    #[error("an https URL redirected to http")]
    Downgrade,
    /// The custom policy's error (its
    /// [`source`](std::error::Error::source)).
    #[error("the redirect policy refused")]
    Policy(#[source] Box<dyn StdError + Send + Sync>),
    /// The URL a redirect points to cannot be requested: its hop was
    /// refused before it was sent, as [`Error::InvalidRequest`] refuses a
    /// request (a user name in its `Location` that Basic credentials
    /// cannot carry, a proxy variable for its scheme that is no proxy
    /// URL…; the reason is the [`source`](std::error::Error::source)). The
    /// hops before it were sent and answered.
    #[error("the URL it points to cannot be requested")]
    InvalidHop(#[source] InvalidRequest),
}

/// `3 attempts failed (earlier: 1) …; 2) …)`: how many, and each attempt
/// before the last as `each` tells it, with its causes — they are in no
/// source chain. The last is the source, and not told here.
pub(crate) fn retried_text(attempts: &[Error], each: impl Fn(&Error) -> String) -> String {
    let count = match attempts.len() {
        1 => "1 attempt failed".to_string(),
        n => format!("{n} attempts failed"),
    };
    let Some((_last, earlier)) = attempts.split_last() else {
        return count;
    };
    if earlier.is_empty() {
        return count;
    }
    let earlier = earlier
        .iter()
        .enumerate()
        .map(|(n, error)| format!("{}) {}", n + 1, each(error)))
        .collect::<Vec<_>>()
        .join("; ");
    format!("{count} (earlier: {earlier})")
}

/// Displays an error and each of its causes, `: `-separated, as `anyhow`
/// shows one with `{:#}`: each of the crate's errors says its own level only
/// and leaves its cause to [`source`](StdError::source) (see [`Error`],
/// "Messages and their causes"), so a message for a person wants the chain.
///
/// ```
/// use tickless_client::WithCauses;
///
/// let client = tickless_client::Client::new();
/// let error = client.get("http://a b/").send().wait().unwrap_err();
/// assert_eq!(
///     WithCauses(&error).to_string(),
///     r#"invalid URI "http://a b/": invalid uri character"#
/// );
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WithCauses<'a>(pub &'a (dyn StdError + 'a));

impl fmt::Display for WithCauses<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(error) = cause {
            write!(f, ": {error}")?;
            cause = error.source();
        }
        Ok(())
    }
}

fn chain_text(chain: &[http::Uri]) -> String {
    chain
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

impl Error {
    /// Whether a deadline passed (request, read, write, connect,
    /// handshake, or an HTTP/2 keep-alive PING's).
    pub fn is_timeout(&self) -> bool {
        self.timeout().is_some()
    }

    /// Which deadline passed, if this is a timeout.
    pub fn timeout_kind(&self) -> Option<TimeoutKind> {
        Some(match self {
            Error::Retried { attempts } => return attempts.last()?.timeout_kind(),
            Error::RequestTimeout(_) => TimeoutKind::Request,
            Error::ReadTimeout(_) => TimeoutKind::Read,
            Error::WriteTimeout(_) => TimeoutKind::Write,
            Error::ConnectTimeout(_)
            | Error::Proxy {
                source: ProxyError::ConnectTimeout(_),
                ..
            } => TimeoutKind::Connect,
            Error::HandshakeTimeout(_)
            | Error::Proxy {
                source: ProxyError::HandshakeTimeout(_),
                ..
            } => TimeoutKind::Handshake,
            Error::KeepAliveTimeout(_) => TimeoutKind::KeepAlive,
            _ => return None,
        })
    }

    /// The timeout, if this is one.
    pub fn timeout(&self) -> Option<&Timeout> {
        match self {
            Error::Retried { attempts } => attempts.last()?.timeout(),
            Error::RequestTimeout(t)
            | Error::ReadTimeout(t)
            | Error::WriteTimeout(t)
            | Error::ConnectTimeout(t)
            | Error::HandshakeTimeout(t)
            | Error::KeepAliveTimeout(t)
            | Error::Proxy {
                source: ProxyError::HandshakeTimeout(t) | ProxyError::ConnectTimeout(t),
                ..
            } => Some(t),
            _ => None,
        }
    }

    pub(crate) fn timeout_of(kind: TimeoutKind, remote: String, duration: Duration) -> Error {
        let timeout = Timeout { remote, duration };
        match kind {
            TimeoutKind::Request => Error::RequestTimeout(timeout),
            TimeoutKind::Read => Error::ReadTimeout(timeout),
            TimeoutKind::Write => Error::WriteTimeout(timeout),
            TimeoutKind::Connect => Error::ConnectTimeout(timeout),
            TimeoutKind::Handshake => Error::HandshakeTimeout(timeout),
            TimeoutKind::KeepAlive => Error::KeepAliveTimeout(timeout),
        }
    }

    /// Whether the server provably did not process the request, so that
    /// sending it again — even a `POST` — cannot make it take effect twice.
    ///
    /// True only where the protocol says so (RFC 9113 §8.7), for an
    /// [`Error::Http2`]: the server refused the stream (`REFUSED_STREAM`)
    /// before any answer, or sent `GOAWAY` with a last stream id below the
    /// stream's, or the request, still waiting for a stream, was never
    /// sent. The client sends such a request again by itself once when its
    /// body is in memory; this error is what comes when it could not (a
    /// streamed body, whose source is spent) or when the second attempt
    /// met the same. A retry policy ([`retry::Policy`](crate::retry::Policy))
    /// retries such a failure whatever the method, its body in memory.
    ///
    /// True too of an [`Error::Proxy`]: the proxy failed before its tunnel
    /// was up (its connection refused or closed before its answer, a
    /// `CONNECT` answered other than 2xx, a SOCKS5 refusal, a stalled
    /// handshake), so no byte of the request went to the origin. A retry
    /// policy retries those of them it retries at all (a close, a stall,
    /// the proxy's report that the origin is out of reach — not a `403`
    /// or `407`, which another attempt would meet again) whatever the
    /// method. Once the tunnel is up, a failure is the origin's connection's,
    /// as without a proxy.
    ///
    /// True too of an [`Error::NotHttp2`] answered with an HTTP/1.x status line:
    /// that server could not read the request — nor any sent to it again,
    /// so neither the client nor a retry policy sends it again.
    ///
    /// True too of an [`Error::HeadersTooLarge`]: the client did not send
    /// the request, its header section past what the server accepts — nor
    /// does it send it again, nor a retry policy.
    ///
    /// True too of an [`Error::Http2NotNegotiated`]: the TLS handshake
    /// did not give the HTTP/2-only client HTTP/2, and it sent nothing —
    /// nor does it send it again, nor a retry policy: to another client,
    /// one that speaks HTTP/1.1, it may go whatever its method.
    ///
    /// For [`Error::Retried`], true if it is true of every attempt.
    ///
    /// False wherever the server may have seen the request: any other
    /// reset or connection error, a connection closed before the answer
    /// (over HTTP/1.1 too: RFC 9110 §9.2.2 leaves that unknowable), a
    /// request that failed after a redirect (the server answered the
    /// request before it), or one an earlier attempt of which went out
    /// on a pooled HTTP/1.1 connection that then failed. A failure to
    /// connect ([`Error::Connect`], [`Error::ConnectTimeout`],
    /// [`Error::Resolve`]) or to finish the TLS handshake in time
    /// ([`Error::HandshakeTimeout`]) says by its kind that nothing was
    /// sent on that hop, and is not counted here.
    pub fn is_unprocessed(&self) -> bool {
        match self {
            Error::Http2 { unprocessed, .. }
            | Error::Proxy { unprocessed, .. }
            | Error::Http2NotNegotiated { unprocessed, .. }
            | Error::HeadersTooLarge { unprocessed, .. } => *unprocessed,
            Error::NotHttp2 { answer, .. } => answer
                .as_deref()
                .is_some_and(|answer| answer.starts_with("HTTP/1.")),
            Error::Retried { attempts } => {
                !attempts.is_empty() && attempts.iter().all(Error::is_unprocessed)
            }
            _ => false,
        }
    }

    /// This error, with [`is_unprocessed`](Error::is_unprocessed) made
    /// `unprocessed` where the error can carry it (an HTTP/2 failure, a
    /// proxy's, a server's refusal of HTTP/2 by ALPN, a request whose
    /// header section was too large to send, and each attempt of a retried
    /// one).
    pub(crate) fn with_unprocessed(mut self, unprocessed: bool) -> Error {
        match &mut self {
            Error::Http2 {
                unprocessed: flag, ..
            }
            | Error::Proxy {
                unprocessed: flag, ..
            }
            | Error::Http2NotNegotiated {
                unprocessed: flag, ..
            }
            | Error::HeadersTooLarge {
                unprocessed: flag, ..
            } => *flag = unprocessed,
            Error::Retried { attempts } => {
                *attempts = std::mem::take(attempts)
                    .into_iter()
                    .map(|attempt| attempt.with_unprocessed(unprocessed))
                    .collect();
            }
            _ => {}
        }
        self
    }

    /// Why a TLS handshake failed, if this is a TLS failure. For
    /// [`Error::Retried`], its last attempt's, as its
    /// [`timeout`](Error::timeout) is: the failure that ended the request.
    pub fn tls_failure(&self) -> Option<TlsFailureKind> {
        match self {
            Error::Retried { attempts } => attempts.last()?.tls_failure(),
            #[cfg(feature = "rustls")]
            Error::Tls { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    #[cfg(feature = "rustls")]
    pub(crate) fn tls(remote: String, source: rustls::Error) -> Error {
        Error::Tls {
            remote,
            kind: TlsFailureKind::of(&source),
            source,
        }
    }

    /// A copy of the error a connection's opening (its lookup, connect,
    /// proxy's handshake or TLS) failed with, for each request that waited
    /// for that connection (an HTTP/2 one, to share): they fail with it as
    /// its opener does. `Error` is not `Clone`, for the `io::Error`s it may
    /// carry: the copy has the same variant and fields, each `io::Error`
    /// made again by [`copy_io`] — which keeps its OS error code, or else
    /// its kind and message, but not the error inside it (a downcast of the
    /// copy's finds a string, and its source chain ends there). `None` for
    /// a variant no opening fails with.
    pub(crate) fn copy_of_opening_failure(&self) -> Option<Error> {
        Some(match self {
            Error::ConnectTimeout(timeout) => Error::ConnectTimeout(timeout.clone()),
            Error::Connect { remote, source } => Error::Connect {
                remote: remote.clone(),
                source: copy_io(source),
            },
            Error::HandshakeTimeout(timeout) => Error::HandshakeTimeout(timeout.clone()),
            #[cfg(feature = "rustls")]
            Error::Tls {
                remote,
                kind,
                source,
            } => Error::Tls {
                remote: remote.clone(),
                kind: *kind,
                source: source.clone(),
            },
            Error::Proxy {
                proxy,
                target,
                source,
                unprocessed,
            } => Error::Proxy {
                proxy: proxy.clone(),
                target: target.clone(),
                source: source.copy(),
                unprocessed: *unprocessed,
            },
            Error::Http2NotNegotiated {
                remote,
                handshake_refused,
                unprocessed,
            } => Error::Http2NotNegotiated {
                remote: remote.clone(),
                handshake_refused: *handshake_refused,
                unprocessed: *unprocessed,
            },
            Error::Resolve { host, source } => Error::Resolve {
                host: host.clone(),
                source: copy_io(source),
            },
            _ => return None,
        })
    }

    /// A copy of the error a response failed with for its coding — its
    /// body as the caller's reader decoded it (a coding that does not
    /// decode, or that inflates past `max_body_bytes`), or its head (more
    /// codings stacked than are decoded) — for its exchange to end with as
    /// the caller's request did. `None` for any other variant.
    pub(crate) fn copy_of_decoding_failure(&self) -> Option<Error> {
        Some(match self {
            Error::TooManyCodings { remote, count } => Error::TooManyCodings {
                remote: remote.clone(),
                count: *count,
            },
            Error::Decode { remote, source } => Error::Decode {
                remote: remote.clone(),
                source: source.clone(),
            },
            Error::BodyTooLarge { remote, limit } => Error::BodyTooLarge {
                remote: remote.clone(),
                limit: *limit,
            },
            _ => return None,
        })
    }
}

/// `error` made again (see [`Error::copy_of_opening_failure`]): from its
/// OS error code if it has one — whose message the system gives again —,
/// else of its kind with its message. The error inside it, if any, is not
/// kept, but as its message.
fn copy_io(error: &io::Error) -> io::Error {
    match error.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(error.kind(), error.to_string()),
    }
}

/// The timeout kind of `error` or of anything in its source chain, so it
/// survives wrapping (`io::Error`, `Box<dyn Error>`, an application's own
/// error type with a `source`).
pub fn timeout_kind(error: &(dyn StdError + 'static)) -> Option<TimeoutKind> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(kind) = error.downcast_ref::<Error>().and_then(Error::timeout_kind) {
            return Some(kind);
        }
        if let Some(io) = error.downcast_ref::<io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(kind) = timeout_kind(inner) {
                    return Some(kind);
                }
            }
        }
        next = error.source();
    }
    None
}

impl From<Error> for io::Error {
    /// Timeouts become `TimedOut`, keeping the tickless error inside, so
    /// [`timeout_kind`] still finds its kind; a response cut short
    /// `UnexpectedEof`, one that breaks HTTP or its coding `InvalidData`,
    /// an I/O failure its own kind, a retried request its last attempt's.
    fn from(error: Error) -> io::Error {
        io::Error::new(io_kind(&error), error)
    }
}

/// The `io::ErrorKind` an `io::Error` made of `error` has — what a
/// [`Body`](crate::Body) read as `std::io::Read` fails with:
/// `TimedOut` for a timeout, `UnexpectedEof` for a connection closed before
/// the response was whole or its content coding's stream cut short (as over
/// HTTP/2, whose close comes as an [`Error::Io`] of that kind), the OS
/// error's own kind for an I/O failure,
/// `InvalidData` for a response that breaks HTTP or its content coding
/// (over HTTP/2 too, where the client resets the stream or ends the
/// connection for it: see [`breaks_http2`]),
/// `Unsupported` for a server that negotiated no HTTP/2 with an
/// HTTP/2-only client, for a retried request its last attempt's, as its
/// timeout is — and `Other` for the rest, among them an HTTP/2 stream the
/// server reset before its end ([`Error::Http2`]).
pub(crate) fn io_kind(error: &Error) -> io::ErrorKind {
    match error {
        e if e.is_timeout() => io::ErrorKind::TimedOut,
        Error::Retried { attempts } => attempts.last().map_or(io::ErrorKind::Other, io_kind),
        Error::Connect { source, .. } | Error::Io { source, .. } => source.kind(),
        Error::Proxy {
            source: ProxyError::Connect(source) | ProxyError::Io(source),
            ..
        } => source.kind(),
        // Not `Interrupted`: `std::io::Read` callers (`read_to_end`,
        // `read_exact`, `copy`) retry that, and a body cut short by a
        // cancel must end their read with an error, not look whole.
        Error::Cancelled => io::ErrorKind::Other,
        Error::InvalidRequest(_) => io::ErrorKind::InvalidInput,
        Error::Protocol {
            source: DecodeError::Truncated { .. },
            ..
        }
        | Error::Decode {
            source: tickless_codings::DecodeError::Truncated { .. },
            ..
        } => io::ErrorKind::UnexpectedEof,
        Error::Protocol { .. } | Error::Decode { .. } => io::ErrorKind::InvalidData,
        Error::Http2 {
            reason, initiator, ..
        } if breaks_http2(*reason, *initiator) => io::ErrorKind::InvalidData,
        #[cfg(feature = "rustls")]
        Error::Tls { .. } => io::ErrorKind::InvalidData,
        Error::Http2NotNegotiated { .. } => io::ErrorKind::Unsupported,
        _ => io::ErrorKind::Other,
    }
}

/// Whether an HTTP/2 error with `reason` from `initiator` is the client's
/// answer to a server whose frames break HTTP/2 — a response that breaks
/// HTTP, as an [`Error::Protocol`] is over HTTP/1.1: `h2` resets a stream
/// with `PROTOCOL_ERROR` for a malformed response (DATA that disagree
/// with its `content-length`, RFC 9113 §8.1.1, or a bad field in its
/// head or trailers) and with `FLOW_CONTROL_ERROR` for DATA past the
/// stream's window, and ends the connection with those, `FRAME_SIZE_ERROR`
/// or `COMPRESSION_ERROR` for frames it cannot read. Not a server's reset
/// (its word on the stream, whatever the code), nor the client's
/// `ENHANCE_YOUR_CALM` for a flood of valid frames.
fn breaks_http2(reason: Http2Reason, initiator: Http2Initiator) -> bool {
    let breaks = [
        Http2Reason::PROTOCOL_ERROR,
        Http2Reason::FLOW_CONTROL_ERROR,
        Http2Reason::FRAME_SIZE_ERROR,
        Http2Reason::COMPRESSION_ERROR,
    ]
    .contains(&reason);
    breaks && initiator == Http2Initiator::Local
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_reads_like_the_java_client_and_survives_wrapping() {
        let error = Error::timeout_of(
            TimeoutKind::Request,
            "localhost/127.0.0.1:8080".into(),
            Duration::from_millis(20),
        );
        assert_eq!(
            error.to_string(),
            "Request timeout to localhost/127.0.0.1:8080 after 20 ms"
        );
        let io: io::Error = error.into();
        assert_eq!(io.kind(), io::ErrorKind::TimedOut);
        assert_eq!(timeout_kind(&io), Some(TimeoutKind::Request));
        let boxed: Box<dyn StdError + Send + Sync> = Box::new(io);
        assert_eq!(timeout_kind(boxed.as_ref()), Some(TimeoutKind::Request));
        assert_eq!(timeout_kind(&Error::Cancelled), None);
    }

    /// A timeout that is not whole milliseconds — the sub-millisecond
    /// deadlines a loop fires on time — says the time it was, not that
    /// time cut to whole milliseconds: `after 0 ms` would read as a zero
    /// timeout, which is none at all. Whole ones read as before.
    #[test]
    fn a_timeout_of_a_fraction_of_a_millisecond_says_the_fraction() {
        let remote = "127.0.0.1/127.0.0.1:8080";
        for (duration, shown) in [
            (Duration::from_micros(500), "0.5 ms"),
            (Duration::from_micros(250), "0.25 ms"),
            (Duration::from_micros(1500), "1.5 ms"),
            (Duration::from_nanos(20_000_001), "20.000001 ms"),
            (Duration::from_nanos(1), "0.000001 ms"),
            (Duration::from_millis(20), "20 ms"),
            (Duration::from_secs(3), "3000 ms"),
        ] {
            let timeout = Timeout {
                remote: remote.into(),
                duration,
            };
            for (error, text) in [
                (
                    Error::ReadTimeout(timeout.clone()),
                    format!("Read timeout to {remote} after {shown}"),
                ),
                (
                    Error::KeepAliveTimeout(timeout.clone()),
                    format!("HTTP/2 keep-alive timeout to {remote} after {shown}"),
                ),
                (
                    Error::HandshakeTimeout(timeout.clone()),
                    format!("TLS handshake timeout to {remote} after {shown}"),
                ),
            ] {
                assert_eq!(error.to_string(), text, "{duration:?}");
            }
            for (error, text) in [
                (
                    ProxyError::ConnectTimeout(timeout.clone()),
                    format!("the connection to the proxy took longer than {shown}"),
                ),
                (
                    ProxyError::HandshakeTimeout(timeout.clone()),
                    format!("the proxy's handshake took longer than {shown}"),
                ),
            ] {
                assert_eq!(error.to_string(), text, "{duration:?}");
            }
        }
    }

    #[test]
    fn a_failed_body_reads_as_the_io_error_kind_std_readers_expect() {
        let remote = || "example.com/1.2.3.4:80".to_string();
        let kind = |error: Error| io::Error::from(error).kind();
        let protocol = |source| Error::Protocol {
            remote: remote(),
            source,
        };
        let decode = |source| Error::Decode {
            remote: remote(),
            source,
        };
        let io_failure = |kind| Error::Io {
            remote: remote(),
            source: io::Error::from(kind),
        };
        // Cut short: as `read_exact` says it, and as HTTP/2 does.
        let cut = protocol(DecodeError::Truncated {
            stage: crate::h1::Stage::LengthBody,
        });
        assert_eq!(kind(cut), io::ErrorKind::UnexpectedEof);
        let gzip = tickless_codings::Coding::Gzip;
        let cut_coding = decode(tickless_codings::DecodeError::Truncated { coding: gzip });
        assert_eq!(kind(cut_coding), io::ErrorKind::UnexpectedEof);
        // Bytes that are not what they should be.
        assert_eq!(
            kind(protocol(DecodeError::InvalidChunkSize)),
            io::ErrorKind::InvalidData
        );
        let corrupt = decode(tickless_codings::DecodeError::Corrupt {
            coding: gzip,
            detail: "bad magic".into(),
        });
        assert_eq!(kind(corrupt), io::ErrorKind::InvalidData);
        // Over HTTP/2, the client's reset for frames that break it is such
        // bytes too; the server's reset, or a flood, is not.
        let http2 = |reason, initiator| Error::Http2 {
            remote: remote(),
            reason,
            initiator,
            connection: false,
            unprocessed: false,
        };
        let local = Http2Initiator::Local;
        assert_eq!(
            kind(http2(Http2Reason::PROTOCOL_ERROR, local)),
            io::ErrorKind::InvalidData
        );
        for breaks in [
            Http2Reason::FLOW_CONTROL_ERROR,
            Http2Reason::FRAME_SIZE_ERROR,
            Http2Reason::COMPRESSION_ERROR,
        ] {
            assert_eq!(
                kind(http2(breaks, local)),
                io::ErrorKind::InvalidData,
                "{breaks}"
            );
        }
        assert_eq!(
            Http2Reason::FRAME_SIZE_ERROR.name(),
            Some("FRAME_SIZE_ERROR")
        );
        assert_eq!(
            Http2Reason::COMPRESSION_ERROR.name(),
            Some("COMPRESSION_ERROR")
        );
        assert_eq!(
            kind(http2(Http2Reason::PROTOCOL_ERROR, Http2Initiator::Remote)),
            io::ErrorKind::Other
        );
        assert_eq!(
            kind(http2(Http2Reason::ENHANCE_YOUR_CALM, local)),
            io::ErrorKind::Other
        );
        // A retried request reads as its last attempt, as its timeout does.
        let retried = Error::Retried {
            attempts: vec![
                io_failure(io::ErrorKind::ConnectionReset),
                io_failure(io::ErrorKind::ConnectionRefused),
            ],
        };
        assert_eq!(kind(retried), io::ErrorKind::ConnectionRefused);
        let timed_out = Error::Retried {
            attempts: vec![
                io_failure(io::ErrorKind::ConnectionReset),
                Error::timeout_of(TimeoutKind::Read, remote(), Duration::from_secs(1)),
            ],
        };
        assert_eq!(kind(timed_out), io::ErrorKind::TimedOut);
        assert_eq!(
            kind(Error::Retried { attempts: vec![] }),
            io::ErrorKind::Other
        );
    }

    #[test]
    fn a_redirect_policys_error_is_in_the_source_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("the policy's own")]
        struct Own;
        let error = Error::Redirect {
            chain: vec![http::Uri::from_static("http://a/")],
            reason: RedirectError::Policy(Box::new(Own)),
        };
        let reason = error.source().expect("the reason is the source");
        assert!(
            reason.downcast_ref::<RedirectError>().is_some(),
            "{reason:?}"
        );
        let own = reason.source().expect("the policy's error is the reason's");
        assert!(own.downcast_ref::<Own>().is_some(), "{own:?}");
        assert_eq!(
            chain(&error),
            [
                "redirect stopped after http://a/",
                "the redirect policy refused",
                "the policy's own"
            ]
        );
    }

    /// The message of `error` and of each of its causes, in order.
    fn chain(error: &(dyn StdError + 'static)) -> Vec<String> {
        let mut levels = vec![error.to_string()];
        let mut cause = error.source();
        while let Some(next) = cause {
            levels.push(next.to_string());
            cause = next.source();
        }
        levels
    }

    /// Asserts that no message of `error`'s chain says one of the causes
    /// after it (what a chain walker would then print twice), and returns
    /// the chain. (An earlier attempt of a retried request, which its
    /// message names, may read as its last, the source, does: the tests
    /// give them remotes of their own.)
    fn told_once(error: &(dyn StdError + 'static)) -> Vec<String> {
        let levels = chain(error);
        for (n, level) in levels.iter().enumerate() {
            for cause in &levels[n + 1..] {
                assert!(
                    !level.contains(cause.as_str()),
                    "{level:?} repeats its cause {cause:?}: {levels:?}"
                );
            }
        }
        levels
    }

    #[test]
    fn every_message_says_its_own_level_and_leaves_its_cause_to_the_source() {
        let remote = || "example.com/1.2.3.4:443".to_string();
        let proxy = |source| Error::Proxy {
            proxy: "http://127.0.0.1:3128".into(),
            target: "example.com:443".into(),
            source,
            unprocessed: true,
        };
        let refused = || io::Error::from(io::ErrorKind::ConnectionRefused);
        let refused_text = refused().to_string();
        let timeout = Timeout {
            remote: remote(),
            duration: Duration::from_millis(20),
        };
        let cases: Vec<(Error, Vec<String>)> = vec![
            (
                proxy(ProxyError::Connect(refused())),
                vec![
                    "proxy http://127.0.0.1:3128 failed the request to example.com:443".into(),
                    "the connection to the proxy failed".into(),
                    refused_text.clone(),
                ],
            ),
            (
                proxy(ProxyError::ConnectTimeout(timeout.clone())),
                vec![
                    "proxy http://127.0.0.1:3128 failed the request to example.com:443".into(),
                    "the connection to the proxy took longer than 20 ms".into(),
                ],
            ),
            (
                Error::Decode {
                    remote: remote(),
                    source: tickless_codings::DecodeError::Corrupt {
                        coding: tickless_codings::Coding::Gzip,
                        detail: "bad magic".into(),
                    },
                },
                vec![
                    "response body from example.com/1.2.3.4:443 does not decode".into(),
                    "invalid gzip data: bad magic".into(),
                ],
            ),
            (
                Error::Protocol {
                    remote: remote(),
                    source: DecodeError::InvalidChunkSize,
                },
                vec![
                    "protocol error from example.com/1.2.3.4:443".into(),
                    "invalid chunk size line".into(),
                ],
            ),
            (
                Error::ReadTimeout(timeout.clone()),
                vec!["Read timeout to example.com/1.2.3.4:443 after 20 ms".into()],
            ),
            (
                Error::Redirect {
                    chain: vec![
                        http::Uri::from_static("http://a/"),
                        http::Uri::from_static("http://a/"),
                    ],
                    reason: RedirectError::Loop,
                },
                vec![
                    "redirect stopped after http://a/ -> http://a/".into(),
                    "a redirect loop".into(),
                ],
            ),
            (
                Error::Connect {
                    remote: remote(),
                    source: refused(),
                },
                vec![
                    "connect to example.com/1.2.3.4:443 failed".into(),
                    refused_text.clone(),
                ],
            ),
            (
                Error::Retried {
                    attempts: vec![
                        Error::Connect {
                            remote: remote(),
                            source: refused(),
                        },
                        Error::ReadTimeout(timeout.clone()),
                    ],
                },
                vec![
                    format!(
                        "2 attempts failed (earlier: 1) connect to example.com/1.2.3.4:443 \
                         failed: {refused_text})"
                    ),
                    "Read timeout to example.com/1.2.3.4:443 after 20 ms".into(),
                ],
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(told_once(&error), expected, "{error:?}");
            // Wrapped in an `io::Error` (a body read), the chain is the same.
            assert_eq!(told_once(&io::Error::from(error)), expected);
        }
        let invalid = Error::from(InvalidRequest::Header {
            name: "X Bad".into(),
            source: http::header::HeaderName::from_bytes(b"X Bad")
                .unwrap_err()
                .into(),
        });
        assert_eq!(
            told_once(&invalid),
            [r#"invalid header "X Bad""#, "invalid HTTP header name"]
        );
    }

    #[test]
    #[cfg(feature = "rustls")]
    fn a_tls_failure_says_why_once() {
        let error = Error::tls(
            "example.com/1.2.3.4:443".into(),
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName),
        );
        let rustls_text =
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName)
                .to_string();
        assert_eq!(
            told_once(&error)[..2],
            [
                "TLS handshake with example.com/1.2.3.4:443 failed: certificate name mismatch"
                    .to_string(),
                rustls_text
            ]
        );
    }

    #[test]
    fn a_retried_requests_source_is_its_last_attempt() {
        let attempt = |kind: io::ErrorKind| Error::Io {
            remote: format!("example.com/1.2.3.{}:80", kind as u8),
            source: kind.into(),
        };
        let retried = Error::Retried {
            attempts: vec![
                attempt(io::ErrorKind::ConnectionReset),
                attempt(io::ErrorKind::ConnectionAborted),
                attempt(io::ErrorKind::ConnectionRefused),
            ],
        };
        let last_remote = format!(
            "example.com/1.2.3.{}:80",
            io::ErrorKind::ConnectionRefused as u8
        );
        let last = retried.source().expect("the last attempt is the source");
        let last = last.downcast_ref::<Error>().expect("a tickless error");
        assert!(
            matches!(last, Error::Io { source, .. } if source.kind() == io::ErrorKind::ConnectionRefused),
            "{last:?}"
        );
        // Its message names the earlier ones, not the last (the source).
        let levels = told_once(&retried);
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused).to_string();
        assert!(
            levels[0].starts_with("3 attempts failed (earlier: 1) "),
            "{levels:?}"
        );
        assert!(!levels[0].contains(&refused), "{levels:?}");
        assert_eq!(
            levels[1..],
            [format!("I/O error with {last_remote}"), refused]
        );
        // One attempt, or none: nothing earlier to name.
        let once = Error::Retried {
            attempts: vec![attempt(io::ErrorKind::ConnectionReset)],
        };
        assert_eq!(once.to_string(), "1 attempt failed");
        assert!(once.source().is_some());
        let none = Error::Retried { attempts: vec![] };
        assert_eq!(none.to_string(), "0 attempts failed");
        assert!(none.source().is_none());
    }

    #[test]
    fn a_proxys_handshake_timeout_is_not_called_tls() {
        let timeout = || Timeout {
            remote: "127.0.0.1/127.0.0.1:3128".into(),
            duration: Duration::from_millis(20),
        };
        let proxy = Error::Proxy {
            proxy: "http://127.0.0.1:3128".into(),
            target: "example.com:80".into(),
            source: ProxyError::HandshakeTimeout(timeout()),
            unprocessed: true,
        };
        let kind = proxy.timeout_kind().expect("a timeout");
        assert_eq!(kind, TimeoutKind::Handshake);
        assert_eq!(kind.to_string(), "Handshake timeout");
        assert!(!proxy.to_string().contains("TLS"), "{proxy}");
        // TLS's own still says it is TLS's.
        assert_eq!(
            Error::HandshakeTimeout(timeout()).to_string(),
            "TLS handshake timeout to 127.0.0.1/127.0.0.1:3128 after 20 ms"
        );
    }

    #[test]
    fn every_timeout_agrees_in_all_three_methods() {
        let timeout = || Timeout {
            remote: "example.com/1.2.3.4:443".into(),
            duration: Duration::from_millis(20),
        };
        let proxy = |source| Error::Proxy {
            proxy: "http://127.0.0.1:3128".into(),
            target: "example.com:443".into(),
            source,
            unprocessed: true,
        };
        let kinds = [
            TimeoutKind::Request,
            TimeoutKind::Read,
            TimeoutKind::Write,
            TimeoutKind::Connect,
            TimeoutKind::Handshake,
        ];
        let mut timeouts: Vec<(Error, TimeoutKind)> = kinds
            .iter()
            .map(|&kind| {
                (
                    Error::timeout_of(kind, timeout().remote, timeout().duration),
                    kind,
                )
            })
            .collect();
        timeouts.push((
            proxy(ProxyError::ConnectTimeout(timeout())),
            TimeoutKind::Connect,
        ));
        timeouts.push((
            proxy(ProxyError::HandshakeTimeout(timeout())),
            TimeoutKind::Handshake,
        ));
        for (error, kind) in timeouts {
            assert!(error.is_timeout(), "{error:?}");
            assert_eq!(error.timeout_kind(), Some(kind), "{error:?}");
            assert_eq!(error.timeout(), Some(&timeout()), "{error:?}");
            let io = io::Error::from(error);
            assert_eq!(io.kind(), io::ErrorKind::TimedOut);
            assert_eq!(timeout_kind(&io), Some(kind));
        }
        // A retried request is a timeout if its last attempt is one.
        let io_failure = || Error::Io {
            remote: timeout().remote,
            source: io::ErrorKind::ConnectionReset.into(),
        };
        let read = || Error::ReadTimeout(timeout());
        let last_timed_out = Error::Retried {
            attempts: vec![io_failure(), read()],
        };
        assert!(last_timed_out.is_timeout());
        assert_eq!(last_timed_out.timeout_kind(), Some(TimeoutKind::Read));
        assert_eq!(last_timed_out.timeout(), Some(&timeout()));
        let first_timed_out = Error::Retried {
            attempts: vec![read(), io_failure()],
        };
        assert!(!first_timed_out.is_timeout());
        assert_eq!(first_timed_out.timeout_kind(), None);
        assert_eq!(first_timed_out.timeout(), None);
        let proxy_failure = proxy(ProxyError::Io(io::ErrorKind::UnexpectedEof.into()));
        assert!(!proxy_failure.is_timeout());
        assert_eq!(proxy_failure.timeout_kind(), None);
    }

    #[test]
    fn unprocessed_says_so_and_holds_for_a_retried_request_only_if_for_every_attempt() {
        let refused = |unprocessed| Error::Http2 {
            remote: "example.com/1.2.3.4:443".into(),
            reason: Http2Reason::REFUSED_STREAM,
            initiator: Http2Initiator::Remote,
            connection: false,
            unprocessed,
        };
        assert!(refused(true).is_unprocessed());
        assert_eq!(
            refused(true).to_string(),
            "HTTP/2 error from example.com/1.2.3.4:443: stream reset by the server with \
             REFUSED_STREAM (not processed by the server: safe to send again)"
        );
        assert!(!refused(false).is_unprocessed());
        assert!(!refused(false).to_string().contains("processed"));
        let both = Error::Retried {
            attempts: vec![refused(true), refused(true)],
        };
        assert!(both.is_unprocessed());
        // A later hop's error, made to say nothing of the request.
        assert!(!both.with_unprocessed(false).is_unprocessed());
        let one = Error::Retried {
            attempts: vec![refused(false), refused(true)],
        };
        assert!(!one.is_unprocessed());
        assert!(!Error::Cancelled.with_unprocessed(true).is_unprocessed());
        // A proxy's failure before its tunnel: the origin had nothing of
        // the request, as a refused stream; after a redirect, it says
        // nothing of it either.
        let proxy = Error::Proxy {
            proxy: "http://127.0.0.1:3128".into(),
            target: "example.com:443".into(),
            source: ProxyError::Io(io::ErrorKind::UnexpectedEof.into()),
            unprocessed: true,
        };
        assert!(proxy.is_unprocessed());
        assert!(!proxy.with_unprocessed(false).is_unprocessed());
    }

    /// A server that gave an HTTP/2-only client no `h2` says how, is its
    /// own cause, is no TLS failure, and is unprocessed until a redirect
    /// or an attempt before it says otherwise; read as I/O, `Unsupported`.
    #[test]
    fn a_server_without_h2_says_how_and_that_nothing_was_sent() {
        let without_h2 = |handshake_refused| Error::Http2NotNegotiated {
            remote: "example.com/1.2.3.4:443".into(),
            handshake_refused,
            unprocessed: true,
        };
        assert_eq!(
            without_h2(true).to_string(),
            "example.com/1.2.3.4:443 did not negotiate h2 (the client is HTTP/2 only): \
             it refused the TLS handshake with no_application_protocol"
        );
        assert_eq!(
            without_h2(false).to_string(),
            "example.com/1.2.3.4:443 did not negotiate h2 (the client is HTTP/2 only): \
             it negotiated no protocol"
        );
        let error = without_h2(true);
        assert!(error.source().is_none());
        assert!(error.tls_failure().is_none());
        assert!(!error.is_timeout());
        assert!(error.is_unprocessed());
        assert!(!without_h2(false).with_unprocessed(false).is_unprocessed());
        let retried = Error::Retried {
            attempts: vec![without_h2(false), without_h2(true)],
        };
        assert!(retried.is_unprocessed());
        assert_eq!(
            io::Error::from(without_h2(false)).kind(),
            io::ErrorKind::Unsupported
        );
    }

    #[test]
    #[cfg(feature = "rustls")]
    fn tls_failures_say_why() {
        use rustls::CertificateError;
        let error = Error::tls(
            "example.com/1.2.3.4:443".into(),
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
        );
        assert_eq!(error.tls_failure(), Some(TlsFailureKind::NameMismatch));
        assert_eq!(
            error.to_string(),
            "TLS handshake with example.com/1.2.3.4:443 failed: certificate name mismatch"
        );
        let source = error.source().expect("the rustls error is the source");
        assert!(
            source.downcast_ref::<rustls::Error>().is_some(),
            "{source:?}"
        );
        // A request whose last attempt met the certificate, after one that
        // could be retried (a reset), failed for the certificate.
        let reset = || Error::Io {
            remote: "example.com/1.2.3.4:443".into(),
            source: io::ErrorKind::ConnectionReset.into(),
        };
        let retried = Error::Retried {
            attempts: vec![reset(), error],
        };
        assert_eq!(retried.tls_failure(), Some(TlsFailureKind::NameMismatch));
        let tls_then_reset = Error::Retried {
            attempts: vec![
                Error::tls(String::new(), rustls::Error::DecryptError),
                reset(),
            ],
        };
        assert_eq!(tls_then_reset.tls_failure(), None);
        let kind = |e: rustls::Error| TlsFailureKind::of(&e);
        assert_eq!(
            kind(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer
            )),
            TlsFailureKind::UnknownIssuer
        );
        assert_eq!(
            kind(rustls::Error::InvalidCertificate(CertificateError::Expired)),
            TlsFailureKind::Expired
        );
        assert_eq!(kind(rustls::Error::DecryptError), TlsFailureKind::Protocol);
        assert_eq!(
            kind(rustls::Error::General("x".into())),
            TlsFailureKind::Other
        );
        // webpki's own errors, as rustls passes them on: a CA certificate
        // as the server's is named; any other is still `Other`.
        let webpki_error = |e: webpki::Error| {
            rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                std::sync::Arc::new(e),
            )))
        };
        assert_eq!(
            kind(webpki_error(webpki::Error::CaUsedAsEndEntity)),
            TlsFailureKind::CaCertificate
        );
        assert_eq!(
            kind(webpki_error(webpki::Error::EndEntityUsedAsCa)),
            TlsFailureKind::Other
        );
    }

    /// The copy of an opening's failure, for the requests that waited for
    /// it: same variant and fields, an `io::Error` of the OS by its code, any
    /// other by its kind and message; none of an error no opening fails with.
    #[test]
    fn an_openings_failure_is_copied_with_its_variant_fields_and_io_errors() {
        let remote = || "example.com/1.2.3.4:443".to_string();
        let shown = |error: &Error| WithCauses(error).to_string();
        let refused = Error::Connect {
            remote: remote(),
            source: io::Error::from_raw_os_error(111),
        };
        let copy = refused.copy_of_opening_failure().unwrap();
        assert!(
            matches!(&copy, Error::Connect { source, .. } if source.raw_os_error() == Some(111)),
            "{copy:?}"
        );
        assert_eq!(shown(&copy), shown(&refused));
        // A TLS handshake the server closed: no OS error, its kind and
        // message made again.
        let closed = Error::Connect {
            remote: remote(),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection during the TLS handshake",
            ),
        };
        let copy = closed.copy_of_opening_failure().unwrap();
        assert!(
            matches!(&copy, Error::Connect { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof),
            "{copy:?}"
        );
        assert_eq!(shown(&copy), shown(&closed));
        // A server that did not negotiate h2 for an HTTP/2-only client.
        for handshake_refused in [false, true] {
            let without_h2 = Error::Http2NotNegotiated {
                remote: remote(),
                handshake_refused,
                unprocessed: true,
            };
            let copy = without_h2.copy_of_opening_failure().unwrap();
            assert!(
                matches!(
                    &copy,
                    Error::Http2NotNegotiated { remote: r, handshake_refused: refused, unprocessed: true }
                        if *r == remote() && *refused == handshake_refused
                ),
                "{copy:?}"
            );
            assert_eq!(shown(&copy), shown(&without_h2));
        }
        // No opening fails with an I/O error of the exchange.
        let io_failure = Error::Io {
            remote: remote(),
            source: io::ErrorKind::ConnectionReset.into(),
        };
        assert!(io_failure.copy_of_opening_failure().is_none());
        let timeout =
            Error::timeout_of(TimeoutKind::Handshake, remote(), Duration::from_millis(300));
        let copy = timeout.copy_of_opening_failure().unwrap();
        assert!(matches!(&copy, Error::HandshakeTimeout(t) if Some(t) == timeout.timeout()));
        #[cfg(feature = "rustls")]
        {
            let tls = Error::tls(remote(), rustls::Error::DecryptError);
            let copy = tls.copy_of_opening_failure().unwrap();
            assert_eq!(copy.tls_failure(), Some(TlsFailureKind::Protocol));
            assert_eq!(shown(&copy), shown(&tls));
        }
        let proxy = Error::Proxy {
            proxy: "http://127.0.0.1:3128".into(),
            target: "example.com:443".into(),
            source: ProxyError::ConnectRefused {
                target: "example.com:443".into(),
                status: http::StatusCode::FORBIDDEN,
                reason: "Forbidden".into(),
            },
            unprocessed: true,
        };
        let copy = proxy.copy_of_opening_failure().unwrap();
        assert!(copy.is_unprocessed());
        assert!(matches!(
            &copy,
            Error::Proxy {
                source: ProxyError::ConnectRefused { .. },
                ..
            }
        ));
        assert_eq!(shown(&copy), shown(&proxy));
        assert!(Error::Cancelled.copy_of_opening_failure().is_none());
    }
}
