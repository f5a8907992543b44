//! `deflate`: zlib-wrapped (RFC 9110 §8.4.1.2) or raw, told apart by the
//! first two bytes.
//!
//! A valid zlib header (CM = 8, CINFO <= 7, FCHECK making the pair a multiple
//! of 31) means a zlib stream (RFC 1950, Adler-32 checked); anything else is
//! taken as raw deflate (RFC 1951), which some servers send. The only raw
//! streams mistaken for zlib would start with a stored block whose padding
//! bits spell a zlib header, which encoders do not write (they pad with
//! zeros). The inflater is freed as soon as the stream ends.

use super::flate::{inflate, CM_DEFLATE};
use super::stage::Step;
use super::{Coding, DecodeError};
use flate2::Decompress;

/// A `deflate` decoder: zlib-wrapped or raw, decided by the first two bytes.
pub(super) struct DeflateDecoder {
    /// The first two bytes, kept until the format is known.
    head: [u8; 2],
    head_len: usize,
    /// How many of `head` have been fed to the inflater.
    replayed: usize,
    /// Created once the format is known; dropped when the stream ends.
    inflate: Option<Decompress>,
    ended: bool,
}

/// Whether two bytes are a zlib header (RFC 1950 §2.2): deflate method, a
/// window of at most 32 KiB, and the check bits right.
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0f == CM_DEFLATE && cmf >> 4 <= 7 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

impl DeflateDecoder {
    pub(super) fn new() -> Self {
        DeflateDecoder {
            head: [0; 2],
            head_len: 0,
            replayed: 0,
            inflate: None,
            ended: false,
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        self.ended
    }

    pub(super) fn step(&mut self, input: &[u8], output: &mut [u8]) -> Result<Step, DecodeError> {
        if self.ended {
            return Ok(Step::after_end(input));
        }
        let mut consumed = 0;
        if self.inflate.is_none() {
            let take = (2 - self.head_len).min(input.len());
            self.head[self.head_len..self.head_len + take].copy_from_slice(&input[..take]);
            self.head_len += take;
            consumed = take;
            if self.head_len < 2 {
                return Ok(Step::new(consumed, 0));
            }
            let zlib = is_zlib_header(self.head[0], self.head[1]);
            self.inflate = Some(Decompress::new(zlib));
        }
        let Some(inflater) = self.inflate.as_mut() else {
            return Ok(Step::new(consumed, 0));
        };
        let mut produced = 0;
        let mut ended = false;
        if self.replayed < 2 {
            let head = self.head;
            let (c, p, end) = inflate(inflater, &head[self.replayed..], output, Coding::Deflate)?;
            self.replayed += c;
            produced += p;
            ended = end;
            if !ended && self.replayed < 2 {
                // The output is full: the rest of the head goes next time.
                return Ok(Step::new(consumed, produced));
            }
        }
        if !ended {
            let (c, p, end) = inflate(
                inflater,
                &input[consumed..],
                &mut output[produced..],
                Coding::Deflate,
            )?;
            consumed += c;
            produced += p;
            ended = end;
        }
        if ended {
            self.ended = true;
            self.inflate = None;
            // A stream that ended inside the two sniffed bytes leaves the
            // other one as trailing data.
            if self.replayed < 2 {
                return Ok(Step::trailing(consumed, produced));
            }
        }
        Ok(Step::new(consumed, produced))
    }
}
