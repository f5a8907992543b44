//! `tracing` integration (cargo feature `tracing`, on by default): a span
//! per request, and the request's events at `debug` — resolution, connect
//! attempts, TLS, the protocol and the HTTP/2 stream, pool reuse and
//! offer-back, interim (1xx) heads, redirects, retries, hedges, the
//! response given to the caller, the end —
//! as the [`Traced`] listener that the policy layer puts in front of the
//! caller's, only when a subscriber wants the span. With no
//! subscriber, or one that does not want `debug` from this crate, the cost
//! is the span's interest check: nothing is allocated, nothing wrapped.
//! Body bytes are never logged, nor is a query (which may hold secrets):
//! not the span's URI's, a redirect's target's or a retried status's URL's.
//!
//! Each of these events names the attempt (the exchange) it is about, as
//! `attempt_id` — [`RequestInfo::attempt_id`], one per redirect hop, retry,
//! hedged copy, repeat after a `417` — so that the interleaved events of a
//! hedged request's copies, or a retry's and the attempt it follows, can
//! be told apart in one span: a redirect's and a retry's is the attempt
//! they follow (that answered the redirect, that failed), a hedge's the
//! copy sent, which the copy's own events and, if it answers,
//! [`Response::attempt_id`](crate::Response::attempt_id) carry too. (Not
//! `attempt`: a retry's event has that field already, the number of the
//! attempt to come.)
//!
//! The timeouts that fire are events of their own (in `exchange`), with
//! their kind, where they ran (the wheel or a loop) and how late, and the
//! `attempt_id` of the exchange they fail, as the span's events name it.

use crate::error::{retried_text, Error, WithCauses};
use crate::events::{ConnectionInfo, EventListener, RequestInfo, ResponseHead};
use std::net::SocketAddr;
use std::time::Duration;
use tracing::{debug, Span};

/// The span of one request: its method and its URI without userinfo and
/// without the query (which may hold secrets); `status` is recorded when
/// the response's head is given to the caller (by [`response_given`]).
pub(crate) fn request_span(method: &http::Method, uri: &http::Uri) -> Span {
    // The fields are only formatted if a subscriber wants the span: with
    // none, this allocates nothing.
    tracing::debug_span!(
        "request",
        method = %method,
        uri = %SpanUri(uri),
        status = tracing::field::Empty,
    )
}

/// The head of attempt `attempt_id`, with `status`, is given to the caller
/// as the response: `status` recorded in the request's `span`, and an
/// event in it that shows it (the loop may have told the response's other
/// events, its completion too, before the caller took the head).
pub(crate) fn response_given(span: &Span, status: http::StatusCode, attempt_id: u64) {
    span.record("status", status.as_u16());
    debug!(parent: span, status = status.as_u16(), attempt_id, "response given");
}

/// A request span's URI: scheme, host, port and path.
struct SpanUri<'a>(&'a http::Uri);

impl std::fmt::Display for SpanUri<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uri = self.0;
        let scheme = uri.scheme_str().unwrap_or("http");
        let host = uri.host().unwrap_or("");
        write!(f, "{scheme}://{host}")?;
        if let Some(port) = uri.port_u16() {
            write!(f, ":{port}")?;
        }
        f.write_str(uri.path())
    }
}

/// An error as the log shows it: with each of its causes, as `anyhow`'s
/// `{:#}` shows it (a message says its own level only, see
/// [`Error`]), and the URL of a status — the reason of a retry, an attempt
/// of a retried request — as a [`SpanUri`]: its query may hold secrets
/// there too.
struct LoggedError<'a>(&'a Error);

impl std::fmt::Display for LoggedError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        logged_level(self.0, f)?;
        let mut cause = std::error::Error::source(self.0);
        while let Some(error) = cause {
            f.write_str(": ")?;
            match error.downcast_ref::<Error>() {
                Some(error) => logged_level(error, f)?,
                None => write!(f, "{error}")?,
            }
            cause = error.source();
        }
        Ok(())
    }
}

/// One level of a [`LoggedError`]: the error's own message, a status's URL
/// and a retried request's earlier attempts as the log shows them.
fn logged_level(error: &Error, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match error {
        Error::Status { status, url } => write!(f, "{} answered {status}", SpanUri(url)),
        Error::Retried { attempts } => f.write_str(&retried_text(attempts, |attempt| {
            LoggedError(attempt).to_string()
        })),
        error => std::fmt::Display::fmt(error, f),
    }
}

/// A listener that turns a request's events into `tracing` events inside
/// its span.
pub(crate) struct Traced {
    pub(crate) span: Span,
}

impl EventListener for Traced {
    fn on_resolved(&self, request: &RequestInfo, host: &str, addrs: &[SocketAddr]) {
        debug!(parent: &self.span, host, ?addrs, attempt_id = request.attempt_id(), "resolved");
    }
    fn on_connect_attempt(&self, request: &RequestInfo, remote: SocketAddr) {
        debug!(parent: &self.span, %remote, attempt_id = request.attempt_id(), "connect attempt");
    }
    fn on_connect_success(&self, request: &RequestInfo, connection: &ConnectionInfo) {
        debug!(parent: &self.span, connection = connection.id, event_loop = connection.loop_index, remote = %connection.remote, attempt_id = request.attempt_id(), "connected");
    }
    fn on_connect_failure(
        &self,
        request: &RequestInfo,
        remote: SocketAddr,
        error: &std::io::Error,
    ) {
        debug!(parent: &self.span, %remote, error = %WithCauses(error), attempt_id = request.attempt_id(), "connect failed");
    }
    fn on_tls_handshake_success(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        alpn_protocol: Option<&[u8]>,
    ) {
        let alpn = alpn_protocol.map(String::from_utf8_lossy);
        debug!(parent: &self.span, connection = connection.id, alpn = ?alpn, attempt_id = request.attempt_id(), "TLS handshake done");
    }
    fn on_tls_handshake_failure(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        error: &Error,
    ) {
        debug!(parent: &self.span, connection = connection.id, error = %LoggedError(error), attempt_id = request.attempt_id(), "TLS handshake failed");
    }
    fn on_connection_pooled(&self, request: &RequestInfo, connection: &ConnectionInfo) {
        debug!(parent: &self.span, connection = connection.id, event_loop = connection.loop_index, attempt_id = request.attempt_id(), "pooled connection reused");
    }
    fn on_connection_offered(&self, request: &RequestInfo, connection: &ConnectionInfo) {
        debug!(parent: &self.span, connection = connection.id, attempt_id = request.attempt_id(), "connection back to the pool");
    }
    fn on_protocol_negotiated(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        version: http::Version,
    ) {
        debug!(parent: &self.span, connection = connection.id, ?version, attempt_id = request.attempt_id(), "protocol");
    }
    fn on_stream_opened(&self, request: &RequestInfo, connection: &ConnectionInfo, stream_id: u32) {
        debug!(parent: &self.span, connection = connection.id, stream_id, attempt_id = request.attempt_id(), "HTTP/2 stream opened");
    }
    fn on_request_sent(&self, request: &RequestInfo, connection: &ConnectionInfo) {
        debug!(parent: &self.span, connection = connection.id, attempt_id = request.attempt_id(), "request sent");
    }
    fn on_interim_head(&self, request: &RequestInfo, head: &ResponseHead<'_>) {
        // Not the span's `status`: the final head's is yet to come.
        debug!(parent: &self.span, status = head.status().as_u16(), attempt_id = request.attempt_id(), "interim head");
    }
    fn on_status(&self, request: &RequestInfo, status: http::StatusCode) {
        // Not the span's `status` either: every attempt's head is told
        // here, a hedged copy's that lost too, maybe after the winner's;
        // the chain records the head it gives to the caller.
        debug!(parent: &self.span, status = status.as_u16(), attempt_id = request.attempt_id(), "head");
    }
    fn on_completed(&self, request: &RequestInfo, status: http::StatusCode) {
        debug!(parent: &self.span, status = status.as_u16(), attempt_id = request.attempt_id(), "completed");
    }
    fn on_failed(&self, request: &RequestInfo, error: &Error) {
        debug!(parent: &self.span, error = %LoggedError(error), timeout = error.is_timeout(), attempt_id = request.attempt_id(), "failed");
    }
    fn on_redirect(
        &self,
        request: &RequestInfo,
        status: http::StatusCode,
        from: &http::Uri,
        to: &http::Uri,
    ) {
        debug!(parent: &self.span, status = status.as_u16(), from = %from.path(), to = %SpanUri(to), attempt_id = request.attempt_id(), "redirect followed");
    }
    fn on_retry(&self, request: &RequestInfo, attempt: u32, delay: Duration, reason: &Error) {
        debug!(parent: &self.span, attempt, ?delay, reason = %LoggedError(reason), attempt_id = request.attempt_id(), "retry");
    }
    fn on_hedge(&self, request: &RequestInfo, copy: u32) {
        debug!(parent: &self.span, copy, attempt_id = request.attempt_id(), "hedged copy sent");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_error_tells_its_causes_once_and_no_query() {
        let busy = || Error::Status {
            status: http::StatusCode::SERVICE_UNAVAILABLE,
            url: http::Uri::from_static("http://a/busy?sig=secret"),
        };
        let reset = Error::Io {
            remote: "a/1.2.3.4:80".into(),
            source: std::io::ErrorKind::ConnectionReset.into(),
        };
        let reset_text = std::io::Error::from(std::io::ErrorKind::ConnectionReset).to_string();
        // A status retried, then a failure: the request's failure names
        // the status's URL without its query, as the retry's reason does.
        let retried = Error::Retried {
            attempts: vec![busy(), reset],
        };
        assert_eq!(
            LoggedError(&retried).to_string(),
            format!(
                "2 attempts failed (earlier: 1) http://a/busy answered 503 Service Unavailable): \
                 I/O error with a/1.2.3.4:80: {reset_text}"
            )
        );
        let last_a_status = Error::Retried {
            attempts: vec![busy(), busy()],
        };
        let text = LoggedError(&last_a_status).to_string();
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(text.matches("http://a/busy answered").count(), 2, "{text}");
    }
}
