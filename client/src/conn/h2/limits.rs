//! A response's bytes against the client's bounds, as HTTP/1.1's decoder
//! counts them: its body's ([`BodyCount`]), its interim heads'
//! ([`InterimCount`]), and the fields of each head and of its trailers
//! ([`FieldCount`]).

use crate::error::Error;
use crate::exchange::Exchange;
use crate::h1::DecodeError;

/// A response body's bytes against the client's limit
/// ([`max_body_bytes`](crate::ClientBuilder::max_body_bytes)), as HTTP/1.1's
/// decoder counts them: the declared `content-length`, and what comes.
pub(super) struct BodyCount {
    pub(super) limit: Option<u64>,
    pub(super) received: u64,
}

impl BodyCount {
    /// Whether `n` more bytes (or a body declared `declared` long) stay
    /// within the limit; counts them.
    pub(super) fn fits(&mut self, n: usize, declared: Option<u64>) -> bool {
        self.received = self.received.saturating_add(n as u64);
        let Some(limit) = self.limit else {
            return true;
        };
        self.received <= limit && declared.is_none_or(|declared| declared <= limit)
    }

    pub(super) fn too_large(&self, exchange: &Exchange) -> Error {
        Error::BodyTooLarge {
            remote: exchange.remote_name(),
            limit: self.limit.unwrap_or_default(),
        }
    }
}

/// The interim (1xx) heads of a response against the client's bound on
/// them all, [`max_head_bytes`](crate::h1::Limits::max_head_bytes), as
/// HTTP/1.1's decoder has it: each is bounded by `h2`
/// (`max_header_list_size`), but not their number — a server could send
/// `103 Early Hints` for ever, which no body limit sees, and the stream
/// would wait for its final head until a timeout. A head counts as HTTP/2
/// sizes a header list (RFC 9113 §6.5.2): each field's name and value, and
/// 32 — `:status` too.
pub(super) struct InterimCount {
    pub(super) limit: usize,
    pub(super) received: usize,
}

impl InterimCount {
    /// What RFC 9113 §6.5.2 adds to each field's name and value.
    const FIELD_OVERHEAD: usize = 32;

    /// Whether the interim heads so far and `head` stay within the limit;
    /// counts it.
    pub(super) fn fits(&mut self, head: &http::Response<()>) -> bool {
        let status = ":status".len() + 3 + Self::FIELD_OVERHEAD;
        let fields = head
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + Self::FIELD_OVERHEAD)
            .fold(status, usize::saturating_add);
        self.received = self.received.saturating_add(fields);
        self.received <= self.limit
    }

    pub(super) fn too_large(&self, exchange: &Exchange) -> Error {
        protocol_error(
            exchange,
            DecodeError::InterimResponsesTooLarge { limit: self.limit },
        )
    }
}

/// The fields of one head, or of the trailers, against the client's bound
/// on their number, [`max_headers`](crate::h1::Limits::max_headers), as
/// HTTP/1.1's decoder has it: `h2` bounds a section's size
/// (`max_header_list_size`), not how many fields it holds — some 1,900
/// within the default 64 KiB, whatever the limit says.
#[derive(Clone, Copy)]
pub(super) struct FieldCount {
    pub(super) limit: usize,
}

impl FieldCount {
    /// Whether `fields` are within the limit; if not, the exchange's error.
    pub(super) fn check(&self, fields: &http::HeaderMap, exchange: &Exchange) -> Result<(), Error> {
        if fields.len() <= self.limit {
            return Ok(());
        }
        Err(protocol_error(
            exchange,
            DecodeError::TooManyHeaders { limit: self.limit },
        ))
    }
}

/// The server broke what a response may be (`source`, as HTTP/1.1's
/// decoder names it): the exchange's error.
pub(super) fn protocol_error(exchange: &Exchange, source: DecodeError) -> Error {
    Error::Protocol {
        remote: exchange.remote_name(),
        source,
    }
}
