//! Errors of the codec.

use std::fmt;

/// Where in a response the input ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// Inside a response head (including before its first byte).
    Head,
    /// Inside a body framed by `Content-Length`.
    LengthBody,
    /// Inside a chunked body: a chunk-size line, chunk data or the CRLF after it.
    ChunkedBody,
    /// Inside the trailer section after the last chunk.
    Trailers,
    /// Inside a close-delimited body. Never reported by
    /// [`ResponseDecoder::eof`](super::ResponseDecoder::eof) (EOF ends such a
    /// body); only by the test helper [`decode_all`](super::decode_all) when
    /// its input stops without EOF.
    CloseDelimitedBody,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Head => "the response head",
            Stage::LengthBody => "a Content-Length body",
            Stage::ChunkedBody => "a chunked body",
            Stage::Trailers => "the trailers",
            Stage::CloseDelimitedBody => "a close-delimited body",
        })
    }
}

/// A response could not be decoded. The decoder is unusable afterwards (every
/// later call returns the same error) and so is the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The status line is not `HTTP-version SP status-code [SP reason]`.
    #[error("invalid status line")]
    InvalidStatusLine,
    /// The status line names a version other than HTTP/1.0 or HTTP/1.1.
    #[error("unsupported HTTP version in status line (only HTTP/1.0 and HTTP/1.1)")]
    BadVersion,
    /// The status code is not three digits in 100..=999.
    #[error("invalid status code (must be three digits from 100 to 999)")]
    InvalidStatusCode,
    /// A header (or trailer) name is empty or holds a byte that is not a token character.
    #[error("invalid byte in header name")]
    InvalidHeaderName,
    /// A header (or trailer) value holds a control byte.
    #[error("invalid byte in header value")]
    InvalidHeaderValue,
    /// A header (or trailer) line has no colon.
    #[error("header without colon")]
    HeaderWithoutColon,
    /// A header line starts with whitespace (obsolete line folding).
    #[error("obsolete line folding (header line starting with whitespace)")]
    ObsFold,
    /// The head is larger than [`Limits::max_head_bytes`](super::Limits::max_head_bytes).
    #[error("response head larger than {limit} bytes")]
    HeadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// More header fields than [`Limits::max_headers`](super::Limits::max_headers).
    #[error("more than {limit} header fields")]
    TooManyHeaders {
        /// The limit.
        limit: usize,
    },
    /// A `Content-Length` value is not a decimal number fitting in 64 bits,
    /// in a response with a body (in one without, HEAD's, a 204's or a
    /// 304's, it ends the response and the connection).
    #[error("invalid Content-Length value")]
    InvalidContentLength,
    /// Two different `Content-Length` values, in a response with a body (in
    /// one without, it ends the response and the connection).
    #[error("conflicting Content-Length values {first} and {second}")]
    ConflictingContentLength {
        /// The first value seen.
        first: u64,
        /// The first value differing from it.
        second: u64,
    },
    /// Both `Content-Length` and `Transfer-Encoding` (a request smuggling
    /// vector), in a response with a body (in one without, it ends the
    /// response and the connection).
    #[error("both Content-Length and Transfer-Encoding in a response")]
    ContentLengthWithTransferEncoding,
    /// `Transfer-Encoding` names `chunked` after other codings (which would
    /// have to be undone to find the body's end), or twice, or with
    /// parameters (`chunked;x=1`), or nothing, or a coding whose name is
    /// not a token (`"chunked"`).
    #[error("unknown transfer coding {0:?} (only \"chunked\" is supported)")]
    UnknownTransferCoding(String),
    /// A chunk-size line does not start with hex digits, holds a stray byte,
    /// or pads its size (with leading zeros, or whitespace) by more than a
    /// kilobyte.
    #[error("invalid chunk size line")]
    InvalidChunkSize,
    /// A chunk size does not fit in 64 bits.
    #[error("chunk size overflows 64 bits")]
    ChunkSizeOverflow,
    /// A chunk-size line does not end with CRLF.
    #[error("missing CRLF after chunk size")]
    MissingCrlfAfterChunkSize,
    /// Chunk data is not followed by CRLF.
    #[error("missing CRLF after chunk data")]
    MissingCrlfAfterChunkData,
    /// A chunk extension holds a control byte other than HTAB (a NUL, say),
    /// which RFC 9112 §7.1.1 allows nowhere in one, quoted or not. A CR in
    /// one ends the line: not followed by LF, it is
    /// [`MissingCrlfAfterChunkSize`](Self::MissingCrlfAfterChunkSize).
    #[error("control byte in a chunk extension")]
    InvalidChunkExtension,
    /// Chunk extensions add up to more than
    /// [`MAX_CHUNK_EXTENSION_BYTES`](super::MAX_CHUNK_EXTENSION_BYTES).
    #[error("chunk extensions larger than {limit} bytes")]
    ChunkExtensionsTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The trailer section is larger than
    /// [`Limits::max_trailer_bytes`](super::Limits::max_trailer_bytes).
    #[error("trailers larger than {limit} bytes")]
    TrailersTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body is (or declares to be) larger than
    /// [`Limits::max_body_bytes`](super::Limits::max_body_bytes).
    #[error("response body larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The interim (1xx) heads before the final one add up to more than
    /// [`Limits::max_head_bytes`](super::Limits::max_head_bytes).
    #[error("interim (1xx) responses larger than {limit} bytes in all")]
    InterimResponsesTooLarge {
        /// The limit.
        limit: usize,
    },
    /// A `101 Switching Protocols` response, though no upgrade was requested.
    #[error("unexpected 101 Switching Protocols (no upgrade was requested)")]
    SwitchingProtocols,
    /// A `101 Switching Protocols` response to a request that asked for an
    /// upgrade (it carried `Upgrade`, see
    /// [`ResponseDecoder::upgrade_requested`](super::ResponseDecoder::upgrade_requested)):
    /// the server switched, and what follows is the other protocol, which
    /// this decoder does not speak.
    #[error(
        "101 Switching Protocols to the upgrade the request asked for: upgrades are not supported"
    )]
    UpgradeNotSupported,
    /// The peer closed the connection before the response was complete.
    #[error("connection closed inside {stage}")]
    Truncated {
        /// Where the response was cut.
        stage: Stage,
    },
}

/// A request head could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The URI is not absolute with scheme `http` or `https` and a host,
    /// or its path or query is not ASCII (a request-target is: RFC 9112
    /// §3.2).
    #[error("request URI must be absolute with scheme http or https and a host, and ASCII")]
    InvalidUri,
    /// The caller's `Content-Length` header disagrees with the body framing
    /// (or is given more than once, though with the same length).
    #[error("Content-Length header conflicts with the request body framing")]
    ConflictingContentLength,
    /// The caller's `Transfer-Encoding` header disagrees with the body
    /// framing (or says `chunked` more than once).
    #[error("Transfer-Encoding header conflicts with the request body framing")]
    ConflictingTransferEncoding,
    /// The caller gave more than one `Host` header.
    #[error("more than one Host header")]
    DuplicateHost,
    /// A `CONNECT` request: it asks a proxy for a tunnel to an authority
    /// (RFC 9110 §9.3.6), not for a URI's resource; a client makes its
    /// tunnels itself, through the proxy it is given.
    #[error("CONNECT is not sent as a request: tunnels through a proxy are the client's own")]
    Connect,
    /// A `TRACE` request with a body, which a client must not send (RFC
    /// 9110 §9.3.8).
    #[error("a TRACE request has no body")]
    TraceBody,
}
