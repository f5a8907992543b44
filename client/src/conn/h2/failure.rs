//! The client's errors for what ends a stream or a request on an HTTP/2
//! connection: an `h2` error ([`error_of`]), the connection's end after a
//! `GOAWAY` ([`goaway_failure`]) or with no code ([`closed_failure`]), a
//! TLS handshake the server refused or a server that does not speak
//! HTTP/2 ([`refusal`]). A request no server processed is marked so by
//! its exchange (`Exchange::unprocessed`).

use crate::error::{Error, Http2Initiator, Http2Reason};
use crate::exchange::Exchange;
use crate::net::{IoReadiness, NotHttp2};
use std::io;

/// The error of a stream that the connection's end took with it after the
/// server's `GOAWAY` with `reason`.
pub(super) fn goaway_failure(exchange: &Exchange, reason: Http2Reason) -> Error {
    Error::Http2 {
        remote: exchange.remote_name(),
        reason,
        initiator: Http2Initiator::Remote,
        connection: true,
        unprocessed: false,
    }
}

/// The error of a request on a connection whose server refused the TLS
/// handshake once the client had finished its side (a TLS 1.3 server
/// refusing the client's certificate: see
/// [`IoReadiness::handshake_failure`]), or does not speak the HTTP/2 the
/// client spoke to it without asking ([`IoReadiness::not_http2`]),
/// however `h2` told the failure (a broken pipe, a frame too large): the
/// same on any connection to that server, so never a reason to send the
/// request elsewhere.
pub(super) fn refusal(io_ready: &IoReadiness, exchange: &Exchange) -> Option<Error> {
    if let Some(refused) = handshake_refusal(io_ready, exchange) {
        return Some(refused);
    }
    let answer = match io_ready.not_http2()? {
        NotHttp2::Answered(line) => Some(line.clone()),
        NotHttp2::Closed => None,
    };
    Some(Error::NotHttp2 {
        remote: exchange.remote_name(),
        answer,
    })
}

/// The TLS handshake's refusal, if the server refused it (see [`refusal`]).
#[cfg(feature = "rustls")]
fn handshake_refusal(io_ready: &IoReadiness, exchange: &Exchange) -> Option<Error> {
    let tls = io_ready.handshake_failure()?;
    Some(Error::tls(exchange.remote_name(), tls.clone()))
}

/// Without TLS, no handshake to refuse.
#[cfg(not(feature = "rustls"))]
fn handshake_refusal(_: &IoReadiness, _: &Exchange) -> Option<Error> {
    None
}

/// The error of a stream, or of a request gone elsewhere once already,
/// when the server closed the connection with no code.
pub(super) fn closed_failure(exchange: &Exchange) -> Error {
    Error::Io {
        remote: exchange.remote_name(),
        source: io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the HTTP/2 connection",
        ),
    }
}

/// The client's error for the `h2` error that ended `exchange`'s stream,
/// as [`error_of`] makes it — but for an I/O error after the server
/// closed the connection ([`IoReadiness::closed_by_server`]): that is
/// `h2`'s word for the close ("stream closed because of a broken pipe",
/// kind `BrokenPipe`), told as the close it is, [`closed_failure`]. So a
/// body the close cuts short fails with `UnexpectedEof`, as one cut short
/// over HTTP/1.1 does, and a downloader that resumes on that kind knows
/// it; a broken pipe would blame a write nobody made.
pub(super) fn stream_error(exchange: &Exchange, error: h2::Error, io_ready: &IoReadiness) -> Error {
    if error.is_io() && io_ready.closed_by_server() {
        return closed_failure(exchange);
    }
    error_of(exchange, error)
}

/// The client's error for an `h2` error on `exchange`'s stream.
pub(super) fn error_of(exchange: &Exchange, error: h2::Error) -> Error {
    let remote = exchange.remote_name();
    if let Some(reason) = error.reason() {
        return Error::Http2 {
            remote,
            reason: Http2Reason(reason.into()),
            initiator: if error.is_remote() {
                Http2Initiator::Remote
            } else {
                Http2Initiator::Local
            },
            connection: error.is_go_away(),
            unprocessed: false,
        };
    }
    let source = if error.is_io() {
        error
            .into_io()
            .unwrap_or_else(|| io::Error::other("HTTP/2 I/O error"))
    } else {
        io::Error::other(error.to_string())
    };
    Error::Io { remote, source }
}
