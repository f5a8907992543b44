//! Size limits applied while decoding a response.

/// Bounds on what a [`ResponseDecoder`](super::ResponseDecoder) accepts.
///
/// Every limit is checked on buffered input too, before the thing it bounds is
/// complete, so a peer cannot make the caller buffer more than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest response head (status line, headers and the empty line), in
    /// bytes. Each head is bounded separately, interim 1xx heads included;
    /// the interim heads of a response are also bounded by it all together
    /// (so are 2,000 `102 Processing` heads). Default: 64 KiB.
    pub max_head_bytes: usize,
    /// Largest number of header fields in one head (and in the trailers).
    /// Default: 100.
    pub max_headers: usize,
    /// Largest body, in decoded bytes (chunk framing excluded); `None` means
    /// unlimited. A `Content-Length` above the limit fails the body at its
    /// first decode, right after the head (which is delivered: a redirect
    /// or a caller may act on it). Default: `None`.
    pub max_body_bytes: Option<u64>,
    /// Largest trailer section after the last chunk, in bytes (including the
    /// final empty line). Default: 16 KiB.
    pub max_trailer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            max_body_bytes: None,
            max_trailer_bytes: 16 * 1024,
        }
    }
}

/// Largest total size of chunk extensions (the ignored `;name=value` parts of
/// chunk-size lines) accepted in one chunked body, in bytes. Like hyper's
/// limit, it stops a peer from sending unbounded framing for little data.
pub const MAX_CHUNK_EXTENSION_BYTES: u64 = 16 * 1024;
