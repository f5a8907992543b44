#![deny(missing_docs)]
#![forbid(unsafe_code)]
//! Streaming decoders for HTTP `Content-Encoding` (`gzip`, `deflate`, `br`,
//! `zstd`, and stacks of them), sans-IO and with bounded memory.
//!
//! The body reader pushes compressed bytes in, in pieces of any size (down
//! to one byte), and pulls decoded bytes out into a buffer of its own, of
//! any size (down to one byte). The decoder owns no socket, no clock and no
//! growing buffer: whatever the input, it holds a fixed amount of memory
//! (per coding, below), and a limit on the decoded size stops a
//! decompression bomb at the limit without decoding past it.
//!
//! ```text
//!   Content-Encoding: gzip, br        (applied in that order)
//!
//!   wire bytes ──> [ br stage ] ──16 KiB link──> [ gzip stage ] ──> caller's output
//!                   stages[0]                      stages[1]          (≤ limit in all)
//!
//!   new(value)      -> None (identity / absent), a decoder, or UnsupportedCoding
//!   decode(in, out) -> (consumed, produced)      as often as bytes arrive
//!   finish(out)     -> (produced, done)          once the body has ended, until done
//!   any Err         -> final: the body failed; every later call returns it again
//! ```
//!
//! # Example
//!
//! ```
//! # #[cfg(feature = "gzip")] {
//! use tickless_codings::{ContentDecoder, DecoderConfig};
//!
//! // "hello, world", gzipped, arriving in 3-byte pieces.
//! let body = [
//!     0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xcb, 0x48, 0xcd, 0xc9,
//!     0xc9, 0xd7, 0x51, 0x28, 0xcf, 0x2f, 0xca, 0x49, 0x01, 0x00, 0x3a, 0x72, 0xab, 0xff,
//!     0x0c, 0x00, 0x00, 0x00,
//! ];
//! let config = DecoderConfig::new().max_decoded_bytes(10 << 20);
//! let mut decoder = ContentDecoder::with_config("gzip", &config)?
//!     .expect("gzip is not identity");
//! let mut out = [0u8; 4096];
//! let mut decoded = Vec::new();
//! for chunk in body.chunks(3) {
//!     // Feed one chunk, draining the output each time it fills up.
//!     let mut chunk = chunk;
//!     loop {
//!         let (consumed, produced) = decoder.decode(chunk, &mut out)?;
//!         decoded.extend_from_slice(&out[..produced]);
//!         chunk = &chunk[consumed..];
//!         if produced < out.len() {
//!             break; // all of the chunk is taken (invariant 2 below)
//!         }
//!     }
//! }
//! // The body has ended: drain, and check that the stream was complete.
//! loop {
//!     let (produced, done) = decoder.finish(&mut out)?;
//!     decoded.extend_from_slice(&out[..produced]);
//!     if done {
//!         break;
//!     }
//! }
//! assert_eq!(decoded, b"hello, world");
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The contract
//!
//! 1. `decode(input, output)` returns `(consumed, produced)`: it took
//!    `input[..consumed]` and wrote `output[..produced]`.
//! 2. **All input is taken unless the output fills up**: if
//!    `produced < output.len()` then `consumed == input.len()`. Partial
//!    headers and trailers are kept inside (a few bytes, see below), so the
//!    caller never has to glue a leftover tail onto the next chunk. Only when
//!    the output was filled may input remain; call again with the rest.
//! 3. **Decoded bytes may wait inside the decoder**, for lack of output
//!    room: they come out on the next call, including `decode(&[], out)`.
//!    When the body ends, call [`finish`](ContentDecoder::finish) until it
//!    says `done`: that drains them and checks that the stream was
//!    complete (else [`DecodeError::Truncated`]).
//! 4. **The limit is on decoded bytes** ([`DecoderConfig::max_decoded_bytes`]):
//!    exactly `limit` bytes at most are handed out, then the next call
//!    returns [`DecodeError::TooLarge`] (the decoder stops at the first byte
//!    past the limit and decodes nothing further; a call that produced
//!    bytes keeps the error for the next call, which
//!    [`error`](ContentDecoder::error) tells before it is made, and takes
//!    all of its input, never to be decoded, as invariant 2 has it). A body of
//!    exactly `limit` bytes decodes fine. [`total_out`](ContentDecoder::total_out) and
//!    [`total_in`](ContentDecoder::total_in) are there for callers that
//!    count themselves.
//! 5. **Errors are final**: after an `Err`, every call returns the same
//!    error. Bytes a failing call wrote into `output` are not reported (they
//!    come from a stream known to be bad).
//! 6. **Output is provisional until `finish` says `done`**: checksums (gzip's
//!    CRC-32 and length, zlib's Adler-32, zstd's optional checksum) sit at
//!    the end of their streams, so corrupt data can be handed out before the
//!    error. Brotli and raw deflate carry no checksum at all.
//! 7. An empty `output` makes no progress (`decode` may still take header
//!    bytes; `finish` returns `(0, false)`); pass at least one byte.
//!
//! # Decisions
//!
//! * **Parsing.** The field value is the list of codings in the order they
//!   were applied; several field lines form one list
//!   ([`ContentDecoder::from_header_values`]). Tokens are case-insensitive;
//!   `x-gzip` is `gzip`; `identity` is dropped wherever it appears; a value
//!   with nothing else gives `Ok(None)`: not encoded. Any unknown token, or
//!   a known one whose feature is off, refuses the whole value with
//!   [`UnsupportedCoding`] (pass the body through undecoded, as browsers
//!   do), as do more than [`MAX_CODINGS`] (4, as curl) stacked codings.
//! * **Stacked codings are decoded**, last applied first, each stage feeding
//!   the next through a 16 KiB buffer. The chain costs one buffer per extra
//!   coding and nothing when there is one coding. In a chain every
//!   intermediate stage is limited too, to `limit + limit/1024 + 4 KiB`
//!   bytes (the slack covers the few bytes a coding adds to incompressible
//!   data), so an inner stream cannot make the decoder churn through an
//!   unbounded intermediate body that yields nothing.
//! * **`deflate`** is zlib (RFC 9110 §8.4.1.2) when the first two bytes are a
//!   valid zlib header, raw deflate otherwise, as browsers and curl accept.
//!   Raw deflate has no header or checksum, so a plain body mislabelled
//!   `deflate` may decode to some garbage before it fails (or, rarely,
//!   "succeeds" and then fails as trailing data).
//! * **`gzip` streams of several members are decoded whole**, member after
//!   member, each checked against its own CRC-32 and length, as `gzip -d`,
//!   Go's `net/http` and Python's urllib3 do. (curl and the browsers stop
//!   after the first member: curl fails on the bytes that follow, Chromium
//!   drops them silently, and so does Firefox's converter as last read.)
//!   Zstd bodies of several frames,
//!   skippable frames included, are likewise decoded whole, as RFC 8878
//!   allows and libzstd does.
//! * **Trailing data** (bytes after a complete stream that are not another
//!   gzip member or zstd frame) is an error by default,
//!   [`TrailingData::Reject`], as in curl and Go: it most often means broken
//!   framing upstream, and for raw deflate it is what exposes a mislabelled
//!   plain body. [`TrailingData::Ignore`] discards it instead, as the
//!   browsers and urllib3 do.
//! * **An empty body is a valid empty stream** for every coding (servers
//!   send `Content-Encoding: gzip` on empty bodies, and curl and Go accept
//!   it). A body with at least one byte must be a complete
//!   stream, or `finish` reports [`DecodeError::Truncated`].
//! * **Windows.** Brotli's window can be 16 MiB by spec and zstd's far more,
//!   so both are capped by [`DecoderConfig::max_window_bytes`]; the default
//!   is 16 MiB for brotli (every RFC 7932 stream) and 8 MiB for zstd (the
//!   RFC 9659 limit for HTTP, as the browsers enforce). Zstd frames are
//!   checked on their declared window, before anything is allocated; brotli
//!   on the ring buffer it really needs (it grows with the output, up to
//!   the window), so a small response with a large declared window still
//!   decodes. Both report [`DecodeError::WindowTooLarge`].
//!
//! # Memory
//!
//! Per stage, beyond a few hundred bytes of bookkeeping (this module keeps
//! at most 18 header bytes and an 8-byte trailer of its own). "Measured" is
//! the peak the counting-allocator test (`tests/memory.rs`) sees on 1 GiB
//! bombs stopped at a 1 MiB limit:
//!
//! | coding | state | measured | capped by |
//! | --- | --- | --- | --- |
//! | gzip, deflate | one miniz_oxide inflater: 32 KiB window + tables, fixed | 42 KiB | the format (32 KiB window) |
//! | br | a ring buffer of up to the window (2^10..2^24 bytes), grown as the output needs it, 1.5x while it regrows (old and new buffer); Huffman tables, typically a few KB, at most about 2.7 MB by the format's limits (256 trees of each kind) | 1.0 MiB (1 MiB window), 16.0 MiB (16 MiB window), 12 KiB when refused | `max_window_bytes`, on the ring buffer actually allocated |
//! | zstd | libzstd's context + one block buffer + `min(window, content size)` + one block: window + about 480 KB | 1.5 MiB (1 MiB window), 8.5 MiB (8 MiB window), 0 when refused | `max_window_bytes` (default 8 MiB), on each frame's declared window |
//!
//! plus one 16 KiB link buffer per stacked coding. None of it is
//! allocated before the first byte of the body: until then a decoder holds
//! its list of codings and a few words per stage (a response's head is
//! read long before its body, which may never be). Worst cases with the
//! default windows: gzip/deflate 43 KB, br about 27 MB (24 MiB of ring
//! buffer while regrowing to 16 MiB, plus tables), zstd about 8.5 MB; a
//! chain adds its stages up.
//!
//! # Crates
//!
//! No decompressor is written here; this module adds the HTTP framing,
//! limits and policies. Build times are clean builds of each crate's tree
//! alone on the 2-core development machine, debug / release.
//!
//! * **gzip / deflate: `flate2` with its default pure-Rust backend
//!   (`miniz_oxide`)**: the standard Rust deflate crate (rust-lang
//!   organisation), no C toolchain, 0.8 s / 1.3 s. Its low-level
//!   `Decompress` is driven directly (raw or zlib), with the gzip member
//!   framing done here, as async-compression (reqwest's decoder) does;
//!   flate2's own gzip readers are `Read`-based and cannot be fed pieces.
//!   The `zlib-rs` backend inflates faster but builds in 3 s / 3 s, and its
//!   speed does not matter at network rates.
//! * **br: `brotli-decompressor`** (Dropbox): the decoder half of the
//!   `brotli` crate, pure Rust, safe code by default, fuzzed, 1.0 s / 2.3 s
//!   (the full `brotli` crate, with its encoder: 2.7 s / 4.0 s). Its
//!   pluggable allocator is what lets the ring buffer be capped.
//! * **zstd: `zstd`** (libzstd 1.5.7 through `zstd-sys`, with
//!   `default-features = false` and `with-rust-allocator`): the reference
//!   implementation, with a true push/pull streaming API and
//!   `ZSTD_d_windowLogMax`. It needs a C compiler and builds in 5 s / 11 s,
//!   which is why the feature is off by default. `ruzstd` (pure Rust,
//!   0.8 s / 1.7 s) was weighed and rejected: its decoder needs a whole
//!   block (up to 128 KiB) of input before it makes progress and reads
//!   frame headers from a `Read`, so it cannot take one byte at a time
//!   without more buffering here; its latest release (0.9) needs Rust 1.87,
//!   above our 1.85; and its README puts it 1.4x to 3.5x slower.
//!   `zstd`'s own `rust-backend` (libzstd-rs-sys) is still a pre-release.
//!
//! # Driving it from a body reader of `Bytes` chunks
//!
//! Keep the chunk and advance it by `consumed` (no copy); decode into a
//! reusable buffer and hand out `buf[..produced]`, for instance by
//! splitting it off a `BytesMut`. Per invariant 2, a chunk is finished as
//! soon as a call returns with the output not full (unless the decoder
//! kept an [`error`](ContentDecoder::error) for its next call: make it at
//! once, rather than wait for the next chunk); otherwise call again with
//! the rest of the chunk. When the transfer framing says the body has
//! ended, call `finish` until `done`. `tests/bytes_body.rs` shows the loop.

mod coding;
mod error;
mod stage;

#[cfg(feature = "brotli")]
mod brotli_dec;
#[cfg(feature = "deflate")]
mod deflate;
#[cfg(any(feature = "gzip", feature = "deflate"))]
mod flate;
#[cfg(feature = "gzip")]
mod gzip;
#[cfg(feature = "zstd")]
mod zstd_dec;

#[cfg(test)]
mod tests;

pub use coding::{Coding, UnsupportedCoding, MAX_CODINGS};
pub use error::DecodeError;

use stage::Stage;
use std::fmt;
use std::sync::OnceLock;

/// Size of the buffer between two stacked codings.
const LINK_BUFFER: usize = 16 * 1024;
/// Brotli's largest window (RFC 7932: WBITS <= 24).
const BROTLI_MAX_WINDOW: u64 = 1 << 24;
/// The largest zstd window RFC 9659 lets HTTP senders use.
const ZSTD_DEFAULT_MAX_WINDOW: u64 = 8 << 20;
/// The smallest `max_window_bytes` honoured.
const MIN_WINDOW: u64 = 64 * 1024;

/// The `Accept-Encoding` value for the codings this build decodes, such as
/// `gzip, deflate, br, zstd` (`identity` if it decodes none).
pub fn accept_encoding() -> &'static str {
    static VALUE: OnceLock<String> = OnceLock::new();
    VALUE.get_or_init(|| {
        let tokens: Vec<&str> = Coding::ALL
            .iter()
            .filter(|c| c.is_enabled())
            .map(|c| c.token())
            .collect();
        if tokens.is_empty() {
            "identity".to_string()
        } else {
            tokens.join(", ")
        }
    })
}

/// What to do with bytes that follow a complete stream and do not begin
/// another gzip member or zstd frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrailingData {
    /// Fail with [`DecodeError::TrailingData`] (the default; curl and Go do
    /// this).
    #[default]
    Reject,
    /// Discard them, and everything after them (the browsers do this).
    Ignore,
}

/// Limits and policies for a [`ContentDecoder`].
///
/// ```
/// use tickless_codings::{DecoderConfig, TrailingData};
/// let config = DecoderConfig::new()
///     .max_decoded_bytes(64 << 20)
///     .max_window_bytes(4 << 20)
///     .trailing_data(TrailingData::Ignore);
/// # let _ = config;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecoderConfig {
    limit: Option<u64>,
    trailing: TrailingData,
    max_window: Option<u64>,
}

impl DecoderConfig {
    /// No limit on the decoded size, trailing data rejected, the default
    /// windows (16 MiB brotli, 8 MiB zstd).
    pub const fn new() -> Self {
        DecoderConfig {
            limit: None,
            trailing: TrailingData::Reject,
            max_window: None,
        }
    }

    /// Fail with [`DecodeError::TooLarge`] rather than produce more than
    /// `limit` decoded bytes in all (the client's `max_body_bytes`, applied
    /// to the decoded body).
    pub const fn max_decoded_bytes(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// What to do with bytes after a complete stream (default:
    /// [`TrailingData::Reject`]).
    pub const fn trailing_data(mut self, policy: TrailingData) -> Self {
        self.trailing = policy;
        self
    }

    /// The largest history window a brotli or zstd stream may use, in bytes
    /// (at least 64 KiB is honoured). Default: 16 MiB for brotli (all of RFC
    /// 7932), 8 MiB for zstd (RFC 9659). gzip and deflate always use 32 KiB.
    ///
    /// For zstd this is checked against the window each frame declares. For
    /// brotli it caps the ring buffer the decoder actually allocates, which
    /// grows with the output up to the declared window, so only streams that
    /// both declare a larger window and produce more than this much fail.
    pub const fn max_window_bytes(mut self, bytes: u64) -> Self {
        self.max_window = Some(bytes);
        self
    }

    #[cfg_attr(not(feature = "brotli"), allow(dead_code))]
    fn brotli_window(&self) -> u64 {
        match self.max_window {
            Some(w) if w < MIN_WINDOW => MIN_WINDOW,
            Some(w) => w,
            None => BROTLI_MAX_WINDOW,
        }
    }

    #[cfg_attr(not(feature = "zstd"), allow(dead_code))]
    fn zstd_window(&self) -> u64 {
        match self.max_window {
            Some(w) if w < MIN_WINDOW => MIN_WINDOW,
            Some(w) => w,
            None => ZSTD_DEFAULT_MAX_WINDOW,
        }
    }
}

/// The buffer between two stacked stages: `buf[start..end]` is waiting for
/// the next stage.
struct Link {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Link {
    fn new() -> Self {
        Link {
            buf: vec![0; LINK_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Moves the waiting bytes to the front when the tail is used up.
    fn make_room(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    fn space(&mut self) -> &mut [u8] {
        &mut self.buf[self.end..]
    }
}

/// A streaming decoder for one response body's `Content-Encoding`.
///
/// See the [module docs](self) for the contract; in short: [`decode`]
/// as bytes arrive, [`finish`] when the body ends, any error is final.
///
/// [`decode`]: ContentDecoder::decode
/// [`finish`]: ContentDecoder::finish
pub struct ContentDecoder {
    /// In the order applied (the header's order).
    codings: Vec<Coding>,
    /// In decoding order: `stages[0]` takes the wire bytes.
    stages: Vec<Stage>,
    /// `links[k]` carries `stages[k]`'s output to `stages[k + 1]`. Made
    /// with the first byte, as the stages' codecs are (see [`Self::pump`]):
    /// empty until then.
    links: Vec<Link>,
    limit: Option<u64>,
    /// The limit on each intermediate stage's output.
    inner_limit: Option<u64>,
    total_in: u64,
    total_out: u64,
    error: Option<DecodeError>,
    finished: bool,
}

impl fmt::Debug for ContentDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentDecoder")
            .field("codings", &self.codings)
            .field("limit", &self.limit)
            .field("total_in", &self.total_in)
            .field("total_out", &self.total_out)
            .field("error", &self.error)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl ContentDecoder {
    /// A decoder for a `Content-Encoding` value, with the default
    /// [`DecoderConfig`] (no size limit: prefer [`with_config`]).
    ///
    /// `Ok(None)` means the body is not encoded (empty value, or only
    /// `identity`); [`UnsupportedCoding`] that it cannot be decoded here.
    ///
    /// [`with_config`]: ContentDecoder::with_config
    pub fn new(content_encoding: &str) -> Result<Option<Self>, UnsupportedCoding> {
        Self::with_config(content_encoding, &DecoderConfig::new())
    }

    /// A decoder for a `Content-Encoding` value, with limits and policies.
    pub fn with_config(
        content_encoding: &str,
        config: &DecoderConfig,
    ) -> Result<Option<Self>, UnsupportedCoding> {
        Self::from_header_values([content_encoding.as_bytes()], config)
    }

    /// A decoder for all the `Content-Encoding` field lines of a response,
    /// which together form one list (RFC 9110 §5.3), for example
    /// `headers.get_all(CONTENT_ENCODING).iter().map(|v| v.as_bytes())`
    /// with the `http` crate.
    pub fn from_header_values<'a, I>(
        values: I,
        config: &DecoderConfig,
    ) -> Result<Option<Self>, UnsupportedCoding>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let codings = coding::parse(values)?;
        if codings.is_empty() {
            return Ok(None);
        }
        let stages = codings
            .iter()
            .rev()
            .map(|&coding| Stage::new(coding, config).ok_or(UnsupportedCoding::Disabled { coding }))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(ContentDecoder {
            codings,
            stages,
            links: Vec::new(),
            limit: config.limit,
            inner_limit: config
                .limit
                .map(|l| l.saturating_add(l / 1024).saturating_add(4096)),
            total_in: 0,
            total_out: 0,
            error: None,
            finished: false,
        }))
    }

    /// Decodes `input` into `output`: returns `(consumed, produced)`.
    ///
    /// Takes all of `input` unless `output` fills up; may produce output
    /// from earlier input even when `input` is empty. After
    /// [`finish`](Self::finish) has returned `done`, any further input is
    /// trailing data.
    pub fn decode(
        &mut self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(usize, usize), DecodeError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let result = if self.finished {
            self.stages[0].after_finish(input)
        } else {
            self.pump(input, output)
        };
        self.account(result)
    }

    /// Ends the input: drains the decoded bytes still inside into `output`
    /// and returns `(produced, done)`.
    ///
    /// `done == false` means `output` filled up: call again. `done == true`
    /// means the whole body was decoded and every stream was complete;
    /// later calls return `(0, true)`. A stream cut short is
    /// [`DecodeError::Truncated`].
    pub fn finish(&mut self, output: &mut [u8]) -> Result<(usize, bool), DecodeError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.finished {
            return Ok((0, true));
        }
        if output.is_empty() {
            return Ok((0, false));
        }
        let result = self.pump(&[], output);
        let (_, produced) = self.account(result)?;
        // Full output, or the limit reached with an error kept for the next
        // call: not done.
        if produced == output.len() || self.error.is_some() {
            return Ok((produced, false));
        }
        // Nothing moves any more and there was room: every stage must be at
        // the end of a complete stream.
        if let Some(stage) = self.stages.iter().find(|s| !s.is_complete()) {
            let e = DecodeError::Truncated {
                coding: stage.coding(),
            };
            self.error = Some(e.clone());
            return Err(e);
        }
        debug_assert!(self.links.iter().all(|l| l.data().is_empty()));
        self.finished = true;
        Ok((produced, true))
    }

    /// The codings, in the order they were applied (the header's order).
    pub fn codings(&self) -> &[Coding] {
        &self.codings
    }

    /// The limit on decoded bytes, if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Encoded bytes consumed so far.
    pub fn total_in(&self) -> u64 {
        self.total_in
    }

    /// Decoded bytes produced so far (never more than the limit).
    pub fn total_out(&self) -> u64 {
        self.total_out
    }

    /// Whether [`finish`](Self::finish) has returned `done`.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The error the decoder has met, if any: every later call returns it.
    ///
    /// A call that handed out bytes may have met it already (past the
    /// limit, those bytes the last within it) and kept it for the next
    /// call, possibly with its output not full and all of its input
    /// taken — when invariant 2 says to wait for more input. A caller
    /// that would wait (the bytes of a stream may be long to come) checks
    /// here first.
    pub fn error(&self) -> Option<&DecodeError> {
        self.error.as_ref()
    }

    /// Counts a successful call, or keeps its error for good.
    fn account(
        &mut self,
        result: Result<(usize, usize), DecodeError>,
    ) -> Result<(usize, usize), DecodeError> {
        match result {
            Ok((consumed, produced)) => {
                self.total_in += consumed as u64;
                self.total_out += produced as u64;
                Ok((consumed, produced))
            }
            Err(e) => {
                self.error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Moves bytes through the stages until `output` is full or nothing
    /// moves any more.
    ///
    /// Going over the limit is found by a one-byte probe once the limit is
    /// reached. If this call already produced bytes, they are returned and
    /// [`DecodeError::TooLarge`] is kept for the next call, so that exactly
    /// `limit` bytes are handed out in all; the call takes all of `input`
    /// then, whatever the codecs took of it.
    ///
    /// The links between stacked stages are made here with the body's
    /// first byte, as each stage makes its codec with its own (see
    /// "Memory" in the crate docs): not before.
    fn pump(&mut self, input: &[u8], output: &mut [u8]) -> Result<(usize, usize), DecodeError> {
        let n = self.stages.len();
        if self.links.len() + 1 < n {
            if input.is_empty() {
                // No byte yet, and none now: nothing to decode.
                return Ok((0, 0));
            }
            self.links = (1..n).map(|_| Link::new()).collect();
        }
        let (mut consumed, mut produced) = (0usize, 0usize);
        let mut too_large = None;
        'sweep: loop {
            let mut progress = false;
            for k in 0..n {
                let (before, after) = self.links.split_at_mut(k);
                let src: &[u8] = match before.last() {
                    None => &input[consumed..],
                    Some(link) => link.data(),
                };
                let stage = &mut self.stages[k];
                let (c, p) = if let Some(link) = after.first_mut() {
                    // An intermediate stage, into its link.
                    link.make_room();
                    let (c, p) = stage.run(src, link.space())?;
                    link.end += p;
                    if self.inner_limit.is_some_and(|max| stage.produced > max) {
                        too_large = Some(self.limit.unwrap_or(u64::MAX));
                    }
                    (c, p)
                } else {
                    // The last stage, into the caller's output.
                    let room = &mut output[produced..];
                    let (c, p) = match self.limit {
                        None => stage.run(src, room)?,
                        Some(limit) => {
                            let left = limit - (self.total_out + produced as u64);
                            let cap = room.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                            let (mut c, p) = if cap > 0 {
                                stage.run(src, &mut room[..cap])?
                            } else {
                                (0, 0)
                            };
                            if p as u64 == left {
                                // At the limit: one byte more is too much.
                                let mut probe = [0u8; 1];
                                let (c2, p2) = stage.run(&src[c..], &mut probe)?;
                                c += c2;
                                if p2 > 0 {
                                    too_large = Some(limit);
                                }
                            }
                            (c, p)
                        }
                    };
                    produced += p;
                    (c, p)
                };
                match before.last_mut() {
                    None => consumed += c,
                    Some(link) => link.start += c,
                }
                progress |= c > 0 || p > 0;
                if too_large.is_some() {
                    break 'sweep;
                }
            }
            if !progress || produced == output.len() || n == 1 {
                break;
            }
        }
        if let Some(limit) = too_large {
            let e = DecodeError::TooLarge { limit };
            if produced == 0 {
                return Err(e);
            }
            self.error = Some(e);
            // The rest of the input will never be decoded (the error is
            // final): taken, as ignored trailing data is, so that this call
            // too keeps invariant 2 — its output need not be full.
            consumed = input.len();
        }
        Ok((consumed, produced))
    }
}
