//! Body decoding: `Content-Length`, chunked and close-delimited framing.

use http::HeaderMap;

use super::error::{DecodeError, Stage};
use super::limits::{Limits, MAX_CHUNK_EXTENSION_BYTES};
use super::response::parse_trailers;

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

/// Where a chunked body decoder is, byte by byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkedState {
    /// Reading the hex digits of a chunk size (`digits` read so far).
    Size,
    /// Whitespace after the size, before `;` or CR.
    SizeLws,
    /// Inside chunk extensions (ignored) until CR.
    Extension,
    /// CR of the size line seen; LF expected.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// Chunk data done; CR expected.
    DataCr,
    /// CR after chunk data seen; LF expected.
    DataLf,
    /// Last chunk seen; the trailer section (maybe just CRLF) follows.
    Trailers,
    /// The body is complete.
    End,
}

#[derive(Debug)]
enum Kind {
    Length {
        remaining: u64,
    },
    Chunked {
        state: ChunkedState,
        /// Chunk size being read (state `Size`), then bytes of data left.
        size: u64,
        /// Hex digits read for the current size.
        digits: u32,
        /// Extension bytes seen in the whole body.
        ext_bytes: u64,
    },
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
            BodyKind::Chunked => Kind::Chunked {
                state: ChunkedState::Size,
                size: 0,
                digits: 0,
                ext_bytes: 0,
            },
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
                let seen = self.seen.saturating_add(input.len() as u64);
                if let Some(limit) = self.limits.max_body_bytes {
                    if seen > limit {
                        return Err(DecodeError::BodyTooLarge { limit });
                    }
                }
                self.seen = seen;
                Ok((input.len(), Step::Data(input)))
            }
            Kind::Chunked { .. } => self.decode_chunked(input),
        }
    }

    fn decode_chunked<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Step<'a>), DecodeError> {
        let Kind::Chunked {
            state,
            size,
            digits,
            ext_bytes,
        } = &mut self.kind
        else {
            unreachable!("decode_chunked on a non-chunked body")
        };
        let mut pos = 0;
        loop {
            match *state {
                ChunkedState::Data => {
                    if pos == input.len() {
                        return Ok((pos, Step::NeedMore));
                    }
                    let n = clamp(input.len() - pos, *size);
                    *size -= n as u64;
                    if *size == 0 {
                        *state = ChunkedState::DataCr;
                    }
                    return Ok((pos + n, Step::Data(&input[pos..pos + n])));
                }
                ChunkedState::Trailers => {
                    return match parse_trailers(&input[pos..], &self.limits)? {
                        None => Ok((pos, Step::NeedMore)),
                        Some((n, trailers)) => {
                            *state = ChunkedState::End;
                            if trailers.is_empty() {
                                Ok((pos + n, Step::End))
                            } else {
                                Ok((pos + n, Step::Trailers(trailers)))
                            }
                        }
                    };
                }
                ChunkedState::End => return Ok((pos, Step::End)),
                _ => {}
            }
            let Some(&b) = input.get(pos) else {
                return Ok((pos, Step::NeedMore));
            };
            pos += 1;
            *state = match (*state, b) {
                (ChunkedState::Size, b) if b.is_ascii_hexdigit() => {
                    let d = u64::from(hex_value(b));
                    *size = size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(d))
                        .ok_or(DecodeError::ChunkSizeOverflow)?;
                    *digits = digits.saturating_add(1);
                    ChunkedState::Size
                }
                (ChunkedState::Size, _) if *digits == 0 => {
                    return Err(DecodeError::InvalidChunkSize);
                }
                (ChunkedState::Size | ChunkedState::SizeLws, b' ' | b'\t') => ChunkedState::SizeLws,
                (ChunkedState::Size | ChunkedState::SizeLws, b';') => ChunkedState::Extension,
                (ChunkedState::Size | ChunkedState::SizeLws | ChunkedState::Extension, b'\r') => {
                    ChunkedState::SizeLf
                }
                (ChunkedState::Size | ChunkedState::SizeLws | ChunkedState::Extension, b'\n') => {
                    return Err(DecodeError::MissingCrlfAfterChunkSize);
                }
                (ChunkedState::Size | ChunkedState::SizeLws, _) => {
                    return Err(DecodeError::InvalidChunkSize);
                }
                (ChunkedState::Extension, _) => {
                    *ext_bytes += 1;
                    if *ext_bytes > MAX_CHUNK_EXTENSION_BYTES {
                        return Err(DecodeError::ChunkExtensionsTooLarge {
                            limit: MAX_CHUNK_EXTENSION_BYTES,
                        });
                    }
                    ChunkedState::Extension
                }
                (ChunkedState::SizeLf, b'\n') => {
                    *digits = 0;
                    if *size == 0 {
                        ChunkedState::Trailers
                    } else {
                        let seen = self.seen.saturating_add(*size);
                        if let Some(limit) = self.limits.max_body_bytes {
                            if seen > limit {
                                return Err(DecodeError::BodyTooLarge { limit });
                            }
                        }
                        self.seen = seen;
                        ChunkedState::Data
                    }
                }
                (ChunkedState::SizeLf, _) => return Err(DecodeError::MissingCrlfAfterChunkSize),
                (ChunkedState::DataCr, b'\r') => ChunkedState::DataLf,
                (ChunkedState::DataLf, b'\n') => ChunkedState::Size,
                (ChunkedState::DataCr | ChunkedState::DataLf, _) => {
                    return Err(DecodeError::MissingCrlfAfterChunkData);
                }
                (ChunkedState::Data | ChunkedState::Trailers | ChunkedState::End, _) => {
                    unreachable!("handled above")
                }
            };
        }
    }

    /// The peer closed the connection: `Ok` if that ends the body (it is
    /// close-delimited, or already complete), else where it was cut.
    pub(crate) fn eof(&self) -> Result<(), DecodeError> {
        let stage = match &self.kind {
            Kind::Eof | Kind::Length { remaining: 0 } => return Ok(()),
            Kind::Chunked {
                state: ChunkedState::End,
                ..
            } => return Ok(()),
            Kind::Length { .. } => Stage::LengthBody,
            Kind::Chunked {
                state: ChunkedState::Trailers,
                ..
            } => Stage::Trailers,
            Kind::Chunked { .. } => Stage::ChunkedBody,
        };
        Err(DecodeError::Truncated { stage })
    }

    /// Where the body is, for reporting an input that ended early.
    pub(crate) fn stage(&self) -> Stage {
        match &self.kind {
            Kind::Length { .. } => Stage::LengthBody,
            Kind::Eof => Stage::CloseDelimitedBody,
            Kind::Chunked {
                state: ChunkedState::Trailers,
                ..
            } => Stage::Trailers,
            Kind::Chunked { .. } => Stage::ChunkedBody,
        }
    }
}

/// `min(available, remaining)` as a `usize`, without overflow.
fn clamp(available: usize, remaining: u64) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}
