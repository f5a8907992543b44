//! A response's bytes against the client's bounds, as HTTP/1.1's decoder
//! counts them: its body's ([`BodyCount`]), its interim heads'
//! ([`InterimCount`]), the fields of each head and of its trailers
//! ([`FieldCount`]), and its trailers' bytes ([`TrailerSize`]); and a
//! header list's size as HTTP/2 counts it ([`list_size`], [`field_size`]),
//! a request's too.

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

    /// How many of the last `n` bytes [`fits`](Self::fits) counted are
    /// within the limit: all of them if it said they fit.
    pub(super) fn within(&self, n: usize) -> usize {
        let Some(limit) = self.limit else {
            return n;
        };
        let before = self.received.saturating_sub(n as u64);
        usize::try_from(limit.saturating_sub(before)).map_or(n, |room| room.min(n))
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
    /// Whether the interim heads so far and `head` stay within the limit;
    /// counts it.
    pub(super) fn fits(&mut self, head: &http::Response<()>) -> bool {
        let status = field_size(":status", head.status().as_str());
        let fields = status.saturating_add(list_size(head.headers()));
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

/// A response's trailers against the client's bound on them,
/// [`max_trailer_bytes`](crate::h1::Limits::max_trailer_bytes), as
/// HTTP/1.1's decoder has it: `h2` bounds them by
/// `max_header_list_size` alone (64 KiB by default), whatever the limit
/// says. They count as HTTP/2 sizes a header list (RFC 9113 §6.5.2).
#[derive(Clone, Copy)]
pub(super) struct TrailerSize {
    pub(super) limit: usize,
}

impl TrailerSize {
    /// Whether `trailers` are within the limit; if not, the exchange's
    /// error.
    pub(super) fn check(
        &self,
        trailers: &http::HeaderMap,
        exchange: &Exchange,
    ) -> Result<(), Error> {
        if list_size(trailers) <= self.limit {
            return Ok(());
        }
        Err(protocol_error(
            exchange,
            DecodeError::TrailersTooLarge { limit: self.limit },
        ))
    }
}

/// What RFC 9113 §6.5.2 adds to each field's name and value.
const FIELD_OVERHEAD: usize = 32;

/// The size of `fields` as RFC 9113 §6.5.2 counts a header list: each
/// field's name and value, and 32.
pub(super) fn list_size(fields: &http::HeaderMap) -> usize {
    fields
        .iter()
        .map(|(name, value)| field_size(name.as_str(), value.as_bytes()))
        .fold(0, usize::saturating_add)
}

/// The size of one field of a header list as RFC 9113 §6.5.2 counts it:
/// its name and value, and 32 — a pseudo-header field's too.
pub(super) fn field_size(name: &str, value: impl AsRef<[u8]>) -> usize {
    name.len() + value.as_ref().len() + FIELD_OVERHEAD
}

/// The server broke what a response may be (`source`, as HTTP/1.1's
/// decoder names it): the exchange's error.
pub(super) fn protocol_error(exchange: &Exchange, source: DecodeError) -> Error {
    Error::Protocol {
        remote: exchange.remote_name(),
        source,
    }
}
