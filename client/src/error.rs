//! [`Error`]: every way an exchange can fail, each kind its own variant.
//!
//! A timeout keeps its kind, the duration it exceeded and the remote address
//! through every layer: [`Error::is_timeout`] and [`timeout_kind`] answer for
//! a tickless error wrapped in an `io::Error` or a boxed error chain too.

use crate::h1::DecodeError;
use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::Duration;

/// Which deadline was exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutKind {
    /// The whole exchange took longer than the request timeout.
    Request,
    /// The server was silent for longer than the read timeout.
    Read,
    /// A connection could not be established within the connect timeout.
    Connect,
}

impl fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutKind::Request => "Request timeout",
            TimeoutKind::Read => "Read timeout",
            TimeoutKind::Connect => "Connect timeout",
        })
    }
}

/// A deadline that passed: which one, to where, and after how long.
///
/// Displays like `Request timeout to localhost/127.0.0.1:8080 after 20 ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    /// Which deadline.
    pub kind: TimeoutKind,
    /// The remote, as `host/ip:port` once resolved, `host:port` before.
    pub remote: String,
    /// The configured duration that was exceeded.
    pub duration: Duration,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} to {} after {} ms",
            self.kind,
            self.remote,
            self.duration.as_millis()
        )
    }
}

/// Why a request was refused before anything was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRequest {
    /// The URI has no scheme, or one other than http and https.
    #[error("unsupported or missing URI scheme in {0:?} (expected http or https)")]
    Scheme(String),
    /// The URI has no host.
    #[error("URI {0:?} has no host")]
    Host(String),
    /// The URI could not be parsed.
    #[error("invalid URI: {0}")]
    Uri(String),
    /// A header name or value is not valid HTTP.
    #[error("invalid header: {0}")]
    Header(String),
    /// The request could not be encoded (conflicting framing headers, …).
    #[error("cannot encode the request: {0}")]
    Encode(String),
    /// https was asked for and TLS is not available in this build.
    #[error("https is not supported by this client yet")]
    TlsUnsupported,
}

/// The error of a failed exchange.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request deadline passed.
    #[error("{0}")]
    RequestTimeout(Timeout),
    /// The server was silent for longer than the read timeout.
    #[error("{0}")]
    ReadTimeout(Timeout),
    /// No connection could be established within the connect timeout.
    #[error("{0}")]
    ConnectTimeout(Timeout),
    /// Every address of the host refused or failed the connection.
    #[error("connect to {remote} failed: {source}")]
    Connect {
        /// The remote tried last.
        remote: String,
        /// What the last attempt failed with.
        source: io::Error,
    },
    /// The host name could not be resolved.
    #[error("could not resolve {host}: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// Why.
        source: io::Error,
    },
    /// The server sent something that is not valid HTTP/1.1.
    #[error("protocol error from {remote}: {source}")]
    Protocol {
        /// The server.
        remote: String,
        /// What was wrong.
        source: DecodeError,
    },
    /// The response body is larger than the configured limit.
    #[error("response body from {remote} exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The server.
        remote: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The caller cancelled the exchange (or dropped its future).
    #[error("request cancelled")]
    Cancelled,
    /// The client was closed before the exchange ended.
    #[error("the client is closed")]
    ClientClosed,
    /// The connection failed while the exchange was using it.
    #[error("I/O error with {remote}: {source}")]
    Io {
        /// The server.
        remote: String,
        /// The OS error.
        source: io::Error,
    },
    /// The request was refused before anything was sent.
    #[error(transparent)]
    InvalidRequest(#[from] InvalidRequest),
}

impl Error {
    /// Whether a deadline passed (request, read or connect).
    pub fn is_timeout(&self) -> bool {
        self.timeout().is_some()
    }

    /// The timeout, if this is one.
    pub fn timeout(&self) -> Option<&Timeout> {
        match self {
            Error::RequestTimeout(t) | Error::ReadTimeout(t) | Error::ConnectTimeout(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn timeout_of(kind: TimeoutKind, remote: String, duration: Duration) -> Error {
        let timeout = Timeout {
            kind,
            remote,
            duration,
        };
        match kind {
            TimeoutKind::Request => Error::RequestTimeout(timeout),
            TimeoutKind::Read => Error::ReadTimeout(timeout),
            TimeoutKind::Connect => Error::ConnectTimeout(timeout),
        }
    }
}

/// The timeout kind of `error` or of anything in its source chain, so it
/// survives wrapping (`io::Error`, `Box<dyn Error>`, an application's own
/// error type with a `source`).
pub fn timeout_kind(error: &(dyn StdError + 'static)) -> Option<TimeoutKind> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(ours) = error.downcast_ref::<Error>() {
            if let Some(t) = ours.timeout() {
                return Some(t.kind);
            }
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
    /// [`timeout_kind`] still finds its kind.
    fn from(error: Error) -> io::Error {
        let kind = match &error {
            e if e.is_timeout() => io::ErrorKind::TimedOut,
            Error::Connect { source, .. } | Error::Io { source, .. } => source.kind(),
            Error::Cancelled => io::ErrorKind::Interrupted,
            Error::InvalidRequest(_) => io::ErrorKind::InvalidInput,
            Error::Protocol { .. } => io::ErrorKind::InvalidData,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, error)
    }
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
}
