//! [`DecodeError`]: every way a body can fail to decode, each its own variant.

use super::Coding;
use std::fmt;

/// Why an encoded body could not be decoded.
///
/// Every error is final: the decoder that returned it returns it again from
/// every later call, and the body must be treated as failed (bytes already
/// handed out were provisional: integrity checks such as gzip's CRC-32 are
/// only known at the end of the stream).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes are not a valid stream of the coding: a wrong magic number
    /// or header (typically a plain body mislabelled as encoded), invalid
    /// compressed data, or a checksum or length that does not match.
    Corrupt {
        /// The coding whose stream is invalid (in a chain: the one that
        /// failed).
        coding: Coding,
        /// What was wrong, for logs: the codec's own message where it has
        /// one.
        detail: String,
    },
    /// The input ended (see [`ContentDecoder::finish`]) in the middle of a
    /// stream: the body was cut short.
    ///
    /// [`ContentDecoder::finish`]: super::ContentDecoder::finish
    Truncated {
        /// The coding whose stream is incomplete.
        coding: Coding,
    },
    /// Bytes follow a complete stream that are not another gzip member or
    /// zstd frame, and the policy is [`TrailingData::Reject`].
    ///
    /// [`TrailingData::Reject`]: super::TrailingData::Reject
    TrailingData {
        /// The coding whose stream was followed by extra bytes.
        coding: Coding,
    },
    /// The decoded body is larger than the configured limit.
    ///
    /// Exactly `limit` bytes were handed out before this error (decoding
    /// stops at the first byte past the limit). In a chain, an intermediate
    /// stage that overflows its own allowance (see the module docs) stops
    /// the body earlier, with fewer bytes handed out.
    TooLarge {
        /// The limit, in decoded bytes.
        limit: u64,
    },
    /// The stream needs a larger history window than allowed (see
    /// [`DecoderConfig::max_window_bytes`]).
    ///
    /// [`DecoderConfig::max_window_bytes`]: super::DecoderConfig::max_window_bytes
    WindowTooLarge {
        /// `Brotli` or `Zstd`: the codings whose window the stream sets.
        coding: Coding,
        /// The window the stream declares, in bytes.
        window: u64,
        /// The largest window allowed, in bytes.
        max: u64,
    },
}

impl DecodeError {
    /// The coding the error is about; `None` for [`TooLarge`](Self::TooLarge),
    /// which is about the decoded whole.
    pub fn coding(&self) -> Option<Coding> {
        match self {
            DecodeError::Corrupt { coding, .. }
            | DecodeError::Truncated { coding }
            | DecodeError::TrailingData { coding }
            | DecodeError::WindowTooLarge { coding, .. } => Some(*coding),
            DecodeError::TooLarge { .. } => None,
        }
    }

    #[cfg_attr(
        not(any(
            feature = "gzip",
            feature = "deflate",
            feature = "brotli",
            feature = "zstd"
        )),
        allow(dead_code)
    )]
    pub(super) fn corrupt(coding: Coding, detail: impl Into<String>) -> Self {
        DecodeError::Corrupt {
            coding,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Corrupt { coding, detail } => {
                write!(f, "invalid {coding} data: {detail}")
            }
            DecodeError::Truncated { coding } => write!(f, "truncated {coding} stream"),
            DecodeError::TrailingData { coding } => {
                write!(f, "unexpected data after the end of the {coding} stream")
            }
            DecodeError::TooLarge { limit } => {
                write!(f, "decoded body larger than the limit of {limit} bytes")
            }
            DecodeError::WindowTooLarge {
                coding,
                window,
                max,
            } => write!(
                f,
                "{coding} stream needs a {window}-byte window (at most {max} allowed)"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}
