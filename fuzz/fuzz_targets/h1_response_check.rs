//! What the `h1_response` fuzz target checks, shared (by `#[path]`) with the
//! corpus replay test `client/tests/h1_fuzz_corpus.rs`, so both run the same
//! logic on the same bytes.
//!
//! Input format (every byte string is a valid input; missing bytes read as 0):
//!
//! ```text
//! byte 0   flags: bit 0     is_head (the request was HEAD)
//!                 bit 1     eof_at_end (the peer closed after the input)
//!                 bits 2-3  limits: 0 default, 1 small, 2 mid,
//!                           3 chosen by the next 4 bytes (see `limits`)
//!                 bits 4-7  pieces: n = 0..=14 piece lengths follow, the
//!                           rest of the input is the last piece;
//!                           15 = one byte per piece
//! [4 bytes] limits, if bits 2-3 are 3
//! [n bytes] piece lengths, one byte each (clamped to the data left)
//! rest     the response bytes
//! ```
//!
//! A seed `\x02HTTP/1.1 200 OK\r\n...` is thus a response fed whole, then EOF.

use tickless_h1::{decode_all, decode_pieces, DecodedResponse, Limits};

/// One decoded fuzz input.
#[derive(Debug)]
pub(crate) struct Case<'a> {
    /// Limits for both decodes.
    pub limits: Limits,
    /// The request was HEAD.
    pub is_head: bool,
    /// The peer closed the connection after the input.
    pub eof_at_end: bool,
    /// The response bytes, split; their concatenation is `data`.
    pub pieces: Vec<&'a [u8]>,
    /// The response bytes, whole.
    pub data: &'a [u8],
}

/// Splits a fuzz input into its settings and the response bytes.
pub(crate) fn parse(input: &[u8]) -> Case<'_> {
    let (&flags, mut rest) = input.split_first().unwrap_or((&0, &[]));
    let is_head = flags & 1 != 0;
    let eof_at_end = flags & 2 != 0;
    let limits = match (flags >> 2) & 3 {
        0 => Limits::default(),
        1 => Limits {
            max_head_bytes: 64,
            max_headers: 3,
            max_body_bytes: Some(16),
            max_trailer_bytes: 16,
        },
        2 => Limits {
            max_head_bytes: 256,
            max_headers: 8,
            max_body_bytes: Some(1024),
            max_trailer_bytes: 64,
        },
        _ => {
            let mut b = [0u8; 4];
            let n = rest.len().min(4);
            b[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            Limits {
                // 0 included: every head is then too large.
                max_head_bytes: usize::from(b[0]) * 2,
                max_headers: usize::from(b[1] % 16),
                max_body_bytes: (b[2] != 0xff).then_some(u64::from(b[2])),
                max_trailer_bytes: usize::from(b[3]),
            }
        }
    };
    let n_pieces = usize::from(flags >> 4);
    let (data, pieces) = if n_pieces == 15 {
        (rest, rest.chunks(1).collect())
    } else {
        let n = rest.len().min(n_pieces);
        let (lengths, data) = rest.split_at(n);
        let mut pieces = Vec::with_capacity(n + 1);
        let mut left = data;
        for &len in lengths {
            let (piece, tail) = left.split_at(usize::from(len).min(left.len()));
            pieces.push(piece);
            left = tail;
        }
        pieces.push(left);
        (data, pieces)
    };
    Case {
        limits,
        is_head,
        eof_at_end,
        pieces,
        data,
    }
}

/// Decodes the input whole and split. Panics (a fuzz failure) if the decoder
/// panics, if a successful decode breaks a documented guarantee, or if the
/// two decodes end differently (a different response or a different error).
pub(crate) fn check(input: &[u8]) {
    let case = parse(input);
    debug_assert_eq!(case.pieces.concat(), case.data);
    let whole = decode_all(case.limits, case.is_head, case.data, case.eof_at_end);
    let split = decode_pieces(case.limits, case.is_head, &case.pieces, case.eof_at_end);
    if let Ok(decoded) = &whole {
        check_decoded(&case, decoded);
    }
    if let Ok(decoded) = &split {
        check_decoded(&case, decoded);
    }
    // The outcome, errors included, must not depend on where the input was
    // split.
    assert_eq!(whole, split, "whole and split decodes differ for {case:?}");
}

/// Guarantees of a decoded response stated in the `h1` documentation.
fn check_decoded(case: &Case<'_>, (head, body, trailers, _keep_alive): &DecodedResponse) {
    // Interim 1xx heads are skipped (and 101 is an error).
    assert!(!head.status.is_informational(), "1xx final head: {case:?}");
    if case.is_head || matches!(head.status.as_u16(), 204 | 304) {
        assert!(body.is_empty(), "body on a bodiless response: {case:?}");
        assert!(
            trailers.is_none(),
            "trailers on a bodiless response: {case:?}"
        );
    }
    if let Some(limit) = case.limits.max_body_bytes {
        assert!(body.len() as u64 <= limit, "body over the limit: {case:?}");
    }
    // The body is borrowed from the input, never reaching past it.
    assert!(
        body.len() <= case.data.len(),
        "body longer than input: {case:?}"
    );
    // Trailers are only reported when non-empty.
    assert!(
        trailers.as_ref().is_none_or(|t| !t.is_empty()),
        "empty trailers reported: {case:?}"
    );
}
