//! Decompression: which responses are decoded ([`decoder_for`]), and
//! [`Decoding`], which turns a body's chunks as they come into decoded
//! chunks (on the reader's thread, never a loop's), with the decoded size
//! bounded by `max_body_bytes`. The codecs are the `tickless-codings`
//! crate's.

use crate::error::Error;
use crate::exchange::is_decoded;
use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH};
use tickless_codings::{ContentDecoder, DecodeError, DecoderConfig, UnsupportedCoding};

/// Decoded bytes handed out per chunk, at most.
const OUT_CHUNK: usize = 32 * 1024;

/// Decoded chunks shorter than this are copied out of the output buffer,
/// which stays for the next; longer ones take it with them. A chunk split
/// off the buffer keeps all of it alive while it is held: a body flushed
/// in small pieces (events, log lines) would hold 32 KiB per piece.
const COPY_BELOW: usize = OUT_CHUNK / 2;

/// The `Accept-Encoding` the client sends: the codings compiled in.
pub(crate) fn accept_encoding() -> &'static str {
    tickless_codings::accept_encoding()
}

/// The decoder for a response, if it is to be decoded: it has a body (not
/// an answer to HEAD, not 1xx, 204 or 304), a whole one (not a 206), and a
/// `Content-Encoding` of codings this build decodes. Then
/// `Content-Encoding` and `Content-Length` (which describe the encoded
/// body) leave `headers`. A coding this build does not know leaves the body
/// as it came, `Content-Encoding` kept; more codings stacked than are
/// decoded is [`Error::TooManyCodings`] (from `remote`).
pub(crate) fn decoder_for(
    method: &http::Method,
    status: http::StatusCode,
    headers: &mut http::HeaderMap,
    max_decoded: Option<u64>,
    remote: impl FnOnce() -> String,
) -> Result<Option<ContentDecoder>, Error> {
    if !is_decoded(method, status, headers) {
        return Ok(None);
    }
    let mut config = DecoderConfig::new();
    if let Some(max) = max_decoded {
        config = config.max_decoded_bytes(max);
    }
    let values = headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .map(|v| v.as_bytes());
    match ContentDecoder::from_header_values(values, &config) {
        Ok(Some(decoder)) => {
            headers.remove(CONTENT_ENCODING);
            headers.remove(CONTENT_LENGTH);
            Ok(Some(decoder))
        }
        // Only `identity`: nothing to undo.
        Ok(None) => {
            headers.remove(CONTENT_ENCODING);
            Ok(None)
        }
        // Codings the client asked for, stacked past the cap: handed over
        // still encoded, the body would reach a caller who asked for it
        // decoded with nothing but a header to say it is not. curl refuses
        // such a response, and so does the client.
        Err(UnsupportedCoding::TooMany { count }) => Err(Error::TooManyCodings {
            remote: remote(),
            count,
        }),
        // A coding the client did not ask for (unknown, or not compiled
        // in): as it came, `Content-Encoding` kept, as the browsers do.
        Err(_unsupported) => Ok(None),
    }
}

/// A body being decoded: raw chunks go in ([`feed`](Self::feed)), decoded
/// chunks come out ([`next`](Self::next), then [`finish`](Self::finish) once
/// the raw body has ended).
pub(crate) struct Decoding {
    decoder: ContentDecoder,
    /// Raw bytes fed and not yet taken by the decoder.
    input: Bytes,
    out: BytesMut,
    /// The decoder has more to say with no more raw input: its last call
    /// filled the output (it may hold more decoded bytes), or met an error
    /// it keeps for its next call (past the limit, after handing out the
    /// last bytes within it). That call is made before any more raw input
    /// is waited for: a stream's next bytes may be long to come.
    more: bool,
    /// The server, for errors.
    remote: String,
}

impl Decoding {
    pub(crate) fn new(decoder: ContentDecoder, remote: String) -> Decoding {
        Decoding {
            decoder,
            input: Bytes::new(),
            out: BytesMut::new(),
            more: false,
            remote,
        }
    }

    /// Gives the decoder the next raw chunk (after [`next`](Self::next) has
    /// said it needs one).
    pub(crate) fn feed(&mut self, raw: Bytes) {
        debug_assert!(self.input.is_empty());
        self.input = raw;
    }

    /// Decoded bytes from what was fed, or `None` if it needs another raw
    /// chunk. Not before the decoder has had room to spare: what it holds
    /// of a piece the server flushed must not wait for the next raw chunk,
    /// which a stream (events, a long poll) may not send for a long time.
    pub(crate) fn next(&mut self) -> Result<Option<Bytes>, Error> {
        while !self.input.is_empty() || self.more {
            self.out.resize(OUT_CHUNK, 0);
            let decoded = self.decoder.decode(&self.input, &mut self.out);
            let (consumed, produced) = decoded.map_err(|e| self.error(e))?;
            self.more = produced == OUT_CHUNK || self.decoder.error().is_some();
            let _ = self.input.split_to(consumed);
            if produced > 0 {
                return Ok(Some(self.take(produced)));
            }
        }
        Ok(None)
    }

    /// The raw body has ended: the decoded bytes still inside, one chunk at
    /// a time, then `None` once the stream is known complete.
    pub(crate) fn finish(&mut self) -> Result<Option<Bytes>, Error> {
        if let Some(chunk) = self.next()? {
            return Ok(Some(chunk));
        }
        if self.decoder.is_finished() {
            return Ok(None);
        }
        self.out.resize(OUT_CHUNK, 0);
        let finished = self.decoder.finish(&mut self.out);
        let (produced, _done) = finished.map_err(|e| self.error(e))?;
        Ok((produced > 0).then(|| self.take(produced)))
    }

    /// The `produced` bytes at the front of the output buffer, as a chunk
    /// that holds no more memory than twice its length.
    fn take(&mut self, produced: usize) -> Bytes {
        if produced < COPY_BELOW {
            return Bytes::copy_from_slice(&self.out[..produced]);
        }
        self.out.truncate(produced);
        self.out.split().freeze()
    }

    fn error(&self, error: DecodeError) -> Error {
        match error {
            DecodeError::TooLarge { limit } => Error::BodyTooLarge {
                remote: self.remote.clone(),
                limit,
            },
            source => Error::Decode {
                remote: self.remote.clone(),
                source,
            },
        }
    }
}
