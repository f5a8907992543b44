//! `gzip` (and `x-gzip`): RFC 1952 members around raw deflate.
//!
//! The member header is parsed here, incrementally and without buffering
//! (FEXTRA, FNAME and FCOMMENT are skipped however long they are; FHCRC is
//! verified); the body goes to flate2's raw inflater; the 8-byte trailer is
//! checked against the CRC-32 and the length (mod 2^32) of what was
//! produced. After a member, bytes starting with the gzip magic begin
//! another member, decoded the same way; anything else is trailing data.

use super::flate::{inflate, CM_DEFLATE};
use super::stage::Step;
use super::{Coding, DecodeError};
use flate2::{Crc, Decompress};

const ID1: u8 = 0x1f;
const ID2: u8 = 0x8b;
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const FRESERVED: u8 = 0xe0;

/// A gzip decoder: every member of the stream, one after another.
pub(super) struct GzipDecoder {
    state: GzState,
    inflate: Decompress,
    /// CRC-32 and length (mod 2^32) of the current member's output.
    crc: Crc,
    size: u32,
}

enum GzState {
    Header(Header),
    Body,
    Trailer {
        buf: [u8; 8],
        len: usize,
    },
    /// Between members: a member has just ended.
    Boundary,
}

impl GzipDecoder {
    pub(super) fn new() -> Self {
        GzipDecoder {
            state: GzState::Header(Header::new(false)),
            inflate: Decompress::new(false),
            crc: Crc::new(),
            size: 0,
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        matches!(self.state, GzState::Boundary)
    }

    pub(super) fn step(&mut self, input: &[u8], output: &mut [u8]) -> Result<Step, DecodeError> {
        match self.state {
            GzState::Header(ref mut header) => match header.parse(input) {
                Ok((consumed, true)) => {
                    self.state = GzState::Body;
                    Ok(Step::new(consumed, 0))
                }
                Ok((consumed, false)) => Ok(Step::new(consumed, 0)),
                // After a complete member, bytes that are not a gzip magic
                // are trailing data, not a broken member.
                Err(HeaderError::NotGzip) if header.subsequent => Ok(Step::trailing(0, 0)),
                Err(HeaderError::NotGzip) => Err(DecodeError::corrupt(
                    Coding::Gzip,
                    "not a gzip stream (bad magic bytes)",
                )),
                Err(HeaderError::Invalid(detail)) => {
                    Err(DecodeError::corrupt(Coding::Gzip, detail))
                }
            },
            GzState::Body => {
                let (consumed, produced, ended) =
                    inflate(&mut self.inflate, input, output, Coding::Gzip)?;
                self.crc.update(&output[..produced]);
                // The trailer's ISIZE is the length mod 2^32: wrap likewise.
                self.size = self.size.wrapping_add(produced as u32);
                if ended {
                    self.state = GzState::Trailer {
                        buf: [0; 8],
                        len: 0,
                    };
                }
                Ok(Step::new(consumed, produced))
            }
            GzState::Trailer {
                ref mut buf,
                ref mut len,
            } => {
                let take = (8 - *len).min(input.len());
                buf[*len..*len + take].copy_from_slice(&input[..take]);
                *len += take;
                if *len < 8 {
                    return Ok(Step::new(take, 0));
                }
                let crc = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                let size = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
                if crc != self.crc.sum() {
                    return Err(DecodeError::corrupt(Coding::Gzip, "CRC-32 mismatch"));
                }
                if size != self.size {
                    return Err(DecodeError::corrupt(Coding::Gzip, "length mismatch"));
                }
                self.state = GzState::Boundary;
                Ok(Step::new(take, 0))
            }
            GzState::Boundary => {
                if input.is_empty() {
                    return Ok(Step::default());
                }
                if input[0] != ID1 {
                    return Ok(Step::trailing(0, 0));
                }
                // Another member (RFC 1952 §2.2): decode it too.
                self.inflate.reset(false);
                self.crc.reset();
                self.size = 0;
                self.state = GzState::Header(Header::new(true));
                self.step(input, output)
            }
        }
    }
}

/// The incremental gzip member header parser.
struct Header {
    field: Field,
    /// Bytes of the current fixed-size field seen so far.
    have: usize,
    /// The 10 fixed bytes, then the 2 of XLEN or of the header CRC.
    fixed: [u8; 10],
    flags: u8,
    /// FEXTRA bytes still to skip.
    extra_left: usize,
    /// The running CRC-32 of the header, when FHCRC asks for it.
    hcrc: Option<Crc>,
    /// Whether this member follows another (a bad magic is then trailing
    /// data, not corruption).
    subsequent: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Fixed,
    ExtraLen,
    Extra,
    Name,
    Comment,
    HeaderCrc,
    Done,
}

enum HeaderError {
    /// The magic bytes are wrong.
    NotGzip,
    Invalid(&'static str),
}

impl Header {
    fn new(subsequent: bool) -> Self {
        Header {
            field: Field::Fixed,
            have: 0,
            fixed: [0; 10],
            flags: 0,
            extra_left: 0,
            hcrc: None,
            subsequent,
        }
    }

    /// The field after `field`, given the flags.
    fn next(&self, field: Field) -> Field {
        let order = [
            (Field::ExtraLen, FEXTRA),
            (Field::Name, FNAME),
            (Field::Comment, FCOMMENT),
            (Field::HeaderCrc, FHCRC),
        ];
        let from = match field {
            Field::Fixed => 0,
            Field::ExtraLen | Field::Extra => 1,
            Field::Name => 2,
            Field::Comment => 3,
            Field::HeaderCrc | Field::Done => return Field::Done,
        };
        order[from..]
            .iter()
            .find(|(_, flag)| self.flags & flag != 0)
            .map_or(Field::Done, |&(f, _)| f)
    }

    fn hash(&mut self, bytes: &[u8]) {
        if let Some(crc) = self.hcrc.as_mut() {
            crc.update(bytes);
        }
    }

    /// Parses what it can of `input`: (consumed, header complete).
    fn parse(&mut self, input: &[u8]) -> Result<(usize, bool), HeaderError> {
        let mut i = 0;
        loop {
            match self.field {
                Field::Fixed => {
                    while self.have < 10 && i < input.len() {
                        let b = input[i];
                        match self.have {
                            0 if b != ID1 => return Err(HeaderError::NotGzip),
                            1 if b != ID2 => return Err(HeaderError::NotGzip),
                            2 if b != CM_DEFLATE => {
                                return Err(HeaderError::Invalid("unsupported compression method"))
                            }
                            3 if b & FRESERVED != 0 => {
                                return Err(HeaderError::Invalid("reserved header flags set"))
                            }
                            _ => {}
                        }
                        self.fixed[self.have] = b;
                        self.have += 1;
                        i += 1;
                    }
                    if self.have < 10 {
                        return Ok((i, false));
                    }
                    self.flags = self.fixed[3];
                    if self.flags & FHCRC != 0 {
                        let mut crc = Crc::new();
                        crc.update(&self.fixed);
                        self.hcrc = Some(crc);
                    }
                    self.have = 0;
                    self.field = self.next(Field::Fixed);
                }
                Field::ExtraLen | Field::HeaderCrc => {
                    while self.have < 2 && i < input.len() {
                        self.fixed[self.have] = input[i];
                        self.have += 1;
                        i += 1;
                    }
                    if self.have < 2 {
                        return Ok((i, false));
                    }
                    let value = u16::from_le_bytes([self.fixed[0], self.fixed[1]]);
                    self.have = 0;
                    if self.field == Field::ExtraLen {
                        let xlen = [self.fixed[0], self.fixed[1]];
                        self.hash(&xlen);
                        self.extra_left = usize::from(value);
                        self.field = Field::Extra;
                    } else {
                        let expected = self.hcrc.as_ref().map_or(0, |c| c.sum() & 0xffff);
                        if u32::from(value) != expected {
                            return Err(HeaderError::Invalid("header CRC mismatch"));
                        }
                        self.field = Field::Done;
                    }
                }
                Field::Extra => {
                    let take = self.extra_left.min(input.len() - i);
                    self.hash(&input[i..i + take]);
                    self.extra_left -= take;
                    i += take;
                    if self.extra_left > 0 {
                        return Ok((i, false));
                    }
                    self.field = self.next(Field::Extra);
                }
                Field::Name | Field::Comment => {
                    // Zero-terminated, of any length: skipped, not kept.
                    let rest = &input[i..];
                    match rest.iter().position(|&b| b == 0) {
                        Some(end) => {
                            self.hash(&rest[..=end]);
                            i += end + 1;
                            self.field = self.next(self.field);
                        }
                        None => {
                            self.hash(rest);
                            return Ok((input.len(), false));
                        }
                    }
                }
                Field::Done => return Ok((i, true)),
            }
        }
    }
}
