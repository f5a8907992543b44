//! A sans-IO HTTP/1.1 client codec: bytes in, bytes out. No sockets, no
//! clock, no threads; the caller owns the buffers and the connection. A
//! crate of its own, so that the compiler keeps it that way (it depends on
//! `http`, `httparse` and `bytes`, which `http` brings anyway, alone), and
//! the fuzz target builds on it alone.
//!
//! Requests are written with [`encode_request_head`], then the body as is
//! ([`RequestBody::Length`]) or framed with [`encode_chunk`] and
//! [`encode_last_chunk`] ([`RequestBody::Chunked`]). Responses are read with
//! one [`ResponseDecoder`] per request:
//!
//! ```text
//!                 1xx interim head: Interim(ResponseHead) (101 is an error)
//!                 +---------+
//!                 |         v
//!   new() ---> [ Head ] ----+---- final head ----> Head(ResponseHead)
//!                                                       |
//!                 +-------------------------------------+
//!                 v
//!             [ Body ] --> Body(&[u8]) * --> Trailers(HeaderMap) ? --> Done { keep_alive }
//!              framed by: chunked | Content-Length | close (ended by eof())
//!
//!   NeedMore: feed more bytes (the unconsumed tail plus what was read).
//!   eof(): Done for a close-delimited body, else Truncated { stage }.
//!   Any error: the decoder stays failed and the connection is unusable.
//! ```
//!
//! Body data is borrowed from the input (zero copy) and never reaches past
//! the end of the body: bytes after a response are left unconsumed.
//!
//! # Example: a whole exchange
//!
//! ```
//! use tickless_h1::{
//!     encode_chunk, encode_last_chunk, encode_request_head, Decoded, Limits, RequestBody,
//!     ResponseDecoder,
//! };
//!
//! // The request: a chunked POST.
//! let uri: http::Uri = "http://example.com/upload?x=1".parse().unwrap();
//! let mut headers = http::HeaderMap::new();
//! headers.insert(http::header::EXPECT, "100-continue".parse().unwrap());
//! let mut out = Vec::new();
//! encode_request_head(&http::Method::POST, &uri, &headers, RequestBody::Chunked, &mut out)?;
//! encode_chunk(b"hello", &mut out);
//! encode_last_chunk(&mut out);
//! assert_eq!(
//!     out,
//!     b"POST /upload?x=1 HTTP/1.1\r\nHost: example.com\r\nexpect: 100-continue\r\n\
//!       Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
//! );
//!
//! // The response arrives in two reads: a 100 Continue, then a chunked 200.
//! let reads: [&[u8]; 2] = [
//!     b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chu",
//!     b"nked\r\n\r\n4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nEtag: \"x\"\r\n\r\n",
//! ];
//! let mut decoder = ResponseDecoder::new(Limits::default(), false, true);
//! let mut buf: Vec<u8> = Vec::new(); // unconsumed input
//! let (mut interim, mut status, mut body, mut trailers, mut done) =
//!     (Vec::new(), None, Vec::new(), None, None);
//! for read in reads {
//!     buf.extend_from_slice(read);
//!     loop {
//!         let (consumed, decoded) = decoder.decode(&buf)?;
//!         let stop = match decoded {
//!             Decoded::NeedMore => true,
//!             Decoded::Interim(head) => { interim.push(head.status); false }
//!             Decoded::Head(head) => { status = Some(head.status); false }
//!             Decoded::Body(data) => { body.extend_from_slice(data); false }
//!             Decoded::Trailers(t) => { trailers = Some(t); false }
//!             Decoded::Done { keep_alive } => { done = Some(keep_alive); true }
//!         };
//!         buf.drain(..consumed);
//!         if stop { break; }
//!     }
//! }
//! assert_eq!(interim, [http::StatusCode::CONTINUE]);
//! assert_eq!(status, Some(http::StatusCode::OK));
//! assert_eq!(body, b"wikipedia");
//! assert_eq!(trailers.unwrap()["etag"], "\"x\"");
//! assert_eq!(done, Some(true)); // the connection can be reused
//! assert!(decoder.is_done() && buf.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
// One function may use `unsafe` (`response::to_header_map`: a value
// httparse checked is not checked again), and says so itself; the rest of
// the crate may not.
#![deny(unsafe_code)]

mod body;
mod chunked;
mod decoder;
mod error;
mod limits;
mod request;
mod response;
#[cfg(test)]
mod tests;

pub use decoder::{Decoded, ResponseDecoder};
pub use error::{DecodeError, EncodeError, Stage};
pub use limits::{Limits, MAX_CHUNK_EXTENSION_BYTES};
pub use request::{
    check_request_head, encode_chunk, encode_last_chunk, encode_last_chunk_with,
    encode_request_head, encode_request_head_as, encode_request_head_with, RequestBody,
    RequestTarget,
};
pub use response::{
    content_length, has_connection_token, lists_token, reason_phrase, ResponseHead,
};

/// A whole decoded response: head, body, trailers (if any) and `keep_alive`.
#[doc(hidden)]
pub type DecodedResponse = (ResponseHead, Vec<u8>, Option<http::HeaderMap>, bool);

/// Decodes one response from `bytes` fed whole (request not HEAD unless
/// `is_head`, request keep-alive). With `eof_at_end` the peer is taken to
/// have closed the connection after `bytes`. Bytes after the response are
/// ignored. Input that ends early is [`DecodeError::Truncated`] (with
/// [`Stage::CloseDelimitedBody`] for a close-delimited body without EOF).
/// For tests and fuzzing.
#[doc(hidden)]
pub fn decode_all(
    limits: Limits,
    is_head: bool,
    bytes: &[u8],
    eof_at_end: bool,
) -> Result<DecodedResponse, DecodeError> {
    decode_pieces(limits, is_head, &[bytes], eof_at_end)
}

/// Like [`decode_all`], with the input arriving in `pieces`, fed the way a
/// client does: each piece is appended to the unconsumed tail of the
/// previous ones. For tests and fuzzing.
#[doc(hidden)]
pub fn decode_pieces(
    limits: Limits,
    is_head: bool,
    pieces: &[&[u8]],
    eof_at_end: bool,
) -> Result<DecodedResponse, DecodeError> {
    let mut decoder = ResponseDecoder::new(limits, is_head, true);
    let mut buf: Vec<u8> = Vec::new();
    let mut head = None;
    let mut body = Vec::new();
    let mut trailers = None;
    let mut done = None;
    'pieces: for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            let (consumed, decoded) = decoder.decode(&buf)?;
            let stop = match decoded {
                Decoded::NeedMore => true,
                Decoded::Interim(_) => false,
                Decoded::Head(h) => {
                    head = Some(h);
                    false
                }
                Decoded::Body(data) => {
                    body.extend_from_slice(data);
                    false
                }
                Decoded::Trailers(t) => {
                    trailers = Some(t);
                    false
                }
                Decoded::Done { keep_alive } => {
                    done = Some(keep_alive);
                    true
                }
            };
            buf.drain(..consumed);
            if done.is_some() {
                break 'pieces;
            }
            if stop {
                break;
            }
        }
    }
    let keep_alive = match done {
        Some(keep_alive) => keep_alive,
        // eof() returns `Done` or an error.
        None if eof_at_end => matches!(decoder.eof()?, Decoded::Done { keep_alive: true }),
        None => {
            let stage = decoder.stage().unwrap_or(Stage::Head);
            return Err(DecodeError::Truncated { stage });
        }
    };
    match head {
        Some(head) => Ok((head, body, trailers, keep_alive)),
        None => Err(DecodeError::Truncated { stage: Stage::Head }),
    }
}
