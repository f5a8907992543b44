//! Content codings and the parsing of a `Content-Encoding` field value.
//!
//! The field is a comma-separated list of codings in the order they were
//! applied (RFC 9110 §8.4). Tokens are case-insensitive, surrounding
//! whitespace and empty list elements are ignored (the list rule of RFC 9110
//! §5.6.1), and `identity` is dropped wherever it appears. Everything else
//! must name a coding this module knows *and* whose cargo feature is on, or
//! the whole field is refused with an [`UnsupportedCoding`]: a body is either
//! decoded completely or passed through untouched, never half-decoded.

use std::fmt;

/// The most non-identity codings a `Content-Encoding` list may stack.
///
/// Each stacked coding costs one decoder state and one 16 KiB link buffer,
/// so the cap bounds memory as well as work. curl allows the same number;
/// real servers send one, and very rarely two (a proxy that compressed an
/// already compressed body).
pub const MAX_CODINGS: usize = 4;

/// Longest token kept in [`UnsupportedCoding::Unknown`] (longer ones are cut,
/// so a hostile header cannot make the error large).
const MAX_TOKEN_IN_ERROR: usize = 64;

/// A content coding this module can decode (each behind its cargo feature).
///
/// All variants exist whatever the features, so errors and parse results
/// have the same shape in every build; [`Coding::is_enabled`] tells which
/// ones this build can actually decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Coding {
    /// `gzip` (alias `x-gzip`): RFC 1952 members, each a deflate stream
    /// framed by a header and a CRC-32 + length trailer. Feature `gzip`.
    Gzip,
    /// `deflate`: a zlib stream (RFC 1950) per RFC 9110 §8.4.1.2; raw
    /// deflate (RFC 1951) is accepted too, as browsers and curl do. Feature
    /// `deflate`.
    Deflate,
    /// `br`: Brotli (RFC 7932). Feature `brotli`.
    Brotli,
    /// `zstd`: Zstandard frames (RFC 8878, window limited by RFC 9659).
    /// Feature `zstd`.
    Zstd,
}

impl Coding {
    /// Every coding, in the order [`accept_encoding`](super::accept_encoding)
    /// lists them.
    pub const ALL: [Coding; 4] = [Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd];

    /// The registered token: `gzip`, `deflate`, `br` or `zstd`.
    pub const fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The coding a token names, ignoring ASCII case and surrounding
    /// whitespace (`x-gzip` is `gzip`). `None` for `identity` and for
    /// anything unknown.
    pub fn from_token(token: &str) -> Option<Coding> {
        let token = token.trim_matches(|c| c == ' ' || c == '\t');
        [
            ("gzip", Coding::Gzip),
            ("x-gzip", Coding::Gzip),
            ("deflate", Coding::Deflate),
            ("br", Coding::Brotli),
            ("zstd", Coding::Zstd),
        ]
        .into_iter()
        .find(|(name, _)| token.eq_ignore_ascii_case(name))
        .map(|(_, coding)| coding)
    }

    /// Whether this build decodes the coding (its cargo feature is on).
    pub const fn is_enabled(self) -> bool {
        match self {
            Coding::Gzip => cfg!(feature = "gzip"),
            Coding::Deflate => cfg!(feature = "deflate"),
            Coding::Brotli => cfg!(feature = "brotli"),
            Coding::Zstd => cfg!(feature = "zstd"),
        }
    }
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// Why a `Content-Encoding` value cannot be decoded by this build.
///
/// This is not a broken body: nothing has been read yet. The usual reaction
/// for [`Unknown`](Self::Unknown) and [`Disabled`](Self::Disabled) is the
/// browsers' one, hand the body over undecoded with its `Content-Encoding`
/// left in place so the application can see what it got; for
/// [`TooMany`](Self::TooMany) curl's one, fail the response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnsupportedCoding {
    /// A token that names no coding this module knows (`compress`, `x-foo`,
    /// `gzip;q=1`, a non-UTF-8 value…). `coding` is the token as received,
    /// cut to 64 bytes.
    Unknown {
        /// The offending token (lossily UTF-8, at most 64 bytes).
        coding: String,
    },
    /// A known coding whose cargo feature is off in this build.
    Disabled {
        /// The coding.
        coding: Coding,
    },
    /// More than [`MAX_CODINGS`] non-identity codings stacked.
    TooMany {
        /// How many non-identity codings the value lists.
        count: usize,
    },
}

impl fmt::Display for UnsupportedCoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnsupportedCoding::Unknown { coding } => {
                write!(f, "unknown content coding {coding:?}")
            }
            UnsupportedCoding::Disabled { coding } => {
                write!(f, "content coding {coding} is not enabled in this build")
            }
            UnsupportedCoding::TooMany { count } => write!(
                f,
                "{count} stacked content codings (at most {MAX_CODINGS} are decoded)"
            ),
        }
    }
}

impl std::error::Error for UnsupportedCoding {}

/// Parses `Content-Encoding` field values (several field lines are one list,
/// RFC 9110 §5.3) into the codings in the order they were applied, identity
/// dropped. An empty result means "not encoded".
pub(super) fn parse<'a, I>(values: I) -> Result<Vec<Coding>, UnsupportedCoding>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let mut codings = Vec::new();
    let mut count = 0usize;
    for value in values {
        for raw in value.split(|&b| b == b',') {
            let raw = trim_ows(raw);
            if raw.is_empty() || raw.eq_ignore_ascii_case(b"identity") {
                continue;
            }
            let coding = std::str::from_utf8(raw)
                .ok()
                .and_then(Coding::from_token)
                .ok_or_else(|| UnsupportedCoding::Unknown {
                    coding: cut_token(raw),
                })?;
            if !coding.is_enabled() {
                return Err(UnsupportedCoding::Disabled { coding });
            }
            count += 1;
            // Keep counting past the cap so the error says how many there
            // were, but stop storing.
            if codings.len() < MAX_CODINGS {
                codings.push(coding);
            }
        }
    }
    if count > MAX_CODINGS {
        return Err(UnsupportedCoding::TooMany { count });
    }
    Ok(codings)
}

/// Strips optional whitespace (SP / HTAB) from both ends.
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The token for an error message: lossy UTF-8, at most 64 bytes.
fn cut_token(raw: &[u8]) -> String {
    let raw = &raw[..raw.len().min(MAX_TOKEN_IN_ERROR)];
    String::from_utf8_lossy(raw).into_owned()
}
