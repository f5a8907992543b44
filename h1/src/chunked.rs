//! The chunked transfer coding (RFC 9112 §7.1): a size line, the data, a
//! CRLF, again; then a zero size, the trailer section and an empty line.
//! The framing is read byte by byte, one state per position in it; chunk
//! data is handed out as it is, borrowed from the input.

use super::body::Step;
use super::error::{DecodeError, Stage};
use super::limits::{Limits, MAX_CHUNK_EXTENSION_BYTES};
use super::response::{parse_trailers, Scanned};

/// The most bytes of one chunk-size line that carry nothing — zeros
/// leading the size, whitespace after it — before it is invalid. Like the
/// extensions (bounded in the whole body by [`MAX_CHUNK_EXTENSION_BYTES`]),
/// they are framing without data, which no body limit sees: unbounded, a
/// server could send them forever (`000…` never ends a size line) with
/// nothing read. Bounded per line, not per body, because servers that pad
/// sizes to a fixed width do it on every chunk; a line bounded so is
/// followed by at least one byte of data, or ends the body.
const MAX_SIZE_LINE_PADDING: u32 = 1024;

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size.
    Size,
    /// Whitespace after the size, before `;` or CR.
    SizeLws,
    /// Inside chunk extensions (ignored, but checked for control bytes)
    /// until CR.
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

/// A chunked body being decoded.
#[derive(Debug)]
pub(crate) struct Chunked {
    state: State,
    /// The chunk size being read (in `Size`), then the bytes of data left.
    size: u64,
    /// Hex digits read for the current size.
    digits: u32,
    /// Bytes of the current size line that carry nothing: zeros leading
    /// the size, whitespace after it (see [`MAX_SIZE_LINE_PADDING`]).
    padding: u32,
    /// Extension bytes seen in the whole body.
    ext_bytes: u64,
    /// What of the trailer section in progress was found incomplete.
    trailers_scanned: Scanned,
}

impl Chunked {
    pub(crate) fn new() -> Self {
        Chunked {
            state: State::Size,
            size: 0,
            digits: 0,
            padding: 0,
            ext_bytes: 0,
            trailers_scanned: Scanned::default(),
        }
    }

    /// Decodes from the start of `input`; `seen` counts the body bytes the
    /// chunk sizes declared, against [`Limits::max_body_bytes`].
    pub(crate) fn decode<'a>(
        &mut self,
        input: &'a [u8],
        limits: &Limits,
        seen: &mut u64,
    ) -> Result<(usize, Step<'a>), DecodeError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Data => return Ok(self.data(input, pos)),
                State::Trailers => return self.trailers(input, pos, limits),
                State::End => return Ok((pos, Step::End)),
                _ => {}
            }
            let Some(&byte) = input.get(pos) else {
                return Ok((pos, Step::NeedMore));
            };
            pos += 1;
            self.state = match self.state {
                State::Size => self.size_digit(byte)?,
                State::SizeLws => self.after_size(byte)?,
                State::Extension => self.extension(byte)?,
                State::SizeLf => self.size_line_end(byte, limits, seen)?,
                State::DataCr if byte == b'\r' => State::DataLf,
                State::DataLf if byte == b'\n' => State::Size,
                State::DataCr | State::DataLf => {
                    return Err(DecodeError::MissingCrlfAfterChunkData)
                }
                State::Data | State::Trailers | State::End => unreachable!("handled above"),
            };
        }
    }

    /// Chunk data from `pos`: as much of the chunk as the input holds.
    fn data<'a>(&mut self, input: &'a [u8], pos: usize) -> (usize, Step<'a>) {
        if pos == input.len() {
            return (pos, Step::NeedMore);
        }
        let n = clamp(input.len() - pos, self.size);
        self.size -= n as u64;
        if self.size == 0 {
            self.state = State::DataCr;
        }
        (pos + n, Step::Data(&input[pos..pos + n]))
    }

    /// The trailer section from `pos`, once it is complete.
    fn trailers<'a>(
        &mut self,
        input: &'a [u8],
        pos: usize,
        limits: &Limits,
    ) -> Result<(usize, Step<'a>), DecodeError> {
        Ok(
            match parse_trailers(&input[pos..], limits, &mut self.trailers_scanned)? {
                None => (pos, Step::NeedMore),
                Some((n, trailers)) => {
                    self.state = State::End;
                    if trailers.is_empty() {
                        (pos + n, Step::End)
                    } else {
                        (pos + n, Step::Trailers(trailers))
                    }
                }
            },
        )
    }

    /// A byte of the size: a hex digit, or what may follow the digits.
    fn size_digit(&mut self, byte: u8) -> Result<State, DecodeError> {
        if byte.is_ascii_hexdigit() {
            if self.size == 0 && self.digits > 0 {
                self.pad()?; // a digit after zeros only: a zero led the size
            }
            self.size = self
                .size
                .checked_mul(16)
                .and_then(|s| s.checked_add(u64::from(hex_value(byte))))
                .ok_or(DecodeError::ChunkSizeOverflow)?;
            self.digits = self.digits.saturating_add(1);
            return Ok(State::Size);
        }
        if self.digits == 0 {
            return Err(DecodeError::InvalidChunkSize);
        }
        self.after_size(byte)
    }

    /// What may follow the digits of a size: whitespace, extensions, the CR.
    fn after_size(&mut self, byte: u8) -> Result<State, DecodeError> {
        match byte {
            b' ' | b'\t' => {
                self.pad()?;
                Ok(State::SizeLws)
            }
            b';' => Ok(State::Extension),
            b'\r' => Ok(State::SizeLf),
            b'\n' => Err(DecodeError::MissingCrlfAfterChunkSize),
            _ => Err(DecodeError::InvalidChunkSize),
        }
    }

    /// One more byte of padding in the size line: within bounds, or an
    /// invalid size line.
    fn pad(&mut self) -> Result<(), DecodeError> {
        self.padding += 1;
        if self.padding > MAX_SIZE_LINE_PADDING {
            return Err(DecodeError::InvalidChunkSize);
        }
        Ok(())
    }

    /// A byte of the ignored extensions, or the CR that ends them.
    ///
    /// The extensions' grammar (RFC 9112 §7.1.1: `;` name `=` value, a
    /// token or a quoted-string, with whitespace around) allows no control
    /// byte but HTAB anywhere, not even quoted; so the CR here always ends
    /// the line, and any other control byte (a NUL, a bare LF) is refused:
    /// a recipient that ends the line, or the string, at it would read the
    /// framing after it differently from this one. The rest is not parsed
    /// (the extensions are ignored), so each byte is judged alone and the
    /// extensions may be split across inputs anywhere.
    fn extension(&mut self, byte: u8) -> Result<State, DecodeError> {
        match byte {
            b'\r' => Ok(State::SizeLf),
            b'\n' => Err(DecodeError::MissingCrlfAfterChunkSize),
            _ if byte.is_ascii_control() && byte != b'\t' => {
                Err(DecodeError::InvalidChunkExtension)
            }
            // One more byte of the extensions: within
            // [`MAX_CHUNK_EXTENSION_BYTES`] in the whole body.
            _ => {
                self.ext_bytes += 1;
                if self.ext_bytes > MAX_CHUNK_EXTENSION_BYTES {
                    return Err(DecodeError::ChunkExtensionsTooLarge {
                        limit: MAX_CHUNK_EXTENSION_BYTES,
                    });
                }
                Ok(State::Extension)
            }
        }
    }

    /// The LF that ends a size line: the data of the chunk follows, or, for
    /// the last chunk, the trailers.
    fn size_line_end(
        &mut self,
        byte: u8,
        limits: &Limits,
        seen: &mut u64,
    ) -> Result<State, DecodeError> {
        if byte != b'\n' {
            return Err(DecodeError::MissingCrlfAfterChunkSize);
        }
        self.digits = 0;
        self.padding = 0;
        if self.size == 0 {
            return Ok(State::Trailers);
        }
        let total = seen.saturating_add(self.size);
        if let Some(limit) = limits.max_body_bytes {
            if total > limit {
                return Err(DecodeError::BodyTooLarge { limit });
            }
        }
        *seen = total;
        Ok(State::Data)
    }

    /// The peer closed the connection: `Ok` if the body was complete.
    pub(crate) fn eof(&self) -> Result<(), DecodeError> {
        match self.state {
            State::End => Ok(()),
            _ => Err(DecodeError::Truncated {
                stage: self.stage(),
            }),
        }
    }

    /// Where the body is, for reporting an input that ended early.
    pub(crate) fn stage(&self) -> Stage {
        match self.state {
            State::Trailers => Stage::Trailers,
            _ => Stage::ChunkedBody,
        }
    }
}

/// `min(available, remaining)` as a `usize`, without overflow.
pub(crate) fn clamp(available: usize, remaining: u64) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}
