//! Body decoding: `Content-Length`, chunked and close-delimited framing.

use http::HeaderMap;

use super::chunked::{clamp, Chunked};
use super::error::{DecodeError, Stage};
use super::limits::Limits;

/// How a response body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    /// Exactly this many bytes (0 for bodiless responses).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the peer closes the connection.
    Eof,
}

#[derive(Debug)]
enum Kind {
    Length { remaining: u64 },
    Chunked(Chunked),
    Eof,
}

/// What one call to [`BodyDecoder::decode`] produced.
#[derive(Debug)]
pub(crate) enum Step<'a> {
    /// All usable input consumed; more is needed.
    NeedMore,
    /// Body data, borrowed from the input.
    Data(&'a [u8]),
    /// A non-empty trailer section.
    Trailers(HeaderMap),
    /// The body is complete.
    End,
}

/// Decodes one body, given its framing.
#[derive(Debug)]
pub(crate) struct BodyDecoder {
    kind: Kind,
    limits: Limits,
    /// Body bytes seen (or, for chunked, declared by chunk sizes) so far.
    seen: u64,
}

impl BodyDecoder {
    pub(crate) fn new(kind: BodyKind, limits: Limits) -> Self {
        let kind = match kind {
            BodyKind::Length(remaining) => Kind::Length { remaining },
            BodyKind::Chunked => Kind::Chunked(Chunked::new()),
            BodyKind::Eof => Kind::Eof,
        };
        BodyDecoder {
            kind,
            limits,
            seen: 0,
        }
    }

    /// Decodes from the start of `input`: returns bytes consumed and what
    /// they were. Never consumes past the end of the body.
    pub(crate) fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Step<'a>), DecodeError> {
        match &mut self.kind {
            Kind::Length { remaining } => {
                if *remaining == 0 {
                    return Ok((0, Step::End));
                }
                // A declared length over the limit fails at the body's
                // first decode, before any of it is taken or waited for
                // (what is left only shrinks from what was declared).
                if let Some(limit) = self.limits.max_body_bytes {
                    if *remaining > limit {
                        return Err(DecodeError::BodyTooLarge { limit });
                    }
                }
                if input.is_empty() {
                    return Ok((0, Step::NeedMore));
                }
                let n = clamp(input.len(), *remaining);
                *remaining -= n as u64;
                Ok((n, Step::Data(&input[..n])))
            }
            Kind::Eof => {
                if input.is_empty() {
                    return Ok((0, Step::NeedMore));
                }
                // Every byte up to the limit is body, then the next fails:
                // the input that crosses the limit gives its part within it,
                // so that what comes before the error does not depend on
                // how the reads split the body.
                let mut n = input.len();
                if let Some(limit) = self.limits.max_body_bytes {
                    let room = limit.saturating_sub(self.seen);
                    if room == 0 {
                        return Err(DecodeError::BodyTooLarge { limit });
                    }
                    n = clamp(n, room);
                }
                self.seen = self.seen.saturating_add(n as u64);
                Ok((n, Step::Data(&input[..n])))
            }
            Kind::Chunked(chunked) => chunked.decode(input, &self.limits, &mut self.seen),
        }
    }

    /// The peer closed the connection: `Ok` if that ends the body (it is
    /// close-delimited, or already complete), else where it was cut.
    pub(crate) fn eof(&self) -> Result<(), DecodeError> {
        match &self.kind {
            Kind::Eof | Kind::Length { remaining: 0 } => Ok(()),
            Kind::Length { .. } => Err(DecodeError::Truncated {
                stage: Stage::LengthBody,
            }),
            Kind::Chunked(chunked) => chunked.eof(),
        }
    }

    /// What is left of a body of known length; `None` for other framings.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match &self.kind {
            Kind::Length { remaining } => Some(*remaining),
            Kind::Chunked(_) | Kind::Eof => None,
        }
    }

    /// Where the body is, for reporting an input that ended early.
    pub(crate) fn stage(&self) -> Stage {
        match &self.kind {
            Kind::Length { .. } => Stage::LengthBody,
            Kind::Eof => Stage::CloseDelimitedBody,
            Kind::Chunked(chunked) => chunked.stage(),
        }
    }
}
