//! Tests: byte literals fed through the states, malformed input, truncation
//! at every point, arbitrary splits, and request encoding.

use http::{HeaderMap, Method, StatusCode, Uri, Version};
use proptest::prelude::*;

use super::*;

mod encoding;
mod malformed;
mod round_trips;
mod splits;
#[path = "../test_pieces.rs"]
mod test_pieces;
mod trickle;

fn limits() -> Limits {
    Limits::default()
}

/// Decodes `bytes` whole (EOF at the end) and expects success.
fn ok(bytes: &[u8]) -> DecodedResponse {
    decode_all(limits(), false, bytes, true).unwrap()
}

/// Decodes `bytes` whole (EOF at the end) and expects an error.
fn err(bytes: &[u8]) -> DecodeError {
    decode_all(limits(), false, bytes, true).unwrap_err()
}

fn err_with(limits: Limits, bytes: &[u8]) -> DecodeError {
    decode_all(limits, false, bytes, true).unwrap_err()
}

fn head_of(decoded: Decoded<'_>) -> ResponseHead {
    match decoded {
        Decoded::Head(h) => h,
        other => panic!("expected a head, got {other:?}"),
    }
}

const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

/// A chunked 200 head, then `body` (chunk framing and all) as it is.
fn with_chunked_head(body: &[u8]) -> Vec<u8> {
    [CHUNKED_HEAD, body].concat()
}
